"""Which SQLite the store runs on: the first DB-API driver whose connections can load extensions.

sqlite-vec is a loadable extension, and the Python build's own `sqlite3` often has extension
loading compiled out, so the driver is chosen once at import: sqlean.py (SQLite with extensions
enabled), then pysqlite3, then the standard library. `sqlite_module()` is the chosen DB-API
module (None when none fits) for tools that open a database file themselves; `connect()` opens
one connection with sqlite-vec loaded, as the store and the migration harness need it.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

from engine.core.errors import StoreError

__all__ = ["connect", "driver_name", "enable_wal", "sqlite_module"]


def _pick_driver() -> tuple[str | None, ModuleType | None]:
    """The first DB-API SQLite module whose connections can load extensions (sqlite-vec needs it)."""
    candidates = []
    try:
        import sqlean as mod  # sqlean.py: SQLite with extension loading enabled

        candidates.append(("sqlean", mod))
    except ImportError:
        pass
    try:
        from pysqlite3 import dbapi2 as mod  # type: ignore[import-not-found]

        candidates.append(("pysqlite3", mod))
    except ImportError:
        pass
    import sqlite3 as mod

    candidates.append(("sqlite3", mod))
    for name, module in candidates:
        if hasattr(module.Connection, "enable_load_extension"):
            return name, module
    return None, None


_DRIVER_NAME, _DRIVER = _pick_driver()


def driver_name() -> str | None:
    """Which SQLite driver the store uses ("sqlean", "pysqlite3", "sqlite3"), None if none fits."""
    return _DRIVER_NAME


def sqlite_module() -> ModuleType | None:
    """The chosen DB-API module (its `connect`, `Error`, ...), None when no driver can load extensions."""
    return _DRIVER


def require_driver() -> ModuleType:
    """The chosen module, or a StoreError that says what to install."""
    if _DRIVER is None:
        raise StoreError(
            "no SQLite driver here can load extensions (sqlite-vec needs it); "
            "install one: pip install sqlean.py==3.50.4.5"
        )
    return _DRIVER


def connect(path: str, *, busy_timeout_ms: int = 5000, **kwargs: Any) -> Any:
    """One autocommit connection to `path` with sqlite-vec loaded and the busy timeout set.

    Transactions are explicit (`isolation_level=None`): the store and the migrations issue
    BEGIN IMMEDIATE themselves. The connection may be shared between threads under a lock.
    """
    driver = require_driver()
    conn = driver.connect(
        path, check_same_thread=False, isolation_level=None, timeout=busy_timeout_ms / 1000, **kwargs
    )
    try:
        _load_vec(conn)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    except BaseException:
        conn.close()
        raise
    return conn


def _load_vec(conn: Any) -> None:
    import sqlite_vec

    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except Exception as exc:  # the driver cannot load it: say how to fix
        raise StoreError(
            f"could not load sqlite-vec into {_DRIVER_NAME} ({exc}); "
            "install it with pip install sqlite-vec==0.1.9 sqlean.py==3.50.4.5"
        ) from exc


def enable_wal(conn: Any, *, busy_timeout_ms: int) -> None:
    """Put the file in WAL mode, safely when many connections open a new file at once.

    Switching the journal mode needs a moment alone with the file; a connection that loses the
    race gets "database is locked" (or the old mode back) without the busy handler waiting, so
    this retries until the mode is WAL or the busy timeout has passed. WAL is a property of the
    file: once one connection set it, the others find it already on.
    """
    driver = require_driver()
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.002
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower() == "wal":
                return
            last: Exception | None = None
        except driver.OperationalError as exc:
            if "locked" not in str(exc).lower() and "busy" not in str(exc).lower():
                raise
            last = exc
        if time.monotonic() >= deadline:
            if last is not None:
                raise last
            raise driver.OperationalError("database is locked (could not switch the journal to WAL)")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
