"""SQLiteStore's retrieval primitives: FTS5 BM25 and dense KNN, inside one user's partition.

A mixin of SQLiteStore, which provides `_read()`, `_sync(conn)`, `_partition_size(conn, user)`,
`_sparse_users` (user -> (sparse, rows when sampled)),
`_vector_partition(conn, user)` (the in-memory copy, None over the memory budget), `dim`,
`exact_knn_max` and `rescore_factor`.

Full text: every indexed term carries its owner's key (engine.core.text.user_key), so a query
reads only the user's doclists; the owner join on `records` stays, so a key shared by two users
costs postings, never a row of the other user. BM25 then counts document frequencies within
the user's records (the document count and average length stay those of the whole index).

Dense search runs on the in-memory copy when there is one: exact up to `exact_knn_max` vectors,
above that the nearest few thousand by the Hamming distance of the copy's sign bits, rescored
exactly on its floats (for a partition over the memory budget, a mapped copy: the sign bits in
memory, the floats read from the saved copy's file; engine.stores.sqlite.vectors). Otherwise from
the stored floats: exact up to `exact_knn_max` vectors, above that a Hamming KNN on vec0's sign
bits rescored on the floats of `record_vectors`. Sparse vectors (feature hashing: most entries 0,
which have no sign) are always searched exactly, in memory or from the stored floats.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.core.text import fts_query, fts_terms, user_key
from engine.stores.sqlite.bm25 import best, scorable, score_terms
from engine.stores.sql import check_vector
from engine.stores.sqlite.records import sign_bits
from engine.stores.sqlite.vecmath import SPARSE_SAMPLE, is_sparse, sample_again

__all__ = ["EXACT_KNN_MAX", "SQLiteSearch"]

#: Partitions up to this many vectors are searched exactly; larger ones coarse-to-fine.
EXACT_KNN_MAX = 20000
#: vec0 refuses k above this.
VEC_MAX_K = 4096


class SQLiteSearch:
    """search_bm25 and search_dense (see module docstring)."""

    def search_bm25(
        self, user_id: str, query: str, *, k: int, include_invalid: bool = False, prefix: int = 0
    ) -> list[tuple[int, float]]:
        """FTS5 bm25 over the user's own postings; exact top-k. `prefix`: see Store.search_bm25.

        The best few matches are ranked inside FTS5 and then kept when they are the user's
        (current) rows; when superseded rows or a key collision leave fewer than k, every match
        is joined instead (no starvation).
        """
        if k <= 0:
            return []
        key = user_key(user_id)
        # the numpy scorer answers exact words only: prefix matches (bm25_prefix) stay with FTS5;
        # without a prefix the MATCH expression (the same terms, quoted) is made only if FTS5 runs
        if prefix > 0:
            terms, match = None, fts_query(query or "", key=key, prefix=prefix)
            if match is None:
                return []
        else:
            terms, match = fts_terms(query or "", key=key), None
            if not terms:
                return []
        valid = "" if include_invalid else " AND r.valid = 1"
        with self._read() as conn:
            found = None if terms is None else self._bm25_numpy(conn, terms, user_id, int(k), valid)
            if found is not None:
                return found
            match = match or fts_query(query or "", key=key)
            # inside a transaction (the update step's search for a new record's older versions,
            # which are the rows most often superseded, when the numpy path cannot answer it: a
            # phrase, a folded term, a prefix) the best few mostly were not enough: the
            # top-first pass lost 83 % of those searches at turn 2,000 of a session and cost a
            # whole FTS5 bm25 pass each time, so they take every match at once (measured: the
            # keyword path per event turn 12.4-16.2 -> 7.3-9.8 ms; LoCoMo conv-26's ingest, where
            # it always won, 1.43 -> 1.29 s)
            found = None if conn.in_transaction else self._bm25_top_first(conn, match, user_id, int(k), valid)
            if found is not None:
                return found
            rows = conn.execute(
                "WITH hits AS MATERIALIZED (SELECT rowid AS id, bm25(records_fts) AS s FROM records_fts "
                "WHERE records_fts MATCH ?) "
                f"SELECT h.id, h.s FROM hits h JOIN records r ON r.id = h.id WHERE r.user_id = ?{valid} "
                "ORDER BY h.s, h.id LIMIT ?",
                (match, user_id, int(k)),
            ).fetchall()
        return [(int(rid), -float(s)) for rid, s in rows]

    def _bm25_numpy(self, conn: Any, terms: list[str], user_id: str, k: int, valid: str):
        """FTS5's bm25 ranking computed by engine.stores.sqlite.bm25 from the terms' postings and
        the user's cached document lengths; None where it cannot answer exactly (a phrase, a
        folded term, a match outside the user's rows). Inside a transaction too: the update step
        searches for a new record's older versions inside the event's."""
        if not scorable(terms):
            return None
        self._sync(conn)
        if not self._fts_vocab:
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.records_fts_vocab "
                         "USING fts5vocab(main, records_fts, instance)")
            self._fts_vocab = True
        lengths, index = self._doclens.indexed(user_id, conn)
        if len(lengths[0]) == 0:  # no indexed row of the user's: nothing to match (a new user's first turns)
            return []
        got = score_terms(conn, terms, vocab="temp.records_fts_vocab", lengths=lengths, postings=self._postings,
                          index=index)
        if got is None:
            return None
        ids, scores = got
        # every id is the user's (score_terms found each in the user's length cache): what is left
        # is whether it is current, which the user's vectors in memory know without a read
        part = None if not valid else self._vector_partition(conn, user_id, build=False)
        mask = None if part is None else part.current_mask(ids)
        if not valid or mask is not None:
            return [(int(ids[i]), -float(scores[i])) for i in best(ids, scores, k, mask).tolist()]
        order = np.lexsort((ids, scores))
        # the best matches in growing slices until k of them are the user's (current) rows: superseded
        # rows pile up in a long session, and FTS5's join over every match would grow with them
        out: list[tuple[int, float]] = []
        start, size = 0, 2 * k + 16
        while len(out) < k and start < len(order):
            part = order[start:start + size]
            rows = conn.execute(
                "SELECT h.key FROM json_each(?) h JOIN records r ON r.id = h.value "
                f"WHERE r.user_id = ?{valid} ORDER BY h.key LIMIT ?",
                (json.dumps(ids[part].tolist()), user_id, k - len(out)),
            ).fetchall()
            out.extend((int(ids[part[i]]), -float(scores[part[i]])) for (i,) in rows)
            start, size = start + len(part), size * 4
        return out

    @staticmethod
    def _bm25_top_first(conn: Any, match: str, user_id: str, k: int, valid: str):
        """The top-M matches filtered to the user's rows, or None when that may have missed some."""
        limit = 2 * k + 16
        hits = conn.execute(
            "SELECT rowid, bm25(records_fts) AS s FROM records_fts WHERE records_fts MATCH ? ORDER BY s, rowid LIMIT ?",
            (match, limit),
        ).fetchall()
        rows: list = []
        if hits:
            rows = conn.execute(
                "SELECT h.key, h.value ->> '$[1]' FROM json_each(?) h JOIN records r ON r.id = h.value ->> '$[0]' "
                f"WHERE r.user_id = ?{valid} ORDER BY h.key LIMIT ?",
                (json.dumps(hits), user_id, k),
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
        with self._read() as conn:
            self._sync(conn)
            part = self._vector_partition(conn, user_id)
            if part is not None:
                # a sparse partition's column-major copy doubles its floats: only while both fit the budget
                return part.search(arr, int(k), include_invalid, coarse_above=self.exact_knn_max,
                                   columns=self._vcache.fits(2 * part.n))
            size = self._partition_size(conn, user_id)
            if size == 0:
                return []
            if size <= self.exact_knn_max or k * self.rescore_factor >= size or self._sparse_user(conn, user_id, size):
                # exact: every float of the user, streamed from record_vectors
                blobs = self._user_blobs(conn, user_id, include_invalid)
            else:
                # coarse: Hamming KNN on the sign bits; fine: exact cosine on the float vectors
                coarse_k = min(int(k) * self.rescore_factor, VEC_MAX_K)
                valid = "" if include_invalid else " AND valid = 1"
                ids = [r[0] for r in conn.execute(
                    "SELECT rowid FROM records_vec WHERE embedding_bits MATCH vec_bit(?) AND k = ? "
                    f"AND user_id = ?{valid}",
                    (sign_bits(arr), coarse_k, user_id),
                )]  # fmt: skip
                blobs = self._blobs(conn, user_id, ids)
        return self._rank_blobs(blobs, arr, int(k))

    def _sparse_user(self, conn: Any, user_id: str, size: int) -> bool:
        """Whether the user's stored vectors are sparse (engine.stores.sqlite.vecmath.is_sparse of a
        sample of them): sign bits cannot stand for those, so they are searched exactly. Sampled
        again as an in-memory partition is (`sample_again`: once the user's records have doubled),
        not on every search."""
        got = self._sparse_users.get(user_id)
        if sample_again(size, got):
            rows = conn.execute(
                "SELECT v.embedding FROM records r JOIN record_vectors v ON v.id = r.id WHERE r.user_id = ? LIMIT ?",
                (user_id, SPARSE_SAMPLE),
            ).fetchall()
            sparse = bool(rows) and is_sparse(np.frombuffer(b"".join(b for (b,) in rows), dtype=np.float32))
            got = self._sparse_users[user_id] = (sparse, max(1, size))
        return got[0]

    @staticmethod
    def _user_blobs(conn: Any, user_id: str, include_invalid: bool) -> list[tuple[int, bytes]]:
        valid = "" if include_invalid else " AND r.valid = 1"
        return conn.execute(
            "SELECT r.id, v.embedding FROM records r JOIN record_vectors v ON v.id = r.id "
            f"WHERE r.user_id = ?{valid} ORDER BY r.id",
            (user_id,),
        ).fetchall()

    def _rank_blobs(self, blobs: list[tuple[int, bytes]], arr: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Exact cosine of the query with each (id, float32 blob), best first, ties by id."""
        if not blobs:
            return []
        mat = np.frombuffer(b"".join(b for _, b in blobs), dtype=np.float32).reshape(len(blobs), self.dim)
        cos = (mat @ arr) / (np.linalg.norm(mat, axis=1) * float(np.linalg.norm(arr)) + 1e-30)
        scored = sorted(((int(rid), float(c)) for (rid, _), c in zip(blobs, cos, strict=True)),
                        key=lambda x: (-x[1], x[0]))  # fmt: skip
        return scored[:k]
