"""The dimension path's bounded time read misses nothing: every record time `time_match` credits
overlaps the window `time_window` gives for the constraint."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from engine.core.records import TimeSpan
from engine.core.timequery import time_match, time_window
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
