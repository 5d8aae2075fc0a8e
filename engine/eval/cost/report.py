"""`memlab bench cost`: the command (options, the run, the tables, the JSON with run metadata).

Tables per scenario set: every bundled scenario, the budget-bound ones (the conversation outgrew
`context_budget`, so summarization summarised) and the rest. Per configuration: user turns, calls
per user turn by role, input (and uncached input) and output tokens, context and reply recall;
then each memlab configuration's ratios to summarization and the issue's targets.
"""

from __future__ import annotations

import argparse
import glob
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.eval.cost.bench import CONFIGS, INTERNAL_ROLES, CostRow, run_cost, summarize_rows

__all__ = ["cost_main", "render", "scenario_sets", "ratios", "TARGETS"]

#: Done when (issue 14): internal calls per user turn and the input-token ratio to summarization.
TARGETS = {"internal_calls_per_turn": 0.3, "input_ratio": 0.8}
_ROLE_SHORT = {"extractor": "extr", "query_parser": "qparse", "consolidator": "consol", "tuner": "tune",
               "inducer": "induce", "summarizer": "summ"}


def scenario_sets(rows: Sequence[CostRow]) -> dict[str, list[CostRow]]:
    """all, budget-bound (summarization wrote a summary), within budget."""
    bound = {r.scenario for r in rows if r.config == "summarization" and r.summarized}
    return {"all": list(rows),
            "budget-bound": [r for r in rows if r.scenario in bound],
            "within budget": [r for r in rows if r.scenario not in bound]}


def ratios(summary: Mapping[str, Mapping[str, Any]], name: str, base: str = "summarization") -> dict[str, float]:
    a, b = summary[name], summary[base]

    def q(key: str) -> float:
        return a[key] / b[key] if b[key] else float("inf") if a[key] else 1.0

    return {"calls": q("calls"), "internal_calls": q("internal_calls"), "input_tokens": q("input_tokens"),
            "uncached_input_tokens": q("uncached_input_tokens"), "output_tokens": q("output_tokens"),
            "context_recall_delta": a["context_recall"] - b["context_recall"]}


def _table(summary: Mapping[str, Mapping[str, Any]]) -> list[str]:
    head = (f"{'config':<22}{'turns':>6}" + "".join(f"{_ROLE_SHORT[r]:>8}" for r in INTERNAL_ROLES)
            + f"{'int/turn':>9}{'in tok':>9}{'uncached':>9}{'out tok':>8}{'ctx rec':>8}{'reply':>7}")
    lines = [head, "-" * len(head)]
    for name, s in summary.items():
        t = s["turns"] or 1
        per_role = "".join(f"{s['roles'].get(r, {}).get('calls', 0) / t:>8.3f}" for r in INTERNAL_ROLES)
        lines.append(f"{name:<22}{s['turns']:>6}{per_role}{s['internal_calls_per_turn']:>9.3f}{s['input_tokens']:>9}"
                     f"{s['uncached_input_tokens']:>9}{s['output_tokens']:>8}{s['context_recall']:>8.3f}"
                     f"{s['reply_recall']:>7.3f}")
    lines.append("  input tokens by role: " + "; ".join(
        f"{name}: " + ", ".join(f"{role} {v['input_tokens']}" for role, v in s["roles"].items())
        for name, s in summary.items()))
    return lines


def render(rows: Sequence[CostRow]) -> tuple[str, dict[str, Any]]:
    """The printed report and the JSON document's results."""
    out: list[str] = []
    doc: dict[str, Any] = {"sets": {}}
    for set_name, set_rows in scenario_sets(rows).items():
        if not set_rows:
            continue
        summary = summarize_rows(set_rows)
        scen = sorted({r.scenario for r in set_rows})
        out.append(f"\n{set_name}: {len(scen)} scenarios (calls per user turn by role; chat is one per turn)")
        out.extend(_table(summary))
        rat = {n: ratios(summary, n) for n in summary if n != "summarization" and "summarization" in summary}
        for n, r in rat.items():
            out.append(f"  {n} / summarization: calls {r['calls']:.2f}x, internal calls {r['internal_calls']:.2f}x, "
                       f"input tokens {r['input_tokens']:.2f}x (uncached {r['uncached_input_tokens']:.2f}x), "
                       f"output {r['output_tokens']:.2f}x, context recall {r['context_recall_delta']:+.3f}")
        doc["sets"][set_name] = {"scenarios": scen, "summary": summary, "ratios": rat}
    allsum = doc["sets"]["all"]["summary"]
    if "memlab" in allsum and "summarization" in allsum:
        m, r = allsum["memlab"], doc["sets"]["all"]["ratios"]["memlab"]
        # the token target is at matched budgets: the scenarios where summarization had to summarise
        bound = doc["sets"].get("budget-bound", doc["sets"]["all"])["ratios"]["memlab"]
        checks = {
            "internal_calls_per_turn": (m["internal_calls_per_turn"], m["internal_calls_per_turn"]
                                        <= TARGETS["internal_calls_per_turn"]),
            "input_ratio_budget_bound": (bound["input_tokens"], bound["input_tokens"] <= TARGETS["input_ratio"]),
            "recall_not_worse": (r["context_recall_delta"], r["context_recall_delta"] >= 0),
            "budget_bound_recall_not_worse": (bound["context_recall_delta"], bound["context_recall_delta"] >= 0),
        }
        doc["targets"] = {k: {"value": v, "met": ok} for k, (v, ok) in checks.items()}
        out.append("\ntargets (memlab; calls over all scenarios, input tokens over the budget-bound ones): " + "; ".join(
            f"{k} {v:.3f} {'met' if ok else 'NOT met'}" for k, (v, ok) in checks.items()))
    out.append("\nper scenario (input tokens / context recall):")
    names = [c for c in CONFIGS if any(r.config == c for r in rows)]
    out.append(f"{'scenario':<30}" + "".join(f"{n:>28}" for n in names))
    for sc in dict.fromkeys(r.scenario for r in rows):
        cells = []
        for n in names:
            r = next(x for x in rows if x.scenario == sc and x.config == n)
            tin = sum(int(v["input_tokens"]) for v in r.ledger.values())
            cells.append(f"{tin:>18} {r.context:>3}/{r.expected:<3}")
        out.append(f"{sc:<30}" + "".join(f"{c:>28}" for c in cells))
    doc["rows"] = [r.to_dict() for r in rows]
    return "\n".join(out), doc


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memlab bench cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", default="scenarios/*.yaml", help="scenario files (a glob; default: all bundled)")
    p.add_argument("--model", default="deepseek-chat", help="the model name the client sends (the server ignores it)")
    p.add_argument("--embedder", default="hash", choices=("hash", "minilm"))
    p.add_argument("--json", default=None, metavar="OUT")
    return p


def cost_main(argv: Sequence[str] | None = None) -> int:
    from engine.core.errors import ConfigError
    from engine.eval.runinfo import git_commit, machine, package_versions, write_json
    from engine.eval.scenario import load_scenario

    args = _parser().parse_args(list(argv or []))
    root = Path(__file__).resolve().parents[3]
    pattern = args.scenarios if Path(args.scenarios).is_absolute() or glob.glob(args.scenarios) else str(
        root / args.scenarios)
    paths = sorted(glob.glob(pattern))
    if not paths:
        raise ConfigError(f"--scenarios {args.scenarios!r} matches no file")
    scenarios = [load_scenario(p) for p in paths]

    def progress(done: int, total: int, what: str) -> None:
        print(f"\r[{done}/{total}] {what[:60]:<60}", end="" if done < total else "\n", file=sys.stderr, flush=True)

    rows = run_cost(scenarios, model=args.model, embedder=args.embedder, progress=progress)
    text, doc = render(rows)
    print(text)
    if args.json:
        meta = {"benchmark": "cost", "commit": git_commit(), "machine": machine(),
                "versions": package_versions(["langchain", "langchain-core", "langchain-deepseek", "openai"]),
                "scenarios": [str(Path(p).name) for p in paths], "model": args.model, "embedder": args.embedder,
                "server": "engine.eval.cost.responder (scripted roles behind an OpenAI-compatible HTTP API)"}
        write_json(args.json, {**meta, **doc})
        print(f"wrote {args.json}")
    return 0
