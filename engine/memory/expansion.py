"""Message candidates: records found through the turns nearest the question, not only through their own text.

The other paths find a record by what it says; extraction makes atomic records that lose their
turn's words, so a record whose turn answers the question can be missed by BM25 and dense alike
(on LoCoMo dev5, 17.6% of gold evidence turns were never a candidate). This path searches the
user's messages by cosine to the question and brings in the records made from the nearest ones
(a message → record map, at most `per_message` per message, nearest the question first), each
with its own dense cosine so it is fused like any dense hit; the message path
(engine.memory.messagepath) then scores it by its turn like every other candidate.

The index is per process, per (store, user, embedder): message vectors embedded once (through
the message path's text cache) and appended as new messages arrive, and the message → record
map appended from a record-id cursor; each refresh reads only what is past its cursors. A merge
that adds a message to an existing record is not seen (the map lists a record under the
messages it was created from). At most `INDEX_LIMIT` messages per user are kept (the newest).

Measured on LoCoMo dev5 (MiniLM, scripted extraction; engine.eval.locomo): the nearest 100
messages with 2 records each took all @20 .776 -> .788 and single-hop @20 .819 -> .842. Tried and
left out: BM25 over the turns (as candidates: no change; in the message score: -.009 @10),
pseudo-relevance feedback from the best candidates' turns (no change).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from engine.core.records import MemoryRecord
from engine.memory.messagepath import unit, vectors_for

__all__ = ["MessageIndex", "message_index", "nearest_messages", "message_candidates", "with_message_candidates",
           "forget_user", "INDEX_LIMIT"]

#: Messages kept per user in the in-process index (the newest; older ones are left to the other paths).
INDEX_LIMIT = 100_000


@dataclass(slots=True)
class MessageIndex:
    """One user's message vectors (rows of `mat`, ids in `ids`) and message → record ids."""

    ids: list[int] = field(default_factory=list)
    mat: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    records_of: dict[int, list[int]] = field(default_factory=dict)
    last_message: int = 0
    last_record: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refresh(self, store, user_id: str, embedder) -> None:
        """Append the messages and records past the cursors."""
        with self.lock:
            got = store.messages(user_id, after_id=self.last_message or None)
            if got:
                self.last_message = max(self.last_message, max(m.id for m in got))
            new = [m for m in got if m.content and m.content.strip()]
            if new:
                vecs = np.stack(vectors_for(embedder)([m.content for m in new])).astype(np.float32)
                self.mat = vecs if self.mat.size == 0 else np.vstack([self.mat, vecs])
                self.ids.extend(m.id for m in new)
                if len(self.ids) > INDEX_LIMIT:
                    cut = len(self.ids) - INDEX_LIMIT
                    self.mat, self.ids = self.mat[cut:], self.ids[cut:]
            for r in store.records(user_id, include_invalid=True, after_id=self.last_record or None):
                self.last_record = max(self.last_record, r.id)
                if r.source is not None:
                    for mid in r.source.message_ids:
                        self.records_of.setdefault(mid, []).append(r.id)

    def nearest(self, q: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The `k` messages with the highest cosine to the unit vector `q`, best first (ties by id)."""
        with self.lock:
            if not self.ids or k <= 0:
                return []
            cos = self.mat @ q
            ids = self.ids
            k = min(k, len(ids))
            top = np.argpartition(-cos, k - 1)[:k]
            return [(ids[j], float(cos[j])) for j in sorted(top, key=lambda j: (-cos[j], ids[j]))]


_INDEXES: dict[tuple[int, str, int], tuple[object, object, MessageIndex]] = {}
_LOCK = threading.Lock()


def message_index(store, user_id: str, embedder) -> MessageIndex:
    """The process's message index for (store, user, embedder), brought up to date."""
    key = (id(store), user_id, id(embedder))
    with _LOCK:
        got = _INDEXES.get(key)
        if got is None or got[0] is not store or got[1] is not embedder:
            if len(_INDEXES) >= 256:
                _INDEXES.clear()
            got = _INDEXES[key] = (store, embedder, MessageIndex())
    index = got[2]
    index.refresh(store, user_id, embedder)
    return index


def forget_user(user_id: str) -> int:
    """Drop the user's message indexes (every store and embedder); returns how many were dropped."""
    with _LOCK:
        keys = [k for k in _INDEXES if k[1] == user_id]
        for k in keys:
            del _INDEXES[k]
    return len(keys)


def nearest_messages(store, user_id: str, query_vector, *, embedder, k: int) -> list[tuple[int, float]]:
    """The user's `k` messages nearest the question (message id, cosine), best first."""
    return message_index(store, user_id, embedder).nearest(unit(query_vector), k)


def message_candidates(store, user_id: str, query_vector: Sequence[float] | None, *, embedder, k: int,
                       have: Mapping[int, MemoryRecord], per_message: int = 1, include_history: bool = False,
                       ) -> tuple[dict[int, MemoryRecord], dict[int, float]]:
    """Records made from the `k` messages nearest the question that are not in `have` yet, and
    their dense cosine to the question (so the dense path scores them as if it had found them).
    `per_message`: at most this many records per message, the nearest the question first (0: all)."""
    if query_vector is None or k <= 0:
        return {}, {}
    index = message_index(store, user_id, embedder)
    q = unit(query_vector)
    hits = index.nearest(q, k)
    want = list(dict.fromkeys(rid for mid, _ in hits for rid in index.records_of.get(mid, ()) if rid not in have))
    if not want:
        return {}, {}
    recs = {r.id: r for r in store.get_records(user_id, want) if include_history or r.is_current}
    dense = {rid: float(unit(v) @ q) for rid, v in store.vectors(user_id, list(recs)).items() if rid in recs}
    if per_message > 0:
        keep: set[int] = set()
        for mid, _ in hits:
            mine = sorted((rid for rid in index.records_of.get(mid, ()) if rid in dense),
                          key=lambda rid: (-dense[rid], rid))
            keep.update(mine[:per_message])
        dense = {i: s for i, s in dense.items() if i in keep}
    return {i: recs[i] for i in dense}, dense


def with_message_candidates(store, user_id: str, results, query_vector, *, embedder, config):
    """`results` (retrieval.PathResults) plus `config.message_candidates` messages' records: the
    new records join `records`, their cosine joins the dense path's scores."""
    recs, dense = message_candidates(store, user_id, query_vector, embedder=embedder, k=config.message_candidates,
                                     have=results.records, per_message=config.message_per_turn,
                                     include_history=config.include_history)
    if not recs:
        return results
    records = {**results.records, **recs}
    return replace(results, records={i: records[i] for i in sorted(records)}, dense={**results.dense, **dense})
