"""`memlab export-extractions`: extraction windows and returned records as chat-format JSONL pairs,
from scenario files and from a database, and a local extractor behind an OpenAI-compatible base URL
(engine.eval.cost.responder on 127.0.0.1) plugged in as the extractor role alone."""

from __future__ import annotations

import json
from pathlib import Path

from fake_openai import FakeOpenAI

from engine.cli import main
from engine.eval.cost.responder import ScriptedResponder
from engine.eval.export import system_prompt
from engine.stores.base import open_store

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
NEEDLE = str(SCENARIOS / "needle-basic.yaml")
UPDATE = str(SCENARIOS / "knowledge-update.yaml")


def _run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _export(argv, out: Path, capsys) -> list[dict]:
    code, text, err = _run(["export-extractions", *argv, "--out", str(out)], capsys)
    assert code == 0, err
    assert f"to {out}" in text
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def _check_pair(pair: dict) -> tuple[dict, dict]:
    """The pair's shape; returns its user input and assistant output, parsed."""
    assert set(pair) == {"messages", "meta"}
    assert [m["role"] for m in pair["messages"]] == ["system", "user", "assistant"]
    assert pair["messages"][0]["content"] == system_prompt()
    inp = json.loads(pair["messages"][1]["content"])
    out = json.loads(pair["messages"][2]["content"])
    # an event's window also carries the profile the extractor is asked about (induct_in_extraction)
    assert set(inp) in ({"context", "new"}, {"context", "new", "profile"}) and inp["new"]
    assert ("profile" in inp) == ("profile" in out)
    new_ids = {m["id"] for m in inp["new"]}
    for rec in out["records"]:
        assert rec["content"] and set(rec["source_ids"]) <= new_ids
    assert set(pair["meta"]) == {"scenario", "user", "session", "event_id", "event_no", "at", "purpose", "extractor",
                                 "model"}
    return inp, out


def test_export_from_scenario_files(tmp_path, capsys):
    pairs = _export([NEEDLE, UPDATE], tmp_path / "x.jsonl", capsys)
    assert len(pairs) >= 2
    for p in pairs:
        _check_pair(p)
        assert p["meta"]["extractor"] == "ScriptedExtractor" and p["meta"]["model"] == "scripted"
        assert p["meta"]["purpose"] in ("event", "live-window")
        if p["meta"]["purpose"] == "live-window":  # the guard reads pending user messages alone
            assert json.loads(p["messages"][1]["content"])["context"] == []
    assert [p["meta"]["scenario"] for p in pairs] == sorted(
        (p["meta"]["scenario"] for p in pairs), key=["needle-basic.yaml", "knowledge-update.yaml"].index)
    assert sum(len(json.loads(p["messages"][2]["content"])["records"]) for p in pairs) > 0
    # within a scenario, pairs follow the log; a window's context precedes its new messages
    ids = [p["meta"]["event_id"] for p in pairs if p["meta"]["scenario"] == "needle-basic.yaml"]
    assert ids == sorted(ids)


def test_skip_empty_leaves_out_windows_with_no_records(tmp_path, capsys):
    every = _export([NEEDLE], tmp_path / "all.jsonl", capsys)
    kept = _export([NEEDLE, "--skip-empty"], tmp_path / "some.jsonl", capsys)
    assert 0 < len(kept) < len(every)
    assert all(json.loads(p["messages"][2]["content"])["records"] for p in kept)


def test_export_from_a_database_matches_the_scenario_export(tmp_path, capsys):
    db = tmp_path / "run.db"
    code, _, err = _run(["replay", NEEDLE, "--db", str(db)], capsys)
    assert code == 0, err
    from_db = _export(["--db", str(db)], tmp_path / "db.jsonl", capsys)
    from_file = _export([NEEDLE], tmp_path / "file.jsonl", capsys)
    assert [p["messages"] for p in from_db] == [p["messages"] for p in from_file]
    assert all(p["meta"]["scenario"] is None and p["meta"]["user"] == "alice" for p in from_db)
    assert [p["meta"]["event_id"] for p in from_db] == [p["meta"]["event_id"] for p in from_file]


def test_an_empty_database_says_so_and_writes_nothing(tmp_path, capsys):
    db = tmp_path / "empty.db"
    open_store(str(db)).close()
    out = tmp_path / "x.jsonl"
    code, _, err = _run(["export-extractions", "--db", str(db), "--out", str(out)], capsys)
    assert code == 1 and not out.exists()
    assert "no extractions to export" in err and "memlab replay" in err and "Traceback" not in err


def test_a_missing_database_or_no_source_is_a_usage_error(tmp_path, capsys):
    missing = tmp_path / "nope.db"
    code, _, err = _run(["export-extractions", "--db", str(missing), "--out", str(tmp_path / "x.jsonl")], capsys)
    assert code == 2 and "no database at" in err and not missing.exists()
    code, _, err = _run(["export-extractions", "--out", str(tmp_path / "x.jsonl")], capsys)
    assert code == 2 and "--db FILE" in err


def test_the_same_input_gives_the_same_file_byte_for_byte(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _export([NEEDLE, UPDATE], a, capsys)
    _export([NEEDLE, UPDATE], b, capsys)
    assert a.read_bytes() == b.read_bytes()
    db = tmp_path / "run.db"
    assert main(["replay", UPDATE, "--db", str(db)]) == 0
    c, d = tmp_path / "c.jsonl", tmp_path / "d.jsonl"
    _export(["--db", str(db)], c, capsys)
    _export(["--db", str(db)], d, capsys)
    assert c.read_bytes() == d.read_bytes()


class _Recording(ScriptedResponder):
    """The scripted server, keeping each structured answer's tool arguments as sent."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[str, str]] = []

    def __call__(self, request):
        reply = super().__call__(request)
        calls = reply.body["choices"][0]["message"].get("tool_calls") or []
        for c in calls:
            self.answers.append((c["function"]["name"], c["function"]["arguments"]))
        return reply


def test_a_local_extractor_behind_a_base_url_plugs_in_as_the_extractor_role(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    responder = _Recording()
    with FakeOpenAI(responder=responder) as server:
        pairs = _export([NEEDLE, "--extractor-base-url", server.base_url, "--extractor-model", "local-extractor"],
                        tmp_path / "local.jsonl", capsys)
        requests = [r.body for r in server.requests]
    # only the extractor went to the server; every other role (and the chat model) stayed scripted
    assert requests and all(r["tool_choice"]["function"]["name"] == "ExtractionOutput" for r in requests)
    assert all(r["model"] == "local-extractor" for r in requests)
    assert len(pairs) == len(requests) == len(responder.answers)
    for pair, request, (tool, arguments) in zip(pairs, requests, responder.answers, strict=True):
        _check_pair(pair)
        assert pair["meta"]["extractor"] == "LLMExtractor" and pair["meta"]["model"] == "local-extractor"
        sent = {m["role"]: m["content"] for m in request["messages"]}
        assert pair["messages"][0]["content"] == sent["system"]  # the exact prompt the extractor sent
        assert pair["messages"][1]["content"] == sent["user"]  # byte for byte
        assert tool == "ExtractionOutput"
        assert json.loads(pair["messages"][2]["content"]) == json.loads(arguments)  # what the server returned
    # the local extractor answers like the scripted one, so the pairs match a scripted export's
    scripted = _export([NEEDLE], tmp_path / "scripted.jsonl", capsys)
    assert [p["messages"] for p in pairs] == [p["messages"] for p in scripted]
