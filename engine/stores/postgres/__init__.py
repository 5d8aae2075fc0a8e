"""The server back end: PostgreSQL with pgvector (HNSW) and tsvector (GIN), for many processes.

Modules: `server` (the bundled pgserver), `codec` (NUL-safe text), `migrations` (the versioned
schema), `rows` (record <-> row), `search` (BM25 and dense KNN), `store` (PostgresStore).
"""

from engine.stores.postgres.codec import escape_text, unescape_text
from engine.stores.postgres.migrations import MIGRATIONS, SCHEMA_VERSION
from engine.stores.postgres.server import DEFAULT_DATA_DIR, start_local_server
from engine.stores.postgres.store import PostgresStore
from engine.stores.sql import USER_TABLES

__all__ = [
    "DEFAULT_DATA_DIR",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "USER_TABLES",
    "PostgresStore",
    "escape_text",
    "start_local_server",
    "unescape_text",
]
