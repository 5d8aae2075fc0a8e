"""Crash safety: a worker runs turns and is SIGKILLed inside an event or at random times.

The kill points are after extraction, between add_records and the cursor move, before and after
the cursor move, and during induction. After each kill the file is checked (`check_store`, no
cursor moved backwards) and the worker restarted; the final clean run must finish the pending
work, and every turn the worker acknowledged before it died must be stored.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import subprocess
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks.harness.common import REPO_ROOT, fast_config, turn_text
from engine.core.clock import VirtualClock
from engine.memory.engine import DEFAULT_START, MemoryEngine
from engine.stores.check import check_store
from engine.stores.sqlite import SQLiteStore

__all__ = ["CRASH_POINTS", "CrashReport", "crash_worker_main", "run_crash"]

#: Where a worker kills itself inside an event (env MEMLAB_CRASH_AT), see `crash_worker_main`.
CRASH_POINTS = ("after_extract", "mid_write", "before_cursor", "after_cursor", "mid_induct")


@dataclass(frozen=True, kw_only=True)
class CrashReport:
    runs: int
    kills: int
    kills_by_point: dict[str, int]
    survived: int
    acked_turns: int
    lost: int
    cursor_rewinds: int
    check_problems: list[str]
    pending_after_final: int
    final_ok: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------ the worker


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_switch(point: str, after: int) -> Callable[[str], None]:
    """`hit(name)`: SIGKILL this process on the `after`-th time the named point is reached."""
    hits: Counter[str] = Counter()

    def hit(name: str) -> None:
        if name == point:
            hits[name] += 1
            if hits[name] >= after:
                _die()

    return hit


def _install_kill_points(engine: MemoryEngine, store: SQLiteStore, hit: Callable[[str], None]) -> None:
    """Wrap the extractor and the store's writes so `hit` runs at each point of CRASH_POINTS."""
    real_extract = engine.models.extractor.extract

    class _Extractor:
        def extract(self, inp):
            out = real_extract(inp)
            hit("after_extract")
            return out

    engine.models.extractor = _Extractor()
    real_add, real_cursor, real_profile = store.add_records, store.set_cursor, store.save_profile

    def add_records(records, vectors):
        out = real_add(records, vectors)
        hit("mid_write")  # records, vectors and FTS rows written, transaction not committed
        return out

    def set_cursor(user_id, session_id, name, value):
        if name == "extract":
            hit("before_cursor")
        real_cursor(user_id, session_id, name, value)
        if name == "extract":
            hit("after_cursor")  # cursor moved inside the transaction, commit not yet done

    def save_profile(profile, history=None):
        real_profile(profile, history)
        hit("mid_induct")

    store.add_records, store.set_cursor, store.save_profile = add_records, set_cursor, save_profile
    if os.environ.get("MEMLAB_CRASH_NO_TX"):  # negative control: without transactions a kill must show
        store.transaction = lambda: nullcontext()


def _resumed_clock(store: SQLiteStore) -> VirtualClock:
    """A clock 35 s after the file's last message, so a restarted worker never goes back in time."""
    last = store.conn.execute("SELECT max(created_ts) FROM messages").fetchone()[0]
    start = DEFAULT_START if last is None else DEFAULT_START + timedelta(seconds=last - DEFAULT_START.timestamp() + 35)
    return VirtualClock(start)


def _run_acked_turns(engine: MemoryEngine, clock: VirtualClock, acks: Path, users: int, turns: int,
                     pause: float) -> None:
    """Run turns after the ones already acknowledged; fsync one JSON line per turn as it is answered."""
    done = sum(1 for _ in acks.open(encoding="utf-8")) if acks.exists() else 0
    names = [f"crash-u{u}" for u in range(users)]
    with acks.open("a", encoding="utf-8") as fh:
        for i in range(done, done + turns):
            user = names[i % len(names)]
            session = f"{user}-s{(i // 4) % 2}"
            text = turn_text(user, i)
            r = engine.turn(user, session, text)
            fh.write(json.dumps({"i": i, "user": user, "session": session, "mid": r.user_message.id, "text": text,
                                 "rid": r.reply_message.id, "reply": r.reply}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
            clock.advance(35)
            if pause:
                time.sleep(pause)


def crash_worker_main(argv: Sequence[str] | None = None) -> int:
    """A worker that runs turns on a file DB and SIGKILLs itself at MEMLAB_CRASH_AT (see CRASH_POINTS).

    Appends one JSON line per acknowledged turn to --acks (fsynced), so the harness knows what the
    engine promised before it died. MEMLAB_CRASH_AFTER=N dies on the N-th hit of the point.
    """
    ap = argparse.ArgumentParser(prog="crash-worker")
    ap.add_argument("--db", required=True)
    ap.add_argument("--acks", required=True)
    ap.add_argument("--users", type=int, default=2)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--pause", type=float, default=0.0, help="seconds between turns (random kills)")
    args = ap.parse_args(argv)
    hit = _kill_switch(os.environ.get("MEMLAB_CRASH_AT", ""), int(os.environ.get("MEMLAB_CRASH_AFTER", "1")))
    store = SQLiteStore(args.db)
    clock = _resumed_clock(store)
    engine = MemoryEngine(fast_config(), store=store, clock=clock)
    _install_kill_points(engine, store, hit)
    _run_acked_turns(engine, clock, Path(args.acks), args.users, args.turns, args.pause)
    store.close()
    return 0


# ------------------------------------------------------------------ the plan that kills it


def _snapshot_cursors(path: str) -> dict[tuple[str, str, str], int]:
    with SQLiteStore(path) as store:
        return {(u, s, n): v for u, s, n, v in store.conn.execute("SELECT user_id, session_id, name, value FROM cursors")}


def _wait_for_acks(acks: str, pid: int, timeout: float) -> None:
    """Random kills land mid-run, not during start-up: wait for the run's first acknowledged turn."""
    path = Path(acks)
    start_lines = len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text(encoding="utf-8").splitlines()) > start_lines:
            return
        try:  # peek without reaping (WNOWAIT), so the caller still collects the exit status
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        time.sleep(0.02)


def _fork_worker(argv: list[str], env: dict[str, str]) -> int:
    """Fork a child that runs the worker and never returns into the harness; the child's pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.environ.update(env)
            code = crash_worker_main(argv)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


class _CrashPlan:
    """One database, one acknowledgement file, and the tallies of a sequence of killed runs."""

    def __init__(self, workdir: str, seed: int, cmd: list[str] | None, timeout: float):
        self.rng = random.Random(seed)
        self.path = str(Path(workdir) / "crash.db")
        self.acks = str(Path(workdir) / "crash-acks.jsonl")
        self.cmd, self.timeout = cmd, timeout
        SQLiteStore(self.path).close()
        self.kills: Counter[str] = Counter()
        self.survived = self.rewinds = self.runs = 0
        self.problems: list[str] = []
        self.before = _snapshot_cursors(self.path)

    def verify(self, tag: str) -> None:
        """After a run: check the file, count cursors that moved backwards, count a clean survival."""
        with SQLiteStore(self.path) as store:
            found = check_store(store)
        self.problems.extend(f"after {tag}: {p}" for p in found)
        now = _snapshot_cursors(self.path)
        back = [k for k, v in self.before.items() if now.get(k, 0) < v]
        self.rewinds += len(back)
        self.before = now
        self.survived += int(not found and not back)

    def launch(self, point: str, after: int, n_turns: int) -> tuple[int, str]:
        """One worker run (exec'd or forked), killed at `point` ("random": by us, mid-run); (exit code, stderr)."""
        self.runs += 1
        env = {"MEMLAB_CRASH_AT": point, "MEMLAB_CRASH_AFTER": str(after)}
        argv = ["--db", self.path, "--acks", self.acks, "--turns", str(n_turns)]
        argv += ["--pause", "0.05"] if point == "random" else []
        proc = None
        if self.cmd is not None:
            proc = subprocess.Popen(self.cmd + argv, cwd=str(REPO_ROOT),
                                    env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **env},
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            pid = proc.pid
        else:
            pid = _fork_worker(argv, env)
        if point == "random":
            _wait_for_acks(self.acks, pid, self.timeout)
            time.sleep(self.rng.uniform(0.0, 0.2))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc is not None:
            _, err = proc.communicate(timeout=self.timeout)
            return proc.returncode, err.decode(errors="replace")
        _, status = os.waitpid(pid, 0)
        return (-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)), ""

    def acked_lost_pending(self) -> tuple[list[dict[str, Any]], int, int]:
        """(acknowledged turns, acknowledged messages not stored as sent, messages still pending)."""
        acked = [json.loads(line) for line in Path(self.acks).read_text(encoding="utf-8").splitlines() if line.strip()]
        lost = pending = 0
        with SQLiteStore(self.path) as store:
            for a in acked:
                got = {m.id: m.content for m in store.get_messages(a["user"], [a["mid"], a["rid"]])}
                lost += int(got.get(a["mid"]) != a["text"]) + int(got.get(a["rid"]) != a["reply"])
            # every message older than the final run's last turn in its session must now be covered
            last_turns: dict[tuple[str, str], int] = {}
            for a in acked:
                last_turns[(a["user"], a["session"])] = a["mid"]
            for (user, session), last_mid in last_turns.items():
                cursor = store.get_cursor(user, session, "extract")
                pending += len([m for m in store.messages(user, session_id=session, after_id=cursor)
                                if m.id < last_mid])
        return acked, lost, pending


def run_crash(workdir: str | Path, *, rounds: int = 1, random_kills: int = 2, turns: int = 6, seed: int = 0,
              worker: Sequence[str] | None = None, timeout: float = 90,
              points: Sequence[str] = CRASH_POINTS) -> CrashReport:
    """Kill a worker at every crash point (× rounds) and at random times; check after each kill.

    With `worker` (a command, e.g. [python, tests/crash_worker.py]) each run is a fresh process
    started by exec. Without it one warm helper process (imports and tokeniser loaded once) forks
    a child per run: a separate process with its own SQLite connection, killed the same way, but
    without paying ~2 s of interpreter start-up per kill.
    """
    if worker is not None:
        return _crash_plan(str(workdir), rounds, random_kills, turns, seed, list(worker), timeout, tuple(points))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(_crash_plan, (str(workdir), rounds, random_kills, turns, seed, None, timeout, tuple(points)))


def _crash_plan(workdir: str, rounds: int, random_kills: int, turns: int, seed: int, cmd: list[str] | None,
                timeout: float, points: tuple[str, ...]) -> CrashReport:
    plan = _CrashPlan(workdir, seed, cmd, timeout)
    if cmd is None:
        MemoryEngine(fast_config()).turn("warm-up", "w", turn_text("warm-up", 0))  # load once, fork many
    schedule = [(p, 1 + (r % 2)) for r in range(rounds) for p in points] + [("random", 0)] * random_kills
    for point, after in schedule:
        code, err = plan.launch(point, after, turns)
        if code == -signal.SIGKILL:
            plan.kills[point] += 1
        elif code != 0:
            plan.problems.append(f"worker at {point} exited {code}: {err.strip()[-300:]}")
        plan.verify(point)
    code, err = plan.launch("", 1, 4)  # the final clean run must finish the pending work
    if code:
        plan.problems.append(f"final run exited {code}: {err.strip()[-300:]}")
    plan.verify("final run")
    acked, lost, pending_after = plan.acked_lost_pending()
    total_kills = sum(plan.kills.values())
    return CrashReport(runs=plan.runs, kills=total_kills, kills_by_point=dict(plan.kills),
                       survived=min(plan.survived, total_kills), acked_turns=len(acked), lost=lost,
                       cursor_rewinds=plan.rewinds, check_problems=plan.problems, pending_after_final=pending_after,
                       final_ok=code == 0 and pending_after == 0 and not plan.problems)
