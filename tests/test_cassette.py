"""Cassettes: record against the local server, replay with it stopped, byte for byte, no secrets."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.errors import MemlabUsageError, RealModelForbiddenError
from engine.roles.bundle import Models
from engine.roles.cassette import CassetteMissError, CassetteTransport, request_key
from engine.roles.ledger import Ledger
from engine.roles.llm import (
    FORBID_ENV,
    LLMExtractor,
    ModelSettings,
    forbid_real_requests,
    make_chat_model,
)
from engine.roles.types import ExtractionInput, WindowMessage
from tests.fake_openai import FakeOpenAI, content_reply, error_reply, tool_reply, usage

SECRET = "sk-memlab-secret-0123456789"
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", SECRET)
    monkeypatch.delenv(FORBID_ENV, raising=False)


def window(text: str = "I moved to Lisbon yesterday.") -> ExtractionInput:
    return ExtractionInput(
        user_id="u1", session_id="s1",
        new=[WindowMessage(id=7, role="user", speaker="Ann", content=text, at=T0)],
    )


def body_of(payload: dict) -> bytes:
    return json.dumps(payload).encode()


def test_record_then_replay_with_server_stopped_is_byte_identical_and_holds_no_key(tmp_path):
    path = tmp_path / "run.jsonl"
    recorded_ledger, replay_ledger = Ledger(), Ledger()
    with FakeOpenAI() as server:
        server.push(
            tool_reply({"records": [{"content": "Ann moved to Lisbon on 2026-01-04.", "source_ids": [7]}]},
                       usage=usage(400, 60, hit=384)),
            content_reply("Welcome to Lisbon, Ann!", usage=usage(500, 12, hit=448)),
        )
        rec = ModelSettings(base_url=server.base_url, cassette=path, cassette_mode="record", backoff=0)
        roles = Models.real(rec).bind_ledger(recorded_ledger)
        out1 = roles.extractor.extract(window())
        chat1 = roles.chat.invoke("Hello")
        assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"  # the key was really sent
        url = server.base_url
    text = path.read_text()
    assert SECRET not in text and "authorization" not in text.lower() and "bearer" not in text.lower()
    assert len(text.splitlines()) == 2

    play = ModelSettings(base_url=url, cassette=path, cassette_mode="replay", backoff=0, max_retries=0)
    roles = Models.real(play).bind_ledger(replay_ledger)  # the server is gone: any real request would fail
    out2 = roles.extractor.extract(window())
    chat2 = roles.chat.invoke("Hello")
    assert out2.model_dump_json() == out1.model_dump_json()
    assert chat2.content == chat1.content and chat2.usage_metadata == chat1.usage_metadata
    keep = ("input_tokens", "output_tokens", "cache_hit_tokens", "cache_miss_tokens", "cost")
    assert [[getattr(c, k) for k in keep] for c in replay_ledger.calls] == [
        [getattr(c, k) for k in keep] for c in recorded_ledger.calls]


def test_transport_replays_the_exact_bytes(tmp_path):
    path = tmp_path / "c.jsonl"
    payload = {"model": "m", "messages": [{"role": "user", "content": "héllo"}], "temperature": 0}
    with FakeOpenAI() as server:
        server.push(content_reply("ünïcode ✓ answer", usage=usage(3, 4)))
        with httpx.Client(transport=CassetteTransport(mode="record", path=path)) as client:
            recorded = client.post(f"{server.base_url}/chat/completions", content=body_of(payload),
                                   headers={"Authorization": f"Bearer {SECRET}"})
    with httpx.Client(transport=CassetteTransport(mode="replay", path=path)) as client:
        replayed = client.post("http://anywhere.invalid/v1/chat/completions", content=body_of(payload))
    assert replayed.status_code == recorded.status_code == 200
    assert replayed.content == recorded.content
    assert replayed.headers["content-type"] == "application/json"
    assert SECRET not in path.read_text()


def test_replay_miss_names_the_cassette_and_the_fix(tmp_path):
    path = tmp_path / "c.jsonl"
    with FakeOpenAI() as server:
        server.push(tool_reply({"records": []}))
        s = ModelSettings(base_url=server.base_url, cassette=path, cassette_mode="record")
        LLMExtractor(make_chat_model(s), settings=s).extract(window())
    s = ModelSettings(base_url="http://127.0.0.1:9/v1", cassette=path, cassette_mode="replay", max_retries=3)
    ex = LLMExtractor(make_chat_model(s), settings=s)
    with pytest.raises(CassetteMissError, match=r"c\.jsonl has no response .* re-record"):
        ex.extract(window("A different message."))  # a usage error: not retried, not wrapped


def test_replay_of_a_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(MemlabUsageError, match="does not exist; record it first"):
        make_chat_model(ModelSettings(cassette=tmp_path / "none.jsonl", cassette_mode="replay"))


def test_a_retried_request_replays_its_answers_in_order(tmp_path):
    path = tmp_path / "c.jsonl"
    with FakeOpenAI() as server:
        server.push(error_reply(500), tool_reply({"records": []}))
        s = ModelSettings(base_url=server.base_url, cassette=path, cassette_mode="record", backoff=0)
        ex = LLMExtractor(make_chat_model(s), settings=s)
        ex.extract(window())
        assert ex.last_result.attempts == 2
    s = ModelSettings(base_url="http://127.0.0.1:9/v1", cassette=path, cassette_mode="replay", backoff=0)
    ledger = Ledger()
    ex = LLMExtractor(make_chat_model(s), settings=s, ledger=ledger)
    ex.extract(window())
    assert [c.ok for c in ledger.calls] == [False, True]  # the 500, then the answer: same history


def test_auto_records_misses_and_replays_hits_across_sessions(tmp_path):
    path = tmp_path / "c.jsonl"
    with FakeOpenAI() as server:
        server.push(content_reply("one"), content_reply("two"))
        s = ModelSettings(base_url=server.base_url, cassette=path, cassette_mode="auto")
        assert make_chat_model(s).invoke("a").content == "one"
        model = make_chat_model(s)  # a new session: "a" replays, "b" is recorded
        assert model.invoke("a").content == "one"
        assert model.invoke("b").content == "two"
        assert len(server.requests) == 2
    assert len(CassetteTransport(mode="replay", path=path)) == 2


def test_replay_is_offline_so_the_forbid_switch_allows_it(tmp_path):
    path = tmp_path / "c.jsonl"
    with FakeOpenAI() as server:
        server.push(content_reply("cached answer"))
        s = ModelSettings(base_url=server.base_url, cassette=path, cassette_mode="record")
        make_chat_model(s).invoke("hi")
    with forbid_real_requests():
        # recorded locally, replayed for DeepSeek's own endpoint: same path, same request hash
        assert make_chat_model(ModelSettings(cassette=path)).invoke("hi").content == "cached answer"
        with pytest.raises(RealModelForbiddenError):
            make_chat_model(ModelSettings(cassette=path, cassette_mode="record"))


def test_corrupt_cassette_line_is_reported(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"key": "abc"}\n')
    with pytest.raises(MemlabUsageError, match="line 1 is not a cassette entry"):
        CassetteTransport(mode="replay", path=path)


def test_request_key_ignores_bookkeeping_and_hosts_but_not_content():
    base = {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0.0}
    k, canonical = request_key("POST", "/v1/chat/completions", body_of(base))
    assert canonical["body"] == base
    assert request_key("post", "/v1/chat/completions", body_of({**base, "user": "u", "stream_options": {}}))[0] == k
    assert request_key("POST", "/v1/chat/completions", body_of({**base, "temperature": 0.7}))[0] != k
    assert request_key("POST", "/chat/completions", body_of(base))[0] != k


json_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))


@given(st.dictionaries(st.sampled_from(["model", "messages", "tools", "temperature", "seed", "user"]),
                       json_scalar, min_size=1))
def test_request_key_does_not_depend_on_key_order(body):
    forward = json.dumps(body).encode()
    backward = json.dumps(dict(reversed(list(body.items())))).encode()
    assert request_key("POST", "/p", forward)[0] == request_key("POST", "/p", backward)[0]


def test_async_clients_record_and_replay_too(tmp_path):
    import asyncio

    path = tmp_path / "c.jsonl"
    with FakeOpenAI() as server:
        server.push(content_reply("async answer"))
        s = ModelSettings(base_url=server.base_url, cassette=path, cassette_mode="record")
        assert asyncio.run(make_chat_model(s).ainvoke("hi")).content == "async answer"
    s = ModelSettings(base_url="http://127.0.0.1:9/v1", cassette=path, cassette_mode="replay")
    assert asyncio.run(make_chat_model(s).ainvoke("hi")).content == "async answer"
    assert SECRET not in path.read_text()
