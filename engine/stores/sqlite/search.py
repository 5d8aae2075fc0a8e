"""SQLiteStore's retrieval primitives: FTS5 BM25 and dense KNN, inside one user's partition.

A mixin of SQLiteStore, which provides `_read()`, `_sync(conn)`, `_partition_size(conn, user)`
("*" for the whole index), `_vector_partition(conn, user)` (the in-memory copy, None over the
memory budget), `dim`, `_has_bits`, `exact_knn_max` and `rescore_factor`.

Dense search runs on the in-memory copy when there is one (exact); otherwise on vec0: exact up
to `exact_knn_max` vectors, above that a Hamming KNN on the sign bits rescored on the floats.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.core.text import fts_query
from engine.stores.sql import check_vector
from engine.stores.sqlite.records import sign_bits

__all__ = ["EXACT_KNN_MAX", "SQLiteSearch"]

#: Partitions up to this many vectors are searched exactly; larger ones coarse-to-fine.
EXACT_KNN_MAX = 20000
#: vec0 refuses k above this.
VEC_MAX_K = 4096


class SQLiteSearch:
    """search_bm25 and search_dense (see module docstring)."""

    def search_bm25(
        self, user_id: str, query: str, *, k: int, include_invalid: bool = False
    ) -> list[tuple[int, float]]:
        """FTS5 bm25 restricted to the user; exact top-k.

        Filtering on the UNINDEXED user column costs a content-row read per match, so when the
        user owns most of the index the global top-M is ranked first and filtered; if that yields
        fewer than k of the user's rows the query reruns with the per-row filter (no starvation).
        """
        match = fts_query(query or "")
        if match is None or k <= 0:
            return []
        valid = "" if include_invalid else " AND r.valid = 1"
        with self._read() as conn:
            self._sync(conn)
            share = self._partition_size(conn, user_id) / max(1, self._partition_size(conn, "*"))
            if share >= 0.25:
                found = self._bm25_global_first(conn, match, user_id, k, share, valid)
                if found is not None:
                    return found
            rows = conn.execute(
                "WITH hits AS MATERIALIZED (SELECT rowid AS id, bm25(records_fts) AS s FROM records_fts "
                "WHERE records_fts MATCH ? AND user_id = ?) "
                f"SELECT h.id, h.s FROM hits h JOIN records r ON r.id = h.id WHERE 1 = 1{valid} "
                "ORDER BY h.s, h.id LIMIT ?",
                (match, user_id, int(k)),
            ).fetchall()
        return [(int(rid), -float(s)) for rid, s in rows]

    @staticmethod
    def _bm25_global_first(conn: Any, match: str, user_id: str, k: int, share: float, valid: str):
        """The global top-M filtered to the user, or None when that may have missed some of the user's rows."""
        limit = int(k / share * 2) + 10
        hits = conn.execute(
            "SELECT rowid, bm25(records_fts) AS s FROM records_fts WHERE records_fts MATCH ? ORDER BY s, rowid LIMIT ?",
            (match, limit),
        ).fetchall()
        rows: list = []
        if hits:
            rows = conn.execute(
                "SELECT h.key, h.value ->> '$[1]' FROM json_each(?) h JOIN records r ON r.id = h.value ->> '$[0]' "
                f"WHERE r.user_id = ?{valid} ORDER BY h.key LIMIT ?",
                (json.dumps(hits), user_id, int(k)),
            ).fetchall()
            rows = [(hits[i][0], s) for i, s in rows]
        if len(rows) >= k or len(hits) < limit:
            return [(int(rid), -float(s)) for rid, s in rows]
        return None

    def search_dense(
        self, user_id: str, vector: Sequence[float], *, k: int, include_invalid: bool = False
    ) -> list[tuple[int, float]]:
        if k <= 0:
            return []
        arr = check_vector(vector, self.dim, "query vector")
        valid = "" if include_invalid else " AND valid = 1"
        with self._read() as conn:
            self._sync(conn)
            part = self._vector_partition(conn, user_id)
            if part is not None:
                return part.search(arr, int(k), include_invalid)
            k = min(int(k), VEC_MAX_K)
            size = self._partition_size(conn, user_id)
            if size == 0:
                return []
            if not self._has_bits or size <= self.exact_knn_max or k * self.rescore_factor >= size:
                rows = conn.execute(
                    "SELECT rowid, distance FROM records_vec WHERE embedding MATCH ? AND k = ? "
                    f"AND user_id = ?{valid} ORDER BY distance",
                    (arr.tobytes(), k, user_id),
                ).fetchall()
                return [(int(rid), 1.0 - float(d)) for rid, d in rows]
            # coarse: Hamming KNN on the sign bits; fine: exact cosine on the float vectors
            coarse_k = min(k * self.rescore_factor, VEC_MAX_K)
            ids = [r[0] for r in conn.execute(
                "SELECT rowid FROM records_vec WHERE embedding_bits MATCH vec_bit(?) AND k = ? "
                f"AND user_id = ?{valid}",
                (sign_bits(arr), coarse_k, user_id),
            )]  # fmt: skip
            blobs = self._blobs(conn, user_id, ids)
        if not blobs:
            return []
        mat = np.frombuffer(b"".join(b for _, b in blobs), dtype=np.float32).reshape(len(blobs), self.dim)
        cos = (mat @ arr) / (np.linalg.norm(mat, axis=1) * float(np.linalg.norm(arr)) + 1e-30)
        scored = sorted(((int(rid), float(c)) for (rid, _), c in zip(blobs, cos, strict=True)),
                        key=lambda x: (-x[1], x[0]))  # fmt: skip
        return scored[:k]
