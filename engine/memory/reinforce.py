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

from engine.core.attributes import stated_attribute
from engine.core.records import MemoryRecord
from engine.core.text import content_tokens
from engine.memory.context import EngineContext

__all__ = ["used_in_reply", "reinforce", "log_exposure", "MAX_SPACED_IDS"]

#: Record ids remembered per session for spacing (the newest are kept).
MAX_SPACED_IDS = 2000


def used_in_reply(record: MemoryRecord, reply: str, *, question: str = "") -> bool:
    """Whether `reply` shows it used `record`: the stated value appears in it, or at least two of
    the record's words (one, for a one-word record) that the question did not already contain."""
    said = set(content_tokens(reply))
    if not said:
        return False
    found = stated_attribute(record.content)
    if found is not None and found.value and set(found.value.split()) <= said:
        return True
    asked = set(content_tokens(question))
    speaker = set(content_tokens(record.source.speaker)) if record.source and record.source.speaker else set()
    distinctive = set(content_tokens(record.content)) - asked - speaker - {"user"}
    if not distinctive:
        return False
    return len(distinctive & said) >= min(2, len(distinctive))


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

