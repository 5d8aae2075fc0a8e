"""Concurrent writers, injected faults and `memlab check`, through the same harness as the report.

Each test prints its figures (run with -s to see them) and asserts the two numbers that must be
zero: messages lost and cross-user reads.
"""

from __future__ import annotations

import shutil

import pytest

from benchmarks.harness.common import fast_config, user_marker
from benchmarks.harness.concurrency import run_cli_replays, run_concurrency
from benchmarks.harness.faults import run_faults
from engine.core.clock import VirtualClock
from engine.memory.engine import DEFAULT_START, MemoryEngine
from engine.stores.check import check_main, check_store
from engine.stores.sqlite import SQLiteStore


def test_concurrent_processes_and_threads_on_one_file(tmp_path):
    r = run_concurrency(tmp_path, processes=2, threads=2, users_per_thread=2, sessions=2, turns=4)
    print(f"\nconcurrency: {r.processes} processes × {r.threads} threads, {r.users} users, {r.turns} turns in "
          f"{r.seconds:.2f} s ({r.ops_per_second} turns/s), events {r.events_fired}, busy retries {r.busy_retries}")
    assert r.turns == 2 * 2 * 2 * 4
    assert r.events_fired > r.turns // 2  # the gate really opened: extraction raced too
    assert r.lost == 0
    assert r.cross_user_reads == 0
    assert r.errors == []
    assert r.check_problems == []


@pytest.mark.slow
def test_two_concurrent_cli_replays_share_one_db(tmp_path):
    r = run_cli_replays(tmp_path)
    print(f"\ncli replays: {r}")
    assert r["exit_codes"] == [0, 0], r["stderr"]
    assert r["missing_messages"] == 0
    assert r["check_problems"] == []
    assert r["foreign_events_in_reports"] == 0  # each report holds only its own scenario's users


def test_faults_give_clear_errors_answer_and_lose_nothing(tmp_path):
    r = run_faults(tmp_path)
    print(f"\nfaults: {r.total} injected: " + ", ".join(f"{k} {r.handled.get(k, 0)}/{v}" for k, v in r.injected.items()))
    assert r.failures == []
    assert r.lost == 0
    assert r.handled == r.injected
    assert {"extractor timeout", "extractor malformed output", "embedder documents failure", "database locked",
            "read-only database", "disk full", "query parser exception"} <= set(r.injected)


# ------------------------------------------------------------------------------- memlab check


def _good_db(path) -> str:
    clock = VirtualClock(DEFAULT_START)
    engine = MemoryEngine(fast_config(), store=SQLiteStore(str(path)), clock=clock)
    for text in ["My order number is 4471, tag {m}.", "I prefer email; tag {m}.",
                 "My order number is 5502 now, tag {m}.", "Thanks!"]:
        for user in ("alice", "bob"):  # interleaved, so users' message ids interleave too
            engine.turn(user, f"{user}-s1", text.format(m=user_marker(user)))
            clock.advance(35)
    engine.store.close()
    return str(path)


@pytest.fixture(scope="module")
def good_db(tmp_path_factory):
    return _good_db(tmp_path_factory.mktemp("check") / "good.db")


def _corrupt(good: str, tmp_path, sql_fn) -> list[str]:
    path = tmp_path / "bad.db"
    shutil.copy(good, path)
    with SQLiteStore(str(path)) as store:
        sql_fn(store.conn)
        return check_store(store)


def test_check_passes_a_sound_database(good_db, capsys):
    with SQLiteStore(good_db) as store:
        assert check_store(store) == []
        assert store.count_records() > 0
        assert store.conn.execute("SELECT count(*) FROM records WHERE superseded_by IS NOT NULL").fetchone()[0] > 0
    assert check_main(good_db) == 0
    assert "every invariant holds" in capsys.readouterr().out


def _first(conn, sql):
    return conn.execute(sql).fetchone()[0]


CORRUPTIONS = {
    "vector row missing": (
        lambda c: c.execute("DELETE FROM records_vec WHERE rowid = ?", (_first(c, "SELECT max(id) FROM records"),)),
        "has no vector row"),
    "full-text row missing": (
        lambda c: c.execute("DELETE FROM records_fts WHERE rowid = ?", (_first(c, "SELECT min(id) FROM records"),)),
        "has no full-text row"),
    "orphan vector": (
        lambda c: c.execute("DELETE FROM records WHERE id = ?", (_first(c, "SELECT max(id) FROM records"),)),
        "has no record"),
    "cursor beyond last message": (
        lambda c: c.execute("UPDATE cursors SET value = 99999 WHERE name = 'extract' AND user_id = 'alice'"),
        "beyond the session's last message"),
    "cursor on another user's message": (
        lambda c: c.execute("UPDATE cursors SET value = (SELECT min(id) FROM messages WHERE user_id = 'bob') "
                            "WHERE name = 'extract' AND user_id = 'alice'"),
        "which belongs to"),
    "invalid_at without superseded_by": (
        lambda c: c.execute("UPDATE records SET superseded_by = NULL WHERE superseded_by IS NOT NULL"),
        "invalid_at is"),
    "superseded_by another user's record": (
        lambda c: c.execute("UPDATE records SET superseded_by = (SELECT max(id) FROM records WHERE user_id = 'bob') "
                            "WHERE user_id = 'alice' AND superseded_by IS NOT NULL"),
        "cross-user reference: record"),
    "source message of another user": (
        lambda c: c.execute("UPDATE records SET source = json_set(source, '$.message_ids[0]', "
                            "(SELECT min(id) FROM messages WHERE user_id = 'bob')) WHERE user_id = 'alice'"),
        "grounds on message"),
    "record past the cursor": (
        lambda c: c.execute("UPDATE cursors SET value = (SELECT min(id) FROM messages WHERE user_id = 'alice') "
                            "WHERE name = 'extract' AND user_id = 'alice'"),
        "past the extract cursor"),
    "scoring row on another user's record": (
        lambda c: c.execute("UPDATE scores SET record_id = (SELECT min(id) FROM records WHERE user_id = 'bob') "
                            "WHERE user_id = 'alice'"),
        "scoring row(s) of user 'alice'"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_check_finds_each_corruption(name, good_db, tmp_path):
    fn, expected = CORRUPTIONS[name]
    problems = _corrupt(good_db, tmp_path, fn)
    assert problems, f"{name}: check found nothing"
    assert any(expected in p for p in problems), problems


def test_memlab_check_cli_exit_codes(good_db, tmp_path, capsys):
    from engine.cli import main

    assert main(["check", "--db", good_db]) == 0
    bad = tmp_path / "bad.db"
    shutil.copy(good_db, bad)
    with SQLiteStore(str(bad)) as s:
        s.conn.execute("DELETE FROM records_vec WHERE rowid = (SELECT min(id) FROM records)")
    capsys.readouterr()
    assert main(["check", "--db", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "1 problem(s)" in out and "has no vector row" in out
    assert main(["check", "--db", str(tmp_path / "missing.db")]) == 2
    err = capsys.readouterr().err
    assert "no such database file" in err and "Traceback" not in err
    assert not (tmp_path / "missing.db").exists()  # check never creates a database
