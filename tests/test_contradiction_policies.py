"""A record the live window contradicts is never served, under either retrieval policy (Hypothesis
over cities, filler and pacing): `per_turn` retrieves for every message, `on_event` re-injects the
picks it kept, and both pass the live-window guard."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.memory.engine import MemoryEngine

CITIES = ["Beijing", "Shanghai", "Lisbon", "Porto", "Madrid", "Seville", "Osaka", "Kyoto", "Lyon", "Nantes"]
FILLER = ["Do you sell umbrellas?", "What time do you open?", "Is shipping free?", "Thanks a lot."]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=st.lists(st.sampled_from(CITIES), min_size=2, max_size=2, unique=True),
       policy=st.sampled_from(["per_turn", "on_event"]),
       filler=st.lists(st.sampled_from(FILLER), max_size=3), step=st.integers(20, 300))
def test_a_contradicted_record_is_never_served(pair, policy, filler, step):
    old, new = pair
    clock = VirtualClock(datetime(2026, 5, 4, 9, tzinfo=UTC))
    engine = MemoryEngine(MemoryConfig.from_preset("customer service", tau_m=1, slice_value=0.01,
                                                   long_term_value=0.02, trigger_threshold=2,
                                                   retrieval_policy=policy), clock=clock)
    for text in [f"I live in {old}.", "My dog is called Rex."]:
        engine.turn("u", "s1", text)
        clock.advance(60)
    assert any(old in r.content for r in engine.records("u"))
    # no event from here (cue_event off: the guard, not the change-cue gate, must hold the record back)
    engine.set_config(engine.config.with_overrides(trigger_threshold=100, idle_event=False, cue_event=False))
    engine.turn("u", "s2", "Where do I live?")  # a new session: under on_event its picks are kept
    for text in [*filler, f"I moved to {new} last week."]:
        clock.advance(step)
        engine.turn("u", "s2", text)
    clock.advance(step)
    r = engine.turn("u", "s2", "Where do I live now?")
    assert not r.event_fired
    assert old not in r.prompt.system, f"{old} served under {policy} after the user moved to {new}"
