"""The embedded store: one SQLite file (or ':memory:') with sqlite-vec for vectors and FTS5 for text.

One connection per store, shared by all threads under a re-entrant lock, so ':memory:' is one
database (two connections would see two databases). Float vectors live once, in
`record_vectors`; their sign bits in a `vec0` table partitioned by user with a `valid` metadata
column, so the coarse KNN over a partition too large for memory runs inside the user's
partition and filters "current only" inside the search (a global KNN followed by a user filter
starves small users). Text lives once, in `records`: `records_fts` is contentless and its terms
carry the owner's key, so full-text postings are per user (engine.stores.sqlite.search).

Dense search runs on in-memory copies of the users' partitions (engine.stores.sqlite.vectors),
current while their version equals the partition's row in `partition_versions`, which every
write to the user's vectors or validity bumps, from any connection or process; this store's own
writes patch its copy in place, a rollback drops it.

Opening is safe when many processes and threads open one new or old file at once: WAL is
switched on with retries, and the schema migrations run under the write lock, once
(engine.stores.sqlite.migrations). The parts: messages, profiles, cursors, kv and logs are the
shared SQL (engine.stores.sql), records in engine.stores.sqlite.records, search in
engine.stores.sqlite.search.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from engine.core.errors import ConfigError, MemlabUsageError, StoreError
from engine.core.records import ProfileHistoryEntry, UserProfile
from engine.stores.dialect import SQLITE
from engine.stores.sql import USER_TABLES, SharedSQL
from engine.stores.sqlite.driver import (
    connect,
    driver_name,
    enable_wal,
    require_driver,
    sqlite_module,
)
from engine.stores.sqlite.bm25 import DocLengths, Postings
from engine.stores.sqlite.migrations import migrate, schema_version
from engine.stores.sqlite.records import SQLiteRecords
from engine.stores.sqlite.search import EXACT_KNN_MAX, SQLiteSearch
from engine.stores.sqlite.sidecar import VectorSidecar
from engine.stores.sqlite.vector_cache import VECTOR_CACHE_MB, VectorCache, partition_from_rows
from engine.stores.sqlite.vectors import VectorPartition

__all__ = ["PAGE_SIZE", "SQLiteStore"]

#: Page size of new files (bytes).
PAGE_SIZE = 8192
#: Where statement journals and temporary tables live (files only around large rewrites: `_temp_on_disk`).
TEMP_STORE = "MEMORY"
#: Users whose profile a store keeps in memory (all forgotten when more are read).
PROFILES_KEPT = 1024


class SQLiteStore(SharedSQL, SQLiteRecords, SQLiteSearch):
    """The `Store` protocol on SQLite + sqlite-vec + FTS5 (see module docstring)."""

    dialect = SQLITE
    USER_SOURCES = ("session_heads", "record_counts", "profiles", "events")

    def __init__(
        self,
        path: str = ":memory:",
        *,
        dim: int = 384,
        embedder_name: str = "hash",
        busy_timeout_ms: int = 5000,
        exact_knn_max: int = EXACT_KNN_MAX,
        rescore_factor: int = 4,
        vector_cache_mb: float = VECTOR_CACHE_MB,
    ):
        require_driver()
        if dim <= 0:
            raise ConfigError(f"dim must be a positive integer, got {dim}")
        self.path = str(path)
        self.dim = int(dim)
        self.embedder_name = embedder_name
        self.exact_knn_max = int(exact_knn_max)
        self.rescore_factor = max(1, int(rescore_factor))
        self._memory = self.path == ":memory:" or self.path.startswith("file::memory:")
        self._lock = threading.RLock()
        self._depth = 0
        #: (user, tags, limit, order) -> (record_writes counter, records): engine.stores.sqlite.records
        self._tagged_cache: dict[tuple, tuple[int, tuple]] = {}
        #: (user, id) -> record, read at record_writes `_by_id_at` (get_records)
        self._by_id: dict[tuple[str, int], Any] = {}
        self._by_id_at: int | None = None
        self._bulk_depth = 0  # nested `bulk_load` blocks (engine.stores.sqlite.records)
        self._closed = False
        self._partition_sizes: dict[str, int] = {}
        #: user -> their profile as read here last (a turn reads it, whole, every turn): dropped when
        #: it is saved or forgotten here, and with the other caches (a rollback, another connection's commit)
        self._profiles: dict[str, UserProfile] = {}
        #: user -> (whether their stored vectors are sparse, records when sampled), for searches from vec0
        self._sparse_users: dict[str, tuple[bool, int]] = {}
        self.vector_cache_bytes = int(max(0.0, float(vector_cache_mb)) * 2**20)
        #: user -> in-memory vectors (least recently used first), at most vector_cache_bytes in all
        self._vcache = VectorCache(budget_bytes=self.vector_cache_bytes, dim=self.dim)
        self._sidecar: VectorSidecar | None = None
        self._data_version: int | None = None
        #: user -> token count of each of their rows in records_fts (engine.stores.sqlite.bm25)
        self._doclens = DocLengths()
        #: term -> postings of records_fts, dropped when a write touches the term (bm25.Postings)
        self._postings = Postings()
        self._fts_vocab = False
        self._conn = None
        with self._errors():
            self._conn = connect(self.path, busy_timeout_ms=int(busy_timeout_ms))
        try:
            self._open_connection(int(busy_timeout_ms))
        except BaseException:
            self.close()
            raise

    # -- plumbing ------------------------------------------------------------------------------

    def _open_connection(self, busy_timeout_ms: int) -> None:
        """Settings, WAL (files) and the schema: safe when many openers race on one new file."""
        with self._errors():
            self.conn.execute("PRAGMA foreign_keys = ON")
            # a new file only (an existing one keeps its size): a 1.5 KB float vector row takes a
            # third of an 8 KB page instead of half of a 4 KB one (~2.0 KB -> ~1.6 KB per record)
            self.conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            # vec0 writes into ~1.5 MB chunk blobs; the default 2 MB cache thrashes on them
            self.conn.execute("PRAGMA cache_size = -65536")
            # a write inside a transaction keeps each page's pre-image for its savepoint in a statement
            # journal, spilled to a new temporary *file* past 64 KiB (8 pages of 8 KB: one message
            # with its indexes): in memory, a turn's commits cost ~0.1 ms less each (measured); the
            # few writes that rewrite much of the file switch back to files (`_temp_on_disk`)
            self.conn.execute(f"PRAGMA temp_store = {TEMP_STORE}")
            if not self._memory:
                enable_wal(self.conn, busy_timeout_ms=busy_timeout_ms)
                self.conn.execute("PRAGMA synchronous = NORMAL")
            self._open_schema()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn driver errors into StoreError naming the file and the fix."""
        try:
            yield
        except (MemlabUsageError, StoreError):
            raise
        except UnicodeEncodeError as exc:  # a lone surrogate cannot be stored as UTF-8 text
            raise MemlabUsageError(
                f"text to store contains {exc.object[exc.start:exc.end]!r} at position {exc.start}, a lone UTF-16 "
                "surrogate that is not valid Unicode; fix the client's encoding or clean the text first, e.g. "
                "text.encode('utf-8', 'replace').decode('utf-8')"
            ) from None
        except Exception as exc:
            driver = sqlite_module()
            if driver is not None and isinstance(exc, driver.Error):
                raise StoreError(self._explain(exc)) from exc
            raise

    def _where(self) -> str:
        return "the in-memory database" if self._memory else repr(self.path)

    def _explain(self, exc: Exception) -> str:
        text = str(exc)
        low = text.lower()
        if "locked" in low or "busy" in low:
            fix = "another process holds a write lock; close it or raise busy_timeout_ms"
        elif "readonly" in low or "read-only" in low:
            fix = "the file or its directory is read-only; fix permissions or open a writable copy"
        elif "full" in low:
            fix = "the disk is full; free space or move the database"
        elif "not a database" in low or "malformed" in low or "corrupt" in low:
            fix = "it is not a memlab database or it is corrupt; restore a backup or move it aside and start a new file"
        elif "unable to open" in low:
            fix = "the file cannot be opened; check that its directory exists and is writable"
        else:
            fix = "see the SQLite message above"
        return f"SQLite store {self._where()}: {text} ({fix})"

    @property
    def conn(self) -> Any:
        if self._closed or self._conn is None:
            raise StoreError(f"store {self.path!r} is closed; open a new SQLiteStore")
        return self._conn

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """The store's connection under its lock, for tools that read the tables directly (check)."""
        with self._lock, self._errors():
            yield self.conn

    def _open_schema(self) -> None:
        """Run pending migrations (once, under the write lock), then check the file's dimension."""
        migrate(self.conn, dim=self.dim, embedder_name=self.embedder_name, where=self._where())
        stored = int(self._meta("dim"))
        if stored != self.dim:
            raise ConfigError(
                f"{self.path!r} holds {stored}-dimensional vectors but dim={self.dim} was asked; "
                f"open it with dim={stored} (and the same embedder), use a new file, "
                "or re-embed every record with replace_vectors into a new store"
            )
        self.stored_embedder_name = self._meta("embedder_name")
        if not self._memory:  # large partitions saved beside the file, for a fast cold start (never the truth)
            self._sidecar = VectorSidecar(self.path, self.dim, self._meta("store_id"))

    def _meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    @property
    def schema_version(self) -> int:
        with self._lock, self._errors():
            return schema_version(self.conn)

    def close(self) -> None:
        with self._lock:
            if not self._closed and self._conn is not None:
                self._save_partitions()
                with self._errors():
                    self._conn.close()
            self._closed = True

    def _save_partitions(self) -> None:
        """Save the current in-memory partitions that changed since their copy on disk (sidecar)."""
        if self._sidecar is None or self._depth:
            return
        try:
            for user_id in list(self._vcache):
                part = self._vcache[user_id]
                if self._stored_version(self._conn, user_id) == part.version:
                    self._sidecar.save(self._conn, user_id, part)
        except Exception:  # noqa: BLE001, S110 - a cache that could not be saved is rebuilt from the database
            pass

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Writes inside land together or not at all; nested blocks become savepoints.

        Holds the store's lock for the whole block, so other threads wait instead of joining it.
        """
        with self._lock:
            conn = self.conn
            depth = self._depth
            with self._errors():
                conn.execute("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT sp{depth}")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                with self._errors():
                    if depth == 0:
                        conn.execute("ROLLBACK")
                    else:
                        conn.execute(f"ROLLBACK TO sp{depth}")
                        conn.execute(f"RELEASE sp{depth}")
                self._drop_caches()
                raise
            else:
                self._depth -= 1
                try:
                    with self._errors():
                        conn.execute("COMMIT" if depth == 0 else f"RELEASE sp{depth}")
                except BaseException:
                    self._drop_caches()
                    raise

    def _drop_caches(self) -> None:
        """Forget everything read into memory (after a rollback the cached state may never have landed)."""
        self._partition_sizes.clear()
        self._profiles.clear()
        self._vcache.clear()
        self._doclens.clear()
        self._postings.clear()
        self._by_id.clear()
        self._by_id_at = None
        self._tagged_cache.clear()
        self._fts_vocab = False  # a rollback undoes the fts5vocab table if this transaction made it

    def _sync(self, conn: Any) -> None:
        """Drop what reads kept here without a version of their own (partition sizes, profiles,
        document lengths, postings) when another connection has committed since the last look."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._partition_sizes.clear()
            self._profiles.clear()
            self._doclens.clear()
            self._postings.clear()
            self._data_version = version

    @contextmanager
    def _write(self) -> Iterator[Any]:
        with self._lock, self._errors(), self.transaction():
            yield self.conn

    @contextmanager
    def _write_one(self) -> Iterator[Any]:
        """One statement is atomic by itself: inside a transaction no savepoint around it, outside
        one no BEGIN/COMMIT (the autocommit connection commits it). A log append costs one execute."""
        with self._lock, self._errors():
            yield self.conn

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self._lock, self._errors():
            yield self.conn

    # -- partition sizes and in-memory vector partitions -------------------------------------------

    def _partition_size(self, conn: Any, user_id: str) -> int:
        """How many records (current or not) the user has, "*" for everyone (cached until a write)."""
        size = self._partition_sizes.get(user_id)
        if size is None:
            if user_id == "*":
                size = int(conn.execute("SELECT coalesce(sum(total), 0) FROM record_counts").fetchone()[0])
            else:
                row = conn.execute("SELECT total FROM record_counts WHERE user_id = ?", (user_id,)).fetchone()
                size = 0 if row is None else int(row[0])
            self._partition_sizes[user_id] = size
        return size

    @staticmethod
    def _stored_version(conn: Any, user_id: str) -> int:
        row = conn.execute("SELECT version FROM partition_versions WHERE user_id = ?", (user_id,)).fetchone()
        return 0 if row is None else int(row[0])

    def _bump(self, conn: Any, user_id: str, patch: Callable[[VectorPartition], None] | None = None) -> None:
        """Record a write to the user's vectors or validity (inside the write's transaction).

        This store's in-memory copy is patched when it was current before the write, else dropped.
        """
        old = self._stored_version(conn, user_id)
        new = int(conn.execute(
            "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vec_seq' RETURNING value"
        ).fetchone()[0])
        conn.execute(
            "INSERT INTO partition_versions(user_id, version) VALUES (?, ?) "
            "ON CONFLICT(user_id) DO UPDATE SET version = excluded.version",
            (user_id, new),
        )
        part = self._vcache.pop(user_id)
        if part is None or part.version != old or patch is None:
            return
        try:
            patch(part)
        except KeyError:  # a row this copy never saw: read the partition again when next needed
            return
        part.version = new
        self._vcache.put(user_id, part)

    def _vector_partition(self, conn: Any, user_id: str, *, build: bool = True) -> VectorPartition | None:
        """The user's current vectors in memory (read on first use); over the memory budget a mapped
        copy (floats in the saved file), None when even that cannot be had (no file, a transaction,
        over the mapped budget): the caller then searches with vec0."""
        version = self._stored_version(conn, user_id)
        part = self._vcache.current(user_id, version)
        if part is not None or not build:
            return part
        size = self._partition_size(conn, user_id)
        if not self._vcache.fits(size):
            # over the budget: the sign bits and ids in memory, the floats memory-mapped from the saved copy
            if self._sidecar is None or self._depth or not self._vcache.fits_mapped(size):
                return None
            part = self._sidecar.load(conn, user_id, version, mapped=True)
            if part is None:
                part = self._sidecar.build(conn, user_id, version, size)
            return None if part is None else self._vcache.put(user_id, part)
        part = None if self._sidecar is None else self._sidecar.load(conn, user_id, version)
        if part is None:
            rows = conn.execute(
                "SELECT r.id, r.valid, v.embedding FROM records r JOIN record_vectors v ON v.id = r.id "
                "WHERE r.user_id = ? ORDER BY r.id",
                (user_id,),
            ).fetchall()
            part = partition_from_rows(version, rows, self.dim)
            if self._sidecar is not None and self._depth == 0:
                self._sidecar.save(conn, user_id, part)
        return self._vcache.put(user_id, part)

    # -- profiles ------------------------------------------------------------------------------------

    def get_profile(self, user_id: str) -> UserProfile:
        """The stored profile, read from the database only when it may have changed since the last
        read here: a long conversation's profile row (700 values, 110 KB of JSON) took 0.13 ms to
        read and parse every turn. Saving here, forgetting the user, a rollback or another
        connection's commit (`PRAGMA data_version`) drops the kept one."""
        with self._read() as conn:
            self._sync(conn)
            got = self._profiles.get(user_id)
            if got is None:
                got = super().get_profile(user_id)
                if len(self._profiles) >= PROFILES_KEPT:
                    self._profiles.clear()
                self._profiles[user_id] = got
            return got

    def save_profile(self, profile: UserProfile, history: ProfileHistoryEntry | None = None) -> None:
        with self._lock:
            self._profiles.pop(profile.user_id, None)
            super().save_profile(profile, history)

    # -- privacy and stats -------------------------------------------------------------------------

    def forget_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of the user; for files also checkpoint, merge FTS and VACUUM so bytes go."""
        with self._temp_on_disk():
            return self._forget_user(user_id)

    def _forget_user(self, user_id: str) -> dict[str, int]:
        with self._write() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM records WHERE user_id = ?", (user_id,))]
            counts = {"records_vec": sum(conn.execute("DELETE FROM records_vec WHERE rowid = ?", (rid,)).rowcount
                                         for rid in ids)}  # fmt: skip
            counts["record_vectors"] = conn.execute(
                "DELETE FROM record_vectors WHERE id IN (SELECT id FROM records WHERE user_id = ?)", (user_id,)
            ).rowcount
            # the index has no owner column (its terms carry the owner's key): delete by the user's ids
            counts["records_fts"] = sum(conn.execute("DELETE FROM records_fts WHERE rowid = ?", (rid,)).rowcount
                                        for rid in ids)  # fmt: skip
            counts.update(self._delete_user_rows(conn, user_id, USER_TABLES))
            # no trace of the user stays; a later partition of the same name gets a fresh version
            self._delete_user_rows(conn, user_id, ("partition_versions", "record_counts"))
            self._vcache.pop(user_id)
            self._sparse_users.pop(user_id, None)
            self._doclens.pop(user_id)
            self._postings.clear()
            if self._sidecar is not None:
                self._sidecar.forget(user_id)
            # merge FTS segments so the deleted tokens leave the index, not just the content table
            conn.execute("INSERT INTO records_fts(records_fts) VALUES ('optimize')")
            self._partition_sizes.clear()
            self._profiles.pop(user_id, None)
        if not self._memory:
            with self._lock, self._errors():
                if self._depth == 0:
                    self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    self.conn.execute("VACUUM")
                    self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return counts

    @contextmanager
    def _temp_on_disk(self) -> Iterator[None]:
        """Statement journals and temporary copies in files for a block that rewrites much of the
        database (forget_user's deletes, merge and VACUUM; the bulk load's full-text merge): in
        memory they would hold as many bytes as the pages changed (gigabytes at a million records).
        Switched only outside a transaction (SQLite cannot switch inside one); the switch drops the
        connection's temporary tables, so the fts5vocab table is made again when next needed."""
        with self._lock:
            switch = self._depth == 0 and not self.conn.in_transaction
            if switch:
                with self._errors():
                    self.conn.execute("PRAGMA temp_store = FILE")
            try:
                yield
            finally:
                if switch:
                    with self._errors():
                        self.conn.execute(f"PRAGMA temp_store = {TEMP_STORE}")
                    self._fts_vocab = False

    def stats(self) -> dict[str, Any]:
        with self._read() as conn:
            counts = self._table_counts(conn)
            counts["records_current"] = int(conn.execute("SELECT count(*) FROM records WHERE valid = 1").fetchone()[0])
            page = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
        size = page
        if not self._memory:
            size = sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p))
        return {
            "backend": "sqlite",
            "path": self.path,
            "counts": counts,
            "bytes": int(size),
            "dim": self.dim,
            "embedder_name": self.stored_embedder_name,
            "schema_version": self.schema_version,
            "driver": driver_name(),
        }
