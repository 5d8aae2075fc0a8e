"""The store protocol: everything the engine persists, behind one narrow interface.

A back end keeps messages (the archive that records point to), dimensional records with their
vectors and full-text rows, profiles and their history, cursors, key-value settings (tuned
weights), the event log and the per-candidate scoring log. Every read is inside one user's
partition: no method returns another user's rows. Updates never delete (supersede sets
validity); only `forget_user` erases, on purpose.

`Store` is the sum of six small protocols, one per kind of data, so a reader sees the parts and
a helper can ask for only the part it uses. Reads that could grow with a user's history take a
bound (`limit`, `after_id`, `newest_first`) and are served by an index range, and the counts
are cheap, so no turn needs to read a whole session.

`SQLiteStore` (engine.stores.sqlite) is the embedded implementation, `PostgresStore`
(engine.stores.postgres) the server one; both share their messages, profiles, cursors, kv and
log SQL (engine.stores.sql). tests/store_conformance.py is the suite every back end must pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from engine.core.records import (
    Event,
    MemoryRecord,
    Message,
    ProfileHistoryEntry,
    ScoreRow,
    UserProfile,
)

__all__ = ["EventLog", "MessageArchive", "ProfileStore", "RecordStore", "SettingsStore", "Store", "open_store"]


@runtime_checkable
class MessageArchive(Protocol):
    """The conversation as it happened: messages with increasing ids, per user and session."""

    def add_message(self, message: Message) -> Message:
        """Archive a message; returns it with its `id` (ids increase in insertion order)."""
        ...

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
        """The user's messages, optionally one session, ids in (after_id, upto_id], only `roles`.

        Id order (oldest first) by default; `newest_first=True` returns the newest first, so
        `limit` then takes the newest `limit` rows: a bounded read of a session's tail.
        """
        ...

    def count_messages(self, user_id: str, *, session_id: str | None = None, after_id: int | None = None) -> int:
        """How many of the user's messages (optionally one session) have ids > after_id."""
        ...

    def pending_sessions(self, user_id: str, cursor: str = "extract") -> list[str]:
        """The user's sessions holding messages past that session's `cursor`, by first message.

        Reads one summary row per session, not the messages.
        """
        ...

    def get_messages(self, user_id: str, ids: Sequence[int]) -> list[Message]:
        """The user's messages with these ids (others' ids are silently absent), in id order."""
        ...

    def sessions(self, user_id: str) -> list[str]:
        """The user's session ids in order of first message."""
        ...

    def users(self) -> list[str]:
        """Every user id with a message, record, profile or event, sorted."""
        ...


@runtime_checkable
class RecordStore(Protocol):
    """Dimensional records with their vectors and full-text rows, and the two searches over them."""

    dim: int  # embedding dimension of the vector index

    def add_records(
        self, records: Sequence[MemoryRecord], vectors: Sequence[Sequence[float]]
    ) -> list[MemoryRecord]:
        """Insert records with their vectors and full-text rows atomically; returns them with ids."""
        ...

    def get_records(self, user_id: str, ids: Sequence[int]) -> list[MemoryRecord]:
        """The user's records with these ids (others' ids are silently absent), in id order."""
        ...

    def records(
        self,
        user_id: str,
        *,
        include_invalid: bool = False,
        memory_type: str | None = None,
        tags_any: Sequence[str] | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        after_id: int | None = None,
        time_between: tuple[datetime | None, datetime | None] | None = None,
    ) -> list[MemoryRecord]:
        """The user's records in id order, or newest first (current only unless include_invalid);
        `after_id` keeps ids > after_id (a cursor's bounded read: with `limit`, the next batch);
        `time_between=(lo, hi)` keeps records whose time span overlaps [lo, hi] (either end open
        when None; records without a time are left out): the dimension path's bounded time read."""
        ...

    def count_records(self, user_id: str | None = None, *, include_invalid: bool = True) -> int:
        """How many records the user (everyone when None) has; current only unless include_invalid.

        Cheap: answered from a per-user count or an index, without reading the records.
        """
        ...

    def update_record(self, record: MemoryRecord, vector: Sequence[float] | None = None) -> MemoryRecord:
        """Replace a record's mutable fields (content, dimensions, reinforcement) in place.

        Used for MERGE and reinforcement; the full-text row follows the content, the vector
        follows when given. Never used to invalidate (see `supersede`).
        """
        ...

    def reinforce(self, user_id: str, ids: Sequence[int], at: datetime) -> None:
        """Atomically add 1 to strengthen_count and set last_reinforced_at for each id."""
        ...

    def supersede(self, user_id: str, old_id: int, new_id: int, at: datetime) -> None:
        """Mark `old_id` invalid at `at`, superseded by `new_id`. The old row stays."""
        ...

    def vectors(self, user_id: str, ids: Sequence[int]) -> dict[int, list[float]]:
        """Stored vectors of these records (for update's cosine step and re-ranking)."""
        ...

    def replace_vectors(self, user_id: str, vectors: Mapping[int, Sequence[float]]) -> None:
        """Re-embed: replace the vectors of these records (e.g. after switching embedders)."""
        ...

    def search_bm25(
        self, user_id: str, query: str, *, k: int, include_invalid: bool = False, prefix: int = 0
    ) -> list[tuple[int, float]]:
        """BM25 over the records' full text (k1 1.2, b 0.75): (record id, score), best first.

        Scores are positive, higher = better (FTS5's bm25() negated). The query is plain text,
        segmented the same way as the index (Chinese included); FTS syntax in it is inert.
        `prefix` > 0: an English query word loses one plural / -ing / -ed ending and, with at least
        `prefix` letters left, also matches the indexed words it begins (SQLite; the Postgres store
        ignores it); 0: exact words.
        """
        ...

    def search_dense(
        self, user_id: str, vector: Sequence[float], *, k: int, include_invalid: bool = False
    ) -> list[tuple[int, float]]:
        """Exact-or-rescored KNN by cosine inside the user's partition: (id, cosine), best first."""
        ...


@runtime_checkable
class ProfileStore(Protocol):
    """The user's structured profile and the history of its changes."""

    def get_profile(self, user_id: str) -> UserProfile:
        """The user's profile (an empty one at version 0 when none was saved)."""
        ...

    def save_profile(self, profile: UserProfile, history: ProfileHistoryEntry | None = None) -> None:
        """Replace the user's profile and append `history` (same user) in one transaction."""
        ...

    def profile_history(self, user_id: str) -> list[ProfileHistoryEntry]:
        """The user's profile history, oldest first."""
        ...


@runtime_checkable
class SettingsStore(Protocol):
    """Forward-only cursors (how far each step has read) and per-user key-value settings."""

    def get_cursor(self, user_id: str, session_id: str, name: str) -> int:
        """A named cursor (0 when never set). Per (user, session); use session "" for per-user."""
        ...

    def set_cursor(self, user_id: str, session_id: str, name: str, value: int) -> None:
        """Move a cursor forward; moving it backwards raises CursorRewindError."""
        ...

    def get_kv(self, user_id: str, key: str) -> Any | None:
        """The JSON value stored under (user, key), None when unset."""
        ...

    def set_kv(self, user_id: str, key: str, value: Any) -> None:
        """Store a JSON-serialisable value under (user, key) (MemlabUsageError otherwise)."""
        ...

    def delete_kv(self, user_id: str, keys: Sequence[str]) -> None:
        """Remove the user's values under `keys` (keys never set are ignored; other users' are untouched)."""
        ...


@runtime_checkable
class EventLog(Protocol):
    """The event log (what each memory step did) and the per-candidate scoring log."""

    def append_event(self, event: Event) -> Event:
        """Append to the event log; returns the event with its `id`."""
        ...

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
        """Events in id order, filtered by user, session, kind, time range [since, until] and ids > after_id.

        `newest_first=True` returns the newest first, so `limit` then takes the newest rows.
        """
        ...

    def append_scores(self, event_id: int, user_id: str, rows: Sequence[ScoreRow]) -> None:
        """Append the scoring rows of one retrieval event."""
        ...

    def scores(self, event_id: int) -> list[ScoreRow]:
        """The scoring rows of one event, in the order they were appended."""
        ...

    def compact_log(
        self,
        user_id: str,
        *,
        rewrite: Mapping[int, tuple[str, Mapping[str, Any]]] | None = None,
        drop: Sequence[int] = (),
        keep_scores: Mapping[int, Sequence[int]] | None = None,
    ) -> dict[str, int]:
        """Log retention (engine.memory.retention), in one transaction and only on the user's rows:
        give each event of `rewrite` (id → (kind, payload)) its new kind and payload, delete the
        events of `drop` with their score rows, and delete each `keep_scores` event's score rows
        except those of the kept record ids. Every statement goes by event id (primary key or the
        scores' event index), never a scan. Returns the counts: events_rewritten, events_dropped,
        scores_dropped."""
        ...


@runtime_checkable
class Store(MessageArchive, RecordStore, ProfileStore, SettingsStore, EventLog, Protocol):
    """Persistence for one memlab database. Methods are synchronous and thread-safe."""

    def close(self) -> None:
        """Release the connections; the store cannot be used afterwards."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """Group writes so they land together or not at all (nestable: inner blocks join)."""
        ...

    def forget_user(self, user_id: str) -> dict[str, int]:
        """Erase every row of the user (all tables); returns the counts removed per table."""
        ...

    def stats(self) -> dict[str, Any]:
        """Counts per table, size in bytes, embedder name, dimension and schema version."""
        ...


def open_store(url: str | None = None, *, dim: int = 384, embedder_name: str = "hash") -> Store:
    """Open a store by URL: a file path or ':memory:' (SQLite), or postgresql://… (PostgreSQL)."""
    target = url or ":memory:"
    if target.startswith(("postgres://", "postgresql://")) or target == "postgres":
        from engine.stores.postgres import PostgresStore  # optional back end

        return PostgresStore(None if target == "postgres" else target, dim=dim, embedder_name=embedder_name)
    from engine.stores.sqlite import SQLiteStore

    return SQLiteStore(target, dim=dim, embedder_name=embedder_name)
