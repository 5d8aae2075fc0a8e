"""The embedded back end: SQLite + sqlite-vec + FTS5 in one file (or ':memory:').

Modules: `driver` (which SQLite, connections with sqlite-vec, WAL), `migrations` (the
versioned schema), `vectors` (in-memory vector partitions under a memory budget), `rows`
(record <-> row), `records` and `search` (the store's record and retrieval methods),
`store` (SQLiteStore: connection, transactions, caches, privacy, stats).
"""

from engine.stores.sqlite.driver import driver_name, sqlite_module
from engine.stores.sqlite.migrations import MIGRATIONS, SCHEMA_VERSION
from engine.stores.sqlite.search import EXACT_KNN_MAX
from engine.stores.sqlite.store import SQLiteStore
from engine.stores.sqlite.vector_cache import VECTOR_CACHE_MB

__all__ = ["EXACT_KNN_MAX", "MIGRATIONS", "SCHEMA_VERSION", "VECTOR_CACHE_MB", "SQLiteStore", "driver_name", "sqlite_module"]
