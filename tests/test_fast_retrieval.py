"""The cheap retrieval path gives what the plain one gives: one tagged read for several tags, the
per-query dimension scorer, the candidate set as arrays, score rows built on demand."""

import random
from datetime import UTC, datetime, timedelta

import pytest

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.records import MemoryRecord, SourcePointer, TimeSpan
from engine.core.tokens import ApproxTokenCounter
from engine.memory.candidates import record_tokens
from engine.memory.dimension import DimensionScorer
from engine.memory.engine import MemoryEngine
from engine.memory.injection import render_record
from engine.memory.ranking import rank_candidates
from engine.memory.recall import logged_rows
from engine.memory.retrieval import newest_tagged, record_text
from engine.roles.embeddings import HashEmbeddings
from engine.roles.types import ParsedQuery, TimeConstraint

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
WORDS = "tea ramen hiking leeds snowdon grandmother peanut allergy coffee paris bike piano".split()


def _day(i: int) -> TimeSpan:
    start = T0 - timedelta(days=i % 9)
    return TimeSpan(start=start, end=start + timedelta(hours=23), granularity="day", text=f"day {i % 9}")


def _records(n: int, rng: random.Random, tag_weights: dict[str, float]) -> list[MemoryRecord]:
    out = []
    for i in range(n):
        tags = tuple(t for t, p in tag_weights.items() if rng.random() < p) or ("episode",)
        words = rng.sample(WORDS, 4)
        out.append(MemoryRecord(user_id="u", content=" ".join(words), memory_type="fact", tags=tags,
                                keywords=tuple(words[:2]), created_at=T0 - timedelta(hours=n - i),
                                location="Leeds" if i % 7 == 0 else None, time=_day(i) if i % 5 == 0 else None,
                                source=SourcePointer(session_id=f"s{i % 3}", message_ids=(i + 1,))))
    return out


@pytest.fixture
def engine():
    e = MemoryEngine(MemoryConfig(), clock=VirtualClock(T0), embedder=HashEmbeddings(64))
    recs = _records(120, random.Random(3), {"identity": 0.5, "preference": 0.4, "safety": 0.05})
    e.store.add_records(recs, e.embedder.embed_documents([record_text(r) for r in recs]))
    return e


@pytest.mark.parametrize("k", [1, 3, 10, 50, 200])
def test_one_tagged_read_gives_each_tags_newest_k(engine, k):
    tags = ["identity", "preference", "safety", "pinned"]
    for _ in range(2):  # the second time with the hint of which tags came short
        got = newest_tagged(engine.store, "u", tags, k=k)
        assert list(got) == tags
        for t in tags:
            alone = engine.store.records("u", tags_any=[t], limit=k, newest_first=True)
            assert [r.id for r in got[t]] == [r.id for r in alone], (t, k)
    assert newest_tagged(engine.store, "u", [], k=k) == {}


def _queries():
    span = TimeConstraint(op="around", start=T0 - timedelta(days=2), end=T0, granularity="day", text="recently")
    yield ParsedQuery(text="tea", keywords=["tea", "ramen"])
    yield ParsedQuery(text="tea", keywords=["green tea", "ramen"])
    yield ParsedQuery(text="where", keywords=["hiking"], location="Leeds", answer_dimension="location")
    yield ParsedQuery(text="when", target_types=["fact"], target_tags=["identity"], time=span)
    yield ParsedQuery(text="plain")


def test_dimension_scores_over_all_records_are_each_records_weighted_mean(engine):
    recs = engine.store.records("u")
    weights = engine.config.dim_weights
    for q in _queries():
        scorer = DimensionScorer(q, weights)
        got = scorer.score_all(recs)
        if not scorer.keys:
            assert got == [None] * len(recs) and scorer(recs[0]) is None
            continue
        cols = scorer._columns(recs)
        assert len(cols) == len(scorer.keys) and all(len(c) == len(recs) for c in cols)
        for j, r in enumerate(recs):
            # the per-record sum, bit for bit, and the same answer for the record alone
            want = sum(w * c[j] for w, c in zip(scorer.weights, cols, strict=True)) / scorer.total_w
            assert got[j] == want and scorer(r) == want and 0.0 <= want <= 1.0
        assert scorer.score_all([]) == []


def test_retrieval_rows_are_the_ranking_of_its_candidates(engine):
    for text in ("tea and ramen", "where is Leeds", "my allergy"):
        r = engine.retrieve("u", text, session_id="s0", log=True)
        rows, picked = rank_candidates(r.candidates, config=engine.config, weights=r.weights, excluded=r.excluded)
        assert picked == r.picked
        assert [x.to_dict() for x in r.rows] == [x.to_dict() for x in rows]
        stored = engine.store.scores(r.event_id)
        kept = logged_rows(rows, engine.config.score_log_rows, r.excluded)
        assert [x.to_dict() for x in stored] == [x.to_dict() for x in kept]
        assert engine.rescore(r, engine.config).picked == r.picked


def test_cached_token_counts_are_the_counters_count(engine):
    counter = ApproxTokenCounter()
    for rec in engine.store.records("u")[:30]:
        assert record_tokens(counter, rec) == counter.count(render_record(rec))
        assert record_tokens(counter, rec) == counter.count(render_record(rec))  # from the cache
