"""No blind spot: at every turn each message is either in the window the model sees or already in
memory (extracted), for any conversation, message sizes, pacing and budgets (Hypothesis)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.memory.engine import MemoryEngine

WORDS = "order parcel Lisbon blue tea Friday refund invoice garden piano".split()
turn = st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join), st.integers(5, 400))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=st.lists(turn, min_size=1, max_size=25), budget=st.integers(40, 600), keep=st.integers(0, 4),
       share=st.sampled_from([0.25, 0.5, 1.0]), preset=st.sampled_from(["customer service", "accompany"]))
def test_every_message_is_in_the_window_or_in_memory(turns, budget, keep, share, preset):
    clock = VirtualClock(datetime(2026, 4, 6, 10, tzinfo=UTC))
    cfg = MemoryConfig.from_preset(preset, context_budget=budget, keep_recent=keep, overflow_keep=share,
                                   tune_weights=False)
    engine = MemoryEngine(cfg, clock=clock)
    for text, step in turns:
        r = engine.turn("u", "s", f"I said {text}.")
        cursor = engine.store.get_cursor("u", "s", "extract")
        shown = set(r.prompt.window_ids)
        said = engine.store.messages("u", session_id="s", upto_id=r.user_message.id)
        blind = [m.id for m in said if m.id not in shown and m.id > cursor]
        assert not blind, f"messages {blind} are neither shown nor in memory (cursor {cursor}, shown {sorted(shown)})"
        assert r.user_message.id in shown
        clock.advance(step)
