"""Every bundled scenario's recall under the memlab strategy (scripted models), pinned in
tests/golden/scenario_results.json: a change in what memory serves fails here, naming the
scenario; a deliberate change regenerates the file and commits the diff."""

from __future__ import annotations

import json

import pytest

from engine.eval.golden import GOLDEN_FILE, REGENERATE, SCENARIO_DIR, golden_results

PINNED = json.loads(GOLDEN_FILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def current():
    return golden_results()


def test_the_golden_file_covers_every_bundled_scenario():
    assert sorted(PINNED["scenarios"]) == sorted(p.name for p in SCENARIO_DIR.glob("*.yaml")), \
        f"a scenario was added or removed; regenerate with `{REGENERATE}`"


@pytest.mark.parametrize("name", sorted(PINNED["scenarios"]))
def test_each_scenario_recalls_exactly_what_is_pinned(name, current):
    got, want = current["scenarios"].get(name), PINNED["scenarios"][name]
    assert got == want, (f"{name}: recall changed from {want} to {got}. If the change is deliberate, run "
                         f"`{REGENERATE}` and commit the diff with the change that caused it")


def test_no_bundled_scenario_serves_a_rejected_value_and_each_recalls_something():
    for name, r in PINNED["scenarios"].items():
        assert r["rejected_served"] == 0, name
        assert r["context"] >= 1, name
