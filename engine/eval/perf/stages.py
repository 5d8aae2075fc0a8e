"""Where the time goes: medians of the stages the engine times itself (`Retrieval.stages`,
`TurnResult.stages`; engine.core.laps), over the timed retrievals or turns of a measurement.

A stage a sample did not run counts 0 there (a turn without an event spent nothing on it), so
the medians of two groups subtract stage by stage: `stage_gaps` is what one group spends more
than another, e.g. a user with a long memory against a new user, timed side by side.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["turn_stages", "stage_medians", "stage_gaps", "format_stages"]

#: The retrieval's stages inside a turn's figures: "recall/bm25", "recall/dense", ...
RECALL_PREFIX = "recall/"


def turn_stages(result: Any) -> dict[str, float]:
    """A `TurnResult`'s steps and its retrieval's stages (prefixed RECALL_PREFIX), ms."""
    out = dict(getattr(result, "stages", None) or {})
    retrieval = getattr(result, "retrieval", None)
    for name, ms in (getattr(retrieval, "stages", None) or {}).items():
        out[RECALL_PREFIX + name] = ms
    return out


def stage_medians(samples: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each stage's median over `samples` (0 where a sample lacks it), in the order stages first appear."""
    names = list(dict.fromkeys(name for s in samples for name in s))
    return {name: round(statistics.median([float(s.get(name, 0.0)) for s in samples]), 3) for name in names}


def stage_gaps(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    """`a` - `b` per stage (medians), largest first."""
    gaps = {name: round(a.get(name, 0.0) - b.get(name, 0.0), 3) for name in dict.fromkeys([*a, *b])}
    return dict(sorted(gaps.items(), key=lambda kv: -kv[1]))


def format_stages(stages: Mapping[str, float], *, top: int | None = None, signed: bool = False) -> str:
    """"name 0.12, other 0.05, ..." (the first `top` of them); `signed`: with a sign, as gaps."""
    items = list(stages.items())[:top] if top else list(stages.items())
    spec = "+.2f" if signed else ".2f"
    return ", ".join(f"{name} {format(ms, spec)}" for name, ms in items) or "-"
