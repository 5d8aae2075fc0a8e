"""The message path: candidates re-scored by their source turn's cosine to the question (opt-in)."""

from datetime import datetime, timezone

import pytest

from engine.core.clock import VirtualClock
from engine.core.config import DEFAULT_PATHS, MemoryConfig
from engine.core.errors import ConfigError
from engine.core.records import MemoryRecord, Message, SourcePointer
from engine.memory.engine import MemoryEngine
from engine.memory.messagepath import MessageVectors, message_scores
from engine.roles.embeddings import make_embedder
from engine.stores.sqlite import SQLiteStore

AT = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
U = "u1"


def _store_with_turns():
    emb = make_embedder("hash")
    store = SQLiteStore(":memory:", dim=emb.dim, embedder_name=emb.name)
    turns = ["I adopted a puppy named Biscuit from the shelter last weekend, she loves the beach.",
             "My sister is moving to Lisbon for a new job at a bank."]
    msgs = [store.add_message(Message(user_id=U, session_id="s", role="user", content=t, created_at=AT)) for t in turns]
    recs = [  # atomic records that lost their turn's words
        MemoryRecord(user_id=U, content="It was last weekend.", memory_type="episodic",
                     source=SourcePointer(session_id="s", message_ids=(msgs[0].id,)), created_at=AT, valid_from=AT),
        MemoryRecord(user_id=U, content="It is a new job.", memory_type="episodic",
                     source=SourcePointer(session_id="s", message_ids=(msgs[1].id,)), created_at=AT, valid_from=AT),
        MemoryRecord(user_id=U, content="A thing without a source.", memory_type="fact", created_at=AT, valid_from=AT),
    ]
    stored = store.add_records(recs, emb.embed_documents([r.content for r in recs]))
    return emb, store, stored


def test_message_scores_rank_a_record_by_its_turn():
    emb, store, (puppy, job, nosource) = _store_with_turns()
    records = {r.id: r for r in (puppy, job, nosource)}
    s = message_scores(store, U, records, emb.embed_query("what is the name of the puppy from the shelter?"),
                       embedder=emb)
    assert set(s) == {puppy.id, job.id}  # no source message, no score
    assert s[puppy.id] > s[job.id]
    s2 = message_scores(store, U, records, emb.embed_query("where is the sister moving for the bank job?"),
                        embedder=emb)
    assert s2[job.id] > s2[puppy.id]
    assert message_scores(store, U, records, None, embedder=emb) == {}
    assert message_scores(store, "someone-else", records, emb.embed_query("puppy"), embedder=emb) == {}


def test_retrieve_with_the_message_path_reports_it_and_default_is_off():
    emb, store, (puppy, job, _) = _store_with_turns()
    assert "message" not in DEFAULT_PATHS and "message" not in MemoryConfig().paths
    base = dict(always_inject_types=(), safety_seats=0, min_relevance=0.0, min_score_ratio=0.0, top_k=3)
    on = MemoryConfig.from_preset("customer service", **base, paths=("bm25", "dense", "dim", "message"),
                                  path_weights={"bm25": 0.4, "dense": 0.4, "dim": 0.2, "message": 0.5})
    off = MemoryConfig.from_preset("customer service", **base)
    q = "tell me about the puppy Biscuit from the shelter"
    eng = MemoryEngine(on, store=store, clock=VirtualClock(AT), embedder=emb)
    r_on = eng.retrieve(U, q, now=AT)
    r_off = eng.retrieve(U, q, config=off, now=AT)
    assert r_on.picked[0] == puppy.id
    rows_on = {row.record_id: row for row in r_on.ranking.rows()}
    assert rows_on[puppy.id].path_scores["message"] > rows_on[job.id].path_scores["message"]
    assert all("message" not in row.path_scores for row in r_off.ranking.rows())


def test_message_path_needs_a_known_path_name():
    with pytest.raises(ConfigError):
        MemoryConfig(paths=("bm25", "messages"))


def test_message_vectors_cache_embeds_each_text_once_and_stays_bounded():
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return [[float(len(t)), 1.0] for t in texts]

    mv = MessageVectors(embed, limit=2)
    a, b = mv(["ab", "abc"])
    assert abs(float(a @ a) - 1.0) < 1e-6
    mv(["ab", "abc", "ab"])
    assert calls == [["ab", "abc"]]
    mv(["x"])  # evicts the least recently used ("abc": "ab" was used after it)
    mv(["ab"])
    assert calls == [["ab", "abc"], ["x"]]
    mv(["abc"])
    assert calls[-1] == ["abc"] and len(mv._cache) == 2
    # full: a new text with the least recently used one, which keeping the new one pushes out after it is read
    got = mv(["new", "ab"])
    assert calls[-1] == ["new"] and all(v is not None for v in got) and len(mv._cache) == 2


def _store_with_a_question_and_answer():
    """Turn 1 asks about the puppy, turn 2 answers with few words; turn 3 (another session) is noise."""
    emb = make_embedder("hash")
    store = SQLiteStore(":memory:", dim=emb.dim, embedder_name=emb.name)
    texts = [("s", "What is the name of the puppy you adopted from the shelter?"),
             ("s", "Biscuit!"),
             ("t", "The puppy from the shelter is cute, what is her name?")]
    msgs = [store.add_message(Message(user_id=U, session_id=sid, role="user", content=t, created_at=AT))
            for sid, t in texts]
    recs = [MemoryRecord(user_id=U, content=f"Record {i}.", memory_type="episodic",
                         source=SourcePointer(session_id=m.session_id, message_ids=(m.id,)), created_at=AT, valid_from=AT)
            for i, m in enumerate(msgs)]
    return emb, store, msgs, store.add_records(recs, emb.embed_documents([r.content for r in recs]))


def test_message_neighbours_add_the_adjacent_turn_in_the_same_session():
    emb, store, msgs, (ask, answer, other) = _store_with_a_question_and_answer()
    records = {r.id: r for r in (ask, answer, other)}
    qv = emb.embed_query("what is the name of the puppy from the shelter?")
    plain = message_scores(store, U, records, qv, embedder=emb)
    prev = message_scores(store, U, records, qv, embedder=emb, neighbours={-1: 0.5})
    nxt = message_scores(store, U, records, qv, embedder=emb, neighbours={1: 0.5})
    cos_ask = plain[ask.id]
    assert cos_ask > 0.2
    # the answer gains half its question's cosine; the question has no turn before it
    assert prev[answer.id] == pytest.approx(plain[answer.id] + 0.5 * cos_ask, abs=1e-5)
    assert prev[ask.id] == pytest.approx(cos_ask, abs=1e-6)
    # the turn after: the question gains its answer's cosine (clipped at 0), and the last turn of
    # session "s" does not reach into session "t"
    assert nxt[ask.id] == pytest.approx(cos_ask + 0.5 * max(0.0, plain[answer.id]), abs=1e-5)
    assert nxt[answer.id] == pytest.approx(plain[answer.id], abs=1e-6)
    assert prev[other.id] == pytest.approx(plain[other.id], abs=1e-6)
    assert message_scores(store, U, records, qv, embedder=emb, neighbours={-1: 0.0, 1: 0.0}) == plain


def test_message_neighbour_weights_reach_retrieval_and_are_checked():
    emb, store, msgs, (ask, answer, other) = _store_with_a_question_and_answer()
    base = dict(always_inject_types=(), safety_seats=0, min_relevance=0.0, min_score_ratio=0.0, top_k=3,
                paths=("bm25", "dense", "dim", "message"),
                path_weights={"bm25": 0.4, "dense": 0.4, "dim": 0.2, "message": 0.5})
    assert MemoryConfig().message_prev_weight == 0.0 and MemoryConfig().message_next_weight == 0.0
    off = MemoryConfig.from_preset("customer service", **base)
    on = MemoryConfig.from_preset("customer service", **base, message_prev_weight=0.5)
    eng = MemoryEngine(off, store=store, clock=VirtualClock(AT), embedder=emb)
    q = "what is the name of the puppy from the shelter?"
    rows_off = {row.record_id: row for row in eng.retrieve(U, q, now=AT).ranking.rows()}
    rows_on = {row.record_id: row for row in eng.retrieve(U, q, config=on, now=AT).ranking.rows()}
    assert answer.id in rows_on and answer.id in rows_off
    assert rows_on[answer.id].path_scores["message"] > rows_off[answer.id].path_scores["message"]
    with pytest.raises(ConfigError):
        MemoryConfig.from_preset("customer service", message_next_weight=1.5)
