"""The small results of a turn's steps (frozen dataclasses, not tuples)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from engine.core.config import Weights
from engine.core.records import Event, MemoryRecord, Message, ScoreRow
from engine.memory.injection import BuiltPrompt
from engine.memory.ranking import Candidate, Ranking
from engine.roles.types import ParsedQuery

__all__ = ["GateStatus", "WorkingItem", "Retrieval", "EventOutcome", "PreparedTurn", "TurnResult", "IngestResult"]


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkingItem:
    """One message of the live window, with its age and maturity now."""

    message: Message
    age_seconds: float
    maturity: float
    mature: bool
    pending: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class GateStatus:
    """The gate's numbers for a session: maturity against `slice_value`, and the trigger."""

    pending: int
    mature: int
    oldest_age_seconds: float | None
    maturity: float
    slice_value: float
    maturity_open: bool
    trigger: str
    trigger_value: float
    trigger_threshold: float
    trigger_open: bool
    idle_gap_seconds: float | None
    idle_open: bool
    will_fire: bool
    slice_gate_seconds: float
    cue_open: bool = False  # a pending user message announcing a change opened the gate (cue_event)

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in
                ((f, getattr(self, f)) for f in self.__slots__)}


@dataclass(frozen=True, kw_only=True)
class Retrieval:
    """One retrieval: the parsed query, every candidate's breakdown, and what was picked.

    `rows` (every candidate's ScoreRow, best S first) and `candidates` are built from `ranking`
    when first read: a turn logs only some rows and reads no Candidate object."""

    query: ParsedQuery
    ranking: Ranking
    records: dict[int, MemoryRecord]
    picked: list[int]
    weights: Weights
    at: datetime
    event_id: int | None = None
    assistant_replies: dict[int, str] = field(default_factory=dict)
    excluded: dict[int, str] = field(default_factory=dict)
    #: wall milliseconds by stage (engine.core.laps): parse, embed, floors, bm25, dense, read, dim,
    #: candidates (fusion, the candidate set, the weights), held_back, rank, log; not compared
    stages: dict[str, float] = field(default_factory=dict, compare=False)

    @cached_property
    def rows(self) -> list[ScoreRow]:
        return self.ranking.rows()

    @cached_property
    def candidates(self) -> list[Candidate]:
        return self.ranking.cands.candidates()

    def picked_records(self) -> list[MemoryRecord]:
        return [self.records[i] for i in self.picked if i in self.records]


@dataclass(frozen=True, kw_only=True, slots=True)
class EventOutcome:
    """What one event did: its number and the records it added or changed."""

    event_no: int
    added: tuple[int, ...] = ()
    superseded: tuple[int, ...] = ()
    merged: tuple[int, ...] = ()
    errors: int = 0


@dataclass(frozen=True, kw_only=True)
class PreparedTurn:
    """The memory side of a turn, done: the prompt for the model call and what led to it.

    Later model calls of the same user turn (tool calls, retries) reuse it (`MemoryEngine.
    rebuild_prompt`): the gate, event, retrieval and reinforcement ran once for this message.
    """

    user_id: str
    session_id: str
    prompt: BuiltPrompt
    event: EventOutcome | None
    retrieval: Retrieval | None
    user_message_id: int | None
    question: str | None = None  # the user message's text (None: the turn had no user message)
    #: wall milliseconds by step (engine.core.laps): compact, catch_up, window, gate or event, recall,
    #: inject (with the exposure); not compared
    stages: dict[str, float] = field(default_factory=dict, compare=False)

    @property
    def event_fired(self) -> bool:
        return self.event is not None

    @property
    def event_no(self) -> int | None:
        return self.event.event_no if self.event else None


@dataclass(frozen=True, kw_only=True)
class TurnResult:
    """One full turn: the reply, the prompt the model saw, and every event the turn logged."""

    reply: str
    prompt: BuiltPrompt
    event_fired: bool
    event_no: int | None
    retrieval: Retrieval | None
    events: list[Event]
    user_message: Message
    reply_message: Message | None
    #: wall milliseconds by step: observe, PreparedTurn.stages, chat, reply, reinforce (the
    #: retrieval's own stages are `retrieval.stages`); not compared
    stages: dict[str, float] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, kw_only=True)
class IngestResult:
    """What one batch ingest stored: the archived messages (with ids) and the update step's counts."""

    messages: list[Message]
    event_no: int | None
    records_added: int = 0
    merged: int = 0
    superseded: int = 0
    kept_both: int = 0
    errors: int = 0
