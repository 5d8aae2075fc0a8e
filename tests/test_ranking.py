import pytest

from engine.core.config import MemoryConfig, Weights
from engine.memory.ranking import Candidate, rank_candidates, sensitivity


def cand(i, R, age=0.0, tags=("fact",), n=0, tokens=10):
    from engine.core.forgetting import tag_union

    return Candidate(record_id=i, R=R, age_seconds=age, u=tag_union(tags), n=n, tags=tags, tokens=tokens)


# min_relevance 0: these tests pin the score order and the floor mechanics themselves; earned seats
# (a minimum relevance) are tested below
CFG = MemoryConfig.from_preset("customer service", top_k=3, always_inject_types=(), min_relevance=0.0,
                              min_score_ratio=0.0)


def test_top_k_by_score_with_breakdown():
    cands = [cand(1, 0.1), cand(2, 0.9), cand(3, 0.5), cand(4, 0.7), cand(5, 0.0)]
    rows, picked = rank_candidates(cands, config=CFG)
    assert picked == [2, 4, 3]
    assert [r.record_id for r in rows] == [2, 4, 3, 1, 5]
    top = rows[0]
    assert top.S == pytest.approx(top.parts["alpha_R"] + top.parts["beta_T"] + top.parts["gamma_F"] + top.parts["delta"],
                                  abs=1e-5)
    assert [r.verdict for r in rows] == ["picked", "picked", "picked", "near-miss", "near-miss"]
    assert rows[3].why == "top-K"


def test_floor_holds_a_seat():
    cfg = MemoryConfig.from_preset("customer service", top_k=2, always_inject_types=("identity",), min_relevance=0.0,
                                   min_score_ratio=0.0)
    cands = [cand(1, 1.0), cand(2, 0.9), cand(3, 0.0, tags=("identity",), age=1e7)]
    rows, picked = rank_candidates(cands, config=cfg)
    assert 3 in picked and len(picked) == 2
    assert next(r for r in rows if r.record_id == 3).why == "floor:identity"


def test_budget_skips_large_records():
    cfg = MemoryConfig.from_preset("customer service", top_k=3, always_inject_types=(), injection_budget=25,
                                   min_relevance=0.0, min_score_ratio=0.0)
    cands = [cand(1, 1.0, tokens=20), cand(2, 0.9, tokens=20), cand(3, 0.8, tokens=5)]
    rows, picked = rank_candidates(cands, config=cfg)
    assert picked == [1, 3]
    assert next(r for r in rows if r.record_id == 2).why == "budget"


def test_decay_changes_the_order():
    old_relevant = cand(1, 0.8, age=30 * 86400)
    new_less = cand(2, 0.6, age=60)
    cfg = CFG.with_overrides(top_k=1)
    _, picked = rank_candidates([old_relevant, new_less], config=cfg)
    assert picked == [2]
    _, picked = rank_candidates([old_relevant, new_less], config=cfg.with_overrides(decay_enabled=False))
    assert picked == [1]


def test_ties_are_deterministic():
    cands = [cand(i, 0.5) for i in (5, 3, 9, 1)]
    _, picked = rank_candidates(cands, config=CFG)
    assert picked == [1, 3, 5]


def test_weights_override_and_empty():
    assert rank_candidates([], config=CFG) == ([], [])
    cands = [cand(1, 1.0, tags=("chat",)), cand(2, 0.0, tags=("identity",))]
    _, picked = rank_candidates(cands, config=CFG.with_overrides(top_k=1),
                                weights=Weights(alpha=0.0, beta=0.0, gamma=1.0))
    assert picked == [2]


def test_sensitivity_names_a_knob_that_changes_the_set():
    cands = [cand(1, 1.0, tags=("chat",)), cand(2, 0.2, tags=("identity",)), cand(3, 0.5)]
    out = sensitivity(cands, config=CFG.with_overrides(top_k=1))
    assert out["top_k"] is not None
    assert out["gamma"] is not None
    # applying the suggested gamma really changes the pick
    g = float(out["gamma"].split("=")[1])
    rest = (1 - g) / 2
    _, base = rank_candidates(cands, config=CFG.with_overrides(top_k=1))
    _, new = rank_candidates(cands, config=CFG.with_overrides(top_k=1),
                             weights=Weights(alpha=rest, beta=rest, gamma=g))
    assert base != new


# -- earned seats ---------------------------------------------------------------------------------

def test_seats_need_relevance_and_an_empty_seat_beats_an_irrelevant_one():
    cfg = MemoryConfig.from_preset("customer service", top_k=4, always_inject_types=("identity",), min_relevance=0.2)
    cands = [cand(1, 0.9), cand(2, 0.1), cand(3, 0.05, tags=("identity",)), cand(4, 0.5, tags=("identity",))]
    rows, picked = rank_candidates(cands, config=cfg)
    assert picked == [4, 1]  # the relevant identity record holds the floor; nothing fills the other seats
    why = {r.record_id: (r.verdict, r.why) for r in rows}
    assert why[2] == ("dropped", "below min relevance 0.2") and why[3] == ("dropped", "below min relevance 0.2")
    assert why[4] == ("picked", "floor:identity")


def test_safety_records_hold_their_own_seats_without_relevance():
    cfg = MemoryConfig.from_preset("customer service", top_k=3, always_inject_types=(), min_relevance=0.2,
                                   safety_seats=1)
    cands = [cand(1, 0.9), cand(2, 0.0, tags=("safety", "fact"), age=1e7), cand(3, 0.0, tags=("safety",))]
    rows, picked = rank_candidates(cands, config=cfg)
    assert picked[0] in (2, 3) and 1 in picked and len(picked) == 2
    assert next(r for r in rows if r.record_id == picked[0]).why == "safety"
    _, none = rank_candidates(cands, config=cfg.with_overrides(safety_seats=0))
    assert none == [1]


def _sourced(i, R, sources):
    from dataclasses import replace

    return replace(cand(i, R), sources=frozenset(sources))


def test_near_duplicates_of_one_turn_wait_for_distinct_evidence():
    # records 1 and 2 were both made from message 10; record 3 from message 11
    cands = [_sourced(1, 0.9, {10}), _sourced(2, 0.85, {10}), _sourced(3, 0.5, {11})]
    cfg = MemoryConfig.from_preset("relevance only", top_k=2, always_inject_types=(), min_score_ratio=0)
    rows, picked = rank_candidates(cands, config=cfg)
    assert picked == [1, 3]
    assert {r.record_id: r.why for r in rows}[2] == "same source as a seated record"
    # a free seat still goes to the duplicate, after the distinct ones
    _, picked3 = rank_candidates(cands, config=cfg.with_overrides(top_k=3))
    assert picked3 == [1, 3, 2]
    # switched off, the order is S alone
    _, plain = rank_candidates(cands, config=cfg.with_overrides(distinct_sources=False))
    assert plain == [1, 2]
    # a record drawing on a new message as well is distinct
    _, wider = rank_candidates([cands[0], _sourced(2, 0.85, {10, 12}), cands[2]], config=cfg)
    assert wider == [1, 2]


def test_an_aggregate_question_spreads_its_seats_over_sessions():
    from dataclasses import replace

    cands = [replace(cand(1, 0.9), session="S1"), replace(cand(2, 0.8), session="S1"),
             replace(cand(3, 0.4), session="S2")]
    cfg = MemoryConfig.from_preset("relevance only", top_k=2, always_inject_types=(), min_score_ratio=0,
                                   spread_sessions=True)
    assert rank_candidates(cands, config=cfg)[1] == [1, 2]
    rows, picked = rank_candidates(cands, config=cfg, aggregate=True)
    assert picked == [1, 3]
    assert {r.record_id: r.why for r in rows}[2] == "session already seated"
    assert rank_candidates(cands, config=cfg.with_overrides(spread_sessions=False), aggregate=True)[1] == [1, 2]


@pytest.mark.parametrize(("question", "aggregate"), [
    ("What activities does Melanie partake in?", True),
    ("Which books has he read?", True),
    ("Where has she camped?", True),
    ("How many times did I go to Lisbon?", True),
    ("Where do I live now?", False),
    ("What is my name?", False),
    ("What does she do to relax?", False),
])
def test_the_rule_parser_marks_aggregate_questions(question, aggregate):
    from datetime import UTC, datetime

    from engine.roles.rules.query import RuleQueryParser
    from engine.roles.types import QueryInput

    parsed = RuleQueryParser().parse(QueryInput(text=question, now=datetime(2026, 1, 1, tzinfo=UTC)))
    assert parsed.aggregate is aggregate


def _with_vectors(cands, vectors):
    from engine.memory.candidates import CandidateSet

    return CandidateSet.of(cands).with_vectors(vectors)


def test_diverse_seating_passes_over_a_near_duplicate_for_something_new():
    from engine.memory.ranking import rank

    # 1 and 2 say nearly the same thing (cosine ~0.99); 3 is unlike both and scores lower; 4 scores least
    cands = [cand(1, 0.9), cand(2, 0.85), cand(3, 0.6), cand(4, 0.1)]
    vecs = {1: [1.0, 0.0, 0.0], 2: [0.99, 0.14, 0.0], 3: [0.0, 0.0, 1.0], 4: [0.0, 1.0, 0.0]}
    cfg = MemoryConfig.from_preset("relevance only", top_k=2, always_inject_types=(), min_score_ratio=0,
                                   min_relevance=0, diversity=0.3)
    ranking = rank(_with_vectors(cands, vecs), config=cfg)
    assert ranking.picked_ids == [1, 3]
    assert [ranking.cands.ids[i] for i in ranking.order] == [1, 2, 3, 4]  # rows stay in S order
    assert ranking.verdicts == ["picked", "near-miss", "picked", "near-miss"]
    # off, or without the embeddings, the seats are S alone
    assert rank(_with_vectors(cands, vecs), config=cfg.with_overrides(diversity=0)).picked_ids == [1, 2]
    assert rank_candidates(cands, config=cfg)[1] == [1, 2]
    # a large enough lead in S still wins over novelty
    far = [cand(1, 0.9), cand(2, 0.85), cand(3, 0.3), cand(4, 0.1)]
    assert rank(_with_vectors(far, vecs), config=cfg).picked_ids == [1, 2]
    # the pool bounds how far down the order a seat can come from
    assert rank(_with_vectors(cands, vecs), config=cfg.with_overrides(diversity_pool=2)).picked_ids == [1, 2]


def test_diverse_seating_keeps_excluded_records_out():
    from engine.memory.ranking import rank

    cands = [cand(1, 0.9), cand(2, 0.85), cand(3, 0.6), cand(4, 0.1)]
    vecs = {1: [1.0, 0.0], 2: [0.99, 0.14], 3: [0.0, 1.0], 4: [0.7, 0.7]}
    cfg = MemoryConfig.from_preset("relevance only", top_k=2, always_inject_types=(), min_score_ratio=0,
                                   min_relevance=0, diversity=0.3)
    ranking = rank(_with_vectors(cands, vecs), config=cfg, excluded={3: "contradicted by the live window"})
    assert ranking.picked_ids == [1, 2]


def test_the_engine_reads_embeddings_for_diverse_seating_only_when_asked():
    from datetime import UTC, datetime

    from engine.core.clock import VirtualClock
    from engine.core.records import MemoryRecord, SourcePointer
    from engine.memory.engine import MemoryEngine
    from engine.memory.recall import rescore
    from engine.roles.embeddings import HashEmbeddings

    t0 = datetime(2026, 5, 1, 12, tzinfo=UTC)
    base = MemoryConfig.from_preset("customer service", always_inject_types=(), top_k=2, decay_enabled=False,
                                    min_relevance=0, min_score_ratio=0)
    e = MemoryEngine(base, clock=VirtualClock(t0), embedder=HashEmbeddings(384))
    texts = ["Family time matters a lot to Mel.", "Family time matters a lot to Mel, truly.",
             "Mel took the kids to the science museum for family time.", "Mel likes green tea."]
    recs = [MemoryRecord(user_id="mel", content=t, created_at=t0, source=SourcePointer(session_id="s", message_ids=(i,)))
            for i, t in enumerate(texts, start=1)]
    e.store.add_records(recs, e.embedder.embed_documents(texts))
    plain = e.retrieve("mel", "family time Mel")
    assert plain.ranking.cands.vectors is None
    diverse = e.retrieve("mel", "family time Mel", config=base.with_overrides(diversity=0.5))
    assert diverse.ranking.cands.vectors is not None
    contents = [diverse.records[i].content for i in diverse.picked]
    assert any("museum" in c for c in contents)
    assert not all("museum" in diverse.records[i].content for i in plain.picked)
    # a what-if re-ranks the same candidates with the same embeddings, touching nothing stored
    assert rescore(diverse, base.with_overrides(diversity=0.5)).picked == diverse.picked
