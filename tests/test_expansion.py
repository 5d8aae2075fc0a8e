"""Message candidates (engine.memory.expansion): records found through the turns nearest the question."""

from datetime import datetime, timezone

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.records import MemoryRecord, Message, SourcePointer
from engine.memory.engine import MemoryEngine
from engine.memory.expansion import message_candidates, message_index, nearest_messages
from engine.roles.embeddings import make_embedder
from engine.stores.sqlite import SQLiteStore

AT = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
U = "u1"
TURNS = ["I adopted a puppy named Biscuit from the shelter last weekend, she loves the beach.",
         "My sister is moving to Lisbon for a new job at a bank.",
         "We painted the kitchen walls a pale green colour yesterday."]


def _store():
    emb = make_embedder("hash")
    store = SQLiteStore(":memory:", dim=emb.dim, embedder_name=emb.name)
    msgs = [store.add_message(Message(user_id=U, session_id="s", role="user", content=t, created_at=AT)) for t in TURNS]
    contents = ["It was last weekend.", "Something happened.", "It is a new job.", "It was yesterday."]
    sources = [msgs[0].id, msgs[0].id, msgs[1].id, msgs[2].id]
    recs = [MemoryRecord(user_id=U, content=c, memory_type="episodic",
                         source=SourcePointer(session_id="s", message_ids=(m,)), created_at=AT, valid_from=AT)
            for c, m in zip(contents, sources, strict=True)]
    return emb, store, msgs, store.add_records(recs, emb.embed_documents(contents))


def test_nearest_messages_and_their_records():
    emb, store, msgs, recs = _store()
    q = emb.embed_query("what is the name of the puppy from the shelter?")
    near = nearest_messages(store, U, q, embedder=emb, k=1)
    assert [m for m, _ in near] == [msgs[0].id]
    got, dense = message_candidates(store, U, q, embedder=emb, k=1, have={}, per_message=0)
    assert set(got) == {recs[0].id, recs[1].id} == set(dense)
    one, _ = message_candidates(store, U, q, embedder=emb, k=1, have={}, per_message=1)
    assert len(one) == 1 and set(one) <= {recs[0].id, recs[1].id}
    # records already candidates are not returned again
    again, _ = message_candidates(store, U, q, embedder=emb, k=1, have={r.id: r for r in recs}, per_message=0)
    assert again == {}
    assert message_candidates(store, U, None, embedder=emb, k=5, have={}) == ({}, {})


def test_index_picks_up_new_messages_and_records():
    emb, store, msgs, recs = _store()
    idx = message_index(store, U, emb)
    assert len(idx.ids) == 3
    m = store.add_message(Message(user_id=U, session_id="s2", role="user", content="I bought a red bicycle.",
                                  created_at=AT))
    (r,) = store.add_records([MemoryRecord(user_id=U, content="A purchase.", memory_type="episodic",
                                           source=SourcePointer(session_id="s2", message_ids=(m.id,)),
                                           created_at=AT, valid_from=AT)], emb.embed_documents(["A purchase."]))
    idx = message_index(store, U, emb)
    assert len(idx.ids) == 4 and idx.records_of[m.id] == [r.id]
    got, _ = message_candidates(store, U, emb.embed_query("did I buy a red bicycle?"), embedder=emb, k=1, have={})
    assert set(got) == {r.id}


def test_retrieve_with_message_candidates_is_opt_in():
    emb, store, msgs, recs = _store()
    assert MemoryConfig().message_candidates == 0
    base = dict(always_inject_types=(), safety_seats=0, min_relevance=0.0, min_score_ratio=0.0, top_k=4,
                candidate_k=1, paths=("bm25", "dense"))
    off = MemoryConfig.from_preset("customer service", **base)
    on = MemoryConfig.from_preset("customer service", **base, message_candidates=3, message_per_turn=0)
    eng = MemoryEngine(off, store=store, clock=VirtualClock(AT), embedder=emb)
    q = "tell me about the puppy Biscuit from the shelter"
    r_off = eng.retrieve(U, q, now=AT)
    r_on = eng.retrieve(U, q, config=on, now=AT)
    assert len(r_on.records) > len(r_off.records)
    assert {recs[0].id, recs[1].id} <= set(r_on.records)


def test_forget_user_drops_the_users_message_index():
    from engine.memory import expansion

    emb, store, msgs, recs = _store()
    message_index(store, U, emb)
    message_index(store, "u2", emb)
    assert any(k[1] == U for k in expansion._INDEXES)
    eng = MemoryEngine(MemoryConfig(), store=store, clock=VirtualClock(AT), embedder=emb)
    eng.forget_user(U)
    assert not any(k[1] == U for k in expansion._INDEXES)  # no trace of the user's messages in memory
    assert any(k[1] == "u2" for k in expansion._INDEXES)  # other users' indexes are kept
    assert nearest_messages(store, U, emb.embed_query("puppy"), embedder=emb, k=3) == []
