"""benchmarks/instructions.py without valgrind: its session replay is a plan it can check, and it
says so when valgrind is missing."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_the_session_rounds_replay_their_event_plan(tmp_path, monkeypatch, benchmark_script):
    """The rounds fire events on the same turns every time (the counted run relies on it), count
    only the planned ordinary turns of their group, and refuse a plan they do not replay."""
    tool = benchmark_script("instructions")
    monkeypatch.delenv("MEMLAB_CALLGRIND", raising=False)  # counting switches are no-ops here
    db = tool._session_db(tmp_path, 40)
    assert db.exists() and Path(f"{db}.now").exists()
    _, plan = tool._rounds(db, 6, "long", None)
    assert tool._rounds(db, 6, "long", None)[1] == plan
    assert plan["long"] and not plan["new"]  # the long session's memory writes; a new user's first turns do not
    counted, _ = tool._rounds(db, 6, "long", plan)
    assert counted == 6 - sum(1 for i in plan["long"] if i >= tool.WARM_ROUNDS)
    assert tool._rounds(db, 6, "new", plan)[0] == 6
    wrong = {"long": [i + 1 for i in plan["long"]], "new": plan["new"]}
    with pytest.raises(SystemExit, match="not a replay"):
        tool._rounds(db, 6, "long", wrong)


def test_it_says_when_valgrind_is_missing(tmp_path, monkeypatch, capsys, benchmark_script):
    tool = benchmark_script("instructions")
    monkeypatch.setattr(tool.shutil, "which", lambda name: None)
    assert tool.main(["retrieval", "--work", str(tmp_path)]) == 2
    assert "valgrind is not installed" in capsys.readouterr().err
