"""The dimension path's bounded time read misses nothing: every record time `time_match` credits
overlaps the window `time_window` gives for the constraint."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.records import TimeSpan
from engine.core.timequery import time_match, time_match_all, time_window
from engine.roles.types import TimeConstraint

BASE = datetime(2024, 1, 1, tzinfo=UTC)
hours = st.integers(min_value=-24 * 800, max_value=24 * 800)


@given(op=st.sampled_from(["on", "between", "around", "before", "after"]),
       granularity=st.sampled_from(["instant", "day", "range", "month", "year"]),
       c_start=hours, c_len=st.integers(0, 24 * 60), r_start=hours, r_len=st.integers(0, 24 * 60))
def test_every_credited_time_overlaps_the_window(op, granularity, c_start, c_len, r_start, r_len):
    start = BASE + timedelta(hours=c_start)
    constraint = TimeConstraint(op=op, start=start, end=start + timedelta(hours=c_len), granularity=granularity,
                                text="t")
    span = TimeSpan(start=BASE + timedelta(hours=r_start), end=BASE + timedelta(hours=r_start + r_len),
                    granularity="day", text="r")
    lo, hi = time_window(constraint)
    inside = (lo is None or span.end >= lo) and (hi is None or span.start <= hi)
    if time_match(constraint, span) > 0:
        assert inside


micros = st.integers(min_value=-10**12, max_value=10**12)  # about +-11.6 days, to the microsecond
zones = st.sampled_from([UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5, minutes=-30))])


@settings(max_examples=300, deadline=None)
@given(op=st.sampled_from(["on", "between", "around", "before", "after"]),
       granularity=st.sampled_from(["instant", "day", "range", "month", "year"]),
       c_at=micros, c_len=st.integers(0, 10**11), zone=zones,
       spans=st.lists(st.one_of(st.none(), st.tuples(micros, st.integers(0, 10**11), zones)), max_size=12))
def test_all_spans_at_once_match_one_by_one_exactly(op, granularity, c_at, c_len, zone, spans):
    start = (BASE + timedelta(microseconds=c_at)).astimezone(zone)
    constraint = TimeConstraint(op=op, start=start, end=start + timedelta(microseconds=c_len),
                                granularity=granularity, text="t")
    made = [None if s is None else TimeSpan(start=(BASE + timedelta(microseconds=s[0])).astimezone(s[2]),
                                            end=(BASE + timedelta(microseconds=s[0] + s[1])).astimezone(s[2]),
                                            granularity="day", text="r") for s in spans]
    got = time_match_all(constraint, made)
    want = [float(time_match(constraint, s)) for s in made]
    assert got == want and all(type(v) is float for v in got)


def test_spans_beyond_the_exact_range_are_matched_one_by_one():
    far = TimeSpan(start=datetime(2400, 1, 1, tzinfo=UTC), end=datetime(2400, 1, 2, tzinfo=UTC), granularity="day")
    near = TimeSpan(start=BASE, end=BASE + timedelta(days=1), granularity="day")
    c = TimeConstraint(op="after", start=BASE, end=BASE + timedelta(days=2), granularity="day", text="t")
    assert time_match_all(c, [far, None, near]) == [float(time_match(c, s)) if s else 0.0 for s in (far, None, near)]
    assert time_match_all(c, []) == []
