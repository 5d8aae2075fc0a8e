"""A question's time constraint (on / before / after / around / between, resolved against the
question's date) and how well a record's time span matches it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np

from engine.core.clock import EXACT_MICROS, ensure_aware, epoch_micros
from engine.core.lru import per_object
from engine.core.records import TimeSpan
from engine.core.timeparse import resolve_times
from engine.core.timespans import month_span, span_label
from engine.roles.types import TimeConstraint

__all__ = ["parse_time_constraint", "around_tolerance", "time_match", "time_match_all", "time_window"]

_TOLERANCE = {
    "instant": timedelta(days=1),
    "day": timedelta(days=3),
    "range": timedelta(days=7),
    "month": timedelta(days=31),
    "year": timedelta(days=366),
}


def around_tolerance(granularity: str) -> timedelta:
    """How far "around t" reaches: ±3 days / ±31 days / ±366 days for a day / month / year."""
    return _TOLERANCE.get(granularity, _TOLERANCE["day"])


_BETWEEN = re.compile(r"\b(?:between|from)\s+(?P<a>.+?)\s+(?:and|to|until|till|through)\s+(?P<b>.+?)(?:[?.!,;]|$)", re.I)
_CN_BETWEEN = re.compile(r"(?:在|从)?(?P<a>\S+?)(?:到|至|和)(?P<b>\S+?)(?:之间|期间|间)")
_OPS = [
    ("before", re.compile(r"\b(?:before|prior\s+to|earlier\s+than|until|till|by)\s+$", re.I)),
    ("after", re.compile(r"\b(?:after|since|later\s+than|following)\s+$", re.I)),
    ("around", re.compile(r"\b(?:around|about|circa|approximately|roughly|near)\s+$", re.I)),
]
_CN_OPS_AFTER = [
    ("before", re.compile(r"^(?:之前|以前|前)")),
    ("after", re.compile(r"^(?:之后|以后|后|以来)")),
    ("around", re.compile(r"^(?:左右|前后|附近)")),
]
_CN_OPS_BEFORE = [("after", re.compile(r"(?:自从|自|从)$")), ("before", re.compile(r"(?:截至|直到)$"))]


def _constraint(op: str, span: TimeSpan, text: str) -> TimeConstraint:
    return TimeConstraint(op=op, start=span.start, end=span.end, granularity=span.granularity, text=text)


def parse_time_constraint(question: str, *, now: datetime) -> TimeConstraint | None:
    """The question's time constraint (on/before/after/around/between), resolved against `now`."""
    now = ensure_aware(now, what="parse_time_constraint now")
    mentions = resolve_times(question, anchor=now)
    if not mentions:
        return None
    if len(mentions) >= 2:
        between = _BETWEEN.search(question) or _CN_BETWEEN.search(question)
        if between:
            a, b = mentions[0], mentions[1]
            a_span, b_span = a.span, b.span
            if a.relative and not re.search(r"\d{4}", a.surface) and a_span.granularity == "month":
                year = b_span.start.year  # "between May and July 2023": May takes July's year
                a_span = month_span(year, a_span.start.month, now.tzinfo)
            first, last = sorted((a_span, b_span), key=lambda s: s.start)
            span = TimeSpan(start=first.start, end=max(first.end, last.end), granularity="range")
            return _constraint("between", span, f"{span_label(first)}..{span_label(last)}")
    mention = mentions[0]
    before_text = question[: mention.start]
    after_text = question[mention.end :]
    op = "on"
    for name, pattern in _OPS:
        if pattern.search(before_text):
            op = name
            break
    else:
        for name, pattern in _CN_OPS_AFTER:
            if pattern.match(after_text.lstrip()):
                op = name
                break
        for name, pattern in _CN_OPS_BEFORE:
            if pattern.search(before_text.rstrip()):
                op = name
    span = mention.span
    if op in ("before", "after") and re.search(r"\b(?:since|until|till|by)\s+$", before_text, re.I):
        inclusive = span.start if op == "after" else span.end  # since X includes X; by X includes X
        span = TimeSpan(start=inclusive, end=inclusive, granularity=span.granularity)
    return _constraint(op, span, span_label(mention.span))


def _gap(a_start: datetime, a_end: datetime, b_start: datetime, b_end: datetime) -> timedelta:
    """Distance between two intervals (zero when they overlap)."""
    if a_end < b_start:
        return b_start - a_end
    if b_end < a_start:
        return a_start - b_end
    return timedelta(0)


def _near(gap: timedelta, tolerance: timedelta) -> float:
    """A soft score < 1 for a miss: 0.5 at the boundary, falling to 0 at one tolerance away."""
    if gap <= timedelta(0):
        return 0.5
    return max(0.0, 0.5 * (1.0 - gap / tolerance))


def time_match(constraint: TimeConstraint, span: TimeSpan | None) -> float:
    """How well a record's time satisfies a query's constraint, in [0, 1] (0 without a time)."""
    if span is None:
        return 0.0
    tol = around_tolerance(constraint.granularity)
    c_start, c_end = constraint.start, constraint.end
    if constraint.op == "around":
        c_start, c_end = c_start - tol, c_end + tol
    if constraint.op in ("on", "between", "around"):
        gap = _gap(span.start, span.end, c_start, c_end)
        return 1.0 if gap == timedelta(0) else _near(gap, tol)
    if constraint.op == "before":
        if span.end <= c_start:
            return 1.0
        if span.start < c_start:
            return 0.5  # straddles the bound
        return _near(span.start - c_start, tol)
    if span.start >= c_end:  # after
        return 1.0
    if span.end > c_end:
        return 0.5
    return _near(c_end - span.end, tol)


def time_match_all(constraint: TimeConstraint, spans: Sequence[TimeSpan | None]) -> list[float]:
    """`[time_match(constraint, s) for s in spans]`, exactly, for all at once: the instants as
    whole microseconds since the epoch (int64), so every comparison and difference is the
    datetimes' own, and a miss's `gap / tolerance` is the same correctly rounded division of two
    integers below 2**53 that timedelta / timedelta is. A span beyond that range (~285 years
    from 1970) is scored one by one. A time question's window read scores up to 200 records."""
    n = len(spans)
    if n == 0:
        return []
    tol = around_tolerance(constraint.granularity)
    c_start, c_end = constraint.start, constraint.end
    if constraint.op == "around":
        c_start, c_end = c_start - tol, c_end + tol
    cs, ce, t = epoch_micros(c_start), epoch_micros(c_end), tol // timedelta(microseconds=1)
    known = [_span_micros(s) for s in spans if s is not None]
    if max([abs(cs), abs(ce), *(abs(v) for pair in known for v in pair)]) >= EXACT_MICROS:
        return [float(time_match(constraint, s)) for s in spans]
    has = np.fromiter((s is not None for s in spans), dtype=bool, count=n)
    ss = np.zeros(n, dtype=np.int64)
    se = np.zeros(n, dtype=np.int64)
    if known:
        ss[has] = [a for a, _ in known]
        se[has] = [b for _, b in known]
    if constraint.op in ("on", "between", "around"):
        gap = np.where(se < cs, cs - se, np.where(ce < ss, ss - ce, 0))
        out = np.where(gap == 0, 1.0, _near_all(gap, t))
    elif constraint.op == "before":
        out = np.where(se <= cs, 1.0, np.where(ss < cs, 0.5, _near_all(ss - cs, t)))
    else:  # after
        out = np.where(ss >= ce, 1.0, np.where(se > ce, 0.5, _near_all(ce - se, t)))
    return np.where(has, out, 0.0).tolist()


def _near_all(gap: np.ndarray, tolerance: int) -> np.ndarray:
    """`_near` for gaps and a tolerance in whole microseconds."""
    with np.errstate(invalid="ignore", divide="ignore"):
        soft = np.maximum(0.0, 0.5 * (1.0 - gap / np.int64(tolerance)))
    return np.where(gap <= 0, 0.5, soft)


@per_object()
def _span_micros(span: TimeSpan) -> tuple[int, int]:
    """A span's start and end as whole microseconds since the epoch (kept per span object)."""
    return epoch_micros(span.start), epoch_micros(span.end)



def time_window(constraint: TimeConstraint) -> tuple[datetime | None, datetime | None]:
    """The span of record times `time_match` scores above 0 for `constraint` (None: open end).

    A record whose time lies outside it scores 0, so a bounded read of this window finds every
    record the time constraint can credit."""
    tol = around_tolerance(constraint.granularity)
    reach = 2 * tol if constraint.op == "around" else tol
    if constraint.op == "before":
        return None, constraint.start + tol
    if constraint.op == "after":
        return constraint.end - tol, None
    return constraint.start - reach, constraint.end + reach
