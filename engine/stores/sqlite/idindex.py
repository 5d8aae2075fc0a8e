"""Where ids sit in an ascending array of unique ids: by a direct-address table when they are dense.

A user's record ids in a shared table are nearly consecutive (other users' rows interleave), so an
int32 table over their span (at most `SPAN_PER_ID` entries an id) finds each id with one read, where a
bisection of a million ids reads ~20 scattered entries: the keyword path looks up every match's
document length and validity this way (measured on the 1M-record bench user, ~45k matches a query:
the two lookups 7.4 -> 0.37 ms). Sparse or small arrays are bisected as before.
"""

from __future__ import annotations

import numpy as np

__all__ = ["IdIndex", "SPAN_PER_ID", "TABLE_MIN"]

#: Below this many ids a bisection costs about what a table read does: no table.
TABLE_MIN = 4096
#: A table is made only while it spans at most this many entries per id (4 bytes each).
SPAN_PER_ID = 4


class IdIndex:
    """Positions in `have` (ascending, unique, not changed while this index is used); `table=False`:
    always by bisection (an index used once, not worth a table). `extended` follows rows appended
    with larger ids (a store's writes) without remaking the table."""

    __slots__ = ("_have", "_lo", "_span", "_table", "_use_table")

    def __init__(self, have: np.ndarray, *, table: bool = True):
        self._have = have
        self._use_table = table
        self._lo = self._span = 0
        self._table: np.ndarray | None = None  # entries [0, _span) in use; later ones -1, room to grow
        n = len(have)
        if table and n >= TABLE_MIN:
            lo = int(have[0])
            span = int(have[-1]) - lo + 1
            if span <= SPAN_PER_ID * n:
                grid = np.full(span, -1, dtype=np.int32)
                grid[have - lo] = np.arange(n, dtype=np.int32)
                self._lo, self._span, self._table = lo, span, grid

    @property
    def direct(self) -> bool:
        """Whether a table answers (else a bisection)."""
        return self._table is not None

    def extended(self, have: np.ndarray) -> IdIndex:
        """An index of `have`: this index's ids followed by larger ones, ascending. With a table the
        new ids are written into it (grown by doubling when full), not the whole table remade; this
        index stays right for its own ids (it reads only its own span of the shared table), but only
        the newest index of a chain may be extended again (callers replace the old one)."""
        old_n = len(self._have)
        new = np.asarray(have[old_n:], dtype=np.int64)
        table = self._table
        if table is None or len(new) == 0:
            return IdIndex(have, table=self._use_table) if len(new) else self
        span = int(new[-1]) - self._lo + 1
        if not (int(new[0]) > int(self._have[-1]) and bool(np.all(new[1:] > new[:-1]))) \
                or span > SPAN_PER_ID * len(have):
            return IdIndex(have, table=self._use_table)
        if span > len(table):  # room for the next appends too: each id is written once, amortised
            grown = np.full(max(span, 2 * len(table)), -1, dtype=np.int32)
            grown[: self._span] = table[: self._span]
            table = grown
        table[new - self._lo] = np.arange(old_n, len(have), dtype=np.int32)
        out = IdIndex.__new__(IdIndex)
        out._have, out._use_table, out._lo, out._span, out._table = have, self._use_table, self._lo, span, table
        return out

    def find(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position, held) of each of `ids`: its index in `have` (0 where it is not there) and whether it is."""
        ids = np.asarray(ids, dtype=np.int64)
        if self._table is None:
            have = self._have
            at = np.searchsorted(have, ids)
            held = at < len(have)
            held[held] = have[at[held]] == ids[held]
        else:
            table = self._table
            off = ids - self._lo
            inside = (off >= 0) & (off < self._span)
            at = table[np.where(inside, off, 0)]
            held = inside & (at >= 0)
        return np.where(held, at, 0), held
