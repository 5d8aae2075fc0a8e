"""PostgresStore bulk ingest: the binary COPY path writes what the row-by-row INSERT path writes,
ids stay ascending across both, and `bulk_load` drops the HNSW index and builds it back.
"""

from __future__ import annotations

from datetime import timedelta, timezone

import numpy as np
import pytest
from pg_support import POSTGRES_MARKS
from store_conformance import T0, rec, unit
from test_postgres_store import make_pg, pg_dsn  # noqa: F401 - the module's server fixture

from engine.core.records import SourcePointer, TimeSpan

pytestmark = POSTGRES_MARKS

DIM = 8
TRICKY = "a\x00b\U0010fffe0c\U0010fffe\U0010fffe\x00"


def varied(user: str, n: int) -> list:
    """Records touching every column: NUL and escape characters, offsets, spans, sources, None."""
    east = timezone(timedelta(hours=8))
    out = []
    for i in range(n):
        kw = {}
        if i % 2:
            start = (T0 + timedelta(days=i)).astimezone(east)
            kw |= {"time": TimeSpan(start=start, end=start + timedelta(hours=3), granularity="range", text=f"t{i}"),
                   "location": f"place {i} {TRICKY}", "reason": "why\x00", "purpose": None,
                   "source": SourcePointer(session_id=f"s{i}", message_ids=(i, i + 1), external_ids=("D1:2",)),
                   "last_reinforced_at": T0 + timedelta(hours=i), "strengthen_count": i,
                   "said_at": T0 - timedelta(days=1), "lasting": False}
        if i % 3 == 0:
            kw |= {"valid_from": T0.astimezone(east), "tags": ("fact", "preference"), "superseded_by": None}
        out.append(rec(user, f"content {i} {TRICKY if i % 4 == 0 else 'plain'} 北京 tea",
                       keywords=(f"k{i}", TRICKY), created_at=(T0 + timedelta(minutes=i)).astimezone(east), **kw))
    return out


def table_rows(store, user: str) -> list[tuple]:
    """Every column of the user's rows but the id, in id order (the tsvector as text)."""
    with store._conn() as conn:
        cols = [r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'records'::regclass AND attnum > 0 "
            "AND NOT attisdropped AND attname <> 'id' ORDER BY attnum")]  # fmt: skip
        select = ", ".join(f"{c}::text" for c in cols)
        return [tuple(r) for r in conn.execute(f"SELECT {select} FROM records WHERE user_id = %s ORDER BY id", (user,))]


def test_copy_path_writes_the_same_rows_as_row_by_row(pg_dsn):  # noqa: F811
    copy_store, row_store = make_pg(pg_dsn, dim=DIM), make_pg(pg_dsn, dim=DIM)
    try:
        row_store.copy_min_rows = 10**9  # never COPY
        copy_store.copy_min_rows = 1  # always COPY
        recs, vecs = varied(TRICKY, 24), unit(np.random.default_rng(0), 24, DIM)
        by_copy, by_rows = copy_store.add_records(recs, vecs), row_store.add_records(recs, [list(v) for v in vecs])
        assert [r.id for r in by_copy] == [r.id for r in by_rows] == list(range(1, 25))
        assert table_rows(copy_store, TRICKY) == table_rows(row_store, TRICKY)
        got = copy_store.get_records(TRICKY, [r.id for r in by_copy])
        assert [g.to_dict() for g in got] == [r.to_dict() for r in by_copy]
        assert [g.to_dict() for g in got] == [g.to_dict() for g in row_store.get_records(TRICKY, [r.id for r in by_rows])]
        assert copy_store.vectors(TRICKY, [1, 2]) == row_store.vectors(TRICKY, [1, 2])
        # BM25 sees the same text either way
        assert copy_store.search_bm25(TRICKY, "tea", k=5) == row_store.search_bm25(TRICKY, "tea", k=5)
    finally:
        copy_store.close()
        row_store.close()


def test_ids_ascend_across_copy_and_insert_batches_and_users_stay_apart(pg_dsn):  # noqa: F811
    store = make_pg(pg_dsn, dim=DIM)
    try:
        rng = np.random.default_rng(1)
        ids = []
        for n, user in [(3, "a"), (40, "b"), (2, "a"), (17, "a")]:
            ids += [r.id for r in store.add_records([rec(user, f"{user} {i}") for i in range(n)], unit(rng, n, DIM))]
        assert ids == sorted(ids) and len(set(ids)) == len(ids) == 62
        assert store.count_records("a") == 22 and store.count_records("b") == 40
        assert all(r.user_id == "a" for r in store.records("a"))
        later = store.add_records([rec("a", "after")], unit(rng, 1, DIM))[0].id  # the identity continues
        assert later > max(ids)
    finally:
        store.close()


def test_a_failed_copy_batch_writes_nothing(pg_dsn):  # noqa: F811
    store = make_pg(pg_dsn, dim=DIM)
    try:
        store.add_records([rec("u", f"r{i}") for i in range(20)], unit(np.random.default_rng(2), 20, DIM))
        bad = unit(np.random.default_rng(3), 20, DIM)
        bad[7, 0] = np.nan
        with pytest.raises(Exception, match="NaN"):
            store.add_records([rec("u", f"x{i}") for i in range(20)], bad)
        with pytest.raises(Exception, match="dimensions"):
            store.add_records([rec("u", f"x{i}") for i in range(20)], unit(np.random.default_rng(3), 20, DIM + 1))
        with pytest.raises(RuntimeError), store.transaction():
            store.add_records([rec("u", f"y{i}") for i in range(20)], unit(np.random.default_rng(4), 20, DIM))
            raise RuntimeError("roll back")
        assert store.count_records("u") == 20
    finally:
        store.close()


def index_names(store) -> set[str]:
    with store._conn() as conn:
        return {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s", (store.schema,))}


def test_bulk_load_rebuilds_the_hnsw_index_and_search_answers_throughout(pg_dsn):  # noqa: F811
    store = make_pg(pg_dsn, dim=DIM, exact_scan_below=0)  # every dense search asks the index path
    try:
        with store._conn() as conn:
            before = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'records_embedding' "
                                  "AND schemaname = %s", (store.schema,)).fetchone()[0]  # fmt: skip
        vecs = unit(np.random.default_rng(5), 300, DIM)
        with store.bulk_load():
            assert "records_embedding" not in index_names(store)
            with store.bulk_load():  # nested: joins the outer one
                store.add_records([rec("u", f"r{i}") for i in range(150)], vecs[:150])
            assert "records_embedding" not in index_names(store)
            store.add_records([rec("u", f"r{i}") for i in range(150, 300)], vecs[150:])
            assert store.search_dense("u", vecs[10], k=1)[0][0] == 11  # an exact scan meanwhile
        with store._conn() as conn:
            after = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'records_embedding' "
                                 "AND schemaname = %s", (store.schema,)).fetchone()[0]  # fmt: skip
        assert after == before
        assert store.search_dense("u", vecs[200], k=1)[0][0] == 201
        assert store.count_records("u") == 300
    finally:
        store.close()


def test_bulk_load_rebuilds_the_index_when_the_block_fails(pg_dsn):  # noqa: F811
    store = make_pg(pg_dsn, dim=DIM)
    try:
        with pytest.raises(RuntimeError), store.bulk_load():
            store.add_records([rec("u", f"r{i}") for i in range(20)], unit(np.random.default_rng(6), 20, DIM))
            raise RuntimeError("stop")
        assert "records_embedding" in index_names(store) and store.count_records("u") == 20
    finally:
        store.close()
