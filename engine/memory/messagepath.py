"""The message path: a candidate record scored by what its turn said, not only by what it says.

Extraction makes atomic records ("Caroline said: Recently.", "It's special to Melanie."), and an
atomic record loses the words of the turn it came from. The message path gives every candidate
the other paths found (BM25, dense, dimension) the cosine between the question and its source
messages' text (the best of them); it is fused like the other paths, its share
`path_weights["message"]`, and runs when `paths` includes "message".

It re-scores the candidates and adds none: on LoCoMo dev5 (MiniLM, records made by the scripted
extractor, min-max fusion, message weight 0.5 against 0.4/0.4/0.2) re-scoring took evidence
recall@10 from .666 to .708 and multi-hop@20 from .535 to .582. Adding candidates through the
nearest messages is engine.memory.expansion (opt-in): all of a message's records at once gave
.659-.695 (a turn's near-duplicate fragments crowd the seats); at most two per message, with this
path's weight .7, it gave .715 -> .723 @10.

Message vectors are the embedder's vectors of the message texts, cached in this process by text
(a message never changes, and a text has one vector per embedder), so a candidate's turn is
embedded once however often it is a candidate; the read per retrieval is one `get_messages` for
the candidates' source ids.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from engine.core.lru import LRU
from engine.core.records import MemoryRecord

__all__ = ["message_scores", "MessageVectors", "MESSAGE_VECTOR_CACHE", "unit", "vectors_for"]

#: Message vectors kept per embedder (least recently used dropped first).
MESSAGE_VECTOR_CACHE = 50_000


def unit(v) -> np.ndarray:
    """`v` as a float32 unit vector (a zero vector stays zero)."""
    a = np.asarray(v, dtype=np.float32)
    return a / (float(np.linalg.norm(a)) or 1.0)


class MessageVectors:
    """Unit vectors of message texts for one embedder, cached by text (bounded, LRU)."""

    def __init__(self, embed: Callable[[list[str]], list[list[float]]], limit: int = MESSAGE_VECTOR_CACHE):
        self.embed = embed
        self.limit = int(limit)
        self._cache: LRU[str, np.ndarray] = LRU(self.limit)
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> list[np.ndarray]:
        with self._lock:
            todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        fresh = dict(zip(todo, (unit(v) for v in (self.embed(todo) if todo else [])), strict=True))
        with self._lock:
            out = [fresh[t] if t in fresh else self._cache.get(t) for t in texts]  # read (and used) first
            lost = list(dict.fromkeys(t for t, v in zip(texts, out, strict=True) if v is None))
            if lost:  # another thread's texts pushed them out meanwhile
                fresh.update({t: unit(v) for t, v in zip(lost, self.embed(lost), strict=True)})
                out = [fresh[t] if v is None else v for t, v in zip(texts, out, strict=True)]
            for t, v in fresh.items():  # keeping the new ones may push out the oldest
                self._cache.put(t, v)
            return out


_BY_EMBEDDER: dict[int, tuple[object, MessageVectors]] = {}
_LOCK = threading.Lock()


def vectors_for(embedder) -> MessageVectors:
    """The process's message-vector cache for this embedder (one per embedder object)."""
    with _LOCK:
        got = _BY_EMBEDDER.get(id(embedder))
        if got is None or got[0] is not embedder:
            if len(_BY_EMBEDDER) >= 64:
                _BY_EMBEDDER.clear()
            got = _BY_EMBEDDER[id(embedder)] = (embedder, MessageVectors(embedder.embed_documents))
        return got[1]


def message_scores(store, user_id: str, records: Mapping[int, MemoryRecord], query_vector: Sequence[float] | None,
                   *, embedder, neighbours: Mapping[int, float] | None = None) -> dict[int, float]:
    """Record id → the best cosine between the question and one of the record's source messages
    (records without a source message score nothing).

    `neighbours` (offset → weight, e.g. {1: 0.3}) adds the context of adjacent turns in the same
    session: for each offset d, weight · max(0, best cosine of the message d turns after a source
    message) is added (d = 1: the reply to what the record's turn said, d = -1: what it answered)."""
    if query_vector is None or not records:
        return {}
    own = {mid for r in records.values() if r.source is not None for mid in r.source.message_ids}
    if not own:
        return {}
    offsets = {int(d): float(w) for d, w in (neighbours or {}).items() if w and int(d)}
    near = {m + d for m in own for d in offsets} - own
    msgs = {m.id: m for m in store.get_messages(user_id, sorted(own | near)) if m.content and m.content.strip()}
    if not msgs:
        return {}
    ids = list(msgs)
    vecs = vectors_for(embedder)([msgs[i].content for i in ids])
    cos = dict(zip(ids, (float(x) for x in np.stack(vecs) @ unit(query_vector)), strict=True))
    out: dict[int, float] = {}
    for rid, r in records.items():
        mids = [m for m in (r.source.message_ids if r.source is not None else ()) if m in cos]
        if not mids:
            continue
        score = max(cos[m] for m in mids)
        for d, w in offsets.items():
            adj = [cos[m + d] for m in mids if m + d in cos and msgs[m + d].session_id == msgs[m].session_id]
            if adj:
                score += w * max(0.0, max(adj))
        out[rid] = score
    return out
