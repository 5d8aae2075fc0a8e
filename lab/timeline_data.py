"""Memory over time, computed: every record's strength T along the virtual timeline.

Pure functions (no Streamlit, no store): the page hands in the user's records and the event log's
`reinforce` and `inject` entries, and gets back points (record, time, T), markers and the ranking
by T at any past moment. T is the engine's own `engine.core.forgetting.decay`, counted the way the
ranking counts it (`MemoryRecord.reinforced_at`): from the last reinforcement at or before t, else
from when the record's source was said (never from when it was extracted).

A record's line starts when it entered memory (its extraction, `created_at`) and ends when it was
superseded (`invalid_at`), or at the end of the timeline. At a reinforcement T jumps back to 1; the
jump is drawn as two points at the same instant (before, after), kept in order by `seq`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from engine.core.forgetting import decay

__all__ = [
    "IN_MEMORY",
    "PRE_PHASE",
    "Marker",
    "Point",
    "RecordHistory",
    "elapsed",
    "histories",
    "markers",
    "ranking_at",
    "series",
    "strength_at",
    "time_unit",
]

#: Points sampled across the whole timeline for every line (plus a few after each reinforcement).
GRID_POINTS = 240
SEGMENT_POINTS = 24
IN_MEMORY = "in memory"
PRE_PHASE = "said, not yet extracted"


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordHistory:
    """One record's life on the timeline: when it entered memory, when it left, what decay counts from."""

    record_id: int
    content: str
    start: datetime  # extraction: the record exists from here
    end: datetime | None  # superseded at (None: still current)
    said_at: datetime  # decay's first anchor
    reinforcements: tuple[tuple[datetime, str], ...]  # (at, cause), sorted

    def anchor(self, t: datetime, *, inclusive: bool = True) -> datetime:
        """The time decay counts from at t: the last reinforcement at (or strictly before) t, else said_at."""
        last = self.said_at
        for at, _ in self.reinforcements:
            if at < t or (inclusive and at == t):
                last = max(last, at)
        return last

    def alive(self, t: datetime) -> bool:
        return self.start <= t and (self.end is None or t < self.end)

    def reinforced_by(self, t: datetime) -> int:
        return sum(1 for at, _ in self.reinforcements if at <= t)


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    record_id: int
    at: datetime
    T: float
    seq: int  # draw order within the record's line
    phase: str = IN_MEMORY  # or "said, not yet extracted" (decay already counts; the record is not served)


@dataclass(frozen=True, kw_only=True, slots=True)
class Marker:
    record_id: int
    at: datetime
    kind: str  # "extracted", "reinforced", "injected"
    T: float  # the record's strength at that moment (after a reinforcement; before it for an injection)
    detail: str = ""


def _time(value: Any, fallback: datetime) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return fallback
    return fallback


def histories(records: Iterable[Any], reinforce_events: Iterable[Any]) -> list[RecordHistory]:
    """Each record's history from its own fields and the log's `reinforce` events.

    A reinforcement's time is the payload's `at` (a restatement is dated when it was said), else
    the event's time. The record's `last_reinforced_at` is included even if the log lacks it (a
    trimmed or imported log), so the last anchor always matches the store.
    """
    by_id: dict[int, dict[datetime, str]] = {}
    for e in reinforce_events:
        payload: Mapping[str, Any] = e.payload
        at = _time(payload.get("at"), e.at)
        for rid in payload.get("record_ids", ()):
            by_id.setdefault(int(rid), {}).setdefault(at, str(payload.get("cause", "")))
    out = []
    for r in records:
        if r.id is None:
            continue
        times = dict(by_id.get(r.id, {}))
        if r.last_reinforced_at is not None:
            times.setdefault(r.last_reinforced_at, "reinforced")
        said = r.said_at or r.created_at
        out.append(RecordHistory(
            record_id=r.id, content=r.content, start=r.created_at, end=r.invalid_at, said_at=said,
            reinforcements=tuple(sorted(times.items())),
        ))
    return sorted(out, key=lambda h: h.record_id)


def strength_at(h: RecordHistory, t: datetime, *, tau: float, c: float, decay_enabled: bool = True,
                inclusive: bool = True) -> float:
    """T of the record at t (as the ranking would have computed it then)."""
    if not decay_enabled:
        return 1.0
    return float(decay((t - h.anchor(t, inclusive=inclusive)).total_seconds(), tau=tau, c=c))


def series(hs: Sequence[RecordHistory], *, until: datetime, tau: float, c: float, decay_enabled: bool = True,
           since: datetime | None = None, grid_points: int = GRID_POINTS,
           segment_points: int = SEGMENT_POINTS, before_extraction: bool = False) -> list[Point]:
    """Points (record, t, T) for every record's line from its start to its end (or `until`).

    `before_extraction` also draws the stretch from when the source was said to the extraction
    (phase PRE_PHASE, ending where the in-memory line starts): the decay the record brings with it.

    A shared grid over [since, until] plus, for each segment after a start or reinforcement, points
    spaced geometrically (the stretched exponential falls fastest just after its anchor).
    """
    if not hs:
        return []
    since = since or min(h.start for h in hs)
    span = max((until - since).total_seconds(), 0.0)
    grid = [since + timedelta(seconds=float(s)) for s in np.linspace(0.0, span, max(2, grid_points))] if span else [since]
    points: list[Point] = []
    for h in hs:
        stop = min(until, h.end) if h.end is not None else until
        if stop < h.start:
            continue
        times = {t for t in grid if h.start <= t <= stop} | {h.start, stop}
        jumps = [at for at, _ in h.reinforcements if h.start <= at <= stop]
        times |= set(jumps)
        for a in [h.start, *jumps]:
            seg = (stop - a).total_seconds()
            if seg > 0:
                times |= {a + timedelta(seconds=float(s)) for s in np.geomspace(seg / 1000, seg, segment_points)}
        seq = 0
        if before_extraction and h.said_at < h.start:
            lead = (h.start - h.said_at).total_seconds()
            pre = sorted({h.said_at, h.start} | {t for t in grid if h.said_at < t < h.start}
                         | {h.said_at + timedelta(seconds=float(x)) for x in np.geomspace(lead / 1000, lead, segment_points)})
            for t in pre:
                points.append(Point(record_id=h.record_id, at=t, T=strength_at(
                    h, t, tau=tau, c=c, decay_enabled=decay_enabled), seq=seq, phase=PRE_PHASE))
                seq += 1
        for t in sorted(times):
            if t in jumps and t > h.start:
                points.append(Point(record_id=h.record_id, at=t, T=strength_at(
                    h, t, tau=tau, c=c, decay_enabled=decay_enabled, inclusive=False), seq=seq))
                seq += 1
            points.append(Point(record_id=h.record_id, at=t,
                                T=strength_at(h, t, tau=tau, c=c, decay_enabled=decay_enabled), seq=seq))
            seq += 1
    return points


def markers(hs: Sequence[RecordHistory], inject_events: Iterable[Any], *, tau: float, c: float,
            decay_enabled: bool = True, until: datetime | None = None) -> list[Marker]:
    """Extraction, reinforcement and injection markers, placed on their record's line."""
    by_id = {h.record_id: h for h in hs}
    out: list[Marker] = []
    for h in hs:
        out.append(Marker(record_id=h.record_id, at=h.start, kind="extracted",
                          T=strength_at(h, h.start, tau=tau, c=c, decay_enabled=decay_enabled)))
        for at, cause in h.reinforcements:
            if h.start <= at and (until is None or at <= until):
                out.append(Marker(record_id=h.record_id, at=at, kind="reinforced", detail=cause,
                                  T=strength_at(h, at, tau=tau, c=c, decay_enabled=decay_enabled)))
    for e in inject_events:
        for rid in e.payload.get("record_ids", ()):
            h = by_id.get(int(rid))
            if h is None or (until is not None and e.at > until):
                continue
            out.append(Marker(record_id=h.record_id, at=e.at, kind="injected", detail=f"turn {e.turn}",
                              T=strength_at(h, e.at, tau=tau, c=c, decay_enabled=decay_enabled, inclusive=False)))
    return sorted(out, key=lambda m: (m.at, m.record_id, m.kind))


def ranking_at(hs: Sequence[RecordHistory], t: datetime, *, tau: float, c: float,
               decay_enabled: bool = True) -> list[dict[str, Any]]:
    """The records in memory at t, strongest first: T then, reinforcements so far, decay's anchor."""
    rows = [
        {"record_id": h.record_id, "content": h.content,
         "T": strength_at(h, t, tau=tau, c=c, decay_enabled=decay_enabled),
         "reinforcements": h.reinforced_by(t), "decay counts from": h.anchor(t)}
        for h in hs if h.alive(t)
    ]
    rows.sort(key=lambda r: (-r["T"], r["record_id"]))
    for i, r in enumerate(rows, start=1):
        r["rank"] = i
    return rows


def time_unit(span_seconds: float) -> tuple[str, float]:
    """The axis unit for a timeline this long: hours up to four days, days beyond."""
    return ("hours", 3600.0) if span_seconds <= 4 * 86400 else ("days", 86400.0)


def elapsed(t: datetime, start: datetime, unit_seconds: float = 3600.0) -> float:
    """t as a number of units since start (the chart's x)."""
    return (t - start).total_seconds() / unit_seconds
