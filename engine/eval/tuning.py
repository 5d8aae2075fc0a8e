"""Preset tuning: sweep a grid of config values over scenarios, find the Pareto frontier of recall
against memory payload and model calls, and save the chosen point as a custom preset.

Every point runs the memlab strategy (scripted models, so a sweep is offline and repeatable) on
the same scenarios; the comparison presets ("generative agents", "relevance only") and the base
preset run alongside as reference points, never chosen. Recall is the mean of context recall and
reply recall over all expected keywords (engine.eval.driver); payload is the injected memory
tokens summed over probes; calls are all model calls (chat and memory roles).
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from engine.core.config import COMPARISON_PRESETS, DEFAULT_PRESET, MemoryConfig, Weights
from engine.core.errors import ConfigError, ScenarioError
from engine.eval.driver import probe_recall
from engine.eval.scenario import Scenario, load_scenario
from engine.eval.strategies.base import apply_overrides
from engine.eval.strategies.run import make_strategy, run_strategy

__all__ = ["parse_grid", "grid_points", "nest", "SweepPoint", "SweepResult", "sweep", "mark_frontier", "choose",
           "chosen_config", "OBJECTIVES", "tune_main", "DEFAULT_GRID"]

DEFAULT_GRID = "top_k=3,4,6;tau=3600,43200"
OBJECTIVES = ("recall-cost",)
_TABLE_KEYS = {"weights": {f.name for f in fields(Weights)}, "path_weights": {"bm25", "dense", "dim"},
               "dim_weights": {"type", "time", "location", "keyword_phrase", "keyword_tokens"}}


def _split_top(text: str, sep: str) -> list[str]:
    """Split on `sep` outside brackets and quotes, so list values like ["identity"] survive."""
    out, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur))
    return out


def _check_key(key: str) -> None:
    known = [f.name for f in fields(MemoryConfig) if f.name != "preset"]
    if "." in key:
        head, sub = key.split(".", 1)
        if head not in _TABLE_KEYS:
            raise ConfigError(f"grid key {key!r}: only {', '.join(_TABLE_KEYS)} take a dotted sub-key "
                              f"(e.g. weights.alpha=0.5,1)")
        if sub not in _TABLE_KEYS[head]:
            raise ConfigError(f"grid key {key!r}: {head} has no {sub!r}; use one of "
                              f"{', '.join(sorted(_TABLE_KEYS[head]))}")
        return
    if key == "preset":
        raise ConfigError("grid key 'preset' cannot be swept; use --base-preset NAME for the starting preset")
    if key not in known:
        raise ConfigError(f"grid key {key!r} is not a MemoryConfig field; use one of {', '.join(known)} "
                          "(weights as weights.alpha, path_weights.bm25, …)")


def parse_grid(spec: str) -> dict[str, list[Any]]:
    """`"tau=3600,43200;top_k=3,4,6;weights.alpha=0.33,1"` → {key: [values]} (values JSON when they parse)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f'--grid is empty; give key=v1,v2 pairs separated by ";", e.g. "{DEFAULT_GRID}"')
    grid: dict[str, list[Any]] = {}
    for part in (p.strip() for p in _split_top(spec, ";")):
        if not part:
            continue
        if "=" not in part:
            raise ConfigError(f'--grid part {part!r} needs the form key=v1,v2 (e.g. "top_k=3,4,6")')
        key, raw = (x.strip() for x in part.split("=", 1))
        _check_key(key)
        if key in grid:
            raise ConfigError(f"--grid names {key!r} twice; list all its values once: {key}=v1,v2")
        values = []
        for item in (v.strip() for v in _split_top(raw, ",")):
            if not item:
                raise ConfigError(f"--grid {key}: an empty value in {raw!r}; separate values with single commas")
            try:
                values.append(json.loads(item))
            except json.JSONDecodeError:
                values.append(item)
        if not values:
            raise ConfigError(f"--grid {key} has no values; write {key}=v1,v2")
        grid[key] = values
    if not grid:
        raise ConfigError(f'--grid has no key=values pairs, e.g. "{DEFAULT_GRID}"')
    return grid


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of the grid, in order (first key varies slowest)."""
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(grid[k] for k in keys))]


def nest(point: Mapping[str, Any]) -> dict[str, Any]:
    """Flat grid keys (weights.alpha) → MemoryConfig overrides ({"weights": {"alpha": …}})."""
    out: dict[str, Any] = {}
    for k, v in point.items():
        if "." in k:
            head, sub = k.split(".", 1)
            out.setdefault(head, {})[sub] = v
        else:
            out[k] = v
    return out


@dataclass
class SweepPoint:
    label: str
    values: dict[str, Any]  # flat grid values; empty for reference points
    reference: bool = False
    preset: str | None = None  # a reference point's preset
    expected: int = 0
    context_recall: float = 0.0
    reply_recall: float = 0.0
    rejected_served: int = 0
    payload_tokens: int = 0
    calls: int = 0
    frontier: bool = False
    chosen: bool = False

    @property
    def recall(self) -> float:
        return (self.context_recall + self.reply_recall) / 2

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "values": self.values, "reference": self.reference, "preset": self.preset,
                "expected": self.expected, "context_recall": self.context_recall, "reply_recall": self.reply_recall,
                "recall": self.recall, "rejected_served": self.rejected_served,
                "payload_tokens": self.payload_tokens, "calls": self.calls, "frontier": self.frontier,
                "chosen": self.chosen}


@dataclass
class SweepResult:
    points: list[SweepPoint]
    skipped: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # invalid points, why
    base_preset: str | None = None
    objective: str = "recall-cost"

    @property
    def chosen(self) -> SweepPoint | None:
        return next((p for p in self.points if p.chosen), None)


def _label(values: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items()) or "(base)"


def _measure(point: SweepPoint, scenarios: Sequence[Scenario], configs: Sequence[MemoryConfig]) -> None:
    strategy = make_strategy("memlab")
    probes: list[dict[str, Any]] = []
    payload = calls = 0
    for sc, cfg in zip(scenarios, configs, strict=True):
        run = run_strategy(strategy, sc, config=cfg)
        probes.extend(run.probes)
        payload += run.payload_tokens
        calls += sum(run.calls.values())
    rc = probe_recall(probes)
    point.expected = rc["expected"]
    point.context_recall = rc["context"] / rc["expected"] if rc["expected"] else 0.0
    point.reply_recall = rc["reply"] / rc["expected"] if rc["expected"] else 0.0
    point.rejected_served = rc["rejected_served"]
    point.payload_tokens = payload
    point.calls = calls


def _configs(scenarios: Sequence[Scenario], base_preset: str | None, overrides: Mapping[str, Any]) -> list[MemoryConfig]:
    return [apply_overrides(sc.memory_config(preset=base_preset), overrides) for sc in scenarios]


def sweep(
    scenarios: Sequence[Scenario],
    grid: Mapping[str, Sequence[Any]],
    *,
    base_preset: str | None = None,
    objective: str = "recall-cost",
    references: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> SweepResult:
    """Run every valid grid point (and the reference presets) over the scenarios; mark the
    frontier and the chosen point. Points that make an invalid config are skipped with the reason;
    a grid with no valid point is a ConfigError."""
    if not scenarios:
        raise ScenarioError("no scenarios to tune on; pass --scenarios 'scenarios/*.yaml'")
    if objective not in OBJECTIVES:
        raise ConfigError(f"--objective {objective!r} is unknown; use one of {', '.join(OBJECTIVES)}")
    if base_preset is not None:
        MemoryConfig.from_preset(base_preset)  # a bad name fails here, naming the presets
    jobs: list[tuple[SweepPoint, list[MemoryConfig]]] = []
    skipped: list[tuple[dict[str, Any], str]] = []
    for values in grid_points(grid):
        try:
            configs = _configs(scenarios, base_preset, nest(values))
        except ConfigError as exc:
            skipped.append((values, "; ".join(exc.problems)))
            continue
        jobs.append((SweepPoint(label=_label(values), values=values), configs))
    if not jobs:
        first = skipped[0]
        raise ConfigError(f"no grid point makes a valid config; e.g. {_label(first[0])}: {first[1]}. "
                          "Fix the values (weights must keep alpha+beta+gamma = 1 in every point)")
    if references:
        base_name = base_preset or "scenario presets"
        jobs.append((SweepPoint(label=f"base ({base_name})", values={}, reference=True, preset=base_preset),
                     _configs(scenarios, base_preset, {})))
        for name in COMPARISON_PRESETS:
            jobs.append((SweepPoint(label=name, values={}, reference=True, preset=name),
                         [sc.memory_config(preset=name) for sc in scenarios]))
    for i, (point, configs) in enumerate(jobs):
        if progress:
            progress(i, len(jobs), point.label)
        _measure(point, scenarios, configs)
    if progress:
        progress(len(jobs), len(jobs), "done")
    points = [p for p, _ in jobs]
    mark_frontier(points)
    choose(points, objective).chosen = True
    return SweepResult(points=points, skipped=skipped, base_preset=base_preset, objective=objective)


def mark_frontier(points: Sequence[SweepPoint]) -> list[SweepPoint]:
    """Mark the points no other point dominates (recall ≥, payload ≤, calls ≤, one strictly)."""
    for p in points:
        p.frontier = not any(
            q is not p and q.recall >= p.recall and q.payload_tokens <= p.payload_tokens and q.calls <= p.calls
            and (q.recall > p.recall or q.payload_tokens < p.payload_tokens or q.calls < p.calls)
            for q in points)
    return [p for p in points if p.frontier]


def choose(points: Sequence[SweepPoint], objective: str = "recall-cost") -> SweepPoint:
    """recall-cost: the highest recall; ties by fewer payload tokens, then fewer calls, then grid order."""
    if objective not in OBJECTIVES:
        raise ConfigError(f"objective {objective!r} is unknown; use one of {', '.join(OBJECTIVES)}")
    candidates = [p for p in points if not p.reference]
    if not candidates:
        raise ConfigError("no grid point to choose from; give --grid with at least one valid point")
    return min(enumerate(candidates), key=lambda ip: (-round(ip[1].recall, 9), ip[1].payload_tokens, ip[1].calls,
                                                      ip[0]))[1]


def chosen_config(point: SweepPoint, base_preset: str | None = None) -> MemoryConfig:
    """The chosen point as a complete config of preset "custom" (base preset + the point's values)."""
    base = MemoryConfig.from_preset(base_preset or DEFAULT_PRESET)
    return apply_overrides(base, nest(point.values)).with_overrides(preset="custom")


# ----------------------------------------------------------------------------- CLI


def render(result: SweepResult):
    from rich.table import Table

    table = Table(title=f"sweep · objective {result.objective} · ★ Pareto frontier (recall vs payload and calls)",
                  title_justify="left")
    for col, just in (("", "left"), ("point", "left"), ("recall", "right"), ("ctx", "right"), ("reply", "right"),
                      ("rejected", "right"), ("payload tok", "right"), ("calls", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for p in sorted(result.points, key=lambda p: (-p.recall, p.payload_tokens, p.calls)):
        mark = ("★" if p.frontier else " ") + ("←" if p.chosen else " ")
        label = f"[ref] {p.label}" if p.reference else p.label
        table.add_row(mark, label, f"{p.recall * 100:.1f}%", f"{p.context_recall * 100:.0f}%",
                      f"{p.reply_recall * 100:.0f}%", str(p.rejected_served), str(p.payload_tokens), str(p.calls))
    return table


def _scenario_paths(pattern: str) -> list[Path]:
    import glob

    paths = sorted({Path(p) for part in pattern.split(",") for p in glob.glob(part.strip())})
    if not paths:
        raise ScenarioError(f"--scenarios {pattern!r} matches no file; e.g. --scenarios 'scenarios/*.yaml'")
    return paths


def tune_main(argv: Sequence[str] | None = None) -> int:
    """`memlab tune --scenarios GLOB --grid "k=v1,v2;…" [--objective recall-cost] [--out P.toml] [--base-preset N]`."""
    import sys

    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    ap = argparse.ArgumentParser(prog="memlab tune", description="sweep config values over scenarios, save a preset")
    ap.add_argument("--scenarios", default="scenarios/*.yaml", help="a glob (or comma-separated globs)")
    ap.add_argument("--grid", default=DEFAULT_GRID, help=f'key=v1,v2 pairs separated by ";" (default "{DEFAULT_GRID}")')
    ap.add_argument("--objective", default="recall-cost", choices=OBJECTIVES)
    ap.add_argument("--out", default=None, help="save the chosen point as a custom preset (.toml or .json)")
    ap.add_argument("--base-preset", default=None, help="start every point from this preset (default: each scenario's)")
    ap.add_argument("--json", default=None, metavar="OUT", help="write every point's figures as JSON")
    args = ap.parse_args(list(argv or []))
    grid = parse_grid(args.grid)
    scenarios = [load_scenario(p) for p in _scenario_paths(args.scenarios)]
    console = Console(width=None if sys.stdout.isatty() else 150)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("sweeping", total=None)
        result = sweep(scenarios, grid, base_preset=args.base_preset, objective=args.objective,
                       progress=lambda d, t, label: bar.update(task, completed=d, total=t, description=label))
    n = len(result.points) - sum(p.reference for p in result.points)
    console.print(f"[bold]memlab tune[/bold] · {len(scenarios)} scenarios · {n} grid points (+ reference presets) · "
                  "scripted models · recall = mean of context and reply recall")
    console.print(render(result))
    for values, why in result.skipped:
        console.print(f"skipped {_label(values)}: {why}", markup=False)
    chosen = result.chosen
    assert chosen is not None
    console.print(f"chosen ({args.objective}): {chosen.label} — recall {chosen.recall * 100:.1f}%, "
                  f"payload {chosen.payload_tokens} tok, {chosen.calls} calls", markup=False)
    if args.out:
        path = chosen_config(chosen, args.base_preset).save(args.out)
        console.print(f"saved preset 'custom' to {path}; load it with MemoryConfig.load('{path}') "
                      "or the lab's Tune page", markup=False)
    else:
        console.print("pass --out PRESET.toml to save the chosen point as a custom preset")
    if args.json:
        Path(args.json).write_text(json.dumps({"points": [p.to_dict() for p in result.points],
                                               "skipped": [{"values": v, "why": w} for v, w in result.skipped]},
                                              ensure_ascii=False, indent=2), encoding="utf-8")
    return 0
