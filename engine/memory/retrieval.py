"""Tri-path retrieval inside one user's partition, fused into relevance R, ranked by the core score.

Paths: BM25 (FTS5), dense (sqlite-vec KNN, cosine), and dimension match (type, time interval with
the `around` tolerances, location, keyword phrase and token overlap; weights renormalised over
the constraints the query has).

Fusion: each path's scores are min-max normalised over that path's own result list (a
set-relative scale, as in the first seed), a candidate a path did not return scores 0 on it, and
R is the convex combination with `path_weights`, renormalised over the paths that are active for
this query (the dimension path only when the query carries a constraint). Score fusion beats
rank fusion on this data: on LoCoMo turns, min-max 0.5/0.5 gave evidence recall@10 .606 against
RRF's .568 (measured), because RRF throws away how far apart the scores are.

The dimension path re-scores the union of the other paths' candidates plus two bounded reads of
what they cannot find: the records whose time the question's constraint can credit (the span
`time_window` gives, newest first, at most `DIM_READ_LIMIT`) and the records that name its place
(a full-text search for the place). No read on the turn path grows with the partition. (A type
or keyword match alone is no reason to read more: types match a large share of any partition,
and keywords are what BM25 already finds.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat

import numpy as np

from engine.core.config import MemoryConfig
from engine.core.laps import Laps
from engine.core.forgetting import relevance as set_relative_relevance
from engine.core.records import MemoryRecord, record_text
from engine.core.timequery import time_window
from engine.memory.candidates import PATHS, Candidate, CandidateSet
from engine.memory.dimension import DimensionScorer, dimension_score, has_constraint
from engine.roles.types import ParsedQuery
from engine.stores.base import Store

__all__ = ["PathResults", "dimension_score", "gather", "fuse", "DIM_READ_LIMIT", "record_text", "has_constraint",
           "candidate_set", "candidate_inputs", "keyword_prefilter", "newest_tagged"]

#: At most this many records are read for a time constraint (newest first): a bounded read.
DIM_READ_LIMIT = 200


@dataclass(frozen=True, kw_only=True, slots=True)
class PathResults:
    """Each path's (record id → raw score) and rank, plus the records involved."""

    bm25: dict[int, float] = field(default_factory=dict)
    dense: dict[int, float] = field(default_factory=dict)
    dim: dict[int, float] = field(default_factory=dict)
    message: dict[int, float] = field(default_factory=dict)  # engine.memory.messagepath (opt-in)
    records: dict[int, MemoryRecord] = field(default_factory=dict)
    dim_active: bool = False

    def ranks(self, path: str) -> dict[int, int]:
        scores: dict[int, float] = getattr(self, path)
        order = sorted(scores, key=lambda i: (-scores[i], i))
        return {rid: r + 1 for r, rid in enumerate(order)}


def gather(
    store: Store,
    *,
    user_id: str,
    query: ParsedQuery,
    query_vector: Sequence[float] | None,
    config: MemoryConfig,
    extra_ids: Sequence[int] = (),
    paths: Sequence[str] = ("bm25", "dense", "dim"),
    known: Mapping[int, MemoryRecord] | None = None,
    dim_pool: Sequence[int] = (),
    laps: Laps | None = None,
) -> PathResults:
    """Run the active paths and collect candidates (current records only unless include_history).

    `extra_ids` are candidates whatever they score (safety records); `dim_pool` ids are scored by
    the dimension path and kept only when it credits them (floor records: without relevance they
    cannot take a seat); `known`: records the caller already read, not read again; `laps`: the
    caller's stopwatch, given the stages "bm25", "dense", "read" and "dim" (the caller laps what
    it had open before the call)."""
    k = config.candidate_k
    hist = config.include_history
    lap = laps.lap if laps is not None else _no_lap
    bm25: dict[int, float] = {}
    dense: dict[int, float] = {}
    if "bm25" in paths:
        text = " ".join([query.text, *query.keywords])
        bm25 = {rid: float(s) for rid, s in store.search_bm25(user_id, text, k=k, include_invalid=hist,
                                                                     prefix=config.bm25_prefix)}
    lap("bm25")
    if "dense" in paths and query_vector is not None:
        dense = {rid: float(s) for rid, s in store.search_dense(user_id, query_vector, k=k, include_invalid=hist)}
    lap("dense")
    ids = list(dict.fromkeys([*bm25, *dense, *extra_ids]))
    records: dict[int, MemoryRecord] = {}
    dim: dict[int, float] = {}
    dim_active = "dim" in paths and has_constraint(query)
    # what the other paths cannot find, read bounded: records whose time the constraint can
    # credit (newest first, at most DIM_READ_LIMIT) and records that name the place
    if dim_active and query.time is not None:
        found = store.records(user_id, include_invalid=hist, time_between=time_window(query.time),
                              newest_first=True, limit=DIM_READ_LIMIT)
        ids.extend(r.id for r in found if r.id not in bm25 and r.id not in dense)
    if dim_active and query.location:
        ids.extend(rid for rid, _ in store.search_bm25(user_id, query.location, k=k, include_invalid=hist))
    if dim_active:
        ids.extend(dim_pool)
    ids = list(dict.fromkeys(ids))
    if known:
        have = {i: known[i] for i in ids if i in known}
        todo = [i for i in ids if i not in have]
    else:
        have, todo = {}, ids
    if todo:
        have.update((r.id, r) for r in store.get_records(user_id, todo))
    in_order = sorted(have)  # id order, as get_records returns them
    records = ({i: have[i] for i in in_order} if hist
               else {i: r for i in in_order if (r := have[i]).is_current})
    lap("read")
    if dim_active:
        scorer = DimensionScorer(query, config.dim_weights)
        may_credit = keyword_prefilter(scorer)
        scored = list(records.values())
        if may_credit is not None:  # the others score a keywords-only 0: not kept either way
            scored = [scored[j] for j in may_credit(scored)]
        for rec, s in zip(scored, scorer.score_all(scored), strict=True):
            if s is not None and s > 0:
                dim[rec.id] = s
        keep = sorted(dim, key=lambda i: (-dim[i], i))[:k]
        dim = {i: dim[i] for i in keep}
    wanted = set(bm25) | set(dense) | set(dim) | set(extra_ids)
    records = {i: r for i, r in records.items() if i in wanted}
    if len(records) < len(wanted):
        missing = [i for i in wanted if i not in records]
        records.update({r.id: r for r in store.get_records(user_id, missing) if hist or r.is_current})
    bm25 = {i: s for i, s in bm25.items() if i in records}
    dense = {i: s for i, s in dense.items() if i in records}
    lap("dim")
    return PathResults(bm25=bm25, dense=dense, dim=dim, records=records, dim_active=dim_active)


def _no_lap(name: str) -> None:
    """`Laps.lap` when nobody is timing."""


def keyword_prefilter(scorer: DimensionScorer) -> Callable[[Sequence[MemoryRecord]], list[int]] | None:
    """For a keywords-only question (the common one), a cheap test over all the candidates at once
    that leaves out only records the dimension path scores exactly 0, so they need not be tokenised
    and scored: it returns the indexes (ascending) of the records that may score
    (`DimensionScorer.keyword_hits`). None when the question has other parts or the test cannot tell."""
    if scorer.keys != ["keyword_tokens", "keyword_phrase"] or scorer.needles is None:
        return None
    return scorer.keyword_hits  # type: ignore[return-value]


def newest_tagged(store: Store, user_id: str, tags: Sequence[str], *, k: int) -> dict[str, list[MemoryRecord]]:
    """The newest `k` current records carrying each tag (newest first), as one read where one suffices.

    One read takes the newest `k·len(tags)` records carrying any of the tags; a tag with at least
    `k` records among them has its newest `k` there (the read is a newest-first prefix of the
    tagged records), and a read that came back short holds every tagged record. A tag still short
    is read on its own, and next time for this user straight away (a hint: which reads are made,
    never what they return)."""
    tags = list(dict.fromkeys(tags))
    hint_key = (id(store), user_id)
    alone = [t for t in tags if t in _SHORT_TAGS.get(hint_key, ())]
    joint = [t for t in tags if t not in alone]
    out = {t: store.records(user_id, tags_any=[t], limit=k, newest_first=True) for t in alone}
    if len(joint) == 1:
        out[joint[0]] = store.records(user_id, tags_any=joint, limit=k, newest_first=True)
    elif joint:
        limit = k * len(joint)
        got = store.records(user_id, tags_any=joint, limit=limit, newest_first=True)
        short = set()
        for t in joint:
            mine = [r for r in got if t in r.tags]
            if len(mine) >= k or len(got) < limit:
                out[t] = mine[:k]
            else:
                out[t] = store.records(user_id, tags_any=[t], limit=k, newest_first=True)
                short.add(t)
        if short:
            if len(_SHORT_TAGS) >= 4096:
                _SHORT_TAGS.clear()
            _SHORT_TAGS[hint_key] = frozenset(short | set(alone))
    return {t: out[t] for t in tags}


#: Tags found short of k in a joint read, by (store, user): read on their own next time.
_SHORT_TAGS: dict[tuple[int, str], frozenset[str]] = {}


def _minmax(scores: Mapping[int, float]) -> dict[int, float]:
    if not scores:
        return {}
    vals = np.array(list(scores.values()), dtype=float)
    lo, hi = float(vals.min()), float(vals.max())
    if hi - lo <= 1e-12:
        return {i: (1.0 if hi > 0 else 0.0) for i in scores}
    return {i: (s - lo) / (hi - lo) for i, s in scores.items()}


def _scaled(scores: Mapping[int, float], ids: Sequence[int], mode: str) -> np.ndarray:
    """A path's scores scaled, over the candidates `ids` (0 where the path did not find one).

    "anchored": the best is 1 and no evidence (a BM25 or dimension score of 0, a cosine of 0) is
    0; a path whose best score does not clear 0 gives no evidence at all. "minmax": the path's
    worst is 0 and its best 1."""
    n = len(ids)
    if mode == "minmax":
        normed = _minmax(scores)
        return np.fromiter(map(normed.get, ids, repeat(0.0)), dtype=float, count=n)
    hi = max(scores.values()) if scores else 0.0
    if hi <= 1e-12:
        return np.zeros(n)
    return np.maximum(0.0, np.fromiter(map(scores.get, ids, repeat(0.0)), dtype=float, count=n)) / hi


def fuse(results: PathResults, *, path_weights: Mapping[str, float], mode: str = "anchored") -> dict[int, float]:
    """Relevance R per candidate in [0, 1].

    mode "anchored" (default): convex combination of path scores scaled between "no evidence" and
    the path's best (so a set with nothing relevant gets R = 0, and seats can be earned).
    mode "minmax": the same with min-max scaling (the worst candidate of each path gets 0, the best
    1, even when both are irrelevant).
    mode "seed": the first seed's set-relative cosine relevance on the dense path only.
    """
    ids = list(results.records)
    if mode == "seed":
        cos = [results.dense.get(i, 0.0) for i in ids]
        return dict(zip(ids, (float(x) for x in set_relative_relevance(cos)), strict=True))
    active = {p: w for p, w in path_weights.items() if w > 0 and getattr(results, p)}
    if "dim" in active and not results.dim_active:
        active.pop("dim")
    if not active:
        return {i: 0.0 for i in ids}
    total = sum(active.values())
    # as arrays over the candidates (id order), added path by path in the order of `path_weights`:
    # the same floating-point operations, in the same order, as a sum per candidate
    acc = np.zeros(len(ids))
    for p, w in active.items():
        acc = acc + w * _scaled(getattr(results, p), ids, mode)
    return dict(zip(ids, (acc / total).tolist(), strict=True))


def candidate_set(results: PathResults, R: Mapping[int, float], *, now: datetime,
                  count_tokens: Callable[[MemoryRecord], int]) -> CandidateSet:
    """The candidates as arrays (fused relevance and the records' state), for `ranking.rank`."""
    return CandidateSet.from_records(results.records, R, now=now, count_tokens=count_tokens,
                                     path_scores={p: getattr(results, p) for p in (*PATHS, "message")})


def candidate_inputs(results: PathResults, R: Mapping[int, float], *, now: datetime,
                     count_tokens: Callable[[MemoryRecord], int]) -> list[Candidate]:
    """Build ranking.Candidate objects from fused relevance and the records' state."""
    return candidate_set(results, R, now=now, count_tokens=count_tokens).candidates()
