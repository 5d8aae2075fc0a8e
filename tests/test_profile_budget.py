"""The profile a prompt, an extractor or an inducer is shown stays within `profile_budget` tokens,
however long the profile has grown (engine.memory.profileview)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.errors import ConfigError
from engine.core.records import MemoryRecord, UserProfile
from engine.core.tokens import ApproxTokenCounter
from engine.memory.engine import MemoryEngine
from engine.memory.injection import build_prompt, sanitize_data
from engine.memory.profile import profile_for_prompt
from engine.memory.profileview import FIELD_PRIORITY, model_view, ranked_values
from engine.stores.sqlite import SQLiteStore

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
COUNTER = ApproxTokenCounter()


def _lines_cost(fields, dates=None) -> int:
    """What the budget counts: each shown field's "- key: " and each value (with its date) + 1."""
    dates = dates or {}
    return sum(COUNTER.count(f"- {k}: ") + sum(COUNTER.count(sanitize_data(f"{v} ({dates[v]})" if v in dates else v)) + 1
                                              for v in vs)
               for k, vs in fields.items() if vs)


def _store_with_profile(n_prefs: int, *, superseded: int = 0):
    """A store whose user has a name, a constraint and `n_prefs` preferences, each resting on its
    own record (record ids grow with the order they were learned); the first `superseded` of the
    preferences' records are superseded."""
    store = SQLiteStore(":memory:", dim=4)
    v = [1.0, 0.0, 0.0, 0.0]
    texts = ["The user's name is Ada.", "The user is allergic to peanuts."] + [
        f"The user likes hobby number {i} very much" for i in range(n_prefs)]
    recs = store.add_records([MemoryRecord(user_id="u", content=t, created_at=T0, said_at=T0 + timedelta(days=i))
                              for i, t in enumerate(texts)], [v] * len(texts))
    prefs = tuple(f"hobby number {i}" for i in range(n_prefs))
    sources = {"name": {"Ada": (recs[0].id,)}, "constraints": {"allergic to peanuts": (recs[1].id,)},
               "preferences": {p: (recs[2 + i].id,) for i, p in enumerate(prefs)}}
    profile = UserProfile(user_id="u", fields={"preferences": prefs, "name": ("Ada",),
                                               "constraints": ("allergic to peanuts",)}, sources=sources, version=1)
    store.save_profile(profile)
    for r in recs[2:2 + superseded]:
        store.supersede("u", r.id, recs[-1].id, T0 + timedelta(days=999))
    return store, recs, prefs


def test_a_long_profile_shows_its_names_first_then_its_newest_values_within_the_budget():
    store, recs, prefs = _store_with_profile(300)
    try:
        profile = store.get_profile("u")
        shown, held, dates, left_out = profile_for_prompt(store, profile, {}, {}, budget=60, counter=COUNTER)
        assert _lines_cost(shown.fields, dates) <= 60
        assert shown.fields["name"] == ("Ada",) and shown.fields["constraints"] == ("allergic to peanuts",)
        kept = shown.fields["preferences"]
        assert 0 < len(kept) < 300 and left_out == 300 - len(kept) and held == []
        assert set(kept) == set(prefs[-len(kept):])  # the newest (latest records)
        assert list(kept) == sorted(kept, key=prefs.index)  # in the profile's order: the block is stable
        assert list(shown.fields) == list(profile.fields)  # the fields' order too
        # only the shown values' sources ride along: a record behind a hidden value is not hidden
        assert {i for vals in shown.sources.values() for ids in vals.values() for i in ids} == {
            r.id for r in recs[:2]} | {recs[2 + prefs.index(p)].id for p in kept}
        hidden = recs[2]  # "hobby number 0": stored, not shown
        prompt = build_prompt(core="c", profile=shown, records=[hidden], window=[], counter=COUNTER, value_dates=dates)
        assert "hobby number 0" in prompt.system and prompt.record_ids == (hidden.id,)
    finally:
        store.close()


def test_a_turn_reads_the_sources_of_the_values_it_may_show_not_all_of_them():
    store, _, _ = _store_with_profile(2000)
    try:
        asked: list[int] = []
        real = store.get_records
        store.get_records = lambda user, ids: asked.extend(ids) or real(user, ids)  # type: ignore[method-assign]
        profile_for_prompt(store, store.get_profile("u"), {}, {}, budget=80, counter=COUNTER)
        assert 0 < len(asked) <= 64  # two chunks of 32 values at most for this budget, of 2,002
        asked.clear()
        profile_for_prompt(store, store.get_profile("u"), {}, {})  # no budget: every value, as before
        assert len(asked) == 2002
    finally:
        store.close()


def test_superseded_values_are_held_back_and_do_not_spend_the_budget():
    store, _, prefs = _store_with_profile(40, superseded=40)
    try:
        shown, held, _, left_out = profile_for_prompt(store, store.get_profile("u"), {}, {}, budget=500,
                                                      counter=COUNTER)
        assert shown.fields["preferences"] == () and held == list(prefs) and left_out == 0
        unbounded = profile_for_prompt(store, store.get_profile("u"), {}, {})
        assert unbounded[1] == list(prefs)  # the same values gone, in the profile's order, without a budget
    finally:
        store.close()


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.text(alphabet="abcdefgh xyz", min_size=1, max_size=40).filter(str.strip), max_size=60,
                       unique=True),
       fields=st.lists(st.sampled_from([*FIELD_PRIORITY, "hobbies", "pets"]), min_size=1, max_size=5, unique=True),
       budget=st.integers(1, 400))
def test_the_model_view_keeps_within_the_budget_in_priority_order(values, fields, budget):
    spread = {f: tuple(values[i::len(fields)]) for i, f in enumerate(fields)}
    sources = {f: {v: (j * len(fields) + i,) for j, v in enumerate(vs)} for i, (f, vs) in enumerate(spread.items())}
    profile = UserProfile(user_id="u", fields={f: vs for f, vs in spread.items() if vs}, sources=sources)
    view = model_view(profile, budget, COUNTER)
    assert _lines_cost(view) <= budget
    ranked = ranked_values(profile)
    assert sorted(ranked) == sorted((f, v) for f, vs in profile.fields.items() for v in vs)
    shown = {(f, v) for f, vs in view.items() for v in vs}
    # nothing shown before something of a higher priority that was left out unless it could not fit
    for f, vs in view.items():
        assert list(vs) == [v for v in profile.fields[f] if (f, v) in shown]
    if _lines_cost(profile.fields) <= budget:
        assert view == {f: list(vs) for f, vs in profile.fields.items()}  # a small profile: whole, as before


def test_profile_budget_is_a_positive_integer():
    assert MemoryConfig.from_preset("customer service").profile_budget == 400
    with pytest.raises(ConfigError):
        MemoryConfig.from_preset("customer service", profile_budget=0)


def test_a_grown_profile_is_shown_to_the_prompt_and_the_extractor_within_the_budget():
    """Whole turns: a user whose stored profile has grown past the budget gets prompts and extractor
    calls that show part of it, and the inject log says how many values were left out."""
    clock = VirtualClock(T0)
    engine = MemoryEngine(config=MemoryConfig.from_preset("customer service", profile_budget=50), clock=clock)
    prefs = tuple(f"a long-winded preference about topic {i}" for i in range(120))
    engine.store.save_profile(UserProfile(user_id="u", fields={"preferences": prefs}, version=1))
    seen = []
    real = engine.models.extractor.extract
    engine.models.extractor.extract = lambda inp: seen.append(inp.profile) or real(inp)
    for i in range(12):
        engine.turn("u", "s", f"I really enjoy hiking trip number {i} in the hills.")
        clock.advance(timedelta(minutes=30))
    injects = [e.payload for e in engine.store.events(user_id="u") if e.kind == "inject"]
    assert injects and all(p["tokens"].get("profile", 0) <= 50 + 12 for p in injects)  # + the fence lines
    assert all(p.get("profile_values_left_out", 0) > 0 for p in injects)
    assert seen and all(_lines_cost(p or {}) <= 50 for p in seen)


def test_a_kept_view_is_made_again_when_a_source_record_changes():
    """The budgeted view is kept per profile object and reused while its source records read back
    the same; a superseded source, or a source said at another time, makes it again, and what it
    gives is what a view made from nothing gives."""
    from dataclasses import replace

    from engine.memory import profile as profile_module

    store, recs, prefs = _store_with_profile(40)
    try:
        profile = store.get_profile("u")

        def view():
            return profile_for_prompt(store, profile, {}, {}, budget=500, counter=COUNTER)

        def fresh():
            profile_module._VIEWS.clear()
            return view()

        first = view()
        assert view() == first == fresh()
        store.supersede("u", recs[5].id, recs[-1].id, T0 + timedelta(days=999))  # the source of prefs[3]
        after = view()
        assert prefs[3] in after[1] and prefs[3] not in after[0].fields["preferences"]
        assert after == fresh()
        said = T0 + timedelta(days=500)
        store.update_record(replace(store.get_records("u", [recs[6].id])[0], said_at=said))  # prefs[4]'s date
        dated = view()
        assert dated[2][prefs[4]] == said.date().isoformat() and dated == fresh()
    finally:
        store.close()
