"""The bundled PostgreSQL: a local server started (or reused) with pgserver when no DSN is given.

pgserver runs initdb on first use and shares one server per data folder across processes; it
stops the server when the last Python process holding it exits. The default folder is
`<repo>/build/pgdata` (`MEMLAB_PG_DATA` overrides).
"""

from __future__ import annotations

import os
import re
import threading
import warnings
from pathlib import Path
from typing import Any

from engine.core.errors import ConfigError

__all__ = ["DEFAULT_DATA_DIR", "redact", "start_local_server"]

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[3] / "build" / "pgdata"

_servers: dict[Path, Any] = {}
_servers_lock = threading.Lock()


def start_local_server(data_dir: str | os.PathLike[str] | None = None) -> str:
    """Start (or reuse) the bundled PostgreSQL in `data_dir`; returns its DSN (a Unix socket)."""
    path = Path(data_dir or os.environ.get("MEMLAB_PG_DATA") or DEFAULT_DATA_DIR).resolve()
    with _servers_lock:
        if path not in _servers:
            path.parent.mkdir(parents=True, exist_ok=True)
            with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
                warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
                try:
                    import pgserver
                except ImportError as exc:
                    raise ConfigError(
                        "no DSN given and pgserver is not installed: pip install 'memlab[postgres]' "
                        "or pass a postgresql:// URL"
                    ) from exc
                _servers[path] = pgserver.get_server(path, cleanup_mode="stop")
        return _servers[path].get_uri()


def redact(dsn: str) -> str:
    """The DSN without its password, for display."""
    return re.sub(r"password=\S+", "password=***", re.sub(r"//([^:/@]*):[^@]*@", r"//\1:***@", dsn))
