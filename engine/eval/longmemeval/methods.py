"""How each method indexes one LongMemEval question's haystack and ranks items for the question.

- `bm25-turns`, `dense-turns`, `fusion-turns`: the LoCoMo raw-turn baselines, unchanged; the
  haystack is handed to them as a LoCoMo conversation whose turns are `role said, "content"`;
- `tripath-scripted`: the engine's real path with scripted models, as in LoCoMo. Each haystack
  session is ingested as a conversation through `MemoryEngine.ingest`, the engine's clock set to
  the session's time first; the turns keep their roles (`user` / `assistant`), so assistant turns
  are archived and windowed like a real chat's. The question goes to `MemoryEngine.retrieve` at
  its `question_date`; an item's sources are its record's `source.message_ids`, mapped to turn
  ids through the message ids `ingest` returned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.core.clock import VirtualClock
from engine.core.errors import ConfigError
from engine.core.records import MemoryRecord
from engine.eval.locomo.data import Conversation, Question, Turn
from engine.eval.locomo.methods import (
    QUESTION_SESSION,
    TURN_METHODS,
    USER,
    IngestStats,
    index_conversation,
    ingest_sessions,
    record_sources,
    tripath_config,
)
from engine.eval.longmemeval.data import LmeQuestion
from engine.memory.engine import MemoryEngine
from engine.stores.sqlite import SQLiteStore

__all__ = ["METHODS", "DEFAULT_METHODS", "NOW_RULE", "LmeIndexed", "TextOnlyVectors", "as_conversation",
           "index_question"]

METHODS: tuple[str, ...] = (*TURN_METHODS, "tripath-scripted")
DEFAULT_METHODS: tuple[str, ...] = ("bm25-turns", "tripath-scripted")
NOW_RULE = "each question is asked at its question_date; each session is ingested at its haystack date"


@dataclass(frozen=True, kw_only=True)
class LmeIndexed:
    """One question's haystack indexed by one method: its ranking, its store, and ingest figures."""

    rank: Callable[[], list[tuple[str, ...]]]  # the sources (turn ids) of each ranked item, best first
    store: Any
    ingest: IngestStats | None = None


def as_conversation(q: LmeQuestion) -> Conversation:
    """The haystack as a LoCoMo conversation (speaker = role), for the raw-turn baselines."""
    turns = tuple(Turn(dia_id=t.turn_id, session=s.position, index=i, speaker=t.role, text=t.content, at=t.at)
                  for s in q.sessions for i, t in enumerate(s.turns))
    return Conversation(sample_id=q.question_id, speakers=("user", "assistant"),
                        session_dates={s.position: s.at for s in q.sessions}, turns=turns, observations=(),
                        questions=())


class TextOnlyVectors:
    """A constant unit vector for every text: `bm25-turns` ranks by full text alone, so its store's
    vectors are never read; this spares embedding every raw turn (most of a haystack's cost)."""

    name = "none (bm25-turns ranks by text)"
    dim = 8
    update_cosine = 1.0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * (self.dim - 1) for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0] + [0.0] * (self.dim - 1)


def _turn_index(q: LmeQuestion, method: str, embedder: Any, max_k: int) -> LmeIndexed:
    conv = as_conversation(q)
    if method == "bm25-turns":
        embedder = TextOnlyVectors()
    if not conv.turns:
        store = SQLiteStore(":memory:", dim=embedder.dim, embedder_name=embedder.name)
        return LmeIndexed(rank=list, store=store)
    indexed = index_conversation(method, conv, embedder, max_k)
    asked = Question(question=q.question, answer=q.answer, category=0, evidence=q.evidence)
    return LmeIndexed(rank=lambda: indexed.retrieve(asked), store=indexed.store)


def _ingest(engine: MemoryEngine, clock: VirtualClock, q: LmeQuestion) -> tuple[dict[int, str], IngestStats]:
    """Every session through `MemoryEngine.ingest` at its time; message id → turn id, and the counts."""
    sessions = sorted((s for s in q.sessions if s.turns), key=lambda s: (s.at, s.position))
    return ingest_sessions(engine, clock, [
        (f"S{s.position}", s.turns[-1].at,  # the session has happened: now is its end
         [{"role": t.role, "content": t.content, "at": t.at} for t in s.turns], [t.turn_id for t in s.turns])
        for s in sessions])


def _tripath_index(q: LmeQuestion, embedder: Any, max_k: int) -> LmeIndexed:
    """A fresh in-memory engine on a virtual clock; ranked by `MemoryEngine.retrieve` at question_date."""
    store = SQLiteStore(":memory:", dim=embedder.dim, embedder_name=embedder.name)
    starts = [s.at for s in q.sessions] or [q.asked_at]
    clock = VirtualClock(min(min(starts), q.asked_at))
    engine = MemoryEngine(tripath_config(max_k), store=store, clock=clock, embedder=embedder)
    turn_of, stats = _ingest(engine, clock, q)

    def sources(record: MemoryRecord) -> tuple[str, ...]:
        return record_sources(record, turn_of)

    clock.set(max(clock.now(), q.asked_at))

    def rank() -> list[tuple[str, ...]]:
        r = engine.retrieve(USER, q.question, session_id=QUESTION_SESSION, log=True, now=q.asked_at)
        return [sources(r.records[i]) for i in r.picked[:max_k]]

    return LmeIndexed(rank=rank, store=store, ingest=stats)


def index_question(method: str, q: LmeQuestion, embedder: Any, max_k: int) -> LmeIndexed:
    """Index one question's haystack for one method, in its own in-memory store."""
    if method in TURN_METHODS:
        return _turn_index(q, method, embedder, max_k)
    if method == "tripath-scripted":
        return _tripath_index(q, embedder, max_k)
    raise ConfigError(f"method {method!r} is unknown; choose from {', '.join(METHODS)}")
