"""Forgetting-curve ranking of a candidate set, with a per-candidate breakdown.

Given each candidate's relevance R (from retrieval), its age since last reinforcement, its tag
union u and strengthen count n, compute T, F and S = αR + βT + γF + δ (vectorised), then select:
`always_inject_types` hold seats first (the best-scoring candidate carrying each such tag), then
the rest by S up to top-K, skipping what would overflow the injection token budget. Every
candidate gets a `ScoreRow` saying picked / near-miss / dropped and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from engine.core.config import MemoryConfig, Weights
from engine.core.forgetting import decay, importance, score
from engine.core.records import ScoreRow

__all__ = ["Candidate", "rank_candidates", "sensitivity", "NEAR_MISS_WINDOW"]

#: Unpicked candidates within this many places after the last seat are reported as near-misses.
NEAR_MISS_WINDOW = 3


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """The inputs of one candidate's score, kept so a what-if can re-rank without the store."""

    record_id: int
    R: float
    age_seconds: float
    u: float
    n: int
    tags: tuple[str, ...]
    tokens: int
    ranks: Mapping[str, int | None] = field(default_factory=dict)
    path_scores: Mapping[str, float] = field(default_factory=dict)
    sources: frozenset[int] = frozenset()  # the message ids the record was made from (distinct evidence)
    session: str | None = None  # the session the record was said in (spread for aggregate questions)


def rank_candidates(
    candidates: Sequence[Candidate],
    *,
    config: MemoryConfig,
    weights: Weights | None = None,
    excluded: Mapping[int, str] | None = None,
    aggregate: bool = False,
) -> tuple[list[ScoreRow], list[int]]:
    """Score and select. Returns (rows sorted by S, best first) and the picked ids in seat order.

    `excluded` maps record ids that may not take a seat to the reason (e.g. contradicted by the
    live window); they are still scored and reported. `aggregate` (the question gathers several
    items) spreads top-K seats over sessions when `config.spread_sessions` is on.
    """
    excluded = dict(excluded or {})
    w = weights or config.weights
    if not candidates:
        return [], []
    scores = _scores(candidates, config=config, weights=w)
    # stable order: S descending, then record id ascending (deterministic ties)
    order = sorted(range(len(candidates)), key=lambda i: (-scores.S[i], candidates[i].record_id))
    seats = _select(candidates, order, config=config, excluded=excluded, S=scores.S,
                    spread=aggregate and config.spread_sessions)
    rows = [_row(candidates[i], i, pos, scores, w, _verdict(candidates[i], i, pos, seats, excluded),
                 seats.why.get(i, "top-K")) for pos, i in enumerate(order)]
    return rows, [candidates[i].record_id for i in seats.picked]


@dataclass(frozen=True, slots=True)
class _Scores:
    R: np.ndarray
    T: np.ndarray
    F: np.ndarray
    S: np.ndarray


@dataclass(slots=True)
class _Seats:
    picked: list[int] = field(default_factory=list)  # candidate indexes in seat order
    why: dict[int, str] = field(default_factory=dict)
    last_seat_pos: int = -1


def _scores(candidates: Sequence[Candidate], *, config: MemoryConfig, weights: Weights) -> _Scores:
    """T, F and S for every candidate at once (vectorised)."""
    w = weights
    R = np.array([c.R for c in candidates], dtype=float)
    age = np.array([c.age_seconds for c in candidates], dtype=float)
    u = np.array([c.u for c in candidates], dtype=float)
    n = np.array([c.n for c in candidates], dtype=float)
    T = np.atleast_1d(decay(age, tau=config.tau, c=config.c) if config.decay_enabled else np.ones_like(age))
    F = np.atleast_1d(importance(u, n, w0=w.w0, w1=w.w1, w2=w.w2, k=config.consolidation_k))
    S = np.atleast_1d(score(R, T, F, alpha=w.alpha, beta=w.beta, gamma=w.gamma, delta=w.delta))
    return _Scores(R=R, T=T, F=F, S=S)


def _select(candidates: Sequence[Candidate], order: Sequence[int], *, config: MemoryConfig,
            excluded: Mapping[int, str], S: np.ndarray, spread: bool = False) -> _Seats:
    """Seats are earned. Safety records first (up to `safety_seats`, relevance or not: an allergy
    matters when dinner is discussed without the word), then one seat for a record the user pinned
    by hand (relevance or not), then one floor seat per `always_inject_types`
    tag, then top-K by S. Floor and top-K seats need R ≥ `min_relevance` (an empty seat beats an
    irrelevant one) and S ≥ `min_score_ratio` of the best candidate's S (decay and importance can
    take a seat away); nothing may overflow the injection token budget."""
    seats = _Seats(why={i: excluded[c.record_id] for i, c in enumerate(candidates) if c.record_id in excluded})
    eligible = [float(S[i]) for i in order if i not in seats.why]
    floor_s = config.min_score_ratio * max(eligible) if eligible else 0.0
    unearned: dict[int, str] = {}
    for i in order:
        if i in seats.why:
            continue
        if candidates[i].R < config.min_relevance:
            unearned[i] = f"below min relevance {config.min_relevance:g}"
        elif float(S[i]) < floor_s - 1e-12:
            unearned[i] = f"score below {config.min_score_ratio:g} of the best"
    used_tokens = 0
    floors = [("safety", "safety", False)] * config.safety_seats + [("pinned", "pinned", False)] + [
        (tag, f"floor:{tag}", True) for tag in config.always_inject_types]
    for tag, why, must_earn in floors:
        for i in order:
            c = candidates[i]
            if i in seats.why or tag not in c.tags or len(seats.picked) >= config.top_k or (must_earn and i in unearned):
                continue
            if used_tokens + c.tokens > config.injection_budget and seats.picked:
                break
            seats.picked.append(i)
            seats.why[i] = why
            used_tokens += c.tokens
            break
    for i, reason in unearned.items():
        seats.why.setdefault(i, reason)
    _fill_top_k(candidates, order, config=config, seats=seats, used_tokens=used_tokens, spread=spread)
    return seats


def _fill_top_k(candidates: Sequence[Candidate], order: Sequence[int], *, config: MemoryConfig, seats: _Seats,
                used_tokens: int, spread: bool) -> None:
    """Top-K by S. With `distinct_sources`, a candidate made only from messages a seated record
    was made from (a near-duplicate of one turn) waits: it is seated only if seats remain after
    every distinct candidate, so k seats carry as many distinct pieces of evidence as they can.
    With `spread` (an aggregate question), a candidate from a session that already has a seat
    waits the same way, so the seats reach across sessions first."""
    covered: set[int] = set()
    sessions: set[str] = set()
    for i in seats.picked:
        covered |= candidates[i].sources
        sessions.add(candidates[i].session or "")
    waiting: list[tuple[int, int]] = []
    for pos, i in enumerate(order):
        if i in seats.why:
            if i in seats.picked:
                seats.last_seat_pos = max(seats.last_seat_pos, pos)
            continue
        c = candidates[i]
        if len(seats.picked) >= config.top_k:
            seats.why[i] = "top-K"
            continue
        if (config.distinct_sources and c.sources and c.sources <= covered) or (
                spread and c.session is not None and c.session in sessions):
            waiting.append((pos, i))
            continue
        if used_tokens + c.tokens > config.injection_budget and seats.picked:
            seats.why[i] = "budget"
            continue
        seats.picked.append(i)
        seats.why[i] = "top-K"
        used_tokens += c.tokens
        seats.last_seat_pos = pos
        covered |= c.sources
        sessions.add(c.session or "")
    for pos, i in waiting:
        c = candidates[i]
        if len(seats.picked) >= config.top_k:
            seats.why[i] = ("same source as a seated record" if c.sources and c.sources <= covered
                           else "session already seated")
        elif used_tokens + c.tokens > config.injection_budget and seats.picked:
            seats.why[i] = "budget"
        else:
            seats.picked.append(i)
            seats.why[i] = "top-K (after the distinct ones)"
            used_tokens += c.tokens
            seats.last_seat_pos = max(seats.last_seat_pos, pos)


def _verdict(c: Candidate, i: int, pos: int, seats: _Seats, excluded: Mapping[int, str]) -> str:
    if i in seats.picked:
        return "picked"
    if c.record_id in excluded or seats.why.get(i, "").startswith(("below min relevance", "score below")):
        return "dropped"
    return "near-miss" if pos <= seats.last_seat_pos + NEAR_MISS_WINDOW else "dropped"


def _row(c: Candidate, i: int, pos: int, s: _Scores, w: Weights, verdict: str, why: str) -> ScoreRow:
    return ScoreRow(
        record_id=c.record_id,
        ranks=dict(c.ranks),
        path_scores={k: round(float(v), 6) for k, v in c.path_scores.items()},
        R=round(float(s.R[i]), 6),
        T=round(float(s.T[i]), 6),
        F=round(float(s.F[i]), 6),
        parts={
            "alpha_R": round(float(w.alpha * s.R[i]), 6),
            "beta_T": round(float(w.beta * s.T[i]), 6),
            "gamma_F": round(float(w.gamma * s.F[i]), 6),
            "delta": round(float(w.delta), 6),
        },
        S=round(float(s.S[i]), 6),
        verdict=verdict,
        why=why,
        tokens=c.tokens,
        position=pos,
    )


def sensitivity(
    candidates: Sequence[Candidate], *, config: MemoryConfig, weights: Weights | None = None
) -> dict[str, str | None]:
    """For each knob, the nearest setting (on a small grid) that changes the injected set.

    Answers the lab's "which knob would change what gets injected?" without touching the store.
    """
    w = weights or config.weights
    _, base = rank_candidates(candidates, config=config, weights=w)
    base_set = set(base)
    out: dict[str, str | None] = {}

    def changed(cfg: MemoryConfig, wt: Weights) -> bool:
        return set(rank_candidates(candidates, config=cfg, weights=wt)[1]) != base_set

    for knob in ("alpha", "beta", "gamma"):
        found = None
        current = getattr(w, knob)
        for target in sorted(np.linspace(0, 1, 21), key=lambda v: abs(v - current)):
            others = [k for k in ("alpha", "beta", "gamma") if k != knob]
            rest = 1.0 - target
            total_other = sum(getattr(w, k) for k in others)
            vals = {knob: float(target)}
            for k in others:
                vals[k] = rest * (getattr(w, k) / total_other if total_other > 0 else 0.5)
            if changed(config, replace(w, **vals)):
                found = f"{knob} = {target:.2f}"
                break
        out[knob] = found
    for knob, grid in (
        ("tau", [config.tau * f for f in (0.01, 0.1, 0.25, 0.5, 2, 4, 10, 100)]),
        ("c", [0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0]),
        ("top_k", list(range(1, 13))),
    ):
        found = None
        current = getattr(config, knob)
        for target in sorted(grid, key=lambda v: abs(v - current)):
            if target == current:
                continue
            if changed(config.with_overrides(**{knob: target}), w):
                found = f"{knob} = {target:g}"
                break
        out[knob] = found
    return out
