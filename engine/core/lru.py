"""One bounded, least-recently-used map for the engine's and the stores' in-process caches.

Every cache on the turn path (session turn numbers, prepared turns, compaction hints, live-window
extractions and decisions, message vectors, BM25 postings, vector partitions) keeps what it was
last asked for and forgets the oldest when full. `LRU` is that rule once: each entry weighs
`weigh(value)` (1 when no weigher is given, so the budget is a count), reading (`get`) or storing
(`put`) an entry makes it the most recently used, and the least recently used leave first while
the weights exceed the budget. `peek` and `replace` leave the order alone (a lookup that is not a
use, a patch of what is kept). An entry is weighed when it is kept; `reweigh` weighs them all
again for values that change size in place. Not thread-safe by itself: its owners hold their own
locks.

`per_object` is the other shape: a value derived from a frozen object (a record the store hands
back unchanged while nothing is written), kept per object and cleared when full, for lookups on
the retrieval's per-candidate path, where one dict lookup is the whole cost.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from functools import wraps
from typing import Any, Generic, TypeVar

__all__ = ["LRU", "per_object"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")


class LRU(Generic[K, V]):
    """A map of at most `budget` in weight; the least recently used entries leave first."""

    __slots__ = ("budget", "_weigh", "_items", "_weights", "_total")

    def __init__(self, budget: int, weigh: Callable[[V], int] | None = None) -> None:
        if int(budget) < 0:
            raise ValueError(f"an LRU budget cannot be negative (got {budget})")
        self.budget = int(budget)
        self._weigh = weigh
        self._items: OrderedDict[K, V] = OrderedDict()
        self._weights: dict[K, int] = {}
        self._total = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        """The keys, least recently used first."""
        return iter(self._items)

    @property
    def weight(self) -> int:
        """The kept entries' weights in all (their count without a weigher)."""
        return self._total

    def values(self) -> list[V]:
        return list(self._items.values())

    def items(self) -> list[tuple[K, V]]:
        """(key, value) pairs, least recently used first."""
        return list(self._items.items())

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value of `key`, now the most recently used; `default` when it is not kept."""
        items = self._items
        if key not in items:
            return default
        items.move_to_end(key)
        return items[key]

    def peek(self, key: K, default: V | None = None) -> V | None:
        """The value of `key` without counting it as a use."""
        return self._items.get(key, default)

    def put(self, key: K, value: V) -> bool:
        """Keep `value` as the most recently used and forget the oldest over the budget; False when
        it was not kept (alone heavier than the budget: then nothing else is evicted for it)."""
        w = self._weight_of(value)
        if w > self.budget:
            self.pop(key)
            return False
        self._set(key, value, w)
        self._items.move_to_end(key)
        self._trim()
        return True

    def replace(self, key: K, value: V) -> None:
        """Change a kept entry in its place (not a use); the budget is enforced by `trim`."""
        if key not in self._items:
            raise KeyError(key)
        self._set(key, value, self._weight_of(value))

    def reweigh(self) -> None:
        """Weigh every kept entry again (values that grew or shrank in place since they were kept)
        and forget the least recently used over the budget."""
        self._weights = {k: self._weight_of(v) for k, v in self._items.items()}
        self._total = sum(self._weights.values())
        self._trim()

    def trim(self) -> None:
        """Forget the least recently used entries until the weights fit the budget."""
        self._trim()

    def pop(self, key: K, default: V | None = None) -> V | None:
        if key not in self._items:
            return default
        self._total -= self._weights.pop(key)
        return self._items.pop(key)

    def drop(self, where: Callable[[K], bool]) -> int:
        """Forget every entry whose key `where` accepts (a user's entries); returns how many."""
        gone = [k for k in self._items if where(k)]
        for k in gone:
            self.pop(k)
        return len(gone)

    def clear(self) -> None:
        self._items.clear()
        self._weights.clear()
        self._total = 0

    def _weight_of(self, value: V) -> int:
        return 1 if self._weigh is None else int(self._weigh(value))

    def _set(self, key: K, value: V, w: int) -> None:
        self._total += w - self._weights.get(key, 0)
        self._weights[key] = w
        self._items[key] = value

    def _trim(self) -> None:
        items, weights = self._items, self._weights
        while items and self._total > self.budget:
            key, _ = items.popitem(last=False)
            self._total -= weights.pop(key)


def per_object(maxsize: int = 1 << 14) -> Callable[[Callable[[T], V]], Callable[[T], V]]:
    """Keep a one-argument function's value per argument object (for frozen objects: the value
    cannot change while the object lives), by id() with the object held so its id is not reused
    while kept; all of it is forgotten when `maxsize` objects are kept (a bounded cache)."""

    def wrap(compute: Callable[[T], V]) -> Callable[[T], V]:
        kept: dict[int, tuple[Any, V]] = {}

        @wraps(compute)
        def kept_compute(obj: T) -> V:
            got = kept.get(id(obj))
            if got is not None and got[0] is obj:
                return got[1]
            out = compute(obj)
            if len(kept) >= maxsize:
                kept.clear()
            kept[id(obj)] = (obj, out)
            return out

        return kept_compute

    return wrap
