"""The dimension path's score: agreement between a question's constraints and a record's dimensions.

Parts (each in [0, 1], present only when the question has the constraint): type, tag, stated
attribute, answer field ("where …?" wants a record that states a place), time (interval match with
the `around` tolerances), location, keyword tokens and keyword phrases. The score is their mean
weighted by `dim_weights`, renormalised over the parts present. Which parts are present, their
weights and everything about the question is fixed for a query, so `DimensionScorer` works it out
once and then scores each record with only the record's side of the work (the records' token sets
are cached by content: the same records are re-scored by every query).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from engine.core.attributes import stated_attribute
from engine.core.records import MemoryRecord
from engine.core.text import content_tokens, normalize
from engine.core.timequery import time_match
from engine.roles.types import ParsedQuery

__all__ = ["DimensionScorer", "dimension_score", "has_constraint", "ANSWER_FIELDS"]

#: The record field that holds each kind of answer (a question's `answer_dimension`).
ANSWER_FIELDS = {"time": "time", "location": "location", "reason": "reason", "purpose": "purpose"}
_KEYWORDS_ONLY = ["keyword_tokens", "keyword_phrase"]


def has_constraint(query: ParsedQuery) -> bool:
    return bool(query.target_types or query.target_tags or query.target_attributes or query.time or query.location
                or query.keywords or query.answer_dimension in ANSWER_FIELDS)


def dimension_score(query: ParsedQuery, record: MemoryRecord, *, weights: Mapping[str, float]) -> float | None:
    """Agreement between the query's constraints and the record's dimensions, in [0, 1].

    None when the query has no constraint at all (the path is then inactive).
    """
    return DimensionScorer(query, weights)(record)


class DimensionScorer:
    """`dimension_score` for one query, its side computed once; call it on each record."""

    __slots__ = ("query", "keys", "weights", "total_w", "types", "tags", "attributes", "answer_field", "location",
                 "q_kw", "kw_tokens", "multi", "spaced")

    def __init__(self, query: ParsedQuery, weights: Mapping[str, float]):
        self.query = query
        self.types = query.target_types
        self.tags = set(query.target_tags)
        self.attributes = query.target_attributes
        self.answer_field = ANSWER_FIELDS.get(query.answer_dimension)
        self.location = _normalized(query.location) if query.location else None
        self.q_kw, self.kw_tokens, self.multi = _query_terms(tuple(query.keywords))
        self.spaced = tuple(k for k in self.q_kw if " " in k)
        keys = [k for k, on in (("type", self.types), ("tag", self.tags), ("attribute", self.attributes),
                                ("answer", self.answer_field), ("time", query.time is not None),
                                ("location", bool(query.location)), ("keyword_tokens", self.q_kw),
                                ("keyword_phrase", self.q_kw)) if on]
        self.keys = keys
        self.weights = [weights.get(k, 0.0) for k in keys]
        self.total_w = sum(self.weights)

    def __call__(self, record: MemoryRecord) -> float | None:
        if not self.keys:
            return None
        if self.keys == _KEYWORDS_ONLY and self.total_w > 0:  # the common question: keywords only
            tokens, phrase = self._keyword_parts(record)
            return float((self.weights[0] * tokens + self.weights[1] * phrase) / self.total_w)
        values = self._parts(record)
        if self.total_w <= 0:
            return float(np.mean(values))
        return float(sum(w * v for w, v in zip(self.weights, values, strict=True)) / self.total_w)

    def _parts(self, record: MemoryRecord) -> list[float]:
        """The parts' values in the order of `keys`."""
        out: list[float] = []
        if self.types:
            out.append(1.0 if record.memory_type in self.types else 0.0)
        if self.tags:
            out.append(1.0 if self.tags & set(record.tags) else 0.0)
        if self.attributes:
            stated = _stated_attribute_name(record.content)
            out.append(1.0 if stated is not None and stated.split(":")[0] in self.attributes else 0.0)
        if self.answer_field:
            out.append(1.0 if getattr(record, self.answer_field) else 0.0)
        if self.query.time is not None:
            out.append(float(time_match(self.query.time, record.time)))
        if self.location is not None:
            loc = self.location
            out.append(1.0 if loc and loc in _normalized(f"{record.location or ''} {record.content}") else 0.0)
        if self.q_kw:
            out.extend(self._keyword_parts(record))
        return out

    def _keyword_parts(self, record: MemoryRecord) -> tuple[float, float]:
        """(keyword tokens the record has, share of the keyword phrases it states)."""
        kw_tokens, keywords = self.kw_tokens, record.keywords
        hay_tokens, rec_kw, content = _record_terms(record.content, keywords if type(keywords) is tuple
                                                    else tuple(keywords), record.location or "")
        tokens = len(kw_tokens & hay_tokens) / len(kw_tokens) if kw_tokens else 0.0
        pool = self.multi or ([k for k in self.q_kw if " " in k or k in rec_kw] if rec_kw else self.spaced) or self.q_kw
        hits = 0
        for k in pool:
            if k in rec_kw or k in content:
                hits += 1
        return tokens, hits / len(pool)


@lru_cache(maxsize=1024)
def _query_terms(keywords: tuple[str, ...]) -> tuple[tuple[str, ...], frozenset[str], tuple[str, ...]]:
    """A query's normalised keywords, their token set and its multi-word/Chinese phrases (the same
    for every record a query is scored against, so computed once per query)."""
    q_kw = [normalize(k) for k in keywords if k.strip()]
    kw_tokens: set[str] = set()
    for k in q_kw:
        kw_tokens.update(content_tokens(k) or [k])
    multi = tuple(k for k in q_kw if " " in k or re.search(r"[\u4e00-\u9fff]{2,}", k))
    return tuple(q_kw), frozenset(kw_tokens), multi


@lru_cache(maxsize=1 << 16)
def _stated_attribute_name(content: str) -> str | None:
    found = stated_attribute(content)
    return found.name if found is not None else None


@lru_cache(maxsize=1 << 16)
def _normalized(text: str) -> str:
    return normalize(text)


@lru_cache(maxsize=1 << 16)
def _record_terms(content: str, keywords: tuple[str, ...], location: str) -> tuple[frozenset[str], frozenset[str], str]:
    """A record's token set, keyword set and normalised content (cached: the same records are
    re-scored by every query, and tokenising dominated the dimension path's time)."""
    hay = frozenset(content_tokens(f"{content} {' '.join(keywords)} {location}"))
    return hay, frozenset(normalize(k) for k in keywords), normalize(content)
