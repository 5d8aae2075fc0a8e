"""What a turn step needs from the engine: its collaborators, read at call time.

The steps of a turn (gate, event, retrieval, injection, reinforcement) are functions of their own
modules; each takes the engine as an `EngineContext`, so a step sees the current config and the
same store, clock, models and log as the facade, without importing the facade.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol, TypeVar

from engine.core.config import MemoryConfig
from engine.core.records import Event
from engine.core.tokens import TokenCounter
from engine.roles.bundle import Models
from engine.roles.ledger import Ledger
from engine.stores.base import Store

__all__ = ["EngineContext", "Recovery"]

T = TypeVar("T")


class Recovery(Protocol):
    """Told about a failed memory step; the messages involved are still pending."""

    def on_failure(self, *, step: str, user_id: str, session_id: str, message_ids: list[int],
                   error: BaseException) -> None: ...


class EngineContext(Protocol):
    """The engine as its steps see it (MemoryEngine implements this)."""

    config: MemoryConfig
    store: Store
    models: Models
    embedder: Any
    counter: TokenCounter
    ledger: Ledger
    recovery: Recovery

    def now(self) -> datetime:
        """The clock's time (never backwards)."""
        ...

    def log(self, user_id: str, session_id: str, kind: str, payload: Mapping[str, Any], *,
            event_no: int | None = None) -> Event:
        """Append one entry to the event log."""
        ...

    def call_role(self, role: str, fn: Callable[[Any], T], inp: Any) -> T:
        """Call a model role, recording the call in the ledger."""
        ...

    @property
    def update_cosine(self) -> float:
        """The update step's cosine threshold for this embedder."""
        ...
