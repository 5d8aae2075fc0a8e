"""The embedded store: one SQLite file (or ':memory:') with sqlite-vec for vectors and FTS5 for text.

One connection per store, shared by all threads under a re-entrant lock, so ':memory:' is one
database (the reference opened two connections and saw two databases). Vectors live in a `vec0`
table partitioned by user with a `valid` metadata column, so the KNN runs inside the user's
partition and filters "current only" inside the search (a global KNN followed by a user filter
starved small users: reference defect 4).

The dense search itself runs on an in-memory copy of the user's partition (`_VectorPartition`,
a numpy matrix read once from `record_vectors`): exact, and ~15 ms at 100k vectors where vec0's
float scan costs ~1 ms per 1k. The copy is current while its version equals the partition's row
in `partition_versions`, which every write to the user's vectors or validity bumps, from any
connection or process; this store's own writes patch it in place, a rollback drops it. Partitions
over `vector_cache_mb` use vec0: exact up to `exact_knn_max` vectors, above that a KNN on a
binary-quantised column rescored on the float vectors.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from engine.core.clock import ensure_aware
from engine.core.errors import (
    ConfigError,
    CursorRewindError,
    MemlabUsageError,
    StoreError,
)
from engine.core.records import (
    Event,
    MemoryRecord,
    Message,
    ProfileHistoryEntry,
    ScoreRow,
    SourcePointer,
    TimeSpan,
    UserProfile,
)
from engine.core.text import fts_query, index_text

__all__ = ["SQLiteStore", "SCHEMA_VERSION", "driver_name"]


def _pick_driver():
    """The first DB-API SQLite module whose connections can load extensions (sqlite-vec needs it)."""
    candidates = []
    try:
        import sqlean as mod  # sqlean.py: SQLite with extension loading enabled

        candidates.append(("sqlean", mod))
    except ImportError:
        pass
    try:
        from pysqlite3 import dbapi2 as mod  # type: ignore[import-not-found]

        candidates.append(("pysqlite3", mod))
    except ImportError:
        pass
    import sqlite3 as mod

    candidates.append(("sqlite3", mod))
    for name, module in candidates:
        if hasattr(module.Connection, "enable_load_extension"):
            return name, module
    return None, None


_DRIVER_NAME, _sqlite = _pick_driver()


def driver_name() -> str | None:
    """Which SQLite driver the store uses ("sqlean", "pysqlite3", "sqlite3"), None if none fits."""
    return _DRIVER_NAME


SCHEMA_VERSION = 2
#: Partitions up to this many vectors are searched exactly; larger ones coarse-to-fine.
EXACT_KNN_MAX = 20000
#: vec0 refuses k above this.
_VEC_MAX_K = 4096
#: Default memory for the in-memory vector partitions (100k vectors of 384 dims take ~150 MB).
VECTOR_CACHE_MB = 1024


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _dt(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


@lru_cache(maxsize=4096)
def _tags(text: str) -> tuple[str, ...]:
    """A record's tags from their JSON (few distinct values, parsed once each)."""
    return tuple(json.loads(text))


def _ids_json(ids: Sequence[int]) -> str:
    return json.dumps([int(i) for i in ids])


# -- migrations: named functions, applied in order, recorded in PRAGMA user_version ----------------


def _migration_001_initial(conn, dim: int) -> None:
    bits = f", embedding_bits bit[{dim}]" if dim % 8 == 0 else ""
    statements = [
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
            role TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL, created_ts REAL NOT NULL,
            name TEXT, tool_call_id TEXT)""",
        "CREATE INDEX messages_user_session ON messages(user_id, session_id, id)",
        """CREATE TABLE records (
            id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, content TEXT NOT NULL,
            memory_type TEXT NOT NULL, tags TEXT NOT NULL, theme TEXT NOT NULL,
            time_start TEXT, time_end TEXT, start_ts REAL, end_ts REAL, granularity TEXT, time_text TEXT,
            location TEXT, reason TEXT, purpose TEXT, keywords TEXT NOT NULL, source TEXT,
            created_at TEXT NOT NULL, created_ts REAL NOT NULL, last_reinforced_at TEXT,
            strengthen_count INTEGER NOT NULL DEFAULT 0, valid_from TEXT, invalid_at TEXT,
            superseded_by INTEGER, valid INTEGER NOT NULL DEFAULT 1)""",
        "CREATE INDEX records_user_valid ON records(user_id, valid, id)",
        "CREATE VIRTUAL TABLE records_fts USING fts5(body, user_id UNINDEXED, tokenize='unicode61')",
        # float vectors by id: vec0 point lookups by rowid are slow, rescoring and vectors() read here
        "CREATE TABLE record_vectors (id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)",
        f"""CREATE VIRTUAL TABLE records_vec USING vec0(
            user_id text partition key, valid integer,
            embedding float[{dim}] distance_metric=cosine{bits})""",
        """CREATE TABLE profiles (user_id TEXT PRIMARY KEY, fields TEXT NOT NULL, version INTEGER NOT NULL,
            updated_at TEXT)""",
        """CREATE TABLE profile_history (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL,
            version INTEGER NOT NULL, at TEXT NOT NULL, entry TEXT NOT NULL)""",
        "CREATE INDEX profile_history_user ON profile_history(user_id, id)",
        """CREATE TABLE cursors (user_id TEXT NOT NULL, session_id TEXT NOT NULL, name TEXT NOT NULL,
            value INTEGER NOT NULL, PRIMARY KEY (user_id, session_id, name))""",
        "CREATE TABLE kv (user_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (user_id, key))",
        """CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL,
            session_id TEXT NOT NULL, kind TEXT NOT NULL, at TEXT NOT NULL, at_ts REAL NOT NULL,
            turn INTEGER, event_no INTEGER, payload TEXT NOT NULL)""",
        "CREATE INDEX events_user ON events(user_id, session_id, id)",
        """CREATE TABLE scores (id INTEGER PRIMARY KEY AUTOINCREMENT, event_id INTEGER NOT NULL,
            user_id TEXT NOT NULL, record_id INTEGER NOT NULL, row TEXT NOT NULL)""",
        "CREATE INDEX scores_event ON scores(event_id, id)",
        "CREATE INDEX scores_user ON scores(user_id)",
    ]
    for sql in statements:
        conn.execute(sql)


def _migration_002_partition_versions(conn, dim: int) -> None:
    """A version per user partition, bumped by every write to its vectors or validity.

    Versions come from one store-wide sequence (meta `vec_seq`), so a number is never reused,
    even after forget_user: a reader holding an in-memory copy of a partition (see
    `_VectorPartition`) knows it is current when the version it read it at is still the stored one,
    whichever connection or process wrote last.
    """
    conn.execute("CREATE TABLE partition_versions (user_id TEXT PRIMARY KEY, version INTEGER NOT NULL)")
    conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('vec_seq', '1')")
    conn.execute("INSERT INTO partition_versions(user_id, version) SELECT DISTINCT user_id, 1 FROM records")


MIGRATIONS: tuple[Callable[[Any, int], None], ...] = (_migration_001_initial, _migration_002_partition_versions)


class _VectorPartition:
    """One user's vectors in memory: a read cache over `record_vectors` for exact KNN.

    A matrix product over the whole partition is exact and, with numpy, faster than vec0's float
    scan (~15 ms at 100k vectors of 384 dims against ~100 ms). Valid as long as `version`
    equals the partition's row in `partition_versions`; this store's own writes patch it in
    place, anything else (another connection, a rollback) makes it be read again.
    """

    __slots__ = ("version", "n", "ids", "mat", "inv_norm", "valid", "index")

    def __init__(self, version: int, ids: np.ndarray, mat: np.ndarray, valid: np.ndarray):
        self.version = version
        self.n = len(ids)
        self.ids = ids
        self.mat = mat
        self.inv_norm = self._inv_norm(mat)
        self.valid = valid
        self.index = {int(rid): i for i, rid in enumerate(ids.tolist())}

    @staticmethod
    def _inv_norm(mat: np.ndarray) -> np.ndarray:
        norm = np.linalg.norm(mat, axis=1)
        return np.divide(1.0, norm, out=np.zeros_like(norm), where=norm > 0).astype(np.float32)

    @property
    def nbytes(self) -> int:
        return int(self.mat.nbytes + self.ids.nbytes + self.inv_norm.nbytes + self.valid.nbytes) + 100 * len(self.index)

    def append(self, ids: Sequence[int], mat: np.ndarray, valid: Sequence[bool]) -> None:
        m = len(ids)
        if self.n + m > len(self.ids):  # grow by doubling so a stream of small adds stays linear
            cap = max(2 * len(self.ids), self.n + m, 16)
            for name in ("ids", "mat", "inv_norm", "valid"):
                old = getattr(self, name)
                new = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
                new[: self.n] = old[: self.n]
                setattr(self, name, new)
        sl = slice(self.n, self.n + m)
        self.ids[sl] = ids
        self.mat[sl] = mat
        self.inv_norm[sl] = self._inv_norm(mat)
        self.valid[sl] = valid
        for i, rid in enumerate(ids):
            self.index[int(rid)] = self.n + i
        self.n += m

    def set_vector(self, rid: int, arr: np.ndarray) -> None:
        i = self.index[int(rid)]
        self.mat[i] = arr
        self.inv_norm[i] = self._inv_norm(arr.reshape(1, -1))[0]

    def set_valid(self, rid: int, valid: bool) -> None:
        self.valid[self.index[int(rid)]] = valid

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        return {int(rid): self.mat[self.index[int(rid)]] for rid in ids if int(rid) in self.index}

    def search(self, q: np.ndarray, k: int, include_invalid: bool) -> list[tuple[int, float]]:
        """Exact top-k by cosine, best first, ties by id."""
        n = self.n
        if n == 0:
            return []
        qn = float(np.linalg.norm(q))
        # einsum, not BLAS: a threaded sgemv is 2-4x slower on a busy 2-core machine and no faster idle
        scores = np.einsum("ij,j->i", self.mat[:n], q) * self.inv_norm[:n]
        scores *= np.float32(1.0 / qn) if qn > 0 else np.float32(0.0)
        eligible = n
        if not include_invalid:
            valid = self.valid[:n]
            eligible = int(np.count_nonzero(valid))
            scores[~valid] = -np.inf
        k = min(k, eligible)
        if k <= 0:
            return []
        if k < n:  # everything at least as good as the k-th score, so ties at the edge go by id
            kth = np.partition(scores, n - k)[n - k]
            cand = np.flatnonzero(scores >= kth)
        else:
            cand = np.flatnonzero(scores > -np.inf)
        ids = self.ids[cand]
        order = np.lexsort((ids, -scores[cand]))[:k]
        return [(int(ids[i]), float(scores[cand[i]])) for i in order]


class SQLiteStore:
    """The `Store` protocol on SQLite + sqlite-vec + FTS5 (see module docstring)."""

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
        if _sqlite is None:
            raise StoreError(
                "no SQLite driver here can load extensions (sqlite-vec needs it); "
                "install one: pip install sqlean.py==3.50.4.5"
            )
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
        self._closed = False
        self._partition_sizes: dict[str, int] = {}
        #: user -> in-memory vectors (least recently used first), at most vector_cache_bytes in all
        self._vcache: OrderedDict[str, _VectorPartition] = OrderedDict()
        self.vector_cache_bytes = int(max(0.0, float(vector_cache_mb)) * 2**20)
        self._data_version: int | None = None
        self._conn = None
        with self._errors():
            self._conn = _sqlite.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=busy_timeout_ms / 1000
            )
            self._load_vec()
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            # vec0 writes into ~1.5 MB chunk blobs; the default 2 MB cache thrashes on them
            self._conn.execute("PRAGMA cache_size = -65536")
            if not self._memory:
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        self._has_bits = self.dim % 8 == 0

    # -- plumbing ------------------------------------------------------------------------------

    def _load_vec(self) -> None:
        import sqlite_vec

        try:
            self._conn.enable_load_extension(True)
            sqlite_vec.load(self._conn)
            self._conn.enable_load_extension(False)
        except Exception as exc:  # the driver cannot load it: say how to fix
            raise StoreError(
                f"could not load sqlite-vec into {_DRIVER_NAME} ({exc}); "
                "install it with pip install sqlite-vec==0.1.9 sqlean.py==3.50.4.5"
            ) from exc

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
            if _sqlite is not None and isinstance(exc, _sqlite.Error):
                raise StoreError(self._explain(exc)) from exc
            raise

    def _explain(self, exc: Exception) -> str:
        text = str(exc)
        low = text.lower()
        where = "the in-memory database" if self._memory else repr(self.path)
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
        return f"SQLite store {where}: {text} ({fix})"

    @property
    def conn(self):
        if self._closed or self._conn is None:
            raise StoreError(f"store {self.path!r} is closed; open a new SQLiteStore")
        return self._conn

    def _migrate(self) -> None:
        conn = self.conn
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise StoreError(
                f"{self.path!r} has schema version {version}, newer than this memlab ({len(MIGRATIONS)}); "
                "upgrade memlab"
            )
        if version == 0:
            # a file with tables but no version is not ours
            tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
            if tables:
                raise StoreError(
                    f"{self.path!r} is an SQLite file but not a memlab store; choose another path"
                )
        for number in range(version, len(MIGRATIONS)):
            conn.execute("BEGIN IMMEDIATE")
            try:
                MIGRATIONS[number](conn, self.dim)
                if number == 0:
                    conn.executemany(
                        "INSERT INTO meta(key, value) VALUES (?, ?)",
                        [("dim", str(self.dim)), ("embedder_name", self.embedder_name)],
                    )
                conn.execute(f"PRAGMA user_version = {number + 1}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        stored = int(self._meta("dim"))
        if stored != self.dim:
            raise ConfigError(
                f"{self.path!r} holds {stored}-dimensional vectors but dim={self.dim} was asked; "
                f"open it with dim={stored} (and the same embedder), use a new file, "
                "or re-embed every record with replace_vectors into a new store"
            )
        self.stored_embedder_name = self._meta("embedder_name")

    def _meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    @property
    def schema_version(self) -> int:
        with self._lock, self._errors():
            return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if not self._closed and self._conn is not None:
                with self._errors():
                    self._conn.close()
            self._closed = True

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc) -> None:
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
        self._vcache.clear()

    def _sync(self, conn) -> None:
        """Drop the partition sizes when another connection has committed since the last look."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._partition_sizes.clear()
            self._data_version = version

    @contextmanager
    def _write(self) -> Iterator[Any]:
        with self._lock, self._errors(), self.transaction():
            yield self.conn

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self._lock, self._errors():
            yield self.conn

    # -- in-memory vector partitions -------------------------------------------------------------

    @staticmethod
    def _stored_version(conn, user_id: str) -> int:
        row = conn.execute("SELECT version FROM partition_versions WHERE user_id = ?", (user_id,)).fetchone()
        return 0 if row is None else int(row[0])

    def _bump(self, conn, user_id: str, patch: Callable[[_VectorPartition], None] | None = None) -> None:
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
        part = self._vcache.pop(user_id, None)
        if part is None or part.version != old or patch is None:
            return
        try:
            patch(part)
        except KeyError:  # a row this copy never saw: read the partition again when next needed
            return
        part.version = new
        self._vcache[user_id] = part
        self._trim_vector_cache()

    def _trim_vector_cache(self) -> None:
        total = sum(p.nbytes for p in self._vcache.values())
        while self._vcache and total > self.vector_cache_bytes:
            _, evicted = self._vcache.popitem(last=False)
            total -= evicted.nbytes

    def _vector_partition(self, conn, user_id: str, *, build: bool = True) -> _VectorPartition | None:
        """The user's current vectors in memory (read on first use), None when over the memory budget."""
        version = self._stored_version(conn, user_id)
        part = self._vcache.get(user_id)
        if part is not None:
            if part.version == version:
                self._vcache.move_to_end(user_id)
                return part
            del self._vcache[user_id]
        if not build or self._partition_size(conn, user_id) * (self.dim * 4 + 120) > self.vector_cache_bytes:
            return None
        rows = conn.execute(
            "SELECT r.id, r.valid, v.embedding FROM records r JOIN record_vectors v ON v.id = r.id "
            "WHERE r.user_id = ? ORDER BY r.id",
            (user_id,),
        ).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        valid = np.fromiter((bool(r[1]) for r in rows), dtype=bool, count=len(rows))
        mat = np.frombuffer(bytearray(b"".join(r[2] for r in rows)), dtype=np.float32).reshape(len(rows), self.dim)
        self._vcache[user_id] = _VectorPartition(version, ids, mat, valid)
        self._trim_vector_cache()
        return self._vcache.get(user_id)

    # -- messages --------------------------------------------------------------------------------

    def add_message(self, message: Message) -> Message:
        with self._write() as conn:
            cur = conn.execute(
                """INSERT INTO messages(user_id, session_id, role, content, created_at, created_ts, name,
                tool_call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    message.user_id,
                    message.session_id,
                    message.role,
                    message.content,
                    message.created_at.isoformat(),
                    message.created_at.timestamp(),
                    message.name,
                    message.tool_call_id,
                ),
            )
            return replace(message, id=int(cur.lastrowid))

    _MSG_COLS = "id, user_id, session_id, role, content, created_at, name, tool_call_id"

    @staticmethod
    def _message(row) -> Message:
        return Message(
            id=row[0],
            user_id=row[1],
            session_id=row[2],
            role=row[3],
            content=row[4],
            created_at=datetime.fromisoformat(row[5]),
            name=row[6],
            tool_call_id=row[7],
        )

    def messages(
        self,
        user_id: str,
        *,
        session_id: str | None = None,
        after_id: int | None = None,
        upto_id: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        roles: Sequence[str] | None = None,
    ) -> list[Message]:
        sql = f"SELECT {self._MSG_COLS} FROM messages WHERE user_id = ?"
        args: list[Any] = [user_id]
        if session_id is not None:
            sql += " AND session_id = ?"
            args.append(session_id)
        if after_id is not None:
            sql += " AND id > ?"
            args.append(int(after_id))
        if upto_id is not None:
            sql += " AND id <= ?"
            args.append(int(upto_id))
        if roles is not None:
            sql += " AND role IN (SELECT value FROM json_each(?))"
            args.append(_j([str(r) for r in roles]))
        sql += " ORDER BY id DESC" if newest_first else " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        with self._read() as conn:
            return [self._message(r) for r in conn.execute(sql, args)]

    def count_messages(self, user_id: str, *, session_id: str | None = None, after_id: int | None = None) -> int:
        sql, args = "SELECT count(*) FROM messages WHERE user_id = ?", [user_id]
        if session_id is not None:
            sql += " AND session_id = ?"
            args.append(session_id)
        if after_id is not None:
            sql += " AND id > ?"
            args.append(int(after_id))
        with self._read() as conn:
            return int(conn.execute(sql, args).fetchone()[0])

    def pending_sessions(self, user_id: str, cursor: str = "extract") -> list[str]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT m.session_id FROM messages m LEFT JOIN cursors c ON c.user_id = m.user_id "
                "AND c.session_id = m.session_id AND c.name = ? WHERE m.user_id = ? "
                "GROUP BY m.session_id HAVING max(m.id) > coalesce(max(c.value), 0) ORDER BY min(m.id)",
                (cursor, user_id),
            )
            return [r[0] for r in rows]

    def get_messages(self, user_id: str, ids: Sequence[int]) -> list[Message]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {self._MSG_COLS} FROM messages WHERE user_id = ? "
                "AND id IN (SELECT value FROM json_each(?)) ORDER BY id",
                (user_id, _ids_json(ids)),
            )
            return [self._message(r) for r in rows]

    def sessions(self, user_id: str) -> list[str]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT session_id FROM messages WHERE user_id = ? GROUP BY session_id ORDER BY min(id)",
                (user_id,),
            )
            return [r[0] for r in rows]

    def users(self) -> list[str]:
        with self._read() as conn:
            rows = conn.execute(
                """SELECT user_id FROM messages UNION SELECT user_id FROM records
                UNION SELECT user_id FROM profiles UNION SELECT user_id FROM events ORDER BY 1"""
            )
            return [r[0] for r in rows]

    # -- records -----------------------------------------------------------------------------------

    _REC_COLS = (
        "id, user_id, content, memory_type, tags, theme, time_start, time_end, granularity, time_text, "
        "location, reason, purpose, keywords, source, created_at, last_reinforced_at, strengthen_count, "
        "valid_from, invalid_at, superseded_by"
    )

    @staticmethod
    def _record(row) -> MemoryRecord:
        time = None
        if row[6] is not None:
            time = TimeSpan(
                start=datetime.fromisoformat(row[6]),
                end=datetime.fromisoformat(row[7]),
                granularity=row[8],
                text=row[9] or "",
            )
        source = None if row[14] is None else SourcePointer.from_dict(json.loads(row[14]))
        return MemoryRecord(
            id=row[0],
            user_id=row[1],
            content=row[2],
            memory_type=row[3],
            tags=_tags(row[4]),
            theme=row[5],
            time=time,
            location=row[10],
            reason=row[11],
            purpose=row[12],
            keywords=tuple(json.loads(row[13])),
            source=source,
            created_at=datetime.fromisoformat(row[15]),
            last_reinforced_at=_dt(row[16]),
            strengthen_count=row[17],
            valid_from=_dt(row[18]),
            invalid_at=_dt(row[19]),
            superseded_by=row[20],
        )

    @staticmethod
    def _fts_body(r: MemoryRecord) -> str:
        parts = [r.content, " ".join(r.keywords), r.location or "", r.reason or "", r.purpose or ""]
        return index_text(" ".join(p for p in parts if p))

    @staticmethod
    def _mutable_values(r: MemoryRecord) -> list[Any]:
        t = r.time
        return [
            r.content,
            r.memory_type,
            _j(list(r.tags)),
            r.theme,
            None if t is None else t.start.isoformat(),
            None if t is None else t.end.isoformat(),
            None if t is None else t.start.timestamp(),
            None if t is None else t.end.timestamp(),
            None if t is None else t.granularity,
            None if t is None else t.text,
            r.location,
            r.reason,
            r.purpose,
            _j(list(r.keywords)),
            None if r.source is None else _j(r.source.to_dict()),
            _iso(r.last_reinforced_at),
            r.strengthen_count,
            _iso(r.valid_from),
        ]

    _MUTABLE = (
        "content, memory_type, tags, theme, time_start, time_end, start_ts, end_ts, granularity, time_text, "
        "location, reason, purpose, keywords, source, last_reinforced_at, strengthen_count, valid_from"
    )

    def _vector(self, vector: Sequence[float], what: str) -> np.ndarray:
        arr = np.asarray(vector, dtype=np.float32).reshape(-1)
        if arr.shape[0] != self.dim:
            raise ConfigError(
                f"{what} has {arr.shape[0]} dimensions but the store holds {self.dim}; "
                "embed with the store's embedder or open a store with the matching dim"
            )
        if not np.all(np.isfinite(arr)):
            raise ConfigError(f"{what} contains NaN or infinity; check the embedder's output")
        return arr

    def _bits(self, arr: np.ndarray) -> bytes:
        return np.packbits(arr > 0, bitorder="little").tobytes()

    def _insert_vec(self, conn, rid: int, user_id: str, valid: bool, arr: np.ndarray) -> None:
        conn.execute("INSERT OR REPLACE INTO record_vectors(id, embedding) VALUES (?, ?)", (rid, arr.tobytes()))
        if self._has_bits:
            conn.execute(
                "INSERT INTO records_vec(rowid, user_id, valid, embedding, embedding_bits) VALUES (?, ?, ?, ?, vec_bit(?))",
                (rid, user_id, int(valid), arr.tobytes(), self._bits(arr)),
            )
        else:
            conn.execute(
                "INSERT INTO records_vec(rowid, user_id, valid, embedding) VALUES (?, ?, ?, ?)",
                (rid, user_id, int(valid), arr.tobytes()),
            )

    def add_records(
        self, records: Sequence[MemoryRecord], vectors: Sequence[Sequence[float]]
    ) -> list[MemoryRecord]:
        if len(records) != len(vectors):
            raise ConfigError(f"add_records got {len(records)} records but {len(vectors)} vectors; give one vector per record")
        arrays = [self._vector(v, f"vector {i}") for i, v in enumerate(vectors)]
        with self._write() as conn:
            # ids are assigned here while the write lock is held, so the rows go in with executemany
            next_id = conn.execute(
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'records'), 0), "
                "coalesce((SELECT max(id) FROM records), 0))"
            ).fetchone()[0]
            out = []
            for r in records:
                if r.id is None:
                    next_id += 1
                    out.append(replace(r, id=next_id))
                else:
                    next_id = max(next_id, int(r.id))
                    out.append(r)
            conn.executemany(
                f"""INSERT INTO records(id, user_id, {self._MUTABLE}, created_at, created_ts, invalid_at,
                superseded_by, valid) VALUES ({', '.join('?' * 25)})""",
                [[r.id, r.user_id, *self._mutable_values(r), r.created_at.isoformat(), r.created_at.timestamp(),
                  _iso(r.invalid_at), r.superseded_by, int(r.invalid_at is None)] for r in out],
            )
            conn.executemany(
                "INSERT INTO records_fts(rowid, body, user_id) VALUES (?, ?, ?)",
                [(r.id, self._fts_body(r), r.user_id) for r in out],
            )
            conn.executemany(
                "INSERT INTO record_vectors(id, embedding) VALUES (?, ?)", [(r.id, a.tobytes()) for r, a in zip(out, arrays, strict=True)]
            )
            if self._has_bits:
                conn.executemany(
                    "INSERT INTO records_vec(rowid, user_id, valid, embedding, embedding_bits) VALUES (?, ?, ?, ?, vec_bit(?))",
                    [(r.id, r.user_id, int(r.invalid_at is None), a.tobytes(), self._bits(a)) for r, a in zip(out, arrays, strict=True)],
                )
            else:
                conn.executemany(
                    "INSERT INTO records_vec(rowid, user_id, valid, embedding) VALUES (?, ?, ?, ?)",
                    [(r.id, r.user_id, int(r.invalid_at is None), a.tobytes()) for r, a in zip(out, arrays, strict=True)],
                )
            self._partition_sizes.clear()
            by_user: dict[str, list[int]] = {}
            for i, r in enumerate(out):
                by_user.setdefault(r.user_id, []).append(i)
            for uid, idx in by_user.items():
                self._bump(conn, uid, lambda part, idx=idx: part.append(
                    [out[i].id for i in idx], np.stack([arrays[i] for i in idx]),
                    [out[i].invalid_at is None for i in idx]))
        return out

    def get_records(self, user_id: str, ids: Sequence[int]) -> list[MemoryRecord]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {self._REC_COLS} FROM records WHERE +user_id = ? "
                "AND id IN (SELECT value FROM json_each(?)) ORDER BY id",
                (user_id, _ids_json(ids)),
            )
            return [self._record(r) for r in rows]

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
    ) -> list[MemoryRecord]:
        sql = f"SELECT {self._REC_COLS} FROM records WHERE user_id = ?"
        args: list[Any] = [user_id]
        if not include_invalid:
            sql += " AND valid = 1"
        if after_id is not None:
            sql += " AND id > ?"
            args.append(int(after_id))
        if memory_type is not None:
            sql += " AND memory_type = ?"
            args.append(memory_type)
        if tags_any is not None:
            # a substring test on the JSON text skips most rows cheaply; json_each decides exactly
            needles = [_j(str(t)) for t in tags_any] or ['"']
            sql += " AND (" + " OR ".join("instr(tags, ?) > 0" for _ in needles) + ")"
            sql += " AND EXISTS (SELECT 1 FROM json_each(records.tags) t WHERE t.value IN (SELECT value FROM json_each(?)))"
            args.extend(needles)
            args.append(_j(list(tags_any)))
        sql += " ORDER BY id DESC" if newest_first else " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        with self._read() as conn:
            return [self._record(r) for r in conn.execute(sql, args)]

    def count_records(self, user_id: str | None = None, *, include_invalid: bool = True) -> int:
        sql = "SELECT count(*) FROM records WHERE 1 = 1"
        args: list[Any] = []
        if user_id is not None:
            sql += " AND user_id = ?"
            args.append(user_id)
        if not include_invalid:
            sql += " AND valid = 1"
        with self._read() as conn:
            return int(conn.execute(sql, args).fetchone()[0])

    def _require_record(self, conn, user_id: str, rid: Any, action: str) -> tuple:
        row = conn.execute("SELECT id, valid FROM records WHERE id = ? AND user_id = ?", (rid, user_id)).fetchone()
        if row is None:
            raise MemlabUsageError(
                f"cannot {action}: record {rid!r} of user {user_id!r} does not exist; add it with add_records first"
            )
        return row

    def update_record(self, record: MemoryRecord, vector: Sequence[float] | None = None) -> MemoryRecord:
        arr = None if vector is None else self._vector(vector, "update_record vector")
        with self._write() as conn:
            _, valid = self._require_record(conn, record.user_id, record.id, "update a record")
            sets = ", ".join(f"{c.strip()} = ?" for c in self._MUTABLE.split(","))
            conn.execute(f"UPDATE records SET {sets} WHERE id = ? AND user_id = ?",
                         [*self._mutable_values(record), record.id, record.user_id])
            conn.execute("UPDATE records_fts SET body = ? WHERE rowid = ?", (self._fts_body(record), record.id))
            if arr is not None:
                # vec0 0.1.9 cannot UPDATE a bit[] column; replace the row inside this transaction
                conn.execute("DELETE FROM records_vec WHERE rowid = ?", (record.id,))
                self._insert_vec(conn, record.id, record.user_id, bool(valid), arr)
                self._bump(conn, record.user_id, lambda part: part.set_vector(record.id, arr))
            row = conn.execute(f"SELECT {self._REC_COLS} FROM records WHERE id = ?", (record.id,)).fetchone()
            return self._record(row)

    def reinforce(self, user_id: str, ids: Sequence[int], at: datetime) -> None:
        ensure_aware(at, what="reinforce time")
        with self._write() as conn:
            conn.execute(
                "UPDATE records SET strengthen_count = strengthen_count + 1, last_reinforced_at = ? "
                "WHERE +user_id = ? AND id IN (SELECT value FROM json_each(?))",
                (at.isoformat(), user_id, _ids_json(ids)),
            )

    def supersede(self, user_id: str, old_id: int, new_id: int, at: datetime) -> None:
        ensure_aware(at, what="supersede time")
        with self._write() as conn:
            self._require_record(conn, user_id, old_id, "supersede a record")
            self._require_record(conn, user_id, new_id, "supersede with a record")
            conn.execute(
                "UPDATE records SET invalid_at = ?, superseded_by = ?, valid = 0 WHERE id = ? AND user_id = ?",
                (at.isoformat(), int(new_id), int(old_id), user_id),
            )
            conn.execute("UPDATE records_vec SET valid = 0 WHERE rowid = ?", (int(old_id),))
            self._bump(conn, user_id, lambda part: part.set_valid(int(old_id), False))

    def _owned_ids(self, conn, user_id: str, ids: Sequence[int]) -> list[tuple[int, int]]:
        return conn.execute(
            "SELECT id, valid FROM records WHERE +user_id = ? AND id IN (SELECT value FROM json_each(?)) ORDER BY id",
            (user_id, _ids_json(ids)),
        ).fetchall()

    def vectors(self, user_id: str, ids: Sequence[int]) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        with self._read() as conn:
            part = self._vector_partition(conn, user_id, build=False)
            if part is not None:  # the partition is in memory and current: no need to read the blobs
                return {rid: vec.astype(float).tolist() for rid, vec in sorted(part.vectors(ids).items())}
            for rid, blob in self._blobs(conn, user_id, ids):
                out[rid] = np.frombuffer(blob, dtype=np.float32).astype(float).tolist()
        return out

    @staticmethod
    def _blobs(conn, user_id: str, ids: Sequence[int]) -> list[tuple[int, bytes]]:
        return conn.execute(
            "SELECT DISTINCT r.id, v.embedding FROM json_each(?) j CROSS JOIN records r ON r.id = j.value "
            "JOIN record_vectors v ON v.id = r.id WHERE r.user_id = ? ORDER BY r.id",
            (_ids_json(ids), user_id),
        ).fetchall()

    def replace_vectors(self, user_id: str, vectors: Mapping[int, Sequence[float]]) -> None:
        arrays = {int(k): self._vector(v, f"vector of record {k}") for k, v in vectors.items()}
        with self._write() as conn:
            owned = dict(self._owned_ids(conn, user_id, list(arrays)))
            missing = sorted(set(arrays) - set(owned))
            if missing:
                raise MemlabUsageError(
                    f"cannot replace vectors: records {missing} of user {user_id!r} do not exist; pass only the user's ids"
                )
            for rid, arr in arrays.items():
                conn.execute("DELETE FROM records_vec WHERE rowid = ?", (rid,))
                self._insert_vec(conn, rid, user_id, bool(owned[rid]), arr)
            self._bump(conn, user_id, lambda part: [part.set_vector(rid, arr) for rid, arr in arrays.items()])

    # -- retrieval primitives --------------------------------------------------------------------

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
            rows: list = []
            if share >= 0.25:
                limit = int(k / share * 2) + 10
                hits = conn.execute(
                    "SELECT rowid, bm25(records_fts) AS s FROM records_fts WHERE records_fts MATCH ? "
                    "ORDER BY s, rowid LIMIT ?",
                    (match, limit),
                ).fetchall()
                if hits:
                    rows = conn.execute(
                        "SELECT h.key, h.value ->> '$[1]' FROM json_each(?) h JOIN records r ON r.id = h.value ->> '$[0]' "
                        f"WHERE r.user_id = ?{valid} ORDER BY h.key LIMIT ?",
                        (json.dumps(hits), user_id, int(k)),
                    ).fetchall()
                    rows = [(hits[i][0], s) for i, s in rows]
                if len(rows) >= k or len(hits) < limit:
                    return [(int(rid), -float(s)) for rid, s in rows]
            rows = conn.execute(
                "WITH hits AS MATERIALIZED (SELECT rowid AS id, bm25(records_fts) AS s FROM records_fts "
                "WHERE records_fts MATCH ? AND user_id = ?) "
                f"SELECT h.id, h.s FROM hits h JOIN records r ON r.id = h.id WHERE 1 = 1{valid} "
                "ORDER BY h.s, h.id LIMIT ?",
                (match, user_id, int(k)),
            ).fetchall()
        return [(int(rid), -float(s)) for rid, s in rows]

    def _partition_size(self, conn, user_id: str) -> int:
        size = self._partition_sizes.get(user_id)
        if size is None:
            if user_id == "*":  # the whole index
                size = int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
            else:
                size = int(conn.execute("SELECT count(*) FROM records WHERE user_id = ?", (user_id,)).fetchone()[0])
            self._partition_sizes[user_id] = size
        return size

    def search_dense(
        self, user_id: str, vector: Sequence[float], *, k: int, include_invalid: bool = False
    ) -> list[tuple[int, float]]:
        if k <= 0:
            return []
        arr = self._vector(vector, "query vector")
        valid = "" if include_invalid else " AND valid = 1"
        with self._read() as conn:
            self._sync(conn)
            part = self._vector_partition(conn, user_id)
            if part is not None:
                return part.search(arr, int(k), include_invalid)
            k = min(int(k), _VEC_MAX_K)
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
            coarse_k = min(k * self.rescore_factor, _VEC_MAX_K)
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT rowid FROM records_vec WHERE embedding_bits MATCH vec_bit(?) AND k = ? "
                    f"AND user_id = ?{valid}",
                    (self._bits(arr), coarse_k, user_id),
                )
            ]
            blobs = self._blobs(conn, user_id, ids)
        if not blobs:
            return []
        mat = np.frombuffer(b"".join(b for _, b in blobs), dtype=np.float32).reshape(len(blobs), self.dim)
        cos = (mat @ arr) / (np.linalg.norm(mat, axis=1) * float(np.linalg.norm(arr)) + 1e-30)
        scored = sorted(((int(rid), float(c)) for (rid, _), c in zip(blobs, cos, strict=True)), key=lambda x: (-x[1], x[0]))
        return scored[:k]

    # -- profiles ----------------------------------------------------------------------------------

    def get_profile(self, user_id: str) -> UserProfile:
        with self._read() as conn:
            row = conn.execute("SELECT fields, version, updated_at FROM profiles WHERE user_id = ?", (user_id,)).fetchone()
        if row is None:
            return UserProfile(user_id=user_id)
        return UserProfile.from_dict({"user_id": user_id, "fields": json.loads(row[0]), "version": row[1], "updated_at": row[2]})

    def save_profile(self, profile: UserProfile, history: ProfileHistoryEntry | None = None) -> None:
        data = profile.to_dict()
        with self._write() as conn:
            conn.execute(
                """INSERT INTO profiles(user_id, fields, version, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT(user_id) DO UPDATE SET fields = excluded.fields, version = excluded.version,
                updated_at = excluded.updated_at""",
                (profile.user_id, _j(data["fields"]), profile.version, data["updated_at"]),
            )
            if history is not None:
                if history.user_id != profile.user_id:
                    raise MemlabUsageError(
                        f"profile history of user {history.user_id!r} saved with the profile of {profile.user_id!r}; "
                        "pass the entry of the same user"
                    )
                conn.execute(
                    "INSERT INTO profile_history(user_id, version, at, entry) VALUES (?, ?, ?, ?)",
                    (history.user_id, history.version, history.at.isoformat(), _j(history.to_dict())),
                )

    def profile_history(self, user_id: str) -> list[ProfileHistoryEntry]:
        with self._read() as conn:
            rows = conn.execute("SELECT entry FROM profile_history WHERE user_id = ? ORDER BY id", (user_id,))
            return [ProfileHistoryEntry.from_dict(json.loads(r[0])) for r in rows]

    # -- cursors and settings ------------------------------------------------------------------

    def get_cursor(self, user_id: str, session_id: str, name: str) -> int:
        with self._read() as conn:
            row = conn.execute(
                "SELECT value FROM cursors WHERE user_id = ? AND session_id = ? AND name = ?", (user_id, session_id, name)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def set_cursor(self, user_id: str, session_id: str, name: str, value: int) -> None:
        with self._write() as conn:
            row = conn.execute(
                "SELECT value FROM cursors WHERE user_id = ? AND session_id = ? AND name = ?", (user_id, session_id, name)
            ).fetchone()
            current = 0 if row is None else int(row[0])
            if int(value) < current:
                raise CursorRewindError(
                    f"cursor {name!r} of user {user_id!r} session {session_id!r} is at {current}; refusing to move it "
                    f"back to {value} (cursors only move forward; use a new session or cursor name to start over)"
                )
            conn.execute(
                """INSERT INTO cursors(user_id, session_id, name, value) VALUES (?, ?, ?, ?)
                ON CONFLICT(user_id, session_id, name) DO UPDATE SET value = excluded.value""",
                (user_id, session_id, name, int(value)),
            )

    def get_kv(self, user_id: str, key: str) -> Any | None:
        with self._read() as conn:
            row = conn.execute("SELECT value FROM kv WHERE user_id = ? AND key = ?", (user_id, key)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_kv(self, user_id: str, key: str, value: Any) -> None:
        try:
            text = _j(value)
        except (TypeError, ValueError) as exc:
            raise MemlabUsageError(f"kv value for {key!r} is not JSON-serialisable ({exc}); store plain data") from exc
        with self._write() as conn:
            conn.execute(
                "INSERT INTO kv(user_id, key, value) VALUES (?, ?, ?) ON CONFLICT(user_id, key) DO UPDATE SET value = excluded.value",
                (user_id, key, text),
            )

    # -- logs ------------------------------------------------------------------------------------------

    def append_event(self, event: Event) -> Event:
        payload = _j(dict(event.payload))
        with self._write() as conn:
            cur = conn.execute(
                """INSERT INTO events(user_id, session_id, kind, at, at_ts, turn, event_no, payload)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (event.user_id, event.session_id, event.kind, event.at.isoformat(), event.at.timestamp(),
                 event.turn, event.event_no, payload),
            )
            return replace(event, id=int(cur.lastrowid))

    def events(
        self,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        kind: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after_id: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Event]:
        sql = "SELECT id, user_id, session_id, kind, at, turn, event_no, payload FROM events WHERE 1 = 1"
        args: list[Any] = []
        for column, value in (("user_id", user_id), ("session_id", session_id), ("kind", kind)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        if since is not None:
            sql += " AND at_ts >= ?"
            args.append(ensure_aware(since, what="events since").timestamp())
        if until is not None:
            sql += " AND at_ts <= ?"
            args.append(ensure_aware(until, what="events until").timestamp())
        if after_id is not None:
            sql += " AND id > ?"
            args.append(int(after_id))
        sql += " ORDER BY id DESC" if newest_first else " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        with self._read() as conn:
            return [
                Event(id=r[0], user_id=r[1], session_id=r[2], kind=r[3], at=datetime.fromisoformat(r[4]), turn=r[5],
                      event_no=r[6], payload=json.loads(r[7]))
                for r in conn.execute(sql, args)
            ]

    def append_scores(self, event_id: int, user_id: str, rows: Sequence[ScoreRow]) -> None:
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO scores(event_id, user_id, record_id, row) VALUES (?, ?, ?, ?)",
                [(int(event_id), user_id, int(r.record_id), _j(r.to_dict())) for r in rows],
            )

    def scores(self, event_id: int) -> list[ScoreRow]:
        with self._read() as conn:
            rows = conn.execute("SELECT row FROM scores WHERE event_id = ? ORDER BY id", (int(event_id),))
            return [ScoreRow.from_dict(json.loads(r[0])) for r in rows]

    # -- privacy ----------------------------------------------------------------------------------------

    _USER_TABLES = ("messages", "records", "profiles", "profile_history", "cursors", "kv", "events", "scores")

    def forget_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of the user; for files also checkpoint, merge FTS and VACUUM so bytes go."""
        counts: dict[str, int] = {}
        with self._write() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM records WHERE user_id = ?", (user_id,))]
            vec = 0
            for rid in ids:
                vec += conn.execute("DELETE FROM records_vec WHERE rowid = ?", (rid,)).rowcount
            counts["records_vec"] = vec
            counts["record_vectors"] = conn.execute(
                "DELETE FROM record_vectors WHERE id IN (SELECT id FROM records WHERE user_id = ?)", (user_id,)
            ).rowcount
            counts["records_fts"] = conn.execute("DELETE FROM records_fts WHERE user_id = ?", (user_id,)).rowcount
            for table in self._USER_TABLES:
                counts[table] = conn.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,)).rowcount
            # no trace of the user stays; a later partition of the same name gets a fresh version
            conn.execute("DELETE FROM partition_versions WHERE user_id = ?", (user_id,))
            self._vcache.pop(user_id, None)
            # merge FTS segments so the deleted tokens leave the index, not just the content table
            conn.execute("INSERT INTO records_fts(records_fts) VALUES ('optimize')")
            self._partition_sizes.clear()
        if not self._memory:
            with self._lock, self._errors():
                if self._depth == 0:
                    self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    self.conn.execute("VACUUM")
                    self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return counts

    def stats(self) -> dict[str, Any]:
        with self._read() as conn:
            counts = {
                t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                for t in ("messages", "records", "profiles", "profile_history", "cursors", "kv", "events", "scores")
            }
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
            "driver": _DRIVER_NAME,
        }
