"""Exact dense search over in-memory copies of each user's float32 vectors, under a memory budget.

A matrix product over a user's whole partition is exact and, with numpy, faster than vec0's
float scan (~15 ms at 100k vectors of 384 dims against ~100 ms). A `VectorPartition` is one
user's copy, read once from `record_vectors`; it is current while its `version` equals the
user's row in `partition_versions`, which every write to the user's vectors or validity bumps
(from any connection or process). `VectorCache` (engine.stores.sqlite.vector_cache) keeps the
partitions least recently used first and evicts to stay within its byte budget. A partition whose
floats exceed the budget is kept *mapped*: its sign bits, ids, validity, inverse norms and an int8 copy in memory (~450 B a
384-d vector against ~1.6 KB), its floats memory-mapped from the copy saved beside the database
file (engine.stores.sqlite.sidecar), and searched coarse to fine: a Hamming scan over the sign
bits word by word, the pool every row at most as far as its pool-th nearest, the pool scored on
the int8 copy, and its best few rescored exactly on the file's floats. Where no copy can be
saved (':memory:', a read-only directory) or even that exceeds the budget, the store searches
with vec0 instead.

Sign bits stand for a vector only when its entries are non-zero: a *sparse* partition (more than
`SPARSE_ZERO_SHARE` of its entries exactly 0, as feature-hashed embeddings are: ~79 % for
`HashEmbeddings` of sentence-sized records) is searched exactly in memory, and when mapped ranked
on its int8 copy with the best few rescored exactly on the file's floats (at 60k hash-embedded
sentences the coarse pool kept .25 of the exact top 50; for MiniLM embeddings of LoCoMo, a pool
of 7.6 % kept .995: ARCHITECTURE).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from engine.stores.sqlite.idindex import IdIndex
from engine.stores.sqlite.vecmath import SPARSE_SAMPLE, column_sums, is_sparse, kth_largest, sample_again

__all__ = ["COLUMNS_MIN", "INELIGIBLE", "VectorPartition"]

#: The coarse pool holds at least one vector in this many (sign bits lose more neighbours as the
#: partition grows: at 1M vectors of 384 dims a pool of 2048 keeps ~.975 of the exact top 50, 3906 all).
COARSE_FRACTION = 256
#: A mapped partition reads from its file the floats of at least this many (or 2·k) of the pool's rows,
#: the best by the int8 copy's cosine, and rescores them exactly (file pages are read at random and may
#: have left the page cache: each costs a disk read then).
MAPPED_RESCORE_MIN = 128
#: Rows per block of the Hamming scan (its buffers stay in the CPU cache).
HAMMING_BLOCK = 1 << 16
#: The Hamming distance given to a row the search may not return (above any real one).
INELIGIBLE = 65535
#: A sparse partition of at least this many rows is searched exactly on a column-major copy of its
#: floats, reading only the columns where the query is not 0 (see `VectorPartition.search`).
COLUMNS_MIN = 4096
#: From this many rows the copy's columns are summed in place (`column_sums`), not gathered for an
#: einsum first (100k hash vectors 4.3 -> 2.3 ms; even at 10k, slower below).
COLUMN_SUMS_MIN = 16384


class VectorPartition:
    """One user's vectors in memory, with ids, inverse norms and validity, patched in place.

    A *mapped* partition (`mapped=True`, for one over the memory budget) keeps only its ids,
    validity, inverse norms, sign-bit codes and int8 copy (`q8`, `q8_scale`) in memory; its float
    matrix is the saved copy's file, memory-mapped (engine.stores.sqlite.sidecar), with rows
    appended since in `_tail`. It is always searched coarse to fine, so a query reads only the
    floats of the best few rows of its pool from the file.
    """

    __slots__ = ("_codes", "_cols", "_cols_job", "_gen", "_ids_index", "_index", "_sorted", "_sparse", "_tail",
                 "_q8_pending", "_q8_thread", "base_n", "q8", "q8_scale", "ids", "inv_norm", "mapped", "mat", "n",
                 "valid", "version")

    def __init__(self, version: int, ids: np.ndarray, mat: np.ndarray, valid: np.ndarray, *,
                 inv_norm: np.ndarray | None = None, codes: np.ndarray | None = None, mapped: bool = False,
                 q8: tuple[np.ndarray, np.ndarray] | None = None):
        self.version = version
        self.n = len(ids)
        self.ids = ids
        self.mat = mat
        self.mapped = bool(mapped)
        self.base_n = len(mat) if self.mapped else 0  # rows of the mapped file; later rows live in _tail
        self._tail = np.zeros((0, mat.shape[1]), dtype=np.float32)
        # mapped: each vector as int8 times a scale, in memory, to choose the few rows read from the file
        self.q8, self.q8_scale = q8 if q8 is not None else (None, None)
        self._q8_thread: threading.Thread | None = None
        self._q8_pending: tuple[np.ndarray, np.ndarray] | None = None
        if self.mapped and self.q8 is None:
            self.q8, self.q8_scale = self._quantize_all()
        self.inv_norm = self._inv_norm(mat) if inv_norm is None else inv_norm
        self.valid = valid
        self._index: dict[int, int] | None = None  # id -> row, made when a lookup needs it and ids are not sorted
        self._sorted: bool | None = None  # whether ids ascend (rows are then found by an IdIndex, no dict)
        self._ids_index: IdIndex | None = None  # of ids[:n] if they ascend: grows on appends, else made when asked
        # sign bits as uint64 words, one contiguous row per word (words, n): made on the first coarse search
        self._codes: np.ndarray | None = codes
        self._sparse: tuple[bool, int] | None = None  # (whether sparse, rows when sampled)
        # a sparse partition's floats column by column (dim, >= n): made in a thread, asked for by a search
        self._cols: np.ndarray | None = None
        self._cols_job: tuple[threading.Thread, dict[str, np.ndarray], int, int] | None = None
        self._gen = 0  # vectors replaced so far (a column copy made meanwhile may hold the old one)

    @property
    def index(self) -> dict[int, int]:
        if self._index is None:
            self._index = {int(rid): i for i, rid in enumerate(self.ids[: self.n].tolist())}
        return self._index

    def _positions(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(row, held) of each of `ids` (row 0 where not held) by an IdIndex; None unless the ids ascend (`index`)."""
        if self._sorted is None:
            self._sorted = bool(np.all(np.diff(self.ids[: self.n]) > 0))
        if not self._sorted:
            return None
        if self._ids_index is None:
            self._ids_index = IdIndex(self.ids[: self.n])
        return self._ids_index.find(ids)

    def _found(self, ids: Sequence[int]) -> list[tuple[int, int]]:
        """(id, row) of those of `ids` the partition holds, in the order given."""
        ids = [int(rid) for rid in ids]
        found = self._positions(np.array(ids, dtype=np.int64))
        if found is None:
            return [(rid, self.index[rid]) for rid in ids if rid in self.index]
        at, held = found
        return [(rid, i) for rid, i, h in zip(ids, at.tolist(), held.tolist(), strict=True) if h]

    def current_mask(self, ids: np.ndarray) -> np.ndarray | None:
        """Whether each of `ids` is current, None unless the partition holds them all (and its ids
        ascend, so `_positions` finds them)."""
        found = self._positions(ids)
        if found is None or not bool(found[1].all()):
            return None
        return self.valid[found[0]].astype(bool)

    def row(self, rid: int) -> int:
        """The partition row of record `rid` (KeyError when it holds none)."""
        found = self._found([rid])
        if not found:
            raise KeyError(rid)
        return found[0][1]

    @property
    def sparse(self) -> bool:
        """Whether the partition's vectors are sparse (`is_sparse` of up to `SPARSE_SAMPLE` rows spread
        over it), sampled again each time the partition has doubled since."""
        got = self._sparse
        if sample_again(self.n, got):
            rows = np.unique(np.linspace(0, self.n - 1, num=min(self.n, SPARSE_SAMPLE)).astype(np.int64))
            got = self._sparse = (is_sparse(self.rows(rows)) if self.n else False, max(1, self.n))
        return got[0]

    @property
    def codes(self) -> np.ndarray:
        """The sign-bit codes word by word, (words, >= n) uint64."""
        if self._codes is None or self._codes.shape[1] < self.n:
            if self.mapped:  # block by block: never the whole float matrix at once
                codes = np.concatenate([self.sign_codes(c) for c in self.float_chunks()] or [self.sign_codes(self._tail[:0])])
            else:
                codes = self.sign_codes(self.mat[: self.n])
            self._codes = np.ascontiguousarray(codes.T)
        return self._codes

    @staticmethod
    def sign_codes(mat: np.ndarray) -> np.ndarray:
        """Each row's sign bits packed into uint64 words (zero padded), (rows, words), for Hamming distances."""
        mat = np.atleast_2d(mat)
        packed = np.packbits(mat > 0, axis=1, bitorder="little")
        pad = -packed.shape[1] % 8
        if pad:
            packed = np.concatenate([packed, np.zeros((len(packed), pad), dtype=np.uint8)], axis=1)
        return np.ascontiguousarray(packed).view(np.uint64)

    def load_q8_in_background(self, loader: Callable[[], tuple[np.ndarray, np.ndarray] | None]) -> None:
        """Read the int8 copy in a thread (a mapped partition searches on its file's floats meanwhile),
        so the first search after opening does not wait for it."""
        self.q8 = self.q8_scale = None

        def run() -> None:
            try:
                self._q8_pending = loader()
            except Exception:  # noqa: BLE001 - made from the floats instead, when first needed
                self._q8_pending = None

        self._q8_thread = threading.Thread(target=run, name="memlab-q8-load", daemon=True)
        self._q8_thread.start()

    def q8_ready(self, *, wait: bool) -> bool:
        """Whether the int8 copy is in memory (with `wait`, after waiting for it or making it)."""
        t = self._q8_thread
        if t is not None:
            if not wait and t.is_alive():
                return False
            t.join()
            self._q8_thread = None
            got = self._q8_pending
            self._q8_pending = None
            if got is None or len(got[0]) != self.base_n or len(got[1]) != self.base_n:
                got = self._quantize_all()
            self.q8, self.q8_scale = got
        return self.q8 is not None

    def _quantize_all(self) -> tuple[np.ndarray, np.ndarray]:
        """The int8 copy of all n rows, made block by block (row by row it is the same as at once, and
        a mapped partition never holds its whole float matrix in memory)."""
        parts = [self.quantize(c) for c in self.float_chunks()] or [self.quantize(self.mat[:0])]
        return np.concatenate([q for q, _ in parts]), np.concatenate([sc for _, sc in parts])

    @staticmethod
    def quantize(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row as int8 codes and a float32 scale (row ≈ codes · scale)."""
        mat = np.atleast_2d(np.asarray(mat, dtype=np.float32))
        scale = np.abs(mat).max(axis=1, initial=0.0) / 127.0
        scale[scale == 0] = 1.0
        return np.rint(mat / scale[:, None]).astype(np.int8), scale.astype(np.float32)

    @staticmethod
    def _inv_norm(mat: np.ndarray) -> np.ndarray:
        norm = np.linalg.norm(mat, axis=1)
        return np.divide(1.0, norm, out=np.zeros_like(norm), where=norm > 0).astype(np.float32)

    @property
    def nbytes(self) -> int:
        """Memory the copy holds (a mapped matrix is the file's, not counted; its index entry is)."""
        codes = (0 if self._codes is None else self._codes.nbytes) + (0 if self._cols is None else self._cols.nbytes)
        mat = self._tail.nbytes + len(self.ids) * (self.mat.shape[1] + 4) if self.mapped else self.mat.nbytes
        return int(mat + self.ids.nbytes + self.inv_norm.nbytes + self.valid.nbytes + codes) + 100 * self.n

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """The float vectors of partition rows `rows` (sorted ascending reads the mapped file in order)."""
        if not self.mapped:
            return self.mat[rows]
        rows = np.asarray(rows)
        if not len(rows) or rows.max() < self.base_n:
            return np.asarray(self.mat[rows])
        out = np.empty((len(rows), self.mat.shape[1]), dtype=np.float32)
        low = rows < self.base_n
        out[low] = self.mat[rows[low]]
        out[~low] = self._tail[rows[~low] - self.base_n]
        return out

    def float_chunks(self, size: int = 65536) -> Iterator[np.ndarray]:
        """The n float vectors in row order, a block at a time (to save a mapped copy without a second matrix)."""
        for s in range(0, self.n, size):
            yield self.rows(np.arange(s, min(self.n, s + size)))

    def append(self, ids: Sequence[int], mat: np.ndarray, valid: Sequence[bool]) -> None:
        m = len(ids)
        if self.mapped:
            self.q8_ready(wait=True)
        if self.n + m > len(self.ids):  # grow by doubling so a stream of small adds stays linear
            cap = max(2 * len(self.ids), self.n + m, 16)
            for name in ("ids", "inv_norm", "valid", "q8", "q8_scale") if self.mapped else ("ids", "mat", "inv_norm", "valid"):
                old = getattr(self, name)
                new = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
                new[: self.n] = old[: self.n]
                setattr(self, name, new)
        if self.mapped and self.n + m - self.base_n > len(self._tail):
            cap = max(2 * len(self._tail), self.n + m - self.base_n, 16)
            new = np.zeros((cap, self.mat.shape[1]), dtype=np.float32)
            new[: len(self._tail)] = self._tail
            self._tail = new
        sl = slice(self.n, self.n + m)
        if self._codes is not None:
            self._codes = np.concatenate([self._codes[:, : self.n], self.sign_codes(mat).T], axis=1)
        if self._cols is not None:
            if self.n + m > self._cols.shape[1]:
                self._cols = self._widened(self._cols, self.n)
            self._cols[:, sl] = np.asarray(mat, dtype=np.float32).T
        self.ids[sl] = ids
        if self.mapped:
            self._tail[self.n - self.base_n: self.n - self.base_n + m] = mat
            self.q8[sl], self.q8_scale[sl] = self.quantize(mat)
        else:
            self.mat[sl] = mat
        self.inv_norm[sl] = self._inv_norm(mat)
        self.valid[sl] = valid
        if self._index is not None:
            for i, rid in enumerate(ids):
                self._index[int(rid)] = self.n + i
        if self._sorted and m:
            new = np.asarray(ids, dtype=np.int64)
            self._sorted = bool((self.n == 0 or new[0] > self.ids[self.n - 1]) and np.all(np.diff(new) > 0))
        self.n += m
        grows = self._sorted and self._ids_index is not None  # larger ids appended in order
        self._ids_index = self._ids_index.extended(self.ids[: self.n]) if grows else None

    def set_vector(self, rid: int, arr: np.ndarray) -> None:
        i = self.row(rid)
        if self.mapped and self.q8_ready(wait=True):
            self.q8[i], self.q8_scale[i] = (x[0] for x in self.quantize(arr.reshape(1, -1)))
        if self.mapped and i >= self.base_n:
            self._tail[i - self.base_n] = arr
        else:
            self.mat[i] = arr  # a mapped file is copy-on-write: the page becomes this process's own
        if self._cols is not None:
            self._cols[:, i] = arr
        self._gen += 1
        self.inv_norm[i] = self._inv_norm(arr.reshape(1, -1))[0]
        if self._codes is not None:
            self._codes[:, i] = self.sign_codes(arr.reshape(1, -1))[0]

    def set_valid(self, rid: int, valid: bool) -> None:
        self.valid[self.row(rid)] = valid

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        found = self._found(ids)
        if not found:
            return {}
        vecs = self.rows(np.array([i for _, i in found]))
        return {rid: vecs[j] for j, (rid, _) in enumerate(found)}

    def search(self, q: np.ndarray, k: int, include_invalid: bool, *, coarse_above: int | None = None,
               coarse_min: int = 2048, coarse_factor: int = 32, columns: bool = True) -> list[tuple[int, float]]:
        """Top-k by cosine, best first, ties by id: exact, or above `coarse_above` vectors (always, when
        mapped) coarse to fine (the max(coarse_min, coarse_factor·k, n / COARSE_FRACTION) nearest by the Hamming distance of
        sign bits, with every vector tied with the last of them, rescored exactly on the floats). A coarse
        pool that would hold every vector is exact, and so is the search of a sparse partition of at
        least `COLUMNS_MIN` rows whose second copy of the floats the caller's memory budget allows
        (`columns`, fixed by the partition's size), over the question's non-zero columns
        (`_sparse_dots`): on the column-major copy once it is in, on the same columns gathered from
        the rows until then, so the scores are the same to the last bit either way."""
        n = self.n
        if n == 0:
            return []
        pool = max(int(coarse_min), int(coarse_factor) * int(k), n // COARSE_FRACTION)
        if (self.mapped or (coarse_above is not None and n > coarse_above)) and pool < n:
            if not self.sparse:
                return self._coarse_search(q, k, include_invalid, pool)
            if self.mapped and self.q8_ready(wait=False):
                return self._q8_search(q, k, include_invalid)
        qn = float(np.linalg.norm(q))
        by_columns = columns and not self.mapped and n >= COLUMNS_MIN and self.sparse
        scores = (self._sparse_dots(q) if by_columns else self._dots(q)) * self.inv_norm[:n]
        scores *= np.float32(1.0 / qn) if qn > 0 else np.float32(0.0)
        eligible = n
        if not include_invalid:
            valid = self.valid[:n]
            eligible = int(np.count_nonzero(valid))
            scores[~valid] = -np.inf
        return self._top(scores, np.arange(n), k, eligible)

    def _dots(self, q: np.ndarray) -> np.ndarray:
        """Every row's dot product with `q` (a mapped file a block at a time, never all of it at once)."""
        if not self.mapped:
            return self._row_dots(self.mat[: self.n], q)
        return np.concatenate([self._row_dots(c, q) for c in self.float_chunks()])

    def _row_dots(self, block: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Each row of `block` times `q`: `vecdot` (a single-threaded BLAS dot per row) for dense
        vectors, einsum for sparse ones, rounding like their column search (ties: ARCHITECTURE)."""
        return np.einsum("ij,j->i", block, q) if self.sparse else np.vecdot(block, q)

    def _sparse_dots(self, q: np.ndarray) -> np.ndarray:
        """Every row's dot product with `q`, from the columns where `q` is not 0 only: exactly the
        same sum (the other terms are 0), read from the column-major copy (`columns_ready`). A
        feature-hashed question is ~90 % zeros, so this reads ~1/10 of the floats (at 10k
        hash-embedded records ~0.1-0.2 ms against ~0.55-0.6 for the whole matrix, the same top 50);
        a question with non-zero entries in most columns reads them all. Until the copy is in, the
        same columns are gathered from the rows and summed by the same call (~2x the whole matrix's
        time), so the scores never depend on how far that thread got (summing all 384 columns
        instead changed the 6th decimal of logged scores and could reorder near ties after a
        restart). A partition too large for the copy always sums the whole matrix."""
        nz = np.flatnonzero(q)
        if 2 * len(nz) > len(q):
            return self._dots(q)
        gathered = not self.columns_ready(wait=False)
        cols = np.ascontiguousarray(self.mat[: self.n, nz].T) if gathered else self._cols
        if self.n >= COLUMN_SUMS_MIN:  # copy or gathered alike: the sum never depends on the thread
            return column_sums(cols, np.arange(len(nz)) if gathered else nz, q[nz], self.n)
        return np.einsum("j,ji->i", q[nz], cols if gathered else cols[nz, : self.n])

    def columns_ready(self, *, wait: bool) -> bool:
        """Whether the column-major copy is in. The first ask starts making it in a thread (at 100k
        rows a 150 MB transposition, ~0.3 s: the first search after opening must not wait for it);
        searches use the whole matrix meanwhile. A copy made while a vector was replaced is thrown
        away and made again; rows appended meanwhile are added when it is taken in. `wait`: until
        it is in (tests)."""
        while self._cols is None:
            job = self._cols_job
            if job is None:
                job = self._cols_job = self._start_columns()
            thread, out, n0, gen0 = job
            if thread.is_alive() and not wait:
                return False
            thread.join()
            self._cols_job = None
            cols = out.get("cols")
            if cols is None or gen0 != self._gen:
                if not wait:
                    return False
                continue
            if cols.shape[1] < len(self.ids):  # the partition grew meanwhile
                cols = self._widened(cols, n0)
            cols[:, n0: self.n] = self.mat[n0: self.n].T
            self._cols = cols
        return True

    def _widened(self, cols: np.ndarray, n: int) -> np.ndarray:
        """A column-major copy with room for every row the ids have room for, its first `n` columns kept."""
        grown = np.zeros((cols.shape[0], len(self.ids)), dtype=np.float32)
        grown[:, :n] = cols[:, :n]
        return grown

    def _start_columns(self) -> tuple[threading.Thread, dict[str, np.ndarray], int, int]:
        mat, n0, cap, out = self.mat, self.n, len(self.ids), {}

        def run() -> None:  # numpy's copy releases the GIL: this runs beside the searches
            cols = np.zeros((mat.shape[1], cap), dtype=np.float32)
            cols[:, :n0] = mat[:n0].T
            out["cols"] = cols

        thread = threading.Thread(target=run, name="memlab-columns", daemon=True)
        thread.start()
        return thread, out, n0, self._gen

    def _top(self, scores: np.ndarray, rows: np.ndarray, k: int, eligible: int) -> list[tuple[int, float]]:
        """The k best of `scores` (for partition rows `rows`; -inf for the ineligible), ties by id."""
        m = len(scores)
        k = min(k, eligible)
        if k <= 0:
            return []
        if k < m:  # everything better than the k-th score, and of those tied with it the smallest ids
            kth = kth_largest(scores, k)
            cand = np.flatnonzero(scores > kth)
            tied = np.flatnonzero(scores == kth)
            need = k - len(cand)
            if len(tied) > need:
                tied = tied[np.argsort(self.ids[rows[tied]], kind="stable")[:need]]
            cand = np.concatenate([cand, tied])
        else:
            cand = np.flatnonzero(scores > -np.inf)
        ids = self.ids[rows[cand]]
        order = np.lexsort((ids, -scores[cand]))[:k]
        return list(zip(ids[order].tolist(), scores[cand[order]].tolist(), strict=True))

    def hamming(self, q: np.ndarray, include_invalid: bool) -> np.ndarray:
        """Each row's Hamming distance to the query's sign bits (uint16; `INELIGIBLE` for a
        superseded row unless include_invalid), word by word over blocks that stay in cache."""
        n = self.n
        codes, qc = self.codes, self.sign_codes(q)[0]
        ham = np.empty(n, dtype=np.uint16)
        buf, cnt = np.empty(HAMMING_BLOCK, dtype=np.uint64), np.empty(HAMMING_BLOCK, dtype=np.uint8)
        for s in range(0, n, HAMMING_BLOCK):
            e = min(n, s + HAMMING_BLOCK)
            acc, b, c = ham[s:e], buf[: e - s], cnt[: e - s]
            for j in range(codes.shape[0]):
                np.bitwise_xor(codes[j, s:e], qc[j], out=b)
                np.bitwise_count(b, out=c)
                if j:
                    acc += c
                else:
                    acc[:] = c
            if not include_invalid:
                acc[~self.valid[s:e]] = INELIGIBLE
        return ham

    def _rescored(self, q: np.ndarray, rows: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The k best of partition rows `rows` by exact cosine on their floats (a pool's last step)."""
        qn = float(np.linalg.norm(q))
        scores = self._row_dots(self.rows(rows), q) * self.inv_norm[rows]
        scores *= np.float32(1.0 / qn) if qn > 0 else np.float32(0.0)
        return self._top(scores, rows, k, len(rows))

    def _q8_search(self, q: np.ndarray, k: int, include_invalid: bool) -> list[tuple[int, float]]:
        """A mapped sparse partition's search: approximate cosines of every row on the int8 copy in
        memory (block by block, no float copy of a block), the best max(MAPPED_RESCORE_MIN, 2k)
        (ties included) rescored exactly on the file's floats (sign bits would lose most neighbours
        of sparse vectors; measured and explained in ARCHITECTURE)."""
        n = self.n
        approx = np.empty(n, dtype=np.float32)
        for s in range(0, n, HAMMING_BLOCK):
            e = min(n, s + HAMMING_BLOCK)
            np.einsum("ij,j->i", self.q8[s:e], q, dtype=np.float32, casting="unsafe", out=approx[s:e])
        approx *= self.q8_scale[:n] * self.inv_norm[:n]
        eligible = n
        if not include_invalid:
            eligible = int(np.count_nonzero(self.valid[:n]))
            approx[~self.valid[:n]] = -np.inf
        r = min(max(MAPPED_RESCORE_MIN, 2 * k), eligible)
        if r <= 0:
            return []
        rows = np.flatnonzero(approx >= kth_largest(approx, r))
        rows = rows[approx[rows] > -np.inf]
        return self._rescored(q, rows, k)

    def _coarse_search(self, q: np.ndarray, k: int, include_invalid: bool, pool: int) -> list[tuple[int, float]]:
        ham = self.hamming(q, include_invalid)
        counts = np.bincount(ham, minlength=INELIGIBLE + 1)
        eligible = len(ham) - int(counts[INELIGIBLE])
        if min(pool, eligible) <= 0:
            return []
        # the pool: every row at most as far as the pool-th nearest (ties included, so no row order decides)
        limit = int(np.searchsorted(np.cumsum(counts[:INELIGIBLE]), min(pool, eligible)))
        rows = np.flatnonzero(ham <= limit)
        r = max(MAPPED_RESCORE_MIN, 2 * k)
        if self.mapped and len(rows) > r and self.q8_ready(wait=False):
            # approximate cosines on the int8 copy; the best few (ties included) are read from the file
            approx = np.einsum("ij,j->i", self.q8[rows].astype(np.float32), q) * (self.q8_scale[rows] * self.inv_norm[rows])
            rows = rows[approx >= kth_largest(approx, r)]
        return self._rescored(q, rows, k)
