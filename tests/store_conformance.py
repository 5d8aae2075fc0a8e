"""The conformance suite every `Store` back end must pass.

Subclass `StoreConformance` in a `test_*.py` file, name the subclass `Test…`, and implement
`make_store(tmp_path, *, dim)`. Only the `Store` protocol (engine/store.py) is used here, so the
same tests run on SQLite and PostgreSQL. Vectors are seeded random unit vectors built here.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.errors import CursorRewindError
from engine.core.records import (
    Event,
    MemoryRecord,
    Message,
    ProfileHistoryEntry,
    ScoreRow,
    SourcePointer,
    TimeSpan,
    UserProfile,
)
from engine.stores.base import Store

T0 = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)
CST = timezone(timedelta(hours=8))

NASTY = [
    "'; DROP TABLE records; --",
    '" OR 1=1 --',
    "NEAR(tea coffee, 2)",
    "tea*",
    "content: tea",
    "-tea",
    '"unbalanced',
    "(tea OR",
    "^tea AND NOT coffee",
    "\x00tea",
    "%_%",
]


def unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def msg(user: str, session: str, content: str, at: datetime = T0, role: str = "user") -> Message:
    return Message(user_id=user, session_id=session, role=role, content=content, created_at=at)


def rec(user: str, content: str, **kw) -> MemoryRecord:
    kw.setdefault("created_at", T0)
    return MemoryRecord(user_id=user, content=content, **kw)


class StoreConformance:
    """Behaviour of the Store protocol. Subclasses implement `make_store`."""

    DIM = 32

    def make_store(self, tmp_path, *, dim: int) -> Store:  # pragma: no cover - overridden
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path):
        s = self.make_store(tmp_path, dim=self.DIM)
        yield s
        s.close()

    def vecs(self, n: int, seed: int = 0) -> np.ndarray:
        return unit(np.random.default_rng(seed), n, self.DIM)

    # -- protocol --------------------------------------------------------------------------------

    def test_implements_protocol(self, store):
        assert isinstance(store, Store)
        assert store.dim == self.DIM

    # -- messages --------------------------------------------------------------------------------

    def test_message_ids_increase(self, store):
        ids = [store.add_message(msg("u", "s", f"m{i}")).id for i in range(20)]
        assert ids == sorted(ids) and len(set(ids)) == 20
        assert [m.content for m in store.messages("u")] == [f"m{i}" for i in range(20)]

    def test_message_filters(self, store):
        a1 = store.add_message(msg("u", "a", "a1"))
        b1 = store.add_message(msg("u", "b", "b1", T0 + timedelta(seconds=1), role="assistant"))
        a2 = store.add_message(msg("u", "a", "a2", T0 + timedelta(seconds=2)))
        other = store.add_message(msg("v", "a", "secret"))
        assert [m.id for m in store.messages("u", session_id="a")] == [a1.id, a2.id]
        assert [m.id for m in store.messages("u", after_id=a1.id)] == [b1.id, a2.id]
        assert [m.id for m in store.messages("u", after_id=a1.id, upto_id=b1.id)] == [b1.id]
        assert [m.id for m in store.messages("u", limit=2)] == [a1.id, b1.id]
        assert [m.id for m in store.get_messages("u", [a2.id, other.id, a1.id])] == [a1.id, a2.id]
        assert store.sessions("u") == ["a", "b"]
        assert store.users() == ["u", "v"]
        assert store.messages("u")[1].to_dict() == b1.to_dict()

    def test_bounded_message_reads(self, store):
        ids = [store.add_message(msg("u", "s", f"m{i}", T0 + timedelta(seconds=i),
                                     role="user" if i % 2 == 0 else "assistant")).id for i in range(10)]
        store.add_message(msg("u", "t", "other session"))
        store.add_message(msg("v", "s", "other user"))
        assert [m.id for m in store.messages("u", session_id="s", newest_first=True, limit=3)] == ids[:-4:-1]
        assert [m.content for m in store.messages("u", session_id="s", newest_first=True, limit=1,
                                                  roles=["user"])] == ["m8"]
        assert [m.id for m in store.messages("u", session_id="s", upto_id=ids[5], newest_first=True,
                                             limit=2)] == [ids[5], ids[4]]
        assert [m.role for m in store.messages("u", session_id="s", roles=("assistant",))] == ["assistant"] * 5
        assert store.count_messages("u") == 11
        assert store.count_messages("u", session_id="s", after_id=ids[6]) == 3
        assert store.count_messages("nobody") == 0

    def test_pending_sessions_follow_each_sessions_cursor(self, store):
        a = [store.add_message(msg("u", "a", f"a{i}")).id for i in range(3)]
        store.add_message(msg("u", "b", "b0"))
        store.add_message(msg("v", "c", "other user"))
        assert store.pending_sessions("u") == ["a", "b"]
        store.set_cursor("u", "a", "extract", a[-1])
        assert store.pending_sessions("u") == ["b"]
        store.set_cursor("u", "b", "other-cursor", 10**6)
        assert store.pending_sessions("u") == ["b"]
        assert store.pending_sessions("u", cursor="other-cursor") == ["a"]
        assert store.pending_sessions("nobody") == []

    def test_several_roles_with_a_limit_take_the_newest_of_any(self, store):
        roles = ["user", "assistant", "tool", "user", "user", "assistant", "tool", "system"]
        ids = [store.add_message(msg("u", "s", f"m{i}", T0 + timedelta(seconds=i), role=r)).id
               for i, r in enumerate(roles)]
        store.add_message(msg("u", "t", "other session", role="tool"))
        store.add_message(msg("v", "s", "other user", role="tool"))
        got = store.messages("u", session_id="s", newest_first=True, limit=3, roles=["tool", "assistant"])
        assert [m.id for m in got] == [ids[6], ids[5], ids[2]]
        got = store.messages("u", session_id="s", limit=3, roles=["tool", "assistant", "tool"])
        assert [m.id for m in got] == [ids[1], ids[2], ids[5]]
        got = store.messages("u", session_id="s", after_id=ids[1], upto_id=ids[6], newest_first=True, limit=2,
                             roles=["user", "system"])
        assert [m.id for m in got] == [ids[4], ids[3]]
        assert [m.content for m in store.messages("u", newest_first=True, limit=2, roles=["tool", "system"])] == [
            "other session", "m7"]
        assert store.messages("u", session_id="s", roles=[]) == []
        assert store.messages("u", session_id="s", limit=0) == []
        assert store.messages("u", session_id="s", newest_first=True, limit=2, roles=["nobody"]) == []

    def test_sessions_and_pending_follow_interleaved_writes(self, store):
        for i, session in enumerate(["b", "a", "b", "c", "a"]):
            store.add_message(msg("u", session, f"{session}{i}"))
        store.add_message(msg("v", "z", "other user"))
        assert store.sessions("u") == ["b", "a", "c"] and store.pending_sessions("u") == ["b", "a", "c"]
        last_b = store.messages("u", session_id="b", newest_first=True, limit=1)[0].id
        store.set_cursor("u", "b", "extract", last_b)
        assert store.pending_sessions("u") == ["a", "c"]
        store.add_message(msg("u", "b", "b again"))
        assert store.pending_sessions("u") == ["b", "a", "c"] and store.sessions("u") == ["b", "a", "c"]
        store.forget_user("u")
        assert store.sessions("u") == [] and store.pending_sessions("u") == [] and store.users() == ["v"]
        store.add_message(msg("u", "new", "after forgetting"))
        assert store.sessions("u") == ["new"] and store.pending_sessions("u") == ["new"]

    def test_newest_events_first(self, store):
        for i in range(5):
            store.append_event(Event(user_id="u", session_id="s", kind="gate", at=T0 + timedelta(seconds=i),
                                     payload={"i": i}, turn=i))
        store.append_event(Event(user_id="v", session_id="s", kind="gate", at=T0, payload={"i": 99}, turn=9))
        assert [e.payload["i"] for e in store.events(user_id="u", session_id="s", newest_first=True, limit=2)] == [4, 3]

    def test_said_at_lasting_and_profile_sources_round_trip(self, store):
        said = datetime(2026, 2, 1, 8, 30, tzinfo=CST)
        saved = store.add_records([rec("u", "ship this one to the office, only this time", said_at=said,
                                       lasting=False), rec("u", "lives in Porto")], self.vecs(2))
        got = {r.id: r for r in store.get_records("u", [r.id for r in saved])}
        one_off, durable = got[saved[0].id], got[saved[1].id]
        assert one_off.said_at == said and one_off.said_at.utcoffset() == said.utcoffset() and not one_off.lasting
        assert durable.said_at is None and durable.lasting
        assert one_off.reinforced_at == said  # decay starts when it was said, not at creation
        store.update_record(replace(one_off, content="ship to the office this once", lasting=True), None)
        assert store.get_records("u", [one_off.id])[0].lasting
        profile = UserProfile(user_id="u", fields={"identity": ("lives in Porto",)}, version=1, updated_at=T0,
                              sources={"identity": {"lives in Porto": (saved[1].id,)}})
        store.save_profile(profile)
        back = store.get_profile("u")
        assert back.sources_of("identity", "lives in Porto") == (saved[1].id,) and back.to_dict() == profile.to_dict()

    def test_records_after_a_cursor(self, store):
        saved = store.add_records([rec("u", f"fact {i}") for i in range(6)], self.vecs(6))
        store.add_records([rec("v", "other user's fact")], self.vecs(1, seed=1))
        store.supersede("u", saved[1].id, saved[2].id, T0)
        got = store.records("u", after_id=saved[0].id, limit=3, include_invalid=True)
        assert [r.id for r in got] == [r.id for r in saved[1:4]]
        assert [r.id for r in store.records("u", after_id=saved[0].id, limit=2)] == [saved[2].id, saved[3].id]
        assert store.records("u", after_id=saved[-1].id) == []

    def test_records_in_a_time_window(self, store):
        def dated(user, text, day):
            start = datetime(2023, 5, day, tzinfo=CST)
            return replace(rec(user, text), time=TimeSpan(start=start, end=start + timedelta(hours=23),
                                                          granularity="day", text=f"2023-05-{day:02d}"))
        saved = store.add_records([dated("u", "early", 1), dated("u", "middle", 10), dated("u", "late", 20),
                                   rec("u", "no time"), dated("v", "other user's", 10)], self.vecs(5))
        lo, hi = datetime(2023, 5, 9, tzinfo=CST), datetime(2023, 5, 10, 12, tzinfo=CST)
        assert [r.content for r in store.records("u", time_between=(lo, hi))] == ["middle"]
        assert [r.content for r in store.records("u", time_between=(None, hi))] == ["early", "middle"]
        assert [r.content for r in store.records("u", time_between=(lo, None), newest_first=True, limit=1)] == ["late"]
        store.supersede("u", saved[1].id, saved[2].id, T0)
        assert store.records("u", time_between=(lo, hi)) == []
        assert [r.content for r in store.records("u", time_between=(lo, hi), include_invalid=True)] == ["middle"]

    def test_message_round_trip_keeps_offset_and_names(self, store):
        m = Message(user_id="u", session_id="s", role="tool", content="42 °C 你好", name="weather",
                    tool_call_id="call_1", created_at=datetime(2026, 3, 2, 17, 0, 0, 123456, tzinfo=CST))
        saved = store.add_message(m)
        assert store.messages("u")[0].to_dict() == saved.to_dict()

    # -- records -----------------------------------------------------------------------------------

    def full_record(self, user: str = "u") -> MemoryRecord:
        return MemoryRecord(
            user_id=user,
            content="Caroline moved to Berlin on 2023-05-07 to start a design job",
            memory_type="episodic",
            tags=("decision", "episode"),
            theme="relocation",
            time=TimeSpan(start=datetime(2023, 5, 7, tzinfo=CST), end=datetime(2023, 5, 7, 23, 59, 59, 999999, tzinfo=CST),
                          granularity="day", text="2023-05-07"),
            location="Berlin",
            reason="a new job",
            purpose="career",
            keywords=("berlin", "design job"),
            source=SourcePointer(session_id="s1", message_ids=(3, 4), speaker="Caroline", reply_message_id=5,
                                 external_ids=("D1:3",)),
            created_at=datetime(2026, 3, 2, 17, 0, tzinfo=CST),
            last_reinforced_at=T0 + timedelta(hours=1),
            strengthen_count=2,
            valid_from=datetime(2023, 5, 7, tzinfo=CST),
        )

    def test_record_round_trip_all_fields(self, store):
        r = self.full_record()
        (saved,) = store.add_records([r], self.vecs(1))
        assert saved.id is not None
        assert saved.to_dict() == replace(r, id=saved.id).to_dict()
        assert store.get_records("u", [saved.id])[0].to_dict() == saved.to_dict()
        assert store.records("u")[0].to_dict() == saved.to_dict()
        bare = store.add_records([rec("u", "plain")], self.vecs(1, 1))[0]
        assert store.get_records("u", [bare.id])[0].to_dict() == bare.to_dict()

    def test_records_filters_and_counts(self, store):
        rs = store.add_records(
            [rec("u", "a", memory_type="fact", tags=("fact",)),
             rec("u", "b", memory_type="profile", tags=("identity",)),
             rec("u", "c", memory_type="episodic", tags=("episode", "preference")),
             rec("v", "d")],
            self.vecs(4),
        )
        assert [r.content for r in store.records("u", memory_type="profile")] == ["b"]
        assert [r.content for r in store.records("u", tags_any=["preference", "identity"])] == ["b", "c"]
        assert [r.content for r in store.records("u", limit=2)] == ["a", "b"]
        assert store.count_records("u") == 3 and store.count_records() == 4
        store.supersede("u", rs[0].id, rs[1].id, T0)
        assert store.count_records("u", include_invalid=False) == 2
        assert store.count_records("u") == 3
        assert [r.content for r in store.records("u")] == ["b", "c"]
        assert [r.content for r in store.records("u", include_invalid=True)] == ["a", "b", "c"]

    def test_tagged_reads_follow_every_write(self, store):
        """The tag index (record_tags) follows adds, tag edits, supersedes and forget_user."""
        rs = store.add_records(
            [rec("u", f"r{i}", tags=("fact", "pinned") if i % 3 == 0 else ("fact",)) for i in range(9)]
            + [rec("v", "other", tags=("pinned",))],
            self.vecs(10),
        )

        def pinned(user="u", **kw):
            return [r.content for r in store.records(user, tags_any=["pinned"], **kw)]

        assert pinned(limit=2, newest_first=True) == ["r6", "r3"]
        assert pinned() == ["r0", "r3", "r6"] and pinned(limit=2) == ["r0", "r3"]
        assert pinned("v", limit=5, newest_first=True) == ["other"]
        both = store.records("u", tags_any=["pinned", "fact"], limit=4, newest_first=True)
        assert [r.content for r in both] == ["r8", "r7", "r6", "r5"]
        store.update_record(replace(rs[4], tags=("pinned", "safety")))  # a hand edit pins r4
        store.update_record(replace(rs[6], tags=("fact",)))  # and unpins r6
        assert pinned(limit=5, newest_first=True) == ["r4", "r3", "r0"]
        assert [r.content for r in store.records("u", tags_any=["safety"], limit=3)] == ["r4"]
        store.supersede("u", rs[3].id, rs[5].id, T0)
        assert pinned(limit=5, newest_first=True) == ["r4", "r0"]
        assert pinned(include_invalid=True) == ["r0", "r3", "r4"]
        assert pinned(memory_type="fact", limit=1, newest_first=True) == ["r4"]
        assert pinned(after_id=rs[0].id) == ["r4"]
        assert store.records("u", tags_any=[], limit=3) == []
        store.forget_user("u")
        assert pinned(limit=5) == [] and pinned("v", limit=5) == ["other"]
        again = store.add_records([rec("u", "fresh", tags=("pinned",))], self.vecs(1))
        assert [r.id for r in store.records("u", tags_any=["pinned"], limit=5, newest_first=True)] == [again[0].id]

    def test_count_records_follows_every_write(self, store):
        rs = store.add_records([rec("u", f"fact {i}") for i in range(5)], self.vecs(5))
        store.add_records([rec("v", "other"), rec("u", "born superseded", invalid_at=T0, superseded_by=rs[0].id)],
                          self.vecs(2, seed=1))
        assert (store.count_records("u"), store.count_records("u", include_invalid=False)) == (6, 5)
        store.supersede("u", rs[1].id, rs[2].id, T0)
        store.supersede("u", rs[1].id, rs[3].id, T0 + timedelta(days=1))  # again: still one fewer current
        assert (store.count_records("u"), store.count_records("u", include_invalid=False)) == (6, 4)
        store.update_record(replace(rs[0], content="fact zero, merged"), self.vecs(1, seed=2)[0])
        assert store.count_records("u", include_invalid=False) == 4
        assert (store.count_records(), store.count_records(include_invalid=False)) == (7, 5)
        assert store.count_records("nobody") == 0 and store.count_records("nobody", include_invalid=False) == 0
        with pytest.raises(RuntimeError), store.transaction():
            store.add_records([rec("u", "rolled back")], self.vecs(1, seed=3))
            raise RuntimeError("abort")
        assert store.count_records("u") == 6
        store.forget_user("u")
        assert store.count_records("u") == 0 and store.count_records() == 1
        store.add_records([rec("u", "new life")], self.vecs(1, seed=4))
        assert store.count_records("u", include_invalid=False) == 1

    def test_supersede_keeps_row_and_leaves_current_searches(self, store):
        v = self.vecs(2)
        old, new = store.add_records([rec("u", "I live in Paris"), rec("u", "I live in Berlin now")], v)
        store.supersede("u", old.id, new.id, T0 + timedelta(days=1))
        (kept,) = store.get_records("u", [old.id])
        assert kept.invalid_at == T0 + timedelta(days=1) and kept.superseded_by == new.id
        assert not kept.is_current and kept.content == "I live in Paris"
        assert old.id not in [i for i, _ in store.search_bm25("u", "Paris", k=10)]
        assert old.id in [i for i, _ in store.search_bm25("u", "Paris", k=10, include_invalid=True)]
        assert old.id not in [i for i, _ in store.search_dense("u", v[0], k=10)]
        assert store.search_dense("u", v[0], k=10, include_invalid=True)[0][0] == old.id
        assert store.vectors("u", [old.id])  # the vector stays too

    def test_update_never_deletes(self, store):
        v = self.vecs(3)
        a, b = store.add_records([rec("u", "likes green tea"), rec("u", "owns a bicycle")], v[:2])
        changed = replace(a, content="likes jasmine tea", keywords=("jasmine",), strengthen_count=4)
        out = store.update_record(changed, vector=v[2])
        assert store.count_records("u") == 2
        assert out.to_dict() == changed.to_dict()
        assert [i for i, _ in store.search_bm25("u", "jasmine", k=5)] == [a.id]
        assert store.search_bm25("u", "green", k=5) == []
        assert store.search_dense("u", v[2], k=1)[0][0] == a.id
        np.testing.assert_allclose(store.vectors("u", [a.id])[a.id], v[2], atol=1e-6)
        assert store.get_records("u", [b.id])[0].content == "owns a bicycle"

    def test_update_of_another_users_record_is_refused(self, store):
        (a,) = store.add_records([rec("u", "mine")], self.vecs(1))
        with pytest.raises(ValueError):
            store.update_record(replace(a, user_id="v", content="stolen"))
        assert store.get_records("u", [a.id])[0].content == "mine"

    def test_reinforce_increments_and_sets_time(self, store):
        a, b = store.add_records([rec("u", "a"), rec("u", "b")], self.vecs(2))
        (c,) = store.add_records([rec("v", "c")], self.vecs(1, 1))
        store.reinforce("u", [a.id, c.id], T0 + timedelta(hours=3))
        store.reinforce("u", [a.id], T0 + timedelta(hours=5))
        ra, rb = store.get_records("u", [a.id, b.id])
        assert ra.strengthen_count == 2 and ra.last_reinforced_at == T0 + timedelta(hours=5)
        assert rb.strengthen_count == 0 and rb.last_reinforced_at is None
        rc = store.get_records("v", [c.id])[0]
        assert rc.strengthen_count == 0  # another user's id is not touched

    # -- retrieval primitives -----------------------------------------------------------------

    def test_bm25_english_ranks_and_scores_positive(self, store):
        texts = ["I adore green tea every morning", "the bicycle is red", "tea and tea and more tea", "coffee only"]
        rs = store.add_records([rec("u", t) for t in texts], self.vecs(4))
        hits = store.search_bm25("u", "green tea", k=10)
        ids = [i for i, _ in hits]
        assert set(ids) == {rs[0].id, rs[2].id}
        assert ids[0] == rs[0].id  # matches both terms
        assert all(s > 0 for _, s in hits) and [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        assert len(store.search_bm25("u", "tea", k=1)) == 1
        assert store.search_bm25("u", "the and", k=5) is not None  # stopword-only query is fine

    def test_bm25_chinese_word_inside_a_run(self, store):
        rs = store.add_records([rec("u", "我住在北京朝阳区"), rec("u", "我喜欢上海的咖啡")], self.vecs(2))
        assert [i for i, _ in store.search_bm25("u", "北京", k=5)] == [rs[0].id]
        assert [i for i, _ in store.search_bm25("u", "你住在哪里？北京吗", k=5)][0] == rs[0].id
        assert [i for i, _ in store.search_bm25("u", "咖啡", k=5)] == [rs[1].id]

    def test_bm25_indexes_keywords_and_location(self, store):
        (r,) = store.add_records([rec("u", "moved last spring", location="Lisbon", keywords=("relocation",))],
                                 self.vecs(1))
        assert [i for i, _ in store.search_bm25("u", "Lisbon", k=5)] == [r.id]
        assert [i for i, _ in store.search_bm25("u", "relocation", k=5)] == [r.id]

    @pytest.mark.parametrize("nasty", NASTY)
    def test_fts_syntax_and_sql_injection_are_inert(self, store, nasty):
        (mine,) = store.add_records([rec("u", "green tea and coffee")], self.vecs(1))
        (theirs,) = store.add_records([rec(nasty, "tea secret " + nasty)], self.vecs(1, 1))
        hits = store.search_bm25("u", nasty, k=5)
        assert theirs.id not in [i for i, _ in hits]
        assert [i for i, _ in store.search_bm25(nasty, "tea", k=5)] == [theirs.id]
        assert [i for i, _ in store.search_dense(nasty, self.vecs(1)[0], k=5)] == [theirs.id]
        store.add_message(msg(nasty, nasty, nasty))
        assert [m.content for m in store.messages(nasty)] == [nasty]
        assert store.count_records("u") == 1 and store.get_records("u", [mine.id])

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors])
    @given(query=st.text(max_size=40))
    def test_bm25_never_raises_on_any_text(self, store, query):
        if store.count_records("u") == 0:
            store.add_records([rec("u", "green tea 北京 NEAR AND OR")], self.vecs(1))
        hits = store.search_bm25("u", query, k=3)
        assert isinstance(hits, list) and all(s > 0 for _, s in hits)

    def test_dense_knn_is_exact_on_small_sets(self, store):
        v = self.vecs(200)
        rs = store.add_records([rec("u", f"r{i}") for i in range(200)], v)
        ids = np.array([r.id for r in rs])
        for q in self.vecs(5, seed=9):
            hits = store.search_dense("u", q, k=10)
            cos = v @ q
            order = np.argsort(-cos)[:10]
            assert [i for i, _ in hits] == ids[order].tolist()
            np.testing.assert_allclose([s for _, s in hits], cos[order], atol=1e-5)
        assert store.search_dense("u", v[7], k=1)[0][0] == rs[7].id

    def test_cross_user_isolation_small_user_beside_a_big_one(self, store):
        """Reference defect 4: a KNN over everyone then a user filter starves small users."""
        rng = np.random.default_rng(4)
        base = unit(rng, 1, self.DIM)[0]
        crowd = base + 0.01 * rng.standard_normal((5000, self.DIM)).astype(np.float32)
        big = store.add_records([rec("big", f"favourite tea shop number {i}") for i in range(5000)], crowd)
        mine_v = unit(rng, 5, self.DIM)
        mine = store.add_records([rec("small", f"my favourite tea is kind {i}") for i in range(5)], mine_v)
        mine_ids = {r.id for r in mine}
        dense = store.search_dense("small", base, k=50)
        assert {i for i, _ in dense} == mine_ids
        bm = store.search_bm25("small", "favourite tea shop", k=50)
        assert {i for i, _ in bm} == mine_ids
        big_ids = [r.id for r in big[:3]]
        assert store.get_records("small", big_ids) == [] and store.vectors("small", big_ids) == {}
        assert set(store.vectors("small", big_ids + sorted(mine_ids))) == mine_ids
        assert len(store.search_dense("big", base, k=50)) == 50

    # -- profiles --------------------------------------------------------------------------------

    def test_profiles_and_history(self, store):
        assert store.get_profile("u").is_empty() and store.profile_history("u") == []
        p1 = UserProfile(user_id="u", fields={"identity": ("Caroline",)}, version=1, updated_at=T0)
        h1 = ProfileHistoryEntry(user_id="u", version=1, at=T0, before={}, after={"identity": ("Caroline",)},
                                 record_ids=(1, 2))
        store.save_profile(p1, h1)
        p2 = UserProfile(user_id="u", fields={"identity": ("Caroline",), "goals": ("adopt", "写作")}, version=2,
                         updated_at=T0 + timedelta(days=1))
        h2 = ProfileHistoryEntry(user_id="u", version=2, at=T0 + timedelta(days=1), before=p1.fields, after=p2.fields)
        store.save_profile(p2, h2)
        assert store.get_profile("u").to_dict() == p2.to_dict()
        assert [h.to_dict() for h in store.profile_history("u")] == [h1.to_dict(), h2.to_dict()]
        assert store.get_profile("v").is_empty()

    # -- cursors and kv --------------------------------------------------------------------------

    def test_cursors_per_user_and_session_never_rewind(self, store):
        assert store.get_cursor("u", "s1", "sliced") == 0
        store.set_cursor("u", "s1", "sliced", 5)
        store.set_cursor("u", "s1", "sliced", 5)  # equal is fine
        assert store.get_cursor("u", "s1", "sliced") == 5
        assert store.get_cursor("u", "s2", "sliced") == 0  # per session (reference defect 5)
        assert store.get_cursor("v", "s1", "sliced") == 0
        assert store.get_cursor("u", "s1", "other") == 0
        with pytest.raises(CursorRewindError):
            store.set_cursor("u", "s1", "sliced", 4)
        assert store.get_cursor("u", "s1", "sliced") == 5
        store.set_cursor("u", "s2", "sliced", 1)
        store.set_cursor("u", "", "induct", 9)
        assert store.get_cursor("u", "", "induct") == 9 and store.get_cursor("u", "s1", "sliced") == 5

    def test_kv_json_values(self, store):
        assert store.get_kv("u", "weights") is None
        value = {"alpha": 0.5, "beta": 0.25, "gamma": 0.25, "themes": ["茶", "tea"], "n": None}
        store.set_kv("u", "weights", value)
        store.set_kv("v", "weights", [1, 2])
        assert store.get_kv("u", "weights") == value and store.get_kv("v", "weights") == [1, 2]
        store.set_kv("u", "weights", 3)
        assert store.get_kv("u", "weights") == 3

    def test_kv_delete_removes_only_the_users_keys(self, store):
        for user in ("u", "v"):
            store.set_kv(user, "a", 1)
            store.set_kv(user, "b", 2)
        store.delete_kv("u", ["a", "never-set", "a"])
        store.delete_kv("u", [])
        assert store.get_kv("u", "a") is None and store.get_kv("u", "b") == 2
        assert store.get_kv("v", "a") == 1 and store.get_kv("v", "b") == 2

    # -- logs ----------------------------------------------------------------------------------------

    def test_events_filters(self, store):
        made = []
        for i, (user, session, kind) in enumerate(
            [("u", "a", "gate"), ("u", "a", "extract"), ("u", "b", "gate"), ("v", "a", "gate"), ("u", "a", "retrieve")]
        ):
            e = Event(user_id=user, session_id=session, kind=kind, at=T0 + timedelta(minutes=i), turn=i, event_no=1,
                      payload={"i": i, "nested": {"x": [1, 2]}, "zh": "北京"})
            made.append(store.append_event(e))
        ids = [e.id for e in made]
        assert ids == sorted(ids)
        assert [e.id for e in store.events(user_id="u")] == [ids[0], ids[1], ids[2], ids[4]]
        assert [e.id for e in store.events(user_id="u", session_id="a")] == [ids[0], ids[1], ids[4]]
        assert [e.id for e in store.events(kind="gate")] == [ids[0], ids[2], ids[3]]
        assert [e.id for e in store.events(since=T0 + timedelta(minutes=1), until=T0 + timedelta(minutes=3))] == ids[1:4]
        assert [e.id for e in store.events(after_id=ids[2], limit=1)] == [ids[3]]
        assert store.events(user_id="u")[0].to_dict() == made[0].to_dict()

    def test_events_newest_first_take_the_newest(self, store):
        made = [store.append_event(Event(user_id=u, session_id=s_, kind=k, at=T0 + timedelta(minutes=i)))
                for i, (u, s_, k) in enumerate([("u", "a", "gate"), ("u", "b", "extract"), ("u", "a", "gate"),
                                                ("v", "a", "gate"), ("u", "a", "extract"), ("u", "a", "gate")])]
        ids = [e.id for e in made]
        assert [e.id for e in store.events(user_id="u", newest_first=True, limit=2)] == [ids[5], ids[4]]
        assert [e.id for e in store.events(user_id="u", kind="gate", newest_first=True, limit=2)] == [ids[5], ids[2]]
        assert [e.id for e in store.events(user_id="u", session_id="a", newest_first=True)] == [
            ids[5], ids[4], ids[2], ids[0]]
        assert [e.id for e in store.events(newest_first=True, after_id=ids[2], limit=2)] == [ids[5], ids[4]]
        assert [e.id for e in store.events(user_id="u", newest_first=True, until=T0 + timedelta(minutes=2),
                                           limit=1)] == [ids[2]]
        assert [e.id for e in store.events(user_id="u", limit=2)] == [ids[0], ids[1]]

    def test_scores_round_trip(self, store):
        rows = [
            ScoreRow(record_id=i, ranks={"bm25": i, "dense": None}, path_scores={"bm25": 1.5 * i}, R=0.5, T=0.25,
                     F=0.125, parts={"alpha_R": 0.1, "beta_T": 0.2, "gamma_F": 0.3, "delta": 0.0}, S=0.6,
                     verdict="picked" if i < 2 else "near-miss", why="top-K", tokens=12, position=i)
            for i in range(4)
        ]
        e = store.append_event(Event(user_id="u", session_id="s", kind="retrieve", at=T0))
        store.append_scores(e.id, "u", rows)
        assert [r.to_dict() for r in store.scores(e.id)] == [r.to_dict() for r in rows]
        assert store.scores(e.id + 1000) == []

    def test_a_batch_of_score_rows_reads_back_and_compacts_row_by_row(self, store):
        from engine.core.scorelog import ScoreColumns

        rows = [ScoreRow(record_id=i, ranks={"bm25": i, "dense": None}, path_scores={"bm25": 1.5 * i, "dense": 0.0},
                         R=0.5, T=0.25, F=0.125, parts={"alpha_R": 0.1, "beta_T": 0.2, "gamma_F": 0.3, "delta": 0.0},
                         S=1 - i / 10, verdict="picked" if i < 2 else "near-miss", why="top-K", tokens=12, position=i)
                for i in range(1, 6)]
        e = store.append_event(Event(user_id="u", session_id="s", kind="retrieve", at=T0))
        other = store.append_event(Event(user_id="v", session_id="s", kind="retrieve", at=T0))
        store.append_scores(e.id, "u", ScoreColumns.of(rows))
        store.append_scores(other.id, "v", ScoreColumns.of(rows))
        store.append_scores(e.id, "u", ScoreColumns.of([]))  # nothing to write
        assert store.scores(e.id) == rows
        assert store.compact_log("u", keep_scores={e.id: [4, 2]})["scores_dropped"] == 3
        assert store.scores(e.id) == [rows[1], rows[3]]
        assert store.compact_log("u", drop=[e.id])["scores_dropped"] == 2 and store.scores(e.id) == []
        assert store.compact_log("u", keep_scores={other.id: []})["scores_dropped"] == 0  # not u's
        assert store.scores(other.id) == rows

    def test_compact_log_rewrites_drops_and_trims_scores_of_one_user_only(self, store):
        def row(i: int, verdict: str = "near-miss") -> ScoreRow:
            return ScoreRow(record_id=i, ranks={}, path_scores={}, R=0, T=0, F=0, parts={}, S=1 - i / 10,
                            verdict=verdict, why="top-K")

        made = {}
        for user in ("u", "v"):
            gate = store.append_event(Event(user_id=user, session_id="s", kind="gate", at=T0, turn=1, payload={"g": 1}))
            ret = store.append_event(Event(user_id=user, session_id="s", kind="retrieve", at=T0, turn=1,
                                           payload={"picked": [1]}))
            reply = store.append_event(Event(user_id=user, session_id="s", kind="reply", at=T0, turn=1,
                                             payload={"tokens": 3}))
            for e in (ret, reply):
                store.append_scores(e.id, user, [row(1, "picked"), row(2), row(3)])
            made[user] = (gate, ret, reply)
        gate, ret, reply = made["u"]
        v_gate, v_ret, v_reply = made["v"]
        before_v = [e.to_dict() for e in store.events(user_id="v")]
        # another user's ids are refused silently: only the named user's rows are touched
        counts = store.compact_log("u", rewrite={gate.id: ("compacted", {"compacted": {"zh": "北京"}}),
                                                 v_gate.id: ("compacted", {})},
                                   drop=[reply.id, v_reply.id], keep_scores={ret.id: [1], v_ret.id: []})
        assert counts == {"events_rewritten": 1, "events_dropped": 1, "scores_dropped": 5}
        kept = store.events(user_id="u")
        assert [(e.id, e.kind) for e in kept] == [(gate.id, "compacted"), (ret.id, "retrieve")]
        assert kept[0].payload == {"compacted": {"zh": "北京"}} and kept[0].turn == 1 and kept[0].at == T0
        assert [r.record_id for r in store.scores(ret.id)] == [1]
        assert store.scores(reply.id) == []
        assert [e.to_dict() for e in store.events(user_id="v")] == before_v
        assert len(store.scores(v_ret.id)) == 3 and len(store.scores(v_reply.id)) == 3
        # an empty keep list trims every row; nothing to do is a no-op
        assert store.compact_log("u", keep_scores={ret.id: []})["scores_dropped"] == 1
        assert store.compact_log("u") == {"events_rewritten": 0, "events_dropped": 0, "scores_dropped": 0}
        assert store.scores(ret.id) == []

    # -- privacy -------------------------------------------------------------------------------------

    def fill_user(self, store, user: str, seed: int) -> None:
        store.add_message(msg(user, "s", f"hello from {user}"))
        (r,) = store.add_records([rec(user, f"{user} likes tea")], self.vecs(1, seed))
        store.save_profile(UserProfile(user_id=user, fields={"identity": (user,)}, version=1, updated_at=T0),
                           ProfileHistoryEntry(user_id=user, version=1, at=T0, before={}, after={"identity": (user,)}))
        store.set_cursor(user, "s", "sliced", 1)
        store.set_kv(user, "weights", {"a": 1})
        e = store.append_event(Event(user_id=user, session_id="s", kind="gate", at=T0))
        store.append_scores(e.id, user, [ScoreRow(record_id=r.id, ranks={}, path_scores={}, R=0, T=0, F=0, parts={},
                                                  S=0, verdict="picked", why="top-K")])

    def test_forget_user_removes_everything_of_one_user_only(self, store):
        self.fill_user(store, "gone", 1)
        self.fill_user(store, "stays", 2)
        counts = store.forget_user("gone")
        assert counts["messages"] == 1 and counts["records"] == 1 and counts["events"] == 1
        assert store.messages("gone") == [] and store.records("gone", include_invalid=True) == []
        assert store.search_bm25("gone", "tea", k=5) == [] and store.search_dense("gone", self.vecs(1, 1)[0], k=5) == []
        assert store.get_profile("gone").is_empty() and store.profile_history("gone") == []
        assert store.get_cursor("gone", "s", "sliced") == 0 and store.get_kv("gone", "weights") is None
        assert store.events(user_id="gone") == [] and "gone" not in store.users()
        assert len(store.messages("stays")) == 1 and len(store.records("stays")) == 1
        assert store.search_bm25("stays", "tea", k=5) and store.search_dense("stays", self.vecs(1, 2)[0], k=5)
        assert store.get_cursor("stays", "s", "sliced") == 1 and len(store.profile_history("stays")) == 1
        (ev,) = store.events(user_id="stays")
        assert len(store.scores(ev.id)) == 1

    # -- atomicity and concurrency ------------------------------------------------------------------

    def test_transaction_rolls_back_everything(self, store):
        store.set_cursor("u", "s", "sliced", 1)
        with pytest.raises(RuntimeError):
            with store.transaction():
                store.add_message(msg("u", "s", "half"))
                store.add_records([rec("u", "half written tea")], self.vecs(1))
                with store.transaction():  # nested blocks join
                    store.set_cursor("u", "s", "sliced", 7)
                store.append_event(Event(user_id="u", session_id="s", kind="extract", at=T0))
                raise RuntimeError("model failed mid-event")
        assert store.messages("u") == [] and store.count_records("u") == 0
        assert store.search_bm25("u", "tea", k=5) == [] and store.search_dense("u", self.vecs(1)[0], k=5) == []
        assert store.get_cursor("u", "s", "sliced") == 1 and store.events() == []
        with store.transaction():
            store.add_message(msg("u", "s", "whole"))
            store.set_cursor("u", "s", "sliced", 2)
        assert [m.content for m in store.messages("u")] == ["whole"] and store.get_cursor("u", "s", "sliced") == 2

    def test_add_records_is_atomic(self, store):
        good = self.vecs(1)[0]
        with pytest.raises(ValueError):
            store.add_records([rec("u", "first"), rec("u", "second")], [good, good[: self.DIM // 2]])
        assert store.count_records("u") == 0

    def test_concurrent_writers_lose_nothing(self, store):
        errors = []

        def writer(n: int) -> None:
            try:
                for i in range(40):
                    store.add_message(msg(f"user{n % 2}", f"s{n}", f"{n}-{i}"))
                    if i % 10 == 0:
                        store.add_records([rec(f"user{n % 2}", f"thread {n} item {i}")], self.vecs(1, n * 100 + i))
            except Exception as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        got = store.messages("user0") + store.messages("user1")
        assert len(got) == 240 and len({m.id for m in got}) == 240
        assert {m.content for m in got} == {f"{n}-{i}" for n in range(6) for i in range(40)}
        assert store.count_records() == 24
