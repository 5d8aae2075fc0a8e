"""Concurrency: many processes × threads writing ONE SQLite file, concurrent CLI replays, and a probe
that searches every user's partition for every other user's facts.

Each thread has its own engine, connection and clock; many users and sessions; an event every
turn. Afterwards every acknowledged message is present, `check_store` finds nothing wrong, and no
search of one user returns another user's record.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.common import REPO_ROOT, fast_config, turn_text, user_marker
from engine.core.clock import VirtualClock
from engine.core.errors import StoreError
from engine.eval.scenario import load_scenario
from engine.memory.engine import DEFAULT_START, MemoryEngine
from engine.roles.embeddings import HashEmbeddings
from engine.stores.check import check_store
from engine.stores.sqlite import SQLiteStore

__all__ = ["ConcurrencyReport", "run_concurrency", "run_cli_replays", "cross_user_probe"]


@dataclass(frozen=True, kw_only=True)
class ConcurrencyReport:
    processes: int
    threads: int
    users: int
    sessions: int
    turns: int
    seconds: float
    ops_per_second: float
    messages_expected: int
    messages_found: int
    lost: int
    cross_user_reads: int
    events_fired: int
    busy_retries: int
    errors: list[str]
    check_problems: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _turn_with_retries(engine: MemoryEngine, user: str, session: str, text: str, retries: int,
                       errors: list[str], label: str) -> tuple[Any, int]:
    """One turn; a StoreError (locked past busy_timeout) is retried with back-off, at most `retries` times.

    Returns (the TurnResult or None when every attempt failed, the number of busy failures)."""
    busy = 0
    for attempt in range(retries + 1):
        try:
            return engine.turn(user, session, text), busy
        except StoreError as exc:
            busy += 1
            if attempt == retries:
                errors.append(f"{label}: {exc}")
            else:
                time.sleep(0.05 * (attempt + 1))
    return None, busy


def _foreign_reads(store: SQLiteStore, user: str, r: Any) -> int:
    """Records a turn of `user` saw that are not `user`'s: by user_id, and by id through the store."""
    seen = list(r.prompt.record_ids) + (list(r.retrieval.records) if r.retrieval else [])
    cross = sum(1 for rec in r.retrieval.records.values() if rec.user_id != user) if r.retrieval else 0
    return cross + len(set(seen) - {rec.id for rec in store.get_records(user, seen)})


def _thread_job(path: str, users: list[str], sessions: int, turns: int, retries: int) -> dict[str, Any]:
    """One writer: its own engine, connection and clock; returns what it was acknowledged."""
    clock = VirtualClock(DEFAULT_START)
    store = SQLiteStore(path)
    engine = MemoryEngine(fast_config(), store=store, clock=clock)
    acked: list[tuple[str, str, int, str, int, str]] = []
    cross = fired = busy = 0
    errors: list[str] = []
    try:
        for i in range(turns):
            for user in users:
                session = f"{user}-s{(i // 3) % sessions}"
                text = turn_text(user, i)
                r, n_busy = _turn_with_retries(engine, user, session, text, retries, errors, f"{user} turn {i}")
                busy += n_busy
                if r is None:
                    continue
                fired += int(r.event_fired)
                cross += _foreign_reads(store, user, r)
                acked.append((user, session, r.user_message.id, text, r.reply_message.id, r.reply))
                clock.advance(35)
    finally:
        store.close()
    return {"acked": acked, "cross": cross, "fired": fired, "busy": busy, "errors": errors}


def _process_job(path: str, proc: int, threads: int, users_per_thread: int, sessions: int, turns: int,
                 retries: int) -> dict[str, Any]:
    """One spawned process: `threads` writers, each with its own users; their results summed."""
    MemoryEngine(fast_config()).turn("warm-up", "w", turn_text("warm-up", 0))  # imports, jieba: not the figure
    t0 = time.time()
    jobs = [[f"p{proc}t{t}u{u}" for u in range(users_per_thread)] for t in range(threads)]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        results = list(pool.map(lambda us: _thread_job(path, us, sessions, turns, retries), jobs))
    out: dict[str, Any] = {"acked": [], "cross": 0, "fired": 0, "busy": 0, "errors": [], "t0": t0, "t1": time.time()}
    for r in results:
        out["acked"] += r["acked"]
        for k in ("cross", "fired", "busy"):
            out[k] += r[k]
        out["errors"] += r["errors"]
    return out


def cross_user_probe(store: Any, users: Sequence[str], *, engine: Any = None) -> int:
    """Search every user's partition for every other user's marker and vectors; count foreign hits."""
    emb = HashEmbeddings(store.dim)
    leaks = 0
    for user in users:
        own = {r.id for r in store.records(user, include_invalid=True)}
        for other in users:
            if other == user:
                continue
            marker = user_marker(other)
            hits = [rid for rid, _ in store.search_bm25(user, f"account tag {marker}", k=50, include_invalid=True)]
            hits += [rid for rid, _ in store.search_dense(user, emb.embed_query(f"account tag {marker}"), k=50,
                                                          include_invalid=True)]
            leaks += sum(1 for rid in hits if rid not in own)
            if engine is not None:
                got = engine.retrieve(user, f"what is the account tag {marker}?")
                leaks += sum(1 for r in got.records.values() if r.user_id != user)
    return leaks


def run_concurrency(workdir: str | Path, *, processes: int = 3, threads: int = 2, users_per_thread: int = 2,
                    sessions: int = 2, turns: int = 10, retries: int = 3) -> ConcurrencyReport:
    """Many processes and threads writing one SQLite file; verify nothing lost and nothing leaked."""
    path = str(Path(workdir) / "concurrent.db")
    SQLiteStore(path).close()  # create the schema once, before the writers race
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(processes) as pool:
        results = pool.starmap(_process_job, [(path, p, threads, users_per_thread, sessions, turns, retries)
                                              for p in range(processes)])
    acked = [a for r in results for a in r["acked"]]
    seconds = max(r["t1"] for r in results) - min(r["t0"] for r in results)
    store = SQLiteStore(path)
    try:
        found = 0
        for user, _session, mid, text, rid, reply in acked:
            got = {m.id: m.content for m in store.get_messages(user, [mid, rid])}
            found += int(got.get(mid) == text) + int(got.get(rid) == reply)
        users = sorted({a[0] for a in acked})
        engine = MemoryEngine(fast_config(), store=store)
        cross = sum(r["cross"] for r in results) + cross_user_probe(store, users, engine=engine)
        problems = check_store(store)
    finally:
        store.close()
    return ConcurrencyReport(
        processes=processes, threads=threads, users=processes * threads * users_per_thread, sessions=sessions,
        turns=len(acked), seconds=round(seconds, 3), ops_per_second=round(len(acked) / max(seconds, 1e-9), 2),
        messages_expected=2 * len(acked), messages_found=found, lost=2 * len(acked) - found, cross_user_reads=cross,
        events_fired=sum(r["fired"] for r in results), busy_retries=sum(r["busy"] for r in results),
        errors=[e for r in results for e in r["errors"]], check_problems=problems,
    )


def _start_replay(workdir: Path, name: str, path: str) -> tuple[str, Path, subprocess.Popen]:
    out = workdir / f"{Path(name).stem}.json"
    cmd = [sys.executable, "-m", "engine.cli", "replay", str(REPO_ROOT / "scenarios" / name), "--db", path,
           "--json", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return name, out, subprocess.Popen(cmd, cwd=str(REPO_ROOT), env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)


def _replay_findings(store: SQLiteStore, name: str, out: Path) -> tuple[int, int]:
    """(the scenario's user messages missing from the store, other users' events in its JSON report)."""
    sc = load_scenario(REPO_ROOT / "scenarios" / name)
    texts = [t.text for t in sc.turns if t.text is not None] + [p.ask for p in sc.probes]
    stored = [m.content for u in sc.users for m in store.messages(u) if m.role == "user"]
    missing = sum(1 for t in texts if t not in stored)
    foreign = 0
    if out.exists():
        doc = json.loads(out.read_text(encoding="utf-8"))
        foreign = sum(1 for e in doc.get("event_log", []) if e.get("user_id") not in sc.users) + sum(
            1 for e in doc.get("events", []) if e.get("user") not in sc.users)
    return missing, foreign


def run_cli_replays(workdir: str | Path, scenarios: Sequence[str] = ("needle-basic.yaml", "assistant-recall.yaml"),
                    timeout: float = 120) -> dict[str, Any]:
    """Two `memlab replay … --db PATH` processes at once on one file; both must succeed, check clean."""
    path = str(Path(workdir) / "replays.db")
    SQLiteStore(path).close()
    procs = [_start_replay(Path(workdir), name, path) for name in scenarios]
    report: dict[str, Any] = {"replays": len(procs), "exit_codes": [], "stderr": [], "missing_messages": 0,
                              "foreign_events_in_reports": 0}
    for _name, _out, p in procs:
        _, err = p.communicate(timeout=timeout)
        report["exit_codes"].append(p.returncode)
        if p.returncode:
            report["stderr"].append(err.strip().splitlines()[-1:] if err.strip() else [])
    store = SQLiteStore(path)
    try:
        report["check_problems"] = check_store(store)
        for name, out, _ in procs:
            missing, foreign = _replay_findings(store, name, out)
            report["missing_messages"] += missing
            report["foreign_events_in_reports"] += foreign
    finally:
        store.close()
    return report
