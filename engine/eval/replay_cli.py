"""`memlab replay SCENARIO...`: replay scenario files and print each probe's checks and events.

With `--compare A,B,...` the same scenarios run through comparison strategies instead
(engine.eval.strategies.cli). The engine gets the command's store, embedder and models; it owns
its ledger (no second one is passed in).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from engine.eval.options import extractor_settings_from_args, model_settings_from_args, parse_sets, store_url
from engine.eval.replay import ReplayResult, replay
from engine.eval.scenario import load_scenario
from engine.memory.engine import MemoryEngine
from engine.roles.bundle import Models
from engine.roles.embeddings import make_embedder
from engine.roles.ledger import Ledger

__all__ = ["replay_main", "engine_factory", "print_replay"]


def replay_main(args: argparse.Namespace) -> int:
    """Replay every scenario of `args.scenarios` (or compare strategies with `--compare`)."""
    if args.compare:
        from engine.eval.strategies.cli import compare_main

        return compare_main(args)
    overrides = parse_sets(args.set)
    settings = model_settings_from_args(args)
    results = []
    for path in args.scenarios:
        sc = load_scenario(path)
        cfg = sc.memory_config(preset=args.preset, overrides=overrides)
        res = replay(sc, config=cfg, engine_factory=engine_factory(args, settings))
        results.append(res)
        print_replay(res, verbose=args.verbose)
    if args.json:
        payload: Any = results[0].to_dict() if len(results) == 1 else {"runs": [r.to_dict() for r in results]}
        Path(args.json).write_text(json.dumps(payload, ensure_ascii=False, indent=2), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


def engine_factory(args: argparse.Namespace, settings: Any):
    """`factory(config=, clock=) -> MemoryEngine` on the command's store, embedder and models (the
    extractor on its own server with `--extractor-base-url`)."""

    extractor = extractor_settings_from_args(args)

    def factory(**kw: Any) -> MemoryEngine:
        models = Models.real(settings) if settings is not None else None
        if extractor is not None:
            models = (models or Models.scripted()).with_extractor(extractor)
        return MemoryEngine(store=store_url(args), embedder=make_embedder(args.embedder), models=models, **kw)

    return factory


def _probe_line(p: dict[str, Any]) -> str:
    marks = []
    for k, v in p["expect"].items():
        marks.append(f"{k}: ctx {'✓' if v['context'] else '✗'} reply {'✓' if v['reply'] else '✗'}")
    for k, v in p["reject"].items():
        served = v["context"] or v["reply"]
        marks.append(f"reject {k}: {'SERVED ✗' if served else 'not served ✓'}")
    return f"  [{p['user']}] {p['ask']}\n      " + "; ".join(marks or ["(no expectations)"])


def _event_line(e: dict[str, Any]) -> str:
    g = e["gate"]
    mat = g.get("maturity")
    return (f"   #{e['event_no']} {e['user']} turn {e['turn']} at {e['at'][11:16]}: "
            f"pending {g.get('pending')}, M {mat if mat is None else round(mat, 3)}; "
            f"extracted {e['messages_extracted']} msgs → +{e['records_added']} records, "
            f"merged {e['merged']}, superseded {e['superseded']}, inducted {e['inducted']}, "
            f"injected {e['injected_tokens']} tok" + (f", errors {e['errors']}" if e["errors"] else ""))


def print_replay(res: ReplayResult, *, verbose: bool = False) -> None:
    """The probes' checks, one line per memory event, the cost per role and the recall."""
    rec = res.recall()
    print(f"\n== {res.scenario}  (preset {res.config['preset']}, slice gate "
          f"{res.config['slice_gate_seconds']:.0f} s)")
    for p in res.probes:
        print(_probe_line(p))
        if verbose:
            print(f"      reply: {p['reply']}")
    print(f"  events: {len(res.events)}")
    for e in res.events:
        print(_event_line(e))
    if any(v.get("cost") for v in res.ledger.values()) or any(v.get("cache_hit_tokens") for v in res.ledger.values()):
        print("  model calls and cost per role:")
        print("\n".join("    " + line for line in Ledger.format_table(res.ledger).splitlines()))
    calls = sum(int(v["calls"]) for v in res.ledger.values())
    print(f"  recall: context {rec['context']}/{rec['expected']}, reply {rec['reply']}/{rec['expected']}, "
          f"rejected served {rec['rejected_served']}; payload {res.payload_tokens} tok; model calls {calls} "
          + ", ".join(f"{k} {int(v['calls'])}" for k, v in sorted(res.ledger.items())))
