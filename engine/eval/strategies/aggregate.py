"""Aggregates over strategy runs: per (scenario, strategy), overall per strategy, and budget checks.

Means and population standard deviations over samples; recall is the share of expected
keywords found (context: what the model saw; reply: that probe's reply).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from engine.eval.strategies.base import StrategyRun

__all__ = ["aggregate", "overall", "budget_notes"]



def _mean_std(xs: Sequence[float]) -> tuple[float, float]:
    if not xs:
        return 0.0, 0.0
    return statistics.fmean(xs), (statistics.pstdev(xs) if len(xs) > 1 else 0.0)


def _row(name: str, scenario: str, runs: Sequence[StrategyRun]) -> dict[str, Any]:
    ctx, rep, rej, pay, calls, tin, tout, cost = ([] for _ in range(8))
    roles: dict[str, list[int]] = {}
    expected = 0
    for r in runs:
        rc = r.recall()
        expected = rc["expected"]
        ctx.append(rc["context"] / rc["expected"] if rc["expected"] else math.nan)
        rep.append(rc["reply"] / rc["expected"] if rc["expected"] else math.nan)
        rej.append(rc["rejected_served"])
        pay.append(r.payload_tokens)
        calls.append(sum(r.calls.values()))
        tin.append(r.input_tokens)
        tout.append(r.output_tokens)
        cost.append(r.cost)
        for role, n in r.calls.items():
            roles.setdefault(role, []).append(n)
    out: dict[str, Any] = {"strategy": name, "scenario": scenario, "samples": len(runs), "expected": expected}
    for key, xs in (("context_recall", ctx), ("reply_recall", rep), ("rejected_served", rej),
                    ("payload_tokens", pay), ("calls", calls), ("input_tokens", tin), ("output_tokens", tout),
                    ("cost", cost)):
        out[key], out[key + "_std"] = _mean_std([x for x in xs if not (isinstance(x, float) and math.isnan(x))])
    out["calls_by_role"] = {role: statistics.fmean(ns) for role, ns in sorted(roles.items())}
    out["budget"] = runs[0].budget if runs else {}
    return out


def aggregate(runs: Sequence[StrategyRun]) -> list[dict[str, Any]]:
    """One row per (scenario, strategy): means and spreads (population std) over samples."""
    groups: dict[tuple[str, str], list[StrategyRun]] = {}
    for r in runs:
        groups.setdefault((r.scenario, r.strategy), []).append(r)
    return [_row(st, sc, rs) for (sc, st), rs in groups.items()]


def overall(runs: Sequence[StrategyRun]) -> list[dict[str, Any]]:
    """One row per strategy over all scenarios: keywords pooled per sample, then mean/std over samples."""
    by: dict[str, dict[int, list[StrategyRun]]] = {}
    for r in runs:
        by.setdefault(r.strategy, {}).setdefault(r.sample, []).append(r)
    rows = []
    for name, samples in by.items():
        ctx, rep, rej, pay, calls, tin, tout, cost = ([] for _ in range(8))
        roles: dict[str, list[float]] = {}
        expected = 0
        for rs in samples.values():
            rc = [r.recall() for r in rs]
            expected = sum(x["expected"] for x in rc)
            ctx.append(sum(x["context"] for x in rc) / expected if expected else 0.0)
            rep.append(sum(x["reply"] for x in rc) / expected if expected else 0.0)
            rej.append(sum(x["rejected_served"] for x in rc))
            pay.append(sum(r.payload_tokens for r in rs))
            calls.append(sum(sum(r.calls.values()) for r in rs))
            tin.append(sum(r.input_tokens for r in rs))
            tout.append(sum(r.output_tokens for r in rs))
            cost.append(sum(r.cost for r in rs))
            sample_roles: dict[str, int] = {}
            for r in rs:
                for role, n in r.calls.items():
                    sample_roles[role] = sample_roles.get(role, 0) + n
            for role, n in sample_roles.items():
                roles.setdefault(role, []).append(n)
        row: dict[str, Any] = {"strategy": name, "scenario": "(all)", "samples": len(samples), "expected": expected}
        for key, xs in (("context_recall", ctx), ("reply_recall", rep), ("rejected_served", rej),
                        ("payload_tokens", pay), ("calls", calls), ("input_tokens", tin),
                        ("output_tokens", tout), ("cost", cost)):
            row[key], row[key + "_std"] = _mean_std(xs)
        row["calls_by_role"] = {role: statistics.fmean(ns) for role, ns in sorted(roles.items())}
        budgets = {tuple(sorted(r.budget.items())) for rs in samples.values() for r in rs}
        row["budget"] = next(iter(samples.values()))[0].budget if len(budgets) == 1 else {}
        rows.append(row)
    return rows


def budget_notes(runs: Sequence[StrategyRun]) -> list[str]:
    """A line per scenario where strategies ran on unequal budgets (memory-less strategies excepted
    for the memory budget); empty when every budget matches."""
    notes = []
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for r in runs:
        by.setdefault(r.scenario, {})[r.strategy] = r.budget
    for sc, budgets in by.items():
        for key in ("context_budget", "memory_budget", "top_k"):
            vals = {name: b.get(key) for name, b in budgets.items()
                    if b.get(key) not in (None, 0) or key == "context_budget"}
            if len(set(vals.values())) > 1:
                notes.append(f"{sc}: unequal {key}: " + ", ".join(f"{n}={v}" for n, v in vals.items()))
    return notes
