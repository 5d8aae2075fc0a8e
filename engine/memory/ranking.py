"""Forgetting-curve ranking of a candidate set, with a per-candidate breakdown.

Given each candidate's relevance R (from retrieval), its age since last reinforcement, its tag
union u and strengthen count n, compute T, F and S = αR + βT + γF + δ (vectorised), then select:
`always_inject_types` hold seats first (the best-scoring candidate carrying each such tag), then
the rest by S up to top-K (with `diversity`, in maximal-marginal-relevance order over the best
`diversity_pool`), skipping what would overflow the injection token budget. Every
candidate gets a `ScoreRow` saying picked / near-miss / dropped and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

import numpy as np

from engine.core.config import MemoryConfig, Weights
from engine.core.forgetting import decay, importance, score
from engine.core.records import ScoreRow
from engine.core.rounding import rounded
from engine.core.scorelog import ScoreColumns
from engine.memory.candidates import Candidate, CandidateSet

__all__ = ["Candidate", "CandidateSet", "Ranking", "diverse_order", "rank", "rank_candidates", "sensitivity",
           "NEAR_MISS_WINDOW"]

#: Unpicked candidates within this many places after the last seat are reported as near-misses.
NEAR_MISS_WINDOW = 3
UNEARNED_WHY = ("below min relevance", "score below")  # the reasons a candidate could take no seat
UNEARNED_LOGGED = 3  # of the best `score_log_rows`, rows below the bar that are still logged


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
    if not candidates:
        return [], []
    ranking = rank(CandidateSet.of(candidates), config=config, weights=weights, excluded=excluded,
                   aggregate=aggregate)
    return ranking.rows(), ranking.picked_ids


def rank(cands: CandidateSet, *, config: MemoryConfig, weights: Weights | None = None,
         excluded: Mapping[int, str] | None = None, aggregate: bool = False) -> Ranking:
    """`rank_candidates` on a candidate set, rows left unbuilt (`Ranking.rows`, `Ranking.row`)."""
    excluded = dict(excluded or {})
    w = weights or config.weights
    if not len(cands):
        empty = np.zeros(0)
        return Ranking(cands=cands, weights=w, order=[], scores=_Scores(R=empty, T=empty, F=empty, S=empty, Rl=[],
                       Sl=[]), picked=[], why={}, verdicts=[])
    scores = _scores(cands, config=config, weights=w)
    # stable order: S descending, then record id ascending (deterministic ties)
    S, ids = scores.Sl, cands.ids
    order = np.lexsort((np.asarray(ids), -scores.S)).tolist()  # stable: S descending, then id ascending
    fill = order
    if config.diversity > 0 and cands.vectors is not None:
        fill = diverse_order(order, cands.vectors, scores.S, diversity=config.diversity, pool=config.diversity_pool,
                             skip={i for i, rid in enumerate(ids) if rid in excluded},
                             sources=cands.sources if config.distinct_sources else None)
    seats = _select(cands, order, config=config, excluded=excluded, S=S, R=scores.Rl,
                    spread=aggregate and config.spread_sessions, fill=fill)
    if fill is not order and seats.picked:  # near-miss verdicts read positions in S order
        where = {i: pos for pos, i in enumerate(order)}
        seats.last_seat_pos = max(where[i] for i in seats.picked)
    verdicts = _verdicts(ids, order, seats, excluded)
    return Ranking(cands=cands, weights=w, order=order, scores=scores, picked=seats.picked, why=seats.why,
                   verdicts=verdicts)


@dataclass(frozen=True, slots=True)
class _Scores:
    R: np.ndarray
    T: np.ndarray
    F: np.ndarray
    S: np.ndarray
    Rl: list[float]  # R and S as Python floats, for the seat selection's loops
    Sl: list[float]


@dataclass(slots=True)
class _Seats:
    picked: list[int] = field(default_factory=list)  # candidate indexes in seat order
    why: dict[int, str] = field(default_factory=dict)
    last_seat_pos: int = -1


@dataclass(frozen=True, slots=True, eq=False)
class Ranking:
    """One ranking of a candidate set: the order by S, the seats, each position's verdict; the
    score rows are built on demand (a retrieval logs ~24 of ~170)."""

    cands: CandidateSet
    weights: Weights
    order: list[int]  # candidate indexes, best S first
    scores: _Scores
    picked: list[int]  # candidate indexes in seat order
    why: dict[int, str]
    verdicts: list[str]  # by position in `order`
    built: dict[int, ScoreRow] = field(default_factory=dict)  # rows built so far, by position

    @property
    def picked_ids(self) -> list[int]:
        return [self.cands.ids[i] for i in self.picked]

    def row(self, pos: int) -> ScoreRow:
        return self._rows_at([pos])[0]

    def rows(self) -> list[ScoreRow]:
        return self._rows_at(range(len(self.order)))

    def _rows_at(self, positions: Sequence[int]) -> list[ScoreRow]:
        """The rows at `positions` (built once each; those not built yet all at once, `_rows`)."""
        todo = [pos for pos in positions if pos not in self.built]
        if todo:
            self.built.update(zip(todo, _rows(self, todo), strict=True))
        return [self.built[pos] for pos in positions]

    def logged_positions(self, limit: int, excluded: Mapping[int, str] | None = None) -> list[int]:
        """The positions of the rows a retrieval stores: every row that was seated or held back,
        and, of the best `limit` by S, every one that could have taken a seat but only the best
        `UNEARNED_LOGGED` of those below the relevance or score bar (they are the bulk of a long
        session's candidates and no seat could go to them); `limit` 0 keeps them all."""
        n = len(self.order)
        if limit <= 0 or n <= limit:
            return list(range(n))
        held, ids, why, order = excluded or {}, self.cands.ids, self.why, self.order
        out: list[int] = []
        unearned = 0
        for pos in range(n):
            i = order[pos]
            if self.verdicts[pos] == "picked" or ids[i] in held:
                out.append(pos)
            elif pos < limit:
                if why.get(i, "").startswith(UNEARNED_WHY):
                    unearned += 1
                    if unearned > UNEARNED_LOGGED:
                        continue
                out.append(pos)
        return out

    def logged_rows(self, limit: int, excluded: Mapping[int, str] | None = None) -> list[ScoreRow]:
        """The rows a retrieval stores (`logged_positions`), as row objects."""
        return self._rows_at(self.logged_positions(limit, excluded))

    def logged_columns(self, limit: int, excluded: Mapping[int, str] | None = None) -> ScoreColumns:
        """The same rows as columns (what the log writes: one entry, no row objects), built from the
        ranking's arrays; `ScoreColumns` reads back exactly `logged_rows`."""
        return _columns(self, self.logged_positions(limit, excluded))


def _scores(cands: CandidateSet, *, config: MemoryConfig, weights: Weights) -> _Scores:
    """T, F and S for every candidate at once (vectorised)."""
    w = weights
    R, age = cands.R, cands.age
    T = np.atleast_1d(decay(age, tau=config.tau, c=config.c) if config.decay_enabled else np.ones_like(age))
    F = np.atleast_1d(importance(cands.u, cands.n, w0=w.w0, w1=w.w1, w2=w.w2, k=config.consolidation_k))
    S = np.atleast_1d(score(R, T, F, alpha=w.alpha, beta=w.beta, gamma=w.gamma, delta=w.delta))
    return _Scores(R=R, T=T, F=F, S=S, Rl=R.tolist(), Sl=S.tolist())


def diverse_order(order: Sequence[int], vectors: np.ndarray, S: np.ndarray, *, diversity: float, pool: int,
                  skip: AbstractSet[int] = frozenset(), sources: Sequence[AbstractSet[int]] | None = None) -> list[int]:
    """Maximal marginal relevance over the best `pool` candidates of `order` (S order, `skip`
    left out of the pool): each next one maximises (1 - diversity) * S' - diversity * (its
    greatest cosine to those chosen before), S' min-max normalised over the pool; the rest of
    `order` follows as it was. Near-duplicates of a chosen record (seven records saying "family
    matters to her") wait, so k seats reach more of what an aggregate question gathers. With
    `sources` (each candidate's source messages; `distinct_sources`), a candidate made only from
    messages a chosen one was made from waits for the distinct ones."""
    head = [i for i in order if i not in skip][:max(0, pool)]
    if len(head) < 2:
        return list(order)
    s = S[head].astype(float)
    span = float(s.max() - s.min())
    s = (s - s.min()) / span if span > 0 else np.ones_like(s)
    V = vectors[head]
    sim = V @ V.T
    lam = 1.0 - diversity
    chosen: list[int] = []
    redundancy = np.zeros(len(head))
    left = np.ones(len(head), dtype=bool)
    src = [sources[i] for i in head] if sources is not None else None
    covered: set[int] = set()
    for _ in range(len(head)):
        value = lam * s - diversity * redundancy
        value[~left] = -np.inf
        if src is not None:  # a candidate made only from chosen records' messages waits (distinct evidence)
            fresh = np.array([bool(left[j]) and not (src[j] and src[j] <= covered) for j in range(len(head))])
            if fresh.any():
                value[~fresh] = -np.inf
        j = int(np.argmax(value))  # ties: the earlier in S order
        chosen.append(j)
        left[j] = False
        redundancy = np.maximum(redundancy, sim[j]) if chosen[1:] else sim[j].copy()
        if src is not None:
            covered |= src[j]
    picked = [head[j] for j in chosen]
    taken = set(picked)
    return picked + [i for i in order if i not in taken]


def _select(cands: CandidateSet, order: Sequence[int], *, config: MemoryConfig,
            excluded: Mapping[int, str], S: Sequence[float], R: Sequence[float], spread: bool = False,
            fill: Sequence[int] | None = None) -> _Seats:
    """Seats are earned. Safety records first (up to `safety_seats`, relevance or not: an allergy
    matters when dinner is discussed without the word), then one seat for a record the user pinned
    by hand (relevance or not), then one floor seat per `always_inject_types`
    tag, then top-K by S. Floor and top-K seats need R ≥ `min_relevance` (an empty seat beats an
    irrelevant one) and S ≥ `min_score_ratio` of the best candidate's S (decay and importance can
    take a seat away); nothing may overflow the injection token budget. `fill`: the order top-K
    seats are filled in (default `order`; `diverse_order` with `diversity`)."""
    seats = _Seats(why={i: excluded[rid] for i, rid in enumerate(cands.ids) if rid in excluded})
    eligible = [S[i] for i in order if i not in seats.why]
    floor_s = config.min_score_ratio * max(eligible) if eligible else 0.0
    unearned: dict[int, str] = {}
    why, min_rel, bar = seats.why, config.min_relevance, floor_s - 1e-12
    low_r, low_s = f"below min relevance {min_rel:g}", f"score below {config.min_score_ratio:g} of the best"
    for i in order:
        if i in why:
            continue
        if R[i] < min_rel:
            unearned[i] = low_r
        elif S[i] < bar:
            unearned[i] = low_s
    used_tokens = 0
    floors = [("safety", "safety", False)] * config.safety_seats + [("pinned", "pinned", False)] + [
        (tag, f"floor:{tag}", True) for tag in config.always_inject_types]
    tags, tokens = cands.tags, cands.tokens
    for tag, why, must_earn in floors:
        if len(seats.picked) >= config.top_k:
            continue
        for i in [i for i in order if tag in tags[i]]:
            if i in seats.why or (must_earn and i in unearned):
                continue
            if used_tokens + tokens[i] > config.injection_budget and seats.picked:
                break
            seats.picked.append(i)
            seats.why[i] = why
            used_tokens += tokens[i]
            break
    for i, reason in unearned.items():
        seats.why.setdefault(i, reason)
    _fill_top_k(cands, order if fill is None else fill, config=config, seats=seats, used_tokens=used_tokens,
                spread=spread)
    return seats


def _fill_top_k(cands: CandidateSet, order: Sequence[int], *, config: MemoryConfig, seats: _Seats,
                used_tokens: int, spread: bool) -> None:
    """Top-K by S. With `distinct_sources`, a candidate made only from messages a seated record
    was made from (a near-duplicate of one turn) waits: it is seated only if seats remain after
    every distinct candidate, so k seats carry as many distinct pieces of evidence as they can.
    With `spread` (an aggregate question), a candidate from a session that already has a seat
    waits the same way, so the seats reach across sessions first."""
    sources, session_of, tokens = cands.sources, cands.sessions, cands.tokens
    covered: set[int] = set()
    sessions: set[str] = set()
    for i in seats.picked:
        covered |= sources[i]
        sessions.add(session_of[i] or "")
    waiting: list[tuple[int, int]] = []
    for pos, i in enumerate(order):
        if i in seats.why:
            if i in seats.picked:
                seats.last_seat_pos = max(seats.last_seat_pos, pos)
            continue
        if len(seats.picked) >= config.top_k:
            seats.why[i] = "top-K"
            continue
        src, session = sources[i], session_of[i]
        if (config.distinct_sources and src and src <= covered) or (
                spread and session is not None and session in sessions):
            waiting.append((pos, i))
            continue
        if used_tokens + tokens[i] > config.injection_budget and seats.picked:
            seats.why[i] = "budget"
            continue
        seats.picked.append(i)
        seats.why[i] = "top-K"
        used_tokens += tokens[i]
        seats.last_seat_pos = pos
        covered |= src
        sessions.add(session or "")
    for pos, i in waiting:
        if len(seats.picked) >= config.top_k:
            seats.why[i] = ("same source as a seated record" if sources[i] and sources[i] <= covered
                           else "session already seated")
        elif used_tokens + tokens[i] > config.injection_budget and seats.picked:
            seats.why[i] = "budget"
        else:
            seats.picked.append(i)
            seats.why[i] = "top-K (after the distinct ones)"
            used_tokens += tokens[i]
            seats.last_seat_pos = max(seats.last_seat_pos, pos)


def _verdicts(ids: Sequence[int], order: Sequence[int], seats: _Seats, excluded: Mapping[int, str]) -> list[str]:
    """Each candidate's verdict in S order: "picked", "dropped" (held back, or below the relevance or
    score bar), else "near-miss" within `NEAR_MISS_WINDOW` positions of the last seat, "dropped" after."""
    picked, why, near = set(seats.picked), seats.why, seats.last_seat_pos + NEAR_MISS_WINDOW
    out = []
    for pos, i in enumerate(order):
        if i in picked:
            out.append("picked")
        elif ids[i] in excluded or why.get(i, "").startswith(UNEARNED_WHY):
            out.append("dropped")
        else:
            out.append("near-miss" if pos <= near else "dropped")
    return out


def _rounded(ranking: Ranking, idx: Sequence[int], more: Sequence[float]) -> tuple[list[list[float]], list[float]]:
    """R, T, F, S, alpha*R, beta*T and gamma*F at the candidates `idx`, then `more`, every number rounded to
    6 places in one `rounded` call (exactly `round`'s doubles; ~0.4 us a `round`, eleven a row): the seven
    columns and the rounded `more`."""
    s, w, m = ranking.scores, ranking.weights, len(idx)
    R, T, F = s.R[idx], s.T[idx], s.F[idx]
    flat = rounded(np.concatenate([R, T, F, s.S[idx], w.alpha * R, w.beta * T, w.gamma * F,
                                   np.asarray(more, dtype=float)])) if m else []
    return [flat[c * m:(c + 1) * m] for c in range(7)], flat[7 * m:]


def _columns(ranking: Ranking, positions: Sequence[int]) -> ScoreColumns:
    """`_rows` as columns: the same values, rounded in one `rounded` call, without a row object or a
    dict per row (Candidate objects given: their rows, as columns)."""
    cands, order = ranking.cands, ranking.order
    if cands.given is not None:
        return ScoreColumns.of(ranking._rows_at(positions))
    idx = [order[pos] for pos in positions]
    ids = [cands.ids[i] for i in idx]
    m = len(idx)
    scored = {p: [float(got.get(rid, 0.0)) for rid in ids] for p, got in cands.scores_by_path.items()}
    (Rr, Tr, Fr, Sr, aR, bT, gF), rest = _rounded(ranking, idx, [v for col in scored.values() for v in col])
    tokens = cands.tokens
    return ScoreColumns(record_id=ids, ranks={p: [got.get(rid) for rid in ids] for p, got in cands.ranks_by_path.items()},
                        path_scores={p: rest[c * m:(c + 1) * m] for c, p in enumerate(scored)}, R=Rr, T=Tr, F=Fr,
                        parts={"alpha_R": aR, "beta_T": bT, "gamma_F": gF,
                               "delta": [round(float(ranking.weights.delta), 6)] * m},
                        S=Sr, verdict=[ranking.verdicts[pos] for pos in positions],
                        why=[ranking.why.get(i, "top-K") for i in idx], tokens=[tokens[i] for i in idx],
                        position=list(positions))


def _rows(ranking: Ranking, positions: Sequence[int]) -> list[ScoreRow]:
    """The score rows at `positions` of the ranking's order, every number rounded to 6 places (`_rounded`)."""
    cands, order = ranking.cands, ranking.order
    idx = [order[pos] for pos in positions]
    paths = [cands.path_scores(i) for i in idx]
    (Rr, Tr, Fr, Sr, aR, bT, gF), rest = _rounded(ranking, idx, [v for p in paths for v in p.values()])
    by_path = iter(rest)
    delta = round(float(ranking.weights.delta), 6)
    return [ScoreRow(record_id=cands.ids[i], ranks=cands.ranks(i), path_scores={p: next(by_path) for p in paths[j]},
                     R=Rr[j], T=Tr[j], F=Fr[j],
                     parts={"alpha_R": aR[j], "beta_T": bT[j], "gamma_F": gF[j], "delta": delta}, S=Sr[j],
                     verdict=ranking.verdicts[pos], why=ranking.why.get(i, "top-K"), tokens=cands.tokens[i],
                     position=pos)
            for j, (pos, i) in enumerate(zip(positions, idx, strict=True))]


def sensitivity(
    candidates: Sequence[Candidate], *, config: MemoryConfig, weights: Weights | None = None
) -> dict[str, str | None]:
    """For each knob, the nearest setting (on a small grid) that changes the injected set.

    Answers the lab's "which knob would change what gets injected?" without touching the store.
    """
    w = weights or config.weights
    cands = CandidateSet.of(candidates)
    base_set = set(rank(cands, config=config, weights=w).picked_ids)
    out: dict[str, str | None] = {}

    def changed(cfg: MemoryConfig, wt: Weights) -> bool:
        return set(rank(cands, config=cfg, weights=wt).picked_ids) != base_set

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
