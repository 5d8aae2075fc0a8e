"""Per-user vector partitions saved beside the database file, so a new process opens them in milliseconds.

Reading a user's 100k float vectors from `record_vectors` takes seconds (row by row, then one
copy); the saved copy is a directory `<database>.vectors/` holding, per user, numpy files (the
float matrix, memory-mapped copy-on-write on load, with ids, validity, inverse norms and sign-bit
codes) and a small JSON header written last. The header names the database (meta `store_id`),
the partition version it was saved at and the user's record count and newest id: a copy is used
only while all four match the database (a file deleted and built again has another id), so it is never the source of truth: a missing, stale or unreadable copy is rebuilt from
the database (and saved again). Only file stores and partitions of at least `SIDECAR_MIN` vectors
are saved; forget_user deletes the user's files. A partition too large for the memory budget is
written here straight from the database, block by block, and searched from the file (mapped).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import secrets
from typing import Any

import numpy as np

from engine.stores.sqlite.vectors import VectorPartition

__all__ = ["SIDECAR_MIN", "VectorSidecar"]

#: Partitions smaller than this are read from the database (fast enough) and never saved.
SIDECAR_MIN = 5000
_PARTS = ("ids", "valid", "inv", "codes", "mat")
#: Saved for a mapped partition only: its int8 copy and scales.
_Q8 = ("q8", "q8s")
#: The files' layout (2: sign-bit codes saved word by word, (words, n)); a copy of another is rebuilt.
FORMAT = 2


class _Changed(Exception):
    """The user's rows changed while a copy was being built."""


def _words(dim: int) -> int:
    return -(-int(dim) // 64)


def _random_access(mat: np.memmap) -> None:
    """Tell the OS a mapped matrix is read at random rows (no read-around of neighbouring pages, so a
    query's pool costs its own pages of memory, not the file's)."""
    mm = getattr(mat, "_mmap", None)
    if mm is not None and hasattr(mm, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        with contextlib.suppress(OSError, ValueError):
            mm.madvise(mmap.MADV_RANDOM)


class VectorSidecar:
    """Load and save one database's per-user vector partitions (see module docstring)."""

    def __init__(self, db_path: str, dim: int, store_id: str | None):
        self.root = db_path + ".vectors"
        self.dim = int(dim)
        self.store_id = store_id
        #: user -> the version of the copy on disk, as this process last saw or wrote it
        self.saved: dict[str, int] = {}
        #: user -> the version a build from the database failed at (not tried again until the next write)
        self.failed: dict[str, int] = {}

    def _stem(self, user_id: str) -> str:
        return os.path.join(self.root, hashlib.sha256(user_id.encode()).hexdigest()[:32])

    @staticmethod
    def _facts(conn: Any, user_id: str) -> tuple[int, int]:
        """(record count, newest id) of the user in the database."""
        total = conn.execute("SELECT total FROM record_counts WHERE user_id = ?", (user_id,)).fetchone()
        newest = conn.execute("SELECT max(id) FROM records WHERE user_id = ?", (user_id,)).fetchone()
        return (0 if total is None else int(total[0])), int(newest[0] or 0)

    def load(self, conn: Any, user_id: str, version: int, *, mapped: bool = False) -> VectorPartition | None:
        """The saved copy when it is the database's partition at `version`, else None. `mapped`: a
        partition that keeps the floats in the file (read at random, so no read-ahead is wasted)."""
        stem = self._stem(user_id)
        try:
            with open(stem + ".json") as f:
                head = json.load(f)
        except (OSError, ValueError):
            return None
        try:
            total, newest = self._facts(conn, user_id)
            if (not self.store_id or head.get("store") != self.store_id or head.get("format") != FORMAT
                    or head.get("user") != user_id or head.get("version") != version or head.get("dim") != self.dim
                    or head.get("n") != total or head.get("newest") != newest):
                return None
            if mapped and not head.get("q8"):
                return None
            files = {p: f"{stem}.{head['nonce']}.{p}.npy" for p in _PARTS + _Q8}
            # in memory (a page of the file's may leave the page cache), but the floats
            arrays = {p: np.load(files[p], mmap_mode="c" if p == "mat" else None, allow_pickle=False) for p in _PARTS}
            n = int(head["n"])
            if (any(len(arrays[p]) != n for p in _PARTS if p != "codes") or arrays["codes"].shape != (_words(self.dim), n)
                    or arrays["mat"].shape[1:] != (self.dim,)):
                return None
            if n and int(arrays["ids"][-1]) != newest:
                return None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if mapped and isinstance(arrays["mat"], np.memmap):
            _random_access(arrays["mat"])
        self.saved[user_id] = version
        if not mapped:
            return VectorPartition(version, arrays["ids"], arrays["mat"], arrays["valid"].astype(bool),
                                   inv_norm=arrays["inv"], codes=arrays["codes"])
        zero = (np.zeros((0, self.dim), dtype=np.int8), np.zeros(0, dtype=np.float32))
        part = VectorPartition(version, arrays["ids"], arrays["mat"], arrays["valid"].astype(bool),
                               inv_norm=arrays["inv"], codes=arrays["codes"], mapped=True, q8=zero)
        part.load_q8_in_background(lambda: (np.load(files["q8"], allow_pickle=False),
                                            np.load(files["q8s"], allow_pickle=False)))
        return part

    def save(self, conn: Any, user_id: str, part: VectorPartition) -> bool:
        """Write the copy (current at part.version, which the caller checked); False when it could not."""
        if part.n < SIDECAR_MIN or not self.store_id or self.saved.get(user_id) == part.version:
            return False
        n = part.n
        try:
            total, newest = self._facts(conn, user_id)
            if total != n or (n and int(part.ids[n - 1]) != newest):
                return False
            q8 = (part.q8[:n], part.q8_scale[:n]) if part.mapped and part.q8_ready(wait=True) else None
            nonce = self._write(user_id, n, part.float_chunks(), part.ids[:n], part.valid[:n], part.inv_norm[:n],
                                part.codes[:, :n], q8)
            self._publish(user_id, part.version, n, newest, nonce, q8=q8 is not None)
        except OSError:
            return False
        return True

    def build(self, conn: Any, user_id: str, version: int, total: int, *, block: int = 50000) -> VectorPartition | None:
        """Save the user's partition straight from the database, a block of rows at a time (for one too
        large to copy into memory), and load it mapped; None when it could not be written."""
        if total < SIDECAR_MIN or not self.store_id or self.failed.get(user_id) == version:
            return None
        ids = np.empty(total, dtype=np.int64)
        valid = np.empty(total, dtype=bool)
        inv = np.empty(total, dtype=np.float32)
        codes = np.empty((_words(self.dim), total), dtype=np.uint64)
        q8, q8s = np.empty((total, self.dim), dtype=np.int8), np.empty(total, dtype=np.float32)
        state = {"n": 0}

        def chunks() -> Any:
            cur = conn.execute(
                "SELECT r.id, r.valid, v.embedding FROM records r JOIN record_vectors v ON v.id = r.id "
                "WHERE r.user_id = ? ORDER BY r.id", (user_id,))
            while rows := cur.fetchmany(block):
                i, m = state["n"], len(rows)
                if i + m > total:
                    raise _Changed
                mat = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(m, self.dim)
                ids[i: i + m] = [r[0] for r in rows]
                valid[i: i + m] = [bool(r[1]) for r in rows]
                inv[i: i + m] = VectorPartition._inv_norm(mat)
                codes[:, i: i + m] = VectorPartition.sign_codes(mat).T
                q8[i: i + m], q8s[i: i + m] = VectorPartition.quantize(mat)
                state["n"] = i + m
                yield mat

        try:
            nonce = self._write(user_id, total, chunks(), ids, valid, inv, codes, (q8, q8s))
            if state["n"] != total:
                raise _Changed
            self._publish(user_id, version, total, int(ids[-1]) if total else 0, nonce, q8=True)
        except (OSError, _Changed):
            self.failed[user_id] = version
            return None
        part = self.load(conn, user_id, version, mapped=True)
        if part is None:
            self.failed[user_id] = version
        return part

    def _write(self, user_id: str, n: int, floats: Any, ids: np.ndarray, valid: np.ndarray, inv: np.ndarray,
               codes: np.ndarray, q8: tuple[np.ndarray, np.ndarray] | None = None) -> str:
        """The files of one copy under a new nonce (the float matrix streamed block by block); the nonce."""
        stem, nonce = self._stem(user_id), secrets.token_hex(6)
        os.makedirs(self.root, exist_ok=True)
        out = np.lib.format.open_memmap(f"{stem}.{nonce}.mat.npy", mode="w+", dtype=np.float32, shape=(n, self.dim))
        try:
            i = 0
            for block in floats:  # the other arrays may be filled while the floats stream (build)
                out[i: i + len(block)] = block
                i += len(block)
            out.flush()
        finally:
            del out
        arrays = {"ids": ids, "valid": valid, "inv": inv, "codes": codes}
        if q8 is not None:
            arrays.update(q8=q8[0], q8s=q8[1])
        for p, arr in arrays.items():
            np.save(f"{stem}.{nonce}.{p}.npy", np.ascontiguousarray(arr), allow_pickle=False)
        return nonce

    def _publish(self, user_id: str, version: int, n: int, newest: int, nonce: str, *, q8: bool = False) -> None:
        """Write the header naming the copy (last, atomically), then drop the older files."""
        stem = self._stem(user_id)
        head = {"store": self.store_id, "format": FORMAT, "user": user_id, "version": int(version), "dim": self.dim,
                "n": n, "newest": newest, "nonce": nonce, "q8": q8}
        with open(stem + ".json.tmp", "w") as f:
            json.dump(head, f)
        os.replace(stem + ".json.tmp", stem + ".json")
        self._remove_others(stem, keep=nonce)
        self.saved[user_id] = int(version)

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
