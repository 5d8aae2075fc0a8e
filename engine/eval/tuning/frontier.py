"""The Pareto frontier of tuning points and the safe choice on it.

A point dominates another when it recalls at least as much, serves no more stale values, injects
no more payload and makes no more calls, and is better in one. The choice is always a frontier
point: the best training recall among those serving no more stale values than the base (a setting
that serves more stale memory than the base is never chosen); ties go to fewer stale values, then
less payload, then fewer calls, then grid order. When no grid point is safe, the base is chosen.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core.errors import ConfigError
from engine.eval.tuning.points import SweepPoint

__all__ = ["OBJECTIVES", "dominates", "mark_frontier", "choose"]

OBJECTIVES = ("recall-cost",)


def _key(p: SweepPoint) -> tuple[float, int, int, int]:
    return (p.recall, -p.rejected_served, -p.payload_tokens, -p.calls)


def dominates(q: SweepPoint, p: SweepPoint) -> bool:
    """q is at least as good as p on every objective and better on one."""
    kq, kp = _key(q), _key(p)
    return all(a >= b for a, b in zip(kq, kp, strict=True)) and kq != kp


def mark_frontier(points: Sequence[SweepPoint]) -> list[SweepPoint]:
    """Mark (and return) the points no other point dominates."""
    for p in points:
        p.frontier = not any(q is not p and dominates(q, p) for q in points)
    return [p for p in points if p.frontier]


def _base(points: Sequence[SweepPoint]) -> SweepPoint | None:
    return next((p for p in points if p.reference and p.label.startswith("base")), None)


def choose(points: Sequence[SweepPoint], objective: str = "recall-cost") -> SweepPoint:
    """The safe frontier choice (see the module docstring); marks the frontier first if needed.

    Candidates are the frontier's grid points (and the base) serving no more stale values than the
    base; if a comparison preset dominates them all, the best safe grid point is taken."""
    if objective not in OBJECTIVES:
        raise ConfigError(f"objective {objective!r} is unknown; use one of {', '.join(OBJECTIVES)}")
    grid = [p for p in points if not p.reference]
    if not grid:
        raise ConfigError("no grid point to choose from; give --grid with at least one valid point")
    if not any(p.frontier for p in points):
        mark_frontier(points)
    base = _base(points)
    limit = base.rejected_served if base is not None else None
    order = {id(p): i for i, p in enumerate(points)}

    def safe(p: SweepPoint) -> bool:
        return limit is None or p.rejected_served <= limit

    def rank(p: SweepPoint) -> tuple:
        return (-round(p.recall, 9), p.rejected_served, p.payload_tokens, p.calls, p.reference, order[id(p)])

    candidates = [p for p in points if p.frontier and safe(p) and (not p.reference or p is base)]
    if candidates:
        return min(candidates, key=rank)
    fallback = [p for p in grid if safe(p)]
    return min(fallback, key=rank) if fallback else (base or min(grid, key=rank))
