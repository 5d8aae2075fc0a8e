from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.errors import ClockError, ConfigError
from engine.core.records import (
    TAGS,
    Event,
    MemoryRecord,
    Message,
    ProfileHistoryEntry,
    ScoreRow,
    SourcePointer,
    TimeSpan,
    UserProfile,
)

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

aware = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))


def full_record(**kw) -> MemoryRecord:
    base = dict(
        id=7, user_id="alice", content="Alice went hiking at Mount Tai on 2026-03-07.", memory_type="episodic",
        tags=("episode", "fact"), theme="travel",
        time=TimeSpan(start=T0, end=T0 + timedelta(days=1), granularity="range", text="2026-03-07..2026-03-08"),
        location="Mount Tai", reason="to celebrate", purpose="exercise", keywords=("hiking", "Mount Tai"),
        source=SourcePointer(session_id="s1", message_ids=(3, 4), speaker="Alice", external_ids=("D1:3",)),
        created_at=T0, last_reinforced_at=T0 + timedelta(hours=1), strengthen_count=2, valid_from=T0,
        invalid_at=T0 + timedelta(days=2), superseded_by=9,
    )
    base.update(kw)
    return MemoryRecord(**base)


def test_record_round_trip_every_field():
    r = full_record()
    assert MemoryRecord.from_dict(r.to_dict()) == r
    assert r.reinforced_at == T0 + timedelta(hours=1)
    assert not r.is_current


def test_records_are_frozen():
    r = full_record()
    with pytest.raises(FrozenInstanceError):
        r.content = "x"  # type: ignore[misc]
    assert replace(r, content="y").content == "y"


def test_record_validation_collects_problems():
    with pytest.raises(ConfigError) as info:
        full_record(memory_type="rumour", tags=("gossip",), strengthen_count=-1)
    assert len(info.value.problems) == 3


def test_naive_times_rejected():
    with pytest.raises(ClockError):
        full_record(created_at=datetime(2026, 1, 1))
    with pytest.raises(ClockError):
        Message(user_id="u", session_id="s", role="user", content="x", created_at=datetime(2026, 1, 1))


def test_message_round_trip_and_role_check():
    m = Message(id=1, user_id="u", session_id="s", role="tool", content="42", created_at=T0, name="calc",
                tool_call_id="c1")
    assert Message.from_dict(m.to_dict()) == m
    with pytest.raises(ConfigError):
        Message(user_id="u", session_id="s", role="robot", content="x", created_at=T0)


def test_profile_and_history_round_trip_and_diff():
    p = UserProfile(user_id="u", fields={"identity": ("Li",), "preferences": ("tea",)}, version=2, updated_at=T0)
    assert UserProfile.from_dict(p.to_dict()) == p
    h = ProfileHistoryEntry(user_id="u", version=3, at=T0, before={"identity": ("Li",), "preferences": ("tea",)},
                            after={"identity": ("Li",), "preferences": ("coffee",)}, record_ids=(1, 2))
    assert ProfileHistoryEntry.from_dict(h.to_dict()) == h
    assert h.diff() == {"preferences": {"added": ["coffee"], "removed": ["tea"]}}


def test_event_and_score_row_round_trip():
    e = Event(id=5, user_id="u", session_id="s", kind="gate", at=T0, payload={"maturity": 0.5}, turn=3, event_no=1)
    assert Event.from_dict(e.to_dict()) == e
    row = ScoreRow(record_id=1, ranks={"bm25": 1, "dense": None}, path_scores={"bm25": 2.0}, R=0.5, T=0.9, F=0.6,
                   parts={"alpha_R": 0.1}, S=0.7, verdict="picked", why="top-K", tokens=12, position=0)
    assert ScoreRow.from_dict(row.to_dict()) == row
    from dataclasses import fields  # the hand-written to_dict names every field, in declaration order
    assert list(row.to_dict()) == [f.name for f in fields(ScoreRow)]


def test_timespan_validation():
    with pytest.raises(ConfigError):
        TimeSpan(start=T0, end=T0 - timedelta(seconds=1))
    with pytest.raises(ConfigError):
        TimeSpan(start=T0, end=T0, granularity="fortnight")


@given(
    content=st.text(min_size=1, max_size=200),
    tags=st.lists(st.sampled_from(TAGS), min_size=1, max_size=4, unique=True),
    kws=st.lists(st.text(min_size=1, max_size=12), max_size=5),
    created=aware,
    n=st.integers(0, 1000),
)
def test_record_round_trip_property(content, tags, kws, created, n):
    r = MemoryRecord(user_id="u", content=content, tags=tuple(tags), keywords=tuple(kws), created_at=created,
                     strengthen_count=n)
    assert MemoryRecord.from_dict(r.to_dict()) == r


@given(
    session=st.text(max_size=20),
    ids=st.lists(st.one_of(st.integers(0, 10**9), st.integers(0, 999).map(str)), max_size=6),
    speaker=st.one_of(st.none(), st.text(max_size=10)),
    reply=st.one_of(st.none(), st.integers(0, 10**6)),
    ext=st.lists(st.one_of(st.text(max_size=8), st.integers(0, 99)), max_size=4),
)
def test_stored_source_is_what_from_dict_builds(session, ids, speaker, reply, ext):
    from engine.stores.sqlite.rows import _source

    data = {"session_id": session, "message_ids": ids, "reply_message_id": reply, "external_ids": ext}
    if speaker is not None:
        data["speaker"] = speaker
    built = _source(data)
    assert built == SourcePointer.from_dict(data)
    assert built.message_ids == tuple(int(i) for i in ids) and built.external_ids == tuple(str(e) for e in ext)
    assert _source(built.to_dict()) == built
    with pytest.raises(FrozenInstanceError):
        built.session_id = "other"  # type: ignore[misc]
    with pytest.raises(KeyError):
        _source({"message_ids": ids})


def test_stored_time_span_is_checked_like_the_constructor():
    from engine.stores.sqlite.rows import _time_span

    good = _time_span(T0, T0 + timedelta(days=1), "range", "a..b")
    assert good == TimeSpan(start=T0, end=T0 + timedelta(days=1), granularity="range", text="a..b")
    with pytest.raises(ConfigError):
        _time_span(T0, T0 - timedelta(seconds=1), "day", "")
    with pytest.raises(ConfigError):
        _time_span(T0, T0, "fortnight", "")
    with pytest.raises(ClockError):
        _time_span(T0.replace(tzinfo=None), T0, "day", "")
