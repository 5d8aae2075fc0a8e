"""The in-memory partition's coarse-to-fine dense search (sign-bit Hamming pool, exact rescoring)."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.eval.perf.corpus import synthetic_corpus
from engine.stores.sqlite.vectors import VectorPartition


def _partition(n: int, dim: int = 64, seed: int = 0):
    corpus = synthetic_corpus(dim=dim, seed=seed, vocab=400, topics=40)
    mat = corpus.vectors(n).astype(np.float32)
    valid = np.ones(n, dtype=bool)
    valid[::7] = False
    return corpus, VectorPartition(1, np.arange(10, 10 + n, dtype=np.int64), mat.copy(), valid)


def test_coarse_search_finds_nearly_all_of_the_exact_top_k_and_scores_them_exactly():
    corpus, part = _partition(6000)
    recalls = []
    for i in range(20):
        q = part.mat[i * 13] + 0.3 * corpus.rng.standard_normal(64).astype(np.float32) / 8
        exact = part.search(q, 50, False)
        coarse = part.search(q, 50, False, coarse_above=1000, coarse_min=600, coarse_factor=4)
        assert len(coarse) == 50
        assert all((rid - 10) % 7 != 0 for rid, _ in coarse)  # superseded rows stay out
        got = dict(coarse)
        for rid, s in exact:  # a record found by both scores the same: rescoring is exact
            if rid in got:
                assert abs(got[rid] - s) < 1e-5
        assert [s for _, s in coarse] == sorted((s for _, s in coarse), reverse=True)
        recalls.append(len(set(got) & {rid for rid, _ in exact}) / 50)
    assert np.mean(recalls) >= 0.95


def test_a_pool_as_large_as_the_partition_is_the_exact_search_and_patches_keep_the_codes():
    corpus, part = _partition(2000)
    q = part.mat[5].copy()
    assert part.search(q, 20, True, coarse_above=10) == part.search(q, 20, True)  # the pool (2048) holds all
    coarse = part.search(q, 5, False, coarse_above=10, coarse_min=200, coarse_factor=1)
    assert coarse[0][0] == 15  # the record itself
    new = -q
    part.set_vector(15, new)  # codes follow a replaced vector
    assert part.search(q, 5, False, coarse_above=10, coarse_min=200, coarse_factor=1)[0][0] != 15
    extra = corpus.vectors(1).astype(np.float32)
    part.append([99999], extra, [True])  # and appended ones
    assert part.search(extra[0], 1, False, coarse_above=10, coarse_min=200, coarse_factor=1)[0][0] == 99999


def _hashed(n: int, seed: int = 0) -> tuple[synthetic_corpus, np.ndarray]:
    """Feature-hashed sentence embeddings: most entries exactly 0."""
    from engine.roles.embeddings import HashEmbeddings

    corpus = synthetic_corpus(dim=384, seed=seed, vocab=3000, topics=10)
    emb = HashEmbeddings(384)
    return corpus, np.asarray(emb.embed_documents([corpus.sentence(8, 20) for _ in range(n)]), dtype=np.float32)


def _exact_ids(mat: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    cos = (mat @ q) / np.linalg.norm(mat, axis=1)
    return [int(ids[i]) for i in np.lexsort((ids, -cos))[:k]]


def test_sparse_vectors_are_searched_exactly_where_sign_bits_would_lose_most_neighbours(monkeypatch):
    """A 0 entry has no sign: over hash embeddings the sign-bit pool kept ~.25 of the exact top 50
    (measured at 60k); such a partition is searched exactly at any size, a dense one still coarse."""
    from engine.roles.embeddings import HashEmbeddings

    corpus, mat = _hashed(3000)
    ids = np.arange(10, 3010, dtype=np.int64)
    sparse = VectorPartition(1, ids.copy(), mat.copy(), np.ones(3000, dtype=bool))
    _, dense = _partition(3000)
    assert sparse.sparse and not dense.sparse
    coarse_calls = []
    real = VectorPartition._coarse_search
    monkeypatch.setattr(VectorPartition, "_coarse_search",
                        lambda self, *a: coarse_calls.append(self) or real(self, *a))
    emb = HashEmbeddings(384)
    for _ in range(10):
        q = np.asarray(emb.embed_query(corpus.sentence(3, 6)), dtype=np.float32)
        got = sparse.search(q, 20, False, coarse_above=10, coarse_min=200, coarse_factor=1)
        assert [rid for rid, _ in got] == _exact_ids(mat, ids, q, 20)
    assert coarse_calls == []
    dense.search(dense.mat[3], 20, False, coarse_above=10, coarse_min=200, coarse_factor=1)
    assert coarse_calls == [dense]


def test_sparseness_is_sampled_again_once_the_partition_has_doubled():
    _, mat = _hashed(40)
    _, part = _partition(30, dim=384)
    assert not part.sparse
    part.append(list(range(50000, 50040)), mat, [True] * 40)  # 70 rows now, 40 of them hashed
    assert part.sparse


def test_a_mapped_sparse_partition_ranks_on_its_int8_copy_and_rescores_from_its_file(tmp_path, monkeypatch):
    """Over the memory budget a sparse partition is ranked on the int8 copy in memory (every row)
    and its best rows rescored exactly from the file; before the copy is in, exactly from the file."""
    corpus, mat = _hashed(2500, seed=2)
    np.save(tmp_path / "m.npy", mat)
    ids = np.arange(1, 2501, dtype=np.int64)
    valid = np.ones(2500, dtype=bool)
    valid[::11] = False
    mapped = VectorPartition(1, ids.copy(), np.load(tmp_path / "m.npy", mmap_mode="c"), valid.copy(), mapped=True)
    read = []
    real_rows = VectorPartition.rows
    monkeypatch.setattr(VectorPartition, "rows", lambda self, rows: read.append(len(rows)) or real_rows(self, rows))
    live = np.flatnonzero(valid)
    for i in range(8):
        q = mat[i * 101] + 0.5 * mat[i * 101 + 1]
        got = mapped.search(q, 10, False, coarse_min=200, coarse_factor=1)
        assert [rid for rid, _ in got] == _exact_ids(mat[live], ids[live], q, 10)
        assert len(got) == 10 and all(valid[rid - 1] for rid, _ in got)
    assert read and max(read) < 400  # the best ~128 of 2,500 rows (ties included) read from the file, not all
    assert mapped.search(mat[5], 3, True, coarse_min=200)[0][0] == 6
    read.clear()
    mapped.q8 = None  # the int8 copy not in yet (loading in its thread): exact over the file
    q = mat[7] + 0.5 * mat[8]
    assert [rid for rid, _ in mapped.search(q, 10, False, coarse_min=200)] == _exact_ids(mat[live], ids[live], q, 10)


def test_the_engines_retrieval_over_hash_embeddings_is_the_exact_searchs_past_the_exact_limit(store_factory):
    """End to end: with hash embeddings, a partition past `exact_knn_max` (in memory, and with no
    room in memory) retrieves what the exact search retrieves: the same candidates, picks and scores."""
    from engine.core.clock import VirtualClock
    from engine.eval.perf.corpus import BENCH_NOW
    from engine.memory.engine import MemoryEngine
    from engine.roles.embeddings import HashEmbeddings
    from engine.core.records import MemoryRecord

    corpus = synthetic_corpus(dim=384, seed=5, vocab=2000, topics=10)
    emb = HashEmbeddings(384)
    texts = [corpus.sentence(8, 16) for _ in range(900)]
    vecs = np.asarray(emb.embed_documents(texts), dtype=np.float32)
    engines = []
    for kw in ({}, {"exact_knn_max": 100}, {"exact_knn_max": 100, "vector_cache_mb": 0}):
        store = store_factory(dim=384, **kw)
        store.add_records([MemoryRecord(user_id="u", content=t, created_at=BENCH_NOW) for t in texts], vecs)
        engines.append(MemoryEngine(None, store=store, clock=VirtualClock(BENCH_NOW), embedder=emb))
    for _ in range(8):
        q = corpus.sentence(3, 6)
        exact, in_memory, stored = [e.retrieve("u", q) for e in engines]
        # past the limit in memory: the same einsum over the same rows, so the same rows to the last digit
        assert [r.to_dict() for r in in_memory.rows] == [r.to_dict() for r in exact.rows]
        # from the stored floats: the same candidates and picks (cosines differ in the last float bits)
        assert stored.picked == exact.picked and sorted(stored.records) == sorted(exact.records)
        assert [r.record_id for r in stored.rows] == [r.record_id for r in exact.rows]


def test_a_large_sparse_partition_is_searched_exactly_on_its_columns_and_patches_keep_them():
    """At COLUMNS_MIN rows and up a sparse partition's dot products come from a column-major copy,
    only the columns where the question is not 0: the same ranking and scores as the whole matrix,
    before and after appends (past the copy's capacity), replaced vectors and superseded rows. The
    copy is counted in the partition's bytes, and not made when the caller's budget says no."""
    from engine.roles.embeddings import HashEmbeddings
    from engine.stores.sqlite.vectors import COLUMNS_MIN

    n = COLUMNS_MIN + 100
    corpus, mat = _hashed(n + 3000, seed=3)
    ids = np.arange(10, 10 + n, dtype=np.int64)
    part = VectorPartition(1, ids.copy(), mat[:n].copy(), np.ones(n, dtype=bool))
    before = part.nbytes
    emb = HashEmbeddings(384)
    questions = [np.asarray(emb.embed_query(corpus.sentence(3, 6)), dtype=np.float32) for _ in range(8)]

    def agree():
        held = part.n
        want = part.mat[:held].copy()
        all_ids = part.ids[:held].copy()
        for q in questions:
            got = part.search(q, 30, False)
            whole = part.search(q, 30, False, columns=False)  # no copy allowed: the whole matrix
            assert [rid for rid, _ in got] == [rid for rid, _ in whole]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in whole], rtol=0, atol=2e-6)
            current = part.valid[:held]
            assert [rid for rid, _ in got] == _exact_ids(want[current], all_ids[current], q, 30)

    untouched = VectorPartition(1, ids.copy(), mat[:n].copy(), np.ones(n, dtype=bool))
    untouched.search(questions[0], 30, False, columns=False)
    assert untouched.nbytes == before  # no copy without the budget's leave
    part.search(questions[0], 30, False)  # the first search starts the copy and does not wait for it
    assert part.columns_ready(wait=True)
    agree()
    assert part.nbytes >= before + n * 384 * 4  # the copy is weighed
    part.append(list(range(10 + n, 10 + n + 3000)), mat[n:], [True] * 3000)  # grows past its capacity
    agree()
    for j, q in enumerate(questions[:4]):  # replaced vectors: a question's own vector, now on an old row
        part.set_vector(int(ids[j * 500]), q * 2)
    part.set_valid(int(ids[1]), False)
    agree()
    for j, q in enumerate(questions[:4]):
        assert part.search(q, 1, False)[0][0] == int(ids[j * 500])


def test_a_column_copy_made_while_vectors_change_is_remade_or_completed():
    """The copy is made in a thread: a vector replaced after it started makes it stale (thrown away
    and made again), rows appended meanwhile are added when it is taken in."""
    from engine.roles.embeddings import HashEmbeddings
    from engine.stores.sqlite.vectors import COLUMNS_MIN

    n = COLUMNS_MIN + 10
    corpus, mat = _hashed(n + 20, seed=4)
    ids = np.arange(1, n + 1, dtype=np.int64)
    part = VectorPartition(1, ids.copy(), mat[:n].copy(), np.ones(n, dtype=bool))
    grown = VectorPartition(1, ids.copy(), mat[:n].copy(), np.ones(n, dtype=bool))
    assert not grown.columns_ready(wait=False)
    grown._cols_job[0].join()  # made before the rows below were appended
    grown.append(list(range(n + 1, n + 21)), mat[n:], [True] * 20)
    assert grown.columns_ready(wait=True)
    for j in range(20):
        assert grown.search(mat[n + j], 1, False)[0][0] == n + 1 + j
    assert not part.columns_ready(wait=False)  # started, not in yet
    part._cols_job[0].join()  # made from the vectors as they were
    q = np.asarray(HashEmbeddings(384).embed_query(corpus.sentence(3, 6)), dtype=np.float32)
    part.set_vector(7, q)  # after the copy was made: it holds the old vector of 7
    part.append(list(range(n + 1, n + 21)), mat[n:], [True] * 20)
    assert part.columns_ready(wait=True)
    assert part.search(q, 1, False)[0][0] == 7
    for j in range(20):
        v = mat[n + j]
        assert part.search(v, 1, False)[0][0] == n + 1 + j
        got, whole = part.search(v, 5, False), part.search(v, 5, False, columns=False)
        assert [rid for rid, _ in got] == [rid for rid, _ in whole]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in whole], rtol=0, atol=2e-6)


def test_a_search_scores_the_same_before_and_after_the_column_copy_is_in():
    """The copy is made in a thread after opening; the searches meanwhile sum the same columns in
    the same layout, so what a retrieval logs never depends on how far that thread got."""
    from engine.roles.embeddings import HashEmbeddings
    from engine.stores.sqlite.vectors import COLUMNS_MIN

    n = COLUMNS_MIN + 500
    corpus, mat = _hashed(n, seed=5)
    ids = np.arange(1, n + 1, dtype=np.int64)
    emb = HashEmbeddings(384)
    questions = [np.asarray(emb.embed_query(corpus.sentence(3, 6)), dtype=np.float32) for _ in range(6)]
    part = VectorPartition(1, ids.copy(), mat.copy(), np.ones(n, dtype=bool))
    assert not part.columns_ready(wait=False)
    before = [part.search(q, 20, False) for q in questions]  # the copy not in yet (or just in)
    assert part.columns_ready(wait=True)
    assert [part.search(q, 20, False) for q in questions] == before


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 600), nnz=st.integers(1, 60),
       in_place=st.booleans(), scale=st.sampled_from([1e-3, 1.0, 1e3]))
@example(seed=0, n=1, nnz=11, in_place=True, scale=1.0)  # one row: einsum sums a dot product, in its own order
@settings(max_examples=60, deadline=None)
def test_a_column_search_scores_alike_from_the_copy_and_from_gathered_rows(seed, n, nnz, in_place, scale):
    """A sparse partition's column search gives the same ids and scores to the bit whether its
    columns come from the column-major copy or are gathered from the rows (the copy is made in a
    thread: a replay must not depend on it), summed in place (`column_sums`, large partitions) or
    by einsum (small ones); and the scores are the cosines."""
    from unittest import mock

    import engine.stores.sqlite.vectors as vectors

    rng = np.random.default_rng(seed)
    mat = (rng.standard_normal((n, 384)) * scale).astype(np.float32)
    mat[rng.random(mat.shape) < 0.8] = 0  # as sparse as feature hashing
    nz = rng.choice(384, size=nnz, replace=False)
    mat[:, nz] = (rng.standard_normal((n, nnz)) * scale).astype(np.float32)  # but not where the question is: long sums
    q = np.zeros(384, dtype=np.float32)
    q[nz] = rng.standard_normal(nnz).astype(np.float32)
    ids = np.arange(1, n + 1, dtype=np.int64)
    k = min(30, n)
    with mock.patch.object(vectors, "COLUMNS_MIN", 1), \
            mock.patch.object(vectors, "COLUMN_SUMS_MIN", 1 if in_place else 10**9):
        part = VectorPartition(1, ids, mat.copy(), np.ones(n, dtype=bool))
        assert part.sparse
        with mock.patch.object(VectorPartition, "columns_ready", lambda self, wait: False):
            gathered = part.search(q, k, False)
        assert part.columns_ready(wait=True)
        assert part.search(q, k, False) == gathered
    cos = (mat.astype(np.float64) @ q) / np.linalg.norm(mat.astype(np.float64), axis=1) / np.linalg.norm(q)
    np.testing.assert_allclose([s for _, s in gathered], cos[[rid - 1 for rid, _ in gathered]], rtol=1e-4, atol=1e-6)
