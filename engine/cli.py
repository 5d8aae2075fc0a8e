"""The `memlab` console script: argument parsing and dispatch to each command's main function.

Commands: lab, demo, replay (and replay --compare), export-extractions, bench perf|locomo|longmemeval|knobs|cost,
tune, forget, check, presets. The evaluation commands live in engine.eval; `lab`, `forget` and `presets` are a few
lines each and stay here. User-input errors (a bad scenario, config, duration, path) print one
readable line and exit 2; they never print a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from engine.core.errors import MemlabError, MemlabUsageError
from engine.eval.options import add_model_args, add_store_args, store_url

__all__ = ["main", "build_parser"]

REPO_ROOT = Path(__file__).resolve().parent.parent


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
    add_model_args(p)
    add_store_args(p)

    p = sub.add_parser("export-extractions", help="extraction windows and the records returned, as JSONL training pairs")
    from engine.eval.export import add_export_args

    add_export_args(p)
    add_model_args(p)
    add_store_args(p)

    p = sub.add_parser("bench", help="benchmarks: perf, locomo, longmemeval, knobs, cost")
    p.add_argument("which", choices=("perf", "locomo", "longmemeval", "knobs", "cost"))
    p.add_argument("rest", nargs=argparse.REMAINDER)

    p = sub.add_parser("tune", help="sweep parameters over scenarios and save a preset")
    p.add_argument("rest", nargs=argparse.REMAINDER)

    p = sub.add_parser("forget", help="erase every trace of a user from a database")
    p.add_argument("--user", required=True)
    add_store_args(p)

    p = sub.add_parser("check", help="verify the invariants on a database")
    add_store_args(p)

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
        from engine.eval.demo import demo_main

        return demo_main(args.embedder)
    if cmd == "replay":
        from engine.eval.replay_cli import replay_main

        return replay_main(args)
    if cmd == "export-extractions":
        from engine.eval.export import export_main

        return export_main(args)
    if cmd == "bench":
        if args.which == "perf":
            from engine.eval.perf import perf_main

            return perf_main(args.rest)
        if args.which == "knobs":
            from engine.eval.knobs import knobs_main

            return knobs_main(args.rest)
        if args.which == "cost":
            from engine.eval.cost import cost_main

            return cost_main(args.rest)
        if args.which == "longmemeval":
            from engine.eval.longmemeval import longmemeval_main

            return longmemeval_main(args.rest)
        from engine.eval.locomo import locomo_main

        return locomo_main(args.rest)
    if cmd == "tune":
        from engine.eval.tuning import tune_main

        return tune_main(args.rest)
    if cmd == "forget":
        return _forget(args)
    if cmd == "check":
        from engine.stores.check import check_main

        return check_main(store_url(args))
    if cmd == "presets":
        return _presets(args)
    raise AssertionError(cmd)


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

        data = MemoryConfig.from_preset(args.show).to_dict()
        print(tomli_w.dumps({k: v for k, v in data.items() if v is not None}))  # TOML has no null (as in save)
        return 0
    print(f"{'preset':<26}{'tau_m':>8}{'c_m':>6}{'tau':>10}{'c':>6}{'slice':>7}{'long':>7}"
          f"{'slice gate':>12}{'induct gate':>13}{'half-life':>11}")
    for name in PRESETS:
        c = MemoryConfig.from_preset(name)
        print(f"{name:<26}{c.tau_m:>8.0f}{c.c_m:>6.2f}{c.tau:>10.0f}{c.c:>6.2f}{c.slice_value:>7.2f}"
              f"{c.long_term_value:>7.2f}{format_duration(c.slice_gate_seconds):>12}"
              f"{format_duration(c.induction_gate_seconds):>13}{format_duration(c.decay_half_life_seconds):>11}")
    return 0


def _forget(args: argparse.Namespace) -> int:
    from engine.stores.base import open_store

    url = store_url(args)
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


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
