"""The SQLite schema as versioned migrations, recorded in PRAGMA user_version.

Each step is a named function of DDL statements (and backfills) that takes the file from
version N-1 to N. Released steps never change: a file written by any earlier memlab is brought
forward by running the steps it lacks, keeping every row. `migrate` runs them under SQLite's
write lock (BEGIN IMMEDIATE, waiting up to the busy timeout), re-reading the version inside
the lock, one transaction per step with its version bump, so concurrent openers of a new or old
file migrate it exactly once (see engine.stores.migrate).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from engine.core.errors import StoreError
from engine.stores.migrate import (
    Migration,
    check_sequence,
    newer_schema_error,
    run_statements,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "schema_version"]


def _executor(conn: Any):
    """Run one statement: plain SQL text, or (SQL, parameters)."""
    return lambda statement: conn.execute(*statement) if isinstance(statement, tuple) else conn.execute(statement)


def _initial(conn: Any, ctx: dict[str, Any]) -> None:
    dim = int(ctx["dim"])
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
        (
            "INSERT INTO meta(key, value) VALUES ('dim', ?), ('embedder_name', ?)",
            (str(dim), str(ctx["embedder_name"])),
        ),
    ]
    run_statements(_executor(conn), statements, version=1)


def _partition_versions(conn: Any, ctx: dict[str, Any]) -> None:
    """A version per user partition, bumped by every write to its vectors or validity.

    Versions come from one store-wide sequence (meta `vec_seq`), so a number is never reused,
    even after forget_user: a reader holding an in-memory copy of a partition (see
    engine.stores.sqlite.vectors) knows it is current when the version it read it at is still
    the stored one, whichever connection or process wrote last.
    """
    run_statements(_executor(conn), [
        "CREATE TABLE partition_versions (user_id TEXT PRIMARY KEY, version INTEGER NOT NULL)",
        "INSERT OR IGNORE INTO meta(key, value) VALUES ('vec_seq', '1')",
        "INSERT INTO partition_versions(user_id, version) SELECT DISTINCT user_id, 1 FROM records",
    ], version=2)


def _bounded_reads(conn: Any, ctx: dict[str, Any]) -> None:
    """Indexes and summary rows so that no read needs a user's whole history.

    `session_heads` holds each (user, session)'s first and last message id, kept by add_message
    in its own transaction: sessions() and pending_sessions() read one row per session.
    `record_counts` holds each user's record counts (all, current), kept by the record writes:
    count_records is one row. The indexes serve every newest-first / after-a-cursor read with
    an index range (messages by session and role, events by kind, records with history).
    `profiles.updated_at_ts` gives profiles the same (text, epoch) time pair as messages.
    """
    run_statements(_executor(conn), [
        """CREATE TABLE session_heads (user_id TEXT NOT NULL, session_id TEXT NOT NULL,
            first_id INTEGER NOT NULL, last_id INTEGER NOT NULL, PRIMARY KEY (user_id, session_id))""",
        """INSERT INTO session_heads(user_id, session_id, first_id, last_id)
            SELECT user_id, session_id, min(id), max(id) FROM messages GROUP BY user_id, session_id""",
        "CREATE INDEX session_heads_first ON session_heads(user_id, first_id)",
        """CREATE TABLE record_counts (user_id TEXT PRIMARY KEY, total INTEGER NOT NULL,
            current INTEGER NOT NULL)""",
        """INSERT INTO record_counts(user_id, total, current)
            SELECT user_id, count(*), sum(valid) FROM records GROUP BY user_id""",
        "CREATE INDEX messages_user ON messages(user_id, id)",
        "CREATE INDEX messages_user_session_role ON messages(user_id, session_id, role, id)",
        "CREATE INDEX messages_user_role ON messages(user_id, role, id)",
        "CREATE INDEX records_user ON records(user_id, id)",
        "CREATE INDEX events_user_id ON events(user_id, id)",
        "CREATE INDEX events_user_kind ON events(user_id, kind, id)",
        "ALTER TABLE profiles ADD COLUMN updated_at_ts REAL",
        "UPDATE profiles SET updated_at_ts = (julianday(updated_at) - 2440587.5) * 86400.0 WHERE updated_at IS NOT NULL",
    ], version=3)


def _said_at_and_sources(conn: Any, ctx: dict[str, Any]) -> None:
    """Records gain when they were said (`said_at`: decay starts there, not at extraction; taken
    from `valid_from`, which held the source time before) and whether they last (`lasting`: False
    for one-off instructions); profile values gain the records they rest on (`sources`)."""
    run_statements(_executor(conn), [
        "ALTER TABLE records ADD COLUMN said_at TEXT",
        "ALTER TABLE records ADD COLUMN lasting INTEGER NOT NULL DEFAULT 1",
        "UPDATE records SET said_at = valid_from WHERE said_at IS NULL",
        "ALTER TABLE profiles ADD COLUMN sources TEXT NOT NULL DEFAULT '{}'",
    ], version=4)


#: Rows per batch when a step rebuilds an index from `records`.
_REBUILD_BATCH = 2000


def _batches(conn: Any, sql: str):
    """The rows of `sql` (which takes the last id seen and a batch size, ordered by id, the id
    first in each row), one batch of at most `_REBUILD_BATCH` at a time."""
    last = 0
    while rows := conn.execute(sql, (last, _REBUILD_BATCH)).fetchall():
        yield rows
        last = rows[-1][0]


def _rebuild_fts(conn: Any) -> None:
    """Every record's keyed body into the new contentless index (current and superseded alike)."""
    from engine.stores.sqlite.rows import body_text

    for rows in _batches(conn, "SELECT id, user_id, content, keywords, location, reason, purpose FROM records "
                               "WHERE id > ? ORDER BY id LIMIT ?"):
        conn.executemany("INSERT INTO records_fts(rowid, body) VALUES (?, ?)",
                         [(r[0], body_text(r[1], r[2], json.loads(r[3]), r[4], r[5], r[6])) for r in rows])


def _rebuild_vec(conn: Any, dim: int) -> None:
    """Every record's sign bits from its float vector, under its user and validity."""
    for rows in _batches(conn, "SELECT r.id, r.user_id, r.valid, v.embedding FROM records r "
                               "JOIN record_vectors v ON v.id = r.id WHERE r.id > ? ORDER BY r.id LIMIT ?"):
        mat = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), dim)
        bits = np.packbits(mat > 0, axis=1, bitorder="little")
        conn.executemany(
            "INSERT INTO records_vec(rowid, user_id, valid, embedding_bits) VALUES (?, ?, ?, vec_bit(?))",
            [(r[0], r[1], r[2], b.tobytes()) for r, b in zip(rows, bits, strict=True)])


def _keyed_fts_bits_only_vec(conn: Any, ctx: dict[str, Any]) -> None:
    """Per-user full-text postings, text and float vectors stored once.

    `records_fts` becomes contentless (the text lives in `records` only) and indexes every term
    prefixed with its owner's key (engine.core.text.user_key), so FTS5 keeps one doclist per
    user and term; the owner column goes (searches join `records` on the owner instead).
    `records_vec` keeps only the sign bits (bit[dim rounded up to 8], zero padded) for the coarse
    Hamming pass over partitions too large to hold in memory; floats live in `record_vectors`.
    Both are rebuilt from `records` and `record_vectors`, keeping every row.
    """
    dim = int(ctx["dim"])
    nbits = -(-dim // 8) * 8
    # contentless_delete needs SQLite 3.43; an older library keeps the (keyed) text in the index too
    version = tuple(int(x) for x in conn.execute("SELECT sqlite_version()").fetchone()[0].split(".")[:2])
    content = ", content='', contentless_delete=1" if version >= (3, 43) else ""
    execute = _executor(conn)
    run_statements(lambda st: st(conn) if callable(st) else execute(st), [
        "DROP TABLE records_fts",
        f"CREATE VIRTUAL TABLE records_fts USING fts5(body{content}, tokenize='unicode61')",
        _rebuild_fts,
        "DROP TABLE records_vec",
        f"""CREATE VIRTUAL TABLE records_vec USING vec0(
            user_id text partition key, valid integer, embedding_bits bit[{nbits}])""",
        lambda c: _rebuild_vec(c, dim),
    ], version=5)


#: Keeps `record_tags` in step with `records` on every write, whichever code (or hand) makes it.
_TAG_TRIGGERS = (
    """CREATE TRIGGER records_tags_insert AFTER INSERT ON records BEGIN
        INSERT OR IGNORE INTO record_tags(user_id, tag, valid, id)
        SELECT NEW.user_id, t.value, NEW.valid, NEW.id
        FROM json_each(CASE WHEN json_valid(NEW.tags) THEN NEW.tags ELSE '[]' END) t WHERE t.type = 'text';
    END""",
    """CREATE TRIGGER records_tags_update AFTER UPDATE OF user_id, tags, valid ON records
        WHEN OLD.user_id IS NOT NEW.user_id OR OLD.tags IS NOT NEW.tags OR OLD.valid IS NOT NEW.valid BEGIN
        DELETE FROM record_tags WHERE user_id = OLD.user_id AND valid = OLD.valid AND id = OLD.id
            AND tag IN (SELECT value FROM json_each(CASE WHEN json_valid(OLD.tags) THEN OLD.tags ELSE '[]' END));
        INSERT OR IGNORE INTO record_tags(user_id, tag, valid, id)
        SELECT NEW.user_id, t.value, NEW.valid, NEW.id
        FROM json_each(CASE WHEN json_valid(NEW.tags) THEN NEW.tags ELSE '[]' END) t WHERE t.type = 'text';
    END""",
    """CREATE TRIGGER records_tags_delete AFTER DELETE ON records BEGIN
        DELETE FROM record_tags WHERE user_id = OLD.user_id AND valid = OLD.valid AND id = OLD.id
            AND tag IN (SELECT value FROM json_each(CASE WHEN json_valid(OLD.tags) THEN OLD.tags ELSE '[]' END));
    END""",
)


def _tag_index(conn: Any, ctx: dict[str, Any]) -> None:
    """Records by (user, tag, validity), newest last: a tagged read is an index range.

    `record_tags` holds one row per record and tag; triggers on `records` keep it in step with
    every insert, tag or validity change and delete, so a tag few records carry ("pinned") is read
    without scanning the user's partition. Backfilled from `records`, keeping every row. Also
    gives the database a random `store_id` (meta), which copies saved beside it must carry.
    """
    run_statements(_executor(conn), [
        """CREATE TABLE record_tags (user_id TEXT NOT NULL, tag TEXT NOT NULL, valid INTEGER NOT NULL,
            id INTEGER NOT NULL, PRIMARY KEY (user_id, tag, valid, id)) WITHOUT ROWID""",
        """INSERT OR IGNORE INTO record_tags(user_id, tag, valid, id)
            SELECT r.user_id, t.value, r.valid, r.id FROM records r,
            json_each(CASE WHEN json_valid(r.tags) THEN r.tags ELSE '[]' END) t WHERE t.type = 'text'""",
        *_TAG_TRIGGERS,
        # names this database for the vector copies saved beside it (engine.stores.sqlite.sidecar)
        "INSERT OR IGNORE INTO meta(key, value) VALUES ('store_id', lower(hex(randomblob(16))))",
    ], version=6)


def _record_writes(conn: Any, ctx: dict[str, Any]) -> None:
    """One counter bumped by every insert, update and delete of `records`, whichever code (or hand,
    or process) makes it, so a reader can keep what it read while the counter is unchanged
    (engine.stores.sqlite.records: the tagged reads of every retrieve). It counts every user's
    writes (no per-user row, so forgetting a user leaves no trace and the counter never goes back)."""
    run_statements(_executor(conn), [
        "CREATE TABLE record_writes (n INTEGER NOT NULL)",
        "INSERT INTO record_writes(n) VALUES (0)",
        "CREATE TRIGGER records_writes_insert AFTER INSERT ON records BEGIN UPDATE record_writes SET n = n + 1; END",
        "CREATE TRIGGER records_writes_update AFTER UPDATE ON records BEGIN UPDATE record_writes SET n = n + 1; END",
        "CREATE TRIGGER records_writes_delete AFTER DELETE ON records BEGIN UPDATE record_writes SET n = n + 1; END",
    ], version=7)


def _fts_usermerge(conn: Any, ctx: dict[str, Any]) -> None:
    """Full text in few segments: FTS5's `usermerge` 2 lets the 'merge' that a small `add_records`
    runs (a session's memory event; engine.stores.sqlite.records) merge any two segments of a level,
    where FTS5's defaults leave one more segment every few events, each probed by every term lookup
    (60 adds of 20 rows: 3 segments, 15 without). The option is stored in the index's config table.
    Bulk loads leave merging to FTS5 and `bulk_load`'s optimize at the end."""
    run_statements(_executor(conn), [
        "INSERT INTO records_fts(records_fts, rank) VALUES ('usermerge', 2)",
    ], version=8)


def _scores_without_user_index(conn: Any, ctx: dict[str, Any]) -> None:
    """The scoring log without its user index: every retrieval writes ~24 score rows, and keeping a
    third b-tree per row cost more than the rows did (writing a retrieval's event and 24 rows with
    their commit, alternating A/B on one machine: 0.366 → 0.230 ms p50, 9.9 → 9.3 KB). Nothing on a
    turn's path reads scores by user: a retrieval's rows are read and compacted by event id
    (`scores_event`), and only forget_user and `memlab check` visit a user's rows, by a scan of a
    table the retention policy keeps short."""
    run_statements(_executor(conn), [
        "DROP INDEX IF EXISTS scores_user",
    ], version=9)


def _score_batches(conn: Any, ctx: dict[str, Any]) -> None:
    """Score entries may hold a whole retrieval's rows (engine.core.scorelog: `record_id` 0, the rows
    as columns in one JSON object). The tables stay; `meta` says so, and the version that a memlab
    before this one would misread such an entry, so it refuses the file instead."""
    run_statements(_executor(conn), [
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('score_entries', 'a row each, or a batch: record_id 0')",
    ], version=10)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(version=1, name="tables", apply=_initial),
    Migration(version=2, name="partition versions", apply=_partition_versions),
    Migration(version=3, name="bounded reads (session heads, record counts, indexes)", apply=_bounded_reads),
    Migration(version=4, name="record said_at and lasting, profile value sources", apply=_said_at_and_sources),
    Migration(version=5, name="per-user contentless full text, sign bits only in vec0", apply=_keyed_fts_bits_only_vec),
    Migration(version=6, name="tag index (record_tags, kept by triggers)", apply=_tag_index),
    Migration(version=7, name="record write counter (kept by triggers)", apply=_record_writes),
    Migration(version=8, name="full text kept in few segments (usermerge 2)", apply=_fts_usermerge),
    Migration(version=9, name="score rows without a user index", apply=_scores_without_user_index),
    Migration(version=10, name="a retrieval's score rows as one entry", apply=_score_batches),
)
#: The schema this code writes; a file at a higher version is refused (a newer memlab wrote it).
SCHEMA_VERSION = check_sequence(MIGRATIONS)


def schema_version(conn: Any) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: Any, *, dim: int, embedder_name: str, where: str, target: int = SCHEMA_VERSION) -> int:
    """Bring the file to `target` (default: the latest), each missing step once; returns the version.

    The version is read again inside each step's exclusive transaction, so when several
    connections race on a new or old file the first runs the step and the others, having
    waited for the lock, find it done. A file with tables but no version is not a memlab store.
    """
    version = schema_version(conn)
    if version > SCHEMA_VERSION:
        raise newer_schema_error(where, version, SCHEMA_VERSION)
    context = {"dim": int(dim), "embedder_name": embedder_name}
    while version < target:
        conn.execute("BEGIN IMMEDIATE")  # waits (busy timeout) while another opener migrates
        try:
            version = schema_version(conn)
            if version > SCHEMA_VERSION:
                raise newer_schema_error(where, version, SCHEMA_VERSION)
            if version < target:
                _refuse_foreign(conn, version, where)
                MIGRATIONS[version].apply(conn, context)
                version += 1
                conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return version


def _refuse_foreign(conn: Any, version: int, where: str) -> None:
    if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]:
        raise StoreError(f"{where} is an SQLite file but not a memlab store; choose another path")
