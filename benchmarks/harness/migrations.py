"""Migration and first-open harness: concurrent creation, kills inside a migration, upgrades, refusals.

Each function proves one property of opening a database and returns a small report (counts and
failures, `to_dict()`); tests/test_store_migrations.py calls them with small sizes, and the
reliability report can call them with large ones.

- `run_concurrent_open`: N spawned processes (x threads) open one fresh file at the same instant
  (a barrier releases them), round after round; each then writes and reads. Every open must
  succeed, every write be found, and `memlab check` pass on every file.
- `run_migration_kill`: a process is SIGKILLed inside a migration step (the test hook
  MEMLAB_MIGRATION_PAUSE stops it after a chosen statement); the file must still be at the old
  version with its rows, and a reopen must finish the upgrade keeping every row.
- `run_upgrade_from_previous`: a file written at an earlier schema version (its DDL, then rows
  inserted as that version stored them: benchmarks/harness/schema_sample.py) is opened by the
  current code; every row must be kept.
- `run_newer_version_refused`: a file from a newer schema is refused with a message that says
  to upgrade memlab, and is left untouched.
- `run_concurrent_replays`: N `python -m engine.cli replay SCENARIO --db NEWFILE` at once, then
  `python -m engine.cli check --db NEWFILE`.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.schema_sample import (
    DIM,
    T0,
    Sample,
    build_at_version,
    compare_sample,
)

__all__ = [
    "ConcurrentOpenReport",
    "KillReport",
    "RefusalReport",
    "ReplayReport",
    "UpgradeReport",
    "build_at_version",
    "compare_sample",
    "default_kill_points",
    "run_concurrent_open",
    "run_concurrent_replays",
    "run_migration_kill",
    "run_newer_version_refused",
    "run_upgrade_from_previous",
    "statement_counts",
]

REPO_ROOT = Path(__file__).resolve().parents[2]


def _child_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "MEMLAB_FORBID_REAL_MODELS": "1", "HF_HUB_OFFLINE": "1"}
    return env | extra


# -- concurrent first open ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ConcurrentOpenReport:
    from_version: int
    processes: int
    threads: int
    rounds: int
    opens: int
    opened: int
    messages_lost: int
    old_rows_lost: int
    check_problems: list[str]
    failures: list[str]
    open_ms_median: float
    open_ms_max: float
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _open_and_use(path: str, user: str, session: str, content: str, seed: int) -> float:
    """Open the store (timed), write a message and a record, read both back; returns the open time in ms."""
    from engine.core.records import MemoryRecord, Message
    from engine.stores.sqlite import SQLiteStore

    t0 = time.perf_counter()
    store = SQLiteStore(path, dim=DIM)
    opened_ms = (time.perf_counter() - t0) * 1000
    try:
        m = store.add_message(Message(user_id=user, session_id=session, role="user", content=content, created_at=T0))
        vec = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        (r,) = store.add_records([MemoryRecord(user_id=user, content=content, created_at=T0)], [vec])
        if m.id not in {x.id for x in store.messages(user, session_id=session)}:
            raise AssertionError(f"message {m.id} written but not read back")
        if store.search_dense(user, vec, k=1)[0][0] != r.id:
            raise AssertionError(f"record {r.id} written but not found by its own vector")
    finally:
        store.close()
    return opened_ms


def _open_worker(workdir: str, worker: int, threads: int, rounds: int, barrier: Any, results: Any) -> None:
    """One spawned process: each round, wait for the others, then open the round's file from `threads` threads."""
    for rnd in range(rounds):
        path = str(Path(workdir) / f"open-{rnd}.db")
        try:
            barrier.wait(timeout=120)
        except Exception as exc:  # noqa: BLE001 - a broken barrier is reported, not raised
            results.put((rnd, worker, -1, f"barrier: {exc!r}", 0.0))
            return
        gate = threading.Barrier(threads)
        out: list[tuple] = []

        def job(t: int, rnd: int = rnd, path: str = path, gate: threading.Barrier = gate, out: list = out) -> None:
            gate.wait()
            user, content = f"w{worker}", f"round {rnd} worker {worker} thread {t}"
            try:
                out.append((rnd, worker, t, None, _open_and_use(path, user, f"t{t}", content, rnd * 1000 + worker * 10 + t)))
            except Exception as exc:  # noqa: BLE001 - every failure is counted by the parent
                out.append((rnd, worker, t, f"{type(exc).__name__}: {exc}", 0.0))

        pool = [threading.Thread(target=job, args=(t,)) for t in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        for item in out:
            results.put(item)


def _verify_round(path: str, processes: int, threads: int, rnd: int, sample: Sample | None) -> tuple[int, list, list]:
    """(openers' messages lost, old rows lost, check problems) of one round's file."""
    from engine.stores.check import check_store
    from engine.stores.sqlite import SCHEMA_VERSION, SQLiteStore

    with SQLiteStore(path, dim=DIM) as store:
        lost = 0
        for w in range(processes):
            found = {m.content for m in store.messages(f"w{w}")}
            lost += sum(f"round {rnd} worker {w} thread {t}" not in found for t in range(threads))
        old = [f"round {rnd}: {d}" for d in (compare_sample(store, sample) if sample else [])]
        problems = [f"round {rnd}: {p}" for p in check_store(store)]
        if store.schema_version != SCHEMA_VERSION:
            problems.append(f"round {rnd}: the file is at schema {store.schema_version}, not {SCHEMA_VERSION}")
        return lost, old, problems


def run_concurrent_open(workdir: str | Path, *, processes: int = 4, threads: int = 1, rounds: int = 5,
                        from_version: int | None = None, timeout: float = 300) -> ConcurrentOpenReport:
    """`processes` spawned processes x `threads` threads open one file at once, `rounds` times.

    The file is new, or with `from_version` a file written at that schema version with rows
    (build_at_version), which the openers upgrade at once, keeping every row.
    """
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    samples = {rnd: build_at_version(str(work / f"open-{rnd}.db"), from_version) if from_version else None
               for rnd in range(rounds)}  # fmt: skip
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    t0 = time.perf_counter()
    procs = [ctx.Process(target=_open_worker, args=(str(work), w, threads, rounds, barrier, results))
             for w in range(processes)]  # fmt: skip
    for p in procs:
        p.start()
    got, failures = [], []
    deadline = time.monotonic() + timeout
    while len(got) < processes * threads * rounds and time.monotonic() < deadline:
        try:
            got.append(results.get(timeout=0.5))
        except Exception:  # noqa: BLE001 - queue.Empty: stop once every worker is gone
            if not any(p.is_alive() for p in procs):
                break
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
            p.join()
        if p.exitcode != 0:
            failures.append(f"worker process exited with {p.exitcode}")
    failures += [f"round {r} worker {w} thread {t}: {err}" for r, w, t, err, _ in got if err]
    lost, old_lost, problems = 0, [], []
    for rnd in range(rounds):
        n, old, probs = _verify_round(str(work / f"open-{rnd}.db"), processes, threads, rnd, samples[rnd])
        lost, old_lost, problems = lost + n, old_lost + old, problems + probs
    failures += old_lost
    times = [ms for *_, err, ms in got if not err] or [0.0]
    return ConcurrentOpenReport(
        from_version=from_version or 0, processes=processes, threads=threads, rounds=rounds, opens=processes * threads * rounds,
        opened=sum(1 for *_, err, _ms in got if not err), messages_lost=lost, old_rows_lost=len(old_lost),
        check_problems=problems,
        failures=failures, open_ms_median=round(statistics.median(times), 2), open_ms_max=round(max(times), 2),
        seconds=round(time.perf_counter() - t0, 2),
    )  # fmt: skip


# -- SIGKILL inside a migration ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class KillReport:
    points: list[str]
    killed: int
    old_version_kept: int
    completed_on_reopen: int
    rows_written: int
    rows_lost: int
    check_problems: list[str]
    failures: list[str]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def statement_counts() -> dict[int, int]:
    """How many statements each SQLite migration runs (counted by running them on a scratch database)."""
    import engine.stores.migrate as migrate_module
    from engine.stores.sqlite.driver import connect
    from engine.stores.sqlite.migrations import migrate

    counts: dict[int, int] = {}
    real = migrate_module.pause_point

    def count(version: int, index: int) -> None:
        counts[version] = max(counts.get(version, 0), index)

    migrate_module.pause_point = count
    conn = connect(":memory:")
    try:
        migrate(conn, dim=DIM, embedder_name="hash", where="scratch")
    finally:
        migrate_module.pause_point = real
        conn.close()
    return counts


def default_kill_points() -> list[tuple[int, int]]:
    """Every migration at its first, middle and last statement (version, statements run before the kill)."""
    points = []
    for version, n in sorted(statement_counts().items()):
        points += sorted({(version, 1), (version, max(1, n // 2)), (version, n)})
    return points


def _kill_at(path: str, version: int, index: int, timeout: float) -> str | None:
    """Open `path` in a child paused after statement `index` of migration `version`; SIGKILL it there."""
    code = "import sys; from engine.stores.sqlite import SQLiteStore; SQLiteStore(sys.argv[1], dim=int(sys.argv[2]))"
    proc = subprocess.Popen([sys.executable, "-c", code, path, str(DIM)], cwd=str(REPO_ROOT), text=True,
                            env=_child_env(MEMLAB_MIGRATION_PAUSE=f"{version}:{index}"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if f"migration {version} paused after statement {index}" in line:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return None
        proc.wait()
        return f"migration {version}:{index}: the child never paused (exit {proc.returncode}): {''.join(lines)[-300:]}"
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def _file_version(path: str) -> int:
    from engine.stores.sqlite.driver import connect

    conn = connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def run_migration_kill(workdir: str | Path, *, points: Sequence[tuple[int, int]] | None = None,
                       timeout: float = 60) -> KillReport:
    """For each (version, statement): a file at version-1 with rows, killed inside that migration, reopened."""
    from engine.stores.check import check_store
    from engine.stores.sqlite import SCHEMA_VERSION, SQLiteStore

    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    points = list(points or default_kill_points())
    t0 = time.perf_counter()
    killed = kept = completed = written = lost = 0
    failures: list[str] = []
    problems: list[str] = []
    for version, index in points:
        path = str(work / f"kill-{version}-{index}.db")
        sample = build_at_version(path, version - 1) if version > 1 else None
        written += sample.rows() if sample else 0
        error = _kill_at(path, version, index, timeout)
        if error:
            failures.append(error)
            continue
        killed += 1
        if _file_version(path) == version - 1:
            kept += 1
        else:
            failures.append(f"migration {version}:{index}: after the kill the file is at {_file_version(path)}")
        with SQLiteStore(path, dim=DIM) as store:
            completed += store.schema_version == SCHEMA_VERSION
            diffs = compare_sample(store, sample) if sample else []
            lost += len(diffs)
            failures += [f"migration {version}:{index}: {d}" for d in diffs]
            problems += [f"migration {version}:{index}: {p}" for p in check_store(store)]
    return KillReport(points=[f"{v}:{i}" for v, i in points], killed=killed, old_version_kept=kept,
                      completed_on_reopen=completed, rows_written=written, rows_lost=lost,
                      check_problems=problems, failures=failures, seconds=round(time.perf_counter() - t0, 2))


# -- upgrades and refusals ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class UpgradeReport:
    from_versions: list[int]
    to_version: int
    rows_written: int
    rows_lost: int
    check_problems: list[str]
    failures: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_upgrade_from_previous(workdir: str | Path, *, versions: Sequence[int] | None = None, users: int = 3,
                              sessions: int = 2, per_session: int = 4, records: int = 4) -> UpgradeReport:
    """Files written at earlier schema versions (default: the previous one), opened by this code."""
    from engine.core.records import Message
    from engine.stores.check import check_store
    from engine.stores.sqlite import SCHEMA_VERSION, SQLiteStore

    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    versions = list(versions or [SCHEMA_VERSION - 1])
    written = lost = 0
    failures: list[str] = []
    problems: list[str] = []
    for version in versions:
        path = str(work / f"upgrade-from-{version}.db")
        sample = build_at_version(path, version, users=users, sessions=sessions, per_session=per_session,
                                  records=records)  # fmt: skip
        written += sample.rows()
        with SQLiteStore(path, dim=DIM) as store:
            if store.schema_version != SCHEMA_VERSION:
                failures.append(f"from {version}: opened at {store.schema_version}, not {SCHEMA_VERSION}")
            diffs = compare_sample(store, sample)
            lost += len(diffs)
            failures += [f"from {version}: {d}" for d in diffs]
            problems += [f"from {version}: {p}" for p in check_store(store)]
            m = store.add_message(Message(user_id="user0", session_id="s0", role="user", content="after", created_at=T0))
            if store.pending_sessions("user0") != ["s0"] or store.messages("user0", newest_first=True, limit=1)[0] != m:
                failures.append(f"from {version}: a write after the upgrade is not read back as the newest")
    return UpgradeReport(from_versions=versions, to_version=SCHEMA_VERSION, rows_written=written, rows_lost=lost,
                         check_problems=problems, failures=failures)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class RefusalReport:
    file_version: int
    known_version: int
    refused: bool
    message: str
    says_upgrade: bool
    file_untouched: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_newer_version_refused(workdir: str | Path) -> RefusalReport:
    """A file whose schema is newer than this code is refused, clearly, and not modified."""
    from engine.core.errors import StoreError
    from engine.core.records import Message
    from engine.stores.sqlite import SCHEMA_VERSION, SQLiteStore
    from engine.stores.sqlite.driver import connect

    path = str(Path(workdir) / "newer.db")
    Path(workdir).mkdir(parents=True, exist_ok=True)
    with SQLiteStore(path, dim=DIM) as store:
        store.add_message(Message(user_id="u", session_id="s", role="user", content="kept", created_at=T0))
    conn = connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = Path(path).read_bytes()
    message, refused = "", False
    try:
        SQLiteStore(path, dim=DIM).close()
    except StoreError as exc:
        refused, message = True, str(exc)
    expected = f"written by memlab schema {SCHEMA_VERSION + 1}, this memlab knows up to {SCHEMA_VERSION}; upgrade memlab"
    return RefusalReport(file_version=SCHEMA_VERSION + 1, known_version=SCHEMA_VERSION, refused=refused,
                         message=message, says_upgrade=expected in message,
                         file_untouched=Path(path).read_bytes() == before and _file_version(path) == SCHEMA_VERSION + 1)


# -- concurrent replays through the CLI ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ReplayReport:
    processes: int
    exit_codes: list[int]
    errors: list[str]
    check_exit: int
    check_output: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_concurrent_replays(workdir: str | Path, *, processes: int = 2, scenario: str = "needle-basic.yaml",
                           timeout: float = 300) -> ReplayReport:
    """`processes` x `python -m engine.cli replay SCENARIO --db NEWFILE` at once, then `check --db NEWFILE`."""
    path = Path(workdir) / f"replays-{processes}.db"
    Path(workdir).mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "engine.cli", "replay", str(REPO_ROOT / "scenarios" / scenario), "--db", str(path)]
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd, cwd=str(REPO_ROOT), env=_child_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(processes)]  # fmt: skip
    codes, errors = [], []
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        codes.append(p.returncode)
        if p.returncode:
            errors.append((err.strip().splitlines() or ["(no output)"])[-1])
    check = subprocess.run([sys.executable, "-m", "engine.cli", "check", "--db", str(path)], cwd=str(REPO_ROOT),
                           env=_child_env(), capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip
    return ReplayReport(processes=processes, exit_codes=codes, errors=errors, check_exit=check.returncode,
                        check_output=(check.stdout + check.stderr).strip()[-500:],
                        seconds=round(time.perf_counter() - t0, 2))
