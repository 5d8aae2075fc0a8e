"""PostgresStore's retrieval primitives: Okapi BM25 over tsvector and cosine KNN over pgvector.

A mixin of PostgresStore, which provides `_conn()`, `_tx()`, `dim`, `language`, `ef_search`,
`exact_scan_below`, `_iterative` and the `dense_counts` counter (with `_counts_lock`).

BM25 (k1 1.2, b 0.75) is computed in SQL over the user's rows, so scores are positive and rank
like FTS5's. Dense search asks the HNSW index, which returns fewer than k rows when a user owns
a small share of the graph; that shortfall is detected and answered by an exact scan of the
user's rows (counted in `dense_counts`: "exact", "ann", "fallback").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import psycopg
from psycopg import sql

from engine.core.text import content_tokens, tokenize
from engine.stores.sql import check_vector

__all__ = ["BM25_B", "BM25_K1", "MAX_QUERY_TERMS", "PostgresSearch", "query_terms"]

log = logging.getLogger(__name__)

BM25_K1, BM25_B = 1.2, 0.75
MAX_QUERY_TERMS = 64


def query_terms(query: str) -> list[str]:
    """The query's searchable words, as SQLite's fts_query picks them (stopwords only as a fallback)."""
    terms = list(dict.fromkeys(content_tokens(query)))[:MAX_QUERY_TERMS]
    return terms or list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TERMS]


# Okapi BM25 inside one user's rows (idf = ln(1 + (N - n + 0.5) / (n + 0.5)), always positive).
# The query's lexemes come from the index's own parser; each is quoted ('' and \ escaped) before
# the cast to tsquery, so tsquery syntax in user text is inert. GIN serves `tsv @@ q`.
_BM25_SQL = r"""
WITH qlex AS (
    SELECT DISTINCT lx FROM unnest(tsvector_to_array(to_tsvector(%(cfg)s::regconfig, %(q)s))) AS lx
), tsq AS (
    SELECT string_agg('''' || replace(replace(lx, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery AS q
    FROM qlex
), stats AS (
    SELECT count(*)::float8 AS n, greatest(avg(fts_len), 1)::float8 AS avgdl
    FROM records r WHERE r.user_id = %(u)s {current}
), hits AS (
    SELECT r.id, r.fts_len, t.lexeme, coalesce(array_length(t.positions, 1), 1)::float8 AS tf
    FROM records r, tsq, unnest(r.tsv) AS t
    WHERE r.user_id = %(u)s {current} AND r.tsv @@ tsq.q AND t.lexeme IN (SELECT lx FROM qlex)
), df AS (
    SELECT lexeme, count(*)::float8 AS n FROM hits GROUP BY lexeme
)
SELECT h.id, sum(ln(1 + (s.n - df.n + 0.5) / (df.n + 0.5))
                 * h.tf * (%(k1)s + 1) / (h.tf + %(k1)s * (1 - %(b)s + %(b)s * h.fts_len / s.avgdl))) AS score
FROM hits h JOIN df USING (lexeme) CROSS JOIN stats s
GROUP BY h.id ORDER BY score DESC, h.id LIMIT %(k)s
"""


class PostgresSearch:
    """search_bm25 and search_dense (see module docstring)."""

    def search_bm25(
        self, user_id: str, query: str, *, k: int, include_invalid: bool = False, prefix: int = 0
    ) -> list[tuple[int, float]]:
        """BM25 over the text config's lexemes; `prefix` (Store.search_bm25) is not supported here and ignored."""
        terms = query_terms(query or "")
        if not terms or k <= 0:
            return []
        text = _BM25_SQL.format(current="" if include_invalid else "AND r.invalid_at IS NULL")
        params = {"cfg": self.language, "q": " ".join(terms), "u": user_id, "k": int(k), "k1": BM25_K1, "b": BM25_B}
        with self._conn() as conn:
            return [(int(rid), float(score)) for rid, score in conn.execute(text, params)]

    def search_dense(
        self, user_id: str, vector: Sequence[float], *, k: int, include_invalid: bool = False
    ) -> list[tuple[int, float]]:
        """Cosine KNN in the user's rows: exact for small users, HNSW with an exact fallback."""
        if k <= 0:
            return []
        vec = check_vector(vector, self.dim, "query vector")
        current = "" if include_invalid else "AND invalid_at IS NULL"
        with self._tx() as conn:
            n_user = conn.execute(f"SELECT count(*) FROM records WHERE user_id = %s {current}", (user_id,)).fetchone()[0]
            if n_user == 0:
                return []
            if n_user >= self.exact_scan_below:
                rows = self._ann(conn, user_id, vec, int(k), current)
                if len(rows) >= min(k, n_user):
                    self._count("ann")
                    return rows
                self._count("fallback")
                log.info("dense: HNSW gave %d of %d rows for user %r; exact scan", len(rows), min(k, n_user), user_id)
            else:
                self._count("exact")
            # A materialised CTE cannot use the HNSW index: this is an exact scan of the user's rows.
            rows = conn.execute(
                f"WITH mine AS MATERIALIZED (SELECT id, embedding FROM records WHERE user_id = %s {current}) "
                "SELECT id, 1 - (embedding <=> %s) AS cos FROM mine ORDER BY embedding <=> %s, id LIMIT %s",
                (user_id, vec, vec, int(k)),
            ).fetchall()
        return [(int(rid), float(cos)) for rid, cos in rows]

    def _ann(self, conn: psycopg.Connection, user_id: str, vec: np.ndarray, k: int, current: str) -> list[tuple[int, float]]:
        # A read-only savepoint rolled back at the end: its SET LOCALs do not outlive this query
        # (a released savepoint would leave them on for the caller's whole transaction).
        with conn.transaction(force_rollback=True):
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(min(max(self.ef_search, k), 1000))))
            if self._iterative:
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            conn.execute("SET LOCAL enable_sort = off")  # this stage asks the index, not a sort of the user's rows
            rows = conn.execute(
                f"SELECT id, 1 - (embedding <=> %s) AS cos FROM records WHERE user_id = %s {current} "
                "ORDER BY embedding <=> %s LIMIT %s",
                (vec, user_id, vec, k),
            ).fetchall()
        return sorted(((int(rid), float(cos)) for rid, cos in rows), key=lambda p: (-p[1], p[0]))

    def _count(self, path: str) -> None:
        with self._counts_lock:
            self.dense_counts[path] += 1
