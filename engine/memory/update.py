"""Dimension-aware update: block by keyword overlap, then cosine, then the consolidator.

For each new record, candidates are the user's current records that the full-text index finds
for it and that state the same subject's same single-valued attribute or whose keyword sets
overlap (Jaccard ≥ `update_jaccard`), whatever memory type each got; only those are compared by embedding (cosine ≥ the threshold), and only the best of those
reaches the consolidator, which answers MERGE (a restatement: the existing record is reinforced,
and re-embedded when its text changes), SUPERSEDE (add the new one; the old one gets `invalid_at`
and a link to its successor; nothing is deleted) or KEEP_BOTH. The embedding comparisons that
blocking saved, against comparing with every current record, are counted.

The blocking and cosine steps (`block`, `best_match`) are shared with the live-window
contradiction check, so both decide "same attribute?" the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache

import numpy as np

from engine.core.attributes import stated_attribute
from engine.core.config import MemoryConfig
from engine.core.records import MemoryRecord
from engine.core.text import content_tokens, normalize
from engine.memory.retrieval import record_text
from engine.roles.types import ConsolidationInput, RecordView
from engine.stores.base import Store

__all__ = ["UpdateStats", "apply_updates", "record_view", "keyword_set", "block", "best_match", "Match",
           "blocking_pool", "subject_attribute"]


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


def keyword_set(record: MemoryRecord) -> frozenset[str]:
    """The blocking key: the record's keywords, or its content words when it has none."""
    return _keyword_set(tuple(record.keywords), record.content)


@lru_cache(maxsize=8192)
def _keyword_set(keywords: tuple[str, ...], content: str) -> frozenset[str]:
    kws = [k for k in keywords if k.strip()]
    return frozenset(kws) if kws else frozenset(content_tokens(content))


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
        lasting=record.lasting,
    )


def _cosine_to(va: np.ndarray, na: float, b: Sequence[float]) -> float:
    """The cosine of `va` (a float64 vector, `na` its norm) and `b` (0 when either is all zeros)."""
    vb = np.asarray(b, dtype=float)
    nb = np.linalg.norm(vb)
    return float(va @ vb / (na * nb)) if na > 0 and nb > 0 else 0.0


def block(new: MemoryRecord, pool: Iterable[MemoryRecord], *, config: MemoryConfig) -> list[MemoryRecord]:
    """The current records of `pool` that could be the same memory as `new`, whatever memory type
    each got: the same subject stating the same single-valued attribute ("lives in Lisbon" and
    "moved to Porto"), or keyword Jaccard ≥ `update_jaccard`."""
    new_keys = _normalized_keys(keyword_set(new))
    new_attr = subject_attribute(new)
    return [old for old in pool if old.is_current and old.id != new.id
            and ((new_attr is not None and subject_attribute(old) == new_attr)
                 or _set_jaccard(new_keys, _normalized_keys(keyword_set(old))) >= config.update_jaccard)]


@lru_cache(maxsize=8192)
def _normalized_keys(keys: frozenset[str]) -> frozenset[str]:
    return frozenset(normalize(x).strip() for x in keys if x and x.strip())


def _set_jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """`jaccard` over keys already normalised (the same value, without normalising per pair)."""
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def subject_attribute(record: MemoryRecord) -> tuple[str, str] | None:
    """(whose, attribute) when the record states a single-valued attribute of someone or
    something ("Li lives in Porto" → ("li", "residence"); "the detective is called Inês" →
    ("", "name:detective")), else None. The user's own statements count as the speaker's."""
    return _subject_attribute(record.content, record.source.speaker if record.source else None)


@lru_cache(maxsize=8192)
def _subject_attribute(content: str, speaker_name: str | None) -> tuple[str, str] | None:
    found = stated_attribute(content)
    if found is None:
        return None
    who = normalize(found.subject or "").strip()
    speaker = normalize(speaker_name).strip() if speaker_name else ""
    if who in ("user", "the user", "i", "me", "my", "我", "用户") or (speaker and who == speaker):
        who = f"speaker:{speaker or 'user'}"
    return who, found.name


@dataclass(frozen=True, kw_only=True, slots=True)
class Match:
    """The cosine step's outcome: the best blocked record at or above the threshold (or None),
    its cosine, and how many embedding comparisons it took."""

    record: MemoryRecord | None
    cosine: float
    compared: int


def best_match(vector: Sequence[float], blocked: Sequence[MemoryRecord], stored: Mapping[int, Sequence[float]], *,
               threshold: float) -> Match:
    """The blocked record most similar to `vector`, if its cosine reaches `threshold`."""
    best: MemoryRecord | None = None
    best_cos = 0.0
    compared = 0
    va = np.asarray(vector, dtype=float)  # the new record's side of every comparison, made once
    na = np.linalg.norm(va)
    for r in blocked:
        if r.id not in stored:
            continue
        compared += 1
        c = _cosine_to(va, na, stored[r.id])
        if c >= threshold and (best is None or c > best_cos):
            best, best_cos = r, c
    return Match(record=best, cosine=best_cos, compared=compared)


def blocking_pool(store: Store, user_id: str, record: MemoryRecord, *, k: int) -> list[MemoryRecord]:
    """The records the full-text index finds for `record` (a bounded candidate pool)."""
    query = " ".join([record.content, *record.keywords])
    hits = [rid for rid, _ in store.search_bm25(user_id, query, k=k)]
    return store.get_records(user_id, hits)


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
    embed: Callable[[list[str]], list[list[float]]] | None = None,
) -> UpdateStats:
    """Write `records` through the dimension-aware update; call inside the event's transaction.

    `cosine_threshold` defaults to `config.update_cosine`; a cosine threshold only means something
    for one embedding model, so the engine passes the embedder's calibrated value when the config
    leaves it unset (DimMem's 0.7 is MiniLM's). `embed` re-embeds a merged record whose text
    changed (without it the new record's vector is kept, which only approximates the merged text).
    """
    stats = UpdateStats()
    threshold = cosine_threshold if cosine_threshold is not None else (config.update_cosine or 0.7)
    current = store.count_records(user_id, include_invalid=False) if records else 0
    for rec, vec in zip(records, vectors, strict=True):
        stats.comparisons_without_blocking += current
        blocked = block(rec, blocking_pool(store, user_id, rec, k=config.candidate_k), config=config)
        found = best_match(vec, blocked, store.vectors(user_id, [r.id for r in blocked]) if blocked else {},
                           threshold=threshold)
        stats.comparisons_done += found.compared
        if found.record is None:
            stats.added.append(store.add_records([rec], [vec])[0].id)
            current += 1
            continue
        sim, old = found.cosine, found.record
        stats.consolidator_calls += 1
        decision = decide(ConsolidationInput(new=record_view(rec), existing=record_view(old), cosine=round(sim, 6)))
        info = {"existing": old.id, "cosine": round(sim, 4), "reason": getattr(decision, "reason", "")}
        action = getattr(decision, "action", "KEEP_BOTH")
        if action == "MERGE":
            merged = _merged(old, rec, getattr(decision, "merged_content", None) or old.content, rec.said_at or now)
            new_vec = None
            if merged.content != old.content:
                new_vec = embed([record_text(merged)])[0] if embed is not None else vec
            store.update_record(merged, new_vec)
            stats.merged.append({**info, "reembedded": new_vec is not None,
                                 "restated_at": merged.last_reinforced_at.isoformat()})
        elif action == "SUPERSEDE":
            new = store.add_records([rec], [vec])[0]
            store.supersede(user_id, old.id, new.id, now)
            stats.added.append(new.id)
            stats.superseded.append({**info, "successor": new.id})
        else:
            new = store.add_records([rec], [vec])[0]
            current += 1
            stats.added.append(new.id)
            stats.kept_both.append({**info, "new": new.id})
    return stats


def _merged(old: MemoryRecord, new: MemoryRecord, content: str, restated_at: datetime) -> MemoryRecord:
    """The existing record restated by `new` (a genuine reinforcement at the time it was restated):
    union of keywords and tags, missing dimensions filled; it lasts if either lasts."""
    return replace(
        old,
        content=content,
        keywords=tuple(dict.fromkeys([*old.keywords, *new.keywords])),
        tags=tuple(dict.fromkeys([*old.tags, *new.tags])),
        time=old.time or new.time,
        location=old.location or new.location,
        reason=old.reason or new.reason,
        purpose=old.purpose or new.purpose,
        strengthen_count=old.strengthen_count + 1,
        last_reinforced_at=max(restated_at, old.reinforced_at),
        lasting=old.lasting or new.lasting,
    )
