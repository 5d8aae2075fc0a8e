"""The live-window guard: what a user just said, not yet extracted, can already overrule memory.

A stored record that a pending (said, not yet extracted) user message contradicts is not served as
current, and its profile values are held back; the next event's update supersedes it for good.
The guard uses the configured roles, so its decisions are the designed ones with a real model:

1. which pending user messages to read: under `live_contradiction = "cues"` (the default) only
   those carrying a change cue (`CHANGE_CUES`: "moved", "new", "no longer", "现在", "搬", ...),
   which keeps a real model's extra calls rare; under "always" every one; "off" disables the guard;
2. the configured extractor reads them (one call for the messages not read before; results are
   cached per message, so a message that stays pending costs one call, not one per turn);
3. each live record is paired with the retrieval's candidates by the update step's own blocking
   and cosine (`engine.memory.update.block` / `best_match`);
4. the configured consolidator decides; SUPERSEDE means "held back", with its reason.

Every check that read a message is logged as a `contradiction` event.
"""

from __future__ import annotations

import re
from functools import lru_cache
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from engine.core.config import GUARD_MODES
from engine.core.lru import LRU
from engine.core.records import MemoryRecord, Message
from engine.memory.context import EngineContext
from engine.memory.extraction import call_extractor, profile_name, to_records, window_message
from engine.memory.retrieval import record_text
from engine.memory.update import best_match, block, record_view
from engine.roles.types import ConsolidationInput, ExtractionInput

__all__ = ["LiveRecords", "held_back", "has_change_cue", "CHANGE_CUES", "GUARD_MODES"]


#: Words that announce a change of something already known (English and Chinese).
CHANGE_CUES = (
    "moved", "move", "moving", "relocated", "relocating", "now", "new", "newly", "changed", "change", "switched",
    "switch", "no longer", "anymore", "any more", "not any", "actually", "instead", "updated", "update",
    "replaced", "just got", "quit", "left", "divorced", "married", "engaged", "renamed", "rename", "call me",
    "from now on", "these days", "nowadays", "stopped", "started", "became", "correction",
    "搬", "换", "现在", "不再", "改", "新的", "其实", "已经", "辞职", "离开", "结婚", "离婚", "以后", "不是",
)
_CUE_RE = re.compile(
    "|".join(rf"\b{re.escape(c)}\b" if c.isascii() else re.escape(c) for c in CHANGE_CUES), re.IGNORECASE)


@lru_cache(maxsize=4096)
def has_change_cue(text: str) -> bool:
    """Whether a message announces a change (a cheap rule deciding whether the guard reads it;
    cached, since a pending message is looked at again every turn until it is extracted)."""
    return bool(_CUE_RE.search(text))


class LiveRecords:
    """What the extractor made of each pending user message, and what the consolidator said of each
    pairing with a stored record: cached (bounded), so a message that stays pending for several
    turns costs its model calls once."""

    def __init__(self, max_messages: int = 2048):
        self.max_messages = max_messages
        self._by_message: LRU[tuple[str, int], list[MemoryRecord]] = LRU(max_messages)
        self._decisions: LRU[tuple[str, str, int], Any] = LRU(4 * max_messages)
        self._vectors: LRU[str, Any] = LRU(4 * max_messages)  # live record text → its embedding
        self._embedder: Any = None

    def vectors(self, ctx: EngineContext, texts: Sequence[str]) -> list[Any]:
        """The embeddings of live records' texts: a pending message's live records are compared
        every turn until it is extracted, so each text is embedded once (per embedder)."""
        if self._embedder is not ctx.embedder:
            self._vectors.clear()
            self._embedder = ctx.embedder
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        fresh = dict(zip(missing, ctx.embedder.embed_documents(missing) if missing else [], strict=True))
        out = [fresh[t] if t in fresh else self._vectors.get(t) for t in texts]  # read (and used) first:
        for t, v in fresh.items():  # keeping the new ones may push out the oldest
            self._vectors.put(t, v)
        return out

    def decide(self, ctx: EngineContext, user_id: str, new: MemoryRecord, old: MemoryRecord, sim: float) -> Any:
        """The consolidator's decision on a live record against a stored one (asked once per pair)."""
        key = (user_id, new.content, old.id)
        if key not in self._decisions:
            self._decisions.put(key, ctx.call_role("consolidator", ctx.models.consolidator.decide, ConsolidationInput(
                new=record_view(new), existing=record_view(old), cosine=round(sim, 6))))
        return self._decisions.get(key)

    def read(self, ctx: EngineContext, user_id: str, session_id: str, messages: Sequence[Message],
             now: datetime, *, event_no: int | None = None) -> tuple[list[MemoryRecord], list[int]]:
        """The live records of `messages` and the ids read by the extractor on this call."""
        fresh = [m for m in messages if (user_id, m.id) not in self._by_message]
        if fresh:
            name = profile_name(ctx.store.get_profile(user_id))
            inp = ExtractionInput(user_id=user_id, session_id=session_id, new=[window_message(m, name) for m in fresh])
            out = call_extractor(ctx, inp, log_session=session_id, event_no=event_no, purpose="live-window")
            recs = to_records(out, fresh, user_id=user_id, session_id=session_id, now=now)
            for m in fresh:
                self._remember((user_id, m.id), [r for r in recs if r.source and m.id in r.source.message_ids])
        live = [r for m in messages for r in (self._by_message.peek((user_id, m.id)) or [])]
        return live, [m.id for m in fresh]

    def _remember(self, key: tuple[str, int], recs: list[MemoryRecord]) -> None:
        self._by_message.put(key, recs)

    def forget_user(self, user_id: str) -> None:
        self._by_message.drop(lambda k: k[0] == user_id)
        self._decisions.drop(lambda k: k[0] == user_id)
        self._vectors.clear()


def held_back(ctx: EngineContext, cache: LiveRecords, user_id: str, session_id: str,
              candidates: Mapping[int, MemoryRecord], pending: Sequence[Message], *, now: datetime,
              event_no: int | None = None) -> dict[int, str]:
    """Candidate record id → why the live window overrules it (empty when nothing does)."""
    mode = ctx.config.live_contradiction
    said = [m for m in pending if m.role == "user" and (mode == "always" or has_change_cue(m.content))]
    if mode == "off" or not said or not candidates:
        return {}
    live, read_now = cache.read(ctx, user_id, session_id, said, now, event_no=event_no)
    held: dict[int, str] = {}
    compared: list[dict] = []
    if live:
        vecs = cache.vectors(ctx, [record_text(r) for r in live])
        pool = [r for r in candidates.values() if r.is_current]
        # only records some live record blocks with can match: read just their vectors
        blocked = [block(new, pool, config=ctx.config) for new in live]
        wanted = sorted({r.id for b in blocked for r in b if r.id is not None})
        stored = ctx.store.vectors(user_id, wanted) if wanted else {}
        for new, vec, blocks in zip(live, vecs, blocked, strict=True):
            match = best_match(vec, [r for r in blocks if r.id not in held], stored, threshold=ctx.update_cosine)
            if match.record is None:
                continue
            decision = cache.decide(ctx, user_id, new, match.record, match.cosine)
            action = getattr(decision, "action", "KEEP_BOTH")
            compared.append({"live": new.content, "stored": match.record.id, "cosine": round(match.cosine, 4),
                             "action": action})
            if action == "SUPERSEDE":
                held[match.record.id] = f"contradicted by the live window: {getattr(decision, 'reason', '')}"
    ctx.log(user_id, session_id, "contradiction", {
        "mode": mode, "messages": [m.id for m in said], "read_now": read_now, "live_records": len(live),
        "compared": compared, "held": held}, event_no=event_no)
    return held
