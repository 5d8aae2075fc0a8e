"""Per-user vector partitions saved beside the database file, so a new process opens them in milliseconds.

Reading a user's 100k float vectors from `record_vectors` takes seconds (row by row, then one
copy); the saved copy is a directory `<database>.vectors/` holding, per user, numpy files (the
float matrix, memory-mapped copy-on-write on load, with ids, validity, inverse norms and sign-bit
codes) and a small JSON header written last. The header names the database (meta `store_id`),
the partition version it was saved at and the user's record count and newest id: a copy is used
only while all four match the database (a file deleted and built again has another id), so it is never the source of truth: a missing, stale or unreadable copy is rebuilt from
the database (and saved again). Only file stores and partitions of at least `SIDECAR_MIN` vectors
are saved; forget_user deletes the user's files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from typing import Any

import numpy as np

from engine.stores.sqlite.vectors import VectorPartition

__all__ = ["SIDECAR_MIN", "VectorSidecar"]

#: Partitions smaller than this are read from the database (fast enough) and never saved.
SIDECAR_MIN = 5000
_PARTS = ("ids", "valid", "inv", "codes", "mat")


class VectorSidecar:
    """Load and save one database's per-user vector partitions (see module docstring)."""

    def __init__(self, db_path: str, dim: int, store_id: str | None):
        self.root = db_path + ".vectors"
        self.dim = int(dim)
        self.store_id = store_id
        #: user -> the version of the copy on disk, as this process last saw or wrote it
        self.saved: dict[str, int] = {}

    def _stem(self, user_id: str) -> str:
        return os.path.join(self.root, hashlib.sha256(user_id.encode()).hexdigest()[:32])

    @staticmethod
    def _facts(conn: Any, user_id: str) -> tuple[int, int]:
        """(record count, newest id) of the user in the database."""
        total = conn.execute("SELECT total FROM record_counts WHERE user_id = ?", (user_id,)).fetchone()
        newest = conn.execute("SELECT max(id) FROM records WHERE user_id = ?", (user_id,)).fetchone()
        return (0 if total is None else int(total[0])), int(newest[0] or 0)

    def load(self, conn: Any, user_id: str, version: int) -> VectorPartition | None:
        """The saved copy when it is the database's partition at `version`, else None."""
        stem = self._stem(user_id)
        try:
            with open(stem + ".json") as f:
                head = json.load(f)
        except (OSError, ValueError):
            return None
        try:
            total, newest = self._facts(conn, user_id)
            if (not self.store_id or head.get("store") != self.store_id
                    or head.get("user") != user_id or head.get("version") != version or head.get("dim") != self.dim
                    or head.get("n") != total or head.get("newest") != newest):
                return None
            files = {p: f"{stem}.{head['nonce']}.{p}.npy" for p in _PARTS}
            arrays = {p: np.load(files[p], mmap_mode="c" if p == "mat" else None, allow_pickle=False) for p in _PARTS}
            n = int(head["n"])
            if any(len(a) != n for a in arrays.values()) or arrays["mat"].shape[1:] != (self.dim,):
                return None
            if n and int(arrays["ids"][-1]) != newest:
                return None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        self.saved[user_id] = version
        return VectorPartition(version, arrays["ids"], arrays["mat"], arrays["valid"].astype(bool),
                               inv_norm=arrays["inv"], codes=arrays["codes"])

    def save(self, conn: Any, user_id: str, part: VectorPartition) -> bool:
        """Write the copy (current at part.version, which the caller checked); False when it could not."""
        if part.n < SIDECAR_MIN or not self.store_id or self.saved.get(user_id) == part.version:
            return False
        stem, nonce, n = self._stem(user_id), secrets.token_hex(6), part.n
        try:
            total, newest = self._facts(conn, user_id)
            if total != n or (n and int(part.ids[n - 1]) != newest):
                return False
            os.makedirs(self.root, exist_ok=True)
            data = {"ids": part.ids[:n], "valid": part.valid[:n], "inv": part.inv_norm[:n],
                    "codes": part.codes[:n], "mat": part.mat[:n]}
            for p, arr in data.items():
                np.save(f"{stem}.{nonce}.{p}.npy", np.ascontiguousarray(arr), allow_pickle=False)
            head = {"store": self.store_id, "user": user_id, "version": int(part.version), "dim": self.dim, "n": n, "newest": newest,
                    "nonce": nonce}
            with open(stem + ".json.tmp", "w") as f:
                json.dump(head, f)
            os.replace(stem + ".json.tmp", stem + ".json")
        except OSError:
            return False
        self._remove_others(stem, keep=nonce)
        self.saved[user_id] = int(part.version)
        return True

    def _remove_others(self, stem: str, keep: str | None) -> None:
        base = os.path.basename(stem)
        with contextlib.suppress(OSError):
            for name in os.listdir(self.root):
                if name.startswith(base + ".") and name.endswith(".npy") and (keep is None or f".{keep}." not in name):
                    with contextlib.suppress(OSError):
                        os.remove(os.path.join(self.root, name))

    def forget(self, user_id: str) -> None:
        """Delete the user's saved copy (forget_user)."""
        stem = self._stem(user_id)
        for path in (stem + ".json", stem + ".json.tmp"):
            with contextlib.suppress(OSError):
                os.remove(path)
        self._remove_others(stem, keep=None)
        self.saved.pop(user_id, None)
