"""The model roles: typed inputs and outputs (pydantic, the I/O boundary) and one protocol each.

Every role has a scripted, offline implementation (engine.roles.scripted) and a real one on any
LangChain chat model with structured output (engine.roles.llm). The engine only sees these types.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "WindowMessage",
    "ExtractionInput",
    "ExtractedRecord",
    "ExtractionOutput",
    "TimeConstraint",
    "QueryInput",
    "ParsedQuery",
    "RecordView",
    "ConsolidationInput",
    "ConsolidationDecision",
    "TuneInput",
    "TuneOutput",
    "InductionInput",
    "InductionOutput",
    "Extractor",
    "QueryParser",
    "Consolidator",
    "Tuner",
    "ProfileInducer",
    "ROLE_NAMES",
]

ROLE_NAMES = ("extractor", "query_parser", "consolidator", "tuner", "inducer", "chat")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WindowMessage(_Model):
    """A message as the extractor sees it (`speaker` defaults to the role: the payload sends it only
    for a named speaker)."""

    id: int
    role: str
    speaker: str
    content: str
    at: datetime

    @model_validator(mode="before")
    @classmethod
    def _speaker_is_the_role(cls, data: object) -> object:
        if isinstance(data, dict) and not data.get("speaker") and "role" in data:
            return {**data, "speaker": data["role"]}
        return data


class InductionOutput(_Model):
    """Values to add to (and stale values to remove from) each profile field."""

    add: dict[str, list[str]] = Field(default_factory=dict)
    remove: dict[str, list[str]] = Field(default_factory=dict)


class ExtractionInput(_Model):
    """One overlapping window: `context` messages are context only; records come from `new`."""

    user_id: str
    session_id: str
    context: list[WindowMessage] = Field(default_factory=list)
    new: list[WindowMessage]
    #: the user's profile when the extractor should also say what the records change in it
    #: (`induct_in_extraction`); None: records only
    profile: dict[str, list[str]] | None = None

    def payload(self) -> dict[str, object]:
        """The window as a model extractor gets it (its user message, as JSON): context and new
        messages with id, role, speaker (only when it is not the role: a named user), ISO time to
        the minute (seconds never change a record) and content; no user or session ids; the
        profile when one is asked for."""

        def msgs(ms: list[WindowMessage]) -> list[dict[str, object]]:
            return [{"id": m.id, "role": m.role, **({"speaker": m.speaker} if m.speaker != m.role else {}),
                     "at": m.at.isoformat(timespec="minutes"), "content": m.content} for m in ms]

        out: dict[str, object] = {"context": msgs(self.context), "new": msgs(self.new)}
        if self.profile is not None:
            out["profile"] = self.profile
        return out


class ExtractedRecord(_Model):
    """A record as the extractor proposes it (the engine stamps ids, times and validity)."""

    content: str = Field(description="self-contained: pronouns resolved, relative times absolute")
    memory_type: Literal["fact", "episodic", "profile"] = "fact"
    tags: list[Literal["identity", "decision", "preference", "fact", "episode", "chat", "safety"]] = Field(
        default_factory=lambda: ["fact"],
        description="salience; 'safety' for allergies, medical, legal and accessibility constraints",
    )
    theme: str = ""
    time: str | None = Field(
        default=None, description="YYYY-MM-DD, YYYY-MM, YYYY, or START..END with those forms"
    )
    location: str | None = None
    reason: str | None = None
    purpose: str | None = None
    keywords: list[str] = Field(default_factory=list)
    source_ids: list[int] = Field(default_factory=list, description="ids of the new messages it rests on")
    speaker: str = "user"
    lasting: bool = Field(default=True, description="False for a one-off instruction or request that applies "
                                                    "once ('only this time', 'just for this order')")


class ExtractionOutput(_Model):
    records: list[ExtractedRecord] = Field(default_factory=list)
    #: what these records change in the input's profile, as an induction would (asked only when the
    #: input carries a profile); None: not said, and the inducer decides when the records mature
    profile: InductionOutput | None = None

    def dump(self) -> dict[str, object]:
        """As JSON, for logs and training pairs: without `profile` when it was not said."""
        return self.model_dump(mode="json", exclude={"profile"} if self.profile is None else None)


class TimeConstraint(_Model):
    """A query's time constraint, resolved to absolute bounds."""

    op: Literal["on", "before", "after", "around", "between"]
    start: datetime
    end: datetime
    granularity: Literal["instant", "day", "month", "year", "range"] = "day"
    text: str = ""


class QueryInput(_Model):
    text: str
    now: datetime
    speaker: str | None = None


class ParsedQuery(_Model):
    """A question parsed into the records' dimensions."""

    text: str
    anchor: str = ""
    keywords: list[str] = Field(default_factory=list)
    target_types: list[Literal["fact", "episodic", "profile"]] = Field(default_factory=list)
    target_tags: list[Literal["identity", "decision", "preference", "fact", "episode", "chat", "safety"]] = Field(
        default_factory=list, description="salience the answer carries, e.g. preference for 'what are my hobbies'")
    target_attributes: list[str] = Field(
        default_factory=list, description="single-valued attributes asked for, e.g. occupation for 'what do I do "
                                          "for a living?' (residence, employer, name, phone, email, address, age)")
    time: TimeConstraint | None = None
    location: str | None = None
    needs_assistant: bool = False
    answer_dimension: str | None = None  # time | location | reason | purpose | content
    aggregate: bool = Field(
        default=False, description="the answer gathers several items that may have been said in different "
                                   "conversations, e.g. 'what activities does she do?', 'which books has he read?', "
                                   "'how many times ...'")


class RecordView(_Model):
    """A record as a role sees it (no internal bookkeeping)."""

    id: int | None = None
    content: str
    memory_type: str
    tags: list[str] = Field(default_factory=list)
    time: str | None = None
    location: str | None = None
    reason: str | None = None
    purpose: str | None = None
    keywords: list[str] = Field(default_factory=list)
    theme: str = ""
    lasting: bool = True


class ConsolidationInput(_Model):
    new: RecordView
    existing: RecordView
    cosine: float


class ConsolidationDecision(_Model):
    action: Literal["MERGE", "SUPERSEDE", "KEEP_BOTH"]
    merged_content: str | None = None
    reason: str = ""


class TuneInput(_Model):
    theme: str
    samples: list[str] = Field(default_factory=list)
    current: dict[str, float] = Field(default_factory=dict)


class TuneOutput(_Model):
    """Weights for a theme. The engine validates and repairs (sums to 1, ranges) and logs it."""

    alpha: float
    beta: float
    gamma: float
    delta: float = 0.0
    w0: float = 0.1
    w1: float = 0.8
    w2: float = 0.1
    rationale: str = ""


class InductionInput(_Model):
    profile: dict[str, list[str]] = Field(default_factory=dict)
    records: list[RecordView]


@runtime_checkable
class Extractor(Protocol):
    def extract(self, inp: ExtractionInput) -> ExtractionOutput: ...


@runtime_checkable
class QueryParser(Protocol):
    def parse(self, inp: QueryInput) -> ParsedQuery: ...


@runtime_checkable
class Consolidator(Protocol):
    def decide(self, inp: ConsolidationInput) -> ConsolidationDecision: ...


@runtime_checkable
class Tuner(Protocol):
    def tune(self, inp: TuneInput) -> TuneOutput: ...


@runtime_checkable
class ProfileInducer(Protocol):
    def induct(self, inp: InductionInput) -> InductionOutput: ...
