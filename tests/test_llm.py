"""Real model roles against a local OpenAI-compatible server (tests/fake_openai.py), offline.

The real ChatDeepSeek client is pointed at 127.0.0.1, so HTTP, structured output, retries,
repairs and usage accounting run exactly as they would against DeepSeek.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_deepseek import ChatDeepSeek

from engine.core.errors import (
    ConfigError,
    ModelCallError,
    ModelOutputError,
    RealModelForbiddenError,
)
from engine.roles.ledger import DEEPSEEK_PRICE, Ledger, Price
from engine.roles.llm import (
    FORBID_ENV,
    LLMConsolidator,
    LLMExtractor,
    LLMProfileInducer,
    LLMQueryParser,
    LLMTuner,
    ModelSettings,
    allow_real_requests,
    forbid_real_requests,
    is_loopback_url,
    make_chat_model,
    real_requests_forbidden,
    real_roles,
    record_chat_call,
    repair_weights,
)
from engine.roles.types import (
    ROLE_NAMES,
    ConsolidationInput,
    Consolidator,
    ExtractionInput,
    Extractor,
    InductionInput,
    ProfileInducer,
    QueryInput,
    QueryParser,
    RecordView,
    TuneInput,
    Tuner,
    WindowMessage,
)
from tests.fake_openai import (  # noqa: F401 - fake_openai is a fixture
    FakeOpenAI,
    content_reply,
    error_reply,
    fake_openai,
    raw_reply,
    tool_reply,
    usage,
)

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
UNROUTABLE = "http://192.0.2.1:9/v1"  # TEST-NET-1: never routed; the guard must stop us first


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.delenv(FORBID_ENV, raising=False)


def settings(server: FakeOpenAI, **kw) -> ModelSettings:
    base = {"base_url": server.base_url, "timeout": 5, "max_retries": 2, "backoff": 0}
    return ModelSettings(**{**base, **kw})


def window() -> ExtractionInput:
    return ExtractionInput(
        user_id="u1",
        session_id="s1",
        context=[WindowMessage(id=1, role="user", speaker="Ann", content="Hi there", at=T0)],
        new=[
            WindowMessage(id=2, role="user", speaker="Ann", content="I moved to Lisbon yesterday.", at=T0),
            WindowMessage(id=3, role="assistant", speaker="assistant", content="Welcome to Lisbon!", at=T0),
        ],
    )


def role(cls, server, ledger=None, **kw):
    s = settings(server, **kw)
    return cls(make_chat_model(s), settings=s, ledger=ledger if ledger is not None else Ledger())


# ---- settings and the chat model -------------------------------------------------------------


def test_base_url_builds_chatdeepseek_with_client_retries_off_and_dummy_key(fake_openai):
    model = make_chat_model(settings(fake_openai))
    assert isinstance(model, ChatDeepSeek)
    assert model.max_retries == 0
    assert model.api_base == fake_openai.base_url
    fake_openai.push(content_reply("hello"))
    assert model.invoke("hi").content == "hello"
    assert fake_openai.requests[0].headers["authorization"] == "Bearer memlab-local-no-key"


def test_key_comes_from_the_named_environment_variable(fake_openai, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-from-env")
    model = make_chat_model(settings(fake_openai, api_key_env="MY_KEY"))
    fake_openai.push(content_reply("ok"))
    model.invoke("hi")
    assert fake_openai.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_missing_key_without_base_url_is_a_usage_error_naming_the_variable():
    with allow_real_requests(), pytest.raises(ConfigError, match="DEEPSEEK_API_KEY is not set"):
        make_chat_model(ModelSettings())


def test_settings_from_env_and_validation():
    s = ModelSettings.from_env({"MEMLAB_MODEL": "qwen2.5", "MEMLAB_BASE_URL": "http://localhost:11434/v1"})
    assert (s.model, s.base_url, s.provider) == ("qwen2.5", "http://localhost:11434/v1", None)
    assert s.uses_deepseek_client and s.target_url == "http://localhost:11434/v1"
    assert ModelSettings.from_env({}, model="deepseek-reasoner").model == "deepseek-reasoner"
    assert ModelSettings.from_env({"MEMLAB_PROVIDER": "openai", "MEMLAB_MODEL": "gpt-4o-mini"}).target_url is None
    with pytest.raises(ConfigError) as err:
        ModelSettings(timeout=0, max_retries=-1)
    assert len(err.value.problems) == 2


# ---- structured output for every role ----------------------------------------------------------


def test_extractor_parses_records_and_sends_static_system_then_compact_json(fake_openai):
    rec = {"content": "Ann moved to Lisbon on 2026-01-04.", "memory_type": "episodic", "tags": ["episode"],
           "time": "2026-01-04", "location": "Lisbon", "keywords": ["Lisbon", "moved"], "source_ids": [2],
           "speaker": "Ann"}
    fake_openai.push(tool_reply({"records": [rec]}), tool_reply({"records": []}))
    ex = role(LLMExtractor, fake_openai)
    assert isinstance(ex, Extractor)
    out = ex.extract(window())
    assert out.records[0].location == "Lisbon" and out.records[0].source_ids == [2]
    assert ex.last_result.repairs == () and ex.last_result.attempts == 1
    ex.extract(window().model_copy(update={"context": []}))
    first, second = (r.body for r in fake_openai.requests)
    assert [m["role"] for m in first["messages"]] == ["system", "user"]  # no history
    assert first["messages"][0] == second["messages"][0]  # cacheable prefix
    payload = json.loads(first["messages"][1]["content"])
    assert [m["id"] for m in payload["new"]] == [2, 3] and payload["context"][0]["id"] == 1
    assert ", " not in first["messages"][1]["content"]  # compact
    assert first["tool_choice"]["function"]["name"] == "ExtractionOutput"
    assert first["temperature"] == 0.0


def test_query_parser_consolidator_tuner_inducer_parse(fake_openai):
    fake_openai.push(
        tool_reply({"text": "Where did I move?", "anchor": "move", "keywords": ["move"], "target_types": ["episodic"],
                    "time": {"op": "before", "start": "2026-01-01T00:00:00+00:00",
                             "end": "2026-01-05T00:00:00+00:00", "granularity": "day"},
                    "answer_dimension": "location"}),
        tool_reply({"action": "SUPERSEDE", "reason": "moved again"}),
        tool_reply({"alpha": 0.5, "beta": 0.3, "gamma": 0.2, "w0": 0.2, "w1": 0.7, "w2": 0.1, "rationale": "r"}),
        tool_reply({"add": {"identity": ["lives in Lisbon"]}, "remove": {"identity": ["lives in Porto"]}}),
    )
    qp, co, tu, ind = (role(c, fake_openai) for c in (LLMQueryParser, LLMConsolidator, LLMTuner, LLMProfileInducer))
    assert isinstance(qp, QueryParser) and isinstance(co, Consolidator)
    assert isinstance(tu, Tuner) and isinstance(ind, ProfileInducer)
    q = qp.parse(QueryInput(text="Where did I move?", now=T0))
    assert q.time.op == "before" and q.time.end == datetime(2026, 1, 5, tzinfo=UTC) and q.answer_dimension == "location"
    view = RecordView(content="Ann lives in Porto", memory_type="profile")
    d = co.decide(ConsolidationInput(new=view.model_copy(update={"content": "Ann lives in Lisbon"}), existing=view,
                                     cosine=0.9))
    assert d.action == "SUPERSEDE"
    t = tu.tune(TuneInput(theme="travel", samples=["flights"]))
    assert (t.alpha, t.w1) == (0.5, 0.7) and tu.last_result.repairs == ()
    i = ind.induct(InductionInput(profile={"identity": ["lives in Porto"]}, records=[view]))
    assert i.add == {"identity": ["lives in Lisbon"]}
    names = [r.body["tool_choice"]["function"]["name"] for r in fake_openai.requests]
    assert names == ["ParsedQuery", "ConsolidationDecision", "TuneOutput", "InductionOutput"]


# ---- retries and repairs -----------------------------------------------------------------------


def test_http_500_then_success_retries_and_ledger_records_each_attempt(fake_openai):
    ledger = Ledger()
    fake_openai.push(error_reply(500), tool_reply({"records": []}, usage=usage(50, 5)))
    ex = role(LLMExtractor, fake_openai, ledger)
    assert ex.extract(window()).records == []
    assert len(fake_openai.requests) == 2 and ex.last_result.attempts == 2
    a, b = ledger.calls
    assert (a.ok, a.attempts, b.ok, b.attempts) == (False, 1, True, 2)
    assert "HTTP 500" in a.error and a.input_tokens == 0
    assert b.input_tokens == 50


def test_malformed_tool_arguments_then_success(fake_openai):
    fake_openai.push(tool_reply('{"records": [{"content": '), tool_reply({"records": []}))
    ex = role(LLMExtractor, fake_openai)
    assert ex.extract(window()).records == []
    assert len(fake_openai.requests) == 2


def test_extractor_repairs_source_ids_types_tags_and_extra_fields_and_logs_them(fake_openai, caplog):
    bad = {"records": [
        {"content": "Ann moved to Lisbon.", "memory_type": "event", "tags": ["episode", "gossip"],
         "source_ids": [1, 2, 99], "confidence": 0.9},
        {"content": "Ann likes trams.", "source_ids": [42]},
        {"content": "  "},
    ]}
    fake_openai.push(tool_reply(bad))
    ex = role(LLMExtractor, fake_openai)
    with caplog.at_level(logging.INFO, logger="engine.roles.llm"):
        out = ex.extract(window())
    assert len(fake_openai.requests) == 1  # repaired, not retried
    r0, r1 = out.records
    assert r0.source_ids == [2]  # context id 1 and unknown 99 dropped
    assert r1.source_ids == [2, 3]  # none valid: all new ids
    assert r0.memory_type == "fact" and r0.tags == ["episode"]
    repairs = " | ".join(ex.last_result.repairs)
    for needle in ("confidence", "memory_type 'event'", "gossip", "source_ids [1, 2, 99]", "records[2] dropped"):
        assert needle in repairs
    assert sum("repair" in m for m in caplog.messages) == len(ex.last_result.repairs)


def test_tuner_passes_weights_through_unrepaired_so_the_engine_repairs_them_once(fake_openai):
    # Deliberate change: the tuner role no longer renormalises; the engine's tune step repairs
    # (engine.core.config.repair_weights) exactly once and logs it (see the next test).
    fake_openai.push(tool_reply({"alpha": 0.6, "beta": 0.6, "gamma": 0.3, "w0": 2.0, "w1": 0.5, "w2": 0.5}))
    tu = role(LLMTuner, fake_openai)
    t = tu.tune(TuneInput(theme="x"))
    assert (t.alpha, t.beta, t.gamma, t.w0, t.w1, t.w2) == (0.6, 0.6, 0.3, 2.0, 0.5, 0.5)
    assert tu.last_result.repairs == ()
    fixed, notes = repair_weights({n: getattr(t, n) for n in ("alpha", "beta", "gamma", "delta", "w0", "w1", "w2")})
    assert math.isclose(fixed["alpha"] + fixed["beta"] + fixed["gamma"], 1.0) and math.isclose(fixed["alpha"], 0.4)
    assert math.isclose(fixed["w0"], 0.5)  # w0 clipped to 1 first, then renormalised
    assert any("renormalised" in r for r in notes) and any("w0 2 clipped" in r for r in notes)


def test_tuner_schema_faults_are_retried_not_repaired(fake_openai):
    fake_openai.push(tool_reply({"alpha": "lots", "beta": 0.2}), tool_reply({"alpha": 0.5, "beta": 0.3, "gamma": 0.2}))
    ledger = Ledger()
    tu = role(LLMTuner, fake_openai, ledger)
    t = tu.tune(TuneInput(theme="x"))
    assert (t.alpha, t.beta, t.gamma) == (0.5, 0.3, 0.2) and tu.last_result.attempts == 2
    assert [c.ok for c in ledger.calls] == [False, True]


def test_bad_weights_from_the_llm_tuner_are_repaired_once_in_the_engine_event_log():
    from engine.core.clock import VirtualClock
    from engine.core.config import MemoryConfig
    from engine.memory.engine import MemoryEngine
    from engine.roles.bundle import Models

    bad = {"alpha": 0.9, "beta": 0.9, "gamma": 0.9, "w0": 2.0, "w1": 0.8, "w2": 0.1, "rationale": "r"}
    with FakeOpenAI(responder=lambda request: tool_reply(bad)) as server:
        models = Models.scripted()
        s = settings(server)
        models.tuner = LLMTuner(make_chat_model(s), settings=s)
        clock = VirtualClock(T0)
        cfg = MemoryConfig.from_preset("customer service", tau_m=1, slice_value=0.01, trigger_threshold=2,
                                       tune_weights=True)
        engine = MemoryEngine(cfg, clock=clock, models=models)
        for line in ["Hi, I'm Li Mingxuan, I work as a data analyst.", "My order number is 88231.",
                     "I prefer email over phone calls.", "My dog is called Rex."]:
            engine.turn("alice", "s1", line)
            clock.advance(60)
    tunes = [e.payload for e in engine.store.events(kind="tune") if not e.payload.get("cached")]
    assert tunes and all(p["violations"] and p["repairs"] for p in tunes)
    for p in tunes:
        w = p["weights"]
        assert math.isclose(w["alpha"] + w["beta"] + w["gamma"], 1.0) and math.isclose(w["w0"] + w["w1"] + w["w2"], 1.0)
    assert models.tuner.last_result.repairs == ()  # the role repaired nothing: the repair happened once
    tuner_calls = [c for c in engine.ledger.calls if c.role == "tuner"]
    assert len(tuner_calls) == len(tunes) and all(c.model == "deepseek-chat" for c in tuner_calls)  # bound ledger


def test_json_content_instead_of_tool_call_is_parsed_and_action_normalised(fake_openai):
    fake_openai.push(content_reply('```json\n{"action": "keep both", "reason": "different"}\n```'))
    co = role(LLMConsolidator, fake_openai)
    view = RecordView(content="a", memory_type="fact")
    assert co.decide(ConsolidationInput(new=view, existing=view, cosine=0.5)).action == "KEEP_BOTH"
    assert len(co.last_result.repairs) == 2


def test_query_parser_repairs_time_and_types(fake_openai):
    fake_openai.push(
        tool_reply({"text": "other", "target_types": ["event", "fact"], "answer_dimension": "who",
                    "time": {"op": "on", "start": "2026-01-04T23:59:00", "end": "2026-01-04T00:00:00"}}),
        tool_reply({"time": {"op": "sometime", "start": "x", "end": "y"}}),
    )
    qp = role(LLMQueryParser, fake_openai)
    q = qp.parse(QueryInput(text="What did I do?", now=T0))
    assert q.text == "What did I do?" and q.target_types == ["fact"] and q.answer_dimension is None
    assert q.time.start == datetime(2026, 1, 4, tzinfo=UTC) and q.time.end.tzinfo is not None
    assert len(qp.last_result.repairs) == 5
    assert qp.parse(QueryInput(text="When?", now=T0)).time is None


@pytest.mark.parametrize("max_retries", [0, 1, 3])
def test_exhausted_retries_raise_model_output_error_after_one_plus_max_retries_requests(fake_openai, max_retries):
    ledger = Ledger()
    fake_openai.push(*[tool_reply({"records": "nope"}) for _ in range(5)])
    ex = role(LLMExtractor, fake_openai, ledger, max_retries=max_retries)
    with pytest.raises(ModelOutputError, match=r"extractor .* failed after \d attempt"):
        ex.extract(window())
    assert len(fake_openai.requests) == 1 + max_retries
    assert [c.ok for c in ledger.calls] == [False] * (1 + max_retries)


@pytest.mark.parametrize(
    ("reply", "match"),
    [(tool_reply({"action": "MERGE"}), "MERGE without merged_content"),
     (raw_reply("this is not json"), "malformed response"),
     (tool_reply({"action": "DELETE"}), "does not fit ConsolidationDecision")],
)
def test_unrepairable_outputs_end_in_model_output_error(fake_openai, reply, match):
    fake_openai.push(reply, reply)
    co = role(LLMConsolidator, fake_openai, max_retries=1)
    view = RecordView(content="a", memory_type="fact")
    with pytest.raises(ModelOutputError, match=match):
        co.decide(ConsolidationInput(new=view, existing=view, cosine=0.5))
    assert len(fake_openai.requests) == 2


def test_server_errors_exhaust_into_model_call_error(fake_openai):
    fake_openai.push(error_reply(503), error_reply(502))
    tu = role(LLMTuner, fake_openai, max_retries=1)
    with pytest.raises(ModelCallError, match="HTTP 502"):
        tu.tune(TuneInput(theme="x"))
    assert len(fake_openai.requests) == 2


def test_client_errors_are_not_retried(fake_openai):
    fake_openai.push(error_reply(401, "bad key"), tool_reply({"records": []}))
    ex = role(LLMExtractor, fake_openai)
    with pytest.raises(ModelCallError, match="HTTP 401"):
        ex.extract(window())
    assert len(fake_openai.requests) == 1


def test_timeouts_retry_then_raise_model_call_error(fake_openai):
    fake_openai.push(content_reply("late", delay=2.0), content_reply("late", delay=2.0))
    ledger = Ledger()
    ex = role(LLMExtractor, fake_openai, ledger, timeout=0.2, max_retries=1)
    with pytest.raises(ModelCallError, match="timed out"):
        ex.extract(window())
    assert len(fake_openai.requests) == 2
    assert all(150 <= c.latency_ms < 1500 for c in ledger.calls)


def test_backoff_is_exponential(fake_openai):
    waits: list[float] = []
    fake_openai.push(error_reply(500), error_reply(500), tool_reply({"records": []}))
    s = settings(fake_openai, backoff=0.5)
    ex = LLMExtractor(make_chat_model(s), settings=s, sleep=waits.append)
    ex.extract(window())
    assert waits == [0.5, 1.0]


# ---- ledger ------------------------------------------------------------------------------------


def test_ledger_numbers_match_canned_usage_and_prices(fake_openai):
    ledger = Ledger()
    fake_openai.push(tool_reply({"records": []}, usage=usage(1000, 200, hit=800)))
    price = Price(cache_hit_input=0.5, cache_miss_input=2.0, output=8.0)
    ex = role(LLMExtractor, fake_openai, ledger, price=price)
    ex.extract(window())
    (c,) = ledger.calls
    assert (c.role, c.model, c.input_tokens, c.output_tokens) == ("extractor", "deepseek-chat", 1000, 200)
    assert (c.cache_hit_tokens, c.cache_miss_tokens, c.ok, c.attempts) == (800, 200, True, 1)
    assert math.isclose(c.cost, (800 * 0.5 + 200 * 2.0 + 200 * 8.0) / 1e6)
    assert c.latency_ms > 0
    assert ledger.summary()["extractor"]["cache_hit_tokens"] == 800


def test_record_chat_call_for_the_main_chat_model(fake_openai):
    ledger = Ledger()
    s = settings(fake_openai)
    model = make_chat_model(s)
    fake_openai.push(content_reply("hi!", usage=usage(300, 40, hit=256)))
    msg = model.invoke("hello")
    rec = record_chat_call(ledger, "chat", msg, 12.5, s)
    assert ledger.calls == [rec]
    assert (rec.input_tokens, rec.output_tokens, rec.cache_hit_tokens, rec.cache_miss_tokens) == (300, 40, 256, 44)
    assert math.isclose(rec.cost, DEEPSEEK_PRICE.cost(input_tokens=300, output_tokens=40, cache_hit_tokens=256))
    fake_openai.push(content_reply("no usage"))
    bare = record_chat_call(None, "chat", model.invoke("x"), 1.0, s)
    assert (bare.input_tokens, bare.cache_hit_tokens, bare.cost) == (0, None, 0.0)


# ---- the forbid switch -------------------------------------------------------------------------


def test_loopback_detection():
    assert is_loopback_url("http://127.0.0.1:8000/v1") and is_loopback_url("http://localhost:11434")
    assert is_loopback_url("http://[::1]:9/v1")
    assert not is_loopback_url("https://api.deepseek.com/v1") and not is_loopback_url(None)
    assert not is_loopback_url("http://localhost.evil.com/v1")


def test_forbid_blocks_non_loopback_model_creation_and_allows_loopback(fake_openai, monkeypatch):
    with forbid_real_requests():
        assert real_requests_forbidden()
        with pytest.raises(RealModelForbiddenError, match="192.0.2.1"):
            make_chat_model(ModelSettings(base_url=UNROUTABLE))
        monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-x")
        with pytest.raises(RealModelForbiddenError, match="api.deepseek.com"):
            make_chat_model(ModelSettings())
        fake_openai.push(content_reply("local ok"))
        assert make_chat_model(settings(fake_openai)).invoke("x").content == "local ok"
        with allow_real_requests():
            assert not real_requests_forbidden()
    assert not real_requests_forbidden()


def test_forbid_env_variable_and_per_request_guard(monkeypatch):
    model = make_chat_model(ModelSettings(base_url=UNROUTABLE, timeout=1))  # allowed at build time
    monkeypatch.setenv(FORBID_ENV, "1")
    assert real_requests_forbidden()
    with pytest.raises(RealModelForbiddenError):
        model.invoke("x")  # the chat role used directly is stopped at the HTTP layer
    with pytest.raises(RealModelForbiddenError):
        real_roles(ModelSettings(base_url=UNROUTABLE))


def test_forbid_blocks_roles_on_models_built_elsewhere():
    foreign = ChatDeepSeek(model="deepseek-chat", api_key="sk-x", api_base=UNROUTABLE, max_retries=0, timeout=1)
    ex = LLMExtractor(foreign, settings=ModelSettings(max_retries=0))
    with forbid_real_requests(), pytest.raises(RealModelForbiddenError, match="extractor role"):
        ex.extract(window())


# ---- wiring ------------------------------------------------------------------------------------


def test_real_roles_cover_role_names_and_share_one_ledger(fake_openai):
    roles = real_roles(settings(fake_openai))
    assert tuple(roles) == ROLE_NAMES
    assert isinstance(roles["chat"], ChatDeepSeek)
    assert all(getattr(roles[n], "chat_model", roles["chat"]) is roles["chat"] for n in ROLE_NAMES)
    ledger = roles["extractor"].ledger
    assert all(roles[n].ledger is ledger for n in ROLE_NAMES if n != "chat")
    fake_openai.push(tool_reply({"add": {}, "remove": {}}))
    roles["inducer"].induct(InductionInput(records=[]))
    assert [c.role for c in ledger.calls] == ["inducer"]


def test_models_real_takes_no_ledger_and_records_into_the_engine_ledger(fake_openai):
    from engine.memory.engine import MemoryEngine
    from engine.roles.bundle import Models

    models = Models.real(settings(fake_openai))
    with pytest.raises(TypeError):
        Models.real(settings(fake_openai), ledger=Ledger())  # one ledger, the engine's
    engine = MemoryEngine(models=models)
    assert all(getattr(models, n).ledger is engine.ledger for n in Models.ROLES)
    fake_openai.push(tool_reply({"add": {"name": ["Ann"]}, "remove": {}}))
    models.inducer.induct(InductionInput(records=[]))
    assert [c.role for c in engine.ledger.calls] == ["inducer"]


def test_llm_inducer_keeps_one_name_and_removes_the_old_one(fake_openai):
    fake_openai.push(tool_reply({"add": {"name": ["Ann Lee", "Annie"]}, "remove": {}}))
    ind = role(LLMProfileInducer, fake_openai)
    out = ind.induct(InductionInput(profile={"name": ["Ann"], "identity": ["lives in Porto"]}, records=[]))
    assert out.add == {"name": ["Annie"]} and out.remove == {"name": ["Ann"]}
    assert len(ind.last_result.repairs) == 2
    request = fake_openai.requests[-1].body
    system = request["messages"][0]["content"]
    assert "Fields: name, identity," in system and "one value only" in system
    fake_openai.push(tool_reply({"add": {"name": ["Ann"]}, "remove": {}}))
    same = ind.induct(InductionInput(profile={"name": ["Ann"]}, records=[]))
    assert same.add == {"name": ["Ann"]} and same.remove == {} and ind.last_result.repairs == ()


# ---- repair_weights properties -----------------------------------------------------------------

weight = st.floats(min_value=-5, max_value=5, allow_nan=False)


@given(a=weight, b=weight, g=weight, d=weight, w0=weight, w1=weight, w2=weight)
def test_repair_weights_always_yields_valid_weights(a, b, g, d, w0, w1, w2):
    fixed, notes = repair_weights({"alpha": a, "beta": b, "gamma": g, "delta": d, "w0": w0, "w1": w1, "w2": w2})
    assert math.isclose(fixed["alpha"] + fixed["beta"] + fixed["gamma"], 1.0)
    assert math.isclose(fixed["w0"] + fixed["w1"] + fixed["w2"], 1.0)
    assert all(0.0 <= fixed[n] <= 1.0 for n in ("alpha", "beta", "gamma", "w0", "w1", "w2"))
    assert -1.0 <= fixed["delta"] <= 1.0


@given(st.lists(st.floats(min_value=0, max_value=1), min_size=2, max_size=2))
def test_repair_weights_leaves_valid_weights_alone(xs):
    a, b = sorted(xs)
    w = {"alpha": a, "beta": b - a, "gamma": 1 - b, "delta": 0.0, "w0": 0.1, "w1": 0.8, "w2": 0.1}
    fixed, notes = repair_weights(w)
    if not notes:
        assert fixed == w
    else:  # float sums a hair off 1 are renormalised, nothing else
        assert all("renormalised" in n for n in notes)
        assert all(math.isclose(fixed[k], w[k], abs_tol=1e-9) for k in w)


def test_llm_extractor_says_the_profile_only_when_asked_and_repairs_it(fake_openai):
    from engine.roles.types import ExtractionInput, WindowMessage

    new = [WindowMessage(id=1, role="user", speaker="user", content="I'm Ann and I live in Porto.",
                         at=datetime(2026, 3, 2, 9, 0, tzinfo=UTC))]
    rec = {"content": "The user is called Ann.", "source_ids": [1]}
    ext = role(LLMExtractor, fake_openai)
    fake_openai.push(tool_reply({"records": [rec], "profile": {"add": {"name": "Ann"}, "remove": {}}}))
    out = ext.extract(ExtractionInput(user_id="u", session_id="s", new=new, profile={"name": ["Bo"]}))
    assert out.profile.add == {"name": ["Ann"]} and out.profile.remove == {"name": ["Bo"]}
    sent = json.loads(fake_openai.requests[-1].body["messages"][-1]["content"])
    assert sent["profile"] == {"name": ["Bo"]}
    fake_openai.push(tool_reply({"records": [rec], "profile": {"add": {"name": ["Ann"]}}}))
    out = ext.extract(ExtractionInput(user_id="u", session_id="s", new=new))  # not asked
    assert out.profile is None and "profile" not in json.loads(fake_openai.requests[-1].body["messages"][-1]["content"])
