"""Profile history is stored as each entry's changes to the one before it, and read back whole
(engine.stores.profilelog)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.errors import StoreError
from engine.core.records import ProfileHistoryEntry, UserProfile
from engine.stores.check import check_store
from engine.stores.profilelog import read_entries, stored_entry
from engine.stores.sqlite import SQLiteStore

T0 = datetime(2026, 3, 1, tzinfo=UTC)
VALUES = ["tea", "chess", "Lisbon", "nurse", "写作", "hiking", "cats", "jazz"]
FIELDS = ["name", "preferences", "goals", "facts"]

fields_st = st.dictionaries(st.sampled_from(FIELDS), st.lists(st.sampled_from(VALUES), min_size=1, max_size=6,
                                                                unique=True).map(tuple), max_size=4)


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(st.tuples(fields_st, st.sampled_from(["chained", "chained", "chained", "unrelated", "bare"])),
                      min_size=1, max_size=12))
def test_any_history_reads_back_exactly_as_it_was_saved(steps):
    """Whatever the inductions did (values added, removed, reordered, fields dropped), and when a
    profile was saved without an entry or an entry does not continue the last one, the history
    reads back entry for entry as it was given."""
    store = SQLiteStore(":memory:", dim=4)
    try:
        given_entries, current = [], {}
        for n, (after, how) in enumerate(steps, start=1):
            at = T0 + timedelta(days=n)
            if how == "bare":  # a profile saved without a history entry: the next one cannot continue the chain
                store.save_profile(UserProfile(user_id="u", fields=after, version=n, updated_at=at))
                current = after
                continue
            before = current if how == "chained" else {"facts": ("not what was stored",)}
            entry = ProfileHistoryEntry(user_id="u", version=n, at=at, before=before, after=after, record_ids=(n,))
            store.save_profile(UserProfile(user_id="u", fields=after, version=n, updated_at=at), entry)
            given_entries.append(entry)
            current = after
        assert [h.to_dict() for h in store.profile_history("u")] == [h.to_dict() for h in given_entries]
        assert not [p for p in check_store(store) if "profile history" in p]
    finally:
        store.close()


def test_appending_to_a_long_profile_stores_the_change_not_the_profile(tmp_path):
    store = SQLiteStore(str(tmp_path / "p.db"), dim=4)
    try:
        prefs: tuple[str, ...] = ()
        for n in range(1, 41):
            before = {"preferences": prefs} if prefs else {}
            prefs = prefs + tuple(f"a preference said in conversation number {n}.{i}" for i in range(10))
            entry = ProfileHistoryEntry(user_id="u", version=n, at=T0 + timedelta(days=n), before=before,
                                        after={"preferences": prefs}, record_ids=(n,))
            store.save_profile(UserProfile(user_id="u", fields={"preferences": prefs}, version=n), entry)
        sizes = [len(e) for (e,) in store.conn.execute("SELECT entry FROM profile_history ORDER BY id")]
        assert sizes[-1] < 1000 < sizes[0] * 20  # the 40th entry: its ten new values, not 400 twice
        history = store.profile_history("u")
        assert len(history) == 40 and history[-1].after == {"preferences": prefs}
        assert history[-1].diff() == {"preferences": {"added": list(prefs[-10:]), "removed": []}}
        assert check_store(store) == []
        # a tampered change is found by the check and the rebuilt chain says so
        eid, text = store.conn.execute("SELECT id, entry FROM profile_history ORDER BY id LIMIT 1 OFFSET 20").fetchone()
        obj = json.loads(text)
        obj["changes"]["preferences"]["appended"][0] = "something never said"
        with store.conn:
            store.conn.execute("UPDATE profile_history SET entry = ? WHERE id = ?", (json.dumps(obj), eid))
        assert any("do not rebuild the profile its digest names" in p for p in check_store(store))
    finally:
        store.close()


def test_a_change_with_nothing_before_it_is_a_clear_error():
    entry = ProfileHistoryEntry(user_id="u", version=2, at=T0, before={"goals": ("a",)}, after={"goals": ("a", "b")})
    from engine.stores.profilelog import digest

    compact = stored_entry(entry, digest({"goals": ("a",)}))
    assert "changes" in compact and "before" not in compact
    with pytest.raises(StoreError, match="holds changes to an entry that is not stored"):
        read_entries("u", [compact])
    assert "changes" not in stored_entry(entry, None)  # no tip: stored whole
