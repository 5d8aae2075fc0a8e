"""The steps of one turn after the user message is stamped, in the design's order.

`MemoryEngine.remember_and_recall` calls these one after another: catch up (a new session first
extracts what earlier sessions left pending) → gate → event → recall (by the retrieval policy) →
inject → reinforce. Each reads a bounded number of rows: the session's tail and what is pending,
never the whole session or the user's whole history.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.records import MemoryRecord, Message
from engine.memory.context import EngineContext
from engine.memory.contradiction import LiveRecords, held_back
from engine.memory.event import new_event_no, run_event
from engine.memory.gate import gate_status
from engine.memory.injection import BuiltPrompt, build_prompt
from engine.memory.profile import profile_for_prompt
from engine.memory.recall import retrieve
from engine.memory.reinforce import log_exposure, reinforce
from engine.memory.results import EventOutcome, GateStatus, Retrieval
from engine.memory.window import (
    WindowView,
    fit_window,
    pending_messages,
    read_window,
)
from engine.stores.base import Store

__all__ = ["Recall", "live_window", "catch_up", "check_gate", "fire_event", "leaving_window", "extract_overflow", "last_user_message",
           "recall", "inject", "expose"]


@dataclass(frozen=True, kw_only=True)
class Recall:
    """What a turn will inject: the retrieval when one ran, the records, and what was held back."""

    retrieval: Retrieval | None
    records: list[MemoryRecord]
    replies: dict[int, str] = field(default_factory=dict)
    excluded: dict[int, str] = field(default_factory=dict)
    candidates: dict[int, MemoryRecord] = field(default_factory=dict)


def live_window(ctx: EngineContext, user_id: str, session_id: str) -> WindowView:
    """The session's live window now (one bounded read the turn's steps share)."""
    return read_window(ctx.store, user_id, session_id, keep_recent=ctx.config.keep_recent)


def catch_up(ctx: EngineContext, user_id: str, session_id: str) -> EventOutcome | None:
    """On a session's first turn, one event over what the user's other sessions left pending."""
    key = f"session-started:{session_id}"
    if ctx.store.get_kv(user_id, key) is not None:
        return None
    ctx.store.set_kv(user_id, key, ctx.now().isoformat())
    leftovers = [s for s in ctx.store.pending_sessions(user_id) if s != session_id]
    if not leftovers:
        return None
    event_no = new_event_no(ctx, user_id)
    ctx.log(user_id, session_id, "session", {"new_session": session_id, "catch_up": leftovers}, event_no=event_no)
    outcomes = [run_event(ctx, user_id, s, event_no=event_no, mature_only=False, log_session=session_id)
                for s in leftovers]
    return EventOutcome(event_no=event_no, added=tuple(i for o in outcomes for i in o.added),
                        superseded=tuple(i for o in outcomes for i in o.superseded),
                        merged=tuple(i for o in outcomes for i in o.merged), errors=sum(o.errors for o in outcomes))


def check_gate(ctx: EngineContext, user_id: str, session_id: str, view: WindowView | None = None) -> GateStatus:
    """The gate for this session now, logged with its numbers."""
    pending = list(view.pending) if view is not None else pending_messages(ctx.store, user_id, session_id)
    gate = gate_status(pending, now=ctx.now(), config=ctx.config, counter=ctx.counter,
                       has_memory=ctx.store.count_records(user_id, include_invalid=False) > 0)
    ctx.log(user_id, session_id, "gate", gate.to_dict())
    return gate


def fire_event(ctx: EngineContext, user_id: str, session_id: str) -> EventOutcome:
    """The gate opened: one event over the session's mature pending messages."""
    return run_event(ctx, user_id, session_id, event_no=new_event_no(ctx, user_id), mature_only=True,
                     log_session=session_id)


def leaving_window(ctx: EngineContext, user_id: str, session_id: str, view: WindowView | None = None) -> list[Message]:
    """Pending messages to extract now so that none leaves the window unseen by memory.

    Empty while every pending message still fits the budgeted window. Once one would drop out,
    the oldest pending messages are taken until the pending rest fits within `overflow_keep` of
    the context budget, so one overflow event covers several turns instead of one message each.
    """
    cfg = ctx.config
    view = view if view is not None else read_window(ctx.store, user_id, session_id, keep_recent=cfg.keep_recent)
    pending = list(view.pending)
    shown = view.fitted(cfg.context_budget, ctx.counter)
    if not pending or not shown or pending[0].id >= shown[0].id:
        return []
    keep = fit_window(pending, max(1, int(cfg.context_budget * cfg.overflow_keep)), ctx.counter)
    first_kept = keep[0].id if keep else None
    return [m for m in pending if first_kept is None or m.id < first_kept]


def extract_overflow(ctx: EngineContext, user_id: str, session_id: str, event: EventOutcome | None,
                     leaving: list[Message]) -> EventOutcome:
    """No blind spot: extract the pending messages about to leave the window now, whatever the
    maturity gate says (an event opened by window overflow, logged as such)."""
    event_no = event.event_no if event else new_event_no(ctx, user_id)
    ctx.log(user_id, session_id, "overflow", {"message_ids": [m.id for m in leaving],
                                              "reason": "pending messages would leave the budgeted window"},
            event_no=event_no)
    done = run_event(ctx, user_id, session_id, event_no=event_no, mature_only=False, log_session=session_id,
                     upto_id=leaving[-1].id)
    if event is None:
        return done
    return EventOutcome(event_no=event_no, added=event.added + done.added, superseded=event.superseded + done.superseded,
                        merged=event.merged + done.merged, errors=event.errors + done.errors)


def last_user_message(store: Store, user_id: str, session_id: str, view: WindowView | None = None) -> Message | None:
    if view is not None and (found_here := view.last_user()) is not None:
        return found_here
    found = store.messages(user_id, session_id=session_id, newest_first=True, limit=1, roles=("user",))
    return found[0] if found else None


def recall(ctx: EngineContext, live: LiveRecords, user_id: str, session_id: str, query: Message | None,
           event: EventOutcome | None, view: WindowView | None = None) -> Recall:
    """What to inject under the retrieval policy.

    `per_turn`: retrieve for the current user message. `on_event` (the first seed's): retrieve
    when an event fired (or on a session's first turn) and keep the picks for the following turns,
    so the system prompt stays stable for prompt caching; kept picks still pass the live-window
    guard, so a record the user just contradicted is not served.
    """
    cfg, store = ctx.config, ctx.store
    event_no = event.event_no if event else None
    key = f"on-event-picked:{session_id}"
    stored = store.get_kv(user_id, key) if cfg.retrieval_policy == "on_event" and event is None else None
    if stored is None:
        retrieval = _turn_retrieve(ctx, live, user_id, session_id, query, event_no,
                                   None if view is None else list(view.pending)) if query is not None else None
        picked = retrieval.picked if retrieval else []
        if cfg.retrieval_policy == "on_event":
            store.set_kv(user_id, key, picked)
        # the picks as the retrieval read them (nothing was written since), in id order as a read gives them
        have = retrieval.records if retrieval else {}
        records = ([have[i] for i in sorted(picked)] if all(i in have for i in picked)
                   else store.get_records(user_id, picked))
        records = [r for r in records if r.is_current or cfg.include_history]
        return Recall(retrieval=retrieval, records=records, replies=retrieval.assistant_replies if retrieval else {},
                      excluded=retrieval.excluded if retrieval else {},
                      candidates=retrieval.records if retrieval else {})
    kept = {r.id: r for r in store.get_records(user_id, [int(i) for i in stored]) if r.is_current or cfg.include_history}
    excluded = {} if cfg.include_history else held_back(
        ctx, live, user_id, session_id, kept,
        list(view.pending) if view is not None else pending_messages(store, user_id, session_id), now=ctx.now())
    return Recall(retrieval=None, records=[r for i, r in kept.items() if i not in excluded], excluded=excluded,
                  candidates=kept)


def _turn_retrieve(ctx: EngineContext, live: LiveRecords, user_id: str, session_id: str, query: Message,
                   event_no: int | None, pending: list[Message] | None = None) -> Retrieval | None:
    """A turn's retrieval; a failing query parser or embedder costs the memory, not the reply."""
    from engine.core.errors import MemlabUsageError, StoreError

    try:
        return retrieve(ctx, live, user_id, query.content, session_id=session_id, config=ctx.config, now=ctx.now(),
                        speaker=query.name, log=True, event_no=event_no, pending=pending)
    except (MemlabUsageError, StoreError):
        raise
    except Exception as exc:
        ctx.log(user_id, session_id, "error", {"step": "retrieve", "error": f"{type(exc).__name__}: {exc}",
                                              "served_without_memory": True}, event_no=event_no)
        return None


def inject(ctx: EngineContext, user_id: str, session_id: str, picks: Recall, event: EventOutcome | None,
           view: WindowView | None = None) -> BuiltPrompt:
    """Step 5: core → profile → records → date → window, logged with its token counts."""
    cfg, store = ctx.config, ctx.store
    if view is None:
        view = read_window(store, user_id, session_id, keep_recent=cfg.keep_recent)
    window = view.fitted(cfg.context_budget, ctx.counter)
    profile, held_values, dates, left_out = profile_for_prompt(store, store.get_profile(user_id), picks.excluded,
                                                               picks.candidates, budget=cfg.profile_budget,
                                                               counter=ctx.counter)
    prompt = build_prompt(core=cfg.core_prompt, profile=profile, records=picks.records, window=window,
                          counter=ctx.counter, assistant_replies=picks.replies, now=ctx.now(), value_dates=dates)
    ctx.log(user_id, session_id, "inject", {
        "record_ids": list(prompt.record_ids),
        "tokens": {p.name: p.tokens for p in prompt.parts},
        "cacheable_prefix_tokens": sum(p.tokens for p in prompt.parts if p.cacheable),
        "payload_tokens": prompt.payload_tokens,
        "window_messages": len(window),
        "assistant_recall": sorted(picks.replies),
        "profile_values_held": held_values,
        **({"profile_values_left_out": left_out} if left_out else {}),  # past profile_budget: stored, not shown
    }, event_no=event.event_no if event else None)
    return prompt


def expose(ctx: EngineContext, user_id: str, session_id: str, records: list[MemoryRecord],
           event: EventOutcome | None) -> None:
    """Step 6 at injection time: under the first seed's rule every injection reinforces; by default
    injection is only logged as exposure and the reply decides (`MemoryEngine.reinforce_used`)."""
    event_no = event.event_no if event else None
    if ctx.config.reinforce_on == "injection":
        reinforce(ctx, user_id, session_id, records, cause="injected", event_no=event_no)
    else:
        log_exposure(ctx, user_id, session_id, [r.id for r in records], event_no=event_no)
