"""`memlab check --db PATH`: verify the engine's invariants (ARCHITECTURE.md) on a stored database.

A crash, a bug or a hand edit can leave a database that still opens but breaks a promise the
engine relies on. This reads every row and reports each broken invariant as one readable line:

- every message accounted for: an extract cursor never points past its session's last message
  or at another user's message; a record only grounds on messages its session's cursor covers;
- records, vectors and full-text rows match one to one (same ids, same user, same validity);
- no cross-user references (record sources, supersession, scoring rows, profile history);
- `invalid_at` is set exactly when `superseded_by` is, and the superseding record exists (a record
  superseded by itself was retracted by hand: engine.memory.editing.invalidate_record);
- the summary rows the bounded reads use (session heads, record counts) match the rows;
- every current record's vector and full-text row were computed from its current content
  (`engine.stores.check_content`: re-embedded with the file's own embedder, body re-derived).

SQLite files are checked row by row in SQL; other back ends through the store protocol (the
vector and full-text tables are not visible there, so those checks are skipped and said so).
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core.errors import ConfigError, MemlabError
from engine.core.scorelog import BATCH_RECORD_ID, ScoreColumns
from engine.stores.check_content import check_content
from engine.stores.dialect import from_json
from engine.stores.profilelog import digest, rebuilt
from engine.stores.sqlite import SQLiteStore, sqlite_module

__all__ = ["check_main", "check_store", "summary"]


def check_store(store: Any) -> list[str]:
    """Every broken invariant of the store as one line each; an empty list means it is sound."""
    if not isinstance(store, SQLiteStore):
        return _check_protocol(store)
    with store.connection() as conn:
        return _check_sqlite(conn)


def summary(store: Any) -> dict[str, int]:
    """Counts for the report: messages covered by an extract cursor vs still pending, records."""
    covered = pending = records = 0
    for user in store.users():
        for session in store.sessions(user):
            cursor = store.get_cursor(user, session, "extract")
            for m in store.messages(user, session_id=session):
                if m.id <= cursor:
                    covered += 1
                else:
                    pending += 1
        records += store.count_records(user)
    return {"messages": covered + pending, "covered": covered, "pending": pending, "records": records}


def _ids(value: Any) -> list[int]:
    if isinstance(value, list):
        return [int(v) for v in value if isinstance(v, int) or (isinstance(v, str) and v.isdigit())]
    return []


@dataclass(frozen=True, kw_only=True)
class _Tables:
    """What several SQLite checks read: message and record owners, the cursors, the record rows."""

    msg_owner: dict[int, tuple[str, str]]
    last_msg: dict[tuple[str, str], int]
    cursors: dict[tuple[str, str, str], int]
    rec_rows: list[tuple]
    rec_owner: dict[int, str]
    rec_valid: dict[int, int]


def _read_tables(q: Callable[..., list]) -> _Tables:
    rec_rows = q("SELECT id, user_id, valid, invalid_at, superseded_by, source FROM records")
    return _Tables(
        msg_owner={mid: (uid, sid) for mid, uid, sid in q("SELECT id, user_id, session_id FROM messages")},
        last_msg={(uid, sid): mx for uid, sid, mx in q("SELECT user_id, session_id, max(id) FROM messages GROUP BY 1, 2")},
        cursors={(uid, sid, name): value for uid, sid, name, value in q("SELECT user_id, session_id, name, value FROM cursors")},
        rec_rows=rec_rows,
        rec_owner={r[0]: r[1] for r in rec_rows},
        rec_valid={r[0]: r[2] for r in rec_rows},
    )


def _check_sqlite(conn: Any) -> list[str]:
    """Every check on an SQLite file, in SQL over its tables (see module docstring)."""
    q = lambda sql, args=(): conn.execute(sql, args).fetchall()  # noqa: E731
    ok = q("PRAGMA quick_check")
    problems: list[str] = []
    if [r[0] for r in ok] != ["ok"]:
        problems.append("SQLite quick_check: " + "; ".join(str(r[0]) for r in ok[:5]))
    t = _read_tables(q)
    for check in (_check_cursors, _check_supersession, _check_sources, _check_index_rows, _check_record_cursors,
                  _check_scores, _check_extract_events, _check_profile_history, _check_summaries):
        problems.extend(check(q, t))
    return problems


def _check_cursors(q: Callable[..., list], t: _Tables) -> list[str]:
    """Extract cursors point at their own session's messages, never past the last one."""
    problems = []
    for (uid, sid, name), value in t.cursors.items():
        if value < 0:
            problems.append(f"cursor {name!r} of user {uid!r} session {sid!r} is negative ({value})")
        if name != "extract" or value == 0:
            continue
        last = t.last_msg.get((uid, sid))
        if last is None or value > last:
            problems.append(f"extract cursor of user {uid!r} session {sid!r} is {value}, beyond the session's "
                            f"last message ({last or 'none'})")
        elif t.msg_owner.get(value) != (uid, sid):
            problems.append(f"extract cursor of user {uid!r} session {sid!r} points at message {value}, "
                            f"which belongs to {t.msg_owner.get(value)!r}")
    return problems


def _check_supersession(q: Callable[..., list], t: _Tables) -> list[str]:
    """invalid_at, superseded_by and the valid flag agree; the successor exists and is the user's."""
    problems = []
    for rid, uid, valid, invalid_at, sup, _source in t.rec_rows:
        if (invalid_at is None) != (sup is None):
            problems.append(f"record {rid} of user {uid!r}: invalid_at is {invalid_at!r} but superseded_by is "
                            f"{sup!r} (they are set together by supersede)")
        if bool(valid) != (invalid_at is None):
            problems.append(f"record {rid} of user {uid!r}: valid flag {valid} disagrees with invalid_at {invalid_at!r}")
        if sup is None:
            continue
        if sup == rid:  # retracted by hand (engine.memory.editing.invalidate_record): no successor
            continue
        if sup not in t.rec_owner:
            problems.append(f"record {rid} of user {uid!r} is superseded by record {sup}, which does not exist")
        elif t.rec_owner[sup] != uid:
            problems.append(f"cross-user reference: record {rid} of user {uid!r} is superseded by record {sup} "
                            f"of user {t.rec_owner[sup]!r}")
    return problems


def _check_sources(q: Callable[..., list], t: _Tables) -> list[str]:
    """A record grounds only on the user's messages that its session's extract cursor covers."""
    problems = []
    for rid, uid, _valid, _invalid_at, _sup, source in t.rec_rows:
        if source is None:
            continue
        try:
            src = json.loads(source)
            sid = src["session_id"]
            mids = _ids(src.get("message_ids"))
        except (ValueError, TypeError, KeyError):
            problems.append(f"record {rid} of user {uid!r}: unreadable source pointer {source[:80]!r}")
            continue
        cursor = t.cursors.get((uid, sid, "extract"), 0)
        for mid in mids:
            owner = t.msg_owner.get(mid)
            if owner is None:
                problems.append(f"record {rid} of user {uid!r} grounds on message {mid}, which does not exist")
            elif owner[0] != uid:
                problems.append(f"cross-user reference: record {rid} of user {uid!r} grounds on message {mid} "
                                f"of user {owner[0]!r}")
            elif mid > cursor and owner[1] == sid:
                problems.append(f"record {rid} of user {uid!r} grounds on message {mid}, past the extract cursor "
                                f"{cursor} of session {sid!r} (a record was written without its cursor move)")
    return problems


def _check_index_rows(q: Callable[..., list], t: _Tables) -> list[str]:
    """Records, vec0 rows, float vectors and full-text rows match one to one (id, user, validity)."""
    problems = []
    vec = {rid: (uid, valid) for rid, uid, valid in q("SELECT rowid, user_id, valid FROM records_vec")}
    # the full-text index has no owner column (its terms carry the owner's key; check_content
    # asks each body back under its row): rows are checked one to one, owners through records
    fts = {rid: t.rec_owner.get(rid) for (rid,) in q("SELECT rowid FROM records_fts")}
    floats = {rid for (rid,) in q("SELECT id FROM record_vectors")}
    for rid, uid in t.rec_owner.items():
        if rid not in vec:
            problems.append(f"record {rid} of user {uid!r} has no vector row")
        elif vec[rid][0] != uid:
            problems.append(f"cross-user reference: vector row {rid} is filed under user {vec[rid][0]!r}, "
                            f"its record under {uid!r}")
        elif bool(vec[rid][1]) != bool(t.rec_valid[rid]):
            problems.append(f"record {rid} of user {uid!r}: vector valid flag {vec[rid][1]} disagrees with the "
                            f"record's {t.rec_valid[rid]}")
        if rid not in floats:
            problems.append(f"record {rid} of user {uid!r} has no float vector (record_vectors)")
        if rid not in fts:
            problems.append(f"record {rid} of user {uid!r} has no full-text row")
    for rid in sorted(set(vec) - set(t.rec_owner)):
        problems.append(f"vector row {rid} (user {vec[rid][0]!r}) has no record (half-written or half-deleted)")
    for rid in sorted(floats - set(t.rec_owner)):
        problems.append(f"float vector {rid} has no record (half-written or half-deleted)")
    for rid in sorted(set(fts) - set(t.rec_owner)):
        problems.append(f"full-text row {rid} has no record (half-written or half-deleted)")
    return problems


def _check_record_cursors(q: Callable[..., list], t: _Tables) -> list[str]:
    """Cursors over records (induct) point at one of the user's records."""
    problems = []
    for name in ("induct",):
        for (uid, _sid, cname), value in t.cursors.items():
            if cname == name and value and t.rec_owner.get(value) != uid:
                problems.append(f"{name} cursor of user {uid!r} points at record {value}, which is "
                                f"{'missing' if value not in t.rec_owner else 'of user ' + repr(t.rec_owner[value])}")
    return problems


def _check_scores(q: Callable[..., list], t: _Tables) -> list[str]:
    """Scoring rows point only at the same user's records and events."""
    event_owner = {eid: uid for eid, uid in q("SELECT id, user_id FROM events")}
    bad_scores: dict[tuple[str, str], int] = defaultdict(int)
    for _id, event_id, uid, record_id in q("SELECT id, event_id, user_id, record_id FROM scores"):
        if t.rec_owner.get(record_id) not in (None, uid):
            bad_scores[(uid, f"record {record_id} of user {t.rec_owner[record_id]!r}")] += 1
        if event_owner.get(event_id) not in (None, uid):
            bad_scores[(uid, f"event {event_id} of user {event_owner[event_id]!r}")] += 1
    problems = []
    # a retrieval's rows stored as one batch entry (engine.core.scorelog): each of its record ids
    for sid, uid, text in q("SELECT id, user_id, row FROM scores WHERE record_id = ?", (BATCH_RECORD_ID,)):
        try:
            ids = ScoreColumns.from_json_obj(from_json(text)).record_id
        except ValueError:
            problems.append(f"score entry {sid} of user {uid!r}: unreadable batch of score rows")
            continue
        for rid in ids:
            if t.rec_owner.get(rid) not in (None, uid):
                bad_scores[(uid, f"record {rid} of user {t.rec_owner[rid]!r}")] += 1
    return problems + [f"cross-user reference: {n} scoring row(s) of user {uid!r} point at {what}"
                       for (uid, what), n in sorted(bad_scores.items())]


def _check_extract_events(q: Callable[..., list], t: _Tables) -> list[str]:
    """An extract event names only the user's messages, each covered by its session's cursor."""
    problems = []
    for eid, uid, payload in q("SELECT id, user_id, payload FROM events WHERE kind = 'extract'"):
        try:
            mids = _ids(json.loads(payload).get("message_ids"))
        except (ValueError, AttributeError):
            problems.append(f"extract event {eid} of user {uid!r}: unreadable payload")
            continue
        for mid in mids:
            owner = t.msg_owner.get(mid)
            if owner is None or owner[0] != uid:
                problems.append(f"extract event {eid} of user {uid!r} names message {mid}, "
                                f"{'which does not exist' if owner is None else 'of user ' + repr(owner[0])}")
            elif mid > t.cursors.get((uid, owner[1], "extract"), 0):
                problems.append(f"extract event {eid} of user {uid!r} extracted message {mid}, but the cursor of "
                                f"session {owner[1]!r} never moved past it")
    return problems


def _check_profile_history(q: Callable[..., list], t: _Tables) -> list[str]:
    """Profile history cites only the user's own records, and an entry stored as changes rebuilds,
    from the one before it, the profile its digest names (engine.stores.profilelog)."""
    problems = []
    tips: dict[str, dict | None] = {}
    for hid, uid, entry in q("SELECT id, user_id, entry FROM profile_history ORDER BY id"):
        try:
            obj = json.loads(entry)
            rids = _ids(obj.get("record_ids"))
        except (ValueError, AttributeError):
            problems.append(f"profile history row {hid} of user {uid!r}: unreadable entry")
            tips[uid] = None
            continue
        foreign = [r for r in rids if t.rec_owner.get(r) not in (None, uid)]
        if foreign:
            problems.append(f"cross-user reference: profile history row {hid} of user {uid!r} cites records "
                            f"{foreign} of other users")
        tips[uid] = _history_tip(hid, uid, obj, tips.get(uid), problems)
    return problems


def _history_tip(hid: int, uid: str, obj: dict, tip: dict | None, problems: list[str]) -> dict | None:
    """The profile after this entry (None when it cannot be known), noting a broken chain."""
    if "changes" not in obj:
        return obj.get("after") if isinstance(obj.get("after"), dict) else None
    if tip is None:
        problems.append(f"profile history row {hid} of user {uid!r} holds changes to an entry that is not stored")
        return None
    try:
        after = rebuilt(tip, obj)
    except (KeyError, TypeError, AttributeError):
        problems.append(f"profile history row {hid} of user {uid!r}: unreadable changes")
        return None
    if digest(after) != obj.get("after_digest"):
        problems.append(f"profile history row {hid} of user {uid!r}: its changes do not rebuild the profile "
                        "its digest names")
    return after


def _check_summaries(q: Callable[..., list], t: _Tables) -> list[str]:
    """The summary rows the bounded reads rely on match the rows they summarise."""
    problems = []
    heads = {(u, s): (f, la) for u, s, f, la in q("SELECT user_id, session_id, first_id, last_id FROM session_heads")}
    actual = {(u, s): (f, la) for u, s, f, la in
              q("SELECT user_id, session_id, min(id), max(id) FROM messages GROUP BY 1, 2")}  # fmt: skip
    for key in sorted(set(heads) | set(actual)):
        if heads.get(key) != actual.get(key):
            problems.append(f"session head of user {key[0]!r} session {key[1]!r} is {heads.get(key)} (first, last "
                            f"message id) but the messages say {actual.get(key)}")
    counts = {u: (n, c) for u, n, c in q("SELECT user_id, total, current FROM record_counts") if n or c}
    real = {u: (n, c) for u, n, c in q("SELECT user_id, count(*), sum(valid) FROM records GROUP BY 1")}
    for uid in sorted(set(counts) | set(real)):
        if counts.get(uid) != real.get(uid):
            problems.append(f"record count of user {uid!r} is {counts.get(uid)} (all, current) but the records "
                            f"say {real.get(uid)}")
    tagged = ("SELECT r.user_id, t.value, r.valid, r.id FROM records r, json_each(CASE WHEN json_valid(r.tags) "
              "THEN r.tags ELSE '[]' END) t WHERE t.type = 'text'")
    index = "SELECT user_id, tag, valid, id FROM record_tags"
    for uid, tag, valid, rid in q(f"{tagged} EXCEPT {index}")[:20]:
        problems.append(f"record {rid} of user {uid!r} carries tag {tag!r} (valid {valid}) but the tag index "
                        "(record_tags) has no such row")
    for uid, tag, valid, rid in q(f"{index} EXCEPT {tagged}")[:20]:
        problems.append(f"tag index row ({uid!r}, {tag!r}, valid {valid}, record {rid}) matches no record's tags")
    return problems


def _check_protocol(store: Any) -> list[str]:
    """The subset visible through the Store protocol (any back end)."""
    problems: list[str] = []
    for uid in store.users():
        owned = {m.id: m for m in store.messages(uid)}
        cursors = {}
        for sid in store.sessions(uid):
            msgs = [m for m in owned.values() if m.session_id == sid]
            cursor = store.get_cursor(uid, sid, "extract")
            cursors[sid] = cursor
            if cursor and (not msgs or cursor > max(m.id for m in msgs)):
                problems.append(f"extract cursor of user {uid!r} session {sid!r} is {cursor}, beyond the session's "
                                "last message")
        recs = {r.id: r for r in store.records(uid, include_invalid=True)}
        for r in recs.values():
            if (r.invalid_at is None) != (r.superseded_by is None):
                problems.append(f"record {r.id} of user {uid!r}: invalid_at and superseded_by disagree")
            if r.superseded_by is not None and r.superseded_by not in recs:
                problems.append(f"record {r.id} of user {uid!r} is superseded by record {r.superseded_by}, "
                                "which is not one of the user's records")
            if r.source is not None:
                for mid in r.source.message_ids:
                    if mid not in owned:
                        problems.append(f"record {r.id} of user {uid!r} grounds on message {mid}, "
                                        "which is not one of the user's messages")
                    elif mid > cursors.get(r.source.session_id, 0):
                        problems.append(f"record {r.id} of user {uid!r} grounds on message {mid}, past the "
                                        "extract cursor of its session")
    return problems


def check_main(url: str | None) -> int:
    """CLI entry: 0 when every invariant holds, 1 with one line per problem otherwise."""
    from engine.stores.base import open_store

    if not url:
        raise ConfigError("memlab check needs a database: give --db PATH (or --store postgres --dsn URL)")
    is_sqlite = not url.startswith(("postgres", "postgresql:"))
    if is_sqlite and url != ":memory:" and not os.path.isfile(url):
        raise ConfigError(f"{url}: no such database file; give the path of an existing memlab database with --db")
    dim = _stored_dim(url) if is_sqlite else 384
    store = open_store(url, dim=dim)
    try:
        problems = check_store(store)
        drift, notes = check_content(store)
        problems += drift
        counts = summary(store)
    finally:
        store.close()
    for note in notes:
        print(f"memlab check {url}: note — {note}")
    head = (f"{counts['messages']} messages ({counts['covered']} covered by extraction, {counts['pending']} "
            f"pending), {counts['records']} records")
    if not problems:
        print(f"memlab check {url}: ok — {head}; every invariant holds")
        return 0
    print(f"memlab check {url}: {len(problems)} problem(s) — {head}", file=sys.stdout)
    for p in problems:
        print(f"  - {p}")
    return 1


def _stored_dim(path: str) -> int:
    """Open with the file's own vector dimension, whatever embedder wrote it."""
    driver = sqlite_module()
    if driver is None:
        raise ConfigError(f"{path}: no SQLite driver here can load extensions; pip install sqlean.py==3.50.4.5")
    try:
        conn = driver.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
        finally:
            conn.close()
    except MemlabError:
        raise
    except Exception as exc:  # noqa: BLE001 - any driver error here means "not ours"
        raise ConfigError(f"{path}: not a memlab database ({exc}); give the path of a file memlab wrote") from None
    return int(row[0]) if row else 384
