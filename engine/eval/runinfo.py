"""Run metadata that every benchmark result carries: the git commit, the machine and versions."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["git_commit", "machine", "package_versions", "sqlite_versions", "write_json"]


def git_commit() -> str | None:
    """The checkout's HEAD commit, or None outside a git checkout."""
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (res.stdout.strip() or None) if res.returncode == 0 else None


def machine() -> dict[str, Any]:
    return {"cores": os.cpu_count(), "machine": platform.machine(), "platform": platform.platform(),
            "python": platform.python_version()}


def package_versions(names: Sequence[str]) -> dict[str, str]:
    """Installed versions of these distributions (missing ones left out)."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def sqlite_versions() -> dict[str, Any]:
    """SQLite, sqlite-vec and the driver the SQLite store runs on."""
    out: dict[str, Any] = {}
    try:
        from engine.stores import sqlite as sqlite_store

        store = sqlite_store.SQLiteStore(":memory:", dim=8)
        try:
            out["sqlite"] = store.conn.execute("SELECT sqlite_version()").fetchone()[0]
            out["sqlite_vec"] = store.conn.execute("SELECT vec_version()").fetchone()[0]
            out["sqlite_driver"] = sqlite_store.driver_name()
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - metadata only
        out["sqlite_error"] = str(exc)
    return out


def write_json(path: str | Path, doc: Any) -> Path:
    """A benchmark's results and run metadata as indented UTF-8 JSON (parent folders made)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out
