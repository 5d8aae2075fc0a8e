"""`memlab bench perf`: how fast one retrieval, one turn and ingestion are at a given store size.

For each size N one user holds N records and three other users hold 10 % more beside them (so the
partitioning is exercised). One retrieval is what the engine does per turn: BM25 top-k + dense
top-k inside the user's partition, then forgetting-curve ranking (R, T, F, S) over the union.
Records and vectors are synthetic but shaped like real ones: Zipf-distributed words from a seeded
vocabulary, vectors clustered around topics. Store back ends are looked up by name in
`STORE_FACTORIES`, so another back end can be compared side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from engine.core.forgetting import decay, importance, relevance, score, tag_union
from engine.core.records import TAGS, MemoryRecord

__all__ = ["STORE_FACTORIES", "run_perf", "perf_main", "format_table", "synthetic_corpus"]

DIM = 384
BATCH = 500
#: Forgetting-curve knobs of the default preset (engine.config.MemoryConfig) used for the ranking.
RANK = {"tau": 43200.0, "c": 0.5, "alpha": 0.33, "beta": 0.33, "gamma": 0.34, "w0": 0.1, "w1": 0.8, "w2": 0.1}
BENCH_NOW = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)


def _sqlite_factory(tmpdir: str, dim: int):
    from engine.stores.sqlite import SQLiteStore

    return SQLiteStore(os.path.join(tmpdir, "bench.db"), dim=dim, embedder_name="synthetic")


def _postgres_factory(tmpdir: str, dim: int):
    """A throwaway schema (dropped on close) on MEMLAB_PG_DSN, else the local pgserver in build/."""
    import uuid

    from engine.stores.postgres import PostgresStore

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    return PostgresStore(os.environ.get("MEMLAB_PG_DSN"), dim=dim, embedder_name="synthetic", schema=schema,
                         temporary=True)


#: name -> factory(tmpdir, dim) -> Store. Add "postgres" here (or register at import) to compare.
STORE_FACTORIES: dict[str, Callable[[str, int], Any]] = {"sqlite": _sqlite_factory, "postgres": _postgres_factory}


class synthetic_corpus:  # noqa: N801 - reads as a function at call sites
    """Seeded sentences and topic-clustered unit vectors."""

    def __init__(self, *, dim: int = DIM, seed: int = 0, vocab: int = 6000, topics: int = 300):
        self.rng = np.random.default_rng(seed)
        self.dim = dim
        syll = ["ka", "lo", "mi", "ner", "tas", "vi", "qu", "ren", "sol", "tra", "pe", "dun", "shi", "mor", "gal",
                "fe", "zor", "bli", "an", "ox"]
        words = set()
        while len(words) < vocab:
            n = int(self.rng.integers(2, 4))
            words.add("".join(self.rng.choice(syll, size=n)))
        self.words = np.array(sorted(words))
        ranks = np.arange(1, vocab + 1, dtype=float)
        p = 1 / ranks**1.07
        p[:150] = 0.0  # the most frequent words of real text are stopwords, which never reach the index query
        self.cdf = np.cumsum(p / p.sum())
        self.rng.shuffle(self.words)
        c = self.rng.standard_normal((topics, dim)).astype(np.float32)
        self.centroids = c / np.linalg.norm(c, axis=1, keepdims=True)

    def sentence(self, n_min: int = 8, n_max: int = 20) -> str:
        n = int(self.rng.integers(n_min, n_max + 1))
        idx = np.minimum(np.searchsorted(self.cdf, self.rng.random(n)), len(self.words) - 1)
        return " ".join(self.words[idx])

    def vectors(self, n: int) -> np.ndarray:
        topic = self.rng.integers(0, len(self.centroids), size=n)
        noise = self.rng.standard_normal((n, self.dim)).astype(np.float32) / np.sqrt(self.dim)
        v = self.centroids[topic] + noise  # same-topic cosine ~0.5, unrelated ~0
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def records(self, user_id: str, n: int, now: datetime) -> list[MemoryRecord]:
        out = []
        ages = self.rng.uniform(0, 90 * 86400, size=n)
        counts = self.rng.poisson(0.7, size=n)
        for i in range(n):
            k = int(self.rng.integers(1, 3))
            tags = tuple(dict.fromkeys(self.rng.choice(TAGS, size=k).tolist()))
            created = now - timedelta(seconds=float(ages[i]))
            out.append(
                MemoryRecord(
                    user_id=user_id,
                    content=self.sentence(),
                    memory_type="fact",
                    tags=tags,
                    keywords=tuple(self.sentence(1, 3).split()),
                    created_at=created,
                    last_reinforced_at=created + timedelta(seconds=float(ages[i]) / 2) if counts[i] else None,
                    strengthen_count=int(counts[i]),
                )
            )
        return out


def retrieve_and_rank(store, user_id: str, query: str, qvec: np.ndarray, *, k: int, now: datetime, top_k: int = 4):
    """One retrieval: BM25 + dense inside the user's partition, then S = αR + βT + γF over the union."""
    bm = store.search_bm25(user_id, query, k=k)
    dense = store.search_dense(user_id, qvec, k=k)
    cos = {rid: s for rid, s in dense}
    union = list(dict.fromkeys([rid for rid, _ in dense] + [rid for rid, _ in bm]))
    if not union:
        return []
    missing = [rid for rid in union if rid not in cos]
    if missing:
        found = store.vectors(user_id, missing)
        if found:  # one matrix for all of them: converting vectors one by one cost more than the search
            mat = np.asarray(list(found.values()), dtype=np.float32)
            sims = mat @ qvec / (np.linalg.norm(mat, axis=1) * np.linalg.norm(qvec) + 1e-12)
            cos.update(zip(found, (float(x) for x in sims), strict=True))
    recs = {r.id: r for r in store.get_records(user_id, union)}
    ids = [rid for rid in union if rid in recs]
    R = relevance([cos[rid] for rid in ids])
    age = np.array([(now - recs[rid].reinforced_at).total_seconds() for rid in ids])
    T = decay(age, tau=RANK["tau"], c=RANK["c"])
    u = np.array([tag_union(recs[rid].tags) for rid in ids])
    n = np.array([recs[rid].strengthen_count for rid in ids])
    F = importance(u, n, w0=RANK["w0"], w1=RANK["w1"], w2=RANK["w2"])
    S = score(R, T, F, alpha=RANK["alpha"], beta=RANK["beta"], gamma=RANK["gamma"])
    order = np.argsort(-np.asarray(S))[:top_k]
    return [ids[i] for i in order]


def _ms(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values) * 1000.0, q)), 3)


def _file_bytes(path: str | None) -> int | None:
    if not path or path == ":memory:" or not os.path.exists(path):
        return None
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def _measure_size(name: str, n: int, *, dim: int, queries: int, other_users: int, seed: int, k: int,
                  turn_fn, now: datetime, progress) -> dict[str, Any]:
    corpus = synthetic_corpus(dim=dim, seed=seed)
    with tempfile.TemporaryDirectory(prefix="memlab-bench-") as tmpdir:
        store = STORE_FACTORIES[name](tmpdir, dim)
        try:
            extra = max(1, n // 10)
            others = [f"other-{i}" for i in range(other_users)]
            main_vecs = []
            t_ingest, done = 0.0, 0
            for start in range(0, n, BATCH):
                m = min(BATCH, n - start)
                batch = [("bench-user", m)] + [(o, max(0, extra * m // n // max(1, other_users))) for o in others]
                for uid, cnt in batch:
                    if cnt == 0:
                        continue
                    recs, vecs = corpus.records(uid, cnt, now), corpus.vectors(cnt)
                    t0 = time.perf_counter()
                    store.add_records(recs, vecs)
                    t_ingest += time.perf_counter() - t0
                    done += cnt
                    if uid == "bench-user":
                        main_vecs.append(vecs)
                if progress:
                    progress(f"{name} N={n}: {start + m}/{n} records of the user")
            main = np.concatenate(main_vecs)
            if hasattr(store, "conn") and getattr(store, "path", ":memory:") != ":memory:":
                store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            size = _file_bytes(getattr(store, "path", None))
            qtexts = [corpus.sentence(3, 6) for _ in range(queries)]
            picks = corpus.rng.integers(0, n, size=queries)
            qvecs = main[picks] + 0.6 * corpus.rng.standard_normal((queries, dim)).astype(np.float32) / np.sqrt(dim)
            qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
            for i in range(min(5, queries)):  # warm the caches
                retrieve_and_rank(store, "bench-user", qtexts[i], qvecs[i], k=k, now=now)
            lat, recall = [], []
            ids_in_order = [r.id for r in store.records("bench-user")]
            for text, q in zip(qtexts, qvecs, strict=True):
                t0 = time.perf_counter()
                retrieve_and_rank(store, "bench-user", text, q, k=k, now=now)
                lat.append(time.perf_counter() - t0)
                got = {rid for rid, _ in store.search_dense("bench-user", q, k=k)}
                exact = {ids_in_order[i] for i in np.argsort(-(main @ q))[:k]}
                recall.append(len(got & exact) / k)
            turn = None
            if turn_fn is not None:
                tl = []
                for text in qtexts[: max(1, queries // 2)]:
                    t0 = time.perf_counter()
                    turn_fn(store, "bench-user", text)
                    tl.append(time.perf_counter() - t0)
                turn = _ms(tl, 50)
            total = store.count_records()
        finally:
            store.close()
    return {
        "records_user": n,
        "records_total": int(total),
        "retrieve_p50_ms": _ms(lat, 50),
        "retrieve_p95_ms": _ms(lat, 95),
        "turn_p50_ms": turn,
        "ingest_per_s": round(done / t_ingest, 1) if t_ingest else None,
        "bytes_per_record": None if size is None else round(size / max(1, total), 1),
        "dense_recall_at_k": round(float(np.mean(recall)), 4),
    }


def _versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    try:
        from engine.stores import sqlite as sqlite_store

        store = sqlite_store.SQLiteStore(":memory:", dim=8)
        try:
            out["sqlite"] = store.conn.execute("SELECT sqlite_version()").fetchone()[0]
            out["sqlite_vec"] = store.conn.execute("SELECT vec_version()").fetchone()[0]
            out["sqlite_driver"] = sqlite_store.driver_name()
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - metadata only
        out["sqlite_error"] = str(exc)
    out["numpy"] = np.__version__
    return out


def _git_commit() -> str | None:
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=os.path.dirname(os.path.abspath(__file__)))
    except (OSError, subprocess.SubprocessError):
        return None
    return (res.stdout.strip() or None) if res.returncode == 0 else None


def run_perf(
    *,
    sizes: Sequence[int] = (1000, 10000, 100000),
    stores: Sequence[str] = ("sqlite",),
    repeats: int = 50,
    other_users: int = 3,
    seed: int = 0,
    k: int = 50,
    dim: int = DIM,
    turn_fn: Callable[[Any, str, str], Any] | None = None,
    progress: Callable[[str], None] | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    """Measure every store at every size; `repeats` is the number of timed queries per size.

    `turn_fn(store, user_id, text)` runs one engine turn on the built store (timed as turn_p50_ms).
    `at` stamps the run (the caller's clock); records' ages are relative to a fixed bench time.
    """
    unknown = [s for s in stores if s not in STORE_FACTORIES]
    if unknown:
        from engine.core.errors import ConfigError

        raise ConfigError(f"unknown store {unknown}; choose from {', '.join(STORE_FACTORIES)}")
    config = {
        "sizes": [int(s) for s in sizes],
        "stores": list(stores),
        "dim": dim,
        "k": k,
        "queries": repeats,
        "other_users": other_users,
        "other_fraction": 0.1,
        "seed": seed,
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "versions": _versions(),
        "git_commit": _git_commit(),
        "run_at": None if at is None else at.isoformat(),
    }
    per_store: dict[str, Any] = {}
    for name in stores:
        per_store[name] = {"sizes": {}}
        for n in sizes:
            per_store[name]["sizes"][str(int(n))] = _measure_size(
                name, int(n), dim=dim, queries=repeats, other_users=other_users, seed=seed, k=k,
                turn_fn=turn_fn, now=BENCH_NOW, progress=progress,
            )
    return {"config": config, "sizes": per_store[stores[0]]["sizes"], "stores": per_store}


def format_table(result: dict[str, Any]) -> str:
    cfg = result["config"]
    v = cfg["versions"]
    lines = [
        f"memlab bench perf: dim {cfg['dim']}, k {cfg['k']}, {cfg['queries']} queries, "
        f"+10% records over {cfg['other_users']} other users, {cfg['cores']} cores, python {v.get('python')}, "
        f"sqlite {v.get('sqlite')} ({v.get('sqlite_driver')}), sqlite-vec {v.get('sqlite_vec')}",
        f"{'store':<9}{'N':>8}{'p50 ms':>9}{'p95 ms':>9}{'turn ms':>9}{'ingest/s':>10}{'B/rec':>8}{'recall':>8}",
    ]
    for name, data in result["stores"].items():
        for n, row in data["sizes"].items():
            turn = "-" if row["turn_p50_ms"] is None else f"{row['turn_p50_ms']:.1f}"
            bpr = "-" if row["bytes_per_record"] is None else f"{row['bytes_per_record']:.0f}"
            lines.append(
                f"{name:<9}{n:>8}{row['retrieve_p50_ms']:>9.2f}{row['retrieve_p95_ms']:>9.2f}{turn:>9}"
                f"{row['ingest_per_s']:>10.0f}{bpr:>8}{row['dense_recall_at_k']:>8.3f}"
            )
    return "\n".join(lines)


def scripted_turn_fn() -> Callable[[Any, str, str], Any]:
    """One whole turn (stamp, gate, retrieve, inject, reinforce, scripted chat) on a built store."""
    from engine.core.clock import VirtualClock
    from engine.memory.engine import MemoryEngine
    from engine.roles.embeddings import HashEmbeddings

    engines: dict[int, Any] = {}

    def turn(store: Any, user_id: str, text: str) -> Any:
        engine = engines.get(id(store))
        if engine is None or engine.store is not store:
            engine = MemoryEngine(store=store, clock=VirtualClock(BENCH_NOW), embedder=HashEmbeddings(store.dim))
            engines[id(store)] = engine
        result = engine.turn(user_id, "bench-session", text)
        engine.clock.advance(35)
        return result

    return turn


def perf_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memlab bench perf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="records of the measured user, comma-separated")
    parser.add_argument("--store", default="sqlite", help=f"back ends, comma-separated ({', '.join(STORE_FACTORIES)})")
    parser.add_argument("--queries", type=int, default=50, help="timed retrievals per size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", dest="json_out", help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes {args.sizes!r}: write whole numbers separated by commas, e.g. 1000,10000")
    stores = [s.strip() for s in args.store.split(",") if s.strip()]
    if any(s not in STORE_FACTORIES for s in stores):
        parser.error(f"--store {args.store!r}: choose from {', '.join(STORE_FACTORIES)}")
    from engine.core.clock import SystemClock

    result = run_perf(sizes=sizes, stores=stores, repeats=args.queries, seed=args.seed, at=SystemClock().now(),
                      turn_fn=scripted_turn_fn(), progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(format_table(result))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2, ensure_ascii=False)
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(perf_main())
