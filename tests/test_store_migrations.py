"""Opening a database: concurrent creation, kills inside a migration, upgrades and refusals.

Each test calls the harness in benchmarks/harness/migrations.py (the reliability report calls the
same functions with larger sizes) and asserts the numbers that must be zero.
"""

from __future__ import annotations

import pytest

from benchmarks.harness.migrations import (
    default_kill_points,
    run_concurrent_open,
    run_concurrent_replays,
    run_migration_kill,
    run_newer_version_refused,
    run_upgrade_from_previous,
    statement_counts,
)
from engine.stores.migrate import newer_schema_error
from engine.stores.sqlite import MIGRATIONS, SCHEMA_VERSION


@pytest.fixture
def upgraded(tmp_path):
    """Open a sample file written at schema `version` with today's store; yields (store, sample)."""
    from contextlib import contextmanager

    from benchmarks.harness.schema_sample import DIM, build_at_version, compare_sample
    from engine.stores.sqlite import SQLiteStore

    @contextmanager
    def opened(version: int):
        path = str(tmp_path / f"v{version}.db")
        sample = build_at_version(path, version)
        with SQLiteStore(path, dim=DIM) as store:
            assert store.schema_version == SCHEMA_VERSION > version
            assert compare_sample(store, sample) == []
            yield store, sample

    return opened


@pytest.mark.parametrize("processes", [2, 8])
def test_processes_and_threads_open_one_fresh_file_at_once(tmp_path, processes):
    r = run_concurrent_open(tmp_path, processes=processes, threads=2, rounds=4)
    print(f"\n{r.to_dict()}")
    assert r.failures == [] and r.opened == r.opens == processes * 2 * 4
    assert r.messages_lost == 0 and r.check_problems == []


def test_processes_upgrade_one_old_file_at_once_keeping_every_row(tmp_path):
    r = run_concurrent_open(tmp_path, processes=6, threads=1, rounds=3, from_version=SCHEMA_VERSION - 1)
    assert r.failures == [] and r.opened == r.opens
    assert r.messages_lost == 0 and r.old_rows_lost == 0 and r.check_problems == []


def test_a_kill_inside_any_migration_keeps_the_old_version_and_a_reopen_finishes(tmp_path):
    points = default_kill_points()
    assert {v for v, _ in points} == {m.version for m in MIGRATIONS}
    assert all(i <= statement_counts()[v] for v, i in points)
    r = run_migration_kill(tmp_path, points=points)
    print(f"\n{r.to_dict()}")
    assert r.failures == [] and r.killed == len(points)
    assert r.old_version_kept == r.completed_on_reopen == len(points)
    assert r.rows_written > 0 and r.rows_lost == 0 and r.check_problems == []


def test_files_of_every_earlier_version_upgrade_keeping_every_row(tmp_path):
    r = run_upgrade_from_previous(tmp_path, versions=range(1, SCHEMA_VERSION))
    assert r.from_versions == list(range(1, SCHEMA_VERSION)) and r.to_version == SCHEMA_VERSION
    assert r.rows_written > 0 and r.rows_lost == 0 and r.failures == [] and r.check_problems == []


def test_a_file_from_a_newer_memlab_is_refused_and_left_alone(tmp_path):
    r = run_newer_version_refused(tmp_path)
    assert r.refused and r.says_upgrade and r.file_untouched, r.to_dict()
    assert r.message.startswith(f"{str(tmp_path / 'newer.db')!r} was written by memlab schema {SCHEMA_VERSION + 1}")
    assert "this memlab knows up to" in str(newer_schema_error("x", 9, 3))


@pytest.mark.parametrize("processes", [2, 8])
def test_concurrent_cli_replays_on_a_fresh_file_all_succeed_and_check_clean(tmp_path, processes):
    r = run_concurrent_replays(tmp_path, processes=processes)
    print(f"\n{r.to_dict()}")
    assert r.exit_codes == [0] * processes, r.errors
    assert r.check_exit == 0 and "every invariant holds" in r.check_output


def test_step_5_keys_full_text_per_user_and_stores_text_and_floats_once(upgraded):
    from benchmarks.harness.schema_sample import DIM
    from engine.core.text import user_key

    with upgraded(4) as (store, sample):
        conn = store.conn
        rows = conn.execute("SELECT rowid, body FROM records_fts ORDER BY rowid").fetchall()
        every = sorted(r[0] for rs in sample.records.values() for r in rs)
        assert [r[0] for r in rows] == every and all(body is None for _, body in rows)  # contentless, all rows kept
        conn.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, 'records_fts', 'row')")
        terms = dict(conn.execute("SELECT term, doc FROM temp.terms").fetchall())
        keys = {user_key(u): u for u in sample.users}
        assert len(keys) == len(sample.users) and all(t[:10] in keys for t in terms)  # no term without an owner
        for user in sample.users:  # one doclist per user: "tea" is every record of the user, superseded too
            assert terms[user_key(user) + "tea"] == len(sample.records[user])
        vec_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'records_vec'").fetchone()[0]
        assert "float[" not in vec_sql and f"bit[{DIM}]" in vec_sql
        bits = conn.execute("SELECT count(*) FROM records_vec").fetchone()[0]
        assert bits == len(every)
        mine = {i for i, _ in store.search_bm25("user0", "green tea user1", k=50)}
        assert mine == {r[0] for r in sample.records["user0"][1:]}
        # the bit-only vec0 still serves the coarse pass over a partition with no room in memory
        store.exact_knn_max, store.rescore_factor = 1, 1
        store._vcache.budget_bytes = 0
        target = sample.records["user1"][2][0]
        assert store.search_dense("user1", sample.vectors[target], k=1)[0][0] == target


def test_step_6_backfills_the_tag_index_and_triggers_keep_it_through_hand_edits(upgraded):
    import json

    with upgraded(5) as (store, sample):
        conn = store.conn

        def tags_of(text):
            try:
                return [t for t in dict.fromkeys(json.loads(text)) if isinstance(t, str)]
            except ValueError:
                return []

        def expected():
            return sorted((u, t, v, i) for i, u, tags, v in conn.execute("SELECT id, user_id, tags, valid FROM records")
                          for t in tags_of(tags))

        def indexed():
            return sorted(tuple(r) for r in conn.execute("SELECT user_id, tag, valid, id FROM record_tags"))

        assert indexed() == expected() and len(indexed()) >= len(sample.records)  # old records' tags, backfilled
        rid, first = conn.execute("SELECT max(id), min(id) FROM records").fetchone()
        conn.execute("UPDATE records SET tags = ? WHERE id = ?", (json.dumps(["pinned", "pinned", "chat"]), rid))
        assert indexed() == expected()
        conn.execute("UPDATE records SET valid = 1 - valid WHERE id % 2 = 0")  # hand edits, outside the store
        assert indexed() == expected()
        conn.execute("UPDATE records SET tags = 'not json' WHERE id = ?", (first,))
        conn.execute("UPDATE records SET user_id = 'moved' WHERE id = ?", (rid,))
        assert indexed() == expected()
        assert [r.id for r in store.records("moved", tags_any=["pinned"], include_invalid=True)] == [rid]
        conn.execute("DELETE FROM records WHERE id IN (?, ?)", (rid, first))
        assert indexed() == expected() and all(i not in (rid, first) for *_, i in indexed())


def test_check_reports_a_tag_index_out_of_step(tmp_path):
    from engine.core.records import MemoryRecord
    from engine.eval.perf.corpus import BENCH_NOW
    from engine.stores.check import check_store
    from engine.stores.sqlite import SQLiteStore

    with SQLiteStore(str(tmp_path / "t.db"), dim=4) as store:
        store.add_records([MemoryRecord(user_id="u", content="x", tags=("pinned",), created_at=BENCH_NOW)],
                          [[1.0, 0.0, 0.0, 0.0]])
        assert check_store(store) == []
        store.conn.execute("DELETE FROM record_tags")
        store.conn.execute("INSERT INTO record_tags VALUES ('u', 'ghost', 1, 99)")
        problems = check_store(store)
        assert len(problems) == 2 and "tag 'pinned'" in problems[0] and "'ghost'" in problems[1]


def test_step_9_drops_the_user_index_of_score_rows_and_keeps_them_reachable(upgraded):
    with upgraded(8) as (store, sample):
        conn = store.conn
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'scores'")}
        assert indexes == {"scores_event"}
        assert sample.scores and all(len(store.scores(eid)) == n for eid, n in sample.scores.items())
        from engine.stores.dialect import SQLITE

        # the statements `scores` and `compact_log` run (the latter built from the dialect, as there)
        for sql in ("SELECT row FROM scores WHERE event_id = ? ORDER BY id",
                    f"DELETE FROM scores WHERE user_id = ? AND {SQLITE.in_list('event_id')}"):
            plan = " ".join(str(r) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, (1, "[1]")[: sql.count("?")]))
            assert "scores_event" in plan  # a retrieval's rows are read and compacted by event id, not scanned
        user = next(iter(sample.users))
        store.forget_user(user)
        assert conn.execute("SELECT count(*) FROM scores WHERE user_id = ?", (user,)).fetchone()[0] == 0
