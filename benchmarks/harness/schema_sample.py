"""A database as an earlier memlab schema version wrote it, and the check that nothing of it was lost.

`build_at_version(path, N)` runs only migrations 1..N on a new WAL file and inserts rows the way
schema N's code stored them (messages, records with their vec0, float and full-text rows,
cursors, kv, a profile with history, events with scores, and the summary rows the later
versions keep). `compare_sample(store, sample)` reads everything back through the current
store and lists each difference. Used by benchmarks/harness/migrations.py.

When a new schema version is added, extend `_insert_derived` with the rows it derives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

__all__ = ["DIM", "T0", "Sample", "build_at_version", "compare_sample"]

T0 = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)
DIM = 16


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


def _insert_records(conn: Any, sample: Sample, user: str, n: int, rng: np.random.Generator, version: int) -> None:
    """Records grounded on the user's first message, with vec0, float and full-text rows; #0 superseded by #1.

    From version 5 the full-text body is keyed by the owner and vec0 holds only the sign bits."""
    from engine.stores.sqlite.rows import body_text

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
        bits = np.packbits(vec > 0, bitorder="little").tobytes()
        conn.execute("INSERT INTO record_vectors(id, embedding) VALUES (?, ?)", (rid, vec.tobytes()))
        if version >= 5:
            conn.execute("INSERT INTO records_fts(rowid, body) VALUES (?, ?)",
                         (rid, body_text(user, content, ["tea"], None, None, None)))
            conn.execute("INSERT INTO records_vec(rowid, user_id, valid, embedding_bits) VALUES (?, ?, 1, vec_bit(?))",
                         (rid, user, bits))
        else:
            conn.execute("INSERT INTO records_fts(rowid, body, user_id) VALUES (?, ?, ?)", (rid, f"{content} tea", user))
            conn.execute("INSERT INTO records_vec(rowid, user_id, valid, embedding, embedding_bits) "
                         "VALUES (?, ?, 1, ?, vec_bit(?))", (rid, user, vec.tobytes(), bits))  # fmt: skip
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
    # version 4 derives nothing the writes keep (said_at is backfilled from valid_from by the migration)
    # version 5 derives nothing either (its index rows are written with the records, see _insert_records)


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
            _insert_records(conn, sample, user, records, rng, version)
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
