"""The `memlab` console script: lab, demo, replay, bench, tune, forget, check, presets.

User-input errors (a bad scenario, config, duration, path) print one readable line and exit 2;
they never print a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.core.errors import MemlabError, MemlabUsageError

__all__ = ["main", "parse_sets"]

REPO_ROOT = Path(__file__).resolve().parent.parent


def parse_sets(items: Sequence[str] | None) -> dict[str, Any]:
    """`--set key=value` pairs; values parsed as JSON when they can be (numbers, lists, true)."""
    from engine.core.errors import ConfigError

    out: dict[str, Any] = {}
    for item in items or ():
        if "=" not in item:
            raise ConfigError(f"--set {item!r} needs the form key=value, e.g. --set top_k=6")
        key, raw = item.split("=", 1)
        key = key.strip()
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if "." in key:  # weights.alpha=0.5
            head, sub = key.split(".", 1)
            out.setdefault(head, {})[sub] = value
        else:
            out[key] = value
    return out


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", choices=("scripted", "real", "cassette"), default="scripted",
                   help="scripted (offline, default), real (a LangChain chat model), cassette (replay a recording)")
    p.add_argument("--model", default=None, help="model name, e.g. deepseek-chat or openai:gpt-4o-mini")
    p.add_argument("--base-url", default=None, help="an OpenAI-compatible server (local vLLM / Ollama)")
    p.add_argument("--cassette", default=None, help="cassette file to record to (real) or replay from (cassette)")


def _add_store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default="sqlite", help="sqlite (default) or postgres")
    p.add_argument("--dsn", default=None, help="PostgreSQL URL (with --store postgres); none starts a local server")
    p.add_argument("--db", default=None, help="SQLite database file (default: in memory)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memlab", description="A lab and simulator for LLM-agent long-term memory.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("lab", help="start the Streamlit lab")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--headless", action="store_true")

    p = sub.add_parser("demo", help="a short engine demo in the terminal: what it stored and how it ranked it")
    p.add_argument("--embedder", default="hash", choices=("hash", "minilm"))

    p = sub.add_parser("replay", help="replay scenario files under the virtual clock and check their probes")
    p.add_argument("scenarios", nargs="+")
    p.add_argument("--preset", default=None)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--json", default=None, metavar="OUT")
    p.add_argument("--embedder", default="hash", choices=("hash", "minilm"))
    p.add_argument("--compare", default=None, help="strategies, e.g. no-memory,summarization,bmdm,dimmem,memlab")
    p.add_argument("--samples", type=int, default=1)
    p.add_argument("--verbose", "-v", action="store_true", help="print every probe's reply")
    _add_model_args(p)
    _add_store_args(p)

    p = sub.add_parser("bench", help="benchmarks: perf, locomo")
    p.add_argument("which", choices=("perf", "locomo"))
    p.add_argument("rest", nargs=argparse.REMAINDER)

    p = sub.add_parser("tune", help="sweep parameters over scenarios and save a preset")
    p.add_argument("rest", nargs=argparse.REMAINDER)

    p = sub.add_parser("forget", help="erase every trace of a user from a database")
    p.add_argument("--user", required=True)
    _add_store_args(p)

    p = sub.add_parser("check", help="verify the invariants on a database")
    _add_store_args(p)

    p = sub.add_parser("presets", help="list presets with their gate times")
    p.add_argument("--show", default=None, help="print one preset as TOML")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["tune"]:  # tune parses its own options (REMAINDER would drop a leading --option)
        args = argparse.Namespace(command="tune", rest=argv[1:])
    else:
        args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except MemlabUsageError as exc:
        print(f"memlab: error: {exc}", file=sys.stderr)
        return 2
    except MemlabError as exc:
        print(f"memlab: failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    cmd = args.command
    if cmd == "lab":
        return _lab(args)
    if cmd == "demo":
        return _demo(args)
    if cmd == "replay":
        return _replay(args)
    if cmd == "bench":
        if args.which == "perf":
            from engine.eval.perf import perf_main

            return perf_main(args.rest)
        from engine.eval.locomo import locomo_main

        return locomo_main(args.rest)
    if cmd == "tune":
        from engine.eval.tuning import tune_main

        return tune_main(args.rest)
    if cmd == "forget":
        return _forget(args)
    if cmd == "check":
        from engine.stores.check import check_main

        return check_main(_store_url(args))
    if cmd == "presets":
        return _presets(args)
    raise AssertionError(cmd)


def _store_url(args: argparse.Namespace) -> str | None:
    if getattr(args, "store", "sqlite") == "postgres":
        return args.dsn or "postgres"
    return getattr(args, "db", None)


def _lab(args: argparse.Namespace) -> int:
    import subprocess

    app = REPO_ROOT / "lab" / "streamlit_app.py"
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port),
           "--browser.gatherUsageStats", "false"]
    if args.headless:
        cmd += ["--server.headless", "true"]
    return subprocess.call(cmd, cwd=str(REPO_ROOT))


def _presets(args: argparse.Namespace) -> int:
    from engine.core.clock import format_duration
    from engine.core.config import PRESETS, MemoryConfig

    if args.show:
        import tomli_w

        print(tomli_w.dumps(MemoryConfig.from_preset(args.show).to_dict()))
        return 0
    print(f"{'preset':<26}{'tau_m':>8}{'c_m':>6}{'tau':>10}{'c':>6}{'slice':>7}{'long':>7}"
          f"{'slice gate':>12}{'induct gate':>13}{'half-life':>11}")
    for name in PRESETS:
        c = MemoryConfig.from_preset(name)
        print(f"{name:<26}{c.tau_m:>8.0f}{c.c_m:>6.2f}{c.tau:>10.0f}{c.c:>6.2f}{c.slice_value:>7.2f}"
              f"{c.long_term_value:>7.2f}{format_duration(c.slice_gate_seconds):>12}"
              f"{format_duration(c.induction_gate_seconds):>13}{format_duration(c.decay_half_life_seconds):>11}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    """A short conversation under the virtual clock, then what was stored and how it ranked."""
    from engine.core.clock import VirtualClock, format_duration
    from engine.core.config import MemoryConfig
    from engine.memory.engine import DEFAULT_START, MemoryEngine
    from engine.roles.embeddings import make_embedder

    clock = VirtualClock(DEFAULT_START)
    engine = MemoryEngine(MemoryConfig.from_preset("customer service"), clock=clock,
                          embedder=make_embedder(args.embedder))
    cfg = engine.config
    print(f"memlab demo · preset '{cfg.preset}' · slice gate {format_duration(cfg.slice_gate_seconds)} · "
          f"{engine.models.label} · embedder {args.embedder}")
    lines = [
        "Hi, I'm Li Mingxuan, I work as a data analyst in Shanghai.",
        "My order number is 88231 and the parcel has not arrived.",
        "I prefer email over phone calls because I am in meetings all day.",
        "My dog Rex chewed the charger, so I need a new USB-C cable.",
    ]
    for text in lines:
        r = engine.turn("alice", "s1", text)
        print(f"[{clock.now():%H:%M}] user: {text}\n         assistant: {r.reply}")
        clock.advance("5min")
    clock.advance("1h")
    print(f"\n… one hour later (virtual clock {clock.now():%Y-%m-%d %H:%M}) …")
    q = "What is my order number?"
    r = engine.turn("alice", "s1", q)
    print(f"user: {q}\nassistant: {r.reply}\n")
    print("stored records:")
    for rec in engine.records("alice"):
        print(f"  #{rec.id} [{rec.memory_type}; {', '.join(rec.tags)}; theme {rec.theme}] {rec.content}")
    if r.retrieval:
        print("\nranking for the last question (R relevance, T decay, F importance, S score):")
        for row in r.retrieval.rows[:8]:
            print(f"  #{row.record_id:<3} R {row.R:.2f}  T {row.T:.2f}  F {row.F:.2f}  S {row.S:.3f}  "
                  f"{row.verdict} ({row.why})")
    print(f"\nevents fired: {len({e.event_no for e in engine.events(user_id='alice') if e.event_no})}; "
          f"open the lab with `memlab lab` to watch it live.")
    return 0


def _forget(args: argparse.Namespace) -> int:
    from engine.stores.base import open_store

    url = _store_url(args)
    if not url:
        print("memlab: error: give --db PATH (or --store postgres)", file=sys.stderr)
        return 2
    store = open_store(url)
    try:
        counts = store.forget_user(args.user)
    finally:
        store.close()
    total = sum(counts.values())
    print(f"forgot user {args.user!r}: {total} rows removed " + json.dumps(counts, sort_keys=True))
    return 0


def _model_factory(args: argparse.Namespace):
    """None for scripted models; else a function building real Models (sharing one ledger)."""
    if args.models == "scripted":
        return None
    from engine.roles.llm import ModelSettings

    settings = ModelSettings.from_env()
    overrides: dict[str, Any] = {}
    if args.model:
        overrides["model"] = args.model
    if args.base_url:
        overrides["base_url"] = args.base_url
    if args.models == "cassette":
        if not args.cassette:
            from engine.core.errors import ConfigError

            raise ConfigError("--models cassette needs --cassette FILE (a recording made with --models real --cassette FILE)")
        overrides.update(cassette=args.cassette, cassette_mode="replay")
    elif args.cassette:
        overrides.update(cassette=args.cassette, cassette_mode="record")
    from dataclasses import replace

    return replace(settings, **overrides)


def _replay(args: argparse.Namespace) -> int:
    from engine.eval.scenario import load_scenario, replay

    if args.compare:
        from engine.eval.strategies import compare_main

        return compare_main(args)
    overrides = parse_sets(args.set)
    settings = _model_factory(args)
    results = []
    for path in args.scenarios:
        sc = load_scenario(path)
        cfg = sc.memory_config(preset=args.preset, overrides=overrides)
        factory = _engine_factory(args, settings)
        res = replay(sc, config=cfg, engine_factory=factory)
        results.append(res)
        _print_replay(res, verbose=args.verbose)
    if args.json:
        payload: Any = results[0].to_dict() if len(results) == 1 else {"runs": [r.to_dict() for r in results]}
        Path(args.json).write_text(json.dumps(payload, ensure_ascii=False, indent=2), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


def _engine_factory(args: argparse.Namespace, settings: Any):
    from engine.memory.engine import MemoryEngine
    from engine.roles.bundle import Models
    from engine.roles.embeddings import make_embedder

    def factory(**kw):
        models = Models.real(settings) if settings is not None else None  # the engine binds its own ledger
        store = _store_url(args)
        if store and args.store == "sqlite":
            store = str(store)
        return MemoryEngine(store=store, embedder=make_embedder(args.embedder), models=models, **kw)

    return factory


def _print_replay(res, *, verbose: bool = False) -> None:
    rec = res.recall()
    print(f"\n== {res.scenario}  (preset {res.config['preset']}, slice gate "
          f"{res.config['slice_gate_seconds']:.0f} s)")
    for p in res.probes:
        marks = []
        for k, v in p["expect"].items():
            marks.append(f"{k}: ctx {'✓' if v['context'] else '✗'} reply {'✓' if v['reply'] else '✗'}")
        for k, v in p["reject"].items():
            served = v["context"] or v["reply"]
            marks.append(f"reject {k}: {'SERVED ✗' if served else 'not served ✓'}")
        print(f"  [{p['user']}] {p['ask']}\n      " + "; ".join(marks or ["(no expectations)"]))
        if verbose:
            print(f"      reply: {p['reply']}")
    print(f"  events: {len(res.events)}")
    for e in res.events:
        g = e["gate"]
        mat = g.get("maturity")
        print(f"   #{e['event_no']} {e['user']} turn {e['turn']} at {e['at'][11:16]}: "
              f"pending {g.get('pending')}, M {mat if mat is None else round(mat, 3)}; "
              f"extracted {e['messages_extracted']} msgs → +{e['records_added']} records, "
              f"merged {e['merged']}, superseded {e['superseded']}, inducted {e['inducted']}, "
              f"injected {e['injected_tokens']} tok" + (f", errors {e['errors']}" if e["errors"] else ""))
    if any(v.get("cost") for v in res.ledger.values()) or any(v.get("cache_hit_tokens") for v in res.ledger.values()):
        from engine.roles.ledger import Ledger

        print("  model calls and cost per role:")
        print("\n".join("    " + line for line in Ledger.format_table(res.ledger).splitlines()))
    calls = sum(int(v["calls"]) for v in res.ledger.values())
    print(f"  recall: context {rec['context']}/{rec['expected']}, reply {rec['reply']}/{rec['expected']}, "
          f"rejected served {rec['rejected_served']}; payload {res.payload_tokens} tok; model calls {calls} "
          + ", ".join(f"{k} {int(v['calls'])}" for k, v in sorted(res.ledger.items())))


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
