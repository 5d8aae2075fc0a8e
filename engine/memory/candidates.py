"""One retrieval's candidate set as arrays: what the ranking scores, without an object per candidate.

The ranking needs, per candidate, its relevance R, age, tag union u and strengthen count n (as
arrays: T, F and S are computed for all at once) and, for seating, its tags, token count, source
messages and session. `CandidateSet` holds exactly that, one entry per candidate in record-id
order; `Candidate` objects (the what-if and the lab read them) are built only when asked for.
Token counts are cached by the fields a record's prompt line is rendered from, so a record that
is a candidate turn after turn is rendered and counted once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from itertools import repeat

import numpy as np

from engine.core.clock import EXACT_MICROS, epoch_micros
from engine.core.forgetting import tag_union
from engine.core.lru import per_object
from engine.core.records import MemoryRecord
from engine.memory.injection import render_record

__all__ = ["Candidate", "CandidateSet", "LazyTokens", "PATHS", "record_tokens"]

#: The retrieval paths, in the order their ranks and scores are reported.
PATHS = ("bm25", "dense", "dim")


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


@dataclass(frozen=True, slots=True, eq=False)
class CandidateSet:
    """Per-candidate inputs of the score, index i for the i-th candidate."""

    ids: list[int]
    R: np.ndarray
    age: np.ndarray
    u: np.ndarray
    n: np.ndarray
    tags: list[tuple[str, ...]]
    tokens: Sequence[int]  # a list, or `LazyTokens` (counted when the ranking first reads one)
    sources: list[frozenset[int]]
    sessions: list[str | None]
    scores_by_path: Mapping[str, Mapping[int, float]]  # each path's raw score by record id (absent: 0)
    ranks_by_path: Mapping[str, Mapping[int, int]]  # each path's rank by record id (absent: None)
    given: Sequence[Candidate] | None = None  # the Candidate objects it was made from, if any
    vectors: np.ndarray | None = None  # unit embedding rows by index (zeros: unknown), for diverse seating

    def __len__(self) -> int:
        return len(self.ids)

    def with_vectors(self, vectors: Mapping[int, Sequence[float]]) -> CandidateSet:
        """The same set with its records' embeddings (record id → vector), as unit rows; a record
        without one gets a zero row (unlike everything)."""
        dim = len(next(iter(vectors.values()))) if vectors else 0
        mat = np.zeros((len(self.ids), dim))
        for j, rid in enumerate(self.ids):
            v = vectors.get(rid)
            if v is not None:
                mat[j] = v
        norms = np.linalg.norm(mat, axis=1, keepdims=True) if dim else np.ones((len(self.ids), 1))
        return replace(self, vectors=np.divide(mat, norms, out=np.zeros_like(mat), where=norms > 0))

    def ranks(self, i: int) -> dict[str, int | None]:
        if self.given is not None:
            return dict(self.given[i].ranks)
        rid = self.ids[i]
        return {p: ranks.get(rid) for p, ranks in self.ranks_by_path.items()}

    def path_scores(self, i: int) -> dict[str, float]:
        if self.given is not None:
            return dict(self.given[i].path_scores)
        rid = self.ids[i]
        return {p: float(scores.get(rid, 0.0)) for p, scores in self.scores_by_path.items()}

    def candidate(self, i: int) -> Candidate:
        if self.given is not None:
            return self.given[i]
        return Candidate(record_id=self.ids[i], R=float(self.R[i]), age_seconds=float(self.age[i]),
                         u=float(self.u[i]), n=int(self.n[i]), tags=self.tags[i], tokens=self.tokens[i],
                         ranks=self.ranks(i), path_scores=self.path_scores(i), sources=self.sources[i],
                         session=self.sessions[i])

    def candidates(self) -> list[Candidate]:
        return list(self.given) if self.given is not None else [self.candidate(i) for i in range(len(self))]

    @classmethod
    def of(cls, candidates: Sequence[Candidate]) -> CandidateSet:
        """The set of given Candidate objects (a what-if, a test)."""
        cs = list(candidates)
        return cls(ids=[c.record_id for c in cs], R=_floats(c.R for c in cs), age=_floats(c.age_seconds for c in cs),
                   u=_floats(c.u for c in cs), n=_floats(c.n for c in cs), tags=[c.tags for c in cs],
                   tokens=[c.tokens for c in cs], sources=[c.sources for c in cs], sessions=[c.session for c in cs],
                   scores_by_path={}, ranks_by_path={}, given=cs)

    @classmethod
    def from_records(cls, records: Mapping[int, MemoryRecord], R: Mapping[int, float], *,
                     path_scores: Mapping[str, Mapping[int, float]], now: datetime,
                     count_tokens: Callable[[MemoryRecord], int]) -> CandidateSet:
        """The candidates of a retrieval: its records (in id order), fused R and each path's raw scores."""
        ids = sorted(records)
        recs = [records[i] for i in ids]
        tags, u, sources, sessions, reinforced, n = zip(*map(_fixed, recs)) if recs else ((),) * 6
        # the age in seconds from whole microseconds: exactly timedelta.total_seconds(), for all at once
        # (an int64 of microseconds converts to float exactly below 2**53, ~285 years; a longer
        # age is divided as Python ints, as total_seconds() does)
        micros = epoch_micros(now) - np.array(reinforced, dtype=np.int64)
        age = micros / 1e6
        far = np.abs(micros) >= EXACT_MICROS
        if far.any():
            age[far] = [int(m) / 10**6 for m in micros[far]]
        return cls(
            ids=ids,
            R=np.fromiter(map(R.get, ids, repeat(0.0)), dtype=float, count=len(ids)),
            age=np.maximum(0.0, age),
            u=np.array(u, dtype=float),
            n=np.array(n, dtype=float),
            tags=list(tags),
            tokens=LazyTokens(recs, count_tokens),
            sources=list(sources),
            sessions=list(sessions),
            scores_by_path={p: path_scores.get(p, {}) for p in _paths(path_scores)},
            ranks_by_path={p: _ranks(path_scores.get(p, {})) for p in _paths(path_scores)},
        )


class LazyTokens(Sequence[int]):
    """Each candidate's token count, counted when first read: seating reads the counts of the
    candidates it considers before top-K fills, the score log those of the rows it keeps (about 30
    of ~150), so the others are never rendered."""

    __slots__ = ("_recs", "_count", "_got")

    def __init__(self, records: Sequence[MemoryRecord], count_tokens: Callable[[MemoryRecord], int]):
        self._recs, self._count = records, count_tokens
        self._got: list[int | None] = [None] * len(records)

    def __len__(self) -> int:
        return len(self._recs)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        got = self._got[i]
        if got is None:
            got = self._got[i] = self._count(self._recs[i])
        return got

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    def __repr__(self) -> str:
        return repr(list(self))


def _paths(path_scores: Mapping[str, Mapping[int, float]]) -> list[str]:
    """PATHS, then any other path that scored (the opt-in message path)."""
    return [*PATHS, *(p for p in path_scores if p not in PATHS and path_scores[p])]


def _floats(values) -> np.ndarray:
    return np.fromiter(values, dtype=float)


def _ranks(scores: Mapping[int, float]) -> dict[int, int]:
    order = sorted(scores, key=lambda i: (-scores[i], i))
    return {rid: r + 1 for r, rid in enumerate(order)}


@per_object()
def _fixed(r: MemoryRecord) -> tuple[tuple[str, ...], float, frozenset[int], str | None, int, int]:
    """(tags, tag union u, source message ids, session, reinforced_at in microseconds since the
    epoch, strengthen count) of a record: what a candidate needs of it that does not change with
    the time of the query. Kept per record object (records are frozen; the store hands back the
    same objects while nothing was written)."""
    tags = tuple(r.tags)
    src = r.source
    return (tags, _tag_union(tags), frozenset(src.message_ids) if src is not None else frozenset(),
            src.session_id if src is not None else None, epoch_micros(r.reinforced_at), r.strengthen_count)



@lru_cache(maxsize=4096)
def _tag_union(tags: tuple[str, ...]) -> float:
    return tag_union(tags)


def record_tokens(counter, record: MemoryRecord) -> int:
    """`counter.count(render_record(record))`, cached by what the line is rendered from."""
    t = record.time
    key = (record.memory_type, t.text if t is not None else None, record.location, record.theme,
           record.is_current, record.content)
    try:
        got = _TOKENS.get((counter, key))
    except TypeError:  # an unhashable counter: count every time
        return counter.count(render_record(record))
    if got is None:
        got = counter.count(render_record(record))
        if len(_TOKENS) >= _TOKENS_MAX:
            _TOKENS.clear()
        _TOKENS[(counter, key)] = got
    return got


#: Token counts by (counter, rendered fields); cleared when full (a bounded cache).
_TOKENS: dict[tuple, int] = {}
_TOKENS_MAX = 1 << 15
