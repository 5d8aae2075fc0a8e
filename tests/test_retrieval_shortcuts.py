"""The retrieval's shortcuts change no result: the keyword prefilter only skips records the
dimension path scores 0, token counts read lazily equal the counts, a record's fixed inputs kept
per object are the record's."""

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.core.config import MemoryConfig
from engine.core.records import MemoryRecord, SourcePointer, TimeSpan
from engine.core.tokens import ApproxTokenCounter
from engine.memory.candidates import CandidateSet, LazyTokens, record_tokens
from engine.memory.dimension import DimensionScorer
from engine.memory.retrieval import keyword_prefilter
from engine.roles.types import ParsedQuery, TimeConstraint

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
WORDS = ("tea ramen hiking leeds snowdon grandmother peanut allergy coffee paris bike piano Tea RAMEN "
         "runner's café naïve 咖啡 北京 can't don’t").split()


def _records(n: int, rng: random.Random) -> list[MemoryRecord]:
    out = []
    for i in range(n):
        words = rng.sample(WORDS, 4)
        out.append(MemoryRecord(id=i + 1, user_id="u", content=" ".join(words[1:]), memory_type="fact",
                                tags=("identity",) if i % 2 else ("preference", "safety"),
                                keywords=tuple(words[:1 + i % 2]), created_at=T0 - timedelta(hours=i),
                                location=rng.choice([None, "Leeds", "paris", "北京"]),
                                source=SourcePointer(session_id=f"s{i % 3}", message_ids=(i + 1, i + 2))))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_keyword_prefilter_skips_only_records_scored_zero(seed):
    rng = random.Random(seed)
    recs = _records(80, rng)
    weights = MemoryConfig().dim_weights
    skipped = 0
    for _ in range(40):
        kws = rng.sample([*WORDS, "hiking boots", "peanut allergy", "tea ramen", "run", "e", "zzz"], rng.randint(1, 3))
        scorer = DimensionScorer(ParsedQuery(text=" ".join(kws), keywords=kws), weights)
        may = keyword_prefilter(scorer)
        assert may is not None or not all(k.isascii() for k in kws)
        kept = may(recs) if may is not None else list(range(len(recs)))
        assert kept == sorted(set(kept))
        for j, r in enumerate(recs):
            if j not in kept:
                skipped += 1
                assert scorer(r) == 0.0, (kws, r.content, r.keywords, r.location)
            if may is not None:  # one string for all records answers as each record alone
                assert may([r]) == ([0] if j in kept else [])
    assert skipped > 0  # the test exercises the skip


@pytest.mark.parametrize("seed", range(4))
def test_questions_with_other_parts_score_as_if_every_record_were_scored_one_by_one(seed):
    rng = random.Random(seed)
    recs = _records(120, rng)
    weights = MemoryConfig().dim_weights
    span = TimeSpan(start=T0 - timedelta(days=3), end=T0, granularity="day", text="lately")
    shortcut = 0
    for _ in range(30):
        kws = rng.sample([*WORDS, "hiking boots", "peanut allergy", "tea ramen", "run", "e", "zzz"], rng.randint(1, 3))
        q = ParsedQuery(text=" ".join(kws), keywords=kws, location=rng.choice([None, "Leeds"]),
                        target_types=rng.choice([[], ["fact"]]),
                        time=rng.choice([None, TimeConstraint(op="around", start=span.start, end=span.end,
                                                               granularity="day", text="lately")]))
        scorer = DimensionScorer(q, weights)
        if len(scorer.keys) <= 2:
            continue
        may = scorer.keyword_hits(recs)
        shortcut += may is not None and len(may) < len(recs)
        tokens, phrases = scorer._keyword_parts(recs)  # every record, one by one
        assert scorer._keyword_columns(recs) == (tokens, phrases)
        assert scorer.score_all(recs) == [scorer.score_all([r])[0] for r in recs]
    assert shortcut > 0  # the test exercises the shortcut


def test_keyword_prefilter_only_for_keyword_only_questions():
    weights = MemoryConfig().dim_weights
    assert keyword_prefilter(DimensionScorer(ParsedQuery(text="where", keywords=["tea"], location="Leeds"),
                                             weights)) is None
    assert keyword_prefilter(DimensionScorer(ParsedQuery(text="x", keywords=["咖啡"]), weights)) is None
    assert keyword_prefilter(DimensionScorer(ParsedQuery(text="x", keywords=["tea"]), weights)) is not None


def test_lazy_tokens_count_on_first_read_only():
    recs = _records(10, random.Random(1))
    counter, seen = ApproxTokenCounter(), []

    def count(r):
        seen.append(r.id)
        return record_tokens(counter, r)

    lazy = LazyTokens(recs, count)
    assert len(lazy) == 10 and not seen
    assert lazy[3] == record_tokens(counter, recs[3]) and lazy[3] == lazy[-7]
    assert seen == [4]
    assert list(lazy) == [record_tokens(counter, r) for r in recs]
    assert lazy[2:4] == list(lazy)[2:4]
    assert sorted(seen) == list(range(1, 11))
    with pytest.raises(IndexError):
        lazy[10]


def test_candidate_set_inputs_are_the_records():
    recs = {r.id: r for r in _records(30, random.Random(2))}
    counter = ApproxTokenCounter()
    for _ in range(2):  # the second time from what was kept per record
        cs = CandidateSet.from_records(recs, {i: 0.5 for i in recs}, path_scores={"bm25": {1: 2.0}}, now=T0,
                                       count_tokens=lambda r: record_tokens(counter, r))
        for i, rid in enumerate(cs.ids):
            r = recs[rid]
            c = cs.candidate(i)
            assert c.tags == tuple(r.tags) and c.sources == frozenset(r.source.message_ids)
            assert c.session == r.source.session_id and c.tokens == record_tokens(counter, r)
    changed = {i: MemoryRecord(**{**{f: getattr(r, f) for f in r.__dataclass_fields__}, "tags": ("episode",)})
               for i, r in recs.items()}
    cs = CandidateSet.from_records(changed, {}, path_scores={}, now=T0, count_tokens=lambda r: 1)
    assert all(t == ("episode",) for t in cs.tags)
    assert len(CandidateSet.from_records({}, {}, path_scores={}, now=T0, count_tokens=lambda r: 1)) == 0


@settings(max_examples=200, deadline=None)
@given(reinforced=st.lists(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1),
                                        timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7, minutes=-30)),
                                                                   timezone(timedelta(hours=13))])),
                           min_size=1, max_size=8),
       now=st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)),
       count=st.integers(0, 50))
@example(reinforced=[datetime(1905, 1, 1, tzinfo=UTC)], now=datetime(2191, 1, 1, 0, 0, 0, 1, tzinfo=UTC), count=0)
def test_candidate_age_and_count_are_the_records(reinforced, now, count):  # (286 years: past 2**53 microseconds)
    recs = {i + 1: MemoryRecord(id=i + 1, user_id="u", content="x", memory_type="fact", created_at=T0,
                                last_reinforced_at=when, strengthen_count=count) for i, when in enumerate(reinforced)}
    cs = CandidateSet.from_records(recs, {}, path_scores={}, now=now, count_tokens=lambda r: 1)
    for i, rid in enumerate(cs.ids):  # bit for bit the seconds of the timedelta, never below 0
        assert cs.age[i] == max(0.0, (now - recs[rid].reinforced_at).total_seconds())
        assert cs.n[i] == count


def _fuse_by_candidate(results, path_weights, mode):
    """Fusion written one candidate at a time (what the array form must equal exactly)."""
    from engine.memory.retrieval import _minmax

    ids = list(results.records)
    active = {p: w for p, w in path_weights.items() if w > 0 and getattr(results, p)}
    if "dim" in active and not results.dim_active:
        active.pop("dim")
    if not active:
        return {i: 0.0 for i in ids}

    def anchored(scores):
        hi = max(scores.values())
        return {i: 0.0 for i in scores} if hi <= 1e-12 else {i: max(0.0, s) / hi for i, s in scores.items()}

    scale = _minmax if mode == "minmax" else anchored
    pairs = [(w, scale(getattr(results, p))) for p, w in active.items()]
    total = sum(active.values())
    return {i: float(sum([w * normed.get(i, 0.0) for w, normed in pairs]) / total) for i in ids}


@pytest.mark.parametrize("mode", ["anchored", "minmax"])
@pytest.mark.parametrize("seed", range(8))
def test_array_fusion_equals_fusion_one_candidate_at_a_time(seed, mode):
    from engine.memory.retrieval import PathResults, fuse

    rng = random.Random(seed)
    for _ in range(50):
        ids = rng.sample(range(1, 400), rng.randint(0, 40))

        def path():
            return {i: rng.choice([0.0, -0.0, rng.random() * 12, -rng.random(), 1e-13])
                    for i in rng.sample(ids, rng.randint(0, len(ids)))}

        res = PathResults(bm25=path(), dense=path(), dim=path(), records={i: None for i in sorted(ids)},
                          dim_active=rng.random() < 0.7)
        weights = {"bm25": rng.random(), "dense": rng.random(), "dim": rng.choice([0.0, rng.random()])}
        got = fuse(res, path_weights=weights, mode=mode)
        want = _fuse_by_candidate(res, weights, mode)
        assert list(got) == list(want)
        assert [repr(v) for v in got.values()] == [repr(v) for v in want.values()]  # bit for bit, sign of 0 too


def _phrase_by_pool(q_kw, multi, rec_kw, content):
    """The phrase part as first written: the pool of phrases a record is asked for, then the share
    of the pool it lists or its content holds."""
    spaced = [k for k in q_kw if " " in k]
    pool = multi or ([k for k in q_kw if " " in k or k in rec_kw] if rec_kw else spaced) or q_kw
    return sum(1 for k in pool if k in rec_kw or k in content) / len(pool)


def _tokenised(r: MemoryRecord) -> tuple[frozenset[str], frozenset[str], str]:
    """A record's token set, keyword set and normalised content, each record on its own."""
    from engine.core.text import content_token_set, normalize

    return (content_token_set(f"{r.content} {' '.join(r.keywords)} {r.location or ''}"),
            frozenset(normalize(k) for k in r.keywords), normalize(r.content))


@settings(max_examples=200, deadline=None)
@given(kws=st.lists(st.sampled_from([*WORDS, "hiking boots", "peanut allergy", "tea ramen", "北京烤鸭", "e", "zzz"]),
                    min_size=1, max_size=4),
       seed=st.integers(0, 10_000))
def test_keyword_phrase_part_is_the_pool_rule(kws, seed):
    recs = _records(30, random.Random(seed))
    scorer = DimensionScorer(ParsedQuery(text=" ".join(kws), keywords=kws), MemoryConfig().dim_weights)
    tokens, phrases = scorer._keyword_columns(recs)
    for r, t, p in zip(recs, tokens, phrases, strict=True):
        hay, rec_kw, content = _tokenised(r)
        assert p == _phrase_by_pool(scorer.q_kw, scorer.multi, rec_kw, content)
        assert t == len(scorer.kw_tokens & hay) / len(scorer.kw_tokens)


_PIECES = ["tea", "teas", "tea's", "tea's's", "it's", "don't", "o'tea", "tea'x", "'tea", "tea'", "x2", "2x", "the",
           "a", "s", "'s", "''", "'", "-", ".", ",", "_", "é", "TEA", "Tea's", "teatea", "bob", "bob's", "9"]
_SEPS = ["", " ", "  ", "'", "-", "\n"]


@settings(max_examples=400, deadline=None)
@given(texts=st.lists(st.tuples(st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from(_SEPS)), max_size=8),
                                st.lists(st.sampled_from(_PIECES), max_size=3),
                                st.sampled_from([None, "Leeds", "tea's place", "o'hare"])), min_size=1, max_size=6),
       needles=st.frozensets(st.sampled_from(["tea", "it's", "don't", "x2", "9", "bob", "the", "a", "s", "teatea",
                                              "o'tea", "leeds", "place"]), min_size=1, max_size=5))
def test_token_hits_count_what_tokenising_each_record_finds(texts, needles):
    """The keyword tokens found in all records' haystacks at once are, record by record, those of
    the record's token set (content_token_set, as the dimension path's tokenised form reads it)."""
    from engine.core.text import content_token_set
    from engine.memory.dimension import token_hits

    recs = [MemoryRecord(id=i + 1, user_id="u", content="".join(p + s for p, s in words) or "x", memory_type="fact",
                         keywords=tuple(kws), location=loc, created_at=T0)
            for i, (words, kws, loc) in enumerate(texts)]
    got = token_hits(needles, recs)
    assert got is not None
    for r, n in zip(recs, got, strict=True):
        text = f"{r.content} {' '.join(r.keywords)} {r.location or ''}"
        if not text.isascii():
            assert n is None
        else:
            assert n == len(needles & content_token_set(text)), (text, needles)


def test_token_hits_leave_a_needle_that_is_not_one_plain_token_to_the_tokeniser():
    from engine.memory.dimension import token_hits

    recs = _records(5, random.Random(3))
    assert token_hits(frozenset({"tea", "hiking boots"}), recs) is None
    assert token_hits(frozenset({"runner's"}), recs) is None
    assert token_hits(frozenset({"Tea"}), recs) is None
    assert token_hits(frozenset({"tea", "the"}), recs) is not None  # a stopword needle just never counts


def test_keyword_scores_are_the_tokenisers_on_searched_and_tokenised_sightings():
    """A record's first sightings find its keyword tokens without tokenising it, the next
    tokenises it and keeps the set, later ones read the kept set: all score as tokenising."""
    from engine.core.text import content_token_set
    from engine.memory.dimension import _SEARCHED, _TERMS, SEARCH_SIGHTINGS, _text_key

    rng = random.Random(7)
    recs = _records(60, rng)
    weights = MemoryConfig().dim_weights
    kws = ["tea", "runner", "hiking", "can't", "leeds"]  # plain ASCII tokens: searched while new
    scorer = DimensionScorer(ParsedQuery(text=" ".join(kws), keywords=kws), weights)
    share = []
    for r in recs:
        hay = content_token_set(f"{r.content} {' '.join(r.keywords)} {r.location or ''}")
        share.append(len(scorer.kw_tokens & hay) / len(scorer.kw_tokens))
    _TERMS.clear()
    _SEARCHED.clear()  # texts never seen
    ascii_ = [r for r in recs if f"{r.content} {' '.join(r.keywords)} {r.location or ''}".isascii()]
    assert ascii_ and len(ascii_) < len(recs)
    for sighting in range(SEARCH_SIGHTINGS + 2):
        tokens, _phrases = scorer._keyword_columns(recs)
        assert tokens == share
        tokenised = sum(_text_key(r) in _TERMS for r in ascii_)
        assert tokenised == (0 if sighting < SEARCH_SIGHTINGS else len(ascii_))
