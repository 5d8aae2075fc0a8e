"""Time for the engine: the only place it reads "now".

`VirtualClock` is part of the library (not a test monkeypatch): the lab and scenario replays drive
it; it moves forward only. `SystemClock` reads the wall clock through an attribute tests can swap.
Durations are parsed from compact strings ("35s", "2h", "3d", "1w", "1h30m") or ISO 8601 ("PT2H").
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from engine.core.errors import ClockError

__all__ = [
    "Clock",
    "VirtualClock",
    "SystemClock",
    "ensure_aware",
    "parse_duration",
    "parse_datetime",
    "format_duration",
    "epoch_micros",
    "EXACT_MICROS",
]

#: Whole microseconds below this (~285 years from 1970) convert to a float exactly: arrays of
#: `epoch_micros` compare and divide as the datetimes and timedeltas they came from.
EXACT_MICROS = 2**53
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def epoch_micros(when: datetime) -> int:
    """Whole microseconds since the epoch of an aware datetime (exact: an int)."""
    return (when - _EPOCH) // _MICROSECOND


@runtime_checkable
class Clock(Protocol):
    """A source of tz-aware "now"."""

    def now(self) -> datetime: ...


def ensure_aware(value: datetime, *, what: str = "datetime") -> datetime:
    """Return `value` if it carries a timezone; naive datetimes are an error, never guessed."""
    if not isinstance(value, datetime):
        raise ClockError(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ClockError(
            f"{what} {value.isoformat()} is naive; give it a timezone "
            f"(e.g. {value.isoformat()}+00:00 or datetime(..., tzinfo=UTC))"
        )
    return value


def parse_datetime(text: str, *, what: str = "time") -> datetime:
    """Parse an ISO 8601 timestamp that carries an offset."""
    if isinstance(text, datetime):
        return ensure_aware(text, what=what)
    try:
        value = datetime.fromisoformat(str(text).strip())
    except ValueError as exc:
        raise ClockError(
            f"{what} {text!r} is not an ISO 8601 timestamp; write e.g. 2026-03-02T09:00:00+08:00"
        ) from exc
    return ensure_aware(value, what=f"{what} {text!r}")


class VirtualClock:
    """A clock that moves only when told to, and only forward."""

    def __init__(self, start: datetime):
        self._now = ensure_aware(start, what="VirtualClock start")

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta | float | int | str) -> datetime:
        """Move forward by a duration (timedelta, seconds, or a duration string)."""
        step = _as_timedelta(delta)
        if step < timedelta(0):
            raise ClockError(
                f"cannot advance by a negative duration ({step}); the virtual clock only moves forward"
            )
        self._now = self._now + step
        return self._now

    def set(self, when: datetime) -> datetime:
        """Jump to `when`, which must not be earlier than now."""
        when = ensure_aware(when, what="VirtualClock.set target")
        if when < self._now:
            raise ClockError(
                f"cannot set the clock back from {self._now.isoformat()} to {when.isoformat()}; "
                "time only moves forward (start a new clock for a new timeline)"
            )
        self._now = when
        return self._now

    def __repr__(self) -> str:
        return f"VirtualClock({self._now.isoformat()})"


class SystemClock:
    """The wall clock, in UTC. `source` is an attribute so tests can replace it."""

    def __init__(self, source=None):
        self.source = source or (lambda: datetime.now(UTC))

    def now(self) -> datetime:
        return ensure_aware(self.source(), what="SystemClock source")


_UNIT_SECONDS = {
    "ms": 0.001,
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "d": 86400,
    "w": 604800,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|sec|min|s|m|h|d|w)", re.IGNORECASE)
_ISO = re.compile(
    r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)


def parse_duration(text: str | int | float | timedelta) -> timedelta:
    """Parse "35s", "2h", "3d", "1w", "1h30m", "90" (seconds) or ISO "PT2H" into a timedelta."""
    try:
        return _parse_duration(text)
    except OverflowError:
        raise ClockError(f"duration {text!r} is too long; keep durations under about 2.7 million years") from None


def _parse_duration(text: str | int | float | timedelta) -> timedelta:
    if isinstance(text, timedelta):
        return text
    if isinstance(text, bool):
        raise ClockError(f"duration {text!r} is not a duration; write e.g. 35s, 2h, 3d or 1w")
    if isinstance(text, (int, float)):
        if text != text or text in (float("inf"), float("-inf")):
            raise ClockError(f"duration {text!r} is not finite; write e.g. 35s, 2h, 3d or 1w")
        return timedelta(seconds=float(text))
    raw = str(text).strip()
    if not raw:
        raise ClockError("empty duration; write e.g. 35s, 2h, 3d or 1w")
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        return timedelta(seconds=float(raw))
    iso = _ISO.match(raw)
    if iso and raw.upper() not in ("P", "PT"):
        parts = {k: float(v) for k, v in iso.groupdict().items() if v}
        return timedelta(
            weeks=parts.get("w", 0),
            days=parts.get("d", 0),
            hours=parts.get("h", 0),
            minutes=parts.get("m", 0),
            seconds=parts.get("s", 0),
        )
    pos = 0
    total = 0.0
    compact = raw.replace(" ", "")
    for match in _PART.finditer(compact):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]
        pos = match.end()
    if pos != len(compact) or pos == 0:
        raise ClockError(
            f"duration {raw!r} is not understood; write a number and a unit, "
            "e.g. 35s, 10min, 2h, 3d, 1w, 1h30m (or ISO 8601 like PT2H)"
        )
    return timedelta(seconds=total)


def _as_timedelta(delta: timedelta | float | int | str) -> timedelta:
    return parse_duration(delta)


def format_duration(seconds: float) -> str:
    """A short human form: 870 s -> '14.5 min', 3180 -> '53 min', 90000 -> '1.04 d'."""
    s = float(seconds)
    if s < 0:
        return "-" + format_duration(-s)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        m = round(s / 60, 1)
        return f"{m:g} min"
    if s < 86400:
        h = s / 3600
        return f"{h:.1f} h"
    return f"{s / 86400:.2f} d"
