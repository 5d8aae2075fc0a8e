"""`memlab bench knobs`: which knob flips which scenario, and which preset wins which family.

Every bundled scenario is replayed with memlab's default (its own preset) and then with one knob
changed at a time (decay off, a much shorter or longer τ, relevance-only weights, no earned
seats, no safety seat, no overflow extraction, the seed's reinforcement on injection, no
live-window guard, one seat, …); a scenario "flips" under a knob when its context recall or its
stale values served change. A second table replays every scenario under each vocation preset, to
see which preset wins on which family. Scripted models, offline and repeatable.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.core.config import VOCATIONS, MemoryConfig
from engine.eval.runinfo import git_commit, machine
from engine.eval.scenario import Scenario, load_scenario
from engine.eval.strategies.base import apply_overrides
from engine.eval.strategies.run import make_strategy, run_strategy

__all__ = ["KNOBS", "Outcome", "outcome", "knob_flips", "preset_table", "knobs_main"]

#: name -> how the knob changes a scenario's own config
KNOBS: dict[str, Callable[[MemoryConfig], dict[str, Any]]] = {
    "decay off": lambda c: {"decay_enabled": False},
    "tau x0.01": lambda c: {"tau": c.tau * 0.01},
    "tau x100": lambda c: {"tau": c.tau * 100},
    "relevance only (alpha 1)": lambda c: {"weights": {"alpha": 1.0, "beta": 0.0, "gamma": 0.0}},
    "no importance (gamma 0)": lambda c: {"weights": {"alpha": 0.5, "beta": 0.5, "gamma": 0.0}},
    "no recency (beta 0)": lambda c: {"weights": {"alpha": 0.5, "beta": 0.0, "gamma": 0.5}},
    "seats not earned": lambda c: {"min_relevance": 0.0, "min_score_ratio": 0.0},
    "no safety seat": lambda c: {"safety_seats": 0},
    "no floors": lambda c: {"always_inject_types": ()},
    "no overflow extraction": lambda c: {"overflow_extract": False},
    "reinforce on injection": lambda c: {"reinforce_on": "injection"},
    "no live-window guard": lambda c: {"live_contradiction": "off"},
    "top_k 1": lambda c: {"top_k": 1},
    "top_k 8": lambda c: {"top_k": 8},
    "minmax fusion": lambda c: {"fusion": "minmax"},
}


def outcome(scenario: Scenario, config: MemoryConfig) -> dict[str, int]:
    """Context recall, reply recall and stale values served of the memlab strategy on one scenario."""
    rc = run_strategy(make_strategy("memlab"), scenario, config=config).recall()
    return {"expected": rc["expected"], "context": rc["context"], "reply": rc["reply"], "stale": rc["rejected_served"]}


Outcome = dict[str, int]


def knob_flips(scenarios: Sequence[Scenario], knobs: Mapping[str, Callable[[MemoryConfig], dict[str, Any]]] = KNOBS,
               progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """{"default": {scenario: outcome}, "knobs": {knob: {scenario: outcome}}} (only scenarios that flipped)."""
    default = {sc.name: outcome(sc, sc.memory_config()) for sc in scenarios}
    flips: dict[str, dict[str, Outcome]] = {}
    for name, change in knobs.items():
        if progress:
            progress(name)
        changed = {}
        for sc in scenarios:
            base = sc.memory_config()
            got = outcome(sc, apply_overrides(base, change(base)))
            if (got["context"], got["stale"]) != (default[sc.name]["context"], default[sc.name]["stale"]):
                changed[sc.name] = got
        flips[name] = changed
    return {"default": default, "knobs": flips}


def preset_table(scenarios: Sequence[Scenario]) -> dict[str, dict[str, Outcome]]:
    """{scenario: {preset: outcome}} for every vocation preset (the scenario's own config on top)."""
    return {sc.name: {p: outcome(sc, sc.memory_config(preset=p)) for p in VOCATIONS} for sc in scenarios}


def _cell(o: Outcome) -> str:
    return f"{o['context']}/{o['expected']}" + (f" stale {o['stale']}" if o["stale"] else "")


def format_report(flips: Mapping[str, Any], presets: Mapping[str, Mapping[str, Outcome]],
                  own: Mapping[str, str]) -> str:
    lines = ["knob → scenarios it flips (context recall / stale values served, against the default)"]
    for knob, changed in flips["knobs"].items():
        what = ", ".join(f"{sc} {_cell(flips['default'][sc])}→{_cell(o)}" for sc, o in changed.items()) or "—"
        lines.append(f"  {knob:<26} {what}")
    names = list(VOCATIONS)
    lines.append("")
    lines.append(f"{'scenario (own preset)':<46}" + "".join(f"{n:>26}" for n in names))
    for sc, row in presets.items():
        lines.append(f"{sc + ' (' + own[sc] + ')':<46}" + "".join(f"{_cell(row[n]):>26}" for n in names))
    return "\n".join(lines)


def knobs_main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="memlab bench knobs", description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default="scenarios/*.yaml", help="a glob")
    ap.add_argument("--json", default=None, metavar="OUT")
    args = ap.parse_args(list(argv or []))
    import glob
    import sys

    scenarios = [load_scenario(p) for p in sorted(glob.glob(args.scenarios))]
    flips = knob_flips(scenarios, progress=lambda k: print(f"  {k} …", file=sys.stderr, flush=True))
    presets = preset_table(scenarios)
    own = {sc.name: sc.preset for sc in scenarios}
    print(format_report(flips, presets, own))
    if args.json:
        Path(args.json).write_text(json.dumps({"metadata": {"git_commit": git_commit(), **machine()}, "flips": flips, "presets": presets,
                                               "own_presets": own}, ensure_ascii=False, indent=2), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0
