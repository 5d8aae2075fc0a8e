"""Step 2, the gate: is the oldest unprocessed message mature, and is working memory full enough?

Maturity is `M(age of the oldest pending message)` against `slice_value`. The trigger is measured
over the mature prefix of the pending messages (what an event would extract), so one gate opening
extracts a batch and the gate closes again until another batch matures: never an event every
turn. An idle gap past the slice gate also opens it, and so does a pending user message announcing
a change (`cue_event`): that message and the ones before it are extracted on its turn, so the
update supersedes what it corrects before retrieval, and the live-window guard has nothing left
to read (one extractor call instead of two).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engine.core.config import MemoryConfig
from engine.core.forgetting import maturity
from engine.core.records import Message
from engine.core.tokens import TokenCounter
from engine.memory.results import GateStatus

__all__ = ["gate_status", "mature_prefix", "cue_prefix", "cue_events"]


def mature_prefix(pending: Sequence[Message], now: datetime, gate_seconds: float, *,
                  cue: bool = False) -> list[Message]:
    """The leading pending messages old enough to slice; stops at the first immature one so a
    cursor moved past them never skips a message. With `cue`, a user message announcing a change
    (`has_change_cue`) is mature at once, and so is every message before it: a correction is
    extracted (and supersedes what it corrects) on its own turn instead of being read twice, once
    by the live-window guard and again by a later event."""
    n = 0
    while n < len(pending) and (now - pending[n].created_at).total_seconds() >= gate_seconds - 1e-9:
        n += 1
    if cue:
        n = max(n, cue_prefix(pending))
    return list(pending[:n])


def cue_prefix(pending: Sequence[Message]) -> int:
    """How many leading pending messages end with the last user message carrying a change cue (0: none)."""
    from engine.memory.contradiction import has_change_cue

    for i in range(len(pending) - 1, -1, -1):
        m = pending[i]
        if m.role == "user" and has_change_cue(m.content):
            return i + 1
    return 0


def cue_events(config: MemoryConfig) -> bool:
    """Whether a change cue opens the gate (`cue_event`, and the live-window guard is not off)."""
    return bool(config.cue_event and config.live_contradiction != "off")


def gate_status(pending: Sequence[Message], *, now: datetime, config: MemoryConfig,
                counter: TokenCounter, has_memory: bool = True) -> GateStatus:
    """The gate's numbers for these pending messages at `now`; `has_memory`: the user has current
    records (a change cue opens the gate only when there is something it could correct)."""
    cfg = config
    oldest = pending[0] if pending else None
    age = (now - oldest.created_at).total_seconds() if oldest else None
    mat = maturity(age, tau_m=cfg.tau_m, c_m=cfg.c_m) if age is not None else 0.0
    cue = cue_events(cfg) and has_memory
    mature = mature_prefix(pending, now, cfg.slice_gate_seconds)
    if cfg.trigger == "messages":
        value = float(len(mature))
    else:
        tokens = float(sum(counter.count(m.content) for m in mature))
        value = tokens if cfg.trigger == "tokens" else tokens / cfg.context_budget
    trigger_open = value >= cfg.trigger_threshold
    idle_gap = None
    if len(pending) >= 2:
        idle_gap = (pending[-1].created_at - pending[-2].created_at).total_seconds()
    idle_open = bool(cfg.idle_event and idle_gap is not None and idle_gap >= cfg.slice_gate_seconds)
    maturity_open = oldest is not None and mat >= cfg.slice_value
    cue_open = cue and cue_prefix(pending) > len(mature)
    return GateStatus(
        pending=len(pending), mature=len(mature), oldest_age_seconds=age, maturity=float(mat),
        slice_value=cfg.slice_value, maturity_open=maturity_open, trigger=cfg.trigger, trigger_value=value,
        trigger_threshold=float(cfg.trigger_threshold), trigger_open=trigger_open, idle_gap_seconds=idle_gap,
        idle_open=idle_open, will_fire=(maturity_open and (trigger_open or idle_open)) or cue_open, cue_open=cue_open,
        slice_gate_seconds=cfg.slice_gate_seconds,
    )
