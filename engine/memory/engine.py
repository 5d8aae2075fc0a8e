"""`MemoryEngine`: the turn pipeline under an injected clock.

One turn: stamp and append the user message → gate (maturity of the oldest unprocessed message
against `slice_value`, and the trigger) → when both open, one **event** (extract in overlapping
windows → dimension-aware update → tune weights for the theme → induct the profile from mature
records → truncate) → retrieve (tri-path, ranked by the forgetting-curve score) → inject
(core → profile → records → window) → reinforce the injected records → the chat call.

Every step appends to the store's event log; retrievals also write one scoring row per candidate.
The engine reads time only from its clock. Cursors are per (user, session) and only move past
messages that were extracted; a failed window leaves its messages pending for the next event.
A session's first turn extracts what earlier sessions of the user left pending, so memory
serves the first turn of a new session.
"""

from __future__ import annotations

import threading
import time as _time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from engine.core.clock import Clock, VirtualClock, ensure_aware
from engine.core.config import MemoryConfig, Weights, repair_weights, validate_weights
from engine.core.errors import (
    ClockError,
    ConfigError,
    MemlabError,
    MemlabUsageError,
    ModelCallError,
    StoreError,
)
from engine.core.forgetting import maturity
from engine.core.records import (
    Event,
    MemoryRecord,
    Message,
    ProfileHistoryEntry,
    ScoreRow,
    SourcePointer,
    UserProfile,
)
from engine.core.tokens import ApproxTokenCounter, TokenCounter
from engine.memory.injection import BuiltPrompt, build_prompt, render_record
from engine.memory.ranking import Candidate, rank_candidates
from engine.memory.retrieval import (
    PathResults,
    candidate_inputs,
    fuse,
    gather,
    record_text,
)
from engine.memory.update import apply_updates, record_view
from engine.roles.bundle import Models
from engine.roles.embeddings import HashEmbeddings, embedder_name
from engine.roles.ledger import CallRecord, Ledger
from engine.roles.types import (
    ConsolidationInput,
    ExtractionInput,
    ExtractionOutput,
    InductionInput,
    InductionOutput,
    ParsedQuery,
    QueryInput,
    TuneInput,
    TuneOutput,
    WindowMessage,
)
from engine.stores.base import Store, open_store

__all__ = [
    "MemoryEngine",
    "TurnResult",
    "IngestResult",
    "Retrieval",
    "GateStatus",
    "WorkingItem",
    "Recovery",
    "KeepPendingRecovery",
    "DEFAULT_START",
]

DEFAULT_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
MAX_INDUCTION_BATCH = 20


class Recovery(Protocol):
    """Told about a failed memory step; the messages involved are still pending."""

    def on_failure(self, *, step: str, user_id: str, session_id: str, message_ids: Sequence[int],
                   error: BaseException) -> None: ...


class KeepPendingRecovery:
    """Offline default: nothing to do, the messages stay pending and the next event retries them."""

    def __init__(self) -> None:
        self.failures: list[dict[str, Any]] = []

    def on_failure(self, *, step, user_id, session_id, message_ids, error) -> None:
        self.failures.append({"step": step, "user_id": user_id, "session_id": session_id,
                              "message_ids": list(message_ids), "error": str(error)})


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkingItem:
    message: Message
    age_seconds: float
    maturity: float
    mature: bool
    pending: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class GateStatus:
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

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in
                ((f, getattr(self, f)) for f in self.__slots__)}


@dataclass(frozen=True, kw_only=True)
class Retrieval:
    """One retrieval: the parsed query, every candidate's breakdown, and what was picked."""

    query: ParsedQuery
    rows: list[ScoreRow]
    records: dict[int, MemoryRecord]
    picked: list[int]
    candidates: list[Candidate]
    weights: Weights
    at: datetime
    event_id: int | None = None
    assistant_replies: dict[int, str] = field(default_factory=dict)
    excluded: dict[int, str] = field(default_factory=dict)

    def picked_records(self) -> list[MemoryRecord]:
        return [self.records[i] for i in self.picked if i in self.records]


@dataclass(frozen=True, kw_only=True)
class TurnResult:
    reply: str
    prompt: BuiltPrompt
    event_fired: bool
    event_no: int | None
    retrieval: Retrieval | None
    events: list[Event]
    user_message: Message
    reply_message: Message | None


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


class MemoryEngine:
    """The memory engine. See ARCHITECTURE.md for the facade and DESIGN.md for the pipeline."""

    def __init__(
        self,
        config: MemoryConfig | None = None,
        *,
        store: Store | str | None = None,
        clock: Clock | None = None,
        models: Models | None = None,
        embedder: Any = None,
        token_counter: TokenCounter | None = None,
        ledger: Ledger | None = None,
        recovery: Recovery | None = None,
    ):
        self.config = config or MemoryConfig.from_preset()
        self.embedder = embedder or HashEmbeddings(384)
        dim = int(getattr(self.embedder, "dim", 384))
        if store is None or isinstance(store, str):
            store = open_store(store, dim=dim, embedder_name=embedder_name(self.embedder))
        self.store: Store = store
        self.clock: Clock = clock or VirtualClock(DEFAULT_START)
        self.ledger = ledger or Ledger()
        self.models = (models or Models.scripted()).bind_ledger(self.ledger)
        self.counter = token_counter or ApproxTokenCounter()
        self.recovery = recovery or KeepPendingRecovery()
        self._lock = threading.RLock()
        self._turns: Counter[tuple[str, str]] = Counter()
        self.last_prompt: BuiltPrompt | None = None
        self._collect: list[Event] | None = None
        self._last_now: datetime | None = None
        self.last_retrieval: Retrieval | None = None

    # ------------------------------------------------------------------ config and time
    @property
    def update_cosine(self) -> float:
        """The update's cosine threshold: the config's, else the embedder's calibrated one."""
        if self.config.update_cosine is not None:
            return self.config.update_cosine
        return float(getattr(self.embedder, "update_cosine", 0.7))

    def set_config(self, config: MemoryConfig) -> None:
        if not isinstance(config, MemoryConfig):
            raise ConfigError("set_config needs a MemoryConfig")
        with self._lock:
            self.config = config

    def now(self) -> datetime:
        """The clock's time; a clock that moved backwards is an error, never silently accepted."""
        t = ensure_aware(self.clock.now(), what="clock.now()")
        if self._last_now is not None and t < self._last_now:
            raise ClockError(f"the clock moved backwards from {self._last_now.isoformat()} to {t.isoformat()}; "
                             "memory ages would go negative — use a clock that only moves forward")
        self._last_now = t
        return t

    # ------------------------------------------------------------------ logging helpers
    def _log(self, user_id: str, session_id: str, kind: str, payload: Mapping[str, Any], *,
             event_no: int | None = None) -> Event:
        turn = self._turns.get((user_id, session_id))
        ev = self.store.append_event(Event(user_id=user_id, session_id=session_id, kind=kind, at=self.now(),
                                           payload=dict(payload), turn=turn, event_no=event_no))
        if self._collect is not None:
            self._collect.append(ev)
        return ev

    def _call(self, role: str, fn, inp):
        """Call a role, recording the call in the ledger (scripted calls: approximate tokens)."""
        t0 = _time.perf_counter()
        mark = self.ledger.mark()
        try:
            out = fn(inp)
        except Exception as exc:
            if self.ledger.mark() == mark:
                self.ledger.record(CallRecord(role=role, model=self.models.mode, input_tokens=self._approx(inp),
                                              output_tokens=0, ok=False, error=type(exc).__name__,
                                              latency_ms=(_time.perf_counter() - t0) * 1000))
            raise
        if self.ledger.mark() == mark:  # the role did not record itself (scripted)
            self.ledger.record(CallRecord(role=role, model=self.models.mode, input_tokens=self._approx(inp),
                                          output_tokens=self._approx(out),
                                          latency_ms=(_time.perf_counter() - t0) * 1000))
        return out

    def _approx(self, obj: Any) -> int:
        if hasattr(obj, "model_dump_json"):
            return self.counter.count(obj.model_dump_json())
        return self.counter.count(str(obj))

    # ------------------------------------------------------------------ messages
    def observe(self, user_id: str, session_id: str, role: str, content: Any, *, name: str | None = None,
                at: datetime | None = None, tool_call_id: str | None = None) -> Message:
        """Stamp (clock time unless the message already has a time) and archive a message."""
        from engine.core.tokens import content_text

        _check_id(user_id, "user_id")
        _check_id(session_id, "session_id")
        text = content_text(content)
        stamp = ensure_aware(at, what="message time") if at is not None else self.now()
        with self._lock:
            msg = self.store.add_message(Message(user_id=user_id, session_id=session_id, role=role, content=text,
                                                 created_at=stamp, name=name, tool_call_id=tool_call_id))
            self._log(user_id, session_id, "stamp", {"message_id": msg.id, "role": role,
                                                     "at": stamp.isoformat(), "tokens": self.counter.count(text),
                                                     "stamped_by": "caller" if at is not None else "clock"})
        return msg

    def pending(self, user_id: str, session_id: str) -> list[Message]:
        cursor = self.store.get_cursor(user_id, session_id, "extract")
        return self.store.messages(user_id, session_id=session_id, after_id=cursor)

    def working_memory(self, user_id: str, session_id: str) -> list[WorkingItem]:
        """The live window: pending messages plus the last `keep_recent`, each with age and maturity."""
        now = self.now()
        cfg = self.config
        cursor = self.store.get_cursor(user_id, session_id, "extract")
        msgs = self.store.messages(user_id, session_id=session_id)
        processed = [m for m in msgs if m.id <= cursor]
        window = processed[-cfg.keep_recent:] if cfg.keep_recent else []
        window += [m for m in msgs if m.id > cursor]
        out = []
        for m in window:
            age = max(0.0, (now - m.created_at).total_seconds())
            mat = maturity(age, tau_m=cfg.tau_m, c_m=cfg.c_m)
            out.append(WorkingItem(message=m, age_seconds=age, maturity=mat, mature=mat >= cfg.slice_value,
                                   pending=m.id > cursor))
        return out

    def gate_status(self, user_id: str, session_id: str, *, incoming: bool = False) -> GateStatus:
        """The gate's numbers for this session now (what the next `prepare` would decide).

        Maturity: M(age of the oldest pending message) against `slice_value`. Trigger: measured
        over the mature prefix of the pending messages (what an event would extract), so one
        gate opening extracts a batch and the gate closes again until another batch matures:
        never an event every turn. An idle gap past the slice gate also opens it.

        `incoming=True` answers for the next turn: as if a user message arrived now (what the
        lab shows before you send one).
        """
        cfg = self.config
        now = self.now()
        pending = self.pending(user_id, session_id)
        if incoming:
            pending = [*pending, Message(user_id=user_id, session_id=session_id, role="user", content="",
                                         created_at=now)]
        oldest = pending[0] if pending else None
        age = (now - oldest.created_at).total_seconds() if oldest else None
        mat = maturity(age, tau_m=cfg.tau_m, c_m=cfg.c_m) if age is not None else 0.0
        mature = _mature_prefix(pending, now, cfg.slice_gate_seconds)
        if cfg.trigger == "messages":
            value = float(len(mature))
        else:
            tokens = float(sum(self.counter.count(m.content) for m in mature))
            value = tokens if cfg.trigger == "tokens" else tokens / cfg.context_budget
        trigger_open = value >= cfg.trigger_threshold
        idle_gap = None
        if len(pending) >= 2:
            idle_gap = (pending[-1].created_at - pending[-2].created_at).total_seconds()
        idle_open = bool(cfg.idle_event and idle_gap is not None and idle_gap >= cfg.slice_gate_seconds)
        maturity_open = oldest is not None and mat >= cfg.slice_value
        return GateStatus(
            pending=len(pending), mature=len(mature), oldest_age_seconds=age, maturity=float(mat),
            slice_value=cfg.slice_value, maturity_open=maturity_open, trigger=cfg.trigger, trigger_value=value,
            trigger_threshold=float(cfg.trigger_threshold), trigger_open=trigger_open, idle_gap_seconds=idle_gap,
            idle_open=idle_open, will_fire=maturity_open and (trigger_open or idle_open),
            slice_gate_seconds=cfg.slice_gate_seconds,
        )

    # ------------------------------------------------------------------ the turn
    def turn(self, user_id: str, session_id: str, text: str, *, name: str | None = None) -> TurnResult:
        """One full turn: observe the user message, prepare the prompt, call the chat model once."""
        with self._lock:
            self._collect = []
            try:
                user_msg = self.observe(user_id, session_id, "user", text, name=name)
                prompt, fired, event_no, retrieval = self._prepare(user_id, session_id)
                reply_text = self._chat(user_id, session_id, prompt)
                reply_msg = self.observe(user_id, session_id, "assistant", reply_text)
                events = list(self._collect)
            finally:
                self._collect = None
            return TurnResult(reply=reply_text, prompt=prompt, event_fired=fired, event_no=event_no,
                              retrieval=retrieval, events=events, user_message=user_msg, reply_message=reply_msg)

    def prepare(self, user_id: str, session_id: str) -> BuiltPrompt:
        """Gate → event → retrieve → inject → reinforce for the session's next model call."""
        with self._lock:
            return self._prepare(user_id, session_id)[0]

    def _prepare(self, user_id: str, session_id: str) -> tuple[BuiltPrompt, bool, int | None, Retrieval | None]:
        self._turns[(user_id, session_id)] += 1
        cfg = self.config
        fired = False
        event_no = None
        # a new session first catches up on what earlier sessions left pending
        if self.store.get_kv(user_id, f"session-started:{session_id}") is None:
            self.store.set_kv(user_id, f"session-started:{session_id}", self.now().isoformat())
            leftovers = [s for s in self.store.sessions(user_id) if s != session_id and self.pending(user_id, s)]
            if leftovers:
                event_no = self._new_event_no(user_id)
                self._log(user_id, session_id, "session", {"new_session": session_id, "catch_up": leftovers},
                          event_no=event_no)
                for s in leftovers:
                    self._event(user_id, s, event_no=event_no, mature_only=False, log_session=session_id)
                fired = True
        gate = self.gate_status(user_id, session_id)
        self._log(user_id, session_id, "gate", gate.to_dict())
        if gate.will_fire:
            event_no = self._new_event_no(user_id)
            self._event(user_id, session_id, event_no=event_no, mature_only=True, log_session=session_id)
            fired = True
        # retrieval
        query_msg = self._last_user_message(user_id, session_id)
        retrieval: Retrieval | None = None
        if cfg.retrieval_policy == "per_turn" or fired:
            if query_msg is not None:
                retrieval = self._turn_retrieve(user_id, session_id, query_msg.content, event_no, query_msg.name)
                picked = retrieval.picked if retrieval else []
            else:
                picked = []
            if cfg.retrieval_policy == "on_event":
                self.store.set_kv(user_id, f"on-event-picked:{session_id}", picked)
            self.last_retrieval = retrieval
        else:
            stored = self.store.get_kv(user_id, f"on-event-picked:{session_id}")
            if stored is None:  # first turn of a session under on_event: retrieve once
                retrieval = self._turn_retrieve(user_id, session_id, query_msg.content, event_no,
                                                None) if query_msg else None
                picked = retrieval.picked if retrieval else []
                self.store.set_kv(user_id, f"on-event-picked:{session_id}", picked)
            else:
                picked = [int(i) for i in stored]
        records = [r for r in self.store.get_records(user_id, picked) if r.is_current or cfg.include_history]
        replies = retrieval.assistant_replies if retrieval else {}
        window = self._fit_window([w.message for w in self.working_memory(user_id, session_id)])
        profile, held_values = self._profile_for_prompt(user_id, retrieval)
        prompt = build_prompt(core=cfg.core_prompt, profile=profile, records=records,
                              window=window, counter=self.counter, assistant_replies=replies, now=self.now())
        self._log(user_id, session_id, "inject", {
            "record_ids": list(prompt.record_ids),
            "tokens": {p.name: p.tokens for p in prompt.parts},
            "cacheable_prefix_tokens": sum(p.tokens for p in prompt.parts if p.cacheable),
            "payload_tokens": prompt.payload_tokens,
            "window_messages": len(window),
            "assistant_recall": sorted(replies),
            "profile_values_held": held_values,
        }, event_no=event_no)
        if records:
            now = self.now()
            self.store.reinforce(user_id, [r.id for r in records], now)
            self._log(user_id, session_id, "reinforce", {"record_ids": [r.id for r in records],
                                                         "at": now.isoformat()}, event_no=event_no)
        self.last_prompt = prompt
        return prompt, fired, event_no, retrieval

    def _profile_for_prompt(self, user_id: str, retrieval: Retrieval | None) -> tuple[UserProfile, list[str]]:
        """The stored profile, minus values the live window contradicts (not written back).

        A value goes when it states the old value of an attribute whose record the live window
        supersedes ("lives in Chengdu" while the user just said they moved); the next event's
        supersede and induction correct the stored profile itself.
        """
        from engine.core.attributes import attribute_of

        profile = self.store.get_profile(user_id)
        if retrieval is None or not retrieval.excluded:
            return profile, []
        stale = []
        for rid in retrieval.excluded:
            rec = retrieval.records.get(rid)
            attr = attribute_of(rec.content) if rec is not None else None
            if attr and attr[1]:
                stale.append(attr[1].replace(" ", ""))
        held: list[str] = []
        fields: dict[str, tuple[str, ...]] = {}
        for key, values in profile.fields.items():
            keep = []
            for v in values:
                if any(old and old in v.lower().replace(" ", "") for old in stale):
                    held.append(v)
                else:
                    keep.append(v)
            fields[key] = tuple(keep)
        return replace(profile, fields=fields), held

    def _fit_window(self, window: list[Message]) -> list[Message]:
        """The newest messages that fit the context budget (the current one always stays).

        Messages left out are not lost: they are archived and, if pending, still extracted.
        """
        budget = self.config.context_budget
        kept: list[Message] = []
        used = 0
        for m in reversed(window):
            cost = self.counter.count_messages([{"content": m.content}])
            if kept and used + cost > budget:
                break
            kept.append(m)
            used += cost
        kept.reverse()
        # never open the window on a tool result whose call was cut off
        while len(kept) > 1 and kept[0].role == "tool":
            kept.pop(0)
        return kept

    def _turn_retrieve(self, user_id: str, session_id: str, query: str, event_no: int | None,
                       speaker: str | None) -> Retrieval | None:
        """A turn's retrieval; a failing query parser or embedder costs the memory, not the reply."""
        try:
            return self.retrieve(user_id, query, session_id=session_id, log=True, event_no=event_no, speaker=speaker)
        except (MemlabUsageError, StoreError):
            raise
        except Exception as exc:
            self._log(user_id, session_id, "error", {"step": "retrieve", "error": f"{type(exc).__name__}: {exc}",
                                                     "served_without_memory": True}, event_no=event_no)
            return None

    def _last_user_message(self, user_id: str, session_id: str) -> Message | None:
        for m in reversed(self.store.messages(user_id, session_id=session_id)):
            if m.role == "user":
                return m
        return None

    def _new_event_no(self, user_id: str) -> int:
        n = int(self.store.get_kv(user_id, "event-counter") or 0) + 1
        self.store.set_kv(user_id, "event-counter", n)
        return n

    def _chat(self, user_id: str, session_id: str, prompt: BuiltPrompt) -> str | None:
        from langchain_core.messages import (
            AIMessage,
            HumanMessage,
            SystemMessage,
            ToolMessage,
        )

        kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
        msgs = []
        for m in prompt.messages:
            if m["role"] == "tool":
                msgs.append(ToolMessage(content=m["content"], tool_call_id=m.get("tool_call_id") or "tool"))
            else:
                msgs.append(kinds[m["role"]](content=m["content"]))
        t0 = _time.perf_counter()
        try:
            ai = self.models.chat.invoke(msgs)  # called once per turn; never retried here
        except Exception as exc:
            self._log(user_id, session_id, "error", {"step": "chat", "error": f"{type(exc).__name__}: {exc}"})
            self.ledger.record(CallRecord(role="chat", model=self.models.mode, input_tokens=prompt.total_tokens,
                                          output_tokens=0, ok=False, error=type(exc).__name__))
            raise ModelCallError(f"the chat model failed: {exc}; the user message is stored, retry the turn") from exc
        latency = (_time.perf_counter() - t0) * 1000
        if self.models.mode != "scripted":
            from engine.roles.llm import record_chat_call

            record_chat_call(self.ledger, "chat", ai, latency, self.models.settings)
        else:
            usage = getattr(ai, "usage_metadata", None) or {}
            self.ledger.record(CallRecord(role="chat", model=self.models.mode,
                                          input_tokens=int(usage.get("input_tokens", prompt.total_tokens)),
                                          output_tokens=int(usage.get("output_tokens",
                                                                      self.counter.count(str(ai.content)))),
                                          latency_ms=latency))
        from engine.core.tokens import content_text

        text = content_text(ai.content)
        self._log(user_id, session_id, "reply", {"tokens": self.counter.count(text)})
        return text

    # ------------------------------------------------------------------ the event
    def _event(self, user_id: str, session_id: str, *, event_no: int, mature_only: bool, log_session: str) -> None:
        cfg = self.config
        now = self.now()
        cursor = self.store.get_cursor(user_id, session_id, "extract")
        pending = self.store.messages(user_id, session_id=session_id, after_id=cursor)
        if mature_only:
            pending = _mature_prefix(pending, now, cfg.slice_gate_seconds)
        if not pending:
            self._log(user_id, log_session, "extract", {"session": session_id, "messages": 0, "records": 0},
                      event_no=event_no)
            return
        context_all = self.store.messages(user_id, session_id=session_id, upto_id=cursor)
        step = cfg.window - cfg.overlap
        new_records_total: list[int] = []
        corrections: list[int] = []
        themes: Counter[str] = Counter()
        for start in range(0, len(pending), step):
            chunk = pending[start:start + step]
            before = (context_all + pending[:start])[-cfg.overlap:] if cfg.overlap else []
            name = _profile_name(self.store.get_profile(user_id))
            inp = ExtractionInput(user_id=user_id, session_id=session_id,
                                  context=[_wm(m, name) for m in before], new=[_wm(m, name) for m in chunk])
            try:
                out: ExtractionOutput = self._call("extractor", self.models.extractor.extract, inp)
                with self.store.transaction():
                    recs, vecs = self._materialise(user_id, session_id, chunk, out, now)
                    stats = apply_updates(self.store, user_id=user_id, records=recs, vectors=vecs,
                                          decide=lambda ci: self._call("consolidator",
                                                                       self.models.consolidator.decide, ci),
                                          config=cfg, now=now, cosine_threshold=self.update_cosine)
                    self.store.set_cursor(user_id, session_id, "extract", chunk[-1].id)
            except MemlabError as exc:
                self._fail(user_id, log_session, "extract", chunk, exc, event_no)
                break
            except Exception as exc:  # a model or embedder failure must not lose messages
                self._fail(user_id, log_session, "extract", chunk, exc, event_no)
                break
            themes.update(r.theme for r in recs if r.theme)
            new_records_total.extend(stats.added)
            corrections.extend(x["successor"] for x in stats.superseded
                               if x["existing"] <= self.store.get_cursor(user_id, "", "induct"))
            self._log(user_id, log_session, "extract", {
                "session": session_id,
                "message_ids": [m.id for m in chunk],
                "context_ids": [m.id for m in before],
                "records": len(recs),
                "contents": [r.content for r in recs],
            }, event_no=event_no)
            self._log(user_id, log_session, "update", {"session": session_id, **stats.to_dict()}, event_no=event_no)
        if themes:
            self._tune(user_id, log_session, themes.most_common(1)[0][0], event_no)
        if corrections:
            # a record that superseded one the profile already holds corrects the profile now,
            # without waiting for the induction gate (the cursor does not move for this)
            self._apply_induction(user_id, log_session, event_no,
                                  self.store.get_records(user_id, corrections), move_cursor=False)
        self._induct(user_id, log_session, event_no)
        new_cursor = self.store.get_cursor(user_id, session_id, "extract")
        self._log(user_id, log_session, "truncate", {
            "session": session_id, "cursor": new_cursor,
            "still_pending": len(self.store.messages(user_id, session_id=session_id, after_id=new_cursor)),
        }, event_no=event_no)

    def _fail(self, user_id, session_id, step, chunk, exc, event_no) -> None:
        self._log(user_id, session_id, "error", {"step": step, "message_ids": [m.id for m in chunk],
                                                 "error": f"{type(exc).__name__}: {exc}",
                                                 "kept_pending": True}, event_no=event_no)
        self.recovery.on_failure(step=step, user_id=user_id, session_id=session_id,
                                 message_ids=[m.id for m in chunk], error=exc)

    def _materialise(self, user_id, session_id, chunk: Sequence[Message], out: ExtractionOutput, now: datetime,
                     *, embed: bool = True):
        from engine.core.timeparse import parse_time_label

        by_id = {m.id: m for m in chunk}
        recs: list[MemoryRecord] = []
        for x in out.records:
            if not x.content.strip():
                continue
            ids = tuple(i for i in x.source_ids if i in by_id) or (chunk[-1].id,)
            src_time = min(by_id[i].created_at for i in ids)
            span = None
            if x.time:
                try:
                    span = parse_time_label(x.time, src_time.tzinfo)
                except (ValueError, MemlabError):
                    span = None
            speaker = x.speaker or by_id[ids[0]].speaker
            recs.append(MemoryRecord(
                user_id=user_id, content=x.content.strip(), memory_type=x.memory_type,
                tags=tuple(dict.fromkeys(x.tags)) or ("fact",), theme=x.theme, time=span,
                location=x.location, reason=x.reason, purpose=x.purpose,
                keywords=tuple(dict.fromkeys(k for k in x.keywords if k.strip())),
                source=SourcePointer(session_id=session_id, message_ids=ids, speaker=speaker),
                created_at=now, last_reinforced_at=now, valid_from=src_time,
            ))
        vecs = self.embedder.embed_documents([record_text(r) for r in recs]) if recs and embed else []
        return recs, vecs

    def _tune(self, user_id: str, session_id: str, theme: str, event_no: int) -> None:
        cfg = self.config
        key = f"weights:{theme}"
        if not cfg.tune_weights:
            return
        if self.store.get_kv(user_id, key) is not None:
            self._log(user_id, session_id, "tune", {"theme": theme, "cached": True}, event_no=event_no)
            return
        samples = [r.content for r in self.store.records(user_id) if r.theme == theme][-8:]
        try:
            out = self._call("tuner", self.models.tuner.tune,
                             TuneInput(theme=theme, samples=samples, current=cfg.weights.to_dict()))
            out = TuneOutput.model_validate(out, from_attributes=True)  # junk output: a logged error
        except Exception as exc:
            self._log(user_id, session_id, "error", {"step": "tune", "error": f"{type(exc).__name__}: {exc}"},
                      event_no=event_no)
            return
        raw = {k: getattr(out, k) for k in ("alpha", "beta", "gamma", "delta", "w0", "w1", "w2")}
        problems = validate_weights(Weights(**{k: float(v) for k, v in raw.items()})) if all(
            isinstance(v, (int, float)) for v in raw.values()) else ["not numbers"]
        fixed, repairs = repair_weights(raw, fallback=cfg.weights.to_dict())
        weights = Weights(**fixed)
        self.store.set_kv(user_id, key, weights.to_dict())
        self._log(user_id, session_id, "tune", {"theme": theme, "cached": False, "weights": weights.to_dict(),
                                                "violations": problems, "repairs": repairs,
                                                "rationale": getattr(out, "rationale", "")}, event_no=event_no)

    def weights_for(self, user_id: str, theme: str | None) -> Weights:
        if self.config.tune_weights and theme:
            cached = self.store.get_kv(user_id, f"weights:{theme}")
            if cached:
                return Weights.from_dict(cached)
        return self.config.weights

    def _induct(self, user_id: str, session_id: str, event_no: int) -> None:
        cfg = self.config
        now = self.now()
        cursor = self.store.get_cursor(user_id, "", "induct")
        fresh = [r for r in self.store.records(user_id, include_invalid=True) if r.id > cursor]
        batch: list[MemoryRecord] = []
        for r in fresh:
            age = (now - (r.valid_from or r.created_at)).total_seconds()
            if maturity(age, tau_m=cfg.tau_m, c_m=cfg.c_m) < cfg.long_term_value:
                break  # in id order: stop at the first immature record, the cursor never skips it
            batch.append(r)
            if len(batch) >= MAX_INDUCTION_BATCH:
                break
        if batch:
            self._apply_induction(user_id, session_id, event_no, batch, move_cursor=True)

    def _apply_induction(self, user_id: str, session_id: str, event_no: int, batch: Sequence[MemoryRecord], *,
                         move_cursor: bool) -> None:
        """Ask the inducer about `batch`, apply its adds/removes, keep a history entry."""
        now = self.now()
        profile = self.store.get_profile(user_id)
        current = [r for r in batch if r.is_current]
        try:
            out = self._call("inducer", self.models.inducer.induct, InductionInput(
                profile={k: list(v) for k, v in profile.fields.items()},
                records=[record_view(r) for r in current]))
            out = InductionOutput.model_validate(out, from_attributes=True)  # junk output: a logged error
        except Exception as exc:
            self._log(user_id, session_id, "error", {"step": "induct", "error": f"{type(exc).__name__}: {exc}"},
                      event_no=event_no)
            return
        before = {k: tuple(v) for k, v in profile.fields.items()}
        after = {k: list(v) for k, v in before.items()}
        for key, vals in out.remove.items():
            after[key] = [v for v in after.get(key, []) if v not in vals]
        for key, vals in out.add.items():
            bucket = after.setdefault(key, [])
            for v in vals:
                if v.strip() and v not in bucket:
                    bucket.append(v)
        after_t = {k: tuple(v) for k, v in after.items() if v}
        new_profile = UserProfile(user_id=user_id, fields=after_t, version=profile.version + 1, updated_at=now)
        entry = ProfileHistoryEntry(user_id=user_id, version=new_profile.version, at=now, before=before,
                                    after=after_t, record_ids=tuple(r.id for r in batch))
        with self.store.transaction():
            self.store.save_profile(new_profile, entry)
            if move_cursor:
                self.store.set_cursor(user_id, "", "induct", batch[-1].id)
        self._log(user_id, session_id, "induct", {"record_ids": [r.id for r in batch], "version": new_profile.version,
                                                  "diff": entry.diff(), "correction": not move_cursor},
                  event_no=event_no)

    # ------------------------------------------------------------------ retrieval
    def parse_query(self, text: str, *, speaker: str | None = None, now: datetime | None = None) -> ParsedQuery:
        out = self._call("query_parser", self.models.query_parser.parse,
                         QueryInput(text=text, now=now or self.now(), speaker=speaker))
        return ParsedQuery.model_validate(out, from_attributes=True)

    def retrieve(self, user_id: str, query: str, *, session_id: str | None = None, config: MemoryConfig | None = None,
                 log: bool = False, event_no: int | None = None, speaker: str | None = None,
                 now: datetime | None = None) -> Retrieval:
        """Tri-path retrieval and forgetting-curve ranking inside the user's partition.

        Floor candidates (records carrying an `always_inject_types` tag) are the newest
        `candidate_k` current records per such tag, like any other path's top-k: every one of them
        is scored and logged, so taking all of them made a turn cost grow with the partition.
        """
        cfg = config or self.config
        now = now or self.now()
        parsed = self.parse_query(query, speaker=speaker, now=now)
        qvec = self.embedder.embed_query(parsed.text) if "dense" in cfg.paths else None
        floor_ids = sorted({r.id for tag in dict.fromkeys(cfg.always_inject_types) for r in self.store.records(
            user_id, tags_any=[tag], limit=cfg.candidate_k, newest_first=True)})
        results: PathResults = gather(self.store, user_id=user_id, query=parsed, query_vector=qvec, config=cfg,
                                      extra_ids=floor_ids, paths=cfg.paths)
        R = fuse(results, path_weights=cfg.path_weights, mode=cfg.fusion)
        candidates = candidate_inputs(results, R, now=now,
                                      count_tokens=lambda r: self.counter.count(render_record(r)))
        theme = _dominant_theme(results, R)
        weights = self.weights_for(user_id, theme)
        excluded = self._contradicted(user_id, session_id, results.records, now) if session_id and not \
            cfg.include_history else {}
        rows, picked = rank_candidates(candidates, config=cfg, weights=weights, excluded=excluded)
        replies: dict[int, str] = {}
        if parsed.needs_assistant:
            replies = self._assistant_replies(user_id, [results.records[i] for i in picked])
        event_id = None
        if log:
            ev = self._log(user_id, session_id or "", "retrieve", {
                "query": parsed.model_dump(mode="json"),
                "theme": theme,
                "weights": weights.to_dict(),
                "candidates": len(rows),
                "paths": {p: len(getattr(results, p)) for p in ("bm25", "dense", "dim")},
                "picked": picked,
                "assistant_recall": bool(parsed.needs_assistant),
            }, event_no=event_no)
            self.store.append_scores(ev.id, user_id, rows)
            event_id = ev.id
        return Retrieval(query=parsed, rows=rows, records=results.records, picked=picked, candidates=candidates,
                         weights=weights, at=now, event_id=event_id, assistant_replies=replies, excluded=excluded)

    def rescore(self, retrieval: Retrieval, config: MemoryConfig, weights: Weights | None = None) -> Retrieval:
        """What-if: re-rank the same candidates under another config, touching nothing stored."""
        rows, picked = rank_candidates(retrieval.candidates, config=config, weights=weights or config.weights,
                                       excluded=retrieval.excluded)
        return Retrieval(query=retrieval.query, rows=rows, records=retrieval.records, picked=picked,
                         candidates=retrieval.candidates, weights=weights or config.weights, at=retrieval.at,
                         event_id=None, assistant_replies=retrieval.assistant_replies, excluded=retrieval.excluded)

    def _contradicted(self, user_id: str, session_id: str, records: Mapping[int, MemoryRecord],
                      now: datetime) -> dict[int, str]:
        """Records the live window already contradicts, so they are not served as current.

        The session's pending user messages (said, not yet extracted) are read by the rule-based
        extractor and consolidator (local and free, whatever models are configured); a stored
        record they would SUPERSEDE at the next event is held back now.
        """
        from engine.core.text import normalize
        from engine.memory.update import _cos, keyword_set
        from engine.roles.scripted import ScriptedConsolidator, ScriptedExtractor

        pending = [m for m in self.pending(user_id, session_id) if m.role == "user"]
        if not pending or not records:
            return {}
        name = _profile_name(self.store.get_profile(user_id))
        out = ScriptedExtractor().extract(ExtractionInput(user_id=user_id, session_id=session_id,
                                                          new=[_wm(m, name) for m in pending]))
        fresh, _ = self._materialise(user_id, session_id, pending, out, now, embed=False)
        if not fresh:
            return {}
        judge = ScriptedConsolidator()
        threshold = self.update_cosine
        live_vecs = self.embedder.embed_documents([record_text(r) for r in fresh])
        stored = self.store.vectors(user_id, list(records))
        held: dict[int, str] = {}
        # text.jaccard's normalised key sets, made once per record instead of once per pair
        norm = lambda xs: {normalize(x).strip() for x in xs if x and x.strip()}  # noqa: E731
        old_keys: dict[int, set[str]] = {}
        for new, vec in zip(fresh, live_vecs, strict=True):
            keys = norm(keyword_set(new))
            for rid, old in records.items():
                if rid in held or not old.is_current or old.memory_type != new.memory_type:
                    continue
                if rid not in old_keys:
                    old_keys[rid] = norm(keyword_set(old))
                both = keys | old_keys[rid]
                if (len(keys & old_keys[rid]) / len(both) if both else 0.0) < self.config.update_jaccard \
                        or rid not in stored:
                    continue
                if _cos(vec, stored[rid]) < threshold:
                    continue
                decision = judge.decide(ConsolidationInput(new=record_view(new), existing=record_view(old), cosine=0.0))
                if decision.action == "SUPERSEDE":
                    held[rid] = f"contradicted by the live window: {decision.reason}"
        return held

    def _assistant_replies(self, user_id: str, records: Sequence[MemoryRecord]) -> dict[int, str]:
        """Dynamic assistant recall: the assistant reply that followed each record's source."""
        out: dict[int, str] = {}
        for r in records:
            if r.source is None or not r.source.message_ids:
                continue
            after = max(r.source.message_ids)
            for m in self.store.messages(user_id, session_id=r.source.session_id, after_id=after, limit=4):
                if m.role == "assistant":
                    out[r.id] = m.content
                    break
        return out

    # ------------------------------------------------------------------ views
    def records(self, user_id: str, *, include_invalid: bool = True) -> list[MemoryRecord]:
        return self.store.records(user_id, include_invalid=include_invalid)

    def profile(self, user_id: str) -> UserProfile:
        return self.store.get_profile(user_id)

    def events(self, **filters) -> list[Event]:
        return self.store.events(**filters)

    def ingest(self, user_id: str, session_id: str, messages: Sequence[Message | Mapping[str, Any]], *,
               extract: bool = True) -> IngestResult:
        """Batch ingest of a conversation that already happened (a documented public path).

        Each message is `{"role", "content", "at", "name"?}` (or a `Message`); `at` is when it was
        said (tz-aware; the clock's now when absent). The messages are archived in order, then one
        event runs over everything pending in the session, exactly the turn's event: extraction in
        overlapping windows, the dimension-aware update, tuning and induction. No chat call and no
        retrieval. `extract=False` only archives (the next event picks them up).
        """
        with self._lock:
            self._collect = []
            try:
                stored = []
                for m in messages:
                    if isinstance(m, Message):
                        stored.append(self.observe(user_id, session_id, m.role, m.content, name=m.name,
                                                   at=m.created_at, tool_call_id=m.tool_call_id))
                    else:
                        stored.append(self.observe(user_id, session_id, m.get("role", "user"), m["content"],
                                                   name=m.get("name"), at=m.get("at")))
                event_no = None
                if extract and self.pending(user_id, session_id):
                    event_no = self._new_event_no(user_id)
                    self._log(user_id, session_id, "session", {"ingest": session_id, "messages": len(stored)},
                              event_no=event_no)
                    self._event(user_id, session_id, event_no=event_no, mature_only=False, log_session=session_id)
                events = list(self._collect)
            finally:
                self._collect = None
        counts = {"records_added": 0, "merged": 0, "superseded": 0, "kept_both": 0, "errors": 0}
        for e in events:
            if e.kind == "update":
                counts["records_added"] += len(e.payload.get("added", []))
                for k in ("merged", "superseded", "kept_both"):
                    counts[k] += len(e.payload.get(k, []))
            elif e.kind == "error":
                counts["errors"] += 1
        return IngestResult(messages=stored, event_no=event_no, **counts)

    def forget_user(self, user_id: str) -> dict[str, int]:
        """Erase every trace of a user (messages, records, vectors, full text, profile, logs)."""
        with self._lock:
            for key in [k for k in self._turns if k[0] == user_id]:
                del self._turns[key]
            return self.store.forget_user(user_id)


def _mature_prefix(pending: Sequence[Message], now: datetime, gate_seconds: float) -> list[Message]:
    """The leading pending messages old enough to slice; stops at the first immature one so a
    cursor moved past them never skips a message."""
    n = 0
    while n < len(pending) and (now - pending[n].created_at).total_seconds() >= gate_seconds - 1e-9:
        n += 1
    return list(pending[:n])


def _wm(m: Message, name: str | None = None) -> WindowMessage:
    speaker = m.name or (name if m.role == "user" and name else m.role)
    return WindowMessage(id=m.id, role=m.role, speaker=speaker, content=m.content, at=m.created_at)


def _profile_name(profile: UserProfile) -> str | None:
    """The user's name from the profile's single-valued `name` field, if known."""
    return next(iter(profile.fields.get("name", ())), None)


def _dominant_theme(results: PathResults, R: Mapping[int, float]) -> str | None:
    scored = sorted(results.records.values(), key=lambda r: (-R.get(r.id, 0.0), r.id))
    for r in scored[:3]:
        if r.theme:
            return r.theme
    return None


def _check_id(value: str, what: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} must be a non-empty string, got {value!r}")
    if len(value) > 256:
        raise ConfigError(f"{what} is {len(value)} characters long; keep ids under 256 characters")
