"""Step 2, the gate: is the oldest unprocessed message mature, and is working memory full enough?

Maturity is `M(age of the oldest pending message)` against `slice_value`. The trigger is measured
over the mature prefix of the pending messages (what an event would extract), so one gate opening
extracts a batch and the gate closes again until another batch matures: never an event every
turn. An idle gap past the slice gate also opens it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engine.core.config import MemoryConfig
from engine.core.forgetting import maturity
from engine.core.records import Message
from engine.core.tokens import TokenCounter
from engine.memory.results import GateStatus

__all__ = ["gate_status", "mature_prefix"]


def mature_prefix(pending: Sequence[Message], now: datetime, gate_seconds: float) -> list[Message]:
    """The leading pending messages old enough to slice; stops at the first immature one so a
    cursor moved past them never skips a message."""
    n = 0
    while n < len(pending) and (now - pending[n].created_at).total_seconds() >= gate_seconds - 1e-9:
        n += 1
    return list(pending[:n])


def gate_status(pending: Sequence[Message], *, now: datetime, config: MemoryConfig,
                counter: TokenCounter) -> GateStatus:
    """The gate's numbers for these pending messages at `now`."""
    cfg = config
    oldest = pending[0] if pending else None
    age = (now - oldest.created_at).total_seconds() if oldest else None
    mat = maturity(age, tau_m=cfg.tau_m, c_m=cfg.c_m) if age is not None else 0.0
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
    return GateStatus(
        pending=len(pending), mature=len(mature), oldest_age_seconds=age, maturity=float(mat),
        slice_value=cfg.slice_value, maturity_open=maturity_open, trigger=cfg.trigger, trigger_value=value,
        trigger_threshold=float(cfg.trigger_threshold), trigger_open=trigger_open, idle_gap_seconds=idle_gap,
        idle_open=idle_open, will_fire=maturity_open and (trigger_open or idle_open),
        slice_gate_seconds=cfg.slice_gate_seconds,
    )
