"""Dimension-aware update: block by type and keyword overlap, then cosine, then the consolidator.

For each new record, candidates are the user's current records of the same memory type whose
keyword sets overlap (Jaccard ≥ `update_jaccard`); only those are compared by embedding
(cosine ≥ `update_cosine`), and only the best of those reaches the consolidator, which answers
MERGE (reinforce the existing record, keep one), SUPERSEDE (add the new one, the old one gets
`invalid_at` and a link to its successor; nothing is deleted) or KEEP_BOTH. The embedding
comparisons that blocking saved, against comparing with every current record, are counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from engine.core.config import MemoryConfig
from engine.core.records import MemoryRecord
from engine.core.text import content_tokens, jaccard
from engine.roles.types import ConsolidationInput, RecordView
from engine.stores.base import Store

__all__ = ["UpdateStats", "apply_updates", "record_view", "keyword_set"]


@dataclass
class UpdateStats:
    added: list[int] = field(default_factory=list)
    merged: list[dict] = field(default_factory=list)
    superseded: list[dict] = field(default_factory=list)
    kept_both: list[dict] = field(default_factory=list)
    comparisons_without_blocking: int = 0
    comparisons_done: int = 0
    consolidator_calls: int = 0

    @property
    def comparisons_saved(self) -> int:
        return self.comparisons_without_blocking - self.comparisons_done

    def to_dict(self) -> dict:
        return {
            "added": self.added,
            "merged": self.merged,
            "superseded": self.superseded,
            "kept_both": self.kept_both,
            "comparisons_without_blocking": self.comparisons_without_blocking,
            "comparisons_done": self.comparisons_done,
            "comparisons_saved": self.comparisons_saved,
            "consolidator_calls": self.consolidator_calls,
        }


def keyword_set(record: MemoryRecord) -> set[str]:
    """The blocking key: the record's keywords, or its content words when it has none."""
    kws = [k for k in record.keywords if k.strip()]
    return set(kws) if kws else set(content_tokens(record.content))


def record_view(record: MemoryRecord) -> RecordView:
    return RecordView(
        id=record.id,
        content=record.content,
        memory_type=record.memory_type,
        tags=list(record.tags),
        time=record.time.text if record.time else None,
        location=record.location,
        reason=record.reason,
        purpose=record.purpose,
        keywords=list(record.keywords),
        theme=record.theme,
    )


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    va, vb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    na, nb = np.linalg.norm(va), np.linalg.norm(vb)
    return float(va @ vb / (na * nb)) if na > 0 and nb > 0 else 0.0


def apply_updates(
    store: Store,
    *,
    user_id: str,
    records: Sequence[MemoryRecord],
    vectors: Sequence[Sequence[float]],
    decide: Callable[[ConsolidationInput], object],
    config: MemoryConfig,
    now: datetime,
    cosine_threshold: float | None = None,
) -> UpdateStats:
    """Write `records` through the dimension-aware update; call inside the event's transaction.

    `cosine_threshold` defaults to `config.update_cosine`; a cosine threshold only means something
    for one embedding model, so the engine passes the embedder's calibrated value when the config
    leaves it unset (DimMem's 0.7 is MiniLM's).
    """
    stats = UpdateStats()
    threshold = cosine_threshold if cosine_threshold is not None else (config.update_cosine or 0.7)
    for rec, vec in zip(records, vectors, strict=True):
        current = store.count_records(user_id, include_invalid=False)
        stats.comparisons_without_blocking += current
        query = " ".join([rec.content, *rec.keywords])
        hits = [rid for rid, _ in store.search_bm25(user_id, query, k=config.candidate_k)]
        pool = [r for r in store.get_records(user_id, hits) if r.is_current and r.memory_type == rec.memory_type]
        new_keys = keyword_set(rec)
        blocked = [r for r in pool if jaccard(new_keys, keyword_set(r)) >= config.update_jaccard]
        best: tuple[float, MemoryRecord] | None = None
        if blocked:
            stored = store.vectors(user_id, [r.id for r in blocked])
            for r in blocked:
                if r.id not in stored:
                    continue
                stats.comparisons_done += 1
                c = _cos(vec, stored[r.id])
                if c >= threshold and (best is None or c > best[0]):
                    best = (c, r)
        if best is None:
            stats.added.append(store.add_records([rec], [vec])[0].id)
            continue
        cosine, old = best
        stats.consolidator_calls += 1
        decision = decide(ConsolidationInput(new=record_view(rec), existing=record_view(old), cosine=round(cosine, 6)))
        info = {"existing": old.id, "cosine": round(cosine, 4), "reason": getattr(decision, "reason", "")}
        action = getattr(decision, "action", "KEEP_BOTH")
        if action == "MERGE":
            merged_content = getattr(decision, "merged_content", None) or old.content
            keywords = tuple(dict.fromkeys([*old.keywords, *rec.keywords]))
            merged = replace(
                old,
                content=merged_content,
                keywords=keywords,
                tags=tuple(dict.fromkeys([*old.tags, *rec.tags])),
                time=old.time or rec.time,
                location=old.location or rec.location,
                reason=old.reason or rec.reason,
                purpose=old.purpose or rec.purpose,
                strengthen_count=old.strengthen_count + 1,
                last_reinforced_at=now,
            )
            store.update_record(merged, vec if merged_content != old.content else None)
            stats.merged.append(info)
        elif action == "SUPERSEDE":
            new = store.add_records([rec], [vec])[0]
            store.supersede(user_id, old.id, new.id, now)
            stats.added.append(new.id)
            stats.superseded.append({**info, "successor": new.id})
        else:
            new = store.add_records([rec], [vec])[0]
            stats.added.append(new.id)
            stats.kept_both.append({**info, "new": new.id})
    return stats
