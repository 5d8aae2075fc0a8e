"""The dimension path's score: agreement between a question's constraints and a record's dimensions.

Parts (each in [0, 1], present only when the question has the constraint): type, tag, stated
attribute, answer field ("where …?" wants a record that states a place), time (interval match with
the `around` tolerances), location, keyword tokens and keyword phrases. The score is their mean
weighted by `dim_weights`, renormalised over the parts present. Which parts are present, their
weights and everything about the question is fixed for a query, so `DimensionScorer` works it out
once and then scores each record with only the record's side of the work (the records' token sets
are cached by content: the same records are re-scored by every query). On ASCII text the keyword
tokens are found in all the records at once (`token_hits`), so a record read for the first time
is not tokenised.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from functools import lru_cache
from itertools import accumulate

import numpy as np

from engine.core.attributes import stated_attribute
from engine.core.lru import per_object
from engine.core.records import MemoryRecord
from engine.core.text import STOPWORDS, content_token_set, content_tokens, normalize
from engine.core.timequery import time_match_all
from engine.roles.types import ParsedQuery

__all__ = ["DimensionScorer", "dimension_score", "has_constraint", "ANSWER_FIELDS", "HAYSTACK_SEP", "ascii_haystack",
           "joined_haystacks", "token_hits"]

#: The record field that holds each kind of answer (a question's `answer_dimension`).
ANSWER_FIELDS = {"time": "time", "location": "location", "reason": "reason", "purpose": "purpose"}


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
                 "q_kw", "kw_tokens", "multi", "needles")

    def __init__(self, query: ParsedQuery, weights: Mapping[str, float]):
        self.query = query
        self.types = query.target_types
        self.tags = set(query.target_tags)
        self.attributes = query.target_attributes
        self.answer_field = ANSWER_FIELDS.get(query.answer_dimension)
        self.location = _normalized(query.location) if query.location else None
        self.q_kw, self.kw_tokens, self.multi = _query_terms(tuple(query.keywords))
        keys = [k for k, on in (("type", self.types), ("tag", self.tags), ("attribute", self.attributes),
                                ("answer", self.answer_field), ("time", query.time is not None),
                                ("location", bool(query.location)), ("keyword_tokens", self.q_kw),
                                ("keyword_phrase", self.q_kw)) if on]
        self.keys = keys
        self.weights = [weights.get(k, 0.0) for k in keys]
        self.total_w = sum(self.weights)
        # what a record must hold as a substring to get keyword credit (`keyword_hits`); None: not
        # decidable that way (no keywords, or one is not ASCII)
        needles = tuple(dict.fromkeys([*self.kw_tokens, *self.q_kw]))
        self.needles = needles if needles and all(n.isascii() and HAYSTACK_SEP not in n for n in needles) else None

    def __call__(self, record: MemoryRecord) -> float | None:
        return self.score_all((record,))[0]

    def score_all(self, records: Sequence[MemoryRecord]) -> list[float] | list[None]:
        """Each record's score, in order (all None when the question has no constraint): part by part
        over all the records, then the weighted mean per record, added in the order of `keys` (the
        same floating-point operations as a sum per record)."""
        if not self.keys:
            return [None] * len(records)
        cols = self._columns(records)
        if self.total_w <= 0:
            return [float(v) for v in np.mean(np.array(cols, dtype=float), axis=0)] if records else []
        acc: np.ndarray | int = 0
        for w, col in zip(self.weights, cols, strict=True):
            acc = acc + w * np.array(col, dtype=float)
        return (np.asarray(acc, dtype=float) / self.total_w).tolist() if records else []

    def _columns(self, records: Sequence[MemoryRecord]) -> list[list[float]]:
        """The parts' values over the records, one list per part in the order of `keys`."""
        cols: list[list[float]] = []
        if self.types:
            types = self.types
            cols.append([1.0 if r.memory_type in types else 0.0 for r in records])
        if self.tags:
            tags = self.tags
            cols.append([1.0 if tags.intersection(r.tags) else 0.0 for r in records])
        if self.attributes:
            attrs = self.attributes
            cols.append([1.0 if (stated := _stated_attribute_name(r.content)) is not None
                         and stated.split(":")[0] in attrs else 0.0 for r in records])
        if self.answer_field:
            name = self.answer_field
            cols.append([1.0 if getattr(r, name) else 0.0 for r in records])
        if self.query.time is not None:
            when = self.query.time
            cols.append(time_match_all(when, [r.time for r in records]))
        if self.location is not None:
            loc = self.location
            cols.append([1.0 if loc and loc in _normalized(f"{r.location or ''} {r.content}") else 0.0
                         for r in records])
        if self.q_kw:
            cols.extend(self._keyword_columns(records))
        return cols

    def keyword_hits(self, records: Sequence[MemoryRecord]) -> list[int] | None:
        """The indexes (ascending) of `records` that may get keyword credit; every other one scores
        exactly 0 on both keyword parts. None when that cannot be told this way (`needles` is None).

        On ASCII text every token of a record (and every keyword it states, and its lower-cased
        content) is a substring of its lower-cased content + keywords + location, so a record holding
        none of the question's keywords and keyword tokens as a substring there scores 0 on the token
        and the phrase part. The records' texts are searched as one string (str.find per needle,
        jumping to the next record after a hit), not record by record. A record whose text is not
        ASCII (NFKC, curly apostrophes, segmentation) is always among them."""
        needles = self.needles
        if needles is None:
            return None
        hays, text, ends = joined_haystacks(records)
        found = {j for j, h in enumerate(hays) if h is None}
        for n in needles:
            at = text.find(n)
            while at >= 0:
                j = bisect_right(ends, at)
                found.add(j)
                at = text.find(n, ends[j])
        return sorted(found)

    def _keyword_columns(self, records: Sequence[MemoryRecord]) -> tuple[list[float], list[float]]:
        """(share of the keyword tokens each record has, its phrase part): 0 and 0 for the records
        `keyword_hits` leaves out, when the question has other parts too (a time constraint reads up
        to 200 records, most without a keyword: they are not tokenised or scored one by one; a
        keywords-only question's records were filtered so before the dimension path scored them)."""
        may = self.keyword_hits(records) if len(self.keys) > 2 else None
        if may is None or len(may) == len(records):
            return self._keyword_parts(records)
        tokens, phrases = [0.0] * len(records), [0.0] * len(records)
        for j, t, p in zip(may, *self._keyword_parts([records[j] for j in may]), strict=True):
            tokens[j], phrases[j] = t, p
        return tokens, phrases

    def _keyword_parts(self, records: Sequence[MemoryRecord]) -> tuple[list[float], list[float]]:
        """(share of the keyword tokens each record has, its phrase part).

        The phrase part: with multi-word (or CJK) keywords, the share of those the record lists as a
        keyword or its content holds; otherwise 1 when the record lists one of the keywords, else
        the share of the keywords its content holds.

        A record met for its first few times (a question's bm25 and dense hits are mostly new to the
        process) is not tokenised when its text is ASCII: `token_hits` finds the keyword tokens in
        all of those at once. One met more often (`SEARCH_SIGHTINGS`) is tokenised once and its
        token set kept (a session's records are re-scored every turn: a set intersection is
        cheaper than a search)."""
        kw_tokens, q_kw, multi = self.kw_tokens, self.q_kw, self.multi
        n_tokens, n_kw, n_multi = len(kw_tokens), len(q_kw), len(multi)
        tokens: list[float] = []
        phrases: list[float] = []
        keys = [_text_key(r) for r in records]
        kept = [_TERMS.get(k) for k in keys]
        seen = _SEARCHED
        first = [j for j, k in enumerate(keys) if kept[j] is None and seen.get(k, 0) < SEARCH_SIGHTINGS]
        found: dict[int, int] = {}
        counts = token_hits(kw_tokens, [records[j] for j in first]) if first else None
        for j, count in zip(first, counts, strict=True) if counts is not None else ():
            if count is not None:
                found[j] = count
                if len(seen) >= _TEXTS_MAX:
                    seen.clear()
                seen[keys[j]] = seen.get(keys[j], 0) + 1
        for j, r in enumerate(records):
            count = found.get(j)
            if count is None:
                hay_tokens, rec_kw, content = kept[j] or _record_terms(keys[j])
                tokens.append(len(kw_tokens & hay_tokens) / n_tokens if n_tokens else 0.0)
            else:
                rec_kw, content = _ascii_keywords(r)
                tokens.append(count / n_tokens if n_tokens else 0.0)
            hits = 0
            if multi:
                for k in multi:
                    if k in rec_kw or k in content:
                        hits += 1
                phrases.append(hits / n_multi)
            elif rec_kw and not rec_kw.isdisjoint(q_kw):
                phrases.append(1.0)
            else:
                for k in q_kw:
                    if k in content:
                        hits += 1
                phrases.append(hits / n_kw)
        return tokens, phrases


#: Joins records' haystacks into one string (no record text holds it).
HAYSTACK_SEP = "\x00"


@per_object()
def ascii_haystack(rec: MemoryRecord) -> str | None:
    """A record's lower-cased "content keywords location" (the text its token set is made from),
    None when it is not ASCII; kept per record object (records are frozen and the store hands back
    the same objects while nothing was written)."""
    return _ascii_haystack(*_text_key(rec))


@lru_cache(maxsize=1 << 16)
def _ascii_haystack(content: str, keywords: tuple[str, ...], location: str) -> str | None:
    hay = f"{content} {' '.join(keywords)} {location}"
    return hay.lower() if hay.isascii() and HAYSTACK_SEP not in hay else None


def joined_haystacks(records: Sequence[MemoryRecord]) -> tuple[list[str | None], str, list[int]]:
    """The records' `ascii_haystack`s, joined by HAYSTACK_SEP into one string to search, and the
    separator's offset after each (`bisect_right(ends, at)` is the record holding offset `at`)."""
    hays = [ascii_haystack(r) for r in records]
    text = HAYSTACK_SEP.join([h or "" for h in hays])
    return hays, text, list(accumulate(len(h or "") + 1 for h in hays))


_PLAIN_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")


def token_hits(needles: frozenset[str] | set[str], records: Sequence[MemoryRecord]) -> list[int | None] | None:
    """How many of `needles` each record's token set (`content_token_set` of its haystack) holds,
    found in all the records' ASCII haystacks at once instead of tokenising each record; None for
    a record that is not ASCII (tokenise it), and None for all when a needle is not one plain
    ASCII token (lower-case letters and digits, inner apostrophes, no possessive "'s").

    ASCII tokens are maximal runs of [a-z0-9]+('[a-z0-9]+)* of the lower-cased text; a token
    ending in "'s" counts without it, and stopwords never count. So an occurrence of a needle is
    a hit when no token runs into it from the left (no letter or digit before it, nor an
    apostrophe after one) and the token ends right after it, or right after a possessive "'s"."""
    live = [t for t in needles if t not in STOPWORDS]
    if not all(_PLAIN_TOKEN.fullmatch(t) and not t.endswith("'s") for t in live):
        return None
    hays, text, ends = joined_haystacks(records)
    counts = [0] * len(hays)
    n = len(text)
    for t in live:
        size, last = len(t), -1
        at = text.find(t)
        while at >= 0:
            if not _runs_in(text, at) and _ends_at(text, at + size, n):
                j = bisect_right(ends, at)
                if j != last:  # a needle counts once per record
                    counts[j] += 1
                    last = j
            at = text.find(t, at + size)  # occurrences of one token cannot overlap a hit
    return [None if h is None else c for h, c in zip(hays, counts, strict=True)]


def _alnum(ch: str) -> bool:
    return ("a" <= ch <= "z") or ("0" <= ch <= "9")


def _runs_in(text: str, at: int) -> bool:
    """Whether a token of `text` runs into position `at` from the left (a letter or digit right
    before it, or one and an apostrophe)."""
    if at == 0:
        return False
    before = text[at - 1]
    return _alnum(before) or (before == "'" and at >= 2 and _alnum(text[at - 2]))


def _ends_at(text: str, e: int, n: int) -> bool:
    """Whether the token whose letters or digits run up to `e` ends there, or right after a
    possessive "'s" there."""
    if e < n and _alnum(text[e]):
        return False
    if e + 1 < n and text[e] == "'" and _alnum(text[e + 1]):
        if text[e + 1] != "s":
            return False
        e += 2
        return not ((e < n and _alnum(text[e])) or (e + 1 < n and text[e] == "'" and _alnum(text[e + 1])))
    return True


@per_object()
def _ascii_keywords(record: MemoryRecord) -> tuple[frozenset[str], str]:
    """The keyword set and normalised content `_record_terms` gives an ASCII record (normalising
    ASCII is lower-casing), without its token set."""
    return frozenset(k.lower() for k in record.keywords), record.content.lower()


def _text_key(record: MemoryRecord) -> tuple[str, tuple[str, ...], str]:
    """(content, keywords, location): what a record's terms are made from."""
    keywords = record.keywords
    return record.content, keywords if type(keywords) is tuple else tuple(keywords), record.location or ""


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


#: Records' terms by their text (the same records are re-scored by every query, and tokenising
#: dominated the dimension path's time); bounded: cleared when full.
_TERMS: dict[tuple[str, tuple[str, ...], str], tuple[frozenset[str], frozenset[str], str]] = {}
#: A text's keyword tokens are searched for (`token_hits`) on its first this-many sightings; the
#: next one tokenises it and keeps the set. Questions on a large partition mostly meet records once
#: or twice (tokenising them is wasted), a session re-scores the same records every turn (a kept
#: set is cheaper than searching them again).
SEARCH_SIGHTINGS = 2
#: Sightings searched so far, by text.
_SEARCHED: dict[tuple[str, tuple[str, ...], str], int] = {}
_TEXTS_MAX = 1 << 16


def _record_terms(key: tuple[str, tuple[str, ...], str]) -> tuple[frozenset[str], frozenset[str], str]:
    """A record's token set, keyword set and normalised content, from (content, keywords, location)."""
    got = _TERMS.get(key)
    if got is None:
        content, keywords, location = key
        got = (content_token_set(f"{content} {' '.join(keywords)} {location}"),
               frozenset(normalize(k) for k in keywords), normalize(content))
        if len(_TERMS) >= _TEXTS_MAX:
            _TERMS.clear()
        _TERMS[key] = got
    return got
