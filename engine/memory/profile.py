"""The long-term profile: induction from mature records, corrections, and the profile a prompt shows.

Induction reads the records past the per-user induction cursor, in id order, in bounded batches;
it stops at the first record not yet mature enough (`long_term_value`), so the cursor never skips
one, and waits (a logged "deferred" induct) while fewer than `induct_min_records` of them are
lasting and current, none of those is one the profile shows at once (a trait, an identity,
preference, decision or safety record, a single-valued attribute), and the oldest was said less
than `induct_max_wait` ago. A record that supersedes one a profile value rests on corrects the profile in the same
event, without waiting for the gate (the cursor does not move for that); when the event inducts a batch
too, the correction rides in the same inducer call. A superseded record no profile value rests on needs
no correction: its successor reaches the inducer with its batch like any new record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from engine.core.attributes import attribute_of
from engine.core.forgetting import maturity
from engine.core.records import MemoryRecord, ProfileHistoryEntry, UserProfile
from engine.core.text import content_tokens
from engine.core.tokens import TokenCounter
from engine.memory.context import EngineContext
from engine.memory.profileview import ProfileBudget, in_profile_order, model_view, ranked_values, shown_profile
from engine.memory.update import record_view
from engine.roles.types import InductionInput, InductionOutput
from engine.stores.base import Store

__all__ = ["induct", "correct_profile", "profile_corrections", "apply_induction", "profile_for_prompt", "MAX_INDUCTION_BATCH"]

MAX_INDUCTION_BATCH = 20


def profile_corrections(profile: UserProfile, superseded: Sequence[Mapping[str, int]]) -> list[int]:
    """The successors of superseded records that some profile value rests on (those the profile
    must correct now); the others' successors wait for their batch like any new record."""
    held = {i for vals in profile.sources.values() for ids in vals.values() for i in ids}
    return [x["successor"] for x in superseded if x["existing"] in held]


def induct(ctx: EngineContext, user_id: str, session_id: str, *, event_no: int,
           corrections: Sequence[int] = ()) -> None:
    """Induct the next batch of mature records past the cursor into the profile, with the
    `corrections` (successors of records the profile rests on) in the same call; when the batch
    waits, the corrections go alone (the cursor does not move for them)."""
    cfg, now = ctx.config, ctx.now()
    cursor = ctx.store.get_cursor(user_id, "", "induct")
    fresh = ctx.store.records(user_id, include_invalid=True, after_id=cursor, limit=MAX_INDUCTION_BATCH)
    batch: list[MemoryRecord] = []
    for r in fresh:
        age = (now - (r.said_at or r.valid_from or r.created_at)).total_seconds()
        if maturity(age, tau_m=cfg.tau_m, c_m=cfg.c_m) < cfg.long_term_value:
            break  # in id order: stop at the first immature record, the cursor never skips it
        batch.append(r)
    eligible = [r for r in batch if r.is_current and r.lasting]
    waited = max(((now - (r.said_at or r.valid_from or r.created_at)).total_seconds() for r in eligible), default=0.0)
    if 0 < len(eligible) < cfg.induct_min_records and len(batch) < MAX_INDUCTION_BATCH \
            and waited < cfg.induct_max_wait and not (cfg.induct_at_once and any(_profile_bound(r) for r in eligible)):
        # batched induction: one inducer call per `induct_min_records` records, not one per event
        ctx.log(user_id, session_id, "induct", {"waiting_ids": [r.id for r in batch], "deferred": True,
                                               "eligible": len(eligible), "min_records": cfg.induct_min_records,
                                               "waited_seconds": round(waited, 3)},
                event_no=event_no)
        batch = []
    if not batch:
        if corrections:
            correct_profile(ctx, user_id, session_id, corrections, event_no=event_no)
        return
    in_batch = {r.id for r in batch}
    extra = [i for i in dict.fromkeys(corrections) if i not in in_batch]
    given = hinted_changes(ctx.store, user_id, batch, cursor) if cfg.induct_in_extraction and not extra else None
    apply_induction(ctx, user_id, session_id, batch, event_no=event_no, move_cursor=True,
                    extra=ctx.store.get_records(user_id, extra) if extra else (), corrections=len(corrections),
                    given=given)


def _hint_key(record_id: int) -> str:
    return f"profile-hint:{record_id}"


def keep_profile_hint(store: Store, user_id: str, record_ids: Sequence[int], changes: InductionOutput) -> None:
    """Keep what the extractor said a window's new records change in the profile, until they mature
    (`induct_in_extraction`): the induction then applies it instead of calling the inducer, and
    deletes the hints of the records its cursor passes (`apply_induction`)."""
    hint = {"window": list(record_ids), **changes.model_dump(mode="json")}
    for rid in record_ids:
        store.set_kv(user_id, _hint_key(rid), hint)


def hinted_changes(store: Store, user_id: str, batch: Sequence[MemoryRecord],
                   cursor: int | None = None) -> InductionOutput | None:
    """The batch's profile changes as the extractor said them, when it said them for every record
    the inducer would see, and each of their windows is mature (its records are in the batch or
    were inducted before it, at or below `cursor`) and still current: a window's records were
    judged together, against the profile of then. None: the inducer decides."""
    by_id = {r.id: r for r in batch}
    hints: dict[tuple[int, ...], dict] = {}
    for r in batch:
        if not (r.is_current and r.lasting):
            continue
        hint = store.get_kv(user_id, _hint_key(r.id))
        if not isinstance(hint, dict):
            return None
        window = tuple(int(i) for i in hint.get("window", ()))
        outside = [i for i in window if i not in by_id]
        if outside and (cursor is None or max(outside) > cursor):
            return None  # part of the window is not mature yet
        members = [by_id[i] for i in window if i in by_id] + (store.get_records(user_id, outside) if outside else [])
        if not all(x.is_current for x in members):
            return None  # a record the hint rests on was superseded since
        hints[window] = hint
    if not hints:
        return None
    add: dict[str, list[str]] = {}
    remove: dict[str, list[str]] = {}
    for hint in hints.values():
        for part, into in (("add", add), ("remove", remove)):
            for k, vals in (hint.get(part) or {}).items():
                into.setdefault(k, []).extend(v for v in vals if v not in into.get(k, []))
    return InductionOutput(add=add, remove=remove)


#: Tags whose records the profile shows at once (never held back for a batch).
_PROFILE_TAGS = frozenset({"identity", "preference", "decision", "safety"})


def _profile_bound(record: MemoryRecord) -> bool:
    """A record the profile should reflect now: a trait, a tagged identity, preference, decision or
    safety constraint, or a single-valued attribute (where the user lives, their phone, ...)."""
    return (record.memory_type == "profile" or bool(_PROFILE_TAGS & set(record.tags))
            or attribute_of(record.content) is not None)


def correct_profile(ctx: EngineContext, user_id: str, session_id: str, successor_ids: Sequence[int], *,
                    event_no: int) -> None:
    """Re-induct records that superseded ones the profile already holds (no cursor move)."""
    apply_induction(ctx, user_id, session_id, ctx.store.get_records(user_id, successor_ids), event_no=event_no,
                    move_cursor=False)


def apply_induction(ctx: EngineContext, user_id: str, session_id: str, batch: Sequence[MemoryRecord], *,
                    event_no: int, move_cursor: bool, extra: Sequence[MemoryRecord] = (),
                    corrections: int = 0, given: InductionOutput | None = None) -> None:
    """Ask the inducer about `batch` (and `extra`, corrections past the cursor's batch), apply its
    adds/removes with each value's source records, keep a history entry. One-off instructions
    (`lasting=False`) never reach the inducer. `given`: the changes the extractor already said
    (`hinted_changes`), applied without a call."""
    store, now = ctx.store, ctx.now()
    profile = store.get_profile(user_id)
    cursor_batch = batch
    batch = [*batch, *extra]
    current = [r for r in batch if r.is_current and r.lasting]
    try:
        if not current:  # nothing the inducer could establish or retract: no model call
            out = InductionOutput()
        elif given is not None:  # said by the extractor when it made these records: no model call
            out = given
        else:
            out = ctx.call_role("inducer", ctx.models.inducer.induct, InductionInput(
                profile=model_view(profile, ctx.config.profile_budget, ctx.counter),
                records=[record_view(r) for r in current]))
        out = InductionOutput.model_validate(out, from_attributes=True)  # junk output: a logged error
    except Exception as exc:
        ctx.log(user_id, session_id, "error", {"step": "induct", "error": f"{type(exc).__name__}: {exc}"},
                event_no=event_no)
        return
    before = {k: tuple(v) for k, v in profile.fields.items()}
    after = _applied(before, add=out.add, remove=out.remove)
    new_profile = UserProfile(user_id=user_id, fields=after, version=profile.version + 1, updated_at=now,
                              sources=_sourced(profile, after, out.add, current))
    entry = ProfileHistoryEntry(user_id=user_id, version=new_profile.version, at=now, before=before,
                                after=after, record_ids=tuple(r.id for r in batch))
    with store.transaction():
        store.save_profile(new_profile, entry)
        if move_cursor:
            store.set_cursor(user_id, "", "induct", cursor_batch[-1].id)
            # past the cursor nothing reads these records' hints again (`hinted_changes` reads the
            # hints of a batch, and a batch is read after the cursor), so they go with it
            store.delete_kv(user_id, [_hint_key(r.id) for r in cursor_batch])
    ctx.log(user_id, session_id, "induct", {"record_ids": [r.id for r in batch], "version": new_profile.version,
                                           "diff": entry.diff(), "correction": not move_cursor,
                                           **({"from_extraction": True} if given is not None and current else {}),
                                           **({"corrections": corrections} if corrections else {})},
            event_no=event_no)


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


def _sourced(old: UserProfile, after: Mapping[str, tuple[str, ...]], added: Mapping[str, Sequence[str]],
             batch: Sequence[MemoryRecord]) -> dict[str, dict[str, tuple[int, ...]]]:
    """Each value's source records: kept for values already there, and for new ones the batch
    records that state it (its words are in the record), or the whole batch when none does."""
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    for key, values in after.items():
        for v in values:
            ids = old.sources_of(key, v)
            if v in added.get(key, ()):
                words = set(content_tokens(v))
                stating = [r.id for r in batch if words and words <= set(content_tokens(r.content))]
                ids = tuple(dict.fromkeys([*ids, *(stating or [r.id for r in batch])]))
            if ids:
                out.setdefault(key, {})[v] = ids
    return out


def profile_for_prompt(store: Store, profile: UserProfile, excluded: Mapping[int, str],
                       records: Mapping[int, MemoryRecord], *, budget: int | None = None,
                       counter: TokenCounter | None = None) -> tuple[UserProfile, list[str], dict[str, str], int]:
    """The profile a prompt shows: under the curve, not written back. Returns the profile, the
    values held back, each shown value's date (when its newest source was said), and how many
    values the `budget` left out (engine.memory.profileview; None: every value, the whole profile).

    A value goes when every record it rests on is superseded, and when it states the old value of
    an attribute whose record the live window supersedes ("lives in Chengdu" while the user just
    said they moved); the next event's supersede and induction correct the stored profile itself.
    With a budget, values are taken in `ranked_values` order and their sources read a chunk at a
    time, so a turn reads the sources of the values it may show, never all of them.
    """
    view = _admitted(store, profile, budget, counter)
    shown, held = _live_held(view.shown, excluded, records)
    return shown, [*view.gone_values, *held], dict(view.dates), view.left_out


class _View:
    """What `_admitted` found for one profile: the profile with only the values shown, the values
    gone (in the profile's order), the shown values' dates, how many were left out, and the state
    of every source record it read to decide that (`ids` in id order, as get_records returns them)."""

    __slots__ = ("profile", "counter", "shown", "gone_values", "dates", "left_out", "ids", "state")

    def __init__(self, profile: UserProfile, counter: TokenCounter | None, shown: UserProfile, gone_values: list[str],
                 dates: dict[str, str], left_out: int, seen: Mapping[int, MemoryRecord]):
        self.profile, self.counter, self.shown, self.gone_values = profile, counter, shown, gone_values
        self.dates, self.left_out = dates, left_out
        self.ids = sorted(seen)
        self.state = _source_state([seen[i] for i in self.ids])


def _source_state(records: Sequence[MemoryRecord]) -> list[tuple]:
    """What of a source record the view depends on: whether it is current, and when it was said."""
    return [(r.id, r.is_current, r.said_at) for r in records]


def _admitted(store: Store, profile: UserProfile, budget: int | None, counter: TokenCounter | None) -> _View:
    """The budgeted view of the profile (`ProfileBudget` over `ranked_values`). The last one made
    for this profile object, budget and counter is reused when its source records read back in the
    same state (current or not, said when): between two inductions a turn re-reads those records,
    which the store keeps, instead of walking and costing the values again (0.25 ms a turn for a
    707-value profile)."""
    memo_key = (id(profile), budget, id(counter))
    last = _VIEWS.get(memo_key)
    if last is not None and last.profile is profile and last.counter is counter:
        again = store.get_records(profile.user_id, last.ids) if last.ids else []
        if _source_state(again) == last.state:
            return last
    seen: dict[int, MemoryRecord] = {}
    dates: dict[str, str] = {}
    gone: list[tuple[str, str]] = []
    kept: list[tuple[str, str]] = []
    pairs = ranked_values(profile)
    admit = ProfileBudget(budget, counter) if budget is not None and counter is not None else None
    step = _SOURCE_CHUNK if admit is not None else max(1, len(pairs))  # without a budget: one read of all
    for start in range(0, len(pairs), step):
        if admit is not None and admit.full:
            break
        chunk = [(key, v, profile.sources_of(key, v)) for key, v in pairs[start:start + step]]
        ids = sorted({i for _, _, of in chunk for i in of})
        src = {r.id: r for r in store.get_records(profile.user_id, ids)} if ids else {}
        seen.update(src)
        for key, v, of in chunk:
            if admit is not None and admit.full:
                break
            sources = [src[i] for i in of if i in src]
            if sources and not any(r.is_current for r in sources):
                gone.append((key, v))
                if admit is not None:
                    admit.skip()
                continue
            said = [r.said_at for r in sources if r.is_current and r.said_at]
            date = max(said).date().isoformat() if said else None
            if admit is not None and not admit.admit(key, v, date):
                continue
            if date is not None:
                dates[v] = date
            kept.append((key, v))
    left_out = 0 if admit is None else len(pairs) - len(kept) - len(gone)
    view = _View(profile, counter, shown_profile(profile, kept), [v for _, v in in_profile_order(profile, gone)],
                 dates, left_out, seen)
    if len(_VIEWS) >= _VIEWS_MAX:
        _VIEWS.clear()
    _VIEWS[memo_key] = view
    return view


#: Profile values whose source records one read takes (engine.memory.profileview's order).
_SOURCE_CHUNK = 32
#: The last view made per (profile object, budget, counter) (`_admitted`), the profile held so its
#: id is not reused while kept; all forgotten when this many are kept.
_VIEWS: dict[tuple, _View] = {}
_VIEWS_MAX = 256


def _live_held(profile: UserProfile, excluded: Mapping[int, str],
               records: Mapping[int, MemoryRecord]) -> tuple[UserProfile, list[str]]:
    """The profile minus values stating what the live window just overruled."""
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
