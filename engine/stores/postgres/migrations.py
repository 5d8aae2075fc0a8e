"""The PostgreSQL schema as versioned migrations, recorded in the schema's `schema_version` table.

Each step is a named function of statements taking a schema from version N-1 to N; released
steps never change. `migrate` runs each missing step in a transaction of its own that first
takes a transaction-level advisory lock (`pg_advisory_xact_lock`), re-reads the applied
versions, runs the step and records it, so concurrent openers run every step exactly once and
a killed opener leaves the schema at its last whole version.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from psycopg import sql

from engine.stores.migrate import (
    Migration,
    check_sequence,
    newer_schema_error,
    run_statements,
)

__all__ = ["LOCK_KEY", "MIGRATIONS", "SCHEMA_VERSION", "migrate"]

log = logging.getLogger(__name__)

#: One lock for every schema: CREATE EXTENSION is database-wide, so openers of any schema serialise.
LOCK_KEY = "memlab-migrate"


def _tables(cur: psycopg.Cursor, ctx: dict[str, Any]) -> None:
    records = sql.SQL(
        """CREATE TABLE records (
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
            tsv tsvector GENERATED ALWAYS AS (to_tsvector({lang}::regconfig, fts_text)) STORED)"""
    ).format(dim=sql.Literal(int(ctx["dim"])), lang=sql.Literal(ctx["language"]))
    run_statements(cur.execute, [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE messages (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            user_id TEXT NOT NULL, session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL, created_at_tz INT NOT NULL, name TEXT, tool_call_id TEXT)""",
        "CREATE INDEX messages_user_session ON messages (user_id, session_id, id)",
        "CREATE INDEX messages_user ON messages (user_id, id)",
        """CREATE TABLE profiles (
            user_id TEXT PRIMARY KEY, fields TEXT NOT NULL, version INT NOT NULL,
            updated_at TIMESTAMPTZ, updated_at_tz INT)""",
        """CREATE TABLE profile_history (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, user_id TEXT NOT NULL,
            version INT NOT NULL, at TIMESTAMPTZ NOT NULL, entry TEXT NOT NULL)""",
        "CREATE INDEX profile_history_user ON profile_history (user_id, id)",
        """CREATE TABLE cursors (
            user_id TEXT NOT NULL, session_id TEXT NOT NULL, name TEXT NOT NULL, value BIGINT NOT NULL,
            PRIMARY KEY (user_id, session_id, name))""",
        "CREATE TABLE kv (user_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (user_id, key))",
        """CREATE TABLE events (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            user_id TEXT NOT NULL, session_id TEXT NOT NULL, kind TEXT NOT NULL,
            at TIMESTAMPTZ NOT NULL, at_tz INT NOT NULL, turn INT, event_no INT, payload TEXT NOT NULL)""",
        "CREATE INDEX events_user ON events (user_id, session_id, id)",
        "CREATE INDEX events_at ON events (at)",
        """CREATE TABLE scores (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, event_id BIGINT NOT NULL,
            user_id TEXT NOT NULL, record_id BIGINT NOT NULL, row TEXT NOT NULL)""",
        "CREATE INDEX scores_event ON scores (event_id, id)",
        "CREATE INDEX scores_user ON scores (user_id)",
        records,
        "CREATE INDEX records_user ON records (user_id, id)",
        "CREATE INDEX records_user_current ON records (user_id, id) WHERE invalid_at IS NULL",
    ], version=1)


def _search_indexes(cur: psycopg.Cursor, ctx: dict[str, Any]) -> None:
    hnsw = sql.SQL(
        "CREATE INDEX records_embedding ON records USING hnsw (embedding vector_cosine_ops) "
        "WITH (m = {m}, ef_construction = {efc})"
    ).format(m=sql.Literal(int(ctx["hnsw_m"])), efc=sql.Literal(int(ctx["hnsw_ef_construction"])))
    run_statements(cur.execute, [hnsw, "CREATE INDEX records_tsv ON records USING gin (tsv)"], version=2)


def _bounded_reads(cur: psycopg.Cursor, ctx: dict[str, Any]) -> None:
    """Each session's first and last message id (kept by add_message), and indexes for bounded reads."""
    run_statements(cur.execute, [
        """CREATE TABLE session_heads (user_id TEXT NOT NULL, session_id TEXT NOT NULL,
            first_id BIGINT NOT NULL, last_id BIGINT NOT NULL, PRIMARY KEY (user_id, session_id))""",
        """INSERT INTO session_heads (user_id, session_id, first_id, last_id)
            SELECT user_id, session_id, min(id), max(id) FROM messages GROUP BY user_id, session_id""",
        "CREATE INDEX session_heads_first ON session_heads (user_id, first_id)",
        "CREATE INDEX messages_user_session_role ON messages (user_id, session_id, role, id)",
        "CREATE INDEX messages_user_role ON messages (user_id, role, id)",
        "CREATE INDEX events_user_id ON events (user_id, id)",
        "CREATE INDEX events_user_kind ON events (user_id, kind, id)",
    ], version=3)


def _said_at_and_sources(cur: psycopg.Cursor, ctx: dict[str, Any]) -> None:
    """Records gain `said_at` (from `valid_from`, the source time before) and `lasting`; profile
    values gain the records they rest on (`sources`)."""
    run_statements(cur.execute, [
        "ALTER TABLE records ADD COLUMN said_at TIMESTAMPTZ, ADD COLUMN said_at_tz INT, "
        "ADD COLUMN lasting BOOLEAN NOT NULL DEFAULT TRUE",
        "UPDATE records SET said_at = valid_from, said_at_tz = valid_from_tz WHERE said_at IS NULL",
        "ALTER TABLE profiles ADD COLUMN sources TEXT NOT NULL DEFAULT '{}'",
    ], version=4)


def _tag_index(cur: psycopg.Cursor, ctx: dict[str, Any]) -> None:
    """Records by (user, tag, currency), as an index: a tagged read is an index range.

    `record_tags` holds one row per record and tag, kept by triggers on `records` (a statement
    trigger over the inserted rows, so bulk inserts and COPY add one INSERT .. SELECT, and one over
    the deleted rows; a row trigger for tag, owner or validity changes), whichever code or hand
    writes.
    Backfilled from `records`.
    """
    run_statements(cur.execute, [
        """CREATE TABLE record_tags (user_id TEXT NOT NULL, tag TEXT NOT NULL, current BOOLEAN NOT NULL,
            id BIGINT NOT NULL, PRIMARY KEY (user_id, tag, current, id))""",
        """INSERT INTO record_tags (user_id, tag, current, id)
            SELECT DISTINCT r.user_id, t.tag, r.invalid_at IS NULL, r.id FROM records r, unnest(r.tags) AS t(tag)
            WHERE t.tag IS NOT NULL""",
        """CREATE FUNCTION record_tags_added() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        BEGIN
            INSERT INTO record_tags (user_id, tag, current, id)
            SELECT DISTINCT n.user_id, t.tag, n.invalid_at IS NULL, n.id FROM added n, unnest(n.tags) AS t(tag)
            WHERE t.tag IS NOT NULL ON CONFLICT DO NOTHING;
            RETURN NULL;
        END $$""",
        """CREATE FUNCTION record_tags_changed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        BEGIN
            DELETE FROM record_tags WHERE user_id = OLD.user_id AND tag = ANY(OLD.tags)
                AND current = (OLD.invalid_at IS NULL) AND id = OLD.id;
            INSERT INTO record_tags (user_id, tag, current, id)
            SELECT DISTINCT NEW.user_id, t.tag, NEW.invalid_at IS NULL, NEW.id FROM unnest(NEW.tags) AS t(tag)
            WHERE t.tag IS NOT NULL ON CONFLICT DO NOTHING;
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER records_tags_insert AFTER INSERT ON records REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION record_tags_added()""",
        """CREATE TRIGGER records_tags_update AFTER UPDATE OF user_id, tags, invalid_at ON records FOR EACH ROW
            WHEN (OLD.user_id IS DISTINCT FROM NEW.user_id OR OLD.tags IS DISTINCT FROM NEW.tags
                  OR (OLD.invalid_at IS NULL) IS DISTINCT FROM (NEW.invalid_at IS NULL))
            EXECUTE FUNCTION record_tags_changed()""",
        """CREATE FUNCTION record_tags_removed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        BEGIN
            DELETE FROM record_tags t USING removed o WHERE t.user_id = o.user_id AND t.tag = ANY(o.tags)
                AND t.current = (o.invalid_at IS NULL) AND t.id = o.id;
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER records_tags_delete AFTER DELETE ON records REFERENCING OLD TABLE AS removed
            FOR EACH STATEMENT EXECUTE FUNCTION record_tags_removed()""",
    ], version=5)


def _score_batches(cur: psycopg.Cursor, ctx: dict[str, Any]) -> None:
    """Score entries may hold a whole retrieval's rows (engine.core.scorelog: `record_id` 0, the rows
    as columns in one JSON object). The tables stay; the comments say so, and the version that a
    memlab before this one would misread such an entry, so it refuses the schema instead."""
    run_statements(cur.execute, [
        "COMMENT ON TABLE scores IS 'score rows of retrievals: one row each, or a batch (record_id 0)'",
        "COMMENT ON COLUMN scores.record_id IS 'the scored record; 0: row holds a retrieval''s rows as columns'",
    ], version=6)


#: Versioned migrations, applied in order; each runs once per schema, recorded in schema_version.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(version=1, name="tables", apply=_tables),
    Migration(version=2, name="search indexes (HNSW cosine, GIN tsvector)", apply=_search_indexes),
    Migration(version=3, name="bounded reads (session heads, indexes)", apply=_bounded_reads),
    Migration(version=4, name="record said_at and lasting, profile value sources", apply=_said_at_and_sources),
    Migration(version=5, name="tag index (record_tags, kept by triggers)", apply=_tag_index),
    Migration(version=6, name="a retrieval's score rows as one entry", apply=_score_batches),
)
SCHEMA_VERSION = check_sequence(MIGRATIONS)


def _enter(conn: psycopg.Connection, schema: str) -> None:
    """Inside a transaction: take the migration lock, make sure the extension and schema exist."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (LOCK_KEY,))
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    conn.execute(sql.SQL("SET LOCAL search_path TO {}, public").format(sql.Identifier(schema)))
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version INT PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )


def migrate(
    conn: psycopg.Connection, *, schema: str, context: dict[str, Any], target: int = SCHEMA_VERSION
) -> dict[str, str]:
    """Apply every missing step up to `target`, one locked transaction each; returns the meta rows.

    `conn` is in autocommit mode. The meta defaults (dim, embedder, language) are written once,
    when absent, and the stored values returned for the caller to compare with what it asked.
    """
    while True:
        with conn.transaction():
            _enter(conn, schema)
            done = {row[0] for row in conn.execute("SELECT version FROM schema_version")}
            if done and max(done) > SCHEMA_VERSION:
                raise newer_schema_error(f"schema {schema!r}", max(done), SCHEMA_VERSION)
            pending = [m for m in MIGRATIONS if m.version not in done and m.version <= target]
            if not pending:
                return _settle_meta(conn, context)
            step = pending[0]
            with conn.cursor() as cur:
                step.apply(cur, context)
                cur.execute("INSERT INTO schema_version (version, name) VALUES (%s, %s)", (step.version, step.name))
        log.info("schema %s: applied migration %d (%s)", schema, step.version, step.name)


def _settle_meta(conn: psycopg.Connection, context: dict[str, Any]) -> dict[str, str]:
    wanted = {"dim": str(context["dim"]), "embedder_name": context["embedder_name"], "language": context["language"]}
    with conn.cursor() as cur:
        for key, value in wanted.items():
            cur.execute("INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT DO NOTHING", (key, value))
        return dict(cur.execute("SELECT key, value FROM meta").fetchall())
