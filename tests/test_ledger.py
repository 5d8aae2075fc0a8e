"""The cost ledger: prices, per-role sums, marks, thread safety, and model calls turned into records."""

from __future__ import annotations

import math
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from engine.core.tokens import ApproxTokenCounter, approx_tokens
from engine.roles.ledger import (
    DEEPSEEK_PRICE,
    ZERO_PRICE,
    CallRecord,
    Ledger,
    Price,
    record_chat_call,
    record_failed_call,
    usage_from_message,
)


def call(role: str = "extractor", **kw) -> CallRecord:
    base = {"role": role, "model": "deepseek-chat", "input_tokens": 100, "output_tokens": 10}
    return CallRecord(**{**base, **kw})


def test_deepseek_price_golden_values():
    # 1M cache-miss input = ¥1, 1M cache-hit input = ¥0.02, 1M output = ¥2
    assert math.isclose(DEEPSEEK_PRICE.cost(input_tokens=1_000_000, output_tokens=0), 1.0)
    assert math.isclose(DEEPSEEK_PRICE.cost(input_tokens=1_000_000, output_tokens=0, cache_hit_tokens=1_000_000), 0.02)
    assert math.isclose(DEEPSEEK_PRICE.cost(input_tokens=0, output_tokens=1_000_000), 2.0)
    assert math.isclose(DEEPSEEK_PRICE.cost(input_tokens=1000, output_tokens=200, cache_hit_tokens=800),
                        (800 * 0.02 + 200 * 1.0 + 200 * 2.0) / 1e6)
    assert ZERO_PRICE.cost(input_tokens=10**9, output_tokens=10**9) == 0.0


tokens = st.integers(min_value=0, max_value=10**7)


@given(inp=tokens, out=tokens, hit=tokens)
def test_cache_hits_never_cost_more_than_misses(inp, out, hit):
    hit = min(hit, inp)
    with_hits = DEEPSEEK_PRICE.cost(input_tokens=inp, output_tokens=out, cache_hit_tokens=hit)
    without = DEEPSEEK_PRICE.cost(input_tokens=inp, output_tokens=out)
    assert 0.0 <= with_hits <= without + 1e-12


def test_summary_totals_and_table():
    ledger = Ledger()
    ledger.record(call(cache_hit_tokens=80, cache_miss_tokens=20, cost=0.5, latency_ms=10))
    ledger.record(call(ok=False, error="timed out", cost=0.25, latency_ms=5))
    ledger.record(call("chat", input_tokens=1000, output_tokens=50, cost=1.0))
    s = ledger.summary()
    assert s["extractor"]["calls"] == 2 and s["extractor"]["failures"] == 1
    assert s["extractor"]["cache_hit_tokens"] == 80 and s["extractor"]["cache_miss_tokens"] == 20
    assert math.isclose(s["extractor"]["cost"], 0.75) and s["extractor"]["latency_ms"] == 15
    t = ledger.totals()
    assert (t["calls"], t["input_tokens"], t["output_tokens"]) == (3, 1200, 70)
    table = Ledger.format_table(s).splitlines()
    assert table[0].startswith("role") and [line.split()[0] for line in table[1:]] == ["chat", "extractor"]


def test_mark_and_since_sum_a_slice():
    ledger = Ledger()
    ledger.record(call())
    m = ledger.mark()
    ledger.extend([call("tuner"), call("tuner")])
    assert [c.role for c in ledger.since(m)] == ["tuner", "tuner"]
    assert ledger.totals(ledger.since(m))["calls"] == 2


def test_records_round_trip_to_dict():
    c = call(cache_hit_tokens=3, error=None)
    assert CallRecord(**c.to_dict()) == c


def test_concurrent_records_are_all_kept():
    ledger = Ledger()

    def work():
        for _ in range(200):
            ledger.record(call())

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.totals()["calls"] == 1600


def test_price_is_frozen():
    p = Price(cache_hit_input=1, cache_miss_input=2, output=3)
    assert p.currency == "CNY"
    with pytest.raises(AttributeError):
        p.output = 4  # type: ignore[misc]


# ---- model calls → records (record_chat_call / record_failed_call) ---------------------------

class _Settings:  # the two fields record_chat_call reads from a ModelSettings
    model = "deepseek-chat"
    price = Price(cache_hit_input=0.5, cache_miss_input=2.0, output=8.0)


def deepseek_reply(prompt=1000, completion=200, hit=800, model="deepseek-chat"):
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
             "prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": prompt - hit}
    return AIMessage(content="ok", response_metadata={"token_usage": usage, "model_name": model})


def test_real_call_reads_deepseek_cache_fields_and_prices_with_the_settings():
    ledger = Ledger()
    rec = record_chat_call(ledger, "chat", deepseek_reply(), 12.5, _Settings())
    assert ledger.calls == [rec] and rec.ok and rec.latency_ms == 12.5
    assert (rec.input_tokens, rec.output_tokens, rec.cache_hit_tokens, rec.cache_miss_tokens) == (1000, 200, 800, 200)
    assert math.isclose(rec.cost, (800 * 0.5 + 200 * 2.0 + 200 * 8.0) / 1e6)
    assert usage_from_message(deepseek_reply())["cache_miss_tokens"] == 200


def test_real_call_reads_langchain_usage_metadata_cache_reads():
    msg = AIMessage(content="ok", usage_metadata={"input_tokens": 300, "output_tokens": 40, "total_tokens": 340,
                                                  "input_token_details": {"cache_read": 256}})
    rec = record_chat_call(None, "chat", msg, 1.0, _Settings())
    assert (rec.input_tokens, rec.cache_hit_tokens, rec.cache_miss_tokens, rec.model) == (300, 256, 44, "deepseek-chat")


def test_real_call_without_usage_records_what_the_provider_reported_nothing_approximated():
    rec = record_chat_call(None, "chat", AIMessage(content="a reply of some length"), 1.0, _Settings(),
                           fallback_input_tokens=999)
    assert (rec.input_tokens, rec.output_tokens, rec.cache_hit_tokens, rec.cost) == (0, 0, None, 0.0)
    no_reply = record_chat_call(None, "extractor", None, 3.0, _Settings(), mode="real", ok=False, attempts=2,
                                error="timed out")
    assert (no_reply.input_tokens, no_reply.ok, no_reply.attempts, no_reply.error) == (0, False, 2, "timed out")


def test_scripted_call_uses_usage_metadata_else_approximates_and_costs_nothing():
    reported = AIMessage(content="Noted.", usage_metadata={"input_tokens": 50, "output_tokens": 2, "total_tokens": 52},
                         response_metadata={"model_name": "memlab-scripted"})
    rec = record_chat_call(None, "chat", reported, 0.5, mode="scripted", fallback_input_tokens=999)
    assert (rec.input_tokens, rec.output_tokens, rec.cost, rec.model) == (50, 2, 0.0, "memlab-scripted")
    bare = AIMessage(content="好的，我记下了。")
    approx = record_chat_call(None, "chat", bare, 0.5, fallback_input_tokens=120)  # no settings: scripted
    assert (approx.input_tokens, approx.output_tokens, approx.model, approx.cost) == (
        120, approx_tokens("好的，我记下了。"), "scripted", 0.0)

    class Doubling(ApproxTokenCounter):
        def count(self, text):
            return 2 * super().count(text)

    counted = record_chat_call(None, "chat", bare, 0.5, mode="scripted", counter=Doubling())
    assert (counted.input_tokens, counted.output_tokens) == (0, 2 * approx_tokens("好的，我记下了。"))


def test_failed_call_is_recorded_by_error_type_with_the_prompt_estimate():
    ledger = Ledger()
    rec = record_failed_call(ledger, "chat", TimeoutError("slow"), 40.0, model="scripted", input_tokens=321)
    assert ledger.calls == [rec]
    assert (rec.ok, rec.error, rec.input_tokens, rec.output_tokens, rec.latency_ms, rec.cost) == (
        False, "TimeoutError", 321, 0, 40.0, 0.0)
    assert record_failed_call(None, "tuner", "HTTP 503", model="m").error == "HTTP 503"
    assert ledger.summary()["chat"]["failures"] == 1


def test_a_ledger_keeps_exact_totals_but_only_the_newest_calls():
    from engine.roles.ledger import CallRecord, Ledger

    led = Ledger(max_calls=10)
    for i in range(25):
        led.record(CallRecord(role="chat" if i % 2 else "extractor", model="m", input_tokens=i, output_tokens=1))
    assert len(led.calls) == 10 and led.calls[-1].input_tokens == 24
    s = led.summary()
    assert s["chat"]["calls"] == 12 and s["extractor"]["calls"] == 13
    assert s["chat"]["input_tokens"] + s["extractor"]["input_tokens"] == sum(range(25))
    mark = led.mark()
    led.record(CallRecord(role="tuner", model="m", input_tokens=7, output_tokens=0))
    assert [c.role for c in led.since(mark)] == ["tuner"] and led.totals()["calls"] == 26
