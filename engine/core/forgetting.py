"""Forgetting-curve math: maturity, decay, importance, set-relative relevance, score, gate times.

Pure functions over floats or numpy arrays, keyword-only parameters, no clock, no I/O. The
calibrations are the first seed's:

- importance uses the probability union of the tag scores, ``u = 1 − Π(1 − v)`` (bounded,
  increasing, marginally diminishing: summing saturated the clamp and hid consolidation);
- relevance is set-relative, ``R = max(0, (cos − anchor) / (max − anchor))`` with the median of
  the candidate set as anchor (an absolute ``cos − 0.5`` left αR all-zero in 3/10 events).

Defect fixed (reference defect 7): with one or two candidates, or a set with no spread above its
median, the median anchor equals the maximum and R was 0 for every candidate, so α did nothing.
Such sets carry no distribution to be relative to; they fall back to the absolute similarity
clipped to [0, 1] (``R = clip(cos, 0, 1)``), so a relevant lone candidate still scores as relevant
and an irrelevant one does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from engine.core.records import TYPE_SCORES

__all__ = [
    "maturity",
    "decay",
    "gate_time",
    "half_life",
    "tag_union",
    "importance",
    "relevance",
    "score",
    "MIN_SET_FOR_RELATIVE",
]

#: Below this many candidates, relevance falls back to the absolute scale (see module doc).
MIN_SET_FOR_RELATIVE = 3


def _stretched_exp(dt, tau, c):
    dt = np.maximum(np.asarray(dt, dtype=float), 0.0)
    return np.exp(-np.power(dt / float(tau), float(c)))


def maturity(dt, *, tau_m: float, c_m: float):
    """M(Δt) = 1 − exp(−(Δt/τ_m)^c_m): how "ripe" a message of age Δt seconds is, in [0, 1)."""
    out = 1.0 - _stretched_exp(dt, tau_m, c_m)
    return float(out) if np.ndim(out) == 0 else out


def decay(dt, *, tau: float, c: float):
    """T(Δt) = exp(−(Δt/τ)^c): Ebbinghaus retention after Δt seconds since last reinforcement."""
    out = _stretched_exp(dt, tau, c)
    return float(out) if np.ndim(out) == 0 else out


def gate_time(value: float, *, tau: float, c: float) -> float:
    """The age Δt* at which maturity reaches `value`: Δt* = τ·(−ln(1 − v))^(1/c)."""
    if not 0.0 <= value < 1.0:
        raise ValueError(f"gate value must be in [0, 1), got {value}")
    if value == 0.0:
        return 0.0
    return float(tau * (-np.log1p(-value)) ** (1.0 / c))


def half_life(*, tau: float, c: float) -> float:
    """The age at which decay T falls to 1/2: τ·(ln 2)^(1/c)."""
    return float(tau * np.log(2.0) ** (1.0 / c))


def tag_union(tags: Iterable[str], *, type_scores: dict[str, float] | None = None) -> float:
    """u = 1 − Π(1 − v_tag) over the record's salience tags (0 for no tags)."""
    scores = type_scores or TYPE_SCORES
    prod = 1.0
    for tag in dict.fromkeys(tags):  # a tag counts once
        prod *= 1.0 - scores.get(tag, 0.0)
    return 1.0 - prod


def importance(u, n, *, w0: float, w1: float, w2: float, k: float = 0.5):
    """F = clamp(w₀ + w₁·u + w₂·(1 − e^(−k·n)), 0, 1): type salience plus consolidation."""
    u = np.asarray(u, dtype=float)
    n = np.maximum(np.asarray(n, dtype=float), 0.0)
    out = np.clip(w0 + w1 * u + w2 * (1.0 - np.exp(-k * n)), 0.0, 1.0)
    return float(out) if np.ndim(out) == 0 else out


def relevance(similarities: Sequence[float] | np.ndarray) -> np.ndarray:
    """Set-relative relevance in [0, 1]: max(0, (s − median) / (max − median)) over the set.

    Degenerate sets (fewer than MIN_SET_FOR_RELATIVE members, or no spread above the median)
    fall back to clip(s, 0, 1): see the module docstring.
    """
    s = np.asarray(similarities, dtype=float)
    if s.size == 0:
        return s.copy()
    anchor = float(np.median(s))
    top = float(s.max())
    if s.size < MIN_SET_FOR_RELATIVE or top - anchor <= 1e-12:
        return np.clip(s, 0.0, 1.0)
    return np.maximum(0.0, (s - anchor) / (top - anchor))


def score(R, T, F, *, alpha: float, beta: float, gamma: float, delta: float = 0.0):
    """S = α·R + β·T + γ·F + δ."""
    out = (
        alpha * np.asarray(R, dtype=float)
        + beta * np.asarray(T, dtype=float)
        + gamma * np.asarray(F, dtype=float)
        + delta
    )
    return float(out) if np.ndim(out) == 0 else out
