"""An exact re-implementation of FTS5's `bm25()` for `records_fts`, scored in numpy.

The keyword path of `SQLiteSearch.search_bm25` when it can answer exactly: FTS5's
bm25() reads every match's positions through its auxiliary-function API, which dominates a common
word's query (about 65 ms for 73k matches of one term against under 2 ms to count them, measured
on a contentless unicode61 table of 300k rows by benchmarks/bm25_profile.py). Here the postings are
read from an `fts5vocab` instance table in one string (group_concat) and scored with FTS5's own
formula and constants:

    idf(q)  = log((N - n(q) + 0.5) / (n(q) + 0.5)), 1e-6 when that is <= 0
    score   = -sum_q idf(q) * f(q, D) * (k1 + 1) / (f(q, D) + k1 * (1 - b + b * |D| / avgdl))

with N and avgdl from the index's averages record (every row of the table, as FTS5 counts them),
n(q) the rows holding term q, f(q, D) its occurrences in D and |D| the row's token count from the
docsize table (or a cache of them, `doc_lengths`). Only single-term phrases are scored; `score_terms` returns None for anything else
(callers keep FTS5 for it). Without a cache the lengths are read by a join, which costs more than
FTS5 itself for a common word; with one (kept per user by the caller) the common word's scoring
takes about a third of FTS5's time (benchmarks/bm25_profile.py).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from engine.core.lru import LRU
from engine.stores.sqlite.idindex import IdIndex

__all__ = ["K1", "B", "DocLengths", "Postings", "averages", "best", "doc_lengths", "doc_lengths_packed", "flush_totals",
           "scorable", "score_terms", "varints"]

K1 = 1.2
B = 0.75


def varints(blob: bytes) -> list[int]:
    """The SQLite varints packed in `blob` (FTS5's averages and docsize records)."""
    out: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for n in range(9):
            byte = blob[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def averages(conn: Any, table: str = "records_fts") -> tuple[int, int]:
    """(row count, token count) of the whole table, from its averages record."""
    row = conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0, 0
    vals = varints(bytes(row[0]))
    return vals[0], sum(vals[1:])


def _postings_of(conn: Any, vocab: str, terms: Sequence[str]) -> list[np.ndarray]:
    """Each term's postings (the doc id of each occurrence, in doc order), read in one statement of
    one scalar subquery per term (a question's terms new to the cache: three terms 79 -> 64 us at
    10k records, 166 -> 143 at 100k; `term IN (...) GROUP BY term` sorts every occurrence and took
    2.5x as long for common terms at 100k)."""
    wanted = list(dict.fromkeys(terms))
    sub = ", ".join([f"(SELECT group_concat(doc) FROM {vocab} WHERE term = ?)"] * len(wanted))
    got = dict(zip(wanted, conn.execute(f"SELECT {sub}", wanted).fetchone(), strict=True))
    return [_parsed(got[t]) for t in terms]


def _parsed(s: str | None) -> np.ndarray:
    return np.fromstring(s, dtype=np.int64, sep=",") if s else np.empty(0, np.int64)  # type: ignore[call-overload]


def _counted(occurrences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(doc ids ascending, occurrences in each) from one occurrence per entry. The vocab table lists
    a term's occurrences in doc order: runs are counted in one pass (a 51k-entry term: 2.3 -> 0.25
    ms against np.unique's sort); out of order they are sorted first."""
    occ = np.asarray(occurrences, dtype=np.int64)
    if len(occ) == 0:
        return occ, np.zeros(0, dtype=np.int64)
    if not bool(np.all(occ[1:] >= occ[:-1])):
        occ = np.sort(occ)
    starts = np.flatnonzero(_firsts(occ))
    return occ[starts], np.diff(starts, append=len(occ))


def _firsts(ordered: np.ndarray) -> np.ndarray:
    """Whether each entry of an ordered array starts a run of equal values."""
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return first


def _lengths(conn: Any, table: str, ids: np.ndarray) -> np.ndarray:
    rows = conn.execute(
        f"SELECT d.id, d.sz FROM json_each(?) j JOIN {table}_docsize d ON d.id = j.value ORDER BY d.id",
        (_json_ids(ids),),
    ).fetchall()
    got = dict((int(i), sum(varints(bytes(sz)))) for i, sz in rows)
    return np.array([got.get(int(i), 0) for i in ids], dtype=np.float64)


def doc_lengths(conn: Any, sql: str, params: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
    """(ids ascending, token counts) of the rows `sql` selects as (id, docsize blob): the cache
    `score_terms` takes, e.g. one user's rows of `records` joined to `records_fts_docsize`."""
    return _sorted_by_id(*_rows_lengths(conn.execute(sql, params).fetchall()))


def doc_lengths_packed(conn: Any, sql: str, params: tuple = ()) -> tuple[np.ndarray, np.ndarray] | None:
    """`doc_lengths` from one row instead of one per document: `sql` selects (the ids joined by ",",
    the docsize blobs' hex joined by "", the row count, the shortest and the longest blob) over the same rows,
    e.g. `DocLengths.PACKED_SQL`. Every blob being one byte below 0x80 (one column of fewer than
    128 tokens: a varint of one byte is its value), the lengths are those bytes; otherwise None
    (the caller reads the rows). A user's first keyword search builds the cache: at 1M records
    0.37-0.52 s this way against 0.71-0.94 s row by row (a million row objects made and decoded),
    at 10k 5.5-6.0 against 9.5-22.8 ms (measured alternately on one file; the join alone is ~0.1 s
    at 1M, the hex and the concatenation the rest)."""
    ids_text, hexes, count, shortest, longest = conn.execute(sql, params).fetchone()
    if not count:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    if shortest != 1 or longest != 1 or len(hexes) != 2 * count:
        return None
    lens = np.frombuffer(bytes.fromhex(hexes), dtype=np.uint8)
    ids = np.fromstring(ids_text, dtype=np.int64, sep=",")  # type: ignore[call-overload]
    if bool((lens >= 0x80).any()) or len(ids) != count:
        return None
    return _sorted_by_id(ids, lens.astype(np.float64))


def _rows_lengths(rows: list) -> tuple[np.ndarray, np.ndarray]:
    """(ids, token counts) of (id, docsize blob) rows, in their order."""
    sizes: dict[bytes, int] = {}  # a row's blob is a few bytes of a few dozen values: decode each once
    lens = np.fromiter((sizes.get(sz) or sizes.setdefault(sz, sum(varints(bytes(sz)))) for _, sz in rows),
                       dtype=np.float64, count=len(rows))  # fmt: skip
    return np.fromiter((i for i, _ in rows), dtype=np.int64, count=len(rows)), lens


def _sorted_by_id(ids: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):
        order = np.argsort(ids, kind="stable")
        ids, lens = ids[order], lens[order]
    return ids, lens


def _cached(ids: np.ndarray, lengths: tuple[np.ndarray, np.ndarray],
            index: IdIndex | None = None) -> np.ndarray | None:
    """Lengths of `ids` from a `doc_lengths` cache, None when one of them is not in it. `index`: an
    IdIndex of the cache's ids, to find them by (else by bisection)."""
    known, lens = lengths
    pos, held = (index if index is not None else IdIndex(known, table=False)).find(ids)
    if len(known) == 0 or not held.all():
        return None
    return lens[pos]


def _json_ids(ids: np.ndarray) -> str:
    return "[" + ",".join(map(str, ids.tolist())) + "]"


def flush_totals(conn: Any) -> None:
    """Make FTS5's averages record count the open transaction's own rows. FTS5 keeps a
    transaction's new rows in memory (its queries, the vocab table's included, see them) and
    writes them out with the row and token totals when a savepoint opens or the transaction
    commits: after a bare INSERT the record still holds the totals from before it, and bm25 made
    from them is not FTS5's. Opening and releasing a savepoint writes them."""
    conn.execute("SAVEPOINT fts_totals")
    conn.execute("RELEASE fts_totals")


def scorable(terms: list[str]) -> bool:
    """Whether `score_terms` can score this OR of phrases: each one lower-case ASCII alphanumeric term."""
    return bool(terms) and all(t.isascii() and t.isalnum() and t == t.lower() for t in terms)


def score_terms(conn: Any, terms: list[str], *, vocab: str, table: str = "records_fts",
                lengths: tuple[np.ndarray, np.ndarray] | None = None, postings: Postings | None = None,
                index: IdIndex | None = None):
    """(ids ascending, FTS5 bm25 scores) of the rows matching any of `terms` (an OR of
    single-term phrases), or None unless every term is one lower-case ASCII alphanumeric FTS5 term
    (unicode61 would fold or split anything else; a phrase needs positions), or when `lengths` (a
    `doc_lengths` cache, read instead of the docsize table) lacks a matching row. `postings`: a
    `Postings` cache read instead of the vocab table; `index`: an IdIndex of `lengths`' ids
    (`DocLengths.indexed`). Inside a transaction its own rows count too (`flush_totals`)."""
    if not scorable(terms):
        return None
    if conn.in_transaction:
        flush_totals(conn)
    n_rows, n_tokens = averages(conn, table)
    per_term = (postings.get_many(conn, vocab, terms) if postings is not None
                else [_counted(occ) for occ in _postings_of(conn, vocab, terms)])
    if not any(len(u) for u, _ in per_term):
        return np.empty(0, np.int64), np.empty(0, np.float64)
    ids, group, order = _union(per_term)
    dl = _lengths(conn, table, ids) if lengths is None else _cached(ids, lengths, index)
    if dl is None:
        return None
    avgdl = float(n_tokens) / float(n_rows)
    sizes = [len(u) for u, _ in per_term]
    idf = [math.log((n_rows - m + 0.5) / (m + 0.5)) for m in sizes]
    # each (row, term) pair's share, with the pairs in row order and a row's terms in query order;
    # bincount adds them in that order from 0.0, as a sum over the terms (absent ones add 0.0) would
    q = np.repeat(np.array([v if v > 0.0 else 1e-6 for v in idf]), sizes)[order]
    f = np.concatenate([c for _, c in per_term])[order].astype(np.float64)
    share = q * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * dl[group] / avgdl)))
    return ids, -1.0 * np.bincount(group, weights=share, minlength=len(ids))


def _union(per_term: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the rows of any term ascending, each (row, term) pair's row as an index into them, the pairs'
    order): the terms' ascending runs merged by one stable sort (a row's pairs stay in term order)."""
    cat = np.concatenate([u for u, _ in per_term])
    order = np.argsort(cat, kind="stable")
    rows = cat[order]
    first = _firsts(rows)
    return rows[first], np.cumsum(first) - 1, order


def best(ids: np.ndarray, scores: np.ndarray, k: int, keep: np.ndarray | None = None) -> np.ndarray:
    """The first `k` of `np.lexsort((ids, scores))` (ascending score, then id) among the positions
    `keep` allows: the k-th smallest score by partition, then only those at or below it sorted."""
    idx = np.arange(len(scores)) if keep is None else np.flatnonzero(keep)
    if k <= 0:
        return idx[:0]
    if k < len(idx):
        s = scores[idx]
        idx = idx[s <= np.partition(s, k - 1)[k - 1]]
    return idx[np.lexsort((ids[idx], scores[idx]))][:k]


class DocLengths:
    """Per-user `doc_lengths` caches of `records_fts`, patched by the store's own writes.

    `noted(user, conn, ids)` re-reads the docsize of rows just written (inside the write's
    transaction); `get` merges them in, building the user's cache on first use; `indexed` finds ids in
    it (an IdIndex: extended when rows were appended, else made again on first use after a change).
    The store drops everything on a rollback or another connection's commit, and a user on
    forget_user.
    """

    SQL = "SELECT r.id, d.sz FROM records r JOIN records_fts_docsize d ON d.id = r.id WHERE r.user_id = ?"
    #: The same rows as one row (`doc_lengths_packed`); both concatenations walk the join in one order.
    PACKED_SQL = ("SELECT group_concat(r.id, ','), group_concat(hex(d.sz), ''), count(*), min(length(d.sz)), "
                  "max(length(d.sz)) "
                  "FROM records r JOIN records_fts_docsize d ON d.id = r.id WHERE r.user_id = ?")

    def __init__(self) -> None:
        self._known: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._pending: dict[str, dict[int, int]] = {}
        self._indexes: dict[str, IdIndex] = {}
        self._room: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # arrays that `_known`'s are the start of

    def clear(self) -> None:
        self._known.clear()
        self._pending.clear()
        self._indexes.clear()
        self._room.clear()

    def pop(self, user_id: str) -> None:
        self._known.pop(user_id, None)
        self._pending.pop(user_id, None)
        self._indexes.pop(user_id, None)
        self._room.pop(user_id, None)

    def noted(self, user_id: str, conn: Any, ids: list[int]) -> None:
        if user_id not in self._known or not ids:
            return
        rows = conn.execute(f"SELECT id, sz FROM records_fts_docsize WHERE id IN ({','.join('?' * len(ids))})",
                            [int(i) for i in ids]).fetchall()  # fmt: skip
        if len(rows) != len(set(ids)):  # not as this cache expects: rebuild on next use
            self.pop(user_id)
            return
        self._pending.setdefault(user_id, {}).update((int(i), sum(varints(bytes(sz)))) for i, sz in rows)

    def get(self, user_id: str, conn: Any) -> tuple[np.ndarray, np.ndarray]:
        known = self._known.get(user_id)
        if known is None:
            known = doc_lengths_packed(conn, self.PACKED_SQL, (user_id,))
            known = self._known[user_id] = known if known is not None else doc_lengths(conn, self.SQL, (user_id,))
            self._indexes.pop(user_id, None)
        pending = self._pending.pop(user_id, None)
        if pending:
            before = known[0]
            appended = len(before) == 0 or min(pending) > before[-1]  # rows appended: the common write
            if appended:
                known = self._appended(user_id, known, pending)
            else:
                known = _merge(known, pending)
                if known[0] is not before:  # new arrays: the room after the old ones is no use
                    self._room.pop(user_id, None)
            self._known[user_id] = known
            index = self._indexes.pop(user_id, None)
            if index is not None and known[0] is before:  # rows rewritten (an update's merge): the same ids
                self._indexes[user_id] = index
            elif index is not None and len(before) and appended:
                self._indexes[user_id] = index.extended(known[0])
        return known

    def _appended(self, user_id: str, known: tuple[np.ndarray, np.ndarray], pending: dict[int, int]
                  ) -> tuple[np.ndarray, np.ndarray]:
        """`known` with the rows of `pending` (larger ids) after it, written into room kept after
        the user's arrays: rows appended one write at a time (the update step adds a record, then
        searches) cost their own size, not a copy of the user's lengths (16 MB at 1M records)."""
        ids, lens = known
        n, new_ids = len(ids), sorted(pending)
        m = len(new_ids)
        room = self._room.get(user_id)
        if room is None or ids.base is not room[0] or lens.base is not room[1] or n + m > len(room[0]):
            cap = n + m + max((n + m) // 4, 256)
            room = np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.float64)
            room[0][:n], room[1][:n] = ids, lens
            self._room[user_id] = room
        room[0][n:n + m] = new_ids
        room[1][n:n + m] = [pending[i] for i in new_ids]
        return room[0][:n + m], room[1][:n + m]

    def indexed(self, user_id: str, conn: Any) -> tuple[tuple[np.ndarray, np.ndarray], IdIndex]:
        """`get(user_id, conn)` and an IdIndex of its ids (pending rows merged first)."""
        known = self.get(user_id, conn)
        got = self._indexes.get(user_id)
        if got is None:
            got = self._indexes[user_id] = IdIndex(known[0])
        return known, got


def _merge(known: tuple[np.ndarray, np.ndarray], pending: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """`known` (ids ascending, lengths) with the rows of `pending` (id: length) in it. Rows that are
    all in it already (rewritten by updates) get their new lengths written into `known`'s own array,
    which is returned with the same ids; otherwise new arrays."""
    ids, lens = known
    new_ids = np.array(sorted(pending), dtype=np.int64)
    new_lens = np.array([pending[i] for i in new_ids.tolist()], dtype=np.float64)
    at = np.searchsorted(ids, new_ids)
    if int(at[-1]) < len(ids) and bool((ids[at] == new_ids).all()):  # rows rewritten: the same ids, new lengths
        lens[at] = new_lens
        return ids, lens
    keep = ~np.isin(ids, new_ids)
    all_ids = np.concatenate([ids[keep], new_ids])
    order = np.argsort(all_ids, kind="stable")
    return all_ids[order], np.concatenate([lens[keep], new_lens])[order]


class Postings:
    """Recently queried terms' postings, (doc ids ascending, occurrences in each), kept across queries.

    Reading a term's postings from the vocab table is one query per term per search; a user's
    questions repeat their words. The store's own writes patch the kept terms (`written`, with each
    row's body before and after: the row leaves the postings of the terms it loses and joins, with
    its count, those it has; a non-ASCII body clears everything, since unicode61 would fold it), so
    a session's new records do not send its next questions back to the index; everything goes on a
    rollback, another connection's commit or a deleted user (`clear`). At most `budget` doc ids are
    kept in all, least recently used terms out first.
    """

    def __init__(self, budget: int = 1 << 21) -> None:
        self.budget = int(budget)
        self._terms: LRU[str, tuple[np.ndarray, np.ndarray]] = LRU(self.budget, weigh=_n_docs)

    def __len__(self) -> int:
        return len(self._terms)

    def clear(self) -> None:
        self._terms.clear()

    def get(self, conn: Any, vocab: str, term: str) -> tuple[np.ndarray, np.ndarray]:
        return self.get_many(conn, vocab, [term])[0]

    def get_many(self, conn: Any, vocab: str, terms: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each term's (doc ids ascending, occurrences in each), the terms not kept read in one statement."""
        got = [self._terms.get(t) for t in terms]
        missing = list(dict.fromkeys(t for t, g in zip(terms, got, strict=True) if g is None))
        if missing:
            read = dict(zip(missing, (_counted(occ) for occ in _postings_of(conn, vocab, missing)), strict=True))
            for t, g in read.items():
                self._terms.put(t, g)
            got = [read[t] if g is None else g for t, g in zip(terms, got, strict=True)]
        return got  # type: ignore[return-value]

    def written(self, changes: Iterable[tuple[int, str | None, str | None]]) -> None:
        """Patch the kept terms for rows written: (row id, its body before or None, after or None)."""
        if not self._terms:
            return
        patch: list[tuple[int, list[str], Counter[str]]] = []
        for rid, before, after in changes:
            old_words, new_words = _words(before), _words(after)
            if old_words is None or new_words is None:
                self.clear()
                return
            patch.append((int(rid), old_words, Counter(new_words)))
        terms = self._terms
        for rid, old_words, counts in patch:
            for w in set(old_words) - counts.keys():
                if w in terms:
                    terms.replace(w, _without(terms.peek(w), rid))
            for w, c in counts.items():
                if w in terms:
                    terms.replace(w, _with(terms.peek(w), rid, c))
        terms.trim()


def _n_docs(got: tuple[np.ndarray, np.ndarray]) -> int:
    return len(got[0])


def _words(body: str | None) -> list[str] | None:
    """The unicode61 terms of an indexed body when they are its lower-cased ASCII words (what
    `index_text` writes), None when unicode61 might fold or split them otherwise."""
    if body is None:
        return []
    words = body.lower().split() if body.isascii() else None
    return words if words is not None and all(map(str.isalnum, words)) else None


def _without(got: tuple[np.ndarray, np.ndarray], rid: int) -> tuple[np.ndarray, np.ndarray]:
    ids, counts = got
    i = int(np.searchsorted(ids, rid))
    if i < len(ids) and ids[i] == rid:
        return np.delete(ids, i), np.delete(counts, i)
    return got


def _with(got: tuple[np.ndarray, np.ndarray], rid: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    ids, counts = got
    i = int(np.searchsorted(ids, rid))
    if i < len(ids) and ids[i] == rid:
        counts = counts.copy()
        counts[i] = count
        return ids, counts
    return np.insert(ids, i, rid), np.insert(counts, i, count)
