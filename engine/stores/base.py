"""The store protocol: everything the engine persists, behind one narrow interface.

A back end keeps messages (the archive that records point to), dimensional records with their
vectors and full-text rows, profiles and their history, cursors, key-value settings (tuned
weights), the event log and the per-candidate scoring log. Every read is inside one user's
partition: no method returns another user's rows. Updates never delete (supersede sets
validity); only `forget_user` erases, on purpose.

`SQLiteStore` (engine.sqlite_store) is the embedded implementation; tests/store_conformance.py
is the suite every back end must pass.
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

__all__ = ["Store", "open_store"]


@runtime_checkable
class Store(Protocol):
    """Persistence for one memlab database. Methods are synchronous and thread-safe."""

    dim: int  # embedding dimension of the vector index

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None: ...

    def transaction(self) -> AbstractContextManager[None]:
        """Group writes so they land together or not at all (nestable: inner blocks join)."""
        ...

    # -- messages ------------------------------------------------------------------------
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
        """The user's sessions holding messages past that session's `cursor`, by first message."""
        ...

    def get_messages(self, user_id: str, ids: Sequence[int]) -> list[Message]:
        """The user's messages with these ids (others' ids are silently absent), in id order."""
        ...

    def sessions(self, user_id: str) -> list[str]:
        """The user's session ids in order of first message."""
        ...

    def users(self) -> list[str]: ...

    # -- records ---------------------------------------------------------------------------
    def add_records(
        self, records: Sequence[MemoryRecord], vectors: Sequence[Sequence[float]]
    ) -> list[MemoryRecord]:
        """Insert records with their vectors and full-text rows atomically; returns them with ids."""
        ...

    def get_records(self, user_id: str, ids: Sequence[int]) -> list[MemoryRecord]: ...

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
    ) -> list[MemoryRecord]:
        """The user's records in id order, or newest first (current only unless include_invalid);
        `after_id` keeps ids > after_id (a cursor's bounded read: with `limit`, the next batch)."""
        ...

    def count_records(self, user_id: str | None = None, *, include_invalid: bool = True) -> int: ...

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

    # -- retrieval primitives (inside one user's partition) -------------------------------
    def search_bm25(
        self, user_id: str, query: str, *, k: int, include_invalid: bool = False
    ) -> list[tuple[int, float]]:
        """BM25 over the records' full text (k1 1.2, b 0.75): (record id, score), best first.

        Scores are positive, higher = better (FTS5's bm25() negated). The query is plain text,
        segmented the same way as the index (Chinese included); FTS syntax in it is inert.
        """
        ...

    def search_dense(
        self, user_id: str, vector: Sequence[float], *, k: int, include_invalid: bool = False
    ) -> list[tuple[int, float]]:
        """Exact-or-rescored KNN by cosine inside the user's partition: (id, cosine), best first."""
        ...

    # -- profiles ----------------------------------------------------------------------------
    def get_profile(self, user_id: str) -> UserProfile: ...

    def save_profile(self, profile: UserProfile, history: ProfileHistoryEntry | None = None) -> None: ...

    def profile_history(self, user_id: str) -> list[ProfileHistoryEntry]: ...

    # -- cursors and settings ---------------------------------------------------------------
    def get_cursor(self, user_id: str, session_id: str, name: str) -> int:
        """A named cursor (0 when never set). Per (user, session); use session "" for per-user."""
        ...

    def set_cursor(self, user_id: str, session_id: str, name: str, value: int) -> None:
        """Move a cursor forward; moving it backwards raises CursorRewindError."""
        ...

    def get_kv(self, user_id: str, key: str) -> Any | None: ...

    def set_kv(self, user_id: str, key: str, value: Any) -> None: ...

    # -- logs ----------------------------------------------------------------------------------
    def append_event(self, event: Event) -> Event: ...

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
        """Events in id order (newest first when asked, so `limit` takes the newest), filtered by
        user, session, kind and time range [since, until]."""
        ...

    def append_scores(self, event_id: int, user_id: str, rows: Sequence[ScoreRow]) -> None: ...

    def scores(self, event_id: int) -> list[ScoreRow]: ...

    # -- privacy -------------------------------------------------------------------------------
    def forget_user(self, user_id: str) -> dict[str, int]:
        """Erase every row of the user (all tables); returns the counts removed per table."""
        ...

    def stats(self) -> dict[str, Any]:
        """Counts per table, file size, embedder name and dimension."""
        ...


def open_store(url: str | None = None, *, dim: int = 384, embedder_name: str = "hash") -> Store:
    """Open a store by URL: a file path or ':memory:' (SQLite), or postgresql://… (PostgreSQL)."""
    target = url or ":memory:"
    if target.startswith(("postgres://", "postgresql://")) or target == "postgres":
        from engine.stores.postgres import PostgresStore  # optional back end

        return PostgresStore(None if target == "postgres" else target, dim=dim, embedder_name=embedder_name)
    from engine.stores.sqlite import SQLiteStore

    return SQLiteStore(target, dim=dim, embedder_name=embedder_name)

