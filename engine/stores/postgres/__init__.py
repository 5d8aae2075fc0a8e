"""PostgresStore: the Store protocol on PostgreSQL with pgvector (HNSW) and tsvector (GIN).

For many processes sharing one database. Every read is inside one user's rows; writes run in
transactions from a psycopg pool, and `transaction()` pins one connection to the calling thread
so nested blocks join it (savepoints inside). Full text is indexed from `engine.text.index_text`
(Chinese segmented by jieba, as in SQLite) and scored with Okapi BM25 computed in SQL over the
user's rows (k1 1.2, b 0.75), so scores are positive and rank like FTS5's. Dense search asks the
HNSW index, which returns fewer than k rows when a user owns a small share of the graph; that
shortfall is detected and answered by an exact scan of the user's rows (`dense_counts`).

Round trips are exact: each datetime keeps its UTC offset in a companion `*_tz` column, JSON
payloads stay text (key order, floats), and text holding NUL (which PostgreSQL refuses) is
escaped reversibly by the connection's string adapters.

Without a DSN a local server is started (or reused) with pgserver in `<repo>/build/pgdata`
(`MEMLAB_PG_DATA` overrides); pgserver stops it when the last process using it exits.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.string import (
    StrBinaryDumper,
    StrDumperUnknown,
    TextBinaryLoader,
    TextLoader,
)
from psycopg_pool import ConnectionPool

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
from engine.core.text import content_tokens, index_text, tokenize

__all__ = ["PostgresStore", "start_local_server", "MIGRATIONS", "DEFAULT_DATA_DIR"]

log = logging.getLogger(__name__)

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[3] / "build" / "pgdata"
BM25_K1, BM25_B = 1.2, 0.75
MAX_QUERY_TERMS = 64
USER_TABLES = ("messages", "records", "profiles", "profile_history", "cursors", "kv", "events", "scores")

_servers: dict[Path, Any] = {}
_servers_lock = threading.Lock()


def start_local_server(data_dir: str | os.PathLike[str] | None = None) -> str:
    """Start (or reuse) the bundled PostgreSQL in `data_dir`; returns its DSN (a Unix socket).

    pgserver runs initdb on first use and shares one server per data folder across processes;
    it stops the server when the last Python process holding it exits.
    """
    path = Path(data_dir or os.environ.get("MEMLAB_PG_DATA") or DEFAULT_DATA_DIR).resolve()
    with _servers_lock:
        if path not in _servers:
            path.parent.mkdir(parents=True, exist_ok=True)
            with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
                warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
                try:
                    import pgserver
                except ImportError as exc:
                    raise ConfigError(
                        "no DSN given and pgserver is not installed: pip install 'memlab[postgres]' "
                        "or pass a postgresql:// URL"
                    ) from exc
                _servers[path] = pgserver.get_server(path, cleanup_mode="stop")
        return _servers[path].get_uri()


# -- NUL-safe text: PostgreSQL text cannot hold U+0000, so it travels escaped --------------------

_ESC = "\U0010fffe"  # a noncharacter: escapes itself (doubled) and NUL (followed by "0")
_UNESC = re.compile(_ESC + "(.)", re.DOTALL)


def _escape(text: str) -> str:
    if "\x00" in text or _ESC in text:
        return text.replace(_ESC, _ESC + _ESC).replace("\x00", _ESC + "0")
    return text


def _unescape(text: str) -> str:
    if _ESC in text:
        return _UNESC.sub(lambda m: "\x00" if m.group(1) == "0" else _ESC, text)
    return text


class _SafeStrDumper(StrDumperUnknown):
    def dump(self, obj: str) -> bytes:
        return super().dump(_escape(obj))


class _SafeStrBinaryDumper(StrBinaryDumper):
    def dump(self, obj: str) -> bytes:
        return super().dump(_escape(obj))


class _SafeTextLoader(TextLoader):
    def load(self, data: Any) -> str:
        return _unescape(super().load(data))


class _SafeTextBinaryLoader(TextBinaryLoader):
    def load(self, data: Any) -> str:
        return _unescape(super().load(data))


def _register_text(conn: psycopg.Connection) -> None:
    conn.adapters.register_dumper(str, _SafeStrBinaryDumper)
    conn.adapters.register_dumper(str, _SafeStrDumper)  # last registered: the default (unknown oid)
    for name in ("text", "varchar", "bpchar"):
        conn.adapters.register_loader(name, _SafeTextLoader)
        conn.adapters.register_loader(name, _SafeTextBinaryLoader)


# -- schema ---------------------------------------------------------------------------------------


def _m1_tables(cur: psycopg.Cursor, ctx: Mapping[str, Any]) -> None:
    cur.execute(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE messages (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            user_id TEXT NOT NULL, session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL, created_at_tz INT NOT NULL, name TEXT, tool_call_id TEXT);
        CREATE INDEX messages_user_session ON messages (user_id, session_id, id);
        CREATE INDEX messages_user ON messages (user_id, id);
        CREATE TABLE profiles (
            user_id TEXT PRIMARY KEY, fields TEXT NOT NULL, version INT NOT NULL,
            updated_at TIMESTAMPTZ, updated_at_tz INT);
        CREATE TABLE profile_history (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, user_id TEXT NOT NULL,
            version INT NOT NULL, at TIMESTAMPTZ NOT NULL, entry TEXT NOT NULL);
        CREATE INDEX profile_history_user ON profile_history (user_id, id);
        CREATE TABLE cursors (
            user_id TEXT NOT NULL, session_id TEXT NOT NULL, name TEXT NOT NULL, value BIGINT NOT NULL,
            PRIMARY KEY (user_id, session_id, name));
        CREATE TABLE kv (user_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (user_id, key));
        CREATE TABLE events (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            user_id TEXT NOT NULL, session_id TEXT NOT NULL, kind TEXT NOT NULL,
            at TIMESTAMPTZ NOT NULL, at_tz INT NOT NULL, turn INT, event_no INT, payload TEXT NOT NULL);
        CREATE INDEX events_user ON events (user_id, session_id, id);
        CREATE INDEX events_at ON events (at);
        CREATE TABLE scores (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, event_id BIGINT NOT NULL,
            user_id TEXT NOT NULL, record_id BIGINT NOT NULL, row TEXT NOT NULL);
        CREATE INDEX scores_event ON scores (event_id, id);
        CREATE INDEX scores_user ON scores (user_id);
        """
    )
    cur.execute(
        sql.SQL(
            """
            CREATE TABLE records (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                user_id TEXT NOT NULL, content TEXT NOT NULL, memory_type TEXT NOT NULL,
                tags TEXT[] NOT NULL, theme TEXT NOT NULL,
                time_start TIMESTAMPTZ, time_start_tz INT, time_end TIMESTAMPTZ, time_end_tz INT,
                granularity TEXT, time_text TEXT,
                location TEXT, reason TEXT, purpose TEXT, keywords TEXT[] NOT NULL, source TEXT,
                created_at TIMESTAMPTZ NOT NULL, created_at_tz INT NOT NULL,
                last_reinforced_at TIMESTAMPTZ, last_reinforced_at_tz INT,
                strengthen_count INT NOT NULL DEFAULT 0,
                valid_from TIMESTAMPTZ, valid_from_tz INT, invalid_at TIMESTAMPTZ, invalid_at_tz INT,
                superseded_by BIGINT,
                embedding vector({dim}) NOT NULL,
                fts_text TEXT NOT NULL, fts_len INT NOT NULL,
                tsv tsvector GENERATED ALWAYS AS (to_tsvector({lang}::regconfig, fts_text)) STORED);
            CREATE INDEX records_user ON records (user_id, id);
            CREATE INDEX records_user_current ON records (user_id, id) WHERE invalid_at IS NULL;
            """
        ).format(dim=sql.Literal(int(ctx["dim"])), lang=sql.Literal(ctx["language"]))
    )


def _m2_search_indexes(cur: psycopg.Cursor, ctx: Mapping[str, Any]) -> None:
    cur.execute(
        sql.SQL(
            """
            CREATE INDEX records_embedding ON records USING hnsw (embedding vector_cosine_ops)
                WITH (m = {m}, ef_construction = {efc});
            CREATE INDEX records_tsv ON records USING gin (tsv);
            """
        ).format(m=sql.Literal(int(ctx["hnsw_m"])), efc=sql.Literal(int(ctx["hnsw_ef_construction"])))
    )


#: Versioned migrations, applied in order; each runs once per schema, recorded in schema_version.
MIGRATIONS: tuple[tuple[int, str, Callable[[psycopg.Cursor, Mapping[str, Any]], None]], ...] = (
    (1, "tables", _m1_tables),
    (2, "search indexes (HNSW cosine, GIN tsvector)", _m2_search_indexes),
)


# -- row mapping ----------------------------------------------------------------------------------


def _j(value: Any) -> str:
    # JSON stays text (not jsonb) so key order and floats round-trip byte for byte.
    return json.dumps(value, ensure_ascii=False)


def _tz(value: datetime | None) -> int | None:
    return None if value is None else int(value.utcoffset().total_seconds())


def _local(value: datetime | None, offset: int | None) -> datetime | None:
    """The stored instant back in the offset it was written with."""
    if value is None:
        return None
    return value.astimezone(UTC if not offset else timezone(timedelta(seconds=offset)))


_REC_TIMES = ("time_start", "time_end", "created_at", "last_reinforced_at", "valid_from", "invalid_at")
_REC_COLS = (
    "id, user_id, content, memory_type, tags, theme, granularity, time_text, location, reason, purpose, "
    "keywords, source, strengthen_count, superseded_by, " + ", ".join(f"{c}, {c}_tz" for c in _REC_TIMES)
)


def _record(row: Mapping[str, Any]) -> MemoryRecord:
    t = {c: _local(row[c], row[f"{c}_tz"]) for c in _REC_TIMES}
    span = None
    if t["time_start"] is not None:
        span = TimeSpan(start=t["time_start"], end=t["time_end"], granularity=row["granularity"], text=row["time_text"] or "")
    return MemoryRecord(
        id=row["id"],
        user_id=row["user_id"],
        content=row["content"],
        memory_type=row["memory_type"],
        tags=tuple(row["tags"]),
        theme=row["theme"],
        time=span,
        location=row["location"],
        reason=row["reason"],
        purpose=row["purpose"],
        keywords=tuple(row["keywords"]),
        source=None if row["source"] is None else SourcePointer.from_dict(json.loads(row["source"])),
        created_at=t["created_at"],
        last_reinforced_at=t["last_reinforced_at"],
        strengthen_count=row["strengthen_count"],
        valid_from=t["valid_from"],
        invalid_at=t["invalid_at"],
        superseded_by=row["superseded_by"],
    )


def _fts_text(rec: MemoryRecord) -> str:
    """What full text sees (as in SQLite): content, keywords, location, reason, purpose."""
    parts = [rec.content, " ".join(rec.keywords), rec.location or "", rec.reason or "", rec.purpose or ""]
    return index_text(" ".join(p for p in parts if p))


def _mutable(rec: MemoryRecord) -> dict[str, Any]:
    """The columns `update_record` may change (everything but owner, creation and validity)."""
    text = _fts_text(rec)
    out = {
        "content": rec.content,
        "memory_type": rec.memory_type,
        "tags": list(rec.tags),
        "theme": rec.theme,
        "time_start": None if rec.time is None else rec.time.start,
        "time_end": None if rec.time is None else rec.time.end,
        "granularity": None if rec.time is None else rec.time.granularity,
        "time_text": None if rec.time is None else rec.time.text,
        "location": rec.location,
        "reason": rec.reason,
        "purpose": rec.purpose,
        "keywords": list(rec.keywords),
        "source": None if rec.source is None else _j(rec.source.to_dict()),
        "last_reinforced_at": rec.last_reinforced_at,
        "strengthen_count": rec.strengthen_count,
        "valid_from": rec.valid_from,
        "fts_text": text,
        "fts_len": max(1, len(text.split())),
    }
    for col in ("time_start", "time_end", "last_reinforced_at", "valid_from"):
        out[f"{col}_tz"] = _tz(out[col])
    return out


def _message(row: Sequence[Any]) -> Message:
    mid, user_id, session_id, role, content, created_at, created_tz, name, tool_call_id = row
    return Message(id=mid, user_id=user_id, session_id=session_id, role=role, content=content,
                   created_at=_local(created_at, created_tz), name=name, tool_call_id=tool_call_id)  # fmt: skip


_MESSAGE_COLS = "id, user_id, session_id, role, content, created_at, created_at_tz, name, tool_call_id"


def _redact(dsn: str) -> str:
    """The DSN without its password, for display."""
    return re.sub(r"password=\S+", "password=***", re.sub(r"//([^:/@]*):[^@]*@", r"//\1:***@", dsn))


def _query_terms(query: str) -> list[str]:
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


class PostgresStore:
    """The Store protocol on PostgreSQL + pgvector; safe to share across threads and processes."""

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
        self.dsn = dsn if dsn is not None else start_local_server(data_dir)
        try:
            self.pgvector_version = self._bootstrap()
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"cannot reach PostgreSQL at {_redact(self.dsn)!r}: {exc}; start the server or fix the DSN"
            ) from exc
        self._iterative = iterative_scan and tuple(int(p) for p in self.pgvector_version.split(".")[:2]) >= (0, 8)
        self._pool = ConnectionPool(
            self.dsn, min_size=1, max_size=max(1, int(pool_size)), configure=self._configure, open=True,
            name=f"memlab-{schema}",
        )  # fmt: skip

    # -- connections, migrations, transactions -----------------------------------------------------

    def _configure(self, conn: psycopg.Connection) -> None:
        conn.autocommit = True
        _register_text(conn)
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema)))
        conn.execute("SET TIME ZONE 'UTC'")
        register_vector(conn)

    def _bootstrap(self) -> str:
        """Create the extension and schema and run pending migrations, serialised across processes."""
        with psycopg.connect(self.dsn, autocommit=True) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('memlab-migrate'))")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
            conn.execute(sql.SQL("SET LOCAL search_path TO {}, public").format(sql.Identifier(self.schema)))
            self._migrate(conn)
            return str(conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0])

    def _migrate(self, conn: psycopg.Connection) -> None:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INT PRIMARY KEY, name TEXT NOT NULL, "
            "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in conn.execute("SELECT version FROM schema_version")}
        latest = MIGRATIONS[-1][0]
        if done and max(done) > latest:
            raise StoreError(
                f"schema {self.schema!r} is at version {max(done)}, newer than this memlab ({latest}); upgrade memlab"
            )
        with conn.cursor() as cur:
            for version, name, apply in MIGRATIONS:
                if version not in done:
                    apply(cur, {"dim": self.dim, "language": self.language, **self._index_params})
                    cur.execute("INSERT INTO schema_version (version, name) VALUES (%s, %s)", (version, name))
                    log.info("schema %s: applied migration %d (%s)", self.schema, version, name)
            wanted = {"dim": str(self.dim), "embedder_name": self.embedder_name, "language": self.language}
            for key, value in wanted.items():
                cur.execute("INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT DO NOTHING", (key, value))
            stored = dict(cur.execute("SELECT key, value FROM meta").fetchall())
        if stored["dim"] != wanted["dim"] or stored["language"] != wanted["language"]:
            raise ConfigError(
                f"schema {self.schema!r} holds {stored['dim']}-dimensional vectors and text config "
                f"{stored['language']!r}, but dim={self.dim}, language={self.language!r} was asked; open it with "
                "the stored settings, use another schema, or re-embed into a new one"
            )
        self.stored_embedder_name = stored["embedder_name"]

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

    def _vec(self, vector: Sequence[float], what: str) -> np.ndarray:
        arr = np.asarray(vector, dtype=np.float32).reshape(-1)
        if arr.shape[0] != self.dim:
            raise ConfigError(
                f"{what} has {arr.shape[0]} dimensions but the store holds {self.dim}; "
                "embed with the store's embedder or open a store with the matching dim"
            )
        if not np.all(np.isfinite(arr)):
            raise ConfigError(f"{what} contains NaN or infinity; check the embedder's output")
        return arr

    def _owned(self, conn: psycopg.Connection, user_id: str, ids: Sequence[int], action: str) -> None:
        wanted = {int(i) for i in ids}
        found = {r[0] for r in conn.execute("SELECT id FROM records WHERE user_id = %s AND id = ANY(%s)",
                                            (user_id, sorted(wanted)))}  # fmt: skip
        if missing := sorted(wanted - found):
            raise MemlabUsageError(
                f"cannot {action}: records {missing} of user {user_id!r} do not exist; add them with add_records first"
            )

    # -- messages ---------------------------------------------------------------------------------

    def add_message(self, message: Message) -> Message:
        with self._tx() as conn:
            row = conn.execute(
                "INSERT INTO messages (user_id, session_id, role, content, created_at, created_at_tz, name, "
                "tool_call_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (message.user_id, message.session_id, message.role, message.content, message.created_at,
                 _tz(message.created_at), message.name, message.tool_call_id),
            ).fetchone()  # fmt: skip
        return replace(message, id=row[0])

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
        where, params = ["user_id = %s"], [user_id]
        for clause, value in (("session_id = %s", session_id), ("id > %s", after_id), ("id <= %s", upto_id)):
            if value is not None:
                where.append(clause)
                params.append(value)
        if roles is not None:
            where.append("role = ANY(%s)")
            params.append([str(r) for r in roles])
        order = "id DESC" if newest_first else "id"
        query = f"SELECT {_MESSAGE_COLS} FROM messages WHERE {' AND '.join(where)} ORDER BY {order} LIMIT %s"
        with self._conn() as conn:
            return [_message(r) for r in conn.execute(query, [*params, limit])]

    def count_messages(self, user_id: str, *, session_id: str | None = None, after_id: int | None = None) -> int:
        where, params = ["user_id = %s"], [user_id]
        for clause, value in (("session_id = %s", session_id), ("id > %s", after_id)):
            if value is not None:
                where.append(clause)
                params.append(value)
        with self._conn() as conn:
            return int(conn.execute(f"SELECT count(*) FROM messages WHERE {' AND '.join(where)}", params).fetchone()[0])

    def pending_sessions(self, user_id: str, cursor: str = "extract") -> list[str]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT m.session_id FROM messages m LEFT JOIN cursors c ON c.user_id = m.user_id "
                "AND c.session_id = m.session_id AND c.name = %s WHERE m.user_id = %s "
                "GROUP BY m.session_id HAVING max(m.id) > coalesce(max(c.value), 0) ORDER BY min(m.id)",
                (cursor, user_id),
            )
            return [r[0] for r in rows]

    def get_messages(self, user_id: str, ids: Sequence[int]) -> list[Message]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_MESSAGE_COLS} FROM messages WHERE user_id = %s AND id = ANY(%s) ORDER BY id",
                (user_id, [int(i) for i in ids]),
            )
            return [_message(r) for r in rows]

    def sessions(self, user_id: str) -> list[str]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT session_id FROM messages WHERE user_id = %s GROUP BY session_id ORDER BY min(id)", (user_id,)
            )
            return [r[0] for r in rows]

    def users(self) -> list[str]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT user_id FROM messages UNION SELECT user_id FROM records UNION SELECT user_id FROM profiles "
                "UNION SELECT user_id FROM events ORDER BY 1"
            )
            return [r[0] for r in rows]

    # -- records ------------------------------------------------------------------------------------

    def add_records(self, records: Sequence[MemoryRecord], vectors: Sequence[Sequence[float]]) -> list[MemoryRecord]:
        if len(records) != len(vectors):
            raise ConfigError(f"add_records got {len(records)} records but {len(vectors)} vectors; give one vector per record")
        if not records:
            return []
        arrays = [self._vec(v, f"vector {i}") for i, v in enumerate(vectors)]
        rows = []
        for rec, vec in zip(records, arrays, strict=True):
            row = _mutable(rec) | {"user_id": rec.user_id, "embedding": vec, "superseded_by": rec.superseded_by}
            for col in ("created_at", "invalid_at"):
                row[col], row[f"{col}_tz"] = getattr(rec, col), _tz(getattr(rec, col))
            rows.append(row)
        cols = list(rows[0])
        insert = sql.SQL("INSERT INTO records ({}) VALUES ({}) RETURNING id").format(
            sql.SQL(", ").join(map(sql.Identifier, cols)), sql.SQL(", ").join(map(sql.Placeholder, cols))
        )
        ids = []
        with self._tx() as conn, conn.cursor() as cur:
            cur.executemany(insert, rows, returning=True)  # pipelined: one round trip for the batch
            while True:
                ids.append(cur.fetchone()[0])
                if not cur.nextset():
                    break
        return [replace(rec, id=rid) for rec, rid in zip(records, ids, strict=True)]

    def _select_records(self, where: str, params: Sequence[Any]) -> list[MemoryRecord]:
        with self._conn() as conn, conn.cursor(row_factory=dict_row) as cur:
            return [_record(r) for r in cur.execute(f"SELECT {_REC_COLS} FROM records WHERE {where}", params)]

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
    ) -> list[MemoryRecord]:
        where, params = ["user_id = %s"], [user_id]
        if not include_invalid:
            where.append("invalid_at IS NULL")
        if after_id is not None:
            where.append("id > %s")
            params.append(int(after_id))
        if memory_type is not None:
            where.append("memory_type = %s")
            params.append(memory_type)
        if tags_any is not None:
            where.append("tags && %s::text[]")
            params.append(list(tags_any))
        order = "id DESC" if newest_first else "id"
        return self._select_records(f"{' AND '.join(where)} ORDER BY {order} LIMIT %s", [*params, limit])

    def count_records(self, user_id: str | None = None, *, include_invalid: bool = True) -> int:
        where, params = ["TRUE"], []
        if user_id is not None:
            where.append("user_id = %s")
            params.append(user_id)
        if not include_invalid:
            where.append("invalid_at IS NULL")
        with self._conn() as conn:
            return int(conn.execute(f"SELECT count(*) FROM records WHERE {' AND '.join(where)}", params).fetchone()[0])

    def update_record(self, record: MemoryRecord, vector: Sequence[float] | None = None) -> MemoryRecord:
        params = _mutable(record)
        if vector is not None:
            params["embedding"] = self._vec(vector, "update_record vector")
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
                (at, _tz(at), user_id, sorted({int(i) for i in ids})),
            )

    def supersede(self, user_id: str, old_id: int, new_id: int, at: datetime) -> None:
        ensure_aware(at, what="supersede time")
        with self._tx() as conn:
            self._owned(conn, user_id, [old_id, new_id], "supersede a record")
            conn.execute(
                "UPDATE records SET invalid_at = %s, invalid_at_tz = %s, superseded_by = %s WHERE user_id = %s AND id = %s",
                (at, _tz(at), int(new_id), user_id, int(old_id)),
            )

    def vectors(self, user_id: str, ids: Sequence[int]) -> dict[int, list[float]]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, embedding FROM records WHERE user_id = %s AND id = ANY(%s) ORDER BY id",
                (user_id, [int(i) for i in ids]),
            )
            return {int(rid): vec.to_numpy().astype(float).tolist() for rid, vec in rows}

    def replace_vectors(self, user_id: str, vectors: Mapping[int, Sequence[float]]) -> None:
        arrays = {int(rid): self._vec(v, f"vector of record {rid}") for rid, v in vectors.items()}
        with self._tx() as conn:
            self._owned(conn, user_id, list(arrays), "replace vectors")
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE records SET embedding = %s WHERE user_id = %s AND id = %s",
                    [(vec, user_id, rid) for rid, vec in arrays.items()],
                )

    # -- retrieval primitives -----------------------------------------------------------------------

    def search_bm25(
        self, user_id: str, query: str, *, k: int, include_invalid: bool = False
    ) -> list[tuple[int, float]]:
        terms = _query_terms(query or "")
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
        vec = self._vec(vector, "query vector")
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

    # -- profiles ---------------------------------------------------------------------------------

    def get_profile(self, user_id: str) -> UserProfile:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT fields, version, updated_at, updated_at_tz FROM profiles WHERE user_id = %s", (user_id,)
            ).fetchone()
        if row is None:
            return UserProfile(user_id=user_id)
        fields = {k: tuple(v) for k, v in json.loads(row[0]).items()}
        return UserProfile(user_id=user_id, fields=fields, version=row[1], updated_at=_local(row[2], row[3]))

    def save_profile(self, profile: UserProfile, history: ProfileHistoryEntry | None = None) -> None:
        if history is not None and history.user_id != profile.user_id:
            raise MemlabUsageError(
                f"profile history of user {history.user_id!r} saved with the profile of {profile.user_id!r}; "
                "pass the entry of the same user"
            )
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO profiles (user_id, fields, version, updated_at, updated_at_tz) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (user_id) DO UPDATE SET fields = EXCLUDED.fields, version = EXCLUDED.version, "
                "updated_at = EXCLUDED.updated_at, updated_at_tz = EXCLUDED.updated_at_tz",
                (profile.user_id, _j(profile.to_dict()["fields"]), profile.version, profile.updated_at,
                 _tz(profile.updated_at)),
            )  # fmt: skip
            if history is not None:
                conn.execute(
                    "INSERT INTO profile_history (user_id, version, at, entry) VALUES (%s, %s, %s, %s)",
                    (history.user_id, history.version, history.at, _j(history.to_dict())),
                )

    def profile_history(self, user_id: str) -> list[ProfileHistoryEntry]:
        with self._conn() as conn:
            rows = conn.execute("SELECT entry FROM profile_history WHERE user_id = %s ORDER BY id", (user_id,))
            return [ProfileHistoryEntry.from_dict(json.loads(r[0])) for r in rows]

    # -- cursors and settings -----------------------------------------------------------------------

    def get_cursor(self, user_id: str, session_id: str, name: str) -> int:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT value FROM cursors WHERE user_id = %s AND session_id = %s AND name = %s",
                (user_id, session_id, name),
            ).fetchone()
        return 0 if row is None else int(row[0])

    def set_cursor(self, user_id: str, session_id: str, name: str, value: int) -> None:
        # One upsert that only moves forward: it locks the row, so concurrent movers (other
        # processes included) serialise and none can rewind another's advance.
        key = (user_id, session_id, name)
        with self._tx() as conn:
            moved = conn.execute(
                "INSERT INTO cursors (user_id, session_id, name, value) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (user_id, session_id, name) DO UPDATE SET value = EXCLUDED.value "
                "WHERE cursors.value <= EXCLUDED.value RETURNING value",
                (*key, int(value)),
            ).fetchone()
            if moved is None:
                current = conn.execute(
                    "SELECT value FROM cursors WHERE user_id = %s AND session_id = %s AND name = %s", key
                ).fetchone()[0]
                raise CursorRewindError(
                    f"cursor {name!r} of user {user_id!r} session {session_id!r} is at {current}; refusing to move it "
                    f"back to {value} (cursors only move forward; use a new session or cursor name to start over)"
                )

    def get_kv(self, user_id: str, key: str) -> Any | None:
        with self._conn() as conn:
            row = conn.execute("SELECT value FROM kv WHERE user_id = %s AND key = %s", (user_id, key)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_kv(self, user_id: str, key: str, value: Any) -> None:
        try:
            text = _j(value)
        except (TypeError, ValueError) as exc:
            raise MemlabUsageError(f"kv value for {key!r} is not JSON-serialisable ({exc}); store plain data") from exc
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO kv (user_id, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (user_id, key) DO UPDATE SET value = EXCLUDED.value",
                (user_id, key, text),
            )

    # -- logs ----------------------------------------------------------------------------------------

    def append_event(self, event: Event) -> Event:
        with self._tx() as conn:
            row = conn.execute(
                "INSERT INTO events (user_id, session_id, kind, at, at_tz, turn, event_no, payload) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (event.user_id, event.session_id, event.kind, event.at, _tz(event.at), event.turn, event.event_no,
                 _j(dict(event.payload))),
            ).fetchone()  # fmt: skip
        return replace(event, id=row[0])

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
        where, params = ["TRUE"], []
        for clause, value in (
            ("user_id = %s", user_id),
            ("session_id = %s", session_id),
            ("kind = %s", kind),
            ("at >= %s", None if since is None else ensure_aware(since, what="events since")),
            ("at <= %s", None if until is None else ensure_aware(until, what="events until")),
            ("id > %s", after_id),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        query = (
            "SELECT id, user_id, session_id, kind, at, at_tz, turn, event_no, payload FROM events "
            f"WHERE {' AND '.join(where)} ORDER BY {'id DESC' if newest_first else 'id'} LIMIT %s"
        )
        with self._conn() as conn:
            return [
                Event(id=r[0], user_id=r[1], session_id=r[2], kind=r[3], at=_local(r[4], r[5]), turn=r[6],
                      event_no=r[7], payload=json.loads(r[8]))
                for r in conn.execute(query, [*params, limit])
            ]  # fmt: skip

    def append_scores(self, event_id: int, user_id: str, rows: Sequence[ScoreRow]) -> None:
        with self._tx() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO scores (event_id, user_id, record_id, row) VALUES (%s, %s, %s, %s)",
                [(int(event_id), user_id, int(r.record_id), _j(r.to_dict())) for r in rows],
            )

    def scores(self, event_id: int) -> list[ScoreRow]:
        with self._conn() as conn:
            rows = conn.execute("SELECT row FROM scores WHERE event_id = %s ORDER BY id", (int(event_id),))
            return [ScoreRow.from_dict(json.loads(r[0])) for r in rows]

    # -- privacy and stats ----------------------------------------------------------------------------

    def forget_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of the user in every table (the HNSW and GIN entries go with the rows)."""
        counts: dict[str, int] = {}
        with self._tx() as conn:
            for table in USER_TABLES:
                cur = conn.execute(sql.SQL("DELETE FROM {} WHERE user_id = %s").format(sql.Identifier(table)), (user_id,))
                counts[table] = cur.rowcount
        return counts

    def stats(self) -> dict[str, Any]:
        with self._conn() as conn:
            counts = {
                t: int(conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t))).fetchone()[0])
                for t in USER_TABLES
            }
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
            "path": f"{_redact(self.dsn)} (schema {self.schema})",
            "counts": counts,
            "bytes": int(size),
            "dim": self.dim,
            "embedder_name": self.stored_embedder_name,
            "schema_version": self.schema_version,
            "pgvector": self.pgvector_version,
            "dense_paths": dict(self.dense_counts),
        }
