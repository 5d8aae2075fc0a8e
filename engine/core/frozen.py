"""`FrozenMap`: an immutable, hashable mapping for config tables (path and dimension weights)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["FrozenMap"]


class FrozenMap(Mapping[str, Any]):
    """A read-only mapping with a stable order and a hash, so a frozen config can hold tables.

    Equal to any mapping with the same items (so `cfg.path_weights == {"bm25": 0.4, ...}` holds).
    """

    __slots__ = ("_items", "_hash")

    def __init__(self, data: Mapping[str, Any] | None = None, /, **kw: Any):
        items = dict(data or {})
        items.update(kw)
        self._items = items
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(sorted(self._items.items())))
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"

    def __reduce__(self):
        return (FrozenMap, (dict(self._items),))
