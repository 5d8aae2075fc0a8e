from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.clock import (
    SystemClock,
    VirtualClock,
    ensure_aware,
    format_duration,
    parse_datetime,
    parse_duration,
)
from engine.core.errors import ClockError

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_virtual_clock_advances_and_sets_forward():
    c = VirtualClock(T0)
    assert c.now() == T0
    c.advance("35s")
    c.advance(timedelta(hours=2))
    c.advance(60)
    assert c.now() == T0 + timedelta(hours=2, seconds=95)
    c.set(T0 + timedelta(days=1))
    assert c.now() == T0 + timedelta(days=1)


def test_virtual_clock_refuses_to_go_backwards():
    c = VirtualClock(T0)
    with pytest.raises(ClockError, match="only moves forward"):
        c.advance(timedelta(seconds=-1))
    with pytest.raises(ClockError, match="cannot set the clock back"):
        c.set(T0 - timedelta(seconds=1))
    assert c.now() == T0


def test_naive_datetimes_are_errors():
    with pytest.raises(ClockError, match="naive"):
        VirtualClock(datetime(2026, 1, 1))
    with pytest.raises(ClockError, match="naive"):
        VirtualClock(T0).set(datetime(2027, 1, 1))
    with pytest.raises(ClockError, match="naive"):
        SystemClock(source=lambda: datetime(2026, 1, 1)).now()
    with pytest.raises(ClockError):
        parse_datetime("2026-03-02T09:00:00")


def test_system_clock_source_is_replaceable():
    c = SystemClock(source=lambda: T0)
    assert c.now() == T0
    assert SystemClock().now().tzinfo is not None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("35s", 35), ("10min", 600), ("2h", 7200), ("3d", 259200), ("1w", 604800), ("1h30m", 5400),
     ("90", 90), ("PT2H", 7200), ("P1DT1H", 90000), ("1.5h", 5400), (" 2 h ", 7200), (45, 45)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "abc", "3 parsecs", "h", "5x", "1h junk", "P", float("nan"), True])
def test_parse_duration_rejects_with_a_fix(text):
    with pytest.raises(ClockError, match="e.g."):
        parse_duration(text)


@given(st.text(max_size=30))
def test_parse_duration_never_crashes_on_text(text):
    try:
        d = parse_duration(text)
    except ClockError:
        return
    assert isinstance(d, timedelta)


def test_format_duration():
    assert format_duration(30) == "30 s"
    assert format_duration(870) == "14.5 min"
    assert format_duration(3180) == "53 min"
    assert format_duration(7200) == "2.0 h"
    assert format_duration(172800) == "2.00 d"


def test_ensure_aware_accepts_any_offset():
    tz = timezone(timedelta(hours=8))
    assert ensure_aware(datetime(2026, 1, 1, tzinfo=tz)).utcoffset() == timedelta(hours=8)
