"""The event log writer: every step appends here; a turn can collect what it wrote.

Turn numbers per (user, session) are kept in a bounded LRU, so a long-lived process serving many
users does not grow without limit (a session seen again after eviction continues from its last
logged turn).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from engine.core.lru import LRU
from engine.core.records import Event
from engine.stores.base import Store

__all__ = ["EventLog", "MAX_TRACKED_SESSIONS"]

#: Sessions whose turn counter stays in memory; older ones are re-read from the log when seen again.
MAX_TRACKED_SESSIONS = 4096


class EventLog:
    """Writes events to the store, numbering each session's turns."""

    def __init__(self, store: Store, *, max_sessions: int = MAX_TRACKED_SESSIONS):
        self.store = store
        self.max_sessions = max_sessions
        self._turns: LRU[tuple[str, str], int] = LRU(max_sessions)
        self._collect: list[Event] | None = None

    def turn(self, user_id: str, session_id: str) -> int | None:
        """The session's current turn number (None before its first turn)."""
        return self._turns.peek((user_id, session_id))

    def next_turn(self, user_id: str, session_id: str) -> int:
        """Count one more turn of the session; returns its number (1 for the first)."""
        key = (user_id, session_id)
        n = self._turns.peek(key)
        if n is None:
            last = self.store.events(user_id=user_id, session_id=session_id, newest_first=True, limit=1)
            n = int(last[0].turn or 0) if last else 0
        self._turns.put(key, n + 1)
        return n + 1

    def append(self, user_id: str, session_id: str, kind: str, payload: Mapping[str, Any], *, at: datetime,
               event_no: int | None = None) -> Event:
        ev = self.store.append_event(Event(user_id=user_id, session_id=session_id, kind=kind, at=at,
                                           payload=dict(payload), turn=self.turn(user_id, session_id),
                                           event_no=event_no))
        if self._collect is not None:
            self._collect.append(ev)
        return ev

    @contextmanager
    def collecting(self) -> Iterator[list[Event]]:
        """Collect every event written inside the block (a turn's own events)."""
        outer = self._collect
        self._collect = mine = []
        try:
            yield mine
        finally:
            if outer is not None:
                outer.extend(mine)
            self._collect = outer

    def forget_user(self, user_id: str) -> None:
        self._turns.drop(lambda k: k[0] == user_id)
