"""`MemoryEngine`: the memory of an agent, one turn at a time, under an injected clock.

A turn, in the design's order (each step a module of engine.memory):

1. stamp and append the user message (`observe`);
2. gate: maturity of the oldest pending message against `slice_value`, and the trigger (`gate`);
3. when both open, one event: extract in overlapping windows → update → tune → induct → truncate
   (`event`); a session's first turn first catches up on what earlier sessions left pending;
4. retrieve: parse the query, three paths, fusion, forgetting-curve ranking (`recall`, `retrieval`,
   `ranking`), with the live-window guard (`contradiction`);
5. inject: core → profile → records → date → window (`injection`, `window`);
6. reinforce what the turn used;

then one chat call. Steps 2-6 are `remember_and_recall`; later model calls of the same user turn
(tool calls, retries) reuse its `PreparedTurn` through `rebuild_prompt`. Every step appends to the
store's event log. The engine reads time only from its clock. Cursors are per (user, session) and
only move past messages that were extracted.
"""

from __future__ import annotations

import threading
import time as _time
from dataclasses import replace
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from engine.core.clock import Clock, VirtualClock, ensure_aware
from engine.core.config import MemoryConfig, Weights
from engine.core.errors import ClockError, ConfigError, ModelCallError
from engine.core.laps import Laps
from engine.core.lru import LRU
from engine.core.records import Event, MemoryRecord, Message, UserProfile
from engine.core.tokens import ApproxTokenCounter, TokenCounter, content_text
from engine.memory.context import Recovery
from engine.memory import editing, expansion
from engine.memory.contradiction import LiveRecords
from engine.memory.event import new_event_no, run_event
from engine.memory.gate import gate_status
from engine.memory.injection import BuiltPrompt, with_window
from engine.memory.log import EventLog
from engine.memory.recall import parse_query, rescore, retrieve
from engine.memory.reinforce import records_used_in_reply, reinforce
from engine.memory.retention import CompactionHints, compact_session
from engine.memory.results import (
    GateStatus,
    IngestResult,
    PreparedTurn,
    Retrieval,
    TurnResult,
    WorkingItem,
)
from engine.memory.turn import (
    catch_up,
    check_gate,
    expose,
    extract_overflow,
    fire_event,
    inject,
    last_user_message,
    leaving_window,
    live_window,
    recall,
)
from engine.memory.window import (
    fit_window,
    pending_messages,
    window_messages,
    working_items,
)
from engine.roles.bundle import Models
from engine.roles.embeddings import HashEmbeddings, embedder_name
from engine.roles.ledger import CallRecord, Ledger, record_chat_call, record_failed_call
from engine.roles.types import ParsedQuery
from engine.stores.base import Store, open_store

__all__ = [
    "MemoryEngine",
    "TurnResult",
    "PreparedTurn",
    "IngestResult",
    "Retrieval",
    "GateStatus",
    "WorkingItem",
    "Recovery",
    "KeepPendingRecovery",
    "DEFAULT_START",
]

DEFAULT_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
#: Sessions whose prepared turn an engine keeps for the agent loop's later model calls.
MAX_PREPARED = 1024
T = TypeVar("T")


class KeepPendingRecovery:
    """Offline default: nothing to do, the messages stay pending and the next event retries them."""

    def __init__(self) -> None:
        self.failures: list[dict[str, Any]] = []

    def on_failure(self, *, step, user_id, session_id, message_ids, error) -> None:
        self.failures.append({"step": step, "user_id": user_id, "session_id": session_id,
                              "message_ids": list(message_ids), "error": str(error)})


class MemoryEngine:
    """The memory engine. ARCHITECTURE.md maps the facade and the turn."""

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
        if store is None or isinstance(store, str):
            store = open_store(store, dim=int(getattr(self.embedder, "dim", 384)),
                               embedder_name=embedder_name(self.embedder))
        self.store: Store = store
        self.clock: Clock = clock or VirtualClock(DEFAULT_START)
        self.ledger = ledger or Ledger()
        self.models = (models or Models.scripted()).bind_ledger(self.ledger)
        self.counter = token_counter or ApproxTokenCounter()
        self.recovery = recovery or KeepPendingRecovery()
        self.events_log = EventLog(self.store)
        self._compaction = CompactionHints()
        self.live_records = LiveRecords()
        self.last_prompt: BuiltPrompt | None = None
        self.last_retrieval: Retrieval | None = None
        self._lock = threading.RLock()
        self._last_now: datetime | None = None
        self._prepared: LRU[tuple[str, str], PreparedTurn] = LRU(MAX_PREPARED)

    # ------------------------------------------------------------------ the turn
    def turn(self, user_id: str, session_id: str, text: str, *, name: str | None = None) -> TurnResult:
        """One full turn: stamp the user message, run the memory steps, call the chat model once."""
        with self._lock, self.events_log.collecting() as events:
            laps = Laps()
            user_msg = self.observe(user_id, session_id, "user", text, name=name)
            laps.lap("observe")
            prepared = self.remember_and_recall(user_id, session_id)
            laps.add(prepared.stages)
            laps.skip()
            reply, reply_tokens = self._chat(user_id, session_id, prepared.prompt)
            laps.lap("chat")
            # the reply's log entry lands with the assistant message and its stamp (one commit); the
            # reinforcement of the records it used commits on its own, after the message is safe
            with self.store.transaction():
                self.log(user_id, session_id, "reply", {"tokens": reply_tokens})
                reply_msg = self.observe(user_id, session_id, "assistant", reply)
            laps.lap("reply")
            self.reinforce_used(prepared, reply)
            laps.lap("reinforce")
        return TurnResult(reply=reply, prompt=prepared.prompt, event_fired=prepared.event_fired,
                          event_no=prepared.event_no, retrieval=prepared.retrieval, events=list(events),
                          user_message=user_msg, reply_message=reply_msg, stages=laps.ms)

    def remember_and_recall(self, user_id: str, session_id: str) -> PreparedTurn:
        """Steps 2-6 for the session's next model call: gate, maybe an event (extraction and
        update write memory), retrieval, injection, reinforcement. Run it once per user message."""
        with self._lock:
            laps = Laps()
            turn = self.events_log.next_turn(user_id, session_id)
            compact_session(self.store, user_id, session_id, turn=turn, full_turns=self.config.log_full_turns,
                            hints=self._compaction)
            laps.lap("compact")
            event = catch_up(self, user_id, session_id)
            laps.lap("catch_up")
            # one read of the live window, shared by the steps; read again only after an event
            view = live_window(self, user_id, session_id)
            laps.lap("window")
            fires = check_gate(self, user_id, session_id, view).will_fire
            laps.lap("gate")
            if fires:
                event = fire_event(self, user_id, session_id)
                view = live_window(self, user_id, session_id)
                laps.lap("event")
            if self.config.overflow_extract and (leaving := leaving_window(self, user_id, session_id, view)):
                event = extract_overflow(self, user_id, session_id, event, leaving)
                view = live_window(self, user_id, session_id)
                laps.lap("event")
            query = last_user_message(self.store, user_id, session_id, view)
            picks = recall(self, self.live_records, user_id, session_id, query, event, view)
            laps.lap("recall")
            with self.store.transaction():  # injection and exposure: one commit
                prompt = inject(self, user_id, session_id, picks, event, view)
                expose(self, user_id, session_id, picks.records, event)
            laps.lap("inject")
            if picks.retrieval is not None or self.config.retrieval_policy == "per_turn":
                self.last_retrieval = picks.retrieval
            self.last_prompt = prompt
            return PreparedTurn(user_id=user_id, session_id=session_id, prompt=prompt, event=event,
                                retrieval=picks.retrieval, user_message_id=query.id if query else None,
                                question=query.content if query else None, stages=laps.ms)

    def reinforce_used(self, prepared: PreparedTurn, reply: str) -> list[int]:
        """Step 6 after the reply: strengthen the injected records the reply used (once per session)."""
        if self.config.reinforce_on != "use" or not prepared.prompt.record_ids or not reply:
            return []
        with self._lock:
            used = records_used_in_reply(self.store.get_records(prepared.user_id, list(prepared.prompt.record_ids)),
                                         reply, question=prepared.question or "")
            return reinforce(self, prepared.user_id, prepared.session_id, used, cause="used in reply",
                             event_no=prepared.event_no)

    def prepare_call(self, user_id: str, session_id: str) -> PreparedTurn:
        """For an agent's model call: the first call after a new user message runs the memory steps
        (`remember_and_recall`); later calls of the same user turn (tool calls, retries) reuse them,
        with the window as it is now. One user message, one gate, event, retrieval, reinforcement."""
        with self._lock:
            key = (user_id, session_id)
            last = last_user_message(self.store, user_id, session_id)
            cached = self._prepared.peek(key)
            if cached is not None and last is not None and cached.user_message_id == last.id:
                prompt = self.rebuild_prompt(cached)
                self.log(user_id, session_id, "reuse", {"user_message_id": last.id, "record_ids": list(prompt.record_ids),
                                                        "window_messages": len(prompt.messages) - 1},
                         event_no=cached.event_no)
                return replace(cached, prompt=prompt)
            prepared = self.remember_and_recall(user_id, session_id)
            self._prepared.put(key, prepared)
            return prepared

    def rebuild_prompt(self, prepared: PreparedTurn) -> BuiltPrompt:
        """The same memory for a later model call of the same user turn, with the window as it is
        now (tool calls and results included): no gate, no event, no retrieval, no reinforcement."""
        with self._lock:
            window, _ = window_messages(self.store, prepared.user_id, prepared.session_id,
                                        keep_recent=self.config.keep_recent)
            prompt = with_window(prepared.prompt, fit_window(window, self.config.context_budget, self.counter),
                                 counter=self.counter)
            self.last_prompt = prompt
            return prompt

    def chat(self, user_id: str, session_id: str, prompt: BuiltPrompt) -> str:
        """The model call: once per turn, never retried here (a failure is logged and raised)."""
        text, tokens = self._chat(user_id, session_id, prompt)
        self.log(user_id, session_id, "reply", {"tokens": tokens})
        return text

    def _chat(self, user_id: str, session_id: str, prompt: BuiltPrompt) -> tuple[str, int]:
        """`chat` without its "reply" entry: the reply's text and tokens (the turn logs the entry
        with the reply's other writes)."""
        from langchain_core.messages import (
            AIMessage,
            HumanMessage,
            SystemMessage,
            ToolMessage,
        )

        kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
        msgs = [ToolMessage(content=m["content"], tool_call_id=m.get("tool_call_id") or "tool") if m["role"] == "tool"
                else kinds[m["role"]](content=m["content"]) for m in prompt.messages]
        t0 = _time.perf_counter()
        try:
            ai = self.models.chat.invoke(msgs)
        except Exception as exc:
            self.log(user_id, session_id, "error", {"step": "chat", "error": f"{type(exc).__name__}: {exc}"})
            record_failed_call(self.ledger, "chat", exc, (_time.perf_counter() - t0) * 1000, model=self.models.mode,
                               input_tokens=prompt.total_tokens)
            raise ModelCallError(f"the chat model failed: {exc}; the user message is stored, retry the turn") from exc
        record_chat_call(self.ledger, "chat", ai, (_time.perf_counter() - t0) * 1000, self.models.settings,
                         mode=self.models.mode, fallback_input_tokens=prompt.total_tokens, counter=self.counter)
        text = content_text(ai.content)
        return text, self.counter.count(text)

    # ------------------------------------------------------------------ messages and batch ingest
    def observe(self, user_id: str, session_id: str, role: str, content: Any, *, name: str | None = None,
                at: datetime | None = None, tool_call_id: str | None = None) -> Message:
        """Step 1: stamp (clock time unless the message already has a time) and archive a message."""
        _check_id(user_id, "user_id")
        _check_id(session_id, "session_id")
        text = content_text(content)
        stamp = ensure_aware(at, what="message time") if at is not None else self.now()
        with self._lock, self.store.transaction():  # the message and its stamp land together (one commit)
            msg = self.store.add_message(Message(user_id=user_id, session_id=session_id, role=role, content=text,
                                                 created_at=stamp, name=name, tool_call_id=tool_call_id))
            self.log(user_id, session_id, "stamp", {"message_id": msg.id, "role": role, "at": stamp.isoformat(),
                                                    "tokens": self.counter.count(text),
                                                    "stamped_by": "caller" if at is not None else "clock"})
        return msg

    def ingest(self, user_id: str, session_id: str, messages: Sequence[Message | Mapping[str, Any]], *,
               extract: bool = True) -> IngestResult:
        """Batch ingest of a conversation that already happened (a documented public path).

        Each message is `{"role", "content", "at", "name"?}` (or a `Message`); `at` is when it was
        said (tz-aware; the clock's now when absent). The messages are archived in order, in one
        transaction: all of them or, when one is refused (a naive time, a bad id), none, so the batch
        can be sent again whole. Then one event runs over everything pending in the session, exactly
        the turn's event: extraction in overlapping windows, the dimension-aware update, tuning and
        induction. No chat call and no retrieval. `extract=False` only archives (the next event
        picks them up).
        """
        with self._lock, self.events_log.collecting() as events:
            with self.store.transaction():  # one commit for the batch, not one a message
                stored = self._archive(user_id, session_id, messages)
            event_no = None
            if extract and pending_messages(self.store, user_id, session_id):
                event_no = new_event_no(self, user_id)
                self.log(user_id, session_id, "session", {"ingest": session_id, "messages": len(stored)},
                         event_no=event_no)
                run_event(self, user_id, session_id, event_no=event_no, mature_only=False, log_session=session_id)
        counts = {"records_added": 0, "merged": 0, "superseded": 0, "kept_both": 0, "errors": 0}
        for e in events:
            if e.kind == "update":
                counts["records_added"] += len(e.payload.get("added", []))
                for k in ("merged", "superseded", "kept_both"):
                    counts[k] += len(e.payload.get(k, []))
            elif e.kind == "error":
                counts["errors"] += 1
        return IngestResult(messages=stored, event_no=event_no, **counts)

    def _archive(self, user_id: str, session_id: str, messages: Sequence[Message | Mapping[str, Any]]) -> list[Message]:
        """`observe` each message of a batch, in order."""
        return [self.observe(user_id, session_id, m.role, m.content, name=m.name, at=m.created_at,
                             tool_call_id=m.tool_call_id) if isinstance(m, Message)
                else self.observe(user_id, session_id, m.get("role", "user"), m["content"], name=m.get("name"),
                                  at=m.get("at")) for m in messages]

    # ------------------------------------------------------------------ retrieval
    def parse_query(self, text: str, *, speaker: str | None = None, now: datetime | None = None) -> ParsedQuery:
        return parse_query(self, text, speaker=speaker, now=now or self.now())

    def retrieve(self, user_id: str, query: str, *, session_id: str | None = None, config: MemoryConfig | None = None,
                 log: bool = False, event_no: int | None = None, speaker: str | None = None,
                 now: datetime | None = None) -> Retrieval:
        """Retrieval exactly as a turn runs it (a turn passes its session, `log=True` and the speaker)."""
        return retrieve(self, self.live_records, user_id, query, session_id=session_id, config=config or self.config,
                        now=now or self.now(), speaker=speaker, log=log, event_no=event_no)

    def rescore(self, retrieval: Retrieval, config: MemoryConfig, weights: Weights | None = None) -> Retrieval:
        """What-if: re-rank the same candidates under another config, touching nothing stored."""
        return rescore(retrieval, config, weights)

    # ------------------------------------------------------------------ views
    def pending(self, user_id: str, session_id: str) -> list[Message]:
        """The session's messages said but not yet extracted."""
        return pending_messages(self.store, user_id, session_id)

    def working_memory(self, user_id: str, session_id: str) -> list[WorkingItem]:
        """The live window: pending messages plus the last `keep_recent`, each with age and maturity."""
        messages, cursor = window_messages(self.store, user_id, session_id, keep_recent=self.config.keep_recent)
        return working_items(messages, cursor=cursor, now=self.now(), config=self.config)

    def gate_status(self, user_id: str, session_id: str, *, incoming: bool = False) -> GateStatus:
        """The gate's numbers now; `incoming=True` answers for the next turn, as if a user message
        arrived now (what the lab shows before you send one)."""
        now = self.now()
        pending = self.pending(user_id, session_id)
        if incoming:
            pending = [*pending, Message(user_id=user_id, session_id=session_id, role="user", content="",
                                         created_at=now)]
        return gate_status(pending, now=now, config=self.config, counter=self.counter,
                           has_memory=self.store.count_records(user_id, include_invalid=False) > 0)

    def records(self, user_id: str, *, include_invalid: bool = True) -> list[MemoryRecord]:
        return self.store.records(user_id, include_invalid=include_invalid)

    def profile(self, user_id: str) -> UserProfile:
        return self.store.get_profile(user_id)

    def events(self, **filters) -> list[Event]:
        return self.store.events(**filters)

    # ------------------------------------------------------------------ hand edits (engine.memory.editing)
    def edit_record(self, user_id: str, record_id: int, content: str) -> MemoryRecord:
        """Correct a record by hand: a new, re-embedded version supersedes it (nothing is deleted)."""
        return editing.edit_record(self, user_id, record_id, content)

    def pin_record(self, user_id: str, record_id: int) -> MemoryRecord:
        """Pin a record: it holds a seat in every retrieval, like a safety record."""
        return editing.pin_record(self, user_id, record_id)

    def unpin_record(self, user_id: str, record_id: int) -> MemoryRecord:
        return editing.unpin_record(self, user_id, record_id)

    def invalidate_record(self, user_id: str, record_id: int) -> MemoryRecord:
        """Retract a record from now on (it stays, invalid, superseded by itself)."""
        return editing.invalidate_record(self, user_id, record_id)

    def supersede_record(self, user_id: str, old_id: int, new_id: int) -> MemoryRecord:
        """Say by hand that record `new_id` replaces record `old_id`."""
        return editing.supersede_record(self, user_id, old_id, new_id)

    def undo_last_edit(self, user_id: str) -> Event:
        """Undo the user's newest hand edit not yet undone; returns the undo's "user_edit" event."""
        return editing.undo_last_edit(self, user_id)

    def forget_user(self, user_id: str) -> dict[str, int]:
        """Erase every trace of a user (messages, records, vectors, full text, profile, logs)."""
        with self._lock:
            self.events_log.forget_user(user_id)
            self._compaction.forget_user(user_id)
            self._prepared.drop(lambda k: k[0] == user_id)
            self.live_records.forget_user(user_id)
            expansion.forget_user(user_id)  # the in-process message vectors of message candidates
            return self.store.forget_user(user_id)

    # ------------------------------------------------------------------ config, time, log, calls
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

    def log(self, user_id: str, session_id: str, kind: str, payload: Mapping[str, Any], *,
            event_no: int | None = None) -> Event:
        """Append one entry to the event log (stamped by the clock, numbered by the session's turn)."""
        return self.events_log.append(user_id, session_id, kind, payload, at=self.now(), event_no=event_no)

    def call_role(self, role: str, fn: Callable[[Any], T], inp: Any) -> T:
        """Call a model role; a role that does not record its own call (scripted) is recorded here
        with approximate token counts. A rule-based role (`model_calls = False`) is no model call."""
        if getattr(getattr(fn, "__self__", None), "model_calls", True) is False:
            return fn(inp)
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
        if self.ledger.mark() == mark:
            self.ledger.record(CallRecord(role=role, model=self.models.mode, input_tokens=self._approx(inp),
                                          output_tokens=self._approx(out),
                                          latency_ms=(_time.perf_counter() - t0) * 1000))
        return out

    def _approx(self, obj: Any) -> int:
        return self.counter.count(obj.model_dump_json() if hasattr(obj, "model_dump_json") else str(obj))


def _check_id(value: str, what: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} must be a non-empty string, got {value!r}")
    if len(value) > 256:
        raise ConfigError(f"{what} is {len(value)} characters long; keep ids under 256 characters")
