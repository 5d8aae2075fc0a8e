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
  inserted as that version stored them) is opened by the current code; every row must be kept.
- `run_newer_version_refused`: a file from a newer schema is refused with a message that says
  to upgrade memlab, and is left untouched.
- `run_concurrent_replays`: N `python -m engine.cli replay SCENARIO --db NEWFILE` at once, then
  `python -m engine.cli check --db NEWFILE`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

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
T0 = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)
DIM = 16


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

        def job(t: int, rnd: int = rnd, path: str = path) -> None:
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


# -- a database as an earlier schema version wrote it ------------------------------------------------


@dataclass
class Sample:
    """What was written at the old version, to compare with what the new code reads."""

    users: list[str] = field(default_factory=list)
    messages: dict[str, list[tuple]] = field(default_factory=dict)  # user -> (id, session, role, content, at)
    records: dict[str, list[tuple]] = field(default_factory=dict)  # user -> (id, content, valid, superseded_by)
    vectors: dict[int, list[float]] = field(default_factory=dict)
    cursors: dict[tuple[str, str, str], int] = field(default_factory=dict)
    kv: dict[tuple[str, str], Any] = field(default_factory=dict)
    events: dict[str, list[tuple]] = field(default_factory=dict)  # user -> (id, kind, payload)
    scores: dict[int, int] = field(default_factory=dict)  # event id -> rows
    profiles: dict[str, tuple] = field(default_factory=dict)  # user -> (fields, version)
    history: dict[str, int] = field(default_factory=dict)

    def rows(self) -> int:
        return (sum(map(len, self.messages.values())) + sum(map(len, self.records.values())) + len(self.cursors)
                + len(self.kv) + sum(map(len, self.events.values())) + sum(self.scores.values())
                + len(self.profiles) + sum(self.history.values()))  # fmt: skip


def _insert_messages(conn: Any, sample: Sample, user: str, sessions: int, per_session: int) -> None:
    for s in range(sessions):
        for k in range(per_session):
            at = T0 + timedelta(seconds=len(sample.messages.get(user, [])), minutes=s)
            role, content = ("user", "assistant")[k % 2], f"{user} s{s} message {k}"
            (mid,) = conn.execute(
                "INSERT INTO messages(user_id, session_id, role, content, created_at, created_ts) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (user, f"s{s}", role, content, at.isoformat(), at.timestamp()),
            ).fetchall()[0]
            sample.messages.setdefault(user, []).append((mid, f"s{s}", role, content, at.isoformat()))


def _insert_records(conn: Any, sample: Sample, user: str, n: int, rng: np.random.Generator) -> None:
    """Records grounded on the user's first message, with vec0, float and full-text rows; #0 superseded by #1."""
    first = sample.messages[user][0]
    source = json.dumps({"session_id": first[1], "message_ids": [first[0]], "speaker": "user"})
    for i in range(n):
        vec = rng.standard_normal(DIM).astype(np.float32)
        content = f"{user} likes green tea number {i}"
        (rid,) = conn.execute(
            "INSERT INTO records(user_id, content, memory_type, tags, theme, keywords, source, created_at, created_ts) "
            "VALUES (?, ?, 'fact', '[\"preference\"]', 'drinks', '[\"tea\"]', ?, ?, ?) RETURNING id",
            (user, content, source, T0.isoformat(), T0.timestamp()),
        ).fetchall()[0]
        conn.execute("INSERT INTO records_fts(rowid, body, user_id) VALUES (?, ?, ?)", (rid, f"{content} tea", user))
        conn.execute("INSERT INTO record_vectors(id, embedding) VALUES (?, ?)", (rid, vec.tobytes()))
        conn.execute("INSERT INTO records_vec(rowid, user_id, valid, embedding, embedding_bits) "
                     "VALUES (?, ?, 1, ?, vec_bit(?))",
                     (rid, user, vec.tobytes(), np.packbits(vec > 0, bitorder="little").tobytes()))  # fmt: skip
        sample.records.setdefault(user, []).append([rid, content, 1, None])
        sample.vectors[rid] = vec.astype(float).tolist()
    old, new = sample.records[user][0], sample.records[user][1]
    conn.execute("UPDATE records SET valid = 0, invalid_at = ?, superseded_by = ? WHERE id = ?",
                 (T0.isoformat(), new[0], old[0]))  # fmt: skip
    conn.execute("UPDATE records_vec SET valid = 0 WHERE rowid = ?", (old[0],))
    old[2], old[3] = 0, new[0]
    sample.records[user] = [tuple(r) for r in sample.records[user]]


def _insert_user_state(conn: Any, sample: Sample, user: str) -> None:
    """Cursors (extract covering every message), kv, a profile with history, events with scores."""
    for _mid, session, *_ in sample.messages[user]:
        last = max(m[0] for m in sample.messages[user] if m[1] == session)
        sample.cursors[(user, session, "extract")] = last
    for (u, s, name), value in list(sample.cursors.items()):
        if u == user:
            conn.execute("INSERT OR REPLACE INTO cursors(user_id, session_id, name, value) VALUES (?, ?, ?, ?)",
                         (u, s, name, value))  # fmt: skip
    sample.kv[(user, "weights")] = {"alpha": 0.4, "zh": "北京"}
    conn.execute("INSERT INTO kv(user_id, key, value) VALUES (?, 'weights', ?)",
                 (user, json.dumps(sample.kv[(user, "weights")], ensure_ascii=False)))  # fmt: skip
    fields = {"identity": [user]}
    conn.execute("INSERT INTO profiles(user_id, fields, version, updated_at) VALUES (?, ?, 1, ?)",
                 (user, json.dumps(fields), T0.isoformat()))  # fmt: skip
    entry = {"user_id": user, "version": 1, "at": T0.isoformat(), "before": {}, "after": fields, "record_ids": []}
    conn.execute("INSERT INTO profile_history(user_id, version, at, entry) VALUES (?, 1, ?, ?)",
                 (user, T0.isoformat(), json.dumps(entry)))  # fmt: skip
    sample.profiles[user], sample.history[user] = ({"identity": (user,)}, 1), 1
    for kind in ("gate", "retrieve"):
        payload = {"kind": kind, "n": 1.5}
        (eid,) = conn.execute(
            "INSERT INTO events(user_id, session_id, kind, at, at_ts, payload) VALUES (?, 's0', ?, ?, ?, ?) RETURNING id",
            (user, kind, T0.isoformat(), T0.timestamp(), json.dumps(payload)),
        ).fetchall()[0]
        sample.events.setdefault(user, []).append((eid, kind, payload))
    row = {"record_id": sample.records[user][1][0], "ranks": {}, "path_scores": {}, "R": 0.5, "T": 0.5, "F": 0.5,
           "parts": {}, "S": 0.5, "verdict": "picked", "why": "top-K"}
    conn.execute("INSERT INTO scores(event_id, user_id, record_id, row) VALUES (?, ?, ?, ?)",
                 (eid, user, row["record_id"], json.dumps(row)))  # fmt: skip
    sample.scores[eid] = 1


def _insert_derived(conn: Any, version: int) -> None:
    """The rows later versions derive from the base tables, as each version's writes kept them."""
    if version >= 2:
        seq = int(conn.execute("SELECT value FROM meta WHERE key = 'vec_seq'").fetchone()[0]) + 1
        conn.execute("UPDATE meta SET value = ? WHERE key = 'vec_seq'", (str(seq),))
        conn.execute("INSERT OR REPLACE INTO partition_versions(user_id, version) SELECT DISTINCT user_id, ? FROM records",
                     (seq,))  # fmt: skip
    if version >= 3:
        conn.execute("INSERT INTO session_heads SELECT user_id, session_id, min(id), max(id) FROM messages GROUP BY 1, 2")
        conn.execute("INSERT INTO record_counts SELECT user_id, count(*), sum(valid) FROM records GROUP BY 1")
        conn.execute("UPDATE profiles SET updated_at_ts = ?", (T0.timestamp(),))


def build_at_version(path: str, version: int, *, users: int = 3, sessions: int = 2, per_session: int = 4,
                     records: int = 4) -> Sample:
    """A WAL file at schema `version` (its migrations only), holding rows as that version stored them."""
    from engine.stores.sqlite.driver import connect, enable_wal
    from engine.stores.sqlite.migrations import migrate

    conn = connect(path)
    try:
        enable_wal(conn, busy_timeout_ms=5000)
        migrate(conn, dim=DIM, embedder_name="hash", where=repr(path), target=version)
        sample, rng = Sample(), np.random.default_rng(version)
        conn.execute("BEGIN IMMEDIATE")
        for u in range(users):
            user = f"user{u}"
            sample.users.append(user)
            _insert_messages(conn, sample, user, sessions, per_session)
            _insert_records(conn, sample, user, records, rng)
            _insert_user_state(conn, sample, user)
        _insert_derived(conn, version)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return sample


def compare_sample(store: Any, sample: Sample) -> list[str]:
    """Every difference between what was written and what the store now reads (empty: all kept)."""
    diffs = []
    for user in sample.users:
        got = [(m.id, m.session_id, m.role, m.content, m.created_at.isoformat()) for m in store.messages(user)]
        if got != sample.messages[user]:
            diffs.append(f"messages of {user}: {len(got)} read, {len(sample.messages[user])} written, or they differ")
        recs = [(r.id, r.content, int(r.invalid_at is None), r.superseded_by)
                for r in store.records(user, include_invalid=True)]  # fmt: skip
        if recs != sample.records[user]:
            diffs.append(f"records of {user} differ: {recs} != {sample.records[user]}")
        ids = [r[0] for r in sample.records[user]]
        vecs = store.vectors(user, ids)
        if any(not np.allclose(vecs.get(i, []), sample.vectors[i]) for i in ids):
            diffs.append(f"vectors of {user} differ")
        if store.count_records(user) != len(ids) or store.count_records(user, include_invalid=False) != len(ids) - 1:
            diffs.append(f"record counts of {user} are wrong after the upgrade")
        if {i for i, _ in store.search_bm25(user, "green tea", k=50)} != set(ids[1:]):
            diffs.append(f"full-text search of {user} does not find its current records")
        if store.search_dense(user, sample.vectors[ids[2]], k=1)[0][0] != ids[2]:
            diffs.append(f"dense search of {user} does not find its record by its own vector")
        diffs += _compare_user_state(store, sample, user)
    return diffs


def _compare_user_state(store: Any, sample: Sample, user: str) -> list[str]:
    diffs = []
    sessions = list(dict.fromkeys(m[1] for m in sample.messages[user]))
    if store.sessions(user) != sessions or store.pending_sessions(user) != []:
        diffs.append(f"sessions of {user}: {store.sessions(user)} (pending {store.pending_sessions(user)}), "
                     f"written {sessions}, none pending")
    for (u, s, name), value in sample.cursors.items():
        if u == user and store.get_cursor(u, s, name) != value:
            diffs.append(f"cursor {name} of {u}/{s} is {store.get_cursor(u, s, name)}, written {value}")
    if store.get_kv(user, "weights") != sample.kv[(user, "weights")]:
        diffs.append(f"kv of {user} differs")
    profile = store.get_profile(user)
    if (dict(profile.fields), profile.version) != sample.profiles[user] or profile.updated_at != T0:
        diffs.append(f"profile of {user} differs: {profile}")
    if len(store.profile_history(user)) != sample.history[user]:
        diffs.append(f"profile history of {user} has {len(store.profile_history(user))} entries")
    events = [(e.id, e.kind, dict(e.payload)) for e in store.events(user_id=user)]
    if events != sample.events[user]:
        diffs.append(f"events of {user} differ: {events}")
    for eid, n in sample.scores.items():
        if any(e[0] == eid for e in sample.events[user]) and len(store.scores(eid)) != n:
            diffs.append(f"scores of event {eid} differ")
    return diffs


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
                           env=_child_env(), capture_output=True, text=True, timeout=timeout)  # fmt: skip
    return ReplayReport(processes=processes, exit_codes=codes, errors=errors, check_exit=check.returncode,
                        check_output=(check.stdout + check.stderr).strip()[-500:],
                        seconds=round(time.perf_counter() - t0, 2))
