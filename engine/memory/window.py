"""Working memory: the live window of a session, and the part of it that fits the context budget.

The window is the session's pending (not yet extracted) messages plus the last `keep_recent`
processed ones; every read is bounded (the tail behind the cursor, and what is pending).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.core.config import MemoryConfig
from engine.core.forgetting import maturity
from engine.core.records import Message
from engine.core.tokens import TokenCounter
from engine.memory.results import WorkingItem
from engine.stores.base import Store

__all__ = ["WindowView", "read_window", "pending_messages", "window_messages", "working_items", "fit_window"]


@dataclass(frozen=True, slots=True)
class WindowView:
    """One read of a session's live window: the extract cursor, the last `keep_recent` messages
    up to it and the pending ones after it (a contiguous suffix of the session, oldest first).

    A turn reads it once and its steps share it (gate, overflow check, the guard, injection); it
    is read again only after a memory event moved the cursor."""

    cursor: int
    recent: tuple[Message, ...]
    pending: tuple[Message, ...]
    _fitted: dict = field(default_factory=dict, compare=False, repr=False)

    def fitted(self, budget: int, counter: TokenCounter) -> list[Message]:
        """`fit_window(self.messages, budget, counter)`, worked out once per view (the overflow
        check and the injection both need it)."""
        key = (budget, id(counter))
        if key not in self._fitted:
            self._fitted[key] = (counter, fit_window(self.messages, budget, counter))
        return list(self._fitted[key][1])

    @property
    def messages(self) -> list[Message]:
        return [*self.recent, *self.pending]

    def last_user(self) -> Message | None:
        """The session's newest user message when the window holds one (the window is the
        session's newest messages), else None (the caller asks the store)."""
        for m in reversed(self.messages):
            if m.role == "user":
                return m
        return None


def read_window(store: Store, user_id: str, session_id: str, *, keep_recent: int) -> WindowView:
    """The live window as one `WindowView` (bounded: `keep_recent` behind the cursor, the pending rest)."""
    cursor = store.get_cursor(user_id, session_id, "extract")
    recent = store.messages(user_id, session_id=session_id, upto_id=cursor, newest_first=True,
                            limit=keep_recent) if keep_recent else []
    recent.reverse()
    return WindowView(cursor=cursor, recent=tuple(recent),
                      pending=tuple(store.messages(user_id, session_id=session_id, after_id=cursor)))


def pending_messages(store: Store, user_id: str, session_id: str) -> list[Message]:
    """The session's messages past its extract cursor (said, not yet in memory)."""
    cursor = store.get_cursor(user_id, session_id, "extract")
    return store.messages(user_id, session_id=session_id, after_id=cursor)


def window_messages(store: Store, user_id: str, session_id: str, *, keep_recent: int) -> tuple[list[Message], int]:
    """The live window (last `keep_recent` processed messages, then the pending ones) and the cursor."""
    view = read_window(store, user_id, session_id, keep_recent=keep_recent)
    return view.messages, view.cursor


def working_items(messages: Sequence[Message], *, cursor: int, now: datetime, config: MemoryConfig) -> list[WorkingItem]:
    """Each window message with its age and maturity at `now`."""
    out = []
    for m in messages:
        age = max(0.0, (now - m.created_at).total_seconds())
        mat = maturity(age, tau_m=config.tau_m, c_m=config.c_m)
        out.append(WorkingItem(message=m, age_seconds=age, maturity=mat, mature=mat >= config.slice_value,
                               pending=(m.id or 0) > cursor))
    return out


def fit_window(messages: Sequence[Any], budget: int, counter: TokenCounter) -> list[Any]:
    """The newest messages that fit `budget` tokens (the current, last one always stays).

    Works on `Message`s and on `{"role", "content"}` mappings alike, so a baseline without memory
    gets exactly the engine's window. Messages left out are not lost: they are archived and, if
    pending, still extracted. The window never opens on a tool result whose call was cut off.
    """
    kept: list[Any] = []
    used = 0
    for m in reversed(messages):
        cost = counter.count_messages([{"content": _field(m, "content")}])
        if kept and used + cost > budget:
            break
        kept.append(m)
        used += cost
    kept.reverse()
    while len(kept) > 1 and _field(kept[0], "role") == "tool":
        kept.pop(0)
    return kept


def _field(m: Any, name: str) -> Any:
    return m[name] if isinstance(m, Mapping) else getattr(m, name)
