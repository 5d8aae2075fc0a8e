"""Crash safety: SIGKILL a worker inside an event and at random times, then check the file.

After every kill: every acknowledged message is stored, records, vectors and full-text rows
match one to one, no record grounds on a message its cursor has not passed, and no cursor moved
backwards. The final clean run must extract everything the killed runs left pending.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.harness.crash import CRASH_POINTS, run_crash

WORKER = [sys.executable, str(Path(__file__).with_name("crash_worker.py"))]


def _print(r) -> None:
    print(f"\ncrash: {r.kills} kills ({r.kills_by_point}), survived {r.survived}, acked turns {r.acked_turns}, "
          f"lost {r.lost}, cursor rewinds {r.cursor_rewinds}, pending after final {r.pending_after_final}")


def test_kills_at_every_point_inside_an_event_and_at_random(tmp_path):
    r = run_crash(tmp_path, rounds=1, random_kills=3, turns=4)
    _print(r)
    assert r.kills_by_point == {**{p: 1 for p in CRASH_POINTS}, "random": 3}  # every kill landed
    assert r.survived == r.kills
    assert r.lost == 0
    assert r.cursor_rewinds == 0
    assert r.check_problems == []
    assert r.pending_after_final == 0 and r.final_ok


@pytest.mark.slow
def test_exec_started_worker_script_survives_kills(tmp_path):
    r = run_crash(tmp_path, worker=WORKER, points=("mid_write",), random_kills=1, turns=4)
    _print(r)
    assert r.kills == 2 and r.survived == 2
    assert r.lost == 0 and r.cursor_rewinds == 0 and r.check_problems == []
    assert r.final_ok


def test_negative_control_without_transactions_the_kill_shows(tmp_path, monkeypatch):
    """The same kill with the store's transactions disabled must leave a detectable half-write,
    so the checks above can fail."""
    monkeypatch.setenv("MEMLAB_CRASH_NO_TX", "1")
    r = run_crash(tmp_path, points=("mid_write",), random_kills=0, turns=4)
    assert r.kills == 1
    assert any("past the extract cursor" in p for p in r.check_problems), r.check_problems
