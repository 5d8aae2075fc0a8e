"""Correcting memory by hand: edit, pin, invalidate, supersede, and undo the last of these.

Every hand edit keeps the rule that updates never delete. An edit writes a NEW record version
(re-embedded, its full-text row built from the new content) and supersedes the old one with it, as
the update step's SUPERSEDE does; invalidating a record supersedes it by itself (the store's
supersede: `invalid_at` set, `superseded_by` its own id, so "invalid exactly when superseded"
still holds and the check finds the successor); pinning adds the user tag "pinned" (a pinned
record holds a seat in every retrieval, like a safety record). Undo never revives a row either:
undoing an edit, an invalidation or a supersession writes a fresh copy of the record as it was
and supersedes the version the edit left current; undoing a pin restores the tags.

Each action appends one "user_edit" event (session "", the user's own log) with `action`,
`record_ids`, `before` and `after` (record dicts), written in the same transaction as the change.
Time comes only from the engine's clock. Records are read inside the user's partition only, so
an id of another user's record is refused exactly like an unknown id (`UnknownRecordError`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from engine.core.errors import NothingToUndoError, RecordEditError, UnknownRecordError
from engine.core.records import Event, MemoryRecord
from engine.core.text import content_tokens
from engine.memory.retrieval import record_text

__all__ = [
    "EDIT_KIND",
    "PINNED",
    "edit_history",
    "edit_record",
    "invalidate_record",
    "pin_record",
    "supersede_record",
    "undo_last_edit",
    "unpin_record",
]

EDIT_KIND = "user_edit"
PINNED = "pinned"
#: How many of the user's newest hand edits undo looks through for one not yet undone.
UNDO_DEPTH = 1000


class _Engine(Protocol):  # the part of MemoryEngine these functions use
    store: Any
    embedder: Any
    _lock: Any

    def now(self) -> Any: ...

    def log(self, user_id: str, session_id: str, kind: str, payload: Any, *, event_no: int | None = None) -> Event: ...


def _record(ctx: _Engine, user_id: str, record_id: Any, *, current: bool = True, action: str) -> MemoryRecord:
    try:
        rid = int(record_id)
    except (TypeError, ValueError):
        raise UnknownRecordError(f"cannot {action}: record id {record_id!r} is not an integer") from None
    found = ctx.store.get_records(user_id, [rid])
    if not found:
        raise UnknownRecordError(
            f"cannot {action}: record {rid} is not among user {user_id!r}'s records (an unknown id, or "
            "another user's record; edits never cross users) — pick an id from that user's records")
    rec = found[0]
    if current and not rec.is_current:
        raise RecordEditError(
            f"cannot {action}: record {rid} is no longer current (superseded by {rec.superseded_by} at "
            f"{rec.invalid_at.isoformat() if rec.invalid_at else '?'}); edit its current version instead")
    return rec


def _add(ctx: _Engine, record: MemoryRecord) -> MemoryRecord:
    vec = ctx.embedder.embed_documents([record_text(record)])[0]
    return ctx.store.add_records([record], [vec])[0]


def _log(ctx: _Engine, user_id: str, action: str, ids: list[int], before: MemoryRecord | None,
         after: MemoryRecord | None, **extra: Any) -> Event:
    return ctx.log(user_id, "", EDIT_KIND, {
        "action": action, "record_ids": ids,
        "before": before.to_dict() if before is not None else None,
        "after": after.to_dict() if after is not None else None, **extra})


def _fresh_copy(rec: MemoryRecord, now: Any, **changes: Any) -> MemoryRecord:
    """A new row carrying `rec`'s memory (dimensions, source, reinforcement), current from now."""
    return replace(rec, id=None, created_at=now, invalid_at=None, superseded_by=None, **changes)


def edit_record(ctx: _Engine, user_id: str, record_id: int, content: str) -> MemoryRecord:
    """A new version of the record with `content`, re-embedded, superseding the old one."""
    text = (content or "").strip()
    if not text:
        raise RecordEditError("cannot edit a record to empty content; invalidate it instead")
    with ctx._lock, ctx.store.transaction():
        old = _record(ctx, user_id, record_id, action="edit a record")
        if text == old.content:
            raise RecordEditError(f"record {old.id} already says {text!r}; nothing to edit")
        now = ctx.now()
        words = set(content_tokens(text))
        keywords = tuple(k for k in old.keywords if set(content_tokens(k)) & words)
        # a dimension the new text no longer states goes with the old text ("in Porto" edited
        # to "in Aveiro" must not keep location Porto)
        kept = {d: getattr(old, d) if getattr(old, d) and set(content_tokens(getattr(old, d))) <= words else None
                for d in ("location", "reason", "purpose")}
        new = _add(ctx, _fresh_copy(old, now, content=text, keywords=keywords, valid_from=now, **kept))
        ctx.store.supersede(user_id, old.id, new.id, now)
        _log(ctx, user_id, "edit", [old.id, new.id], old, new)
        return new


def _set_pinned(ctx: _Engine, user_id: str, record_id: int, pinned: bool) -> MemoryRecord:
    action = "pin" if pinned else "unpin"
    with ctx._lock, ctx.store.transaction():
        rec = _record(ctx, user_id, record_id, action=f"{action} a record")
        tags = tuple(dict.fromkeys([*rec.tags, PINNED])) if pinned else tuple(t for t in rec.tags if t != PINNED)
        if tags == rec.tags:
            raise RecordEditError(f"record {rec.id} is {'already' if pinned else 'not'} pinned")
        after = ctx.store.update_record(replace(rec, tags=tags))
        _log(ctx, user_id, action, [rec.id], rec, after)
        return after


def pin_record(ctx: _Engine, user_id: str, record_id: int) -> MemoryRecord:
    """Tag the record "pinned": it holds a seat in every retrieval while it is current."""
    return _set_pinned(ctx, user_id, record_id, True)


def unpin_record(ctx: _Engine, user_id: str, record_id: int) -> MemoryRecord:
    return _set_pinned(ctx, user_id, record_id, False)


def invalidate_record(ctx: _Engine, user_id: str, record_id: int) -> MemoryRecord:
    """Retract the record: invalid from now, superseded by itself (nothing replaces it)."""
    with ctx._lock, ctx.store.transaction():
        rec = _record(ctx, user_id, record_id, action="invalidate a record")
        ctx.store.supersede(user_id, rec.id, rec.id, ctx.now())
        after = ctx.store.get_records(user_id, [rec.id])[0]
        _log(ctx, user_id, "invalidate", [rec.id], rec, after)
        return after


def supersede_record(ctx: _Engine, user_id: str, old_id: int, new_id: int) -> MemoryRecord:
    """Say by hand that `new_id` replaces `old_id` (both the user's current records)."""
    with ctx._lock, ctx.store.transaction():
        old = _record(ctx, user_id, old_id, action="supersede a record")
        new = _record(ctx, user_id, new_id, action="supersede with a record")
        if old.id == new.id:
            raise RecordEditError(f"record {old.id} cannot supersede itself; use invalidate_record to retract it")
        ctx.store.supersede(user_id, old.id, new.id, ctx.now())
        after = ctx.store.get_records(user_id, [old.id])[0]
        _log(ctx, user_id, "supersede", [old.id, new.id], old, after)
        return after


def edit_history(ctx: _Engine, user_id: str, *, limit: int = UNDO_DEPTH) -> list[Event]:
    """The user's hand edits, newest first."""
    return ctx.store.events(user_id=user_id, kind=EDIT_KIND, newest_first=True, limit=limit)


def _last_undoable(ctx: _Engine, user_id: str) -> Event:
    undone: set[int] = set()
    for ev in edit_history(ctx, user_id):
        if ev.payload.get("action") == "undo":
            undone.add(int(ev.payload["undoes"]))
        elif ev.id not in undone:
            return ev
    raise NothingToUndoError(f"user {user_id!r} has no hand edit left to undo")


def _current_id(ctx: _Engine, user_id: str, rid: int) -> int:
    """Follow supersession from `rid` to the version current now (a later edit undone leaves a copy;
    a retraction ends the chain on itself)."""
    seen = {rid}
    for _ in range(UNDO_DEPTH):
        found = ctx.store.get_records(user_id, [rid])
        if not found or found[0].superseded_by is None or found[0].superseded_by in seen:
            return rid
        rid = int(found[0].superseded_by)
        seen.add(rid)
    return rid


def undo_last_edit(ctx: _Engine, user_id: str) -> Event:
    """Undo the user's newest hand edit not yet undone (repeat to walk further back); returns the
    "user_edit" event of the undo (action "undo", `undoes` the undone event's id)."""
    with ctx._lock, ctx.store.transaction():
        ev = _last_undoable(ctx, user_id)
        action, ids = ev.payload["action"], [int(i) for i in ev.payload["record_ids"]]
        before = MemoryRecord.from_dict(ev.payload["before"])
        now = ctx.now()
        if action in ("pin", "unpin"):
            rec = _record(ctx, user_id, _current_id(ctx, user_id, ids[0]), action=f"undo the {action}")
            after = ctx.store.update_record(replace(rec, tags=before.tags))
            written = [rec.id]
        else:
            if action == "edit":  # the version now current of what the edit wrote gives way to the old one
                current = _record(ctx, user_id, _current_id(ctx, user_id, ids[1]), action="undo the edit")
            restored = _add(ctx, _fresh_copy(before, now))
            if action == "edit":
                ctx.store.supersede(user_id, current.id, restored.id, now)
            after = restored
            written = [restored.id]
        return _log(ctx, user_id, "undo", written, ev.payload.get("after") and MemoryRecord.from_dict(
            ev.payload["after"]), after, undoes=ev.id, undone_action=action, undone_record_ids=ids)
