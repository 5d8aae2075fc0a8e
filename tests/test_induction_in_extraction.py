"""`induct_in_extraction`: the extractor also says what its records change in the profile; the
induction applies that when the records mature, with the designed timing, and calls the inducer
only when the extractor did not say it (an older or smaller model), a window is not all mature or
no longer current, or a profile correction rides along."""

from datetime import UTC, datetime

import pytest

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.memory.engine import MemoryEngine
from engine.memory.profile import hinted_changes

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LINES = ["Hi, I'm Ana and I live in Lisbon.", "I'm vegetarian, no meat please.", "What are your opening hours?",
         "I'm allergic to peanuts.", "Thanks!", "My sister Maria visits next week.",
         "Actually I moved to Porto last month.", "Do you deliver on Sundays?", "I prefer deliveries in the morning."]


def _run(fold, extractor=None):
    clock = VirtualClock(T0)
    engine = MemoryEngine(MemoryConfig.from_preset("customer service", induct_in_extraction=fold), clock=clock)
    calls = []
    inducer = engine.models.inducer

    class Counting:
        def induct(self, inp):
            calls.append([r.id for r in inp.records])
            return inducer.induct(inp)

    engine.models.inducer = Counting()
    written = engine.hints_written = {}  # every hint as it was written (an induction deletes those it passes)
    set_kv = engine.store.set_kv

    def keeping(user_id, key, value):
        if key.startswith("profile-hint:"):
            written[key] = value
        set_kv(user_id, key, value)

    engine.store.set_kv = keeping
    if extractor is not None:
        engine.models.extractor = extractor(engine.models.extractor)
    for line in LINES:
        engine.turn("ana", "s1", line)
        clock.advance("20m")
    clock.advance("2h")
    engine.turn("ana", "s2", "Hello again.")
    return engine, calls


def test_the_profile_comes_out_of_extraction_without_inducer_calls():
    folded, folded_calls = _run(True)
    plain, plain_calls = _run(False)
    assert len(folded_calls) < len(plain_calls)
    assert folded.store.get_profile("ana").fields == plain.store.get_profile("ana").fields
    assert "lives in Porto" in folded.store.get_profile("ana").fields["identity"]
    done = [e.payload for e in folded.store.events(kind="induct") if e.payload.get("from_extraction")]
    assert done and all(p["diff"] is not None for p in done)


def test_an_extractor_that_says_nothing_of_the_profile_leaves_it_to_the_inducer():
    class RecordsOnly:
        def __init__(self, inner):
            self.inner = inner

        def extract(self, inp):
            return self.inner.extract(inp).model_copy(update={"profile": None})

    engine, calls = _run(True, RecordsOnly)
    assert calls
    assert "lives in Porto" in engine.store.get_profile("ana").fields["identity"]


@pytest.mark.parametrize("drop", ["hint", "window", "superseded"])
def test_a_missing_hint_an_immature_window_or_a_superseded_record_means_no_hinted_changes(drop):
    engine, _ = _run(True)
    for key, hint in engine.hints_written.items():  # as they were before the inductions deleted them
        engine.store.set_kv("ana", key, hint)
    recs = [r for r in engine.store.records("ana", include_invalid=True) if r.lasting]
    window = engine.store.get_kv("ana", f"profile-hint:{recs[-1].id}")["window"]
    batch = [r for r in recs if r.id in window]
    before = min(window) - 1
    assert hinted_changes(engine.store, "ana", batch, before) is not None
    if drop == "hint":
        engine.store.set_kv("ana", f"profile-hint:{batch[0].id}", None)
        assert hinted_changes(engine.store, "ana", batch, before) is None
    elif drop == "window":  # a window of two current records, its first alone in the batch
        pairs = [w for r in recs if r.is_current for w in [engine.store.get_kv("ana", f"profile-hint:{r.id}")["window"]]
                 if len(w) > 1 and all(x.is_current for x in recs if x.id in w)]
        first, second = pairs[0][0], pairs[0][1]
        by_id = {r.id: r for r in recs}
        assert hinted_changes(engine.store, "ana", [by_id[first]], first - 1) is None  # the second is not mature
        assert hinted_changes(engine.store, "ana", [by_id[second]], first) is not None  # the first was inducted
    else:
        old = next(r for r in recs if not r.is_current)
        hint = engine.store.get_kv("ana", f"profile-hint:{old.id}")
        mates = [r for r in recs if r.id in hint["window"] and r.is_current]
        assert mates and hinted_changes(engine.store, "ana", mates, min(hint["window"]) - 1) is None


def test_an_induction_deletes_the_hints_of_the_records_its_cursor_passes():
    """A hint is read only while its record waits past the induction cursor: the records the
    cursor passed have none left, the ones still waiting keep theirs, other keys stay."""
    engine, _ = _run(True)
    engine.store.set_kv("ana", "weights", {"a": 1})
    engine.turn("ana", "s2", "I'm also allergic to shellfish.")  # new records, not mature yet
    engine.clock.advance("20m")
    engine.turn("ana", "s2", "Ok.")
    cursor = engine.store.get_cursor("ana", "", "induct")
    assert cursor > 0
    passed = [k for k in engine.hints_written if int(k.split(":")[1]) <= cursor]
    waiting = [k for k in engine.hints_written if int(k.split(":")[1]) > cursor]
    assert passed and waiting and all(engine.store.get_kv("ana", k) is None for k in passed)
    assert all(engine.store.get_kv("ana", k) == engine.hints_written[k] for k in waiting)
    assert engine.store.get_kv("ana", "weights") == {"a": 1}
