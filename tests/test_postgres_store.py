"""PostgresStore: the conformance suite on a real PostgreSQL (pgserver), plus PostgreSQL-only behaviour.

One server for the module (started in build/pgdata-test, or `MEMLAB_PG_DSN` if set); each test
gets its own schema, dropped on close, so tests are isolated without a new database each.
"""

from __future__ import annotations

import os
import time
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg_support import POSTGRES_MARKS
from store_conformance import T0, StoreConformance, msg, rec, unit

from engine.core.errors import ConfigError, StoreError
from engine.core.records import Message

pytestmark = POSTGRES_MARKS


@pytest.fixture(scope="module")
def pg_dsn():

    from engine.stores.postgres import DEFAULT_DATA_DIR, start_local_server

    if dsn := os.environ.get("MEMLAB_PG_DSN"):
        return dsn
    t0 = time.perf_counter()
    dsn = start_local_server(DEFAULT_DATA_DIR.parent / "pgdata-test")
    print(f"\npgserver ready in {time.perf_counter() - t0:.2f} s")
    return dsn


def new_schema() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


def make_pg(dsn: str, **kw):
    """A store in a fresh schema, dropped on close; a lighter HNSW graph keeps bulk inserts quick."""
    from engine.stores.postgres import PostgresStore

    kw.setdefault("schema", new_schema())
    kw.setdefault("temporary", True)
    kw.setdefault("hnsw_m", 8)
    kw.setdefault("hnsw_ef_construction", 32)
    return PostgresStore(dsn, **kw)


@pytest.fixture(scope="class")
def shared_schema(pg_dsn):
    """One migrated schema per test class; each test starts from emptied tables (fast)."""
    import psycopg
    from psycopg import sql

    schema = new_schema()
    make_pg(pg_dsn, dim=StoreConformance.DIM, schema=schema, temporary=False).close()
    yield schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


class TestPostgresConformance(StoreConformance):
    @pytest.fixture(autouse=True)
    def _schema(self, pg_dsn, shared_schema):
        self.dsn, self.schema = pg_dsn, shared_schema

    def make_store(self, tmp_path, *, dim):
        import psycopg
        from psycopg import sql

        from engine.stores.postgres import USER_TABLES

        with psycopg.connect(self.dsn, autocommit=True) as conn:  # DELETE: TRUNCATE syncs new files
            for table in USER_TABLES:
                conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(self.schema, table)))
        return make_pg(self.dsn, dim=dim, schema=self.schema, temporary=False)


# -- dense search: a small user beside a large one must not starve -----------------------------------


CROWD = 5_000


def test_hnsw_shortfall_falls_back_to_an_exact_scan(pg_dsn):
    """20 records of one user among 5,000 of another: HNSW (ef_search 10) finds few of them."""
    dim = 16
    store = make_pg(pg_dsn, dim=dim, ef_search=10, exact_scan_below=0, iterative_scan=False)
    try:
        rng = np.random.default_rng(7)
        crowd = unit(rng, CROWD, dim)
        store.add_records([rec("crowd", "noise") for _ in range(CROWD)], crowd)
        mine_v = unit(rng, 20, dim)
        mine = store.add_records([rec("small", f"mine {i}") for i in range(20)], mine_v)
        q = unit(rng, 1, dim)[0]
        hits = store.search_dense("small", q, k=20)
        assert store.dense_counts["fallback"] == 1  # the HNSW stage came back short and was replaced
        order = np.argsort(-(mine_v @ q))
        assert [i for i, _ in hits] == [mine[j].id for j in order]
        np.testing.assert_allclose([s for _, s in hits], (mine_v @ q)[order], atol=1e-5)
        # the large user is served by the index itself
        big = store.search_dense("crowd", q, k=10)
        assert len(big) == 10 and store.dense_counts["ann"] == 1
        exact_top = np.sort(crowd @ q)[::-1][:10]
        assert big[0][1] >= exact_top[-1] - 1e-5  # an approximate top-10, never a foreign row
        assert set(i for i, _ in big).isdisjoint(r.id for r in mine)
    finally:
        store.close()


def test_small_users_are_searched_exactly_without_the_index(pg_dsn):
    store = make_pg(pg_dsn, dim=8)
    try:
        v = unit(np.random.default_rng(1), 30, 8)
        store.add_records([rec("u", f"r{i}") for i in range(30)], v)
        store.search_dense("u", v[3], k=5)
        assert store.dense_counts == {"exact": 1}
    finally:
        store.close()


def test_index_stage_settings_do_not_leak_into_the_callers_transaction(pg_dsn):
    store = make_pg(pg_dsn, dim=8, exact_scan_below=0)
    try:
        v = unit(np.random.default_rng(2), 30, 8)
        rs = store.add_records([rec("u", f"r{i}") for i in range(30)], v)
        with store.transaction():
            assert store.search_dense("u", v[4], k=3)[0][0] == rs[4].id
            assert store._local.conn.execute("SHOW enable_sort").fetchone()[0] == "on"
        assert store.dense_counts["ann"] + store.dense_counts["fallback"] == 1 and store.dense_counts["exact"] == 0
    finally:
        store.close()


# -- bounded reads: a bounded query reads few rows, whatever the history ------------------------------

PG_TURNS = 20_000

PG_BOUNDED_READS = {
    "session tail": lambda s: s.messages("u", session_id="s", newest_first=True, limit=5),
    "session tail, one role": lambda s: s.messages("u", session_id="s", newest_first=True, limit=5, roles=["user"]),
    "session tail, two roles": lambda s: s.messages("u", session_id="s", newest_first=True, limit=5,
                                                    roles=["user", "assistant"]),
    "session tail, absent role": lambda s: s.messages("u", session_id="s", newest_first=True, limit=5, roles=["tool"]),
    "user tail": lambda s: s.messages("u", newest_first=True, limit=5),
    "past a cursor": lambda s: s.messages("u", session_id="s", after_id=3 * PG_TURNS - 30, limit=5),
    "pending sessions": lambda s: s.pending_sessions("u"),
    "sessions": lambda s: s.sessions("u"),
    "newest events of a kind": lambda s: s.events(user_id="u", kind="gate", newest_first=True, limit=5),
    "newest events": lambda s: s.events(user_id="u", newest_first=True, limit=5),
    "newest events of a session": lambda s: s.events(user_id="u", session_id="s", newest_first=True, limit=5),
}


def _rows_read(plan: dict) -> int:
    """Rows the plan's scans touched (returned or filtered out), over all loops."""
    own = 0
    if "Scan" in plan["Node Type"]:
        own = (plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)) * plan.get("Actual Loops", 1)
    return int(own) + sum(_rows_read(p) for p in plan.get("Plans", []))


def test_bounded_reads_read_a_few_rows_of_a_long_history(pg_dsn):
    """20,000 turns: each shared bounded read touches a few dozen rows (EXPLAIN ANALYZE of its own SQL)."""
    store = make_pg(pg_dsn, dim=8)
    try:
        with store.transaction():
            conn = store._local.conn
            conn.execute(
                "INSERT INTO messages (user_id, session_id, role, content, created_at, created_at_tz) "
                "SELECT u, s, CASE WHEN g %% 2 = 0 THEN 'user' ELSE 'assistant' END, 'm' || g, now(), 0 "
                "FROM generate_series(1, %s) g, (VALUES ('u', 's'), ('u', 'o'), ('v', 's')) AS w(u, s) ORDER BY g",
                (PG_TURNS,))
            conn.execute("INSERT INTO session_heads SELECT user_id, session_id, min(id), max(id) FROM messages "
                         "GROUP BY 1, 2")
            conn.execute(
                "INSERT INTO events (user_id, session_id, kind, at, at_tz, payload) SELECT 'u', "
                "CASE WHEN g %% 2 = 0 THEN 's' ELSE 'o' END, CASE WHEN g %% 3 = 0 THEN 'gate' ELSE 'x' END, now(), 0, "
                "'{}' FROM generate_series(1, %s) g", (PG_TURNS,))
        with store._pool.connection() as conn:
            conn.execute("ANALYZE messages; ANALYZE events; ANALYZE session_heads; ANALYZE cursors")
        seen: list = []
        real_run = store._run
        store._run = lambda conn, text, args=(): seen.append((text, args)) or real_run(conn, text, args)
        for name, read in PG_BOUNDED_READS.items():
            seen.clear()
            assert read(store) is not None
            ((text, args),) = seen
            with store._pool.connection() as conn:
                (plan,) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + store.dialect.sql(text), args).fetchone()[0]
            assert _rows_read(plan["Plan"]) <= 60, f"{name}: {_rows_read(plan['Plan'])} rows read"
    finally:
        store.close()


# -- schema, migrations, lifecycle ----------------------------------------------------------------


def test_migrations_are_versioned_and_resume(pg_dsn):
    import psycopg
    from psycopg import sql

    from engine.stores.postgres import MIGRATIONS, PostgresStore

    schema = new_schema()
    first = PostgresStore(pg_dsn, dim=8, schema=schema)
    try:
        assert first.schema_version == MIGRATIONS[-1].version == 6
        first.add_records([rec("u", "green tea")], unit(np.random.default_rng(0), 1, 8))
        first.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
            conn.execute("DROP INDEX records_embedding; DROP INDEX records_tsv")
            conn.execute("DELETE FROM schema_version WHERE version = 2")
        again = PostgresStore(pg_dsn, dim=8, schema=schema)  # resumes at migration 2, keeps the data
        assert again.schema_version == 6 and again.count_records("u") == 1
        assert [i for i, _ in again.search_bm25("u", "tea", k=3)]
        with psycopg.connect(pg_dsn) as conn:
            names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,))}
            applied = [r[0] for r in conn.execute(
                sql.SQL("SELECT version FROM {}.schema_version ORDER BY version").format(sql.Identifier(schema)))]
        assert {"records_embedding", "records_tsv"} <= names and applied == [1, 2, 3, 4, 5, 6]
        again.close()
        with pytest.raises(ConfigError, match="dim=16"):
            PostgresStore(pg_dsn, dim=16, schema=schema)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("INSERT INTO {}.schema_version (version, name) VALUES (99, 'future')").format(
                sql.Identifier(schema)))
        with pytest.raises(StoreError, match="upgrade memlab"):
            PostgresStore(pg_dsn, dim=8, schema=schema)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_the_tag_index_is_backfilled_by_its_migration_and_follows_hand_edits(pg_dsn):
    import psycopg
    from psycopg import sql

    from engine.stores.postgres import PostgresStore

    schema = new_schema()
    store = PostgresStore(pg_dsn, dim=8, schema=schema)
    try:
        rs = store.add_records([rec("u", f"r{i}", tags=("pinned",) if i % 2 else ("fact",)) for i in range(6)],
                               unit(np.random.default_rng(0), 6, 8))
        store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # back to a schema before the tag index
            conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
            conn.execute("DROP TABLE record_tags; DROP FUNCTION record_tags_added, record_tags_changed, record_tags_removed CASCADE; "
                         "DELETE FROM schema_version WHERE version = 5")
        store = PostgresStore(pg_dsn, dim=8, schema=schema)

        def pinned():
            return [r.content for r in store.records("u", tags_any=["pinned"], limit=10, newest_first=True)]

        assert pinned() == ["r5", "r3", "r1"]  # backfilled
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # hand edits, outside the store
            conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
            conn.execute("UPDATE records SET tags = '{pinned,pinned,chat}' WHERE id = %s", (rs[0].id,))
            conn.execute("UPDATE records SET invalid_at = now() WHERE id = %s", (rs[3].id,))
            conn.execute("DELETE FROM records WHERE id = %s", (rs[5].id,))
            index = sorted(conn.execute("SELECT tag, current, id FROM record_tags WHERE user_id = 'u'").fetchall())
        assert pinned() == ["r1", "r0"]
        assert [r.content for r in store.records("u", tags_any=["pinned"], include_invalid=True)] == ["r0", "r1", "r3"]
        assert index == sorted([("pinned", True, rs[0].id), ("chat", True, rs[0].id), ("pinned", True, rs[1].id),
                                ("fact", True, rs[2].id), ("pinned", False, rs[3].id), ("fact", True, rs[4].id)])
    finally:
        store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _schema_at(dsn: str, schema: str, version: int) -> None:
    """A schema brought to `version` only, holding messages and events as that version wrote them."""
    import psycopg
    from psycopg import sql

    from engine.stores.postgres.migrations import migrate

    ctx = {"dim": 8, "embedder_name": "hash", "language": "simple", "hnsw_m": 8, "hnsw_ef_construction": 32}
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn, schema=schema, context=ctx, target=version)
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        for i, session in enumerate(["b", "a", "b", "a", "c"]):
            conn.execute("INSERT INTO messages (user_id, session_id, role, content, created_at, created_at_tz) "
                         "VALUES ('u', %s, 'user', %s, %s, 28800)", (session, f"m{i}", T0))
        conn.execute("INSERT INTO cursors VALUES ('u', 'b', 'extract', (SELECT max(id) FROM messages "
                     "WHERE session_id = 'b'))")
        conn.execute("INSERT INTO events (user_id, session_id, kind, at, at_tz, payload) "
                     "VALUES ('u', 'a', 'gate', %s, 0, '{\"k\": 1}')", (T0,))
        if version >= 3:  # what that version's add_message kept beside the rows
            conn.execute("INSERT INTO session_heads SELECT user_id, session_id, min(id), max(id) FROM messages "
                         "GROUP BY 1, 2")


@pytest.fixture
def old_schema(pg_dsn):
    """A schema at the previous version with rows (see _schema_at), dropped after the test."""
    import psycopg
    from psycopg import sql

    from engine.stores.postgres import SCHEMA_VERSION

    schema = new_schema()
    _schema_at(pg_dsn, schema, SCHEMA_VERSION - 1)
    yield schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_a_schema_of_the_previous_version_upgrades_keeping_every_row(pg_dsn, old_schema):
    from engine.stores.postgres import SCHEMA_VERSION, PostgresStore

    with PostgresStore(pg_dsn, dim=8, schema=old_schema) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert [m.content for m in store.messages("u")] == [f"m{i}" for i in range(5)]
        assert store.messages("u")[0].created_at.utcoffset().total_seconds() == 28800
        assert store.sessions("u") == ["b", "a", "c"] and store.pending_sessions("u") == ["a", "c"]
        assert [(e.kind, dict(e.payload)) for e in store.events(user_id="u")] == [("gate", {"k": 1})]
        store.add_message(msg("u", "b", "after the upgrade"))
        assert store.pending_sessions("u") == ["b", "a", "c"]


def test_a_kill_inside_a_migration_keeps_the_old_version_and_a_reopen_finishes(pg_dsn, old_schema):
    import signal
    import subprocess
    import sys

    import psycopg
    from psycopg import sql

    from engine.stores.postgres import SCHEMA_VERSION, PostgresStore

    code = ("import sys; from engine.stores.postgres import PostgresStore; "
            "PostgresStore(sys.argv[1], dim=8, schema=sys.argv[2])")
    env = {**os.environ, "MEMLAB_MIGRATION_PAUSE": f"{SCHEMA_VERSION}:2"}
    proc = subprocess.Popen([sys.executable, "-c", code, pg_dsn, old_schema], env=env, text=True,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        for line in proc.stderr:
            if f"migration {SCHEMA_VERSION} paused after statement 2" in line:
                proc.send_signal(signal.SIGKILL)
                break
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
    with psycopg.connect(pg_dsn) as conn:
        applied = [r[0] for r in conn.execute(
            sql.SQL("SELECT version FROM {}.schema_version ORDER BY version").format(sql.Identifier(old_schema)))]
    assert applied == list(range(1, SCHEMA_VERSION))  # the killed step left nothing behind
    with PostgresStore(pg_dsn, dim=8, schema=old_schema) as store:  # waits for the dead backend's lock, migrates
        assert store.schema_version == SCHEMA_VERSION and len(store.messages("u")) == 5
        assert store.sessions("u") == ["b", "a", "c"]


def test_open_store_dispatches_to_postgres(monkeypatch):
    import engine.stores.postgres as pg
    from engine.stores.base import open_store

    seen = []
    monkeypatch.setattr(pg, "PostgresStore", lambda dsn, **kw: seen.append((dsn, kw)) or "pg")
    assert open_store("postgresql://u@h/db", dim=8) == "pg" and open_store("postgres", embedder_name="minilm") == "pg"
    assert seen == [("postgresql://u@h/db", {"dim": 8, "embedder_name": "hash"}),
                    (None, {"dim": 384, "embedder_name": "minilm"})]


def test_unreachable_server_names_the_fix_and_hides_the_password():
    from engine.stores.postgres import PostgresStore

    with pytest.raises(StoreError, match="start the server or fix the DSN") as err:
        PostgresStore("postgresql://nobody:hunter2@127.0.0.1:1/none?connect_timeout=2", dim=8)
    assert "hunter2" not in str(err.value)


def test_temporary_refuses_the_public_schema(pg_dsn):
    with pytest.raises(ConfigError, match="public"):
        make_pg(pg_dsn, dim=8, schema="public", temporary=True)


# -- NUL and the escape character survive the trip ---------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(["\x00", "\U0010fffe", "0", "a", "北"]), max_size=12))
def test_text_escape_round_trips(text):
    from engine.stores.postgres import escape_text, unescape_text

    assert "\x00" not in escape_text(text) and unescape_text(escape_text(text)) == text


def test_nul_and_escape_char_round_trip_through_the_server(pg_dsn):
    store = make_pg(pg_dsn, dim=8)
    try:
        tricky = "a\x00b\U0010fffe0c\U0010fffe\U0010fffe\x00"
        m = store.add_message(Message(user_id=tricky, session_id="s\x00", role="user", content=tricky, created_at=T0))
        assert store.messages(tricky)[0].to_dict() == m.to_dict()
        (r,) = store.add_records([rec(tricky, "tea", keywords=(tricky,))], unit(np.random.default_rng(0), 1, 8))
        assert store.get_records(tricky, [r.id])[0].keywords == (tricky,)
        assert store.users() == [tricky] and store.messages("a") == []
    finally:
        store.close()


def test_stats_report_backend_and_paths(pg_dsn):
    store = make_pg(pg_dsn, dim=8)
    try:
        store.add_message(msg("u", "s", "hi"))
        st_ = store.stats()
        assert st_["backend"] == "postgres" and st_["counts"]["messages"] == 1 and st_["bytes"] > 0
        assert st_["dim"] == 8 and st_["embedder_name"] == "hash" and st_["pgvector"]
    finally:
        store.close()
