"""The partition's top-k selection: the exact k-th largest score whatever the ties, ties by id."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stores.sqlite.vecmath import kth_largest
from engine.stores.sqlite.vectors import VectorPartition

# few distinct values, so runs of ties (0, -inf, repeated scores) are the rule, not the exception
_VALUES = st.sampled_from([0.0, -0.0, 0.5, -0.5, 0.25, 1.0, -1.0, float("-inf"), 1e-7, -1e-7])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_VALUES, st.floats(-1, 1, width=32)), min_size=1, max_size=300), st.data())
def test_kth_largest_is_the_selection_numpy_makes(values, data):
    scores = np.array(values, dtype=np.float32)
    k = data.draw(st.integers(1, len(scores)))
    assert kth_largest(scores, k) == np.partition(scores, len(scores) - k)[len(scores) - k]


@settings(max_examples=150, deadline=None)
@given(st.lists(_VALUES, min_size=1, max_size=200), st.integers(1, 60), st.randoms(use_true_random=False))
def test_top_k_is_the_best_scores_with_ties_going_to_the_smallest_ids(values, k, rnd):
    """Against a full sort by (-score, id), for ids in no particular order."""
    n = len(values)
    ids = np.array(rnd.sample(range(10_000), n), dtype=np.int64)
    part = VectorPartition(1, ids, np.zeros((n, 4), dtype=np.float32), np.ones(n, dtype=bool))
    scores = np.array(values, dtype=np.float32)
    eligible = int(np.count_nonzero(scores > -np.inf))
    got = part._top(scores, np.arange(n), k, eligible)
    want = sorted(((float(s), int(i)) for s, i in zip(scores, ids, strict=True) if s > -np.inf),
                  key=lambda x: (-x[0], x[1]))[: min(k, eligible)]
    assert [(rid, s) for rid, s in got] == [(i, s) for s, i in want]
