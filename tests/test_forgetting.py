import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.config import VOCATIONS
from engine.core.forgetting import (
    decay,
    gate_time,
    half_life,
    importance,
    maturity,
    relevance,
    score,
    tag_union,
)

pos = st.floats(min_value=0, max_value=1e8, allow_nan=False)
taus = st.floats(min_value=1, max_value=1e7)
cs = st.floats(min_value=0.1, max_value=3)


def test_golden_values():
    # customer service: tau_m 600, c_m 0.5
    assert maturity(600, tau_m=600, c_m=0.5) == pytest.approx(1 - math.exp(-1))
    assert maturity(0, tau_m=600, c_m=0.5) == 0.0
    assert decay(43200, tau=43200, c=0.5) == pytest.approx(math.exp(-1))
    assert decay(0, tau=43200, c=0.5) == 1.0
    assert tag_union(["identity"]) == pytest.approx(0.95)
    assert tag_union(["preference", "fact"]) == pytest.approx(1 - 0.2 * 0.4)
    assert tag_union(["fact", "fact"]) == pytest.approx(0.6)  # a tag counts once
    assert tag_union([]) == 0.0
    assert importance(0.95, 0, w0=0.1, w1=0.8, w2=0.1) == pytest.approx(0.86)
    assert importance(0.6, 2, w0=0.1, w1=0.8, w2=0.1) == pytest.approx(0.1 + 0.48 + 0.1 * (1 - math.exp(-1)))
    assert score(1.0, 0.5, 0.2, alpha=0.33, beta=0.33, gamma=0.34, delta=0.0) == pytest.approx(0.33 + 0.165 + 0.068)


@pytest.mark.parametrize(
    ("preset", "slice_s", "induct_s"),
    [("customer service", 870, 53 * 60), ("collaborative creation", 138 * 60, 235 * 60),
     ("accompany", 218 * 60, 473 * 60)],
)
def test_gate_times_match_the_reference_table(preset, slice_s, induct_s):
    v = VOCATIONS[preset]
    assert gate_time(v["slice_value"], tau=v["tau_m"], c=v["c_m"]) == pytest.approx(slice_s, rel=0.01)
    assert gate_time(v["long_term_value"], tau=v["tau_m"], c=v["c_m"]) == pytest.approx(induct_s, rel=0.01)


def test_gate_time_inverts_maturity():
    for v in (0.1, 0.5, 0.7, 0.99):
        t = gate_time(v, tau=600, c=0.5)
        assert maturity(t, tau_m=600, c_m=0.5) == pytest.approx(v)
    assert gate_time(0.0, tau=600, c=0.5) == 0.0
    with pytest.raises(ValueError):
        gate_time(1.0, tau=600, c=0.5)


def test_half_life():
    h = half_life(tau=43200, c=0.5)
    assert decay(h, tau=43200, c=0.5) == pytest.approx(0.5)


@given(pos, pos, taus, cs)
def test_maturity_bounded_and_monotone(a, b, tau, c):
    lo, hi = sorted((a, b))
    m_lo, m_hi = maturity(lo, tau_m=tau, c_m=c), maturity(hi, tau_m=tau, c_m=c)
    assert 0.0 <= m_lo <= m_hi <= 1.0


@given(pos, pos, taus, cs)
def test_decay_bounded_and_decreasing(a, b, tau, c):
    lo, hi = sorted((a, b))
    assert 1.0 >= decay(lo, tau=tau, c=c) >= decay(hi, tau=tau, c=c) >= 0.0


@given(st.lists(st.sampled_from(["identity", "decision", "preference", "fact", "episode", "chat"]), max_size=6),
       st.sampled_from(["identity", "decision", "preference", "fact", "episode", "chat"]))
def test_tag_union_bounded_and_increasing(tags, extra):
    u = tag_union(tags)
    assert 0.0 <= u < 1.0
    assert tag_union([*tags, extra]) >= u - 1e-12


@given(st.floats(0, 1), st.integers(0, 50), st.integers(0, 50))
def test_importance_clamped_and_increasing_in_consolidation(u, n1, n2):
    lo, hi = sorted((n1, n2))
    f_lo = importance(u, lo, w0=0.1, w1=0.8, w2=0.1)
    f_hi = importance(u, hi, w0=0.1, w1=0.8, w2=0.1)
    assert 0.0 <= f_lo <= f_hi <= 1.0


def test_importance_no_longer_saturates():
    # the reference summed type scores and pinned F at 1.0; the union keeps consolidation visible
    u = tag_union(["identity", "preference", "decision"])
    assert importance(u, 0, w0=0.1, w1=0.8, w2=0.1) < importance(u, 5, w0=0.1, w1=0.8, w2=0.1) < 1.0


def test_relevance_set_relative():
    r = relevance([0.9, 0.5, 0.4, 0.3, 0.1])
    assert r[0] == 1.0
    assert r[2] == 0.0  # the median
    assert r[4] == 0.0
    assert 0 < r[1] < 1


@pytest.mark.parametrize("sims", [[0.8], [0.8, 0.3], [0.5, 0.5, 0.5]])
def test_relevance_small_or_flat_sets_fall_back_to_absolute(sims):
    # reference defect 7: with <= 2 candidates R was 0 for all and alpha did nothing
    r = relevance(sims)
    assert np.allclose(r, np.clip(sims, 0, 1))
    assert r.max() > 0


def test_relevance_empty():
    assert relevance([]).size == 0


@given(st.lists(st.floats(-1, 1), min_size=1, max_size=40))
def test_relevance_bounded(sims):
    r = relevance(sims)
    assert r.shape == (len(sims),)
    assert np.all((r >= 0) & (r <= 1))


def test_vectorised_matches_scalar():
    ages = np.array([0, 100, 1000, 1e5])
    vec = decay(ages, tau=43200, c=0.5)
    assert np.allclose(vec, [decay(a, tau=43200, c=0.5) for a in ages])
