"""The data model: messages, dimensional memory records, profiles, events.

All are frozen, keyword-only dataclasses; change them with `dataclasses.replace`. Each has a
declared JSON shape (`to_dict` / `from_dict`) that round-trips exactly. Datetimes are tz-aware and
serialise as ISO 8601 strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any, Literal

from engine.core.clock import ensure_aware, parse_datetime
from engine.core.errors import ConfigError

__all__ = [
    "Role",
    "MemoryType",
    "MEMORY_TYPES",
    "TAGS",
    "TYPE_SCORES",
    "USER_TAGS",
    "PROFILE_FIELDS",
    "Message",
    "TimeSpan",
    "SourcePointer",
    "MemoryRecord",
    "UserProfile",
    "ProfileHistoryEntry",
    "Event",
    "ScoreRow",
    "record_text",
    "replace",
]

Role = Literal["user", "assistant", "tool", "system"]
ROLES = ("user", "assistant", "tool", "system")
MemoryType = Literal["fact", "episodic", "profile"]
MEMORY_TYPES: tuple[str, ...] = ("fact", "episodic", "profile")
#: Salience tags and their type scores (first seed; feed importance by probability union).
TYPE_SCORES: dict[str, float] = {
    "identity": 0.95,
    "decision": 0.85,
    "preference": 0.80,
    "fact": 0.60,
    "episode": 0.40,
    "chat": 0.15,
    # memlab's addition: safety-critical constraints (allergies, medical, legal, accessibility)
    # rank like identity and hold a floor of their own (MemoryConfig.safety_seats)
    "safety": 0.95,
}
TAGS: tuple[str, ...] = tuple(TYPE_SCORES)
#: Tags only a person sets by hand (engine.memory.editing), never a model: no type score of their
#: own (importance ignores them); "pinned" holds a seat in every retrieval (ranking's pinned floor).
USER_TAGS: tuple[str, ...] = ("pinned",)
#: The profile's fields; `name` (the user's own name) holds one value, a new name replaces the old.
PROFILE_FIELDS: tuple[str, ...] = (
    "name",
    "identity",
    "occupation",
    "preferences",
    "goals",
    "constraints",
    "relationships",
    "facts",
)
GRANULARITIES = ("instant", "day", "month", "year", "range")


def _dt(value: Any, what: str) -> datetime:
    if isinstance(value, datetime):
        return ensure_aware(value, what=what)
    return parse_datetime(value, what=what)


def _opt_dt(value: Any, what: str) -> datetime | None:
    return None if value is None else _dt(value, what)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One message of a conversation, stamped by the engine's clock on first sight."""

    user_id: str
    session_id: str
    role: str
    content: str
    created_at: datetime
    id: int | None = None
    name: str | None = None  # speaker name when known (e.g. "Caroline"), tool name for tools
    tool_call_id: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ConfigError(f"message role {self.role!r} is not one of {', '.join(ROLES)}")
        ensure_aware(self.created_at, what="Message.created_at")

    @property
    def speaker(self) -> str:
        return self.name or self.role

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "role": self.role,
            "content": self.content,
            "created_at": _iso(self.created_at),
            "name": self.name,
            "tool_call_id": self.tool_call_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        return cls(
            id=data.get("id"),
            user_id=data["user_id"],
            session_id=data["session_id"],
            role=data["role"],
            content=data["content"],
            created_at=_dt(data["created_at"], "Message.created_at"),
            name=data.get("name"),
            tool_call_id=data.get("tool_call_id"),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class TimeSpan:
    """An absolute time: a point or an interval [start, end], with the granularity it was stated in.

    "2023-05-07" is a day (start 00:00, end 23:59:59.999999 of that day), "2023-05" a month, and
    "between May and June" a range. `text` keeps the normalised label (YYYY-MM-DD, YYYY-MM, YYYY,
    or "A..B").
    """

    start: datetime
    end: datetime
    granularity: str = "day"
    text: str = ""

    def __post_init__(self) -> None:
        ensure_aware(self.start, what="TimeSpan.start")
        ensure_aware(self.end, what="TimeSpan.end")
        if self.end < self.start:
            raise ConfigError(f"TimeSpan end {self.end} is before start {self.start}")
        if self.granularity not in GRANULARITIES:
            raise ConfigError(f"TimeSpan granularity {self.granularity!r} is not one of {GRANULARITIES}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": _iso(self.start),
            "end": _iso(self.end),
            "granularity": self.granularity,
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TimeSpan:
        return cls(
            start=_dt(data["start"], "TimeSpan.start"),
            end=_dt(data["end"], "TimeSpan.end"),
            granularity=data.get("granularity", "day"),
            text=data.get("text", ""),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class SourcePointer:
    """Where a record came from: the session, the grounding message ids and who said it."""

    session_id: str
    message_ids: tuple[int, ...] = ()
    speaker: str = "user"
    reply_message_id: int | None = None  # the assistant reply that followed, for assistant recall
    external_ids: tuple[str, ...] = ()  # e.g. LoCoMo dia_ids

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "message_ids": list(self.message_ids),
            "speaker": self.speaker,
            "reply_message_id": self.reply_message_id,
            "external_ids": list(self.external_ids),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourcePointer:
        return cls(
            session_id=data["session_id"],
            message_ids=tuple(int(i) for i in data.get("message_ids", ())),
            speaker=data.get("speaker", "user"),
            reply_message_id=data.get("reply_message_id"),
            external_ids=tuple(str(i) for i in data.get("external_ids", ())),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryRecord:
    """An atomic, self-contained memory with explicit dimensions and bi-temporal validity.

    `content` has pronouns resolved and relative times made absolute. An update never deletes:
    a superseded record keeps its row, gains `invalid_at` and points to its `superseded_by`.
    """

    user_id: str
    content: str
    memory_type: str = "fact"
    tags: tuple[str, ...] = ("fact",)
    theme: str = ""
    time: TimeSpan | None = None
    location: str | None = None
    reason: str | None = None
    purpose: str | None = None
    keywords: tuple[str, ...] = ()
    source: SourcePointer | None = None
    created_at: datetime
    last_reinforced_at: datetime | None = None
    strengthen_count: int = 0
    valid_from: datetime | None = None
    invalid_at: datetime | None = None
    superseded_by: int | None = None
    id: int | None = None
    said_at: datetime | None = None  # when its source messages were said (decay starts here, not at extraction)
    lasting: bool = True  # False for a one-off instruction ("only this time"): never profiled, served in its session

    def __post_init__(self) -> None:
        problems = []
        if self.memory_type not in MEMORY_TYPES:
            problems.append(f"memory_type {self.memory_type!r} is not one of {', '.join(MEMORY_TYPES)}")
        bad = [t for t in self.tags if t not in TYPE_SCORES and t not in USER_TAGS]
        if bad:
            problems.append(f"tags {bad} are not among {', '.join(TAGS + USER_TAGS)}")
        if self.strengthen_count < 0:
            problems.append("strengthen_count must be >= 0")
        if problems:
            raise ConfigError(problems, source="MemoryRecord")
        ensure_aware(self.created_at, what="MemoryRecord.created_at")
        for name in ("last_reinforced_at", "valid_from", "invalid_at", "said_at"):
            value = getattr(self, name)
            if value is not None:
                ensure_aware(value, what=f"MemoryRecord.{name}")

    @property
    def reinforced_at(self) -> datetime:
        """The time decay counts from: the last genuine reinforcement, else when it was said (never
        when it was extracted: lazy extraction must not make old things look fresh)."""
        return self.last_reinforced_at or self.said_at or self.created_at

    @property
    def is_current(self) -> bool:
        return self.invalid_at is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "content": self.content,
            "memory_type": self.memory_type,
            "tags": list(self.tags),
            "theme": self.theme,
            "time": None if self.time is None else self.time.to_dict(),
            "location": self.location,
            "reason": self.reason,
            "purpose": self.purpose,
            "keywords": list(self.keywords),
            "source": None if self.source is None else self.source.to_dict(),
            "created_at": _iso(self.created_at),
            "last_reinforced_at": _iso(self.last_reinforced_at),
            "strengthen_count": self.strengthen_count,
            "valid_from": _iso(self.valid_from),
            "invalid_at": _iso(self.invalid_at),
            "superseded_by": self.superseded_by,
            "said_at": _iso(self.said_at),
            "lasting": self.lasting,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryRecord:
        return cls(
            id=data.get("id"),
            user_id=data["user_id"],
            content=data["content"],
            memory_type=data.get("memory_type", "fact"),
            tags=tuple(data.get("tags", ("fact",))),
            theme=data.get("theme", ""),
            time=None if data.get("time") is None else TimeSpan.from_dict(data["time"]),
            location=data.get("location"),
            reason=data.get("reason"),
            purpose=data.get("purpose"),
            keywords=tuple(data.get("keywords", ())),
            source=None if data.get("source") is None else SourcePointer.from_dict(data["source"]),
            created_at=_dt(data["created_at"], "MemoryRecord.created_at"),
            last_reinforced_at=_opt_dt(data.get("last_reinforced_at"), "last_reinforced_at"),
            strengthen_count=int(data.get("strengthen_count", 0)),
            valid_from=_opt_dt(data.get("valid_from"), "valid_from"),
            invalid_at=_opt_dt(data.get("invalid_at"), "invalid_at"),
            superseded_by=data.get("superseded_by"),
            said_at=_opt_dt(data.get("said_at"), "said_at"),
            lasting=bool(data.get("lasting", True)),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class UserProfile:
    """The long-term, structured profile of one user, built incrementally from records.

    `fields` maps a profile field (see PROFILE_FIELDS; others allowed) to its values in the
    order they were learned. `sources` maps field → value → the ids of the records the value rests
    on (the profile lives under the curve: a value goes when its sources are superseded).
    `version` counts inductions.
    """

    user_id: str
    fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    version: int = 0
    updated_at: datetime | None = None
    sources: Mapping[str, Mapping[str, tuple[int, ...]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "user_id": self.user_id,
            "fields": {k: list(v) for k, v in self.fields.items()},
            "version": self.version,
            "updated_at": _iso(self.updated_at),
            "sources": {k: {v: list(ids) for v, ids in vals.items()} for k, vals in self.sources.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UserProfile:
        return cls(
            user_id=data["user_id"],
            fields={k: tuple(v) for k, v in dict(data.get("fields", {})).items()},
            version=int(data.get("version", 0)),
            updated_at=_opt_dt(data.get("updated_at"), "UserProfile.updated_at"),
            sources={k: {v: tuple(int(i) for i in ids) for v, ids in dict(vals).items()}
                     for k, vals in dict(data.get("sources", {})).items()},
        )

    def sources_of(self, key: str, value: str) -> tuple[int, ...]:
        return tuple(self.sources.get(key, {}).get(value, ()))

    def is_empty(self) -> bool:
        return not any(self.fields.values())


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileHistoryEntry:
    """One induction: what the profile was, what it became, from which records."""

    user_id: str
    version: int
    at: datetime
    before: Mapping[str, tuple[str, ...]]
    after: Mapping[str, tuple[str, ...]]
    record_ids: tuple[int, ...] = ()

    def diff(self) -> dict[str, dict[str, list[str]]]:
        """Per field, the values added and removed by this induction."""
        out: dict[str, dict[str, list[str]]] = {}
        for key in sorted(set(self.before) | set(self.after)):
            old, new = list(self.before.get(key, ())), list(self.after.get(key, ()))
            added = [v for v in new if v not in old]
            removed = [v for v in old if v not in new]
            if added or removed:
                out[key] = {"added": added, "removed": removed}
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "user_id": self.user_id,
            "version": self.version,
            "at": _iso(self.at),
            "before": {k: list(v) for k, v in self.before.items()},
            "after": {k: list(v) for k, v in self.after.items()},
            "record_ids": list(self.record_ids),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfileHistoryEntry:
        return cls(
            user_id=data["user_id"],
            version=int(data["version"]),
            at=_dt(data["at"], "ProfileHistoryEntry.at"),
            before={k: tuple(v) for k, v in data.get("before", {}).items()},
            after={k: tuple(v) for k, v in data.get("after", {}).items()},
            record_ids=tuple(int(i) for i in data.get("record_ids", ())),
        )


EVENT_KINDS = (
    "stamp",
    "gate",
    "session",
    "extract",
    "extraction",
    "update",
    "tune",
    "induct",
    "truncate",
    "retrieve",
    "inject",
    "reinforce",
    "reply",
    "error",
    "forget",
    "user_edit",
    "compacted",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """One entry of the event log. `payload` is JSON-serialisable and holds the step's numbers."""

    user_id: str
    session_id: str
    kind: str
    at: datetime
    payload: Mapping[str, Any] = field(default_factory=dict)
    turn: int | None = None
    event_no: int | None = None  # which memory event (gate opening) this step belongs to
    id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "kind": self.kind,
            "at": _iso(self.at),
            "turn": self.turn,
            "event_no": self.event_no,
            "payload": dict(self.payload),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Event:
        return cls(
            id=data.get("id"),
            user_id=data["user_id"],
            session_id=data["session_id"],
            kind=data["kind"],
            at=_dt(data["at"], "Event.at"),
            turn=data.get("turn"),
            event_no=data.get("event_no"),
            payload=dict(data.get("payload", {})),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ScoreRow:
    """One candidate of one retrieval: per-path ranks and scores, R, T, F, weighted parts, S, verdict.

    `verdict` is "picked" or "near-miss"/"dropped"; `why` says which rule decided (floor, top-K,
    budget, invalid).
    """

    record_id: int
    ranks: Mapping[str, int | None]
    path_scores: Mapping[str, float]
    R: float
    T: float
    F: float
    parts: Mapping[str, float]  # {"alpha_R", "beta_T", "gamma_F", "delta"}
    S: float
    verdict: str
    why: str
    tokens: int = 0
    position: int | None = None  # rank by S among candidates (0 = best)

    def to_dict(self) -> dict[str, Any]:
        return {"record_id": self.record_id, "ranks": dict(self.ranks), "path_scores": dict(self.path_scores),
                "R": self.R, "T": self.T, "F": self.F, "parts": dict(self.parts), "S": self.S,
                "verdict": self.verdict, "why": self.why, "tokens": self.tokens, "position": self.position}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScoreRow:
        return cls(**{name: data[name] for name in _SCORE_FIELDS if name in data})


_SCORE_FIELDS = tuple(f.name for f in fields(ScoreRow))


def record_text(record: MemoryRecord) -> str:
    """The text embedded for a record: content + reason + purpose (as in the dimensional-memory design's dense route)."""
    parts = [record.content]
    if record.reason:
        parts.append(f"because {record.reason}")
    if record.purpose:
        parts.append(f"to {record.purpose}")
    return " ".join(parts)
