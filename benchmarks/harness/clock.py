"""Time only from the clock, proven: a scripted replay while freezegun freezes and jumps the WALL
clock (far past, far future, backwards between turns) must log byte for byte what an unfrozen
replay logs. The engine reads time only from its injected clock, so the wall clock cannot matter.

A negative control shows the comparison can fail: the same replay with an engine on the wall
clock (`SystemClock`) is caught, by a differing event log or by the engine's own refusal of a
clock that moved backwards.

freezegun also freezes `time.monotonic` and `time.perf_counter`; the scripted replay is
synchronous and waits on nothing, so no `tick=True` or `ignore=[...]` is needed (latencies in the
ledger read 0 ms under the freeze; the ledger is not part of the comparison).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from freezegun import freeze_time

from benchmarks.harness.common import REPO_ROOT
from engine.core.clock import SystemClock
from engine.core.errors import ClockError
from engine.eval.scenario import ReplayResult, Scenario, load_scenario, replay
from engine.memory.engine import MemoryEngine

__all__ = ["CLOCK_SCENARIOS", "WALL_JUMPS", "ClockReport", "frozen_replay", "log_bytes", "run_clock"]

#: The bundled scenarios replayed under the jumping wall clock.
CLOCK_SCENARIOS = ("needle-basic.yaml", "knowledge-update.yaml")

#: Where the wall clock is moved after each turn, in this order, cycling: far past, far future, and
#: every other step backwards.
WALL_JUMPS: tuple[datetime, ...] = (
    datetime(1970, 1, 2, tzinfo=UTC),
    datetime(2300, 1, 1, tzinfo=UTC),
    datetime(1985, 6, 15, 12, 30, tzinfo=UTC),
    datetime(2299, 12, 31, 23, 59, 59, tzinfo=UTC),
    datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
    datetime(2150, 7, 4, tzinfo=UTC),
    datetime(2001, 9, 9, 1, 46, 40, tzinfo=UTC),
)


@dataclass(frozen=True, kw_only=True)
class ClockReport:
    scenarios: list[str]
    events: dict[str, int]
    log_identical: dict[str, bool]
    probes_identical: dict[str, bool]
    wall_jumps: int
    backwards_jumps: int
    wall_followed: bool
    negative_control: str
    negative_control_caught: bool

    @property
    def ok(self) -> bool:
        return (all(self.log_identical.values()) and all(self.probes_identical.values()) and self.wall_followed
                and self.negative_control_caught and all(n > 0 for n in self.events.values()))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def log_bytes(result: ReplayResult) -> bytes:
    """The replay's whole event log (every event's to_dict) as JSON bytes, in log order."""
    return json.dumps(result.event_log, ensure_ascii=False).encode("utf-8")


def _probe_bytes(result: ReplayResult) -> bytes:
    return json.dumps(result.probes, ensure_ascii=False).encode("utf-8")


def frozen_replay(scenario: Scenario, jumps: Sequence[datetime] = WALL_JUMPS, *,
                  engine_factory: Callable[..., Any] | None = None) -> tuple[ReplayResult, list[tuple[datetime, bool]]]:
    """Replay `scenario` with the wall clock frozen at jumps[0], moved to the next jump after every
    turn and probe. Returns the result and, per move, (target, whether datetime.now and time.time
    then read exactly the target) — the proof that the freeze really took hold."""
    moves: list[tuple[datetime, bool]] = []
    with freeze_time(jumps[0]) as frozen:

        def jump(done: int, _total: int) -> None:
            target = jumps[done % len(jumps)]
            frozen.move_to(target)
            moves.append((target, datetime.now(UTC) == target and time.time() == target.timestamp()))

        result = replay(scenario, engine_factory=engine_factory, progress=jump)
    return result, moves


def _wall_clock_engine(**kw: Any) -> MemoryEngine:
    """The negative control: an engine that reads the wall clock instead of the replay's clock."""
    return MemoryEngine(**{**kw, "clock": SystemClock()})


def _negative_control(scenario: Scenario) -> tuple[str, bool]:
    """Replay on the wall clock, unfrozen and under forward-only jumps (one day per step from 2300, so
    the engine's refusal of a backwards clock does not hide the comparison); it must catch it."""
    plain = replay(scenario, engine_factory=_wall_clock_engine)
    steps = len(scenario.turns) + len(scenario.probes) + 1
    forward = [datetime(2300, 1, 1, tzinfo=UTC) + timedelta(days=i) for i in range(steps)]
    try:
        frozen, _ = frozen_replay(scenario, forward, engine_factory=_wall_clock_engine)
    except ClockError as exc:
        return f"the wall-clock engine refused the jump: {str(exc)[:80]}", True
    if log_bytes(plain) != log_bytes(frozen):
        return "the wall-clock engine's event log differs under the frozen clock", True
    return "the wall-clock engine's event log did not change: the comparison cannot fail", False


def run_clock(scenarios: Sequence[str] = CLOCK_SCENARIOS, jumps: Sequence[datetime] = WALL_JUMPS) -> ClockReport:
    """Each scenario replayed plainly and under the jumping wall clock; compare event logs and probes."""
    events: dict[str, int] = {}
    log_same: dict[str, bool] = {}
    probes_same: dict[str, bool] = {}
    moves: list[tuple[datetime, bool]] = []
    loaded = {name: load_scenario(REPO_ROOT / "scenarios" / name) for name in scenarios}
    for name, sc in loaded.items():
        plain = replay(sc)
        frozen, seen = frozen_replay(sc, jumps)
        moves += seen
        events[name] = len(plain.event_log)
        log_same[name] = log_bytes(plain) == log_bytes(frozen)
        probes_same[name] = _probe_bytes(plain) == _probe_bytes(frozen)
    targets = [t for t, _ in moves]
    backwards = sum(1 for a, b in zip(targets, targets[1:], strict=False) if b < a)
    control, caught = _negative_control(next(iter(loaded.values())))
    return ClockReport(scenarios=list(scenarios), events=events, log_identical=log_same,
                       probes_identical=probes_same, wall_jumps=len(moves), backwards_jumps=backwards,
                       wall_followed=bool(moves) and all(ok for _, ok in moves), negative_control=control,
                       negative_control_caught=caught)
