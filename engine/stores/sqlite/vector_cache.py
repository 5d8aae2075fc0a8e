"""The in-memory vector partitions of all users under one memory budget (engine.stores.sqlite.vectors)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from engine.core.lru import LRU
from engine.stores.sqlite.vectors import VectorPartition

__all__ = ["BYTES_PER_VECTOR_OVERHEAD", "MAPPED_BYTES_PER_VECTOR", "VECTOR_CACHE_MB", "VectorCache",
           "partition_from_rows"]

#: Default memory for the in-memory vector partitions (100k vectors of 384 dims take ~150 MB).
VECTOR_CACHE_MB = 1024
#: Bytes a cached vector costs beyond its floats (id, norm, validity, index entry), for budgeting.
BYTES_PER_VECTOR_OVERHEAD = 120
#: What a mapped partition holds in memory per vector beyond its sign bits and int8 copy (id, inverse
#: norm, validity, index entry), for budgeting: its floats stay in the saved file.
MAPPED_BYTES_PER_VECTOR = 120


class VectorCache:
    """user -> VectorPartition, least recently used first, at most `budget_bytes` in all."""

    def __init__(self, *, budget_bytes: int, dim: int):
        self.budget_bytes = int(budget_bytes)
        self.dim = int(dim)
        self._parts: LRU[str, VectorPartition] = LRU(self.budget_bytes, weigh=_nbytes)

    def __contains__(self, user_id: object) -> bool:
        return user_id in self._parts

    def __getitem__(self, user_id: str) -> VectorPartition:
        part = self._parts.peek(user_id)
        if part is None:
            raise KeyError(user_id)
        return part

    def __iter__(self) -> Iterator[str]:
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)

    def fits(self, n_vectors: int) -> bool:
        """Whether a partition of this many vectors may be copied at all."""
        return n_vectors * (self.dim * 4 + BYTES_PER_VECTOR_OVERHEAD) <= self.budget_bytes

    def fits_mapped(self, n_vectors: int) -> bool:
        """Whether a mapped partition (sign bits and ids in memory, floats in the saved file) fits."""
        words = -(-self.dim // 64)
        return n_vectors * (8 * words + self.dim + 4 + MAPPED_BYTES_PER_VECTOR) <= self.budget_bytes

    def current(self, user_id: str, version: int) -> VectorPartition | None:
        """The user's copy when it is at `version` (marked most recently used); a stale one is dropped."""
        part = self._parts.peek(user_id)
        if part is None:
            return None
        if part.version != version:
            self._parts.pop(user_id)
            return None
        return self._parts.get(user_id)

    def put(self, user_id: str, part: VectorPartition) -> VectorPartition | None:
        """Keep a copy as the most recently used; returns it, or None when the budget evicted it.
        Every kept copy is weighed again first: one grows in place after it is kept (its sign-bit
        codes are built on its first search, a mapped one's int8 copy loads in a thread)."""
        self._parts.reweigh()
        return part if self._parts.put(user_id, part) else None

    def pop(self, user_id: str) -> VectorPartition | None:
        return self._parts.pop(user_id)

    def clear(self) -> None:
        self._parts.clear()


def _nbytes(part: VectorPartition) -> int:
    return part.nbytes


def partition_from_rows(version: int, rows: Sequence[tuple[int, int, bytes]], dim: int) -> VectorPartition:
    """A partition from (id, valid, float32 blob) rows in id order."""
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    valid = np.fromiter((bool(r[1]) for r in rows), dtype=bool, count=len(rows))
    mat = np.frombuffer(bytearray(b"".join(r[2] for r in rows)), dtype=np.float32).reshape(len(rows), dim)
    return VectorPartition(version, ids, mat, valid)
