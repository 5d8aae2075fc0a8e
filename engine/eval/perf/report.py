"""`memlab bench perf`: the engine's own retrieval at store sizes, and whole turns of one long session.

Two measurements, both of the code a turn runs and nothing else:
1. `MemoryEngine.retrieve(user, text, session_id=..., log=True)` on stores of N records built by
   bulk `add_records` of the synthetic corpus (engine.eval.perf.retrieval);
2. `MemoryEngine.turn` over one session of `--turns` turns on a virtual clock: ordinary and event
   turns at turn 10, 100 and 1,000, and the store rows an ordinary turn reads
   (engine.eval.perf.session).
One table with the configuration; `--json OUT` writes the figures with the run's metadata.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from engine.core.config import MemoryConfig
from engine.core.errors import ConfigError
from engine.eval.perf.corpus import DIM, STORE_FACTORIES
from engine.eval.perf.retrieval import RECORD_VECTORS, bench_config, check_record_vectors, measure_size, scripted_turn_fn
from engine.eval.perf.session import DEFAULT_MARKS, FRESH_TURNS, run_session, summarize_session
from engine.eval.perf.stages import format_stages
from engine.eval.runinfo import format_probe, git_commit, machine, package_versions, probe_machine, sqlite_versions

__all__ = ["run_perf", "format_table", "perf_main", "bench_config", "write_json"]

#: Rounds after the long session of its next turn, a new session of the same user and a new user,
#: one after another (engine.eval.perf.session): growth of the turn told apart from the machine's drift.
SIDE_BY_SIDE_ROUNDS = 100


def _config_meta(cfg: MemoryConfig, *, sizes, stores, dim, repeats, other_users, seed, at,
                 record_vectors: str = "synthetic") -> dict[str, Any]:
    return {
        "measured": "MemoryEngine.retrieve(user, text, session_id=..., log=True), as MemoryEngine.turn calls it",
        "sizes": [int(s) for s in sizes], "stores": list(stores), "dim": dim, "k": cfg.candidate_k,
        "queries": repeats, "other_users": other_users, "other_fraction": 0.1, "seed": seed,
        "preset": cfg.preset, "paths": list(cfg.paths), "fusion": cfg.fusion, "top_k": cfg.top_k,
        "always_inject_types": list(cfg.always_inject_types), "embedder": f"hash ({dim}-d)",
        "record_vectors": record_vectors,
        "query_parser": "scripted", "log_full_turns": cfg.log_full_turns, **machine(),
        "versions": {**sqlite_versions(), **package_versions(("numpy", "langchain-core", "memlab"))},
        "git_commit": git_commit(), "run_at": None if at is None else at.isoformat(),
    }


def run_perf(
    *,
    sizes: Sequence[int] = (1000, 10000, 100000),
    stores: Sequence[str] = ("sqlite",),
    repeats: int = 50,
    other_users: int = 3,
    seed: int = 0,
    k: int | None = None,
    dim: int = DIM,
    turn_fn: Callable[[Any, str, str], Any] | None = None,
    session_turns: int = 0,
    marks: Sequence[int] = DEFAULT_MARKS,
    progress: Callable[[str], None] | None = None,
    at: datetime | None = None,
    overrides: dict[str, Any] | None = None,
    record_vectors: str = "synthetic",
) -> dict[str, Any]:
    """Measure every store at every size (`repeats` timed retrievals each), then one session.

    `turn_fn(store, user_id, text)` runs one whole turn on each built store (timed as turn_p50_ms);
    `session_turns` > 0 plays one session that long (0 skips it). `at` stamps the run.
    `record_vectors`: the stored records' vectors (engine.eval.perf.retrieval.RECORD_VECTORS).
    """
    unknown = [s for s in stores if s not in STORE_FACTORIES]
    if unknown:
        raise ConfigError(f"unknown store {unknown}; choose from {', '.join(STORE_FACTORIES)}")
    check_record_vectors(record_vectors)
    cfg = bench_config(k, overrides)
    config = _config_meta(cfg, sizes=sizes, stores=stores, dim=dim, repeats=repeats, other_users=other_users,
                          seed=seed, at=at, record_vectors=record_vectors)
    probe = {"before": probe_machine()}
    per_store: dict[str, Any] = {}
    for name in stores:
        per_store[name] = {"sizes": {}}
        for n in sizes:
            per_store[name]["sizes"][str(int(n))] = measure_size(
                name, int(n), config=cfg, dim=dim, queries=repeats, other_users=other_users, seed=seed,
                turn_fn=turn_fn, progress=progress, record_vectors=record_vectors)
    session = None
    if session_turns > 0:
        samples = run_session(turns=session_turns, config=cfg, seed=seed, dim=dim, progress=progress, marks=marks,
                              side_by_side=SIDE_BY_SIDE_ROUNDS)
        session = summarize_session(samples, marks)
    config["machine_probe"] = {**probe, "after": probe_machine()}  # the machine's speed, not the code's
    return {"config": config, "sizes": per_store[stores[0]]["sizes"], "stores": per_store, "session": session}


def _fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def _retrieval_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"{'store':<9}{'N':>8}{'p50 ms':>9}{'p95 ms':>9}{'turn ms':>9}{'ingest/s':>10}{'B/rec':>8}"
             f"{'dense recall':>13}{'open ms':>9}{'1st ret ms':>11}{'RSS MB':>8}{'anon MB':>8}"]
    for name, data in result["stores"].items():
        for n, row in data["sizes"].items():
            lines.append(f"{name:<9}{n:>8}{row['retrieve_p50_ms']:>9.2f}{row['retrieve_p95_ms']:>9.2f}"
                         f"{_fmt(row['turn_p50_ms']):>9}{_fmt(row['ingest_per_s'], '.0f'):>10}"
                         f"{_fmt(row['bytes_per_record'], '.0f'):>8}{row['dense_recall_at_k']:>13.3f}"
                         f"{_fmt(row.get('open_ms')):>9}{_fmt(row.get('first_retrieve_ms')):>11}"
                         f"{_fmt(row.get('rss_mb'), '.0f'):>8}{_fmt(row.get('rss_anon_mb'), '.0f'):>8}")
    for name, data in result["stores"].items():
        for n, row in data["sizes"].items():
            if row.get("stages_p50_ms"):
                lines.append(f"  {name} N={n}, {_fmt(row.get('candidates_p50'), 'd')} candidates, stages p50 ms: "
                             + format_stages(row["stages_p50_ms"]))
    return lines


def _keyword_lines(result: dict[str, Any]) -> list[str]:
    """The BM25 path alone on a common word, and ingest with the hash embedder, per store and size."""
    lines = [f"{'store':<9}{'N':>8}{'bm25 common-word p50 ms':>25}{'p95 ms':>9}{'4 users p50 ms':>16}"
             f"{'p95 ms':>9}{'ingest+hash embed/s':>21}"]
    for name, data in result["stores"].items():
        for n, row in data["sizes"].items():
            lines.append(f"{name:<9}{n:>8}{_fmt(row.get('keyword_common_p50_ms'), '.2f'):>25}"
                         f"{_fmt(row.get('keyword_common_p95_ms'), '.2f'):>9}"
                         f"{_fmt(row.get('keyword_4users_p50_ms'), '.2f'):>16}"
                         f"{_fmt(row.get('keyword_4users_p95_ms'), '.2f'):>9}"
                         f"{_fmt(row.get('ingest_hash_embed_per_s'), '.0f'):>21}")
    return lines


def _session_lines(session: dict[str, Any]) -> list[str]:
    lo, hi = session["step_seconds"]
    lines = [f"one session of {session['turns']} turns (MemoryEngine.turn, scripted models, virtual clock "
             f"{lo:.0f}-{hi:.0f} s per turn, {session['events']} events):",
             f"{'turn':>6}{'ordinary p50 ms':>17}{'(turns)':>9}{'event p50 ms':>14}  {'event turns':<16}"
             f"{'window events p50 ms':>22}{'(turns)':>9}"
             f"{'rows read/ordinary turn':>24}{'DB KB':>9}{'B/turn':>8}{'B/turn since':>14}{'events':>8}{'scores':>8}"]
    for m in session["marks"]:
        last = m["rows_read_last_ordinary"]
        rows = "-" if last is None else f"{_fmt(m['rows_read_ordinary_p50'], '.0f')} (turn {last['turn']}: {last['rows']})"
        lines.append(f"{m['mark']:>6}{_fmt(m['ordinary_p50_ms']):>17}{m['ordinary_turns']:>9}"
                     f"{_fmt(m['event_p50_ms']):>14}  {','.join(map(str, m['event_turns'])) or '-':<16}"
                     f"{_fmt(m.get('window_event_p50_ms')):>22}{m.get('window_event_turns', 0):>9}{rows:>24}"
                     + _db_cells(m.get("db")))
    beside = session.get("side_by_side")
    if beside:
        g = beside["groups"]
        span = g["long"]["turns"]
        lines.append(f"side by side, {beside['rounds']} rounds after the session, one turn of each in turn: "
                     f"this session's turns {span[0] if span else '-'}-{span[1] if span else '-'} "
                     f"p50 {_fmt(g['long']['ordinary_p50_ms'])} ms; a new session of the same user "
                     f"(turns 1-{FRESH_TURNS}) {_fmt(g['same-user']['ordinary_p50_ms'])} ms; a new user "
                     f"(turns 1-{FRESH_TURNS}) "
                     f"{_fmt(g['new-user']['ordinary_p50_ms'])} ms")
        lines.append(f"  history x{_fmt(beside['history_ratio'], '.2f')} (long session / new session, same memory), "
                     f"memory x{_fmt(beside['memory_ratio'], '.2f')} (same user / new user), "
                     f"long session / a user's first turns x{_fmt(beside['long_vs_first_turns'], '.2f')}")
        if beside.get("memory_by_stage_ms"):
            lines.append("  memory by stage (same user - new user, p50 ms): "
                         + format_stages(beside["memory_by_stage_ms"], top=12, signed=True))
    return lines


def _db_cells(db: dict[str, Any] | None) -> str:
    """The database at a mark: size, bytes per turn so far and since the previous mark, log rows."""
    if not db:
        return ""
    since = (db.get("bytes_per_turn_since") or {}).get("bytes")
    return (f"{db['bytes'] / 1024:>9.0f}{db['bytes_per_turn']:>8.0f}{_fmt(since, '.0f'):>14}"
            f"{db['events']:>8}{db['scores']:>8}")


def format_table(result: dict[str, Any]) -> str:
    """The configuration line, the retrieval table per store and size, and the session table."""
    cfg = result["config"]
    v = cfg["versions"]
    lines = [
        f"memlab bench perf: {cfg.get('measured', 'engine retrieval')}",
        f"preset {cfg.get('preset')}, log_full_turns {cfg.get('log_full_turns')}, paths {'+'.join(cfg.get('paths', []))}, fusion {cfg.get('fusion')}, "
        f"k {cfg['k']} per path, top_k {cfg.get('top_k')}, embedder {cfg.get('embedder')}, "
        f"record vectors {cfg.get('record_vectors', 'synthetic')}, dim {cfg['dim']}, "
        f"{cfg['queries']} queries, +10% records over {cfg['other_users']} other users, {cfg['cores']} cores, "
        f"python {cfg.get('python', v.get('python'))}, sqlite {v.get('sqlite')} ({v.get('sqlite_driver')}), "
        f"sqlite-vec {v.get('sqlite_vec')}, git {str(cfg.get('git_commit'))[:12]}",
        *([probe] if (probe := format_probe(cfg.get("machine_probe"))) else []),
        *_retrieval_lines(result),
        *_keyword_lines(result),
    ]
    if result.get("session"):
        lines += ["", *_session_lines(result["session"])]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memlab bench perf", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000", help="records of the measured user, comma-separated")
    p.add_argument("--store", default="sqlite", help=f"back ends, comma-separated ({', '.join(STORE_FACTORIES)})")
    p.add_argument("--queries", type=int, default=50, help="timed retrievals per size")
    p.add_argument("--turns", type=int, default=1000,
                   help=f"length of the timed session (0 skips it), then {SIDE_BY_SIDE_ROUNDS} rounds of its next turn, "
                        "a new session of the same user and a new user, one after another")
    p.add_argument("--marks", default=",".join(map(str, DEFAULT_MARKS)), help="session turns to report")
    p.add_argument("--k", type=int, default=None, help="candidates per retrieval path (default: the preset's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key for the whole run, e.g. --set log_full_turns=0 (repeatable)")
    p.add_argument("--record-vectors", choices=RECORD_VECTORS, default="synthetic",
                   help="the stored records' vectors: the corpus's synthetic dense ones (default), or their "
                        "texts hash-embedded like the questions (the offline default's sparse vectors)")
    p.add_argument("--json", dest="json_out", help="write the results as JSON to this file")
    p.add_argument("--against", choices=("reference",), default=None,
                   help="side by side with the reference package (memory-middleware, installed into "
                        "build/reference-venv on first use; engine.eval.perf.reference)")
    p.add_argument("--reference-python", default=None,
                   help="with --against: an interpreter that already has the reference (skips build/reference-venv)")
    p.add_argument("--other-fraction", type=float, default=1.0,
                   help="with --against: records of each of the 3 other users, as a fraction of N (1.0: 4 users x N)")
    return p


def write_json(result: dict[str, Any], path: str) -> None:
    """The results as indented UTF-8 JSON."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2, ensure_ascii=False)


def _ints(parser: argparse.ArgumentParser, flag: str, text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        parser.error(f"{flag} {text!r}: write whole numbers separated by commas, e.g. 1000,10000")
        raise  # unreachable: parser.error exits


def perf_main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    sizes, marks = _ints(parser, "--sizes", args.sizes), _ints(parser, "--marks", args.marks)
    stores = [s.strip() for s in args.store.split(",") if s.strip()]
    if any(s not in STORE_FACTORIES for s in stores):
        parser.error(f"--store {args.store!r}: choose from {', '.join(STORE_FACTORIES)}")
    from engine.core.clock import SystemClock
    from engine.eval.options import parse_sets

    try:
        overrides = parse_sets(args.set)
        bench_config(args.k, overrides)
    except ConfigError as exc:
        parser.error(str(exc))

    if args.against == "reference":
        return _against_reference(args, sizes)
    result = run_perf(sizes=sizes, stores=stores, repeats=args.queries, seed=args.seed, k=args.k,
                      at=SystemClock().now(), turn_fn=scripted_turn_fn(), session_turns=args.turns, marks=marks,
                      progress=lambda m: print(m, file=sys.stderr, flush=True), overrides=overrides,
                      record_vectors=args.record_vectors)
    print(format_table(result))
    if args.json_out:
        write_json(result, args.json_out)
        print(f"wrote {args.json_out}")
    return 0


def _against_reference(args: argparse.Namespace, sizes: list[int]) -> int:
    """`--against reference`: engine.eval.perf.reference; exits 2 saying why when the reference is unavailable."""
    from engine.core.clock import SystemClock
    from engine.eval.perf.reference import ReferenceUnavailable, format_reference_table, run_against_reference

    try:
        result = run_against_reference(sizes=sizes, queries=args.queries, seed=args.seed, k=args.k,
                                       python=args.reference_python, at=SystemClock().now(),
                                       other_fraction=args.other_fraction, record_vectors=args.record_vectors,
                                       progress=lambda m: print(m, file=sys.stderr, flush=True))
    except ReferenceUnavailable as exc:
        print(f"memlab bench perf --against reference: the reference is unavailable: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # the worker answered with an error (its traceback included)
        print(f"memlab bench perf --against reference: the reference worker failed: {exc}", file=sys.stderr)
        return 1
    print(format_reference_table(result))
    if args.json_out:
        write_json(result, args.json_out)
        print(f"wrote {args.json_out}")
    return 0
