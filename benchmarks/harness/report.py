"""Reliability report: every harness at one size (`--quick` for CI, ≤ 60 s; `--full` for the
documented long run), one printed line or block per section, and the figures as JSON (`--json OUT`).

Sections: concurrency, concurrent CLI replays (full only), crash kills, faults, hostile input,
the frozen wall clock, and the soak. The run fails (exit 1) on any lost message, any cross-user
read, or any problem a section reports.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness.clock import run_clock
from benchmarks.harness.concurrency import run_cli_replays, run_concurrency
from benchmarks.harness.crash import crash_worker_main, run_crash
from benchmarks.harness.faults import run_faults
from benchmarks.harness.hostile import run_hostile
from benchmarks.harness.soak import run_soak

__all__ = ["Section", "SECTIONS", "reliability_main"]


@dataclass(frozen=True, kw_only=True)
class Section:
    """One harness's part of the report: its JSON figures, printed lines, problems and the two zeros."""

    key: str
    data: dict[str, Any]
    lines: list[str]
    problems: list[str] = field(default_factory=list)
    lost: int = 0
    cross_user_reads: int = 0


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - t, 2)


def concurrency_section(work: Path, full: bool) -> list[Section]:
    sizes = dict(processes=4, threads=3, users_per_thread=3, sessions=3, turns=25) if full else \
        dict(processes=2, threads=2, users_per_thread=2, sessions=2, turns=5)
    conc, wall = _timed(lambda: run_concurrency(work, **sizes))
    line = (f"concurrency: {conc.processes} processes × {conc.threads} threads, {conc.users} users × "
            f"{conc.sessions} sessions, {conc.turns} turns held in {conc.seconds:.1f} s = "
            f"{conc.ops_per_second:.1f} turns/s ({conc.events_fired} events); lost {conc.lost}, cross-user reads "
            f"{conc.cross_user_reads}, busy retries {conc.busy_retries}, check problems {len(conc.check_problems)}")
    return [Section(key="concurrency", data={**conc.to_dict(), "wall_seconds": wall}, lines=[line],
                    problems=conc.check_problems + conc.errors, lost=conc.lost, cross_user_reads=conc.cross_user_reads)]


def cli_replays_section(work: Path, full: bool) -> list[Section]:
    if not full:
        return []
    replays = run_cli_replays(work)
    line = (f"cli replays: {replays['replays']} concurrent `memlab replay --db`, exit codes "
            f"{replays['exit_codes']}, missing messages {replays['missing_messages']}, "
            f"other users' events in the JSON reports {replays['foreign_events_in_reports']}, "
            f"check problems {len(replays['check_problems'])}")
    problems = list(replays["check_problems"] or [])
    if replays["missing_messages"] or any(replays["exit_codes"]):
        problems.append(f"cli replays: exit codes {replays['exit_codes']}, missing {replays['missing_messages']}")
    if replays["foreign_events_in_reports"]:
        problems.append(f"cli replays: {replays['foreign_events_in_reports']} events of other users in a replay's "
                        "JSON report (engine.eval.scenario.replay must filter the store's events by user)")
    return [Section(key="cli_replays", data=replays, lines=[line], problems=problems)]


def crash_section(work: Path, full: bool) -> list[Section]:
    crash, wall = _timed(lambda: run_crash(work, rounds=3 if full else 1, random_kills=10 if full else 2,
                                           turns=6 if full else 4))
    points = ", ".join(f"{k} {v}" for k, v in sorted(crash.kills_by_point.items()))
    line = (f"crash: {crash.kills} SIGKILLs ({points}), survived {crash.survived}; acked turns {crash.acked_turns}, "
            f"lost {crash.lost}, cursor rewinds {crash.cursor_rewinds}, pending after the final run "
            f"{crash.pending_after_final}")
    return [Section(key="crash", data={**crash.to_dict(), "wall_seconds": wall}, lines=[line],
                    problems=crash.check_problems, lost=crash.lost)]


def faults_section(work: Path, full: bool) -> list[Section]:
    faults, wall = _timed(lambda: run_faults(work))
    lines = [f"faults: {faults.total} injected, {sum(faults.handled.values())} handled cleanly; lost {faults.lost}"]
    lines += [f"   {kind:<30} {faults.handled.get(kind, 0)}/{n}" for kind, n in sorted(faults.injected.items())]
    return [Section(key="faults", data={**faults.to_dict(), "wall_seconds": wall}, lines=lines,
                    problems=faults.failures, lost=faults.lost)]


def hostile_section(work: Path, full: bool) -> list[Section]:
    hostile, wall = _timed(lambda: run_hostile(400 if full else 25, big=full))
    tried = ", ".join(f"{k} {v}" for k, v in sorted(hostile.tried.items()))
    line = (f"hostile inputs: {hostile.total} tried ({tried}); {hostile.usage_errors} clear usage errors, "
            f"{len(hostile.failures)} other exceptions")
    return [Section(key="hostile", data={**hostile.to_dict(), "wall_seconds": wall}, lines=[line],
                    problems=hostile.failures)]


def clock_section(work: Path, full: bool) -> list[Section]:
    clock, wall = _timed(run_clock)
    n = len(clock.scenarios)
    line = (f"clock: {n} scripted replays under a frozen wall clock moved {clock.wall_jumps} times "
            f"({clock.backwards_jumps} backwards, 1970 to 2300): event logs byte-identical "
            f"{sum(clock.log_identical.values())}/{n} ({sum(clock.events.values())} events), probes identical "
            f"{sum(clock.probes_identical.values())}/{n}, wall clock followed {clock.wall_followed}; "
            f"negative control caught {clock.negative_control_caught} ({clock.negative_control})")
    problems = [] if clock.ok else [f"clock: the event log depends on the wall clock: {clock.to_dict()}"]
    return [Section(key="clock", data={**clock.to_dict(), "wall_seconds": wall}, lines=[line], problems=problems)]


def soak_section(work: Path, full: bool) -> list[Section]:
    turns, users = (10_000, 1_000) if full else (500, 100)
    soak, wall = _timed(lambda: run_soak(turns, users, workdir=work, sample_every=1_000 if full else 100,
                                         fresh_process=True))
    lines = [f"soak: {soak.turns} turns over {soak.users} users in one fresh process ({soak.store} SQLite), "
             f"{soak.turns_per_second:.1f} turns/s, {soak.events_fired} events; lost {soak.lost}; RSS "
             f"{soak.rss_start_mb:.1f} → {soak.rss_end_mb:.1f} MB (peak {soak.rss_peak_mb:.1f}, "
             f"{soak.rss_growth_mb:+.1f}; SQLite page cache may hold up to {soak.sqlite_page_cache_cap_mb} MB), "
             f"gc objects {soak.gc_objects_start} → {soak.gc_objects_end}; in-process structures (start → end):"]
    lines += [f"   {name:<45} {soak.structures_start.get(name, 0)} → {end}"
              for name, end in sorted(soak.structures_end.items())]
    problems = [f"soak: {soak.lost} messages lost"] if soak.lost else []
    return [Section(key="soak", data={**soak.to_dict(), "wall_seconds": wall}, lines=lines, problems=problems,
                    lost=soak.lost)]


def _forget_leaves_no_byte(path: Path, user: str, marker: str) -> tuple[int, bool]:
    """`memlab forget` on a replayed database: (exit code, whether any byte of the marker is left)."""
    import subprocess
    import sys

    from benchmarks.harness.common import REPO_ROOT

    code = subprocess.run([sys.executable, "-m", "engine.cli", "forget", "--db", str(path), "--user", user],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120).returncode
    left = any(marker.encode() in f.read_bytes() for f in (path, Path(f"{path}-wal")) if f.exists())
    return code, left


def migrations_section(work: Path, full: bool) -> list[Section]:
    from benchmarks.harness.migrations import (
        run_concurrent_open,
        run_concurrent_replays,
        run_migration_kill,
        run_newer_version_refused,
        run_upgrade_from_previous,
    )

    rounds = 20 if full else 3
    opens = [run_concurrent_open(work / f"open-{n}", processes=n, rounds=rounds) for n in (2, 4, 8)]
    kill, upgrade, refusal = (run_migration_kill(work / "kill"), run_upgrade_from_previous(work / "upgrade"),
                              run_newer_version_refused(work / "newer"))
    replays = []
    for n in (2, 8):
        rep = run_concurrent_replays(work / f"replays-{n}", processes=n)
        code, left = _forget_leaves_no_byte(work / f"replays-{n}" / f"replays-{n}.db", "alice", "Mingxuan")
        replays.append((rep, code, left))
    lines = [f"concurrent first open: {o.processes} processes × {o.rounds} rounds, {o.opened}/{o.opens} opened, "
             f"median {o.open_ms_median:.1f} ms, max {o.open_ms_max:.1f} ms; lost {o.messages_lost}, failures "
             f"{len(o.failures)}" for o in opens]
    lines.append(f"kill inside a migration: {kill.killed} kills, old version kept {kill.old_version_kept}, "
                 f"completed on reopen {kill.completed_on_reopen}; rows lost {kill.rows_lost}")
    lines.append(f"upgrade from versions {upgrade.from_versions} to {upgrade.to_version}: {upgrade.rows_written} rows, "
                 f"lost {upgrade.rows_lost}; newer file refused {refusal.refused} ({refusal.message[:80]}…)")
    lines += [f"{r.processes} concurrent `memlab replay --db NEWFILE`: exit codes {r.exit_codes}, check exit "
              f"{r.check_exit}; forget exit {code}, forgotten user's facts left in the file: {left}"
              for r, code, left in replays]
    problems = [f for o in opens for f in o.failures] + kill.failures + upgrade.failures
    problems += [f"concurrent replays ({r.processes}): {r.errors or r.exit_codes}" for r, _, _ in replays
                 if any(r.exit_codes) or r.check_exit]
    problems += ["forget left the user's facts in the file" for _, _, left in replays if left]
    if not refusal.refused:
        problems.append("a newer schema was not refused")
    lost = sum(o.messages_lost + o.old_rows_lost for o in opens) + kill.rows_lost + upgrade.rows_lost
    data = {"concurrent_open": [o.to_dict() for o in opens], "kill": kill.to_dict(), "upgrade": upgrade.to_dict(),
            "refusal": refusal.to_dict(), "replays": [{**r.to_dict(), "forget_exit": c, "facts_left": left}
                                                       for r, c, left in replays]}
    return [Section(key="migrations", data=data, lines=lines, problems=problems, lost=lost)]


#: The report's sections, in order; each takes (a scratch directory, full?) and returns its sections.
SECTIONS: tuple[Callable[[Path, bool], list[Section]], ...] = (
    concurrency_section, cli_replays_section, migrations_section, crash_section, faults_section, hostile_section,
    clock_section, soak_section,
)


def _parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    ap = argparse.ArgumentParser(prog="memlab reliability", description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="CI size, finishes in under a minute (default)")
    mode.add_argument("--full", action="store_true", help="the long run documented in the README")
    ap.add_argument("--json", default=None, metavar="OUT")
    ap.add_argument("--crash-worker", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_known_args(argv)


def run_sections(work: Path, full: bool,
                 sections: Sequence[Callable[[Path, bool], list[Section]]] = SECTIONS) -> dict[str, Any]:
    """Run each section, printing its lines as it finishes; the JSON document with a summary."""
    t_all = time.perf_counter()
    out: dict[str, Any] = {"mode": "full" if full else "quick"}
    problems: list[str] = []
    lost = cross = 0
    for make in sections:
        for s in make(work, full):
            out[s.key] = s.data
            print("\n".join(s.lines), flush=True)
            problems += s.problems
            lost += s.lost
            cross += s.cross_user_reads
    out["summary"] = {"messages_lost": lost, "cross_user_reads": cross, "problems": problems,
                      "seconds": round(time.perf_counter() - t_all, 2)}
    print(f"messages lost: {lost} (must be 0); cross-user reads: {cross} (must be 0); "
          f"problems: {len(problems)}; {out['summary']['seconds']:.1f} s")
    for p in problems:
        print(f"  - {p}")
    return out


def reliability_main(argv: Sequence[str] | None = None) -> int:
    """`python benchmarks/reliability.py [--quick|--full] [--json OUT]`: run every harness, print figures."""
    args, rest = _parse(argv)
    if args.crash_worker:
        return crash_worker_main(rest)
    work = Path(tempfile.mkdtemp(prefix="memlab-reliability-"))
    try:
        out = run_sections(work, args.full)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, ensure_ascii=False), encoding="utf-8")
        print(f"wrote {args.json}")
    s = out["summary"]
    return 0 if s["messages_lost"] == 0 and s["cross_user_reads"] == 0 and not s["problems"] else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(reliability_main())
