"""The long-term profile: induction from mature records, corrections, and the profile a prompt shows.

Induction reads the records past the per-user induction cursor, in id order, in bounded batches;
it stops at the first record not yet mature enough (`long_term_value`), so the cursor never skips
one. A record that supersedes one the profile already holds corrects the profile in the same
event, without waiting for the gate (the cursor does not move for that).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from engine.core.attributes import attribute_of
from engine.core.forgetting import maturity
from engine.core.records import MemoryRecord, ProfileHistoryEntry, UserProfile
from engine.memory.context import EngineContext
from engine.memory.update import record_view
from engine.roles.types import InductionInput, InductionOutput

__all__ = ["induct", "correct_profile", "apply_induction", "profile_for_prompt", "MAX_INDUCTION_BATCH"]

MAX_INDUCTION_BATCH = 20


def induct(ctx: EngineContext, user_id: str, session_id: str, *, event_no: int) -> None:
    """Induct the next batch of mature records past the cursor into the profile."""
    cfg, now = ctx.config, ctx.now()
    cursor = ctx.store.get_cursor(user_id, "", "induct")
    fresh = ctx.store.records(user_id, include_invalid=True, after_id=cursor, limit=MAX_INDUCTION_BATCH)
    batch: list[MemoryRecord] = []
    for r in fresh:
        age = (now - (r.valid_from or r.created_at)).total_seconds()
        if maturity(age, tau_m=cfg.tau_m, c_m=cfg.c_m) < cfg.long_term_value:
            break  # in id order: stop at the first immature record, the cursor never skips it
        batch.append(r)
    if batch:
        apply_induction(ctx, user_id, session_id, batch, event_no=event_no, move_cursor=True)


def correct_profile(ctx: EngineContext, user_id: str, session_id: str, successor_ids: Sequence[int], *,
                    event_no: int) -> None:
    """Re-induct records that superseded ones the profile already holds (no cursor move)."""
    apply_induction(ctx, user_id, session_id, ctx.store.get_records(user_id, successor_ids), event_no=event_no,
                    move_cursor=False)


def apply_induction(ctx: EngineContext, user_id: str, session_id: str, batch: Sequence[MemoryRecord], *,
                    event_no: int, move_cursor: bool) -> None:
    """Ask the inducer about `batch`, apply its adds/removes, keep a history entry."""
    store, now = ctx.store, ctx.now()
    profile = store.get_profile(user_id)
    current = [r for r in batch if r.is_current]
    try:
        out = ctx.call_role("inducer", ctx.models.inducer.induct, InductionInput(
            profile={k: list(v) for k, v in profile.fields.items()}, records=[record_view(r) for r in current]))
        out = InductionOutput.model_validate(out, from_attributes=True)  # junk output: a logged error
    except Exception as exc:
        ctx.log(user_id, session_id, "error", {"step": "induct", "error": f"{type(exc).__name__}: {exc}"},
                event_no=event_no)
        return
    before = {k: tuple(v) for k, v in profile.fields.items()}
    after = _applied(before, add=out.add, remove=out.remove)
    new_profile = UserProfile(user_id=user_id, fields=after, version=profile.version + 1, updated_at=now)
    entry = ProfileHistoryEntry(user_id=user_id, version=new_profile.version, at=now, before=before,
                                after=after, record_ids=tuple(r.id for r in batch))
    with store.transaction():
        store.save_profile(new_profile, entry)
        if move_cursor:
            store.set_cursor(user_id, "", "induct", batch[-1].id)
    ctx.log(user_id, session_id, "induct", {"record_ids": [r.id for r in batch], "version": new_profile.version,
                                           "diff": entry.diff(), "correction": not move_cursor}, event_no=event_no)


def _applied(before: Mapping[str, tuple[str, ...]], *, add: Mapping[str, Sequence[str]],
             remove: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    after = {k: list(v) for k, v in before.items()}
    for key, vals in remove.items():
        after[key] = [v for v in after.get(key, []) if v not in vals]
    for key, vals in add.items():
        bucket = after.setdefault(key, [])
        for v in vals:
            if v.strip() and v not in bucket:
                bucket.append(v)
    return {k: tuple(v) for k, v in after.items() if v}


def profile_for_prompt(profile: UserProfile, excluded: Mapping[int, str],
                       records: Mapping[int, MemoryRecord]) -> tuple[UserProfile, list[str]]:
    """The stored profile minus values the live window contradicts (not written back).

    A value goes when it states the old value of an attribute whose record the live window
    supersedes ("lives in Chengdu" while the user just said they moved); the next event's
    supersede and induction correct the stored profile itself.
    """
    if not excluded:
        return profile, []
    stale = []
    for rid in excluded:
        rec = records.get(rid)
        attr = attribute_of(rec.content) if rec is not None else None
        if attr and attr[1]:
            stale.append(attr[1].lower().replace(" ", ""))
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
