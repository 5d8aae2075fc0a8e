"""Step 6, reinforcement: a memory is strengthened when it is *used*, not when it is merely shown.

Causes (each logged with the reinforcement):
- "restated": the user said it again (a MERGE in the update step; logged there);
- "used in reply": the reply demonstrably drew on it (`used_in_reply`: the reply repeats words of
  the record that the question did not contain, such as the value it states);
- "injected": only under `reinforce_on = "injection"`, the first seed's rule, kept for comparison
  (the `bmdm` strategy): every injection strengthens, so whatever was shown wins the next turn.

Spacing: a record is reinforced at most once per session, so one long session cannot pump a
record's importance; injection without use is logged as exposure and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from engine.core.attributes import stated_attribute
from engine.core.records import MemoryRecord
from engine.core.text import content_tokens
from engine.memory.context import EngineContext

__all__ = ["used_in_reply", "records_used_in_reply", "reinforce", "log_exposure", "MAX_SPACED_IDS"]

#: Record ids remembered per session for spacing (the newest are kept).
MAX_SPACED_IDS = 2000


def used_in_reply(record: MemoryRecord, reply: str, *, question: str = "") -> bool:
    """Whether `reply` shows it used `record`: the stated value appears in it, or at least two of
    the record's words (one, for a one-word record) that the question did not already contain."""
    return bool(records_used_in_reply([record], reply, question=question))


def records_used_in_reply(records: Sequence[MemoryRecord], reply: str, *, question: str = "") -> list[MemoryRecord]:
    """The `records` that `reply` shows it used (`used_in_reply`), the reply and the question
    tokenised once for all of them."""
    said = set(content_tokens(reply))
    if not said:
        return []
    asked: set[str] | None = None
    out = []
    for record in records:
        value, words = _record_side(record.content)
        if value is not None and value <= said:
            out.append(record)
            continue
        if asked is None:
            asked = set(content_tokens(question)) | {"user"}
        speaker = _tokens(record.source.speaker) if record.source and record.source.speaker else frozenset()
        distinctive = words - asked - speaker
        if distinctive and len(distinctive & said) >= min(2, len(distinctive)):
            out.append(record)
    return out


@lru_cache(maxsize=1 << 14)
def _record_side(content: str) -> tuple[frozenset[str] | None, frozenset[str]]:
    """A record's stated value as words (None without one) and its content tokens (cached by content)."""
    found = stated_attribute(content)
    value = frozenset(found.value.split()) if found is not None and found.value else None
    return value, frozenset(content_tokens(content))


@lru_cache(maxsize=1024)
def _tokens(text: str) -> frozenset[str]:
    return frozenset(content_tokens(text))


def reinforce(ctx: EngineContext, user_id: str, session_id: str, records: Sequence[MemoryRecord], *, cause: str,
              event_no: int | None = None) -> list[int]:
    """Strengthen these records (once per session each) and log the cause; returns the ids done."""
    key = f"reinforced:{session_id}"
    done_before = set(ctx.store.get_kv(user_id, key) or [])
    ids = [r.id for r in records if r.id is not None and r.id not in done_before]
    if not ids:
        return []
    now = ctx.now()
    with ctx.store.transaction():  # the reinforcement and its log entry: one commit
        ctx.store.reinforce(user_id, ids, now)
        ctx.store.set_kv(user_id, key, [*sorted(done_before), *ids][-MAX_SPACED_IDS:])
        ctx.log(user_id, session_id, "reinforce", {"record_ids": ids, "cause": cause, "at": now.isoformat(),
                                                  "spaced_out": [r.id for r in records if r.id in done_before]},
                event_no=event_no)
    return ids


def log_exposure(ctx: EngineContext, user_id: str, session_id: str, record_ids: Sequence[int], *,
                 event_no: int | None = None) -> None:
    """Injection without use: logged, strengthens nothing."""
    if record_ids:
        ctx.log(user_id, session_id, "exposure", {"record_ids": list(record_ids)}, event_no=event_no)

