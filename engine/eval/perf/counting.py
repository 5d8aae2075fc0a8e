"""`CountingStore`: a store proxy that counts the rows each store method returns.

Wrap any store and hand the proxy to the engine: it sees the same store API (every attribute and
method is the wrapped store's), and the proxy tallies, per method, the calls made and the rows
returned. "Rows read" is the sum over the read methods, so a benchmark can show whether an
ordinary turn's reads grow with the session's length.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

__all__ = ["CountingStore", "READ_METHODS", "rows_in"]

#: The store protocol's read methods (engine.stores.base.Store).
READ_METHODS = frozenset({
    "messages", "count_messages", "pending_sessions", "get_messages", "sessions", "users", "get_records",
    "records", "count_records", "vectors", "search_bm25", "search_dense", "get_profile", "profile_history",
    "get_cursor", "get_kv", "events", "scores", "stats",
})


def rows_in(result: Any) -> int:
    """Rows a store call returned: a sequence's or mapping's length, 0 for None, else one row
    (a profile, a cursor, a key's value, a count)."""
    if result is None:
        return 0
    if isinstance(result, (list, tuple, set, frozenset, Mapping)):
        return len(result)
    return 1


class CountingStore:
    """Delegates everything to `store`; counts calls and returned rows per method."""

    def __init__(self, store: Any):
        self._store = store
        self.calls: Counter[str] = Counter()
        self.rows: Counter[str] = Counter()

    @property
    def wrapped(self) -> Any:
        return self._store

    def __getattr__(self, name: str) -> Any:
        if name == "_store":  # not yet set (copy, pickle): no recursion
            raise AttributeError(name)
        attr = getattr(self._store, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            out = attr(*args, **kwargs)
            self.calls[name] += 1
            self.rows[name] += rows_in(out)
            return out

        self.__dict__[name] = counted  # built once: later calls skip __getattr__ (the proxy stays ~free)
        return counted

    def rows_read(self) -> int:
        """Rows returned by read methods since the last `reset`."""
        return sum(n for method, n in self.rows.items() if method in READ_METHODS)

    def reads_by_method(self) -> dict[str, int]:
        return {m: n for m, n in sorted(self.rows.items()) if m in READ_METHODS and n}

    def reset(self) -> None:
        self.calls.clear()
        self.rows.clear()
