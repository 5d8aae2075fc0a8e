"""The in-memory partition's coarse-to-fine dense search (sign-bit Hamming pool, exact rescoring)."""

from __future__ import annotations

import numpy as np

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
