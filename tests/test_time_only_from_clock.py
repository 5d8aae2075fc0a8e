"""Time only from the clock, proven: scripted replays of bundled scenarios log byte for byte the same
events whether the wall clock runs normally or freezegun freezes it and jumps it far into the past,
far into the future, and backwards between turns. A negative control shows the comparison can fail.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from benchmarks.harness.clock import WALL_JUMPS, frozen_replay, log_bytes, run_clock
from benchmarks.harness.common import REPO_ROOT
from engine.core.clock import SystemClock
from engine.core.errors import ClockError
from engine.eval.scenario import load_scenario, replay
from engine.memory.engine import MemoryEngine


@pytest.mark.parametrize("name", ["needle-basic.yaml", "knowledge-update.yaml"])
def test_event_log_is_byte_identical_under_a_jumping_wall_clock(name):
    sc = load_scenario(REPO_ROOT / "scenarios" / name)
    plain = replay(sc)
    frozen, moves = frozen_replay(sc, WALL_JUMPS)
    targets = [t for t, _ in moves]
    assert len(moves) == len(sc.turns) + len(sc.probes)  # the wall clock moved after every turn and probe
    assert all(followed for _, followed in moves), "freezegun did not take hold of datetime.now / time.time"
    assert min(targets) < datetime(1971, 1, 1, tzinfo=UTC) and max(targets) >= datetime(2299, 1, 1, tzinfo=UTC)
    assert any(b < a for a, b in zip(targets, targets[1:], strict=False))  # it went backwards too
    assert len(plain.event_log) > 20 and {e["kind"] for e in plain.event_log} >= {"gate", "extract", "inject"}
    assert log_bytes(frozen) == log_bytes(plain)
    assert frozen.probes == plain.probes


def _wall_clock_engine(**kw):
    return MemoryEngine(**{**kw, "clock": SystemClock()})


def test_negative_control_an_engine_on_the_wall_clock_is_caught():
    """The same comparison with an engine that reads the wall clock must fail, or the test above proves nothing."""
    sc = load_scenario(REPO_ROOT / "scenarios" / "needle-basic.yaml")
    plain = replay(sc, engine_factory=_wall_clock_engine)
    steps = len(sc.turns) + len(sc.probes) + 1
    forward = [datetime(2300, 1, 1, tzinfo=UTC) + timedelta(days=i) for i in range(steps)]
    frozen, _ = frozen_replay(sc, forward, engine_factory=_wall_clock_engine)
    assert log_bytes(frozen) != log_bytes(plain)
    assert all(e["at"].startswith("2300-") for e in frozen.event_log)
    with pytest.raises(ClockError, match="backwards"):  # and jumping backwards is refused outright
        frozen_replay(sc, WALL_JUMPS, engine_factory=_wall_clock_engine)


def test_clock_report_section_figures():
    r = run_clock(("knowledge-update.yaml",))
    assert r.ok, r.to_dict()
    assert r.log_identical == {"knowledge-update.yaml": True} and r.probes_identical == {"knowledge-update.yaml": True}
    assert r.backwards_jumps > 0 and r.wall_followed and r.negative_control_caught
