"""`memlab tune`: sweep a grid or search with Optuna, print the frontier, save the chosen preset."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from engine.core.config import DEFAULT_PRESET, MemoryConfig
from engine.core.errors import ScenarioError
from engine.eval.scenario import load_scenario
from engine.eval.strategies.base import apply_overrides
from engine.eval.tuning.frontier import OBJECTIVES
from engine.eval.tuning.grid import DEFAULT_GRID, complete_simplexes, nest, parse_grid
from engine.eval.tuning.points import SweepPoint
from engine.eval.tuning.search import SweepResult, search, sweep

__all__ = ["chosen_config", "render", "tune_main"]


def chosen_config(point: SweepPoint, base_preset: str | None = None) -> MemoryConfig:
    """The chosen point as a complete config of preset "custom" (base preset + the point's values)."""
    base = MemoryConfig.from_preset(base_preset or DEFAULT_PRESET)
    return apply_overrides(base, complete_simplexes(nest(point.values), base.weights)).with_overrides(preset="custom")


def render(result: SweepResult):
    from rich.table import Table

    split = bool(result.validation)
    table = Table(title=f"{result.search} · objective {result.objective} · ★ Pareto frontier (recall ↑, stale ↓, "
                        "payload ↓, calls ↓) · ← chosen", title_justify="left")
    cols = [("", "left"), ("point", "left"), ("recall", "right"), ("ctx", "right"), ("reply", "right"),
            ("stale", "right"), ("payload tok", "right"), ("calls", "right")]
    if split:
        cols += [("val recall", "right"), ("val stale", "right")]
    for col, just in cols:
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for p in sorted(result.points, key=lambda p: (-p.recall, p.rejected_served, p.payload_tokens, p.calls)):
        mark = ("★" if p.frontier else " ") + ("←" if p.chosen else " ")
        row = [mark, f"[ref] {p.label}" if p.reference else p.label, f"{p.recall * 100:.1f}%",
               f"{p.context_recall * 100:.0f}%", f"{p.reply_recall * 100:.0f}%", str(p.rejected_served),
               str(p.payload_tokens), str(p.calls)]
        if split and p.validation is not None:
            row += [f"{p.validation.recall * 100:.1f}%", str(p.validation.rejected_served)]
        table.add_row(*row)
    return table


def _scenario_paths(pattern: str) -> list[Path]:
    import glob

    paths = sorted({Path(p) for part in pattern.split(",") for p in glob.glob(part.strip())})
    if not paths:
        raise ScenarioError(f"--scenarios {pattern!r} matches no file; e.g. --scenarios 'scenarios/*.yaml'")
    return paths


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="memlab tune", description="sweep or search config values over scenarios")
    ap.add_argument("--scenarios", default="scenarios/*.yaml", help="a glob (or comma-separated globs)")
    ap.add_argument("--grid", default=DEFAULT_GRID,
                    help=f'key=v1,v2 pairs separated by ";" (default "{DEFAULT_GRID}"); weights=simplex:0.25 '
                         "sweeps the score weights on the simplex")
    ap.add_argument("--search", choices=("grid", "optuna"), default="grid")
    ap.add_argument("--trials", type=int, default=40, help="Optuna trials (with --search optuna)")
    ap.add_argument("--seed", type=int, default=0, help="Optuna's sampler seed")
    ap.add_argument("--validation", type=float, default=0.34, metavar="SHARE",
                    help="share of the scenarios held out for validation (0: train on all)")
    ap.add_argument("--objective", default="recall-cost", choices=OBJECTIVES)
    ap.add_argument("--out", default=None, help="save the chosen point as a custom preset (.toml or .json)")
    ap.add_argument("--base-preset", default=None, help="start every point from this preset (default: each scenario's)")
    ap.add_argument("--json", default=None, metavar="OUT", help="write every point's figures as JSON")
    return ap


def tune_main(argv: Sequence[str] | None = None) -> int:
    """`memlab tune --scenarios GLOB [--grid "k=v1,v2;…" | --search optuna --trials N] [--out P.toml]`."""
    import sys

    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    args = _parser().parse_args(list(argv or []))
    scenarios = [load_scenario(p) for p in _scenario_paths(args.scenarios)]
    grid = parse_grid(args.grid) if args.search == "grid" else None
    console = Console(width=None if sys.stdout.isatty() else 170)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("tuning", total=None)
        common = dict(base_preset=args.base_preset, objective=args.objective, validation_share=args.validation,
                      progress=lambda d, t, label: bar.update(task, completed=d, total=t, description=label))
        result = sweep(scenarios, grid, **common) if grid is not None else \
            search(scenarios, trials=args.trials, seed=args.seed, **common)
    _report(console, result, args)
    return 0


def _report(console, result: SweepResult, args: argparse.Namespace) -> None:
    n = sum(not p.reference for p in result.points)
    console.print(f"[bold]memlab tune[/bold] · {len(result.training)} training + {len(result.validation)} validation "
                  f"scenarios · {n} points (+ reference presets) · scripted models · recall = mean of context and "
                  "reply recall · stale = rejected values served")
    if result.validation:
        console.print(f"validation scenarios: {', '.join(result.validation)}", markup=False)
    console.print(render(result))
    for values, why in result.skipped:
        console.print(f"skipped {' '.join(f'{k}={v}' for k, v in values.items())}: {why}", markup=False)
    chosen, base = result.chosen, result.base
    assert chosen is not None
    val = (f"; validation recall {chosen.validation.recall * 100:.1f}%, stale {chosen.validation.rejected_served}"
           if chosen.validation is not None else "")
    console.print(f"chosen ({args.objective}): {chosen.label} — recall {chosen.recall * 100:.1f}%, stale "
                  f"{chosen.rejected_served}, payload {chosen.payload_tokens} tok, {chosen.calls} calls{val}",
                  markup=False)
    if base is not None:
        console.print(f"base: recall {base.recall * 100:.1f}%, stale {base.rejected_served} (no chosen point may "
                      "serve more stale values than the base)", markup=False)
    if args.out and not chosen.reference:
        path = chosen_config(chosen, args.base_preset).save(args.out)
        console.print(f"saved preset 'custom' to {path}; load it with MemoryConfig.load('{path}') "
                      "or the lab's Tune page", markup=False)
    elif args.out:
        console.print("no grid point beats the base safely; nothing saved", markup=False)
    else:
        console.print("pass --out PRESET.toml to save the chosen point as a custom preset")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "search": result.search, "training": result.training, "validation": result.validation,
            "points": [p.to_dict() for p in result.points],
            "skipped": [{"values": v, "why": w} for v, w in result.skipped]}, ensure_ascii=False, indent=2),
            encoding="utf-8")
