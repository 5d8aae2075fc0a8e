"""Message candidates: records found through the turns nearest the question, not only through their own text.

The other paths find a record by what it says; extraction makes atomic records that lose their
turn's words, so a record whose turn answers the question can be missed by BM25 and dense alike
(on LoCoMo dev5 ~18% of gold evidence turns were never a candidate). This path searches the
user's messages by cosine to the question and brings in the records made from the nearest ones
(a message → record map), each with its own dense cosine so it is fused like any dense hit.

`feedback` (pseudo-relevance feedback for questions that gather several items): the source
turns of the best candidates are averaged into the question vector and the messages searched
again, so turns like the ones that answered find their siblings in other sessions.

The index is per process, per (store, user): message vectors embedded once (appended as new
messages arrive, read by id cursor: a bounded read per retrieval) and the message → record map
(appended from a record-id cursor). A merge that adds a message to an existing record is
picked up only when the record is re-read: the map lists the record under its first messages.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.core.records import MemoryRecord
from engine.memory.messagepath import vectors_for

__all__ = ["turn_lexical_scores", "MessageIndex", "message_index", "nearest_messages", "message_candidates", "INDEX_LIMIT"]

#: Messages kept per user in the in-process index (the newest; older ones are left to the other paths).
INDEX_LIMIT = 100_000


@dataclass(slots=True)
class MessageIndex:
    """One user's message vectors (rows of `mat`, ids in `ids`) and message → record ids."""

    ids: list[int] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    mat: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    records_of: dict[int, list[int]] = field(default_factory=dict)
    last_message: int = 0
    last_record: int = 0
    terms: dict[int, dict[str, int]] = field(default_factory=dict)  # message id → term counts (BM25)
    df: dict[str, int] = field(default_factory=dict)
    postings: dict[str, list[int]] = field(default_factory=dict)
    total_len: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refresh(self, store, user_id: str, embedder) -> None:
        with self.lock:
            new = [m for m in store.messages(user_id, after_id=self.last_message or None)
                   if m.content and m.content.strip()]
            if new:
                vecs = np.stack(vectors_for(embedder)([m.content for m in new])).astype(np.float32)
                self.mat = vecs if self.mat.size == 0 else np.vstack([self.mat, vecs])
                self.ids.extend(m.id for m in new)
                self.sessions.extend(m.session_id for m in new)
                self.last_message = max(self.last_message, max(m.id for m in new))
                for m in new:
                    tf = _term_counts(m.content)
                    self.terms[m.id] = tf
                    self.total_len += sum(tf.values())
                    for t in tf:
                        self.df[t] = self.df.get(t, 0) + 1
                        self.postings.setdefault(t, []).append(m.id)
                if len(self.ids) > INDEX_LIMIT:
                    cut = len(self.ids) - INDEX_LIMIT
                    self.mat, self.ids, self.sessions = self.mat[cut:], self.ids[cut:], self.sessions[cut:]
            recs = store.records(user_id, include_invalid=True, after_id=self.last_record or None)
            for r in recs:
                self.last_record = max(self.last_record, r.id)
                if r.source is not None:
                    for mid in r.source.message_ids:
                        self.records_of.setdefault(mid, []).append(r.id)

    def bm25(self, query: str, ids, *, k1: float = 1.2, b: float = 0.75) -> dict[int, float]:
        """Okapi BM25 of the question against these messages' text (statistics over the index)."""
        n = len(self.terms)
        if not n:
            return {}
        avg = self.total_len / n or 1.0
        qt = [t for t in _term_counts(query) if t in self.df]
        idf = {t: float(np.log(1.0 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5))) for t in qt}
        out = {}
        for mid in ids:
            tf = self.terms.get(mid)
            if not tf:
                continue
            dl = sum(tf.values())
            s = sum(idf[t] * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * dl / avg)) for t in qt if t in tf)
            if s > 0:
                out[mid] = s
        return out

    def lexical(self, query: str, k: int) -> list[tuple[int, float]]:
        """The `k` messages with the best BM25 for the question (via the postings of its terms)."""
        ids = {m for t in _term_counts(query) for m in self.postings.get(t, ())}
        bm = self.bm25(query, ids)
        return sorted(bm.items(), key=lambda x: (-x[1], x[0]))[:k]

    def nearest(self, q: np.ndarray, k: int, exclude: frozenset[int] = frozenset()) -> list[tuple[int, float]]:
        if not self.ids or k <= 0:
            return []
        cos = self.mat @ q
        if exclude:
            for j, mid in enumerate(self.ids):
                if mid in exclude:
                    cos[j] = -np.inf
        k = min(k, len(self.ids))
        top = np.argpartition(-cos, k - 1)[:k]
        top = sorted(top, key=lambda j: (-cos[j], self.ids[j]))
        return [(self.ids[j], float(cos[j])) for j in top if np.isfinite(cos[j])]


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the and or but of to in on at for with by from as is are was were be been being do does did "
                  "i you he she it we they me him her us them my your his its our their this that these those what "
                  "which who whom when where why how s t said".split())


def _term_counts(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for w in _WORD.findall(text.lower()):
        if w not in _STOP:
            out[w] = out.get(w, 0) + 1
    return out


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


def _unit(v) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / (float(np.linalg.norm(a)) or 1.0)


def nearest_messages(store, user_id: str, query_vector, *, embedder, k: int) -> list[tuple[int, float]]:
    """The user's `k` messages nearest the question (message id, cosine), best first."""
    return message_index(store, user_id, embedder).nearest(_unit(query_vector), k)


def message_candidates(store, user_id: str, query_vector: Sequence[float] | None, *, embedder, k: int,
                       have: Mapping[int, MemoryRecord], per_message: int = 1, include_history: bool = False,
                       seeds: Sequence[MemoryRecord] = (), feedback: float = 0.0, feedback_k: int = 0,
                       query_text: str = "", lexical_k: int = 0) -> tuple[dict[int, MemoryRecord], dict[int, float]]:
    """Records made from the `k` messages nearest the question that are not in `have` yet, and
    their dense cosine to the question (so the dense path scores them as if it had found them).

    `per_message`: at most this many records per message (the ones nearest the question first);
    `seeds` with `feedback` w > 0: a second search with (1 - w)·question + w·mean(seeds' source
    turns), `feedback_k` more messages."""
    if query_vector is None or (k <= 0 and lexical_k <= 0):
        return {}, {}
    index = message_index(store, user_id, embedder)
    q = _unit(query_vector)
    hits = index.nearest(q, k)
    if lexical_k > 0 and query_text:
        seen0 = {m for m, _ in hits}
        hits += [(m, s) for m, s in index.lexical(query_text, lexical_k) if m not in seen0]
    if feedback > 0 and feedback_k > 0 and seeds:
        pos = {mid: j for j, mid in enumerate(index.ids)}
        rows = [pos[m] for s in seeds if s.source is not None for m in s.source.message_ids if m in pos]
        if rows:
            fb = _unit((1.0 - feedback) * q + feedback * _unit(index.mat[rows].mean(axis=0)))
            seen = frozenset(m for m, _ in hits)
            hits += index.nearest(fb, feedback_k, exclude=seen)
    want: list[int] = []
    for mid, _ in hits:
        for rid in index.records_of.get(mid, ()):
            if rid not in have:
                want.append(rid)
    want = list(dict.fromkeys(want))
    if not want:
        return {}, {}
    recs = {r.id: r for r in store.get_records(user_id, want) if include_history or r.is_current}
    vecs = store.vectors(user_id, list(recs))
    dense = {rid: float(_unit(v) @ q) for rid, v in vecs.items() if rid in recs}
    if per_message > 0:
        keep: set[int] = set()
        for mid, _ in hits:
            mine = [rid for rid in index.records_of.get(mid, ()) if rid in dense]
            mine.sort(key=lambda rid: (-dense[rid], rid))
            keep.update(mine[:per_message])
        recs = {i: r for i, r in recs.items() if i in keep}
        dense = {i: s for i, s in dense.items() if i in keep}
    return recs, dense


def with_message_candidates(store, user_id: str, results, query_vector, *, embedder, config, query_text: str = ""):
    """`results` (retrieval.PathResults) plus the message candidates `config` asks for: the new
    records join `records`, their cosine joins the dense path's scores."""
    from dataclasses import replace

    seeds: list[MemoryRecord] = []
    if config.message_feedback > 0 and config.message_feedback_k > 0 and results.dense:
        best = sorted(results.dense, key=lambda i: (-results.dense[i], i))[:5]
        seeds = [results.records[i] for i in best if i in results.records]
    recs, dense = message_candidates(store, user_id, query_vector, embedder=embedder, k=config.message_candidates,
                                     have=results.records, per_message=config.message_per_turn,
                                     include_history=config.include_history, seeds=seeds,
                                     feedback=config.message_feedback, feedback_k=config.message_feedback_k,
                                     query_text=query_text, lexical_k=config.message_lexical_candidates)
    if not recs:
        return results
    records = {**results.records, **recs}
    return replace(results, records={i: records[i] for i in sorted(records)}, dense={**results.dense, **dense})


def turn_lexical_scores(store, user_id: str, records: Mapping[int, MemoryRecord], query: str, *,
                        embedder) -> dict[int, float]:
    """Record id → BM25 of the question against its best source message, scaled so the best
    candidate's is 1 (the words of the turn the atomic record lost, matched lexically)."""
    index = message_index(store, user_id, embedder)
    mids = {m for r in records.values() if r.source is not None for m in r.source.message_ids}
    bm = index.bm25(query, mids)
    if not bm:
        return {}
    out = {}
    for rid, r in records.items():
        got = [bm[m] for m in (r.source.message_ids if r.source is not None else ()) if m in bm]
        if got:
            out[rid] = max(got)
    hi = max(out.values())
    return {i: s / hi for i, s in out.items()}
