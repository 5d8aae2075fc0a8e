"""The event log of a scripted replay, pinned in a file: the same scenario gives the same log, byte
for byte, in any process on any day (deterministic replay).

A deliberate change to what the engine logs updates the files, with the diff in the commit:

    MEMLAB_WRITE_GOLDEN=1 python -m pytest tests/test_golden_log.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.eval.scenario import load_scenario, replay

ROOT = Path(__file__).resolve().parent
SCENARIOS = ROOT.parent / "scenarios"
GOLDEN = ROOT / "golden"


def lines(name: str) -> list[str]:
    result = replay(load_scenario(SCENARIOS / f"{name}.yaml"))
    return [json.dumps(e, sort_keys=True, ensure_ascii=False) for e in result.event_log]


@pytest.mark.parametrize("name", ["needle-basic", "knowledge-update"])
def test_event_log_matches_the_pinned_file(name):
    path = GOLDEN / f"event_log_{name}.jsonl"
    got = lines(name)
    if os.environ.get("MEMLAB_WRITE_GOLDEN"):
        path.write_text("\n".join(got) + "\n", encoding="utf-8")
    want = path.read_text(encoding="utf-8").splitlines()
    assert len(got) == len(want), f"{len(got)} events logged, {len(want)} pinned in {path.name}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, (f"event {i} differs from {path.name}; if the change is deliberate, regenerate with "
                        "MEMLAB_WRITE_GOLDEN=1 python -m pytest tests/test_golden_log.py")
