"""PostgresStore: the Store protocol on PostgreSQL with pgvector (HNSW) and tsvector (GIN).

For many processes sharing one database. Every read is inside one user's rows; writes run in
transactions from a psycopg pool, and `transaction()` pins one connection to the calling thread
so nested blocks join it (savepoints inside). Full text is indexed from `engine.core.text.index_text`
(Chinese segmented by jieba, as in SQLite); search is in engine.stores.postgres.search.
Messages, profiles, cursors, kv and logs are the shared SQL (engine.stores.sql).

Round trips are exact: each datetime keeps its UTC offset in a companion `*_tz` column, JSON
payloads stay text (key order, floats), and text holding NUL (which PostgreSQL refuses) is
escaped reversibly by the connection's string adapters (engine.stores.postgres.codec).

Opening runs the schema migrations under an advisory lock (engine.stores.postgres.migrations),
so any number of processes may open one new or old schema at once. Without a DSN a local
server is started (or reused) with pgserver (engine.stores.postgres.server).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from engine.core.clock import ensure_aware
from engine.core.errors import ConfigError, MemlabUsageError, StoreError
from engine.core.records import MemoryRecord
from engine.stores.dialect import POSTGRES, utc_offset
from engine.stores.postgres.codec import register_text
from engine.stores.postgres.migrations import SCHEMA_VERSION, migrate
from engine.stores.postgres.rows import (
    RECORD_COLUMNS,
    insert_row,
    mutable_row,
    record_from_row,
)
from engine.stores.postgres.search import PostgresSearch
from engine.stores.postgres.server import redact, start_local_server
from engine.stores.sql import USER_TABLES, SharedSQL, check_vector

__all__ = ["PostgresStore"]


class PostgresStore(SharedSQL, PostgresSearch):
    """The Store protocol on PostgreSQL + pgvector; safe to share across threads and processes."""

    dialect = POSTGRES

    def __init__(
        self,
        dsn: str | None = None,
        *,
        dim: int = 384,
        embedder_name: str = "hash",
        language: str = "simple",
        pool_size: int = 4,
        data_dir: str | os.PathLike[str] | None = None,
        schema: str = "public",
        ef_search: int = 40,
        iterative_scan: bool = True,
        exact_scan_below: int = 2000,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        temporary: bool = False,
    ):
        """`schema` isolates a store inside one database; `temporary` drops it on close (tests, benchmarks).

        Dense search scans a user's rows exactly when they have fewer than `exact_scan_below`
        searchable records, else asks HNSW (`ef_search`; pgvector >= 0.8 iterative scan when
        `iterative_scan`) and falls back to the exact scan when it returns too few rows.
        `hnsw_m` / `hnsw_ef_construction` shape the index when the schema is created (pgvector's
        defaults; lower is cheaper per insert, which costs milliseconds per row).
        """
        if int(dim) < 1:
            raise ConfigError(f"dim must be a positive integer, got {dim}")
        if temporary and schema == "public":
            raise ConfigError("temporary=True would drop the public schema; name a schema of its own")
        self.temporary = temporary
        self.dim = int(dim)
        self.embedder_name = embedder_name
        self.language = language
        self.schema = schema
        self.ef_search = int(ef_search)
        self.exact_scan_below = int(exact_scan_below)
        self._index_params = {"hnsw_m": int(hnsw_m), "hnsw_ef_construction": int(hnsw_ef_construction)}
        self.dense_counts: Counter[str] = Counter()  # which path answered: "exact", "ann", "fallback"
        self._counts_lock = threading.Lock()
        self._local = threading.local()
        self._bulk_lock, self._bulk_depth = threading.Lock(), 0
        self.dsn = dsn if dsn is not None else start_local_server(data_dir)
        try:
            self.pgvector_version = self._bootstrap()
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"cannot reach PostgreSQL at {redact(self.dsn)!r}: {exc}; start the server or fix the DSN"
            ) from exc
        self._iterative = iterative_scan and tuple(int(p) for p in self.pgvector_version.split(".")[:2]) >= (0, 8)
        self._pool = ConnectionPool(
            self.dsn, min_size=1, max_size=max(1, int(pool_size)), configure=self._configure, open=True,
            name=f"memlab-{schema}",
        )  # fmt: skip

    # -- connections, migrations, transactions -----------------------------------------------------

    def _configure(self, conn: psycopg.Connection) -> None:
        conn.autocommit = True
        register_text(conn)
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema)))
        conn.execute("SET TIME ZONE 'UTC'")
        register_vector(conn)

    def _bootstrap(self) -> str:
        """Create the extension and schema and run pending migrations, serialised across processes."""
        context = {"dim": self.dim, "embedder_name": self.embedder_name, "language": self.language,
                   **self._index_params}  # fmt: skip
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            stored = migrate(conn, schema=self.schema, context=context)
            version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        if stored["dim"] != str(self.dim) or stored["language"] != self.language:
            raise ConfigError(
                f"schema {self.schema!r} holds {stored['dim']}-dimensional vectors and text config "
                f"{stored['language']!r}, but dim={self.dim}, language={self.language!r} was asked; open it with "
                "the stored settings, use another schema, or re-embed into a new one"
            )
        self.stored_embedder_name = stored["embedder_name"]
        return str(version)

    @property
    def schema_version(self) -> int:
        with self._conn() as conn:
            return int(conn.execute("SELECT max(version) FROM schema_version").fetchone()[0])

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        """The thread's pinned connection inside `transaction()`, else one from the pool."""
        try:
            held = getattr(self._local, "conn", None)
            if held is not None:
                yield held
            else:
                with self._pool.connection() as conn:
                    yield conn
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL store (schema {self.schema!r}): {exc}") from exc

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection]:
        """A write: its own transaction (a savepoint inside `transaction()`), connection pinned."""
        with self.transaction():
            yield self._local.conn

    # the shared SQL layer reads and writes through these
    _read = _conn
    _write = _tx

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Writes inside land together or not at all; nested blocks (and each write) are savepoints."""
        held = getattr(self._local, "conn", None)
        if held is not None:
            with held.transaction():
                yield
            return
        with self._conn() as conn:
            self._local.conn = conn
            try:
                with conn.transaction():
                    yield
            finally:
                self._local.conn = None

    def close(self) -> None:
        if self._pool.closed:
            return
        if self.temporary:
            with self._pool.connection() as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema)))
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _owned(self, conn: psycopg.Connection, user_id: str, ids: Sequence[int], action: str) -> None:
        wanted = {int(i) for i in ids}
        found = {r[0] for r in conn.execute("SELECT id FROM records WHERE user_id = %s AND id = ANY(%s)",
                                            (user_id, sorted(wanted)))}  # fmt: skip
        if missing := sorted(wanted - found):
            raise MemlabUsageError(
                f"cannot {action}: records {missing} of user {user_id!r} do not exist; add them with add_records first"
            )

    # -- records ------------------------------------------------------------------------------------

    #: Batches of at least this many records are written with one binary COPY (smaller ones row by row).
    copy_min_rows = 16

    def _matrix(self, vectors: Any) -> np.ndarray:
        """The vectors as one checked float32 (n, dim) matrix; a numpy array passes in one step,
        anything else is checked vector by vector (for the error that names the bad one)."""
        if isinstance(vectors, np.ndarray) and vectors.ndim == 2 and vectors.shape[1] == self.dim:
            mat = np.ascontiguousarray(vectors, dtype=np.float32)
            if np.isfinite(mat).all():
                return mat
        if not len(vectors):
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([check_vector(v, self.dim, f"vector {i}") for i, v in enumerate(vectors)])

    def add_records(self, records: Sequence[MemoryRecord], vectors: Sequence[Sequence[float]] | np.ndarray
                    ) -> list[MemoryRecord]:
        """New rows with ascending ids, in one transaction; `vectors` may be a (n, dim) numpy array.

        A batch of `copy_min_rows` or more reserves its ids from the identity sequence in one
        round trip and streams the rows in one binary COPY (each row exactly what the row-by-row
        INSERT writes; the tsvector is computed by the server either way).
        """
        if len(records) != len(vectors):
            raise ConfigError(f"add_records got {len(records)} records but {len(vectors)} vectors; give one vector per record")
        if not records:
            return []
        mat = self._matrix(vectors)
        rows = [insert_row(rec, vec) for rec, vec in zip(records, mat, strict=True)]
        with self._tx() as conn:
            ids = self._copy_rows(conn, rows) if len(rows) >= self.copy_min_rows else self._insert_rows(conn, rows)
        return [replace(rec, id=rid) for rec, rid in zip(records, ids, strict=True)]

    def _insert_rows(self, conn: psycopg.Connection, rows: list[dict[str, Any]]) -> list[int]:
        """Row by row (pipelined: one round trip for the batch); the identity column numbers them."""
        cols = list(rows[0])
        insert = sql.SQL("INSERT INTO records ({}) VALUES ({}) RETURNING id").format(
            sql.SQL(", ").join(map(sql.Identifier, cols)), sql.SQL(", ").join(map(sql.Placeholder, cols))
        )
        ids = []
        with conn.cursor() as cur:
            cur.executemany(insert, rows, returning=True)
            while True:
                ids.append(cur.fetchone()[0])
                if not cur.nextset():
                    break
        return ids

    def _column_types(self, conn: psycopg.Connection) -> dict[str, int]:
        """The records table's column type oids (for binary COPY), read once per store."""
        types = getattr(self, "_record_types", None)
        if types is None:
            types = dict(conn.execute(
                "SELECT attname, atttypid::int FROM pg_attribute WHERE attrelid = 'records'::regclass "
                "AND attnum > 0 AND NOT attisdropped"
            ).fetchall())  # fmt: skip
            self._record_types = types
        return types

    def _copy_rows(self, conn: psycopg.Connection, rows: list[dict[str, Any]]) -> list[int]:
        """Ids reserved from the identity sequence (ascending), then one binary COPY of every row.

        COPY takes the id column's values as given (as OVERRIDING SYSTEM VALUE would); they come
        from the same sequence the INSERT path draws from, so ids stay unique and ascending.
        Text goes through the connection's NUL-safe dumpers (looked up by type oid).
        """
        ids = sorted(int(r[0]) for r in conn.execute(
            "SELECT nextval(pg_get_serial_sequence('records', 'id')) FROM generate_series(1, %s)", (len(rows),)))
        cols = ["id", *rows[0]]
        types = self._column_types(conn)
        copy = sql.SQL("COPY records ({}) FROM STDIN (FORMAT BINARY)").format(
            sql.SQL(", ").join(map(sql.Identifier, cols)))
        with conn.cursor() as cur, cur.copy(copy) as cp:
            cp.set_types([types[c] for c in cols])
            for rid, row in zip(ids, rows, strict=True):
                cp.write_row((rid, *row.values()))
        return ids

    @contextmanager
    def bulk_load(self, *, maintenance_work_mem: str = "1GB") -> Iterator[None]:
        """Many `add_records` at once: the HNSW index is dropped first and built once at the end.

        Building the graph from all the rows (pgvector's in-memory build, parallel workers) costs
        far less than inserting each row into it (milliseconds a row). Meanwhile dense search
        still answers, exactly (a scan); the rebuilt index has the migration's definition. Meant
        for a first load or one large next to the table: the rebuild covers every row. Nested
        blocks join the outermost one.
        """
        with self._bulk_lock:
            self._bulk_depth += 1
            outer = self._bulk_depth == 1
        definition = None
        try:
            if outer:
                with self._conn() as conn:
                    row = conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
                                       (self.schema, "records_embedding")).fetchone()  # fmt: skip
                    if row is not None:
                        definition = row[0]
                        conn.execute("DROP INDEX IF EXISTS records_embedding")
            yield
        finally:
            with self._bulk_lock:
                self._bulk_depth -= 1
            if outer:
                self._after_bulk(definition, maintenance_work_mem)

    def _after_bulk(self, definition: str | None, maintenance_work_mem: str) -> None:
        """Build the HNSW index back, then VACUUM ANALYZE: the planner's statistics, the visibility
        map (the index-only user counts) and the GIN pending list are as after a slow load, when
        autovacuum ran along (only ANALYZE inside a transaction, where VACUUM cannot run)."""
        with self._conn() as conn:
            inside = getattr(self._local, "conn", None) is not None
            with conn.transaction():
                if definition is not None:
                    conn.execute(sql.SQL("SET LOCAL maintenance_work_mem = {}").format(sql.Literal(maintenance_work_mem)))
                    conn.execute(definition.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
                if inside:
                    conn.execute("ANALYZE records")
            if not inside:
                conn.execute("VACUUM (ANALYZE) records")

    def _select_records(self, where: str, params: Sequence[Any]) -> list[MemoryRecord]:
        with self._conn() as conn, conn.cursor(row_factory=dict_row) as cur:
            return [record_from_row(r) for r in cur.execute(f"SELECT {RECORD_COLUMNS} FROM records WHERE {where}", params)]

    def get_records(self, user_id: str, ids: Sequence[int]) -> list[MemoryRecord]:
        return self._select_records("user_id = %s AND id = ANY(%s) ORDER BY id", (user_id, [int(i) for i in ids]))

    def records(
        self,
        user_id: str,
        *,
        include_invalid: bool = False,
        memory_type: str | None = None,
        tags_any: Sequence[str] | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        after_id: int | None = None,
        time_between: tuple[datetime | None, datetime | None] | None = None,
    ) -> list[MemoryRecord]:
        # records_user (user_id, id) and records_user_current (the same, current rows) serve these
        where, params = ["user_id = %s"], [user_id]
        if not include_invalid:
            where.append("invalid_at IS NULL")
        if after_id is not None:
            where.append("id > %s")
            params.append(int(after_id))
        if memory_type is not None:
            where.append("memory_type = %s")
            params.append(memory_type)
        if time_between is not None:
            lo, hi = time_between
            where.append("time_start IS NOT NULL")
            if lo is not None:
                where.append("time_end >= %s")
                params.append(ensure_aware(lo, what="time_between start"))
            if hi is not None:
                where.append("time_start <= %s")
                params.append(ensure_aware(hi, what="time_between end"))
        if tags_any is not None:
            # record_tags (user_id, tag, current, id), kept by triggers: a rare tag is an index range
            current = "" if include_invalid else " AND current"
            where.append(f"id IN (SELECT id FROM record_tags WHERE user_id = %s AND tag = ANY(%s::text[]){current})")
            params.extend([user_id, list(tags_any)])
        order = "id DESC" if newest_first else "id"
        return self._select_records(f"{' AND '.join(where)} ORDER BY {order} LIMIT %s", [*params, limit])

    def count_records(self, user_id: str | None = None, *, include_invalid: bool = True) -> int:
        """An index-only count (records_user / records_user_current); no counter row to contend on."""
        where, params = ["TRUE"], []
        if user_id is not None:
            where.append("user_id = %s")
            params.append(user_id)
        if not include_invalid:
            where.append("invalid_at IS NULL")
        with self._conn() as conn:
            return int(conn.execute(f"SELECT count(*) FROM records WHERE {' AND '.join(where)}", params).fetchone()[0])

    def update_record(self, record: MemoryRecord, vector: Sequence[float] | None = None) -> MemoryRecord:
        params = mutable_row(record)
        if vector is not None:
            params["embedding"] = check_vector(vector, self.dim, "update_record vector")
        update = sql.SQL("UPDATE records SET {} WHERE user_id = %(uid)s AND id = %(rid)s RETURNING id").format(
            sql.SQL(", ").join(sql.SQL("{} = {}").format(sql.Identifier(c), sql.Placeholder(c)) for c in params)
        )
        with self._tx() as conn:
            if record.id is None or conn.execute(update, params | {"uid": record.user_id, "rid": record.id}).rowcount != 1:
                raise MemlabUsageError(
                    f"cannot update a record: record {record.id!r} of user {record.user_id!r} does not exist; "
                    "add it with add_records first"
                )
            return self.get_records(record.user_id, [record.id])[0]

    def reinforce(self, user_id: str, ids: Sequence[int], at: datetime) -> None:
        ensure_aware(at, what="reinforce time")
        with self._tx() as conn:
            conn.execute(
                "UPDATE records SET strengthen_count = strengthen_count + 1, last_reinforced_at = %s, "
                "last_reinforced_at_tz = %s WHERE user_id = %s AND id = ANY(%s)",
                (at, utc_offset(at), user_id, sorted({int(i) for i in ids})),
            )

    def supersede(self, user_id: str, old_id: int, new_id: int, at: datetime) -> None:
        ensure_aware(at, what="supersede time")
        with self._tx() as conn:
            self._owned(conn, user_id, [old_id, new_id], "supersede a record")
            conn.execute(
                "UPDATE records SET invalid_at = %s, invalid_at_tz = %s, superseded_by = %s WHERE user_id = %s AND id = %s",
                (at, utc_offset(at), int(new_id), user_id, int(old_id)),
            )

    def vectors(self, user_id: str, ids: Sequence[int]) -> dict[int, list[float]]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, embedding FROM records WHERE user_id = %s AND id = ANY(%s) ORDER BY id",
                (user_id, [int(i) for i in ids]),
            )
            return {int(rid): vec.to_numpy().astype(float).tolist() for rid, vec in rows}

    def replace_vectors(self, user_id: str, vectors: Mapping[int, Sequence[float]]) -> None:
        arrays = {int(rid): check_vector(v, self.dim, f"vector of record {rid}") for rid, v in vectors.items()}
        with self._tx() as conn:
            self._owned(conn, user_id, list(arrays), "replace vectors")
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE records SET embedding = %s WHERE user_id = %s AND id = %s",
                    [(vec, user_id, rid) for rid, vec in arrays.items()],
                )

    # -- privacy and stats ----------------------------------------------------------------------------

    def forget_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of the user in every table (the HNSW and GIN entries go with the rows)."""
        with self._tx() as conn:
            return self._delete_user_rows(conn, user_id, USER_TABLES)

    def stats(self) -> dict[str, Any]:
        with self._conn() as conn:
            counts = self._table_counts(conn)
            counts["records_current"] = int(
                conn.execute("SELECT count(*) FROM records WHERE invalid_at IS NULL").fetchone()[0]
            )
            size = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                (self.schema,),
            ).fetchone()[0]
        return {
            "backend": "postgres",
            "path": f"{redact(self.dsn)} (schema {self.schema})",
            "counts": counts,
            "bytes": int(size),
            "dim": self.dim,
            "embedder_name": self.stored_embedder_name,
            "schema_version": self.schema_version,
            "schema_version_known": SCHEMA_VERSION,
            "pgvector": self.pgvector_version,
            "dense_paths": dict(self.dense_counts),
        }
