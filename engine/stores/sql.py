"""The store methods both SQL back ends share, written once: messages, profiles, cursors, kv, logs.

`SharedSQL` is a mixin. Its host provides `dialect` (engine.stores.dialect: placeholders, time
columns, list parameters), `_read()` and `_write()` (context managers yielding a DB-API
connection; `_write` inside a transaction, errors turned into StoreError) and nothing else.
Records, vectors and full text stay in each back end: their indexes (vec0 + FTS5, pgvector +
tsvector) have nothing in common.

Bounded reads: add_message keeps `session_heads` (each session's first and last message id) in
the same transaction, so `sessions` and `pending_sessions` read one row per session, never the
message history; `messages(..., newest_first=True, limit=n)` reads n index entries per role
asked (one index range per role, merged), whatever the session's length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from engine.core.clock import ensure_aware
from engine.core.errors import ConfigError, CursorRewindError, MemlabUsageError
from engine.core.records import (
    Event,
    Message,
    ProfileHistoryEntry,
    ScoreRow,
    UserProfile,
)
from engine.core.scorelog import BATCH_RECORD_ID, ScoreColumns, score_rows
from engine.stores.dialect import Dialect, from_json, to_json
from engine.stores.profilelog import read_entries, stored_entry

__all__ = ["COUNTED_TABLES", "USER_TABLES", "SharedSQL", "check_vector"]

#: Tables holding a user's rows (forget_user empties each; every one has a user_id column).
USER_TABLES = (
    "messages", "session_heads", "records", "profiles", "profile_history", "cursors", "kv", "events", "scores",
)
#: Profiles already built, keyed by the user and the whole row they were built from (a row that
#: reads back identical builds an identical profile, so this is never stale: every read still asks
#: the database, only the parsing is saved; a turn reads its user's profile once or twice).
#: Bounded: cleared when full (a plain dict: safe to share between threads).
_PROFILES: dict[tuple, UserProfile] = {}
_PROFILES_MAX = 1024

#: Tables counted in stats() (the summary tables are derived, not counted).
COUNTED_TABLES = ("messages", "records", "profiles", "profile_history", "cursors", "kv", "events", "scores")


def check_vector(vector: Sequence[float], dim: int, what: str) -> np.ndarray:
    """The vector as float32 of the store's dimension, finite; ConfigError naming the fix otherwise."""
    arr = np.asarray(vector, dtype=np.float32).reshape(-1)
    if arr.shape[0] != dim:
        raise ConfigError(
            f"{what} has {arr.shape[0]} dimensions but the store holds {dim}; "
            "embed with the store's embedder or open a store with the matching dim"
        )
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{what} contains NaN or infinity; check the embedder's output")
    return arr


class SharedSQL:
    """Messages, profiles, cursors, settings and logs on any `Dialect` (see module docstring)."""

    dialect: Dialect
    #: tables whose user_id columns together name every user (cheapest first)
    USER_SOURCES: tuple[str, ...] = ("session_heads", "records", "profiles", "events")

    def _read(self) -> AbstractContextManager[Any]:  # pragma: no cover - provided by the host
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Any]:  # pragma: no cover - provided by the host
        raise NotImplementedError

    def _write_one(self) -> AbstractContextManager[Any]:
        """`_write` for a block of exactly one statement (atomic on its own): a host may skip the
        savepoint or transaction around it."""
        return self._write()

    def _run(self, conn: Any, text: str, args: Sequence[Any] = ()) -> Any:
        return conn.execute(self.dialect.sql(text), args)

    def _run_many(self, conn: Any, text: str, rows: Sequence[Sequence[Any]]) -> None:
        cur = conn.cursor()
        try:
            cur.executemany(self.dialect.sql(text), rows)
        finally:
            cur.close()

    # -- messages ------------------------------------------------------------------------------

    def _message_cols(self) -> str:
        aux = self.dialect.time_aux("created_at")
        return f"id, user_id, session_id, role, content, created_at, {aux}, name, tool_call_id"

    def _message(self, row: Sequence[Any]) -> Message:
        mid, user_id, session_id, role, content, created, created_aux, name, tool_call_id = row
        return Message(id=mid, user_id=user_id, session_id=session_id, role=role, content=content,
                       created_at=self.dialect.decode_time(created, created_aux), name=name,
                       tool_call_id=tool_call_id)  # fmt: skip

    def add_message(self, message: Message) -> Message:
        main, aux = self.dialect.encode_time(message.created_at)
        with self._write() as conn:
            ((mid,),) = self._run(
                conn,
                f"INSERT INTO messages (user_id, session_id, role, content, created_at, "
                f"{self.dialect.time_aux('created_at')}, name, tool_call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "RETURNING id",
                (message.user_id, message.session_id, message.role, message.content, main, aux, message.name,
                 message.tool_call_id),
            ).fetchall()  # fmt: skip
            # min/max, not overwrite: concurrent writers (PostgreSQL) may commit out of id order
            self._run(
                conn,
                "INSERT INTO session_heads (user_id, session_id, first_id, last_id) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (user_id, session_id) DO UPDATE SET "
                "first_id = CASE WHEN excluded.first_id < session_heads.first_id "
                "THEN excluded.first_id ELSE session_heads.first_id END, "
                "last_id = CASE WHEN excluded.last_id > session_heads.last_id "
                "THEN excluded.last_id ELSE session_heads.last_id END",
                (message.user_id, message.session_id, int(mid), int(mid)),
            )
        return replace(message, id=int(mid))

    def messages(
        self,
        user_id: str,
        *,
        session_id: str | None = None,
        after_id: int | None = None,
        upto_id: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        roles: Sequence[str] | None = None,
    ) -> list[Message]:
        wanted = None if roles is None else list(dict.fromkeys(str(r) for r in roles))
        if wanted == [] or (limit is not None and int(limit) <= 0):
            return []
        where, args = ["user_id = ?"], [user_id]
        for clause, value in (("session_id = ?", session_id), ("id > ?", after_id), ("id <= ?", upto_id)):
            if value is not None:
                where.append(clause)
                args.append(value)
        order = "id DESC" if newest_first else "id"
        select = f"SELECT {self._message_cols()} FROM messages WHERE {' AND '.join(where)}"
        if wanted is not None and (len(wanted) == 1 or limit is None):
            select += " AND " + ("role = ?" if len(wanted) == 1 else self.dialect.in_list("role"))
            args.append(wanted[0] if len(wanted) == 1 else self.dialect.list_param(wanted))
            wanted = None
        if wanted is None:
            text = f"{select} ORDER BY {order}" + ("" if limit is None else " LIMIT ?")
            params = args + ([] if limit is None else [int(limit)])
        else:  # several roles and a limit: one bounded index range per role, merged
            parts = [f"SELECT * FROM ({select} AND role = ? ORDER BY {order} LIMIT ?) AS r{i}"
                     for i in range(len(wanted))]
            text = " UNION ALL ".join(parts) + f" ORDER BY {order} LIMIT ?"
            params = [p for role in wanted for p in (*args, role, int(limit))] + [int(limit)]
        with self._read() as conn:
            return [self._message(r) for r in self._run(conn, text, params).fetchall()]

    def count_messages(self, user_id: str, *, session_id: str | None = None, after_id: int | None = None) -> int:
        where, args = ["user_id = ?"], [user_id]
        for clause, value in (("session_id = ?", session_id), ("id > ?", after_id)):
            if value is not None:
                where.append(clause)
                args.append(value)
        with self._read() as conn:
            return int(self._run(conn, f"SELECT count(*) FROM messages WHERE {' AND '.join(where)}", args).fetchone()[0])

    def pending_sessions(self, user_id: str, cursor: str = "extract") -> list[str]:
        with self._read() as conn:
            rows = self._run(
                conn,
                "SELECT h.session_id FROM session_heads h LEFT JOIN cursors c ON c.user_id = h.user_id "
                "AND c.session_id = h.session_id AND c.name = ? WHERE h.user_id = ? "
                "AND h.last_id > coalesce(c.value, 0) ORDER BY h.first_id",
                (cursor, user_id),
            ).fetchall()
        return [r[0] for r in rows]

    def get_messages(self, user_id: str, ids: Sequence[int]) -> list[Message]:
        text = f"SELECT {self._message_cols()} FROM messages WHERE user_id = ? AND {self.dialect.in_list('id')} ORDER BY id"
        with self._read() as conn:
            rows = self._run(conn, text, (user_id, self.dialect.list_param([int(i) for i in ids]))).fetchall()
        return [self._message(r) for r in rows]

    def sessions(self, user_id: str) -> list[str]:
        with self._read() as conn:
            rows = self._run(
                conn, "SELECT session_id FROM session_heads WHERE user_id = ? ORDER BY first_id", (user_id,)
            ).fetchall()
        return [r[0] for r in rows]

    def users(self) -> list[str]:
        text = " UNION ".join(f"SELECT user_id FROM {t}" for t in self.USER_SOURCES) + " ORDER BY 1"
        with self._read() as conn:
            return [r[0] for r in self._run(conn, text).fetchall()]

    # -- profiles --------------------------------------------------------------------------------

    def get_profile(self, user_id: str) -> UserProfile:
        aux = self.dialect.time_aux("updated_at")
        with self._read() as conn:
            row = self._run(
                conn, f"SELECT fields, version, updated_at, {aux}, sources FROM profiles WHERE user_id = ?", (user_id,)
            ).fetchone()
        if row is None:
            return UserProfile(user_id=user_id)
        key = (user_id, *row)
        got = _PROFILES.get(key)
        if got is None:
            got = UserProfile.from_dict({"user_id": user_id, "fields": from_json(row[0]), "version": row[1],
                                         "updated_at": self.dialect.decode_time(row[2], row[3]),
                                         "sources": from_json(row[4] or "{}")})
            if len(_PROFILES) >= _PROFILES_MAX:
                _PROFILES.clear()
            _PROFILES[key] = got
        return got

    def save_profile(self, profile: UserProfile, history: ProfileHistoryEntry | None = None) -> None:
        if history is not None and history.user_id != profile.user_id:
            raise MemlabUsageError(
                f"profile history of user {history.user_id!r} saved with the profile of {profile.user_id!r}; "
                "pass the entry of the same user"
            )
        aux = self.dialect.time_aux("updated_at")
        main, aux_value = self.dialect.encode_time(profile.updated_at)
        data = profile.to_dict()
        with self._write() as conn:
            self._run(
                conn,
                f"INSERT INTO profiles (user_id, fields, version, updated_at, {aux}, sources) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (user_id) DO UPDATE SET fields = excluded.fields, version = excluded.version, "
                f"updated_at = excluded.updated_at, {aux} = excluded.{aux}, sources = excluded.sources",
                (profile.user_id, to_json(data["fields"]), profile.version, main, aux_value, to_json(data["sources"])),
            )
            if history is not None:  # its changes to the last entry when it continues it (engine.stores.profilelog)
                last = self._run(conn, "SELECT entry FROM profile_history WHERE user_id = ? ORDER BY id DESC LIMIT 1",
                                 (history.user_id,)).fetchone()
                tip = from_json(last[0]).get("after_digest") if last is not None else None
                self._run(
                    conn,
                    "INSERT INTO profile_history (user_id, version, at, entry) VALUES (?, ?, ?, ?)",
                    (history.user_id, history.version, self.dialect.time_scalar(history.at),
                     to_json(stored_entry(history, tip))),
                )  # fmt: skip

    def profile_history(self, user_id: str) -> list[ProfileHistoryEntry]:
        with self._read() as conn:
            rows = self._run(conn, "SELECT entry FROM profile_history WHERE user_id = ? ORDER BY id", (user_id,))
            return read_entries(user_id, [from_json(r[0]) for r in rows.fetchall()])

    # -- cursors and settings -----------------------------------------------------------------------

    def get_cursor(self, user_id: str, session_id: str, name: str) -> int:
        with self._read() as conn:
            row = self._run(
                conn, "SELECT value FROM cursors WHERE user_id = ? AND session_id = ? AND name = ?",
                (user_id, session_id, name),
            ).fetchone()  # fmt: skip
        return 0 if row is None else int(row[0])

    def set_cursor(self, user_id: str, session_id: str, name: str, value: int) -> None:
        # One upsert that only moves forward: it locks the row, so concurrent movers (other
        # processes included) serialise and none can rewind another's advance.
        key = (user_id, session_id, name)
        with self._write() as conn:
            moved = self._run(
                conn,
                "INSERT INTO cursors (user_id, session_id, name, value) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (user_id, session_id, name) DO UPDATE SET value = excluded.value "
                "WHERE cursors.value <= excluded.value RETURNING value",
                (*key, int(value)),
            ).fetchall()
            if not moved:
                current = self._run(
                    conn, "SELECT value FROM cursors WHERE user_id = ? AND session_id = ? AND name = ?", key
                ).fetchone()[0]
                raise CursorRewindError(
                    f"cursor {name!r} of user {user_id!r} session {session_id!r} is at {current}; refusing to move it "
                    f"back to {value} (cursors only move forward; use a new session or cursor name to start over)"
                )

    def get_kv(self, user_id: str, key: str) -> Any | None:
        with self._read() as conn:
            row = self._run(conn, "SELECT value FROM kv WHERE user_id = ? AND key = ?", (user_id, key)).fetchone()
        return None if row is None else from_json(row[0])

    def set_kv(self, user_id: str, key: str, value: Any) -> None:
        try:
            text = to_json(value)
        except (TypeError, ValueError) as exc:
            raise MemlabUsageError(f"kv value for {key!r} is not JSON-serialisable ({exc}); store plain data") from exc
        with self._write_one() as conn:
            self._run(
                conn,
                "INSERT INTO kv (user_id, key, value) VALUES (?, ?, ?) "
                "ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value",
                (user_id, key, text),
            )

    def delete_kv(self, user_id: str, keys: Sequence[str]) -> None:
        keys = list(dict.fromkeys(str(k) for k in keys))
        if keys:
            with self._write() as conn:
                self._run_many(conn, "DELETE FROM kv WHERE user_id = ? AND key = ?", [(user_id, k) for k in keys])

    # -- logs ------------------------------------------------------------------------------------------

    def append_event(self, event: Event) -> Event:
        aux = self.dialect.time_aux("at")
        main, aux_value = self.dialect.encode_time(event.at)
        with self._write_one() as conn:
            ((eid,),) = self._run(
                conn,
                f"INSERT INTO events (user_id, session_id, kind, at, {aux}, turn, event_no, payload) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (event.user_id, event.session_id, event.kind, main, aux_value, event.turn, event.event_no,
                 to_json(dict(event.payload))),
            ).fetchall()  # fmt: skip
        return replace(event, id=int(eid))

    def events(
        self,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        kind: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after_id: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Event]:
        where, args = self._event_filters(user_id, session_id, kind, since, until, after_id)
        text = (
            f"SELECT id, user_id, session_id, kind, at, {self.dialect.time_aux('at')}, turn, event_no, payload "
            f"FROM events WHERE {' AND '.join(where)} ORDER BY {'id DESC' if newest_first else 'id'}"
        )
        if limit is not None:
            text += " LIMIT ?"
            args.append(int(limit))
        with self._read() as conn:
            rows = self._run(conn, text, args).fetchall()
        return [Event(id=r[0], user_id=r[1], session_id=r[2], kind=r[3], at=self.dialect.decode_time(r[4], r[5]),
                      turn=r[6], event_no=r[7], payload=from_json(r[8])) for r in rows]  # fmt: skip

    def _event_filters(self, user_id, session_id, kind, since, until, after_id) -> tuple[list[str], list[Any]]:
        where, args = ["1 = 1"], []
        for clause, value in (("user_id = ?", user_id), ("session_id = ?", session_id), ("kind = ?", kind),
                              ("id > ?", None if after_id is None else int(after_id))):  # fmt: skip
            if value is not None:
                where.append(clause)
                args.append(value)
        for op, value, what in ((">=", since, "events since"), ("<=", until, "events until")):
            if value is not None:
                column, bound = self.dialect.time_filter("at", ensure_aware(value, what=what))
                where.append(f"{column} {op} ?")
                args.append(bound)
        return where, args

    def append_scores(self, event_id: int, user_id: str, rows: Sequence[ScoreRow]) -> None:
        if isinstance(rows, ScoreColumns):  # a retrieval's rows as columns: one entry (engine.core.scorelog)
            params = [(int(event_id), user_id, BATCH_RECORD_ID, to_json(rows.to_json_obj()))] if len(rows) else []
        else:
            params = [(int(event_id), user_id, int(r.record_id), to_json(r.to_dict())) for r in rows]
        if not params:
            return
        sql = "INSERT INTO scores (event_id, user_id, record_id, row) VALUES (?, ?, ?, ?)"
        if len(params) == 1:  # one statement is atomic by itself: no savepoint inside the retrieval's transaction
            with self._write_one() as conn:
                self._run(conn, sql, params[0])
            return
        with self._write() as conn:
            self._run_many(conn, sql, params)

    def scores(self, event_id: int) -> list[ScoreRow]:
        with self._read() as conn:
            rows = self._run(conn, "SELECT row FROM scores WHERE event_id = ? ORDER BY id", (int(event_id),))
            return score_rows([from_json(r[0]) for r in rows.fetchall()])

    def compact_log(
        self,
        user_id: str,
        *,
        rewrite: Mapping[int, tuple[str, Mapping[str, Any]]] | None = None,
        drop: Sequence[int] = (),
        keep_scores: Mapping[int, Sequence[int]] | None = None,
    ) -> dict[str, int]:
        out = {"events_rewritten": 0, "events_dropped": 0, "scores_dropped": 0}
        rewrite, keep_scores = dict(rewrite or {}), dict(keep_scores or {})
        dropped = sorted({int(i) for i in drop})
        if not (rewrite or dropped or keep_scores):
            return out
        with self._write() as conn:
            for eid, (kind, payload) in sorted(rewrite.items()):
                out["events_rewritten"] += int(self._run(
                    conn, "UPDATE events SET kind = ?, payload = ? WHERE user_id = ? AND id = ?",
                    (str(kind), to_json(dict(payload)), user_id, int(eid))).rowcount)
            if dropped:
                ids = self.dialect.list_param(dropped)
                out["scores_dropped"] += self._drop_scores(conn, f"user_id = ? AND {self.dialect.in_list('event_id')}",
                                                           (user_id, ids))
                out["events_dropped"] += int(self._run(
                    conn, f"DELETE FROM events WHERE user_id = ? AND {self.dialect.in_list('id')}",
                    (user_id, ids)).rowcount)
            for eid, kept in sorted(keep_scores.items()):
                out["scores_dropped"] += self._drop_scores(conn, "event_id = ? AND user_id = ?", (int(eid), user_id),
                                                           keep=sorted({int(i) for i in kept}))
        return out

    def _drop_scores(self, conn: Any, where: str, params: tuple, *, keep: Sequence[int] = ()) -> int:
        """DELETE the score rows `where` selects except those of the record ids `keep` (inside the
        caller's transaction): a retrieval's batch entry keeps just those rows of it. Returns how
        many score rows went, a batch's counted row by row. A batch that cannot be read (edited by
        hand) is left as it is when rows of it are to be kept, and goes whole (counted 1) when not:
        compaction never fails on it."""
        gone = 0
        batches = self._run(conn, f"SELECT id, row FROM scores WHERE {where} AND record_id = ?",
                            (*params, BATCH_RECORD_ID)).fetchall()
        for sid, text in batches:
            try:
                cols = ScoreColumns.from_json_obj(from_json(text))
            except ValueError:
                if not keep:
                    self._run(conn, "DELETE FROM scores WHERE id = ?", (int(sid),))
                    gone += 1
                continue
            left = cols.only(keep)
            gone += len(cols) - len(left)
            if not len(left):
                self._run(conn, "DELETE FROM scores WHERE id = ?", (int(sid),))
            elif len(left) < len(cols):
                self._run(conn, "UPDATE scores SET row = ? WHERE id = ?", (to_json(left.to_json_obj()), int(sid)))
        return gone + int(self._run(
            conn, f"DELETE FROM scores WHERE {where} AND record_id <> ? AND NOT {self.dialect.in_list('record_id')}",
            (*params, BATCH_RECORD_ID, self.dialect.list_param(list(keep)))).rowcount)

    # -- privacy and stats helpers ---------------------------------------------------------------------

    def _delete_user_rows(self, conn: Any, user_id: str, tables: Sequence[str]) -> dict[str, int]:
        """DELETE the user's rows from each table (inside the caller's transaction); counts per table."""
        return {t: int(self._run(conn, f"DELETE FROM {t} WHERE user_id = ?", (user_id,)).rowcount) for t in tables}

    def _table_counts(self, conn: Any) -> dict[str, int]:
        return {t: int(self._run(conn, f"SELECT count(*) FROM {t}").fetchone()[0]) for t in COUNTED_TABLES}
