"""One home for memlab's errors.

Misuse (a bad argument, config, file or scenario) raises a subclass of `MemlabUsageError`, which
is a `ValueError`; runtime failures (a model that answered badly, a store that failed) raise a
subclass of `MemlabRuntimeError`. Every message says what was wrong and what to do about it.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "MemlabError",
    "MemlabUsageError",
    "MemlabRuntimeError",
    "ConfigError",
    "ClockError",
    "ScenarioError",
    "StoreError",
    "CursorRewindError",
    "ModelOutputError",
    "ModelCallError",
    "RealModelForbiddenError",
    "EmbeddingError",
    "RecordEditError",
    "UnknownRecordError",
    "NothingToUndoError",
]


class MemlabError(Exception):
    """Base of every error memlab raises on purpose."""


class MemlabUsageError(MemlabError, ValueError):
    """The caller asked for something that cannot be done; the message names the fix."""


class MemlabRuntimeError(MemlabError, RuntimeError):
    """Something failed while doing valid work (a model, the store, an embedder)."""


class ConfigError(MemlabUsageError):
    """A configuration, preset or parameter set is invalid.

    Collects every violation so the user fixes them all at once.
    """

    def __init__(self, problems: str | Iterable[str], *, source: str | None = None):
        if isinstance(problems, str):
            problems = [problems]
        self.problems: list[str] = list(problems)
        self.source = source
        head = f"invalid configuration{f' in {source}' if source else ''}"
        if len(self.problems) == 1:
            msg = f"{head}: {self.problems[0]}"
        else:
            msg = head + ":\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(msg)


class ClockError(MemlabUsageError):
    """Time was misused: a naive datetime, or a clock asked to move backwards."""


class ScenarioError(MemlabUsageError):
    """A scenario file is malformed; the message names the file, the line and the fix."""


class StoreError(MemlabRuntimeError):
    """The store failed (locked, read-only, full, corrupt)."""


class CursorRewindError(MemlabUsageError):
    """A cursor was asked to move backwards; cursors only move forward."""


class ModelOutputError(MemlabRuntimeError):
    """A model's output could not be parsed or repaired into the role's schema."""


class ModelCallError(MemlabRuntimeError):
    """A model call failed after its retries (timeout, connection, provider error)."""


class RealModelForbiddenError(MemlabUsageError):
    """A real model request was attempted while real requests are forbidden (tests)."""


class EmbeddingError(MemlabRuntimeError):
    """The embedder failed or returned vectors of the wrong shape."""


class RecordEditError(MemlabUsageError):
    """A hand edit of memory (engine.memory.editing) cannot be done as asked."""


class UnknownRecordError(RecordEditError, LookupError):
    """The record id is not among the user's records: unknown, or another user's (edits never
    cross users, and the message does not say which, so no user learns of another's records)."""


class NothingToUndoError(RecordEditError):
    """`undo_last_edit` found no hand edit of the user left to undo."""
