"""Privacy: forgetting a user erases their bytes from the file; keys never reach logs or files;
a session import never executes code.
"""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path

import pytest

from benchmarks.harness.common import fast_config, user_marker
from engine.core.clock import VirtualClock
from engine.memory.engine import DEFAULT_START, MemoryEngine
from engine.roles.bundle import Models
from engine.stores.sqlite import SQLiteStore
from tests.fake_openai import FakeOpenAI, content_reply, requested_tool, tool_reply


def _file_bytes(path: str) -> bytes:
    return b"".join(Path(p).read_bytes() for p in (path, path + "-wal", path + "-shm", path + "-journal")
                    if Path(p).exists())


def _two_users(path: str) -> None:
    clock = VirtualClock(DEFAULT_START)
    engine = MemoryEngine(fast_config(), store=SQLiteStore(path), clock=clock)
    for i in range(5):
        for user in ("alice", "bob"):
            engine.turn(user, f"{user}-s", f"My secret locker code is {user_marker(user)} and my order is {i}.")
            clock.advance(35)
    engine.store.close()


def _assert_forgotten(path: str) -> None:
    data = _file_bytes(path)
    assert user_marker("alice").encode() not in data
    assert b"alice" not in data
    assert user_marker("bob").encode() in data
    with SQLiteStore(path) as s:
        assert s.events(user_id="alice") == []
        assert s.conn.execute("SELECT count(*) FROM scores WHERE user_id = 'alice'").fetchone()[0] == 0
        assert s.messages("alice") == [] and s.records("alice", include_invalid=True) == []
        assert s.events(user_id="bob") and s.records("bob")


def test_memlab_forget_cli_erases_the_users_bytes(tmp_path, capsys):
    from engine.cli import main

    path = str(tmp_path / "p.db")
    _two_users(path)
    assert user_marker("alice").encode() in _file_bytes(path)  # present before: the test can fail
    assert main(["forget", "--db", path, "--user", "alice"]) == 0
    assert "forgot user 'alice'" in capsys.readouterr().out
    _assert_forgotten(path)


def test_engine_forget_user_erases_the_users_bytes(tmp_path):
    path = str(tmp_path / "p.db")
    _two_users(path)
    engine = MemoryEngine(fast_config(), store=SQLiteStore(path))
    counts = engine.forget_user("alice")
    assert counts["messages"] == 10 and counts["records"] > 0 and counts["events"] > 0
    engine.store.close()
    _assert_forgotten(path)


FAKE_KEY = "sk-memlab-fake-0123456789abcdef"


def _responder(request):
    if request.get("tools"):
        name = requested_tool(request)
        return tool_reply({"records": []} if "xtract" in name else {}, name=name)
    return content_reply("Noted.")


def test_api_key_never_reaches_db_event_log_cassette_or_logs(tmp_path, monkeypatch, caplog):
    from engine.roles.llm import ModelSettings

    monkeypatch.setenv("DEEPSEEK_API_KEY", FAKE_KEY)
    caplog.set_level(logging.DEBUG)
    path, cassette = str(tmp_path / "k.db"), tmp_path / "calls.cassette"
    with FakeOpenAI(responder=_responder) as server:
        settings = ModelSettings(base_url=server.base_url, api_key_env="DEEPSEEK_API_KEY", timeout=5,
                                 max_retries=0, backoff=0, cassette=str(cassette), cassette_mode="record")
        clock = VirtualClock(DEFAULT_START)
        engine = MemoryEngine(fast_config(), store=SQLiteStore(path), clock=clock, models=Models.real(settings))
        for text in ("My order number is 4471.", "Please email me.", "What is my order number?"):
            engine.turn("k", "ks", text)
            clock.advance(35)
        assert server.requests, "the fake server saw no request: the real path was not exercised"
        assert any(FAKE_KEY in r.headers.get("authorization", "") for r in server.requests)  # the key was used
        log = json.dumps([e.to_dict() for e in engine.store.events()])
        ledger = json.dumps(engine.ledger.summary(), default=str)
        engine.store.close()
    assert FAKE_KEY not in log and FAKE_KEY not in ledger
    assert FAKE_KEY.encode() not in _file_bytes(path)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.startswith("calls") for p in files), "no cassette was written"
    for p in files:
        assert FAKE_KEY.encode() not in p.read_bytes(), p
    assert FAKE_KEY not in caplog.text


class _Evil:
    def __reduce__(self):
        return (Path.touch, (Path(_EVIL_TARGET[0]),))


_EVIL_TARGET = [""]


def test_session_import_never_unpickles(tmp_path):
    state = pytest.importorskip("lab.state")
    target = tmp_path / "pwned"
    _EVIL_TARGET[0] = str(target)
    payload = pickle.dumps(_Evil())
    assert not target.exists()
    with pytest.raises(state.LabImportError):
        state.import_session(payload)
    with pytest.raises(state.LabImportError):
        state.import_session(payload.decode("latin-1"))
    assert not target.exists()
    pickle.loads(payload)  # the payload is live: unpickling it would have run code
    assert target.exists()
