"""Golden scenario results: what the memlab strategy recalls on every bundled scenario, pinned.

`golden_results()` replays each `scenarios/*.yaml` through the memlab strategy with scripted
models (offline, deterministic) and returns, per scenario, the keyword counts (expected, found in
context, found in the reply, rejected values served) and the keywords each probe missed.
tests/test_golden.py compares that with tests/golden/scenario_results.json exactly; a deliberate
change rewrites the file with

    python -m engine.eval.golden --write

and the diff goes into the commit that changed the behaviour.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.eval.scenario import load_scenario
from engine.eval.strategies.run import make_strategy, run_strategy

__all__ = ["SCENARIO_DIR", "GOLDEN_FILE", "REGENERATE", "golden_results", "scenario_result", "main"]

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIO_DIR = REPO_ROOT / "scenarios"
GOLDEN_FILE = REPO_ROOT / "tests" / "golden" / "scenario_results.json"
REGENERATE = "python -m engine.eval.golden --write"


def scenario_result(path: Path) -> dict[str, Any]:
    """One scenario's pinned figures under the memlab strategy with scripted models."""
    sc = load_scenario(path)
    run = run_strategy(make_strategy("memlab"), sc)
    missed = []
    for p in run.probes:
        ctx = [k for k, v in p["expect"].items() if not v["context"]]
        rep = [k for k, v in p["expect"].items() if not v["reply"]]
        served = [k for k, v in p["reject"].items() if v["context"] or v["reply"]]
        if ctx or rep or served:
            missed.append({"ask": p["ask"], "not_in_context": ctx, "not_in_reply": rep, "rejected_served": served})
    return {**run.recall(), "misses": missed}


def golden_results(scenario_dir: Path = SCENARIO_DIR) -> dict[str, Any]:
    """Every bundled scenario's figures, keyed by file name."""
    paths = sorted(Path(scenario_dir).glob("*.yaml"))
    return {"strategy": "memlab", "models": "scripted",
            "scenarios": {p.name: scenario_result(p) for p in paths}}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.eval.golden", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN_FILE.relative_to(REPO_ROOT)}")
    args = ap.parse_args(argv)
    text = json.dumps(golden_results(), ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    if args.write:
        GOLDEN_FILE.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN_FILE.write_text(text, encoding="utf-8")
        print(f"wrote {GOLDEN_FILE}")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
