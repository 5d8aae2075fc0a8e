"""Score rows round their numbers in one batch exactly as `round` does (engine.core.rounding)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.clock import VirtualClock
from engine.core.rounding import rounded
from engine.memory.engine import MemoryEngine
from engine.core.records import ScoreRow
from engine.roles.embeddings import HashEmbeddings

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def _engine_with_memory() -> MemoryEngine:
    engine = MemoryEngine(clock=VirtualClock(T0), embedder=HashEmbeddings(64))
    for i in range(8):
        engine.turn("ana", "s", f"I moved to Lisbon in May and I drink oolong tea, note {i}.")
        engine.clock.advance(600)
    return engine


def test_batched_score_rows_are_the_rows_built_one_by_one():
    engine = _engine_with_memory()
    got = engine.retrieve("ana", "oolong tea in Lisbon", session_id="s", log=True)
    rk = got.ranking
    assert len(rk.order) > 1
    one_by_one = [_row_by_round(rk, pos) for pos in range(len(rk.order))]
    assert got.rows == one_by_one
    assert engine.store.scores(got.event_id) == [r for r in one_by_one if r in engine.store.scores(got.event_id)]


def _row_by_round(rk, pos: int) -> ScoreRow:
    """A ranking's row at `pos` built alone, every number through `round` (as rows were built before
    the batch)."""
    cands, s, w, i = rk.cands, rk.scores, rk.weights, rk.order[pos]
    R, T, F = float(s.R[i]), float(s.T[i]), float(s.F[i])
    return ScoreRow(record_id=cands.ids[i], ranks=cands.ranks(i),
                    path_scores={k: round(float(v), 6) for k, v in cands.path_scores(i).items()},
                    R=round(R, 6), T=round(T, 6), F=round(F, 6),
                    parts={"alpha_R": round(w.alpha * R, 6), "beta_T": round(w.beta * T, 6),
                           "gamma_F": round(w.gamma * F, 6), "delta": round(float(w.delta), 6)},
                    S=round(float(s.S[i]), 6), verdict=rk.verdicts[pos], why=rk.why.get(i, "top-K"),
                    tokens=cands.tokens[i], position=pos)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=40), st.integers(0, 15))
def test_rounded_is_round_to_the_last_bit(values, ndigits):
    assert all(_same(g, round(v, ndigits)) for g, v in zip(rounded(values, ndigits), values, strict=True))


@settings(max_examples=200, deadline=None)
@given(st.integers(-10**9, 10**9), st.integers(0, 9))
def test_rounded_decides_halves_as_round_does(k, ndigits):
    """Values at (or a hair from) a half in the last kept place: where x * 10**ndigits cannot decide."""
    base = (k + 0.5) / 10**ndigits
    values = [base, np.nextafter(base, math.inf), np.nextafter(base, -math.inf), -base]
    assert all(_same(g, round(float(v), ndigits)) for g, v in zip(rounded(values, ndigits), values, strict=True))


def test_rounded_refuses_digits_it_cannot_do_exactly():
    with pytest.raises(ValueError, match="ndigits"):
        rounded([0.5], 16)
    assert rounded([], 6) == [] and rounded(np.array([[0.1234565, 2.5]]), 0) == [0.0, 2.0]
