"""`memlab replay SCENARIO... --compare A,B,...`: strategies side by side in one table per scenario."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.eval.options import model_settings_from_args, parse_sets
from engine.eval.scenario import load_scenario
from engine.eval.strategies.aggregate import aggregate, budget_notes, overall
from engine.eval.strategies.run import compare, parse_compare

__all__ = ["render_table", "compare_main"]



def _fmt(mean: float, std: float, pct: bool = False, digits: int = 0) -> str:
    if pct:
        s = f"{mean * 100:.0f}%"
        return s + (f" ±{std * 100:.0f}" if std else "")
    s = f"{mean:.{digits}f}"
    return s + (f" ±{std:.{digits}f}" if std else "")


_ROLE_ABBR = {"consolidator": "cons", "extractor": "ext", "query_parser": "query", "summarizer": "summ",
              "inducer": "induct", "tuner": "tune"}


def render_table(rows: Sequence[Mapping[str, Any]], title: str):
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col, just in (("strategy", "left"), ("ctx recall", "right"), ("reply recall", "right"),
                      ("rejected", "right"), ("payload tok", "right"), ("calls", "right"),
                      ("calls by role", "left"), ("in tok", "right"), ("out tok", "right"), ("cost", "right"),
                      ("budget ctx/mem/k", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        b = r["budget"]
        table.add_row(
            r["strategy"], _fmt(r["context_recall"], r["context_recall_std"], pct=True),
            _fmt(r["reply_recall"], r["reply_recall_std"], pct=True),
            _fmt(r["rejected_served"], r["rejected_served_std"], digits=1 if r["rejected_served_std"] else 0),
            _fmt(r["payload_tokens"], r["payload_tokens_std"]), _fmt(r["calls"], r["calls_std"]),
            " ".join(f"{_ROLE_ABBR.get(k, k)} {v:g}" for k, v in r["calls_by_role"].items()),
            _fmt(r["input_tokens"], r["input_tokens_std"]), _fmt(r["output_tokens"], r["output_tokens_std"]),
            f"{r['cost']:.4f}", (f"{b.get('context_budget')}/{b.get('memory_budget') or '—'}/{b.get('top_k') or '—'}" if b
             else "per scenario"),
        )
    return table


def _run_with_progress(args: Any, console: Any, strategies: Sequence[Any], scenarios: Sequence[Any],
                       settings: Any) -> list[Any]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    overrides = parse_sets(getattr(args, "set", None))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("comparing", total=len(scenarios) * len(strategies) * max(1, args.samples))

        def tick(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        return compare(scenarios, strategies, samples=args.samples, preset=args.preset, overrides=overrides,
                       settings=settings, embedder=getattr(args, "embedder", "hash"), progress=tick)


def _print_budgets(console: Any, runs: Sequence[Any]) -> None:
    notes = budget_notes(runs)
    if notes:
        console.print("[yellow]unequal budgets:[/yellow]")
        for n in notes:
            console.print(f"  {n}", markup=False)
    else:
        console.print("budgets matched: every strategy had the same context budget "
                      "(and memory budget / top_k where it has memory)")


def compare_main(args: Any) -> int:
    """`memlab replay SCENARIO... --compare A,B,... [--samples N] [--models ...] [--json OUT]`."""
    from rich.console import Console

    strategies = parse_compare(args.compare)
    settings = model_settings_from_args(args)
    scenarios = [load_scenario(p) for p in args.scenarios]
    console = Console(width=None if sys.stdout.isatty() else 200)
    runs = _run_with_progress(args, console, strategies, scenarios, settings)
    mode = "scripted models" if settings is None else f"{args.models}: {settings.model}"
    console.print(f"[bold]memlab compare[/bold] · {mode} · {args.samples} sample(s) · "
                  f"recall = share of expected keywords (context: what the model saw; reply: that probe's reply)")
    rows = aggregate(runs)
    for sc in scenarios:
        console.print(render_table([r for r in rows if r["scenario"] == sc.name], f"{sc.name}"))
        if getattr(args, "verbose", False):
            for r in runs:
                if r.scenario == sc.name and r.sample == 0:
                    for p in r.probes:
                        console.print(f"  {r.strategy:<14} {p['ask']} → {p['reply']}", markup=False)
    if len(scenarios) > 1:
        console.print(render_table(overall(runs), f"overall ({len(scenarios)} scenarios)"))
    _print_budgets(console, runs)
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": [r.to_dict() for r in runs]}, ensure_ascii=False, indent=2),
                                   encoding="utf-8")
        console.print(f"wrote {args.json}")
    return 0
