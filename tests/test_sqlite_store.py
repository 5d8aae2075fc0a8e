"""SQLiteStore: the conformance suite in memory and on a file, plus SQLite-only behaviour."""

from __future__ import annotations

import contextlib
import os
from datetime import timedelta

import numpy as np
import pytest
from store_conformance import T0, StoreConformance, msg, rec, unit

from engine.core.errors import ConfigError, StoreError
from engine.stores.base import open_store
from engine.stores.sqlite import MIGRATIONS, SQLiteStore


class TestSQLiteMemoryConformance(StoreConformance):
    def make_store(self, tmp_path, *, dim):
        return SQLiteStore(":memory:", dim=dim)


class TestSQLiteFileConformance(StoreConformance):
    def make_store(self, tmp_path, *, dim):
        return SQLiteStore(str(tmp_path / "memlab.db"), dim=dim)


def test_memory_store_is_one_database_across_threads(store_factory):
    """Reference defect 3: two connections to ':memory:' saw two databases."""
    import threading

    store = store_factory()
    store.add_message(msg("u", "s", "from main"))
    seen = []
    t = threading.Thread(target=lambda: seen.extend(store.messages("u")))
    t.start()
    t.join()
    assert [m.content for m in seen] == ["from main"]


def test_open_store_dispatches_to_sqlite(tmp_path):
    store = open_store(str(tmp_path / "x.db"), dim=16)
    try:
        assert isinstance(store, SQLiteStore) and store.dim == 16
    finally:
        store.close()


def test_everything_persists_across_reopen(store_factory, rng):
    store = store_factory("p.db")
    v = unit(rng, 3, 32)
    m = store.add_message(msg("u", "s", "hello"))
    rs = store.add_records([rec("u", "green tea"), rec("u", "北京朝阳区"), rec("u", "old fact")], v)
    store.supersede("u", rs[2].id, rs[0].id, T0)
    store.set_cursor("u", "s", "sliced", m.id)
    store.set_kv("u", "weights", {"alpha": 0.4})
    store.close()
    again = store_factory("p.db")
    assert [x.to_dict() for x in again.messages("u")] == [m.to_dict()]
    assert [r.id for r in again.records("u")] == [rs[0].id, rs[1].id]
    assert again.get_cursor("u", "s", "sliced") == m.id and again.get_kv("u", "weights") == {"alpha": 0.4}
    assert [i for i, _ in again.search_bm25("u", "北京", k=3)] == [rs[1].id]
    assert again.search_dense("u", v[0], k=1)[0][0] == rs[0].id
    assert again.search_dense("u", v[2], k=3, include_invalid=True)[0][0] == rs[2].id
    assert again.add_message(msg("u", "s", "next")).id > m.id


def test_file_store_uses_wal(store_factory):
    store = store_factory("w.db")
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert store.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_reopen_with_another_dim_names_the_fix(store_factory):
    store_factory("d.db", dim=32).close()
    with pytest.raises(ConfigError, match="dim=32.*replace_vectors"):
        store_factory("d.db", dim=16)


def test_corrupt_file_is_a_store_error(tmp_path):
    path = tmp_path / "bad.db"
    path.write_bytes(b"this is not an sqlite database at all" * 200)
    with pytest.raises(StoreError, match="bad.db.*(corrupt|not a memlab)"):
        SQLiteStore(str(path), dim=16)


def test_foreign_sqlite_file_is_refused(tmp_path):
    import sqlite3

    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="not a memlab store"):
        SQLiteStore(str(path), dim=16)
    con = sqlite3.connect(path)
    assert con.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]  # refused before any DDL
    con.close()


def test_migrations_are_idempotent(store_factory):
    store = store_factory("m.db")
    store.add_message(msg("u", "s", "kept"))
    assert store.schema_version == len(MIGRATIONS)
    store.close()
    for _ in range(2):
        again = store_factory("m.db")
        assert again.schema_version == len(MIGRATIONS)
        assert [m.content for m in again.messages("u")] == ["kept"]
        again.close()


def test_locked_database_is_a_store_error(store_factory):
    writer = store_factory("l.db", busy_timeout_ms=50)
    other = store_factory("l.db", busy_timeout_ms=50)
    with writer.transaction():
        writer.add_message(msg("u", "s", "holding the lock"))
        with pytest.raises(StoreError, match="locked.*busy_timeout_ms"):
            other.add_message(msg("u", "s", "blocked"))
    assert len(other.messages("u")) == 1


def test_closed_store_says_so(store_factory):
    store = store_factory()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.messages("u")


def test_forget_user_leaves_no_bytes_in_the_file(store_factory, rng, tmp_path):
    store = store_factory("f.db")
    marker = "zqxmarker7781"
    vec = unit(rng, 1, 32)
    store.add_message(msg("victim-" + marker, "s", f"my secret is {marker}"))
    store.add_records([rec("victim-" + marker, f"secret {marker} lives here", keywords=(marker,))], vec)
    store.append_event(__import__("engine.core.records", fromlist=["Event"]).Event(
        user_id="victim-" + marker, session_id="s", kind="extract", at=T0, payload={"text": marker}))
    store.add_records([rec("bystander", "nothing to see")], unit(rng, 1, 32))
    store.close()
    store = store_factory("f.db")  # the bytes went to the main file at checkpoint
    assert marker.encode() in (tmp_path / "f.db").read_bytes() + _wal(tmp_path / "f.db")
    store.forget_user("victim-" + marker)
    data = (tmp_path / "f.db").read_bytes() + _wal(tmp_path / "f.db")
    assert marker.encode() not in data
    assert vec[0].tobytes() not in data
    assert store.count_records("bystander") == 1


def test_statement_journals_stay_in_memory_and_keyword_search_survives_forget_user(store_factory, rng, monkeypatch):
    """Statement journals (a savepoint's page pre-images) are kept in memory, not spilled to a new
    temporary file per transaction; forget_user (deletes, merge, VACUUM) and a bulk load's full-text
    merge run with them in files and put that back, and the keyword path's temporary fts5vocab
    table, dropped by the switch, is made again."""
    store = store_factory("f.db")
    store.add_records([rec("victim", "the parcel went to the depot"),
                       rec("bystander", "the parcel arrived on monday"),
                       rec("bystander", "monday parcel tracking number")], unit(rng, 3, 32))
    assert store.conn.execute("PRAGMA temp_store").fetchone()[0] == 2  # MEMORY
    before = store.search_bm25("bystander", "parcel monday", k=5)
    assert len(before) == 2
    store.forget_user("victim")
    assert store.conn.execute("PRAGMA temp_store").fetchone()[0] == 2
    assert store.search_bm25("bystander", "parcel monday", k=5) == before
    seen = []  # the rewrites themselves journal to files: switched for forget_user and a bulk load's merge
    real = type(store)._temp_on_disk

    @contextlib.contextmanager
    def watched(self):
        with real(self):
            seen.append(self.conn.execute("PRAGMA temp_store").fetchone()[0])
            yield

    monkeypatch.setattr(type(store), "_temp_on_disk", watched)
    store.forget_user("bystander")
    with store.bulk_load():
        store.add_records([rec("late", "a parcel for later")], unit(rng, 1, 32))
    assert seen == [1, 1]  # FILE inside both blocks
    assert store.conn.execute("PRAGMA temp_store").fetchone()[0] == 2
    assert store.search_bm25("late", "parcel", k=5)


def _wal(path) -> bytes:
    wal = str(path) + "-wal"
    return open(wal, "rb").read() if os.path.exists(wal) else b""


def test_large_partition_uses_rescored_quantised_knn(store_factory, rng):
    """Above exact_knn_max the KNN is coarse (bits) then exact cosine on the candidates."""
    store = store_factory(dim=64, exact_knn_max=100, rescore_factor=4)
    v = unit(rng, 600, 64)
    rs = store.add_records([rec("u", f"r{i}") for i in range(600)], v)
    ids = np.array([r.id for r in rs])
    recall = []
    for q in unit(rng, 10, 64):
        hits = store.search_dense("u", q, k=10)
        cos = v @ q
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        for rid, s in hits:  # scores are exact cosines
            assert s == pytest.approx(float(cos[np.flatnonzero(ids == rid)[0]]), abs=1e-5)
        recall.append(len({i for i, _ in hits} & set(ids[np.argsort(-cos)[:10]].tolist())) / 10)
    # a stored vector is always found first
    assert store.search_dense("u", v[123], k=5)[0][0] == rs[123].id
    assert np.mean(recall) >= 0.5  # random 64-d vectors are the hard case for sign bits
    store.supersede("u", rs[123].id, rs[0].id, T0 + timedelta(days=1))
    assert rs[123].id not in [i for i, _ in store.search_dense("u", v[123], k=5)]


def test_stats_reports_counts_and_embedder(store_factory, rng):
    store = store_factory("s.db")
    store.add_records([rec("u", "a")], unit(rng, 1, 32))
    st = store.stats()
    assert st["counts"]["records"] == 1 and st["dim"] == 32 and st["embedder_name"] == "hash" and st["bytes"] > 0


def test_perf_bench_smoke_shape():
    from engine.eval.perf import format_table, run_perf

    calls = []
    result = run_perf(sizes=(300,), repeats=3, k=10, dim=32, turn_fn=lambda store, user, text: calls.append(text))
    row = result["sizes"]["300"]
    assert result["stores"]["sqlite"]["sizes"]["300"] is row
    assert row["records_user"] == 300 and row["records_total"] > 300  # other users beside
    assert row["retrieve_p50_ms"] > 0 and row["retrieve_p95_ms"] >= row["retrieve_p50_ms"]
    assert row["ingest_per_s"] > 0 and row["bytes_per_record"] > 0 and calls
    assert row["dense_recall_at_k"] == 1.0  # small partitions are searched exactly
    assert result["config"]["dim"] == 32 and "sqlite_vec" in result["config"]["versions"]
    assert "300" in format_table(result)


# -- bounded reads: the work of a bounded query does not grow with the history ----------------------


def _history(store, n: int, rng):
    """A user with `n` turns in session "s" (alternating roles), other sessions, another user,
    `n` events and `n` records (half superseded)."""
    from engine.core.records import Event

    with store.transaction():
        for i in range(n):
            at = T0 + timedelta(seconds=i)
            store.add_message(msg("u", "s", f"m{i}", at, role="user" if i % 2 == 0 else "assistant"))
            store.add_message(msg("u", f"o{i % 7}", f"o{i}", at))
            store.add_message(msg("v", "s", f"v{i}", at))
            store.append_event(Event(user_id="u", session_id="s", kind="gate" if i % 3 == 0 else "extract", at=at))
    rs = store.add_records([rec("u", f"r{i}") for i in range(n)], unit(rng, n, 8))
    for i in range(0, n - 1, 2):
        store.supersede("u", rs[i].id, rs[i + 1].id, T0)
    tail = store.messages("u", session_id="s", newest_first=True, limit=3)
    store.set_cursor("u", "s", "extract", tail[-1].id)
    return rs


BOUNDED_READS = {
    "session tail": lambda s, rs: s.messages("u", session_id="s", newest_first=True, limit=5),
    "session tail, one role": lambda s, rs: s.messages("u", session_id="s", newest_first=True, limit=5, roles=["user"]),
    "session tail, two roles": lambda s, rs: s.messages("u", session_id="s", newest_first=True, limit=5,
                                                        roles=["user", "assistant"]),
    "session tail, absent role": lambda s, rs: s.messages("u", session_id="s", newest_first=True, limit=5, roles=["tool"]),
    "user tail": lambda s, rs: s.messages("u", newest_first=True, limit=5),
    "user tail, one role": lambda s, rs: s.messages("u", newest_first=True, limit=5, roles=["user"]),
    "past the cursor": lambda s, rs: s.messages("u", session_id="s", after_id=s.get_cursor("u", "s", "extract"), limit=5),
    "count past the cursor": lambda s, rs: s.count_messages("u", session_id="s",
                                                            after_id=s.get_cursor("u", "s", "extract")),
    "pending sessions": lambda s, rs: s.pending_sessions("u"),
    "sessions": lambda s, rs: s.sessions("u"),
    "count current records": lambda s, rs: s.count_records("u", include_invalid=False),
    "count all records": lambda s, rs: s.count_records(),
    "newest records": lambda s, rs: s.records("u", newest_first=True, limit=5),
    "newest records with history": lambda s, rs: s.records("u", include_invalid=True, newest_first=True, limit=5),
    "records after a cursor": lambda s, rs: s.records("u", include_invalid=True, after_id=rs[-10].id, limit=5),
    "current records after a cursor": lambda s, rs: s.records("u", after_id=rs[-10].id, limit=5),
    "newest events of a kind": lambda s, rs: s.events(user_id="u", kind="gate", newest_first=True, limit=5),
    "newest events": lambda s, rs: s.events(user_id="u", newest_first=True, limit=5),
    "newest events of a session": lambda s, rs: s.events(user_id="u", session_id="s", newest_first=True, limit=5),
}


def _vm_steps(store, fn) -> int:
    """SQLite virtual-machine steps `fn` costs: proportional to the rows and index entries it reads."""
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    store.conn.set_progress_handler(tick, 1)
    try:
        fn()
    finally:
        store.conn.set_progress_handler(None, 1)
    return steps[0]


def test_bounded_reads_cost_the_same_at_any_history_length(store_factory, rng):
    """Each bounded read costs the same at 40 and at 2,000 turns (a scan would cost 50x more)."""
    small, big = store_factory(dim=8), store_factory(dim=8)
    rs_small, rs_big = _history(small, 40, rng), _history(big, 2000, rng)
    for name, read in BOUNDED_READS.items():
        assert read(small, rs_small) == read(small, rs_small)  # deterministic (and warms caches)
        read(big, rs_big)
        cost_small = _vm_steps(small, lambda read=read: read(small, rs_small))
        cost_big = _vm_steps(big, lambda read=read: read(big, rs_big))
        assert cost_big <= cost_small * 1.2 + 20, f"{name}: {cost_small} steps at 40 turns, {cost_big} at 2,000"


def test_bm25_reads_the_users_own_postings_and_a_key_collision_never_leaks(store_factory, rng, monkeypatch):
    from engine.core.text import user_key
    from engine.stores.sqlite import rows, search

    store = store_factory("k.db")
    mine = store.add_records([rec("alice", f"my order number {i}") for i in range(5)], unit(rng, 5, 32))
    store.add_records([rec("bob", "order order order") for _ in range(60)], unit(rng, 60, 32))
    terms = {t for (t,) in store.conn.execute("SELECT body FROM records_fts")} - {None}
    assert terms == set()  # contentless: the text is stored once, in records
    store.conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, 'records_fts', 'row')")
    docs = dict(store.conn.execute("SELECT term, doc FROM temp.v").fetchall())
    assert docs[user_key("alice") + "order"] == 5 and docs[user_key("bob") + "order"] == 60 and "order" not in docs
    assert {i for i, _ in store.search_bm25("alice", "order", k=3)} <= {r.id for r in mine}
    # two users whose keys collide share doclists; bob's better matches crowd the top, alice still gets hers
    monkeypatch.setattr(rows, "user_key", lambda u: "collision0")
    monkeypatch.setattr(search, "user_key", lambda u: "collision0")
    a2 = store.add_records([rec("alice", f"order {i}") for i in range(3)], unit(rng, 3, 32))
    store.add_records([rec("bob", "order order order order") for _ in range(80)], unit(rng, 80, 32))
    hits = store.search_bm25("alice", "order", k=3)
    assert sorted(i for i, _ in hits) == sorted(r.id for r in a2)
    assert all(i not in {r.id for r in a2} for i, _ in store.search_bm25("carol", "order", k=50))


@pytest.mark.parametrize("dim", [12, 32])
def test_dense_search_over_the_memory_budget_reads_the_stored_floats(store_factory, rng, dim):
    """No room in memory: exact from record_vectors up to exact_knn_max, else sign bits then floats."""
    exact = store_factory(dim=dim, vector_cache_mb=0)
    coarse = store_factory(dim=dim, vector_cache_mb=0, exact_knn_max=50, rescore_factor=8)
    v = unit(rng, 300, dim)
    for store in (exact, coarse):
        rs = store.add_records([rec("u", f"r{i}") for i in range(300)], v)
        store.add_records([rec("w", f"w{i}") for i in range(40)], unit(rng, 40, dim))
        store.supersede("u", rs[7].id, rs[8].id, T0 + timedelta(days=1))
    ids = np.array([r.id for r in rs])
    current = np.ones(300, bool)
    current[7] = False
    for q in [*unit(rng, 5, dim), v[123]]:
        cos = (v @ q) / np.linalg.norm(q)
        want = [int(ids[i]) for i in np.argsort(-np.where(current, cos, -np.inf), kind="stable")[:10]]
        got = exact.search_dense("u", q, k=10)
        assert [i for i, _ in got] == want
        assert [s for _, s in got] == pytest.approx([float(cos[np.flatnonzero(ids == i)[0]]) for i in want], abs=1e-5)
        found = coarse.search_dense("u", q, k=10)
        assert len(found) == 10 and {i for i, _ in found} <= set(ids[current].tolist())
        assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
    assert coarse.search_dense("u", v[123], k=3)[0][0] == rs[123].id
    assert "u" not in coarse._vcache and rs[7].id not in {i for i, _ in coarse.search_dense("u", v[7], k=20)}


def test_single_statement_log_writes_join_or_leave_the_transaction_whole(tmp_path):
    """A log append is one statement: no savepoint inside a transaction (the outer rollback takes
    it away, a failing append takes only itself), no BEGIN/COMMIT outside one (it is committed)."""
    from engine.core.records import Event

    path = str(tmp_path / "m.db")
    store = SQLiteStore(path, dim=4)
    ev = Event(user_id="u1", session_id="s", kind="note", at=T0, payload={"n": 1}, turn=1)
    try:
        with pytest.raises(RuntimeError), store.transaction():
            store.append_event(ev)
            store.set_kv("u1", "k", 1)
            raise RuntimeError("roll back")
        assert store.events(user_id="u1") == [] and store.get_kv("u1", "k") is None
        with store.transaction():
            store.append_event(ev)
            with pytest.raises(Exception):
                store.set_kv("u1", "k", object())  # refused before it reaches SQL: the event stays
        kept = store.append_event(ev)
    finally:
        store.close()
    reopened = SQLiteStore(path, dim=4)
    try:
        assert [e.id for e in reopened.events(user_id="u1")] == [1, kept.id] and kept.id == 2
    finally:
        reopened.close()


def test_full_text_stays_in_few_segments():
    """Every add merges segments (usermerge 2): many small batches leave a handful of segments where
    FTS5's default leaves one per few batches, each probed by every term lookup."""
    store = SQLiteStore(":memory:", dim=4)
    try:
        assert store.conn.execute("SELECT v FROM records_fts_config WHERE k = 'usermerge'").fetchone()[0] == 2
        for b in range(60):
            store.add_records([rec("u", f"note {b} item {i} words{i % 7}") for i in range(20)], [[1.0, 0, 0, 0]] * 20)
        segments = store.conn.execute("SELECT count(DISTINCT segid) FROM records_fts_idx").fetchone()[0]
        assert segments <= 4
        assert len(store.search_bm25("u", "words3", k=500)) == 60 * 3
    finally:
        store.close()


def test_bulk_load_leaves_one_segment_and_the_same_answers():
    v = [[1.0, 0, 0, 0]] * 500
    plain, bulk = SQLiteStore(":memory:", dim=4), SQLiteStore(":memory:", dim=4)
    try:
        batches = [[rec("u", f"row {b} {i} words{i % 9}") for i in range(500)] for b in range(6)]
        for batch in batches:
            plain.add_records(batch, v)
        with bulk.bulk_load():
            with bulk.bulk_load():  # nested blocks join the outer one
                for batch in batches[:3]:
                    bulk.add_records(batch, v)
            assert bulk.conn.execute("SELECT count(DISTINCT segid) FROM records_fts_idx").fetchone()[0] > 1
            for batch in batches[3:]:
                bulk.add_records(batch, v)
        segments = "SELECT count(DISTINCT segid) FROM records_fts_idx"
        assert bulk.conn.execute(segments).fetchone()[0] == 1 < plain.conn.execute(segments).fetchone()[0]
        for q in ("words4", "row 3", "words1 words7"):
            assert bulk.search_bm25("u", q, k=100) == plain.search_bm25("u", q, k=100)
        with pytest.raises(RuntimeError), bulk.bulk_load():
            bulk.add_records(batches[0], v)
            raise RuntimeError
        assert len(bulk.search_bm25("u", "words4", k=10000)) == 7 * sum(1 for i in range(500) if i % 9 == 4)
    finally:
        plain.close()
        bulk.close()


def test_dense_search_from_the_stored_floats_reads_sparse_vectors_exactly(store_factory):
    """Over the memory budget and above exact_knn_max, sign bits serve only dense vectors: hash
    embeddings (mostly zeros) are scored exactly on every stored float of the user."""
    from engine.roles.embeddings import HashEmbeddings
    from engine.eval.perf.corpus import synthetic_corpus

    corpus = synthetic_corpus(dim=384, seed=4, vocab=3000, topics=10)
    emb = HashEmbeddings(384)
    texts = [corpus.sentence(8, 20) for _ in range(600)]
    v = np.asarray(emb.embed_documents(texts), dtype=np.float32)
    store = store_factory(dim=384, vector_cache_mb=0, exact_knn_max=50, rescore_factor=2)
    ids = np.array([r.id for r in store.add_records([rec("u", t) for t in texts], v)])
    for _ in range(5):
        q = np.asarray(emb.embed_query(corpus.sentence(3, 6)), dtype=np.float32)
        cos = (v @ q) / np.linalg.norm(v, axis=1)
        want = [int(ids[i]) for i in np.lexsort((ids, -cos))[:10]]
        assert [i for i, _ in store.search_dense("u", q, k=10)] == want
    assert "u" not in store._vcache
    assert store._sparse_users["u"] == (True, 600)  # sampled once, kept until the user doubles


def test_bounded_record_reads_take_kept_records_and_read_only_the_others(store_factory, rng, monkeypatch):
    """A `records` read with a limit (the turn path's: a question's time window, up to 200) asks for
    ids and takes the records `get_records` keeps, reading only the others; the answer is the
    plain read's, filters, order and limit included, before and after writes."""
    from dataclasses import replace as _replace
    from datetime import datetime

    from engine.core.records import TimeSpan
    from engine.stores.sqlite.records import KEPT_READ_MAX, SQLiteRecords

    store = store_factory()
    day = datetime(2026, 3, 1, tzinfo=T0.tzinfo)
    made = store.add_records([_replace(rec("u", f"note {i}", tags=("fact", "preference") if i % 3 else ("fact",)),
                                       time=TimeSpan(start=day + timedelta(days=i), end=day + timedelta(days=i, hours=1),
                                                     granularity="day"))
                              for i in range(40)], unit(rng, 40, 32))
    store.add_records([rec("v", "other user's note")], unit(rng, 1, 32))
    store.supersede("u", made[5].id, made[6].id, T0)
    reads = [dict(time_between=(day + timedelta(days=10), day + timedelta(days=30)), newest_first=True, limit=12),
             dict(include_invalid=True, limit=8), dict(memory_type="fact", limit=50, newest_first=True),
             dict(tags_any=["preference"], include_invalid=True, time_between=(day, None), limit=7)]
    assert KEPT_READ_MAX >= 200  # the time window's read (DIM_READ_LIMIT) takes this path

    def unbounded(**kw):  # the same read without the limit, cut in Python: never the kept path
        limit = kw.pop("limit")
        return store.records("u", **kw)[:limit]

    fetched: list[int] = []
    real = SQLiteRecords._get_records
    monkeypatch.setattr(SQLiteRecords, "_get_records",
                        lambda self, conn, user_id, ids: fetched.extend(ids) or real(self, conn, user_id, ids))
    for kw in reads:
        want = [r.to_dict() for r in unbounded(**kw)]
        assert [r.to_dict() for r in store.records("u", **kw)] == want
    assert fetched  # the first reads fetched rows by id ...
    fetched.clear()
    for kw in reads:  # ... and kept them: nothing is read again
        store.records("u", **kw)
    assert fetched == []
    store.supersede("u", made[20].id, made[21].id, T0)  # a write: what is kept is dropped, and the answer follows
    for kw in reads:
        assert [r.to_dict() for r in store.records("u", **kw)] == [r.to_dict() for r in unbounded(**kw)]
    assert made[20].id not in {r.id for r in store.records("u", **reads[0])}


def test_a_record_superseded_between_the_ids_and_its_row_stays_out(store_factory, rng, monkeypatch):
    """Another process may supersede a record between the read of the ids and the read of its
    row: a current-only read then leaves it out instead of returning a superseded record."""
    from dataclasses import replace as _replace

    from engine.stores.sqlite.records import SQLiteRecords

    store = store_factory()
    made = store.add_records([rec("u", f"note {i}") for i in range(6)], unit(rng, 6, 32))
    real = SQLiteRecords._get_records

    def late(self, conn, user_id, ids):  # the rows as they read after another process's supersede
        return [_replace(r, invalid_at=T0) if r.id == made[2].id else r for r in real(self, conn, user_id, ids)]

    monkeypatch.setattr(SQLiteRecords, "_get_records", late)
    got = store.records("u", limit=10)
    assert [r.id for r in got] == [r.id for r in made if r.id != made[2].id]
    assert made[2].id in {r.id for r in store.records("u", limit=10, include_invalid=True)}


def test_a_kept_profile_is_never_stale(tmp_path):
    """The store keeps each user's profile in memory between reads; a save here, a rollback, a
    save by another connection to the same file and forgetting the user are all seen by the next read."""
    from engine.core.records import UserProfile

    def prof(*values, version):
        return UserProfile(user_id="u", fields={"identity": values}, version=version, updated_at=T0)

    path = str(tmp_path / "memlab.db")
    store, other = SQLiteStore(path, dim=4), SQLiteStore(path, dim=4)
    try:
        assert store.get_profile("u").is_empty()
        store.save_profile(prof("Ana", version=1))
        first = store.get_profile("u")
        assert first.fields == {"identity": ("Ana",)} and store.get_profile("u") is first  # kept, not read again
        with pytest.raises(RuntimeError), store.transaction():
            store.save_profile(prof("Bea", version=2))
            assert store.get_profile("u").fields == {"identity": ("Bea",)}  # the transaction sees its own write
            raise RuntimeError("roll back")
        assert store.get_profile("u").fields == {"identity": ("Ana",)}
        other.save_profile(prof("Cy", version=2))  # another connection's commit
        assert store.get_profile("u").fields == {"identity": ("Cy",)}
        store.forget_user("u")
        assert store.get_profile("u").is_empty()
    finally:
        store.close()
        other.close()
