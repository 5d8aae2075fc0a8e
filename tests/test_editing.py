"""Hand edits of memory (engine.memory.editing): each action, undo, user isolation, the event log."""

from datetime import UTC, datetime

import pytest

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.errors import (
    MemlabError,
    NothingToUndoError,
    RecordEditError,
    UnknownRecordError,
)
from engine.memory.engine import MemoryEngine
from engine.stores.check import check_store

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
FACTS = ["My dog is called Rex.", "I prefer email over phone calls.", "My order number is 88231.",
         "I live in Lisbon."]


@pytest.fixture
def eng():
    clock = VirtualClock(T0)
    engine = MemoryEngine(MemoryConfig.from_preset("customer service"), clock=clock)
    engine.ingest("alice", "s1", [{"role": "user", "content": t} for t in FACTS])
    engine.ingest("bob", "s1", [{"role": "user", "content": "My cat is called Tom."}])
    clock.advance(3600)
    yield engine, clock
    engine.store.close()


def rec(engine, user, word):
    return next(r for r in engine.records(user, include_invalid=False) if word in r.content)


def edits(engine, user="alice"):
    return engine.events(user_id=user, kind="user_edit")


def picked(engine, query, user="alice"):
    ret = engine.retrieve(user, query)
    return [ret.records[i] for i in ret.picked], ret


def test_edit_writes_a_new_version_and_retrieval_serves_it(eng):
    engine, clock = eng
    old = rec(engine, "alice", "Rex")
    assert "Rex" in picked(engine, "What is my dog called?")[0][0].content
    before = engine.store.count_records("alice", include_invalid=True)
    new = engine.edit_record("alice", old.id, "The user's dog is called Max.")
    assert new.id != old.id and new.content == "The user's dog is called Max."
    assert new.created_at == engine.now() and new.source == old.source
    stored_old = engine.store.get_records("alice", [old.id])[0]
    assert stored_old.superseded_by == new.id and stored_old.invalid_at == clock.now()  # kept, not deleted
    assert engine.store.count_records("alice", include_invalid=True) == before + 1
    # re-embedded: the stored vector is the new text's
    assert engine.store.vectors("alice", [new.id])[new.id] == pytest.approx(
        engine.embedder.embed_documents(["The user's dog is called Max."])[0])
    served, _ = picked(engine, "What is my dog called?")
    assert [r.content for r in served][:1] == ["The user's dog is called Max."]
    assert all("Rex" not in r.content for r in served)
    # and the next turn's prompt carries it
    result = engine.turn("alice", "s2", "What is my dog called?")
    assert "Max" in result.prompt.messages[0]["content"] and "Rex" not in result.prompt.messages[0]["content"]
    assert check_store(engine.store) == []


def test_edit_event_in_the_log(eng):
    engine, clock = eng
    old = rec(engine, "alice", "Rex")
    new = engine.edit_record("alice", old.id, "The user's dog is called Max.")
    (ev,) = edits(engine)
    assert ev.kind == "user_edit" and ev.at == clock.now() and ev.user_id == "alice"
    assert ev.payload["action"] == "edit" and ev.payload["record_ids"] == [old.id, new.id]
    assert ev.payload["before"]["content"] == old.content
    assert ev.payload["after"]["content"] == "The user's dog is called Max."
    assert not edits(engine, "bob")


def test_undo_edit_restores_the_content(eng):
    engine, _ = eng
    old = rec(engine, "alice", "Rex")
    new = engine.edit_record("alice", old.id, "The user's dog is called Max.")
    undo = engine.undo_last_edit("alice")
    assert undo.kind == "user_edit" and undo.payload["action"] == "undo"
    assert undo.payload["undone_action"] == "edit"
    current = [r.content for r in engine.records("alice", include_invalid=False)]
    assert old.content in current and "The user's dog is called Max." not in current
    assert engine.store.get_records("alice", [new.id])[0].superseded_by == undo.payload["record_ids"][0]
    assert "Rex" in picked(engine, "What is my dog called?")[0][0].content
    with pytest.raises(NothingToUndoError):
        engine.undo_last_edit("alice")


def test_undo_walks_back_several_edits(eng):
    engine, _ = eng
    v1 = engine.edit_record("alice", rec(engine, "alice", "Rex").id, "The user's dog is called Max.")
    engine.edit_record("alice", v1.id, "The user's dog is called Bo.")
    engine.undo_last_edit("alice")
    assert rec(engine, "alice", "dog").content == "The user's dog is called Max."
    engine.undo_last_edit("alice")
    assert rec(engine, "alice", "dog").content == "The user's dog is called Rex."


def test_pin_holds_a_seat_and_unpin_and_undo(eng):
    engine, _ = eng
    order = rec(engine, "alice", "88231")
    served, _ = picked(engine, "What is my dog called?")
    assert order.id not in [r.id for r in served]
    pinned = engine.pin_record("alice", order.id)
    assert "pinned" in pinned.tags and pinned.id == order.id
    served, ret = picked(engine, "What is my dog called?")
    assert order.id in [r.id for r in served]
    assert next(row for row in ret.rows if row.record_id == order.id).why == "pinned"
    assert "Rex" in " ".join(r.content for r in served)  # the answer keeps its seat
    with pytest.raises(RecordEditError):
        engine.pin_record("alice", order.id)
    engine.unpin_record("alice", order.id)
    assert "pinned" not in engine.store.get_records("alice", [order.id])[0].tags
    assert order.id not in [r.id for r in picked(engine, "What is my dog called?")[0]]
    assert [e.payload["action"] for e in edits(engine)] == ["pin", "unpin"]
    engine.undo_last_edit("alice")  # undoes the unpin
    assert "pinned" in engine.store.get_records("alice", [order.id])[0].tags
    engine.undo_last_edit("alice")  # undoes the pin
    assert "pinned" not in engine.store.get_records("alice", [order.id])[0].tags


def test_invalidate_and_undo(eng):
    engine, clock = eng
    dog = rec(engine, "alice", "Rex")
    n_current = engine.store.count_records("alice", include_invalid=False)
    out = engine.invalidate_record("alice", dog.id)
    assert engine.store.count_records("alice", include_invalid=False) == n_current - 1
    assert dog.id not in [i for i, _ in engine.store.search_bm25("alice", "dog Rex", k=10)]
    vec = engine.embedder.embed_query("dog Rex")
    assert dog.id not in [i for i, _ in engine.store.search_dense("alice", vec, k=10)]
    assert out.invalid_at == clock.now() and not out.is_current
    assert all("Rex" not in r.content for r in engine.records("alice", include_invalid=False))
    assert all("Rex" not in r.content for r in picked(engine, "What is my dog called?")[0])
    assert check_store(engine.store) == []
    (ev,) = edits(engine)
    assert ev.payload["action"] == "invalidate" and ev.payload["after"]["invalid_at"] is not None
    with pytest.raises(RecordEditError):
        engine.edit_record("alice", dog.id, "The user's dog is called Max.")  # no longer current
    engine.undo_last_edit("alice")
    assert rec(engine, "alice", "Rex").content == dog.content


def test_supersede_and_undo(eng):
    engine, _ = eng
    lisbon, email = rec(engine, "alice", "Lisbon"), rec(engine, "alice", "email")
    out = engine.supersede_record("alice", lisbon.id, email.id)
    assert out.superseded_by == email.id and not out.is_current
    with pytest.raises(RecordEditError):
        engine.supersede_record("alice", email.id, email.id)
    engine.undo_last_edit("alice")
    current = [r.content for r in engine.records("alice", include_invalid=False)]
    assert lisbon.content in current and email.content in current


def test_cross_user_and_unknown_ids_refused(eng):
    engine, _ = eng
    bobs = rec(engine, "bob", "Tom")
    alices = rec(engine, "alice", "Rex")
    n_events = len(engine.events())
    for call in (lambda: engine.edit_record("alice", bobs.id, "hacked"),
                 lambda: engine.pin_record("alice", bobs.id),
                 lambda: engine.unpin_record("alice", bobs.id),
                 lambda: engine.invalidate_record("alice", bobs.id),
                 lambda: engine.supersede_record("alice", alices.id, bobs.id),
                 lambda: engine.supersede_record("bob", bobs.id, alices.id),
                 lambda: engine.edit_record("alice", 9999, "nothing"),
                 lambda: engine.edit_record("alice", "x", "nothing")):
        with pytest.raises(UnknownRecordError) as info:
            call()
        assert isinstance(info.value, MemlabError)
    assert engine.store.get_records("bob", [bobs.id])[0] == bobs
    assert engine.store.get_records("alice", [alices.id])[0] == alices
    assert len(engine.events()) == n_events  # nothing logged
    with pytest.raises(NothingToUndoError):
        engine.undo_last_edit("bob")


def test_empty_or_unchanged_edit_refused(eng):
    engine, _ = eng
    dog = rec(engine, "alice", "Rex")
    with pytest.raises(RecordEditError):
        engine.edit_record("alice", dog.id, "   ")
    with pytest.raises(RecordEditError):
        engine.edit_record("alice", dog.id, dog.content)
    assert not edits(engine)


def test_an_edit_drops_a_dimension_the_new_text_no_longer_states():
    from engine.core.clock import VirtualClock
    from engine.memory.engine import MemoryEngine
    from engine.core.config import MemoryConfig
    from engine.core.records import MemoryRecord
    from datetime import UTC, datetime

    clock = VirtualClock(datetime(2026, 1, 5, 9, tzinfo=UTC))
    eng = MemoryEngine(MemoryConfig.from_preset("customer service"), clock=clock)
    rec = MemoryRecord(user_id="u", content="The user works as a marine biologist in Porto.", memory_type="fact",
                       tags=("fact",), location="Porto", reason="loves the sea", created_at=clock.now(),
                       valid_from=clock.now())
    [stored] = eng.store.add_records([rec], eng.embedder.embed_documents([rec.content]))
    new = eng.edit_record("u", stored.id, "The user works as a marine biologist in Aveiro, loves the sea.")
    assert new.location is None and new.reason == "loves the sea"
