"""engine.stores.sqlite.idindex: a direct-address table finds ids exactly where a bisection does."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stores.sqlite.idindex import SPAN_PER_ID, TABLE_MIN, IdIndex


def _bisected(have: np.ndarray, ids: np.ndarray) -> tuple[list[int], list[bool]]:
    at = np.searchsorted(have, ids)
    held = [bool(a < len(have) and have[a] == i) for a, i in zip(at.tolist(), ids.tolist(), strict=True)]
    return [a if h else 0 for a, h in zip(at.tolist(), held, strict=True)], held


@settings(max_examples=60, deadline=None)
@given(start=st.integers(-5, 10**12), extra=st.integers(0, 50), widest=st.integers(1, 12), seed=st.integers(0, 2**32 - 1),
       probes=st.lists(st.integers(-20, 8 * (TABLE_MIN + 50)), max_size=80))
def test_a_table_finds_what_a_bisection_finds(start, extra, widest, seed, probes):
    """Dense ids (a table), sparse ids (bisection) and ids outside the span, held or not, in any order."""
    gaps = np.random.default_rng(seed).integers(1, widest + 1, size=TABLE_MIN + extra)
    have = start + np.cumsum(gaps.astype(np.int64))
    ids = np.array([start + p for p in probes] + have[:: max(1, len(have) // 40)].tolist(), dtype=np.int64)
    index = IdIndex(have)
    assert index.direct == (int(have[-1] - have[0]) + 1 <= SPAN_PER_ID * len(have))
    pos, held = index.find(ids)
    want_pos, want_held = _bisected(have, ids)
    assert held.tolist() == want_held and pos.tolist() == want_pos
    assert IdIndex(have, table=False).find(ids)[0].tolist() == want_pos


def test_small_sparse_and_empty_arrays_are_bisected():
    assert not IdIndex(np.arange(TABLE_MIN - 1, dtype=np.int64)).direct
    assert not IdIndex(np.arange(TABLE_MIN, dtype=np.int64) * (SPAN_PER_ID + 1)).direct
    assert IdIndex(np.arange(TABLE_MIN, dtype=np.int64) * SPAN_PER_ID).direct
    pos, held = IdIndex(np.zeros(0, dtype=np.int64)).find(np.array([1, 2], dtype=np.int64))
    assert pos.tolist() == [0, 0] and held.tolist() == [False, False]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), chunks=st.lists(st.integers(1, 3000), min_size=1, max_size=5),
       widest=st.integers(1, 6))
def test_an_extended_table_finds_what_a_new_one_does(seed, chunks, widest):
    """Rows appended with larger ids, chunk by chunk: the extended index (its table grown in place
    or by doubling) answers as an index made afresh; the earlier index still answers for its ids."""
    rng = np.random.default_rng(seed)
    have = np.cumsum(rng.integers(1, widest + 1, size=TABLE_MIN)).astype(np.int64)
    index = IdIndex(have)
    for m in chunks:
        more = have[-1] + np.cumsum(rng.integers(1, widest + 1, size=m)).astype(np.int64)
        grown = np.concatenate([have, more])
        bigger = index.extended(grown)
        probes = np.concatenate([rng.integers(int(grown[0]) - 5, int(grown[-1]) + 5, size=200), grown[::97]])
        assert [a.tolist() for a in bigger.find(probes)] == [a.tolist() for a in IdIndex(grown).find(probes)]
        assert [a.tolist() for a in index.find(probes)] == [a.tolist() for a in IdIndex(have).find(probes)]
        have, index = grown, bigger


def test_too_sparse_an_extension_makes_a_new_index():
    have = np.arange(TABLE_MIN, dtype=np.int64) * 2
    index = IdIndex(have)
    sparse = np.concatenate([have, [10**9]])
    assert not index.extended(sparse).direct
    assert index.extended(sparse).find(np.array([10**9, 2]))[0].tolist() == [TABLE_MIN, 1]
    assert index.extended(have) is index
