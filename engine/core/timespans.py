"""Absolute time spans: a day, a month, a year or a range, and their labels (YYYY-MM-DD, YYYY-MM,
YYYY, A..B), in the time zone they were said in."""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, time, timedelta, tzinfo

from engine.core.errors import ConfigError
from engine.core.records import TimeSpan

__all__ = ["day_start", "day_end", "day_span", "month_span", "year_span", "range_span", "span_label",
           "parse_time_label", "span_for"]

_END_OF_DAY = time(23, 59, 59, 999999)


def day_start(d: date, tz: tzinfo) -> datetime:
    return datetime.combine(d, time(0), tzinfo=tz)


def day_end(d: date, tz: tzinfo) -> datetime:
    return datetime.combine(d, _END_OF_DAY, tzinfo=tz)


def day_span(d: date, tz: tzinfo) -> TimeSpan:
    return TimeSpan(start=day_start(d, tz), end=day_end(d, tz), granularity="day", text=d.isoformat())


def month_span(year: int, month: int, tz: tzinfo) -> TimeSpan:
    last = calendar.monthrange(year, month)[1]
    return TimeSpan(
        start=day_start(date(year, month, 1), tz),
        end=day_end(date(year, month, last), tz),
        granularity="month",
        text=f"{year:04d}-{month:02d}",
    )


def year_span(year: int, tz: tzinfo) -> TimeSpan:
    return TimeSpan(
        start=day_start(date(year, 1, 1), tz), end=day_end(date(year, 12, 31), tz), granularity="year", text=f"{year:04d}"
    )


def range_span(first: date, last: date, tz: tzinfo) -> TimeSpan:
    return TimeSpan(
        start=day_start(first, tz),
        end=day_end(last, tz),
        granularity="range",
        text=f"{first.isoformat()}..{last.isoformat()}",
    )


def span_label(span: TimeSpan) -> str:
    """The normalised label of a span: YYYY-MM-DD, YYYY-MM, YYYY or START..END."""
    if span.granularity == "year":
        return f"{span.start.year:04d}"
    if span.granularity == "month":
        return f"{span.start.year:04d}-{span.start.month:02d}"
    if span.granularity == "day":
        return span.start.date().isoformat()
    if span.granularity == "range":
        if ".." in span.text:  # keep the stated ends' own granularity ("2023-04..2023-06")
            return span.text
        return f"{span.start.date().isoformat()}..{span.end.date().isoformat()}"
    return span.start.isoformat()


_LABEL_DAY = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$")
_LABEL_MONTH = re.compile(r"^(\d{4})-(\d{1,2})$")
_LABEL_YEAR = re.compile(r"^(\d{4})$")


def parse_time_label(label: str, tz: tzinfo) -> TimeSpan:
    """The inverse of `span_label`: "2023-05-07", "2023-05", "2023" or "A..B" in timezone `tz`."""
    raw = (label or "").strip()
    try:
        if ".." in raw:
            a, b = (p.strip() for p in raw.split("..", 1))
            first, last = parse_time_label(a, tz), parse_time_label(b, tz)
            if last.end < first.start:
                raise ValueError("range ends before it starts")
            return TimeSpan(
                start=first.start, end=last.end, granularity="range", text=f"{first.text}..{last.text}"
            )
        if m := _LABEL_DAY.match(raw):
            return day_span(date(int(m[1]), int(m[2]), int(m[3])), tz)
        if m := _LABEL_MONTH.match(raw):
            return month_span(int(m[1]), int(m[2]), tz)
        if m := _LABEL_YEAR.match(raw):
            return year_span(int(m[1]), tz)
    except ValueError as exc:
        raise ConfigError(f"time label {label!r} is not a valid date ({exc}); write e.g. 2023-05-07") from exc
    raise ConfigError(
        f"time label {label!r} is not understood; write YYYY-MM-DD, YYYY-MM, YYYY or START..END"
    )


def span_for(point: date, period: str, tz: tzinfo) -> TimeSpan:
    if period == "year":
        return year_span(point.year, tz)
    if period == "month":
        return month_span(point.year, point.month, tz)
    if period == "week":
        monday = point - timedelta(days=point.weekday())
        return range_span(monday, monday + timedelta(days=6), tz)
    return day_span(point, tz)


