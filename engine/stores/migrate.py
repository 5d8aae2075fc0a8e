"""Versioned schema migrations, shared by the back ends: named steps, one version each.

A `Migration` is a numbered, named function that brings a schema from `version - 1` to
`version`. Each back end runs its steps under a lock (SQLite: an exclusive write transaction;
PostgreSQL: an advisory lock) and commits each step together with its version bump, so any
number of processes may open one database at once: the first runs the step, the others wait,
read the new version and go on. A process killed mid-step leaves the old version (the step's
transaction never committed); the next open runs it again.

`MIGRATION_PAUSE_ENV` is a test hook: set to "V:I", the migration to version V stops after its
I-th statement (inside its transaction), says so on stderr and sleeps, so a harness can kill it
exactly there (benchmarks/harness/migrations.py).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.core.errors import StoreError

__all__ = [
    "MIGRATION_PAUSE_ENV",
    "Migration",
    "check_sequence",
    "newer_schema_error",
    "pause_point",
    "run_statements",
]

#: Test hook: "V:I" pauses the migration to version V after its I-th statement (see module doc).
MIGRATION_PAUSE_ENV = "MEMLAB_MIGRATION_PAUSE"
#: How long a paused migration sleeps before it goes on (a harness kills it well before).
PAUSE_SECONDS = 60.0


@dataclass(frozen=True, kw_only=True)
class Migration:
    """One schema step: `apply(connection_or_cursor, context)` takes the schema to `version`."""

    version: int
    name: str
    apply: Callable[[Any, dict[str, Any]], None]


def check_sequence(migrations: Sequence[Migration]) -> int:
    """The latest version, after checking the steps are numbered 1, 2, ... without a gap."""
    numbers = [m.version for m in migrations]
    if numbers != list(range(1, len(numbers) + 1)):
        raise AssertionError(f"migrations must be numbered 1..N in order, got {numbers}")
    return numbers[-1]


def newer_schema_error(where: str, found: int, known: int) -> StoreError:
    """The refusal for a database a newer memlab wrote (its schema would be misread)."""
    return StoreError(
        f"{where} was written by memlab schema {found}, this memlab knows up to {known}; upgrade memlab "
        "to open it, or use another database"
    )


def pause_point(version: int, index: int) -> None:
    """The test hook: pause here when MEMLAB_MIGRATION_PAUSE names this step and statement."""
    wanted = os.environ.get(MIGRATION_PAUSE_ENV)
    if not wanted or wanted != f"{version}:{index}":
        return
    print(f"memlab: migration {version} paused after statement {index}", file=sys.stderr, flush=True)
    time.sleep(PAUSE_SECONDS)


def run_statements(execute: Callable[[Any], Any], statements: Iterable[Any], *, version: int) -> None:
    """Run a step's statements in order, with the test hook's pause point after each one."""
    for index, statement in enumerate(statements, start=1):
        execute(statement)
        pause_point(version, index)
