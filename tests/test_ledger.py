"""The cost ledger: prices, per-role sums, marks, thread safety."""

from __future__ import annotations

import math
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.roles.ledger import DEEPSEEK_PRICE, ZERO_PRICE, CallRecord, Ledger, Price


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
