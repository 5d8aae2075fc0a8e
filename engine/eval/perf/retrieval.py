"""Retrieval at a store size: `MemoryEngine.retrieve` exactly as a turn calls it.

For a size N, one user holds N records and three other users hold 10 % more beside them (so
the partitioning is exercised), all written by bulk `store.add_records` of the synthetic corpus.
Each timed query is `engine.retrieve(user, text, session_id=..., log=True)`: query parsing (the
scripted parser), the query embedding, the configured paths (BM25, dense, dimension match) and the
floor candidates, fusion, the forgetting-curve ranking with the live-window check, and the scoring
log, the same call `MemoryEngine.turn` makes. Beside it: the store's BM25 path alone on the
corpus's most common word, and the ingest rate when each batch is hash-embedded first. Nothing here retrieves by other means; the store's
dense search is only compared with exact numpy cosine to report its recall.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.errors import ConfigError
from engine.eval.perf.corpus import BENCH_NOW, STORE_FACTORIES, bulk_loading, synthetic_corpus
from engine.eval.perf.stages import stage_medians
from engine.eval.runinfo import resident_memory
from engine.core.records import record_text
from engine.memory.engine import MemoryEngine
from engine.roles.embeddings import HashEmbeddings, embed_texts

__all__ = ["BATCH", "RECORD_VECTORS", "USER", "check_record_vectors", "fill_store", "stored_vectors", "SESSION", "bench_config",
           "checkpoint", "measure_size", "percentile_ms"]

BATCH = 500
USER = "bench-user"
SESSION = "bench-session"
WARMUP = 5
#: Records embedded and written for the hash-embedder ingest rate (a new store of this many at most).
HASH_INGEST_MAX = 10000
#: Largest N given the keyword measure over four equal users (a second store of N records to build).
FOUR_USERS_MAX = 200000


def percentile_ms(seconds: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(seconds) * 1000.0, q)), 3)


def _file_bytes(path: str | None) -> int | None:
    if not path or path == ":memory:" or not os.path.exists(path):
        return None
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def _dir_bytes(path: str | None) -> int | None:
    """Bytes of the files in a directory (the SQLite store's saved vector copies), None without one."""
    if not path or not os.path.isdir(path):
        return None
    return sum(e.stat().st_size for e in os.scandir(path) if e.is_file())


#: What the stored records' vectors are: the corpus's synthetic dense vectors (cheap to make at any
#: size: the cost of a dense embedder's vectors), or each record's text hash-embedded by the same
#: embedder as the questions (the offline default's sparse vectors, as a hash-embedded user has them).
RECORD_VECTORS = ("synthetic", "hash")


def check_record_vectors(record_vectors: str) -> None:
    """ConfigError unless `record_vectors` is one of RECORD_VECTORS."""
    if record_vectors not in RECORD_VECTORS:
        raise ConfigError(f"unknown record vectors {record_vectors!r}; choose from {', '.join(RECORD_VECTORS)}")


def stored_vectors(corpus: synthetic_corpus, records: list, record_vectors: str,
                   embedder: HashEmbeddings | None = None) -> np.ndarray:
    """The vectors stored for `records` (RECORD_VECTORS): the corpus's next synthetic ones, or
    their texts embedded by `embedder` (a HashEmbeddings of the corpus's size when not given)."""
    check_record_vectors(record_vectors)
    if record_vectors == "synthetic":
        return corpus.vectors(len(records))
    return np.asarray(embed_texts(embedder or HashEmbeddings(corpus.dim), [record_text(r) for r in records]),
                      dtype=np.float32)


def fill_store(store: Any, corpus: synthetic_corpus, n: int, other_users: int, progress, label: str,
               record_vectors: str = "synthetic"):
    """Bulk-load N records for the user and 10 % more over the others; (user's vectors, their ids, rows,
    seconds).
    Only `add_records` is timed (a hash embedding is made before it)."""
    embedder = HashEmbeddings(corpus.dim)
    extra = max(1, n // 10)
    others = [f"other-{i}" for i in range(other_users)]
    main_vecs, main_ids, t_ingest, done = [], [], 0.0, 0
    with bulk_loading(store) as bulk:  # its index build counts as ingest time
        for start in range(0, n, BATCH):
            m = min(BATCH, n - start)
            batch = [(USER, m)] + [(o, max(0, extra * m // n // max(1, other_users))) for o in others]
            for uid, cnt in batch:
                if cnt == 0:
                    continue
                recs = corpus.records(uid, cnt, BENCH_NOW)
                vecs = stored_vectors(corpus, recs, record_vectors, embedder)
                t0 = time.perf_counter()
                added = store.add_records(recs, vecs)
                t_ingest += time.perf_counter() - t0
                done += cnt
                if uid == USER:
                    main_vecs.append(vecs)
                    main_ids.extend(r.id for r in added)
            if progress:
                progress(f"{label}: {start + m}/{n} records of the user")
    return np.concatenate(main_vecs), main_ids, done, t_ingest + bulk.seconds


def _dense_recall(store: Any, corpus: synthetic_corpus, main: np.ndarray, ids_in_order: list[int],
                  picks: np.ndarray, k: int) -> float:
    """The store's dense top-k against exact cosine, for query vectors near the user's records
    (`main`, whose ids `ids_in_order` are: the records are not read back, which would build every one
    of them in this process, a warm cache the timed retrievals must not get)."""
    dim = main.shape[1]
    qvecs = main[picks] + 0.6 * corpus.rng.standard_normal((len(picks), dim)).astype(np.float32) / np.sqrt(dim)
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    kk = min(k, len(ids_in_order))
    out = []
    for q in qvecs:
        got = {rid for rid, _ in store.search_dense(USER, q, k=kk)}
        exact = {ids_in_order[i] for i in np.argsort(-(main @ q))[:kk]}
        out.append(len(got & exact) / kk)
    return round(float(np.mean(out)), 4)


def checkpoint(store: Any) -> None:
    """Fold a file SQLite store's WAL into the database after a bulk load (both retrieval
    measurements time reads of the loaded file, not of a WAL the size of the load)."""
    if hasattr(store, "conn") and getattr(store, "path", ":memory:") != ":memory:":
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _time_retrievals(engine: MemoryEngine, texts: list[str]) -> tuple[list[float], list[dict[str, float]], list[int]]:
    """Each timed retrieval's seconds, its stages (`Retrieval.stages`) and its candidates."""
    for text in texts[:WARMUP]:  # warm the caches
        engine.retrieve(USER, text, session_id=SESSION, log=True)
    lat, stages, cands = [], [], []
    for text in texts:
        t0 = time.perf_counter()
        got = engine.retrieve(USER, text, session_id=SESSION, log=True)
        lat.append(time.perf_counter() - t0)
        stages.append(got.stages)
        cands.append(len(got.ranking.cands))
    return lat, stages, cands


def common_word(corpus: synthetic_corpus) -> str:
    """The corpus's most frequent indexed word (about 3 % of the records hold it)."""
    return str(corpus.words[int(np.argmax(np.diff(corpus.cdf, prepend=0.0)))])


def _time_keyword(store: Any, word: str, k: int, repeats: int) -> dict[str, float]:
    """The store's BM25 path alone on a common word: what one user's postings of it cost."""
    for _ in range(min(WARMUP, repeats)):
        store.search_bm25(USER, word, k=k)
    lat = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        store.search_bm25(USER, word, k=k)
        lat.append(time.perf_counter() - t0)
    return {"keyword_common_p50_ms": percentile_ms(lat, 50), "keyword_common_p95_ms": percentile_ms(lat, 95)}


def _first_after_open(name: str, tmpdir: str, dim: int, config: MemoryConfig, text: str) -> dict[str, float | None]:
    """A new store object on the built file (its caches empty: vectors, lengths, postings, records by id):
    the open, and the first retrieval on it, as a freshly started process would make them (the OS page
    cache is warm; records this process built before are reused by their rows, which spares at most the
    building of the ~150 read, ~1 ms)."""
    if name != "sqlite":  # a postgres bench schema is dropped with its store
        return {"open_ms": None, "first_retrieve_ms": None}
    t0 = time.perf_counter()
    store = STORE_FACTORIES[name](tmpdir, dim)
    t1 = time.perf_counter()
    try:
        engine = MemoryEngine(config, store=store, clock=VirtualClock(BENCH_NOW), embedder=HashEmbeddings(dim))
        engine.retrieve(USER, text, session_id=SESSION + "-cold", log=True)
        t2 = time.perf_counter()
    finally:
        store.close()
    return {"open_ms": round((t1 - t0) * 1000, 1), "first_retrieve_ms": round((t2 - t1) * 1000, 1)}


def _keyword_four_users(name: str, tmpdir: str, corpus: synthetic_corpus, dim: int, n: int, k: int,
                        repeats: int) -> dict[str, float]:
    """The BM25 path on a common word when four users hold N/4 records each (the measured user is a
    quarter of the index, not ~91 % as in the main layout, so per-user postings show)."""
    path = os.path.join(tmpdir, "four-users")
    os.makedirs(path, exist_ok=True)
    store = STORE_FACTORIES[name](path, dim)
    users = [USER] + [f"other-{i}" for i in range(3)]
    try:
        for start in range(0, max(1, n // 4), BATCH):
            m = min(BATCH, n // 4 - start)
            for uid in users:
                store.add_records(corpus.records(uid, m, BENCH_NOW), corpus.vectors(m))
        got = _time_keyword(store, common_word(corpus), k, repeats)
    finally:
        store.close()
    return {"keyword_4users_p50_ms": got["keyword_common_p50_ms"], "keyword_4users_p95_ms": got["keyword_common_p95_ms"]}


def _hash_ingest_rate(name: str, tmpdir: str, corpus: synthetic_corpus, dim: int, n: int) -> float:
    """Records per second into a new store when each batch is embedded with the hash embedder first."""
    path = os.path.join(tmpdir, "hash-ingest")
    os.makedirs(path, exist_ok=True)
    store = STORE_FACTORIES[name](path, dim)
    embedder, seconds = HashEmbeddings(dim), 0.0
    try:
        with bulk_loading(store) as bulk:
            for start in range(0, n, BATCH):
                recs = corpus.records(USER, min(BATCH, n - start), BENCH_NOW)
                t0 = time.perf_counter()
                store.add_records(recs, stored_vectors(corpus, recs, "hash", embedder))
                seconds += time.perf_counter() - t0
        seconds += bulk.seconds
    finally:
        store.close()
    return round(n / seconds, 1) if seconds else 0.0


def measure_size(name: str, n: int, *, config: MemoryConfig, dim: int, queries: int, other_users: int, seed: int,
                 turn_fn: Callable[[Any, str, str], Any] | None, progress: Callable[[str], None] | None,
                 record_vectors: str = "synthetic") -> dict[str, Any]:
    """One store back end at one size: retrieval latency, whole-turn latency, ingest rate, size."""
    corpus = synthetic_corpus(dim=dim, seed=seed)
    with tempfile.TemporaryDirectory(prefix="memlab-bench-") as tmpdir:
        store = STORE_FACTORIES[name](tmpdir, dim)
        try:
            main, main_ids, done, t_ingest = fill_store(store, corpus, n, other_users, progress, f"{name} N={n}",
                                                   record_vectors)
            checkpoint(store)
            size = _file_bytes(getattr(store, "path", None))
            total = store.count_records()
            texts = [corpus.sentence(3, 6) for _ in range(queries)]
            recall = _dense_recall(store, corpus, main, main_ids, corpus.rng.integers(0, n, size=queries),
                                   config.candidate_k)
            main = main_ids = None  # the harness's copy of the user's vectors (1.5 GB at 1M) is not the store's memory
            engine = MemoryEngine(config, store=store, clock=VirtualClock(BENCH_NOW), embedder=HashEmbeddings(dim))
            lat, stages, cands = _time_retrievals(engine, texts)
            turn = None
            if turn_fn is not None:
                tl = []
                for text in texts[: max(1, queries // 2)]:
                    t0 = time.perf_counter()
                    turn_fn(store, USER, text)
                    tl.append(time.perf_counter() - t0)
                turn = percentile_ms(tl, 50)
            keyword = _time_keyword(store, common_word(corpus), config.candidate_k, queries)
            rss = resident_memory()
        finally:
            store.close()
        copies = _dir_bytes(str(getattr(store, "path", "")) + ".vectors")  # beside the file, never the truth
        cold = _first_after_open(name, tmpdir, dim, config, texts[-1])
        if 4 <= n <= FOUR_USERS_MAX:
            keyword.update(_keyword_four_users(name, tmpdir, corpus, dim, n, config.candidate_k, queries))
        hash_ingest = _hash_ingest_rate(name, tmpdir, corpus, dim, min(n, HASH_INGEST_MAX))
    return {
        "records_user": n,
        "records_total": int(total),
        "retrieve_p50_ms": percentile_ms(lat, 50),
        "retrieve_p95_ms": percentile_ms(lat, 95),
        "stages_p50_ms": stage_medians(stages),
        "candidates_p50": int(np.median(cands)),
        "turn_p50_ms": turn,
        "ingest_per_s": round(done / t_ingest, 1) if t_ingest else None,
        "bytes_per_record": None if size is None else round(size / max(1, total), 1),
        "vector_copy_bytes_per_record": None if copies is None else round(copies / max(1, total), 1),
        "dense_recall_at_k": recall,
        **keyword,
        "ingest_hash_embed_per_s": hash_ingest,
        **cold,
        **rss,
    }


def scripted_turn_fn() -> Callable[[Any, str, str], Any]:
    """One whole turn (stamp, gate, retrieve, inject, reinforce, scripted chat) on a built store."""
    engines: dict[int, Any] = {}

    def turn(store: Any, user_id: str, text: str) -> Any:
        engine = engines.get(id(store))
        if engine is None or engine.store is not store:
            engine = MemoryEngine(store=store, clock=VirtualClock(BENCH_NOW), embedder=HashEmbeddings(store.dim))
            engines[id(store)] = engine
        result = engine.turn(user_id, SESSION + "-turns", text)
        engine.clock.advance(35)
        return result

    return turn


def bench_config(k: int | None = None, overrides: dict[str, Any] | None = None) -> MemoryConfig:
    """The engine config measured: the default preset with `overrides` (`--set`), `candidate_k = k` when given."""
    cfg = MemoryConfig.from_preset(**dict(overrides or {}))
    return cfg.with_overrides(candidate_k=int(k)) if k is not None else cfg
