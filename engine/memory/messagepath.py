"""The message path: records found by what their turn said, not only by what they say.

Extraction makes atomic records ("Caroline said: Recently.", "It's special to Melanie."), and an
atomic record loses the words of the turn it came from. The message path ranks the user's
messages by cosine to the question and credits each current record made from a message with
that message's cosine (the best of its source messages), so a record is found when its turn
answers the question even if its own text does not. It is fused like the other paths (its share
is `path_weights["message"]`).

Message vectors: the embedding of each message's text, kept per (store, user) in this process
and extended incrementally (messages are append-only: only ids past the newest one seen are
read and embedded); the message → record map is rebuilt when the user's current records change
(their count or newest id). A store that keeps message vectors itself (a later migration) can
replace this cache without changing the path.

Measured on LoCoMo dev5 (MiniLM, scripted extractor, record vectors with source_context 0.5):
see ARCHITECTURE and the issue-17 notes in engine.eval.locomo.methods.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.core.records import MemoryRecord

__all__ = ["MessageIndex", "message_path", "message_index"]


@dataclass(slots=True)
class MessageIndex:
    """One user's message vectors (unit rows, by message id) and message → current record ids."""

    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    mat: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    last_id: int = 0
    records_key: tuple[int, int] | None = None
    to_records: dict[int, list[int]] = field(default_factory=dict)

    def extend(self, ids: Sequence[int], vectors: Sequence[Sequence[float]]) -> None:
        if not ids:
            return
        m = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        m = m / np.where(norms > 0, norms, 1.0)
        self.mat = m if not len(self.ids) else np.vstack([self.mat, m])
        self.ids = np.concatenate([self.ids, np.asarray(ids, dtype=np.int64)])
        self.last_id = max(self.last_id, int(max(ids)))

    def top(self, query_vector: Sequence[float], k: int) -> list[tuple[int, float]]:
        """The `k` messages nearest the query: (message id, cosine), best first."""
        if not len(self.ids) or k <= 0:
            return []
        q = np.asarray(query_vector, dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)
        sims = self.mat @ q
        k = min(k, len(sims))
        part = np.argpartition(-sims, k - 1)[:k]
        part = part[np.lexsort((self.ids[part], -sims[part]))]
        return [(int(self.ids[j]), float(sims[j])) for j in part]


_INDEXES: dict[tuple[int, str], MessageIndex] = {}
_LOCK = threading.Lock()
_MAX_USERS = 256


def message_index(store, user_id: str, embed: Callable[[list[str]], list[list[float]]]) -> MessageIndex:
    """The user's message index, brought up to date with the store (new messages embedded, the
    record map rebuilt when the current records changed)."""
    key = (id(store), user_id)
    with _LOCK:
        idx = _INDEXES.get(key)
        if idx is None:
            if len(_INDEXES) >= _MAX_USERS:
                _INDEXES.clear()
            idx = _INDEXES[key] = MessageIndex()
        new = [m for m in store.messages(user_id, after_id=idx.last_id) if m.content and m.content.strip()]
        if new:
            idx.extend([m.id for m in new], embed([m.content for m in new]))
        count = store.count_records(user_id, include_invalid=False)
        rkey = (count, idx.last_id)
        if idx.records_key != rkey:
            mapping: dict[int, list[int]] = {}
            for r in store.records(user_id, include_invalid=False):
                for mid in (r.source.message_ids if r.source is not None else ()):
                    mapping.setdefault(mid, []).append(r.id)
            idx.to_records, idx.records_key = mapping, rkey
        return idx


def forget(store, user_id: str) -> None:
    with _LOCK:
        _INDEXES.pop((id(store), user_id), None)


def message_path(store, user_id: str, query_vector: Sequence[float], *, k: int,
                 embed: Callable[[list[str]], list[list[float]]]) -> dict[int, float]:
    """Record id → the best cosine between the question and one of the record's source messages,
    over the `k` messages nearest the question."""
    idx = message_index(store, user_id, embed)
    out: dict[int, float] = {}
    for mid, cos in idx.top(query_vector, k):
        for rid in idx.to_records.get(mid, ()):
            if cos > out.get(rid, -2.0):
                out[rid] = cos
    return out


def rescore(records: Mapping[int, MemoryRecord], vectors: Mapping[int, np.ndarray], query_vector) -> dict[int, float]:
    """Record id → best cosine of its source messages (given message vectors), for records already found."""
    q = np.asarray(query_vector, dtype=np.float32)
    q = q / (np.linalg.norm(q) or 1.0)
    out: dict[int, float] = {}
    for rid, r in records.items():
        best = None
        for mid in (r.source.message_ids if r.source is not None else ()):
            v = vectors.get(mid)
            if v is not None:
                s = float(v @ q)
                best = s if best is None or s > best else best
        if best is not None:
            out[rid] = best
    return out
