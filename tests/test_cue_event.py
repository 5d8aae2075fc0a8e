"""The change-cue gate (`cue_event`): a pending user message announcing a change is extracted on
its own turn, so the update supersedes what it corrects and the live-window guard reads nothing."""

from datetime import UTC, datetime, timedelta

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.records import Message
from engine.core.tokens import ApproxTokenCounter
from engine.memory.engine import MemoryEngine
from engine.memory.gate import cue_prefix, gate_status, mature_prefix

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _msgs(*texts, step=30):
    return [Message(id=i + 1, user_id="u", session_id="s", role="user" if i % 2 == 0 else "assistant",
                    content=t, created_at=T0 + timedelta(seconds=step * i)) for i, t in enumerate(texts)]


def test_cue_prefix_ends_with_the_last_user_message_announcing_a_change():
    pending = _msgs("I live in Beijing.", "Noted.", "I moved to Shanghai.", "Congratulations!", "What time is it?")
    assert cue_prefix(pending) == 3
    assert cue_prefix(_msgs("I live in Beijing.", "I have moved on.")) == 0  # an assistant's cue is not the user's
    now = T0 + timedelta(seconds=200)
    assert mature_prefix(pending, now, 3600) == []
    assert [m.id for m in mature_prefix(pending, now, 3600, cue=True)] == [1, 2, 3]


def test_a_cue_opens_the_gate_only_with_memory_to_correct_and_when_switched_on():
    pending = _msgs("Hello.", "Hi!", "I moved to Shanghai.")
    now = T0 + timedelta(seconds=100)
    cfg = MemoryConfig.from_preset("customer service", trigger_threshold=100, idle_event=False)
    counter = ApproxTokenCounter()
    opened = gate_status(pending, now=now, config=cfg, counter=counter, has_memory=True)
    assert opened.cue_open and opened.will_fire and not opened.maturity_open
    assert not gate_status(pending, now=now, config=cfg, counter=counter, has_memory=False).will_fire
    for off in ({"cue_event": False}, {"live_contradiction": "off"}):
        assert not gate_status(pending, now=now, config=cfg.with_overrides(**off), counter=counter).will_fire
    assert not gate_status(_msgs("Hello.", "Hi!", "What time is it?"), now=now, config=cfg, counter=counter).will_fire


def test_a_correction_supersedes_on_its_turn_without_a_live_window_read():
    clock = VirtualClock(T0)
    cfg = MemoryConfig.from_preset("customer service", tau_m=1, slice_value=0.01, long_term_value=0.02,
                                   trigger_threshold=2)
    engine = MemoryEngine(cfg, clock=clock)
    for line in ["I live in Beijing.", "My dog is called Rex."]:
        engine.turn("alice", "s1", line)
        clock.advance(60)
    assert any("Beijing" in r.content and r.is_current for r in engine.store.records("alice"))
    engine.set_config(engine.config.with_overrides(trigger_threshold=100, idle_event=False, tau_m=600))
    r = engine.turn("alice", "s1", "I moved to Shanghai last week.")
    assert r.event_fired  # the cue opened the gate although nothing else would have
    old = next(x for x in engine.store.records("alice", include_invalid=True) if "Beijing" in x.content)
    assert not old.is_current  # superseded for good on the turn it was corrected
    r2 = engine.turn("alice", "s1", "Where do I live now?")
    assert "Beijing" not in r2.prompt.system
    reads = [e for e in engine.events(kind="extraction") if e.payload.get("purpose") == "live-window"]
    assert reads == []
