"""Properties of the seat selection, for any candidates and any config (Hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.config import MemoryConfig
from engine.core.forgetting import tag_union
from engine.core.records import TAGS
from engine.memory.ranking import Candidate, rank_candidates

candidate = st.builds(
    lambda i, R, age, tags, n, tokens: Candidate(record_id=i, R=R, age_seconds=age, u=tag_union(tags), n=n,
                                                 tags=tuple(tags), tokens=tokens),
    st.integers(1, 10_000),
    st.floats(0, 1),
    st.floats(0, 1e8),
    st.lists(st.sampled_from(TAGS), min_size=1, max_size=3, unique=True),
    st.integers(0, 20),
    st.integers(1, 300),
)


@settings(max_examples=300, deadline=None)
@given(
    cands=st.lists(candidate, max_size=30, unique_by=lambda c: c.record_id),
    top_k=st.integers(1, 8),
    budget=st.integers(1, 1200),
    floors=st.lists(st.sampled_from(TAGS), max_size=3, unique=True),
    excluded_share=st.floats(0, 1),
    min_relevance=st.floats(0, 1),
    safety_seats=st.integers(0, 3),
    ratio=st.floats(0, 1),
)
def test_seats_respect_top_k_budget_and_exclusions(cands, top_k, budget, floors, excluded_share, min_relevance,
                                                   safety_seats, ratio):
    cfg = MemoryConfig.from_preset("customer service", top_k=top_k, injection_budget=budget,
                                   always_inject_types=tuple(floors), min_relevance=min_relevance,
                                   safety_seats=safety_seats, min_score_ratio=ratio)
    excluded = {c.record_id: "held" for c in cands[: int(len(cands) * excluded_share)]}
    rows, picked = rank_candidates(cands, config=cfg, excluded=excluded)
    by_id = {c.record_id: c for c in cands}
    assert len(picked) <= top_k
    assert len(set(picked)) == len(picked)
    assert not set(picked) & set(excluded)
    tokens = sum(by_id[i].tokens for i in picked)
    assert tokens <= budget or len(picked) == 1  # a lone first record may exceed the budget
    assert set(picked) == {r.record_id for r in rows if r.verdict == "picked"}
    assert [r.S for r in rows] == sorted((r.S for r in rows), reverse=True)
    assert len(rows) == len(cands)
    seat = {r.record_id: r.why for r in rows if r.verdict == "picked"}
    assert all(by_id[i].R >= min_relevance or seat[i] == "safety" for i in picked)  # seats are earned
    assert sum(1 for w in seat.values() if w == "safety") <= safety_seats
    best = max((r.S for r in rows if r.record_id not in excluded), default=0.0)
    score = {r.record_id: r.S for r in rows}
    assert all(score[i] >= ratio * best - 1e-5 or seat[i] == "safety" for i in picked)
    for r in rows:
        assert 0.0 <= r.R <= 1.0 and 0.0 <= r.T <= 1.0 and 0.0 <= r.F <= 1.0
        if r.record_id in excluded:
            assert r.verdict == "dropped" and r.why == "held"


@settings(max_examples=200, deadline=None)
@given(
    scores=st.lists(st.floats(0, 1), min_size=0, max_size=25),
    dim=st.integers(1, 6),
    seed=st.integers(0, 10_000),
    diversity=st.floats(0, 1),
    pool=st.integers(0, 30),
)
def test_diverse_order_is_a_permutation_led_by_the_best(scores, dim, seed, diversity, pool):
    import numpy as np

    from engine.memory.ranking import diverse_order

    rng = np.random.default_rng(seed)
    S = np.array(scores, dtype=float)
    order = sorted(range(len(S)), key=lambda i: (-S[i], i))
    vecs = rng.normal(size=(len(S), dim))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    got = diverse_order(order, vecs, S, diversity=diversity, pool=pool)
    assert sorted(got) == sorted(order)  # nothing lost, nothing repeated
    if order:
        assert got[0] == order[0]  # the best candidate always leads
    assert got[min(pool, len(order)):] == [i for i in order if i not in set(got[:min(pool, len(order))])]
    assert diverse_order(order, vecs, S, diversity=0.0, pool=pool) == order  # off: S order


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(-5, 2**40), st.one_of(st.sampled_from([0.0, -0.0, 1.0, 0.5, -2.5]),
                                                         st.floats(-3, 3, allow_nan=False)), max_size=60))
def test_path_ranks_are_by_score_then_id(scores):
    """Each path's ranks (as logged and shown): 1 for the best score, ties by the smaller id."""
    from engine.memory.candidates import _ranks

    want = {rid: r + 1 for r, rid in enumerate(sorted(scores, key=lambda i: (-scores[i], i)))}
    assert list(_ranks(scores).items()) == list(want.items())
