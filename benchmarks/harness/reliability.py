"""The harness's former single module, kept as re-exports so code written against
`benchmarks.harness.reliability` keeps importing while it moves to the modules below.

New code imports from the module of the concept: `common`, `concurrency`, `crash`, `faults`,
`hostile`, `clock`, `soak`, `report` (see `benchmarks/harness/__init__.py`).
"""

from __future__ import annotations

from benchmarks.harness.common import REPO_ROOT, fast_config, turn_text, user_marker
from benchmarks.harness.concurrency import ConcurrencyReport, cross_user_probe, run_cli_replays, run_concurrency
from benchmarks.harness.crash import CRASH_POINTS, CrashReport, crash_worker_main, run_crash
from benchmarks.harness.faults import FaultReport, run_faults
from benchmarks.harness.hostile import HOSTILE_MESSAGES, HostileReport, run_hostile
from benchmarks.harness.report import reliability_main

__all__ = [
    "REPO_ROOT",
    "fast_config",
    "user_marker",
    "turn_text",
    "ConcurrencyReport",
    "CrashReport",
    "FaultReport",
    "HostileReport",
    "HOSTILE_MESSAGES",
    "run_concurrency",
    "run_cli_replays",
    "cross_user_probe",
    "run_crash",
    "run_faults",
    "run_hostile",
    "crash_worker_main",
    "reliability_main",
    "CRASH_POINTS",
]
