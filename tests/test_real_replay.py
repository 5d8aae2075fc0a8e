"""`memlab replay --models real` through the real client against a local server, and cassettes."""

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.eval.cost.responder import scripted_server

SCENARIO = str(Path(__file__).resolve().parent.parent / "scenarios" / "needle-basic.yaml")


def _replay(args, capsys):
    code = main(["replay", SCENARIO, *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_replay_with_real_client_matches_scripted_and_fills_the_ledger(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    scripted_json = tmp_path / "scripted.json"
    _replay(["--json", str(scripted_json)], capsys)
    real_json = tmp_path / "real.json"
    with scripted_server() as server:
        text = _replay(["--models", "real", "--base-url", server.base_url, "--json", str(real_json)], capsys)
        seen = len(server.requests)
    real = json.loads(real_json.read_text())
    scripted = json.loads(scripted_json.read_text())
    # the same decisions came back through HTTP, structured output and validation
    assert [p["expect"] for p in real["probes"]] == [p["expect"] for p in scripted["probes"]]
    calls = real["calls"]
    assert {"chat", "extractor"} <= set(calls)
    # the rules parse the questions; the model parser only sees the few the rules cannot resolve
    assert calls.get("query_parser", {"calls": 0})["calls"] < calls["chat"]["calls"] / 4
    assert sum(v["calls"] for v in calls.values()) == seen  # every HTTP request is in the ledger
    assert calls["chat"]["input_tokens"] > 0 and calls["chat"]["cost"] > 0
    assert sum(v["cache_hit_tokens"] for v in calls.values()) > 0  # static prompts hit the cache
    assert "recall:" in text


def test_cassette_records_then_replays_offline_byte_for_byte(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test-secret-0000")
    cassette = tmp_path / "run.jsonl"
    first = tmp_path / "first.json"
    with scripted_server() as server:
        _replay(["--models", "real", "--base-url", server.base_url, "--cassette", str(cassette),
                 "--json", str(first)], capsys)
        url = server.base_url
    assert cassette.exists() and "sk-test-secret" not in cassette.read_text()
    second = tmp_path / "second.json"
    # the server is gone: every answer must come from the cassette
    _replay(["--models", "cassette", "--cassette", str(cassette), "--base-url", url, "--json", str(second)], capsys)
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert [p["reply"] for p in a["probes"]] == [p["reply"] for p in b["probes"]]
    assert a["events"] == b["events"]


def test_cassette_needs_a_file(capsys):
    assert main(["replay", SCENARIO, "--models", "cassette"]) == 2
    assert "--cassette" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--set", "top_k"], ["--preset", "pirate"], ["--set", "tau=-5"]])
def test_bad_replay_arguments_are_one_line_errors(bad, capsys):
    assert main(["replay", SCENARIO, *bad]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memlab: error:") and "Traceback" not in err


def test_the_chat_call_is_priced_with_the_configured_prices(monkeypatch):
    from engine.memory.engine import MemoryEngine
    from engine.roles.bundle import Models
    from engine.roles.ledger import Price
    from engine.roles.llm import ModelSettings

    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    price = Price(cache_hit_input=0.0, cache_miss_input=100.0, output=1000.0)
    with scripted_server() as server:
        models = Models.real(ModelSettings(base_url=server.base_url, price=price))
        engine = MemoryEngine(models=models)
        engine.turn("u", "s", "Hello there.")
    chat = [c for c in engine.ledger.calls if c.role == "chat"]
    assert len(chat) == 1
    c = chat[0]
    assert c.cost == pytest.approx(price.cost(input_tokens=c.input_tokens, output_tokens=c.output_tokens,
                                              cache_hit_tokens=c.cache_hit_tokens))
    assert c.cost > 0
