"""Log retention (engine.memory.retention): recent turns keep every row, older ones are compacted.

One scripted session played twice, with retention (`log_full_turns` small) and without (0): the
turns themselves do not change, the recent turns' log is identical, older ordinary turns fold into
one "compacted" row, event turns keep their extraction in full, and the lab's memory traces read
the same seats from compacted history.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.errors import ConfigError
from engine.eval.export import pairs_from_events
from engine.eval.perf.corpus import BENCH_NOW
from engine.eval.perf.counting import CountingStore
from engine.eval.perf.session import UserTalk
from engine.memory.engine import MemoryEngine
from engine.memory.retention import BATCH, COMPACTED_KIND, compact_session, cursor_key
from engine.roles.embeddings import HashEmbeddings
from engine.stores.sqlite import SQLiteStore
from lab.event_lines import describe
from lab.turn_trace import traces

USER, SESSION = "ana", "chat"
TURNS, FULL = 70, 12


def play(full_turns: int, *, turns: int = TURNS, path: str = ":memory:"):
    talk, steps, clock = UserTalk(5), random.Random(6), VirtualClock(BENCH_NOW)
    store = CountingStore(SQLiteStore(path, dim=64, embedder_name="hash"))
    engine = MemoryEngine(MemoryConfig(log_full_turns=full_turns), store=store, clock=clock,
                          embedder=HashEmbeddings(64))
    results, reads = [], []
    for _ in range(turns):
        store.reset()
        results.append(engine.turn(USER, SESSION, talk()))
        reads.append(dict(store.rows))
        clock.advance(timedelta(seconds=steps.uniform(30, 60)))
    engine.reads_per_turn = reads  # type: ignore[attr-defined]
    return engine, results


@pytest.fixture(scope="module")
def both():
    return play(FULL), play(0)


def _strip(e):
    d = e.to_dict()
    d.pop("id", None)
    return d


def test_retention_changes_no_turn(both):
    (_, kept), (_, full) = both
    assert [(r.reply, r.prompt.record_ids, r.event_fired) for r in kept] == \
           [(r.reply, r.prompt.record_ids, r.event_fired) for r in full]
    assert any(r.event_fired for r in kept) and not all(r.event_fired for r in kept)


def test_recent_turns_keep_every_row_and_older_ones_are_compacted(both):
    (eng, _), (ref, _) = both
    ev, ref_ev = eng.events(user_id=USER), ref.events(user_id=USER)
    cutoff = TURNS - FULL
    recent = [_strip(e) for e in ev if e.turn is not None and e.turn > cutoff]
    assert recent == [_strip(e) for e in ref_ev if e.turn is not None and e.turn > cutoff]
    old, ref_old = [e for e in ev if e.turn and e.turn < cutoff], [e for e in ref_ev if e.turn and e.turn < cutoff]
    assert len(old) < len(ref_old) / 2
    fired = {e.turn for e in ref_old if e.kind == "extract"}
    for turn in {e.turn for e in ref_old}:
        mine = [e for e in old if e.turn == turn]
        kinds = [e.kind for e in mine]
        if turn in fired:  # an event turn: its extraction and update stay byte for byte
            ref_steps = [_strip(e) for e in ref_old if e.turn == turn and e.kind in ("extract", "update", "truncate")
                         or (e.turn == turn and e.kind == "extraction" and e.payload.get("purpose") == "event")]
            assert [_strip(e) for e in mine if e.kind in ("extract", "update", "truncate")
                    or (e.kind == "extraction" and e.payload.get("purpose") == "event")] == ref_steps
            gate = next(e for e in mine if e.kind == "gate")
            assert gate.payload["will_fire"] in (True, False) and "compacted" in gate.payload
            assert not {"reply", "exposure", "stamp"} & set(kinds) and kinds.count("inject") == 1
        else:  # an ordinary turn: one summary row (with what it injected) and what it reinforced
            assert kinds.count(COMPACTED_KIND) == 1
            assert set(kinds) <= {COMPACTED_KIND, "reinforce"}
        for e in mine:
            assert not (e.kind == "extraction" and e.payload.get("purpose") == "live-window")
            if e.kind == "retrieve":
                assert eng.store.scores(e.id) == [] and e.payload["compacted"]
    # Memory over time reads every injection (a compacted turn's row names it) and reinforcement
    injected = sorted(eng.events(user_id=USER, kind="inject") + eng.events(user_id=USER, kind=COMPACTED_KIND),
                      key=lambda e: e.id)
    assert [(e.turn, e.at, e.payload["record_ids"]) for e in injected] == \
           [(e.turn, e.at, e.payload["record_ids"]) for e in ref.events(user_id=USER, kind="inject")]
    assert [_strip(e) for e in eng.events(user_id=USER, kind="reinforce")] == \
           [_strip(e) for e in ref.events(user_id=USER, kind="reinforce")]


def test_export_keeps_the_events_extractions_and_drops_the_live_window_calls(both):
    (eng, _), (ref, _) = both
    mine = pairs_from_events(eng.events(kind="extraction"))
    theirs = pairs_from_events(ref.events(kind="extraction"))
    assert {p["meta"]["purpose"] for p in mine} <= {p["meta"]["purpose"] for p in theirs}
    strip = lambda ps: [(p["messages"], p["meta"]["at"]) for p in ps if p["meta"]["purpose"] == "event"]  # noqa: E731
    assert strip(mine) == strip(theirs) and strip(mine)


def test_memory_traces_read_compacted_turns(both):
    (eng, _), (ref, _) = both

    def texts(store):
        return lambda ids: {r.id: r.content for r in store.get_records(USER, list(ids))}

    mine = traces(eng.events(user_id=USER, session_id=SESSION), scores=eng.store.scores, texts=texts(eng.store))
    theirs = traces(ref.events(user_id=USER, session_id=SESSION), scores=ref.store.scores, texts=texts(ref.store))
    assert mine.keys() == theirs.keys() and len(mine) == TURNS
    compacted = [m for m in mine if mine[m].compacted is not None]
    assert compacted and all(mine[m].turn <= TURNS - FULL for m in compacted)
    for m, t in mine.items():
        r = theirs[m]
        assert (t.turn, t.event_no, t.added, t.reinforced, t.retrieved, t.keywords) == \
               (r.turn, r.event_no, r.added, r.reinforced, r.retrieved, r.keywords)
        assert [(s.record_id, s.why, round(s.S, 4)) for s in t.injected] == \
               [(s.record_id, s.why, round(s.S, 4)) for s in r.injected]
        assert (t.left_out and (t.left_out.record_id, t.left_out.why)) == \
               (r.left_out and (r.left_out.record_id, r.left_out.why))
        assert (t.gate is None) == (r.gate is None)
    # the Chat timeline has a line for every compacted step
    for e in eng.events(user_id=USER):
        line = describe(e.kind, e.payload, lambda i: "x")
        if e.kind == COMPACTED_KIND:
            assert line.startswith(("retrieved", "compacted")) and "compacted" in line


def test_compaction_is_incremental_and_bounded(both):
    (eng, results), _ = both
    cursor = eng.store.get_kv(USER, cursor_key(SESSION))
    last_old = max(e.id for e in eng.events(user_id=USER) if e.turn is not None and e.turn <= TURNS - FULL)
    first_new = min(e.id for e in eng.events(user_id=USER) if e.turn is not None and e.turn > TURNS - FULL)
    assert last_old <= cursor < first_new
    # once caught up, a turn reads about one turn's events for compaction, never the session
    late = [r.get("events", 0) for r in eng.reads_per_turn[-10:]]
    assert max(late) < 40
    # nothing is due before the window fills, and a second pass finds nothing to do
    assert compact_session(eng.store, USER, SESSION, turn=FULL, full_turns=FULL) is None
    again = compact_session(eng.store, USER, SESSION, turn=TURNS, full_turns=FULL)
    assert again is None or again == {"events_rewritten": 0, "events_dropped": 0, "scores_dropped": 0}


def test_turning_retention_on_later_catches_up_in_bounded_steps(tmp_path):
    path = str(tmp_path / "m.db")
    eng, _ = play(0, turns=40, path=path)
    before = len(eng.events(user_id=USER))
    eng.store.close()
    store = SQLiteStore(path, dim=64, embedder_name="hash")
    steps = 0
    while compact_session(store, USER, SESSION, turn=40, full_turns=5) is not None:
        steps += 1
        assert steps < 50
    assert steps >= before // BATCH
    after = store.events(user_id=USER)
    fired = {e.turn for e in after if e.kind == "extract"}
    replies = {e.turn for e in after if e.kind == "reply"}
    assert len(after) < before * 0.7 and replies == set(range(36, 41)) and fired
    store.close()


def test_log_full_turns_is_checked():
    assert MemoryConfig().log_full_turns == 200
    with pytest.raises(ConfigError, match="log_full_turns"):
        MemoryConfig(log_full_turns=-1)
    assert MemoryConfig.from_dict({"log_full_turns": 50.0}).log_full_turns == 50


def test_a_large_window_compacts_in_steps_with_the_same_result(monkeypatch):
    import engine.memory.retention as retention

    full, turns = 64, 100
    step = retention.stride(full)
    assert step == 4 and retention.stride(FULL) == 1 and retention.stride(200) == 12
    stepped, _ = play(full, turns=turns)
    monkeypatch.setattr(retention, "MAX_STRIDE", 1)
    every, _ = play(full, turns=turns)

    def compacted_turns(eng):
        return {e.turn for e in eng.events(user_id=USER) if e.kind == COMPACTED_KIND or "compacted" in e.payload}

    done = compacted_turns(stepped)
    assert done and max(done) <= turns - full and max(done) > turns - full - step
    assert compacted_turns(every) >= done and max(compacted_turns(every)) == turns - full
    # what a compacted turn keeps does not depend on the step it was compacted in
    assert [_strip(e) for e in stepped.events(user_id=USER) if e.turn in done] == \
           [_strip(e) for e in every.events(user_id=USER) if e.turn in done]
    # most turns read one event to see that nothing is due
    late = [r.get("events", 0) for r in stepped.reads_per_turn[-2 * step:]]
    assert sorted(late)[len(late) // 2] <= 2 and max(late) < 12 * step + 40


def test_compaction_hints_skip_the_due_check_and_change_nothing(monkeypatch):
    """A caught-up session learns when its next step can be due and reads nothing until then; the
    log it leaves is the one the check on every turn leaves."""
    import engine.memory.retention as retention

    full, turns = 64, 100
    hinted, _ = play(full, turns=turns)
    monkeypatch.setattr(retention.CompactionHints, "not_due", lambda *a, **k: False)
    checked, _ = play(full, turns=turns)
    assert [_strip(e) for e in hinted.events(user_id=USER)] == [_strip(e) for e in checked.events(user_id=USER)]
    late_h = [r.get("events", 0) for r in hinted.reads_per_turn[full + 8:]]
    late_c = [r.get("events", 0) for r in checked.reads_per_turn[full + 8:]]
    assert sum(late_h) < sum(late_c)


def test_compaction_hints_are_bounded_and_forgotten():
    from engine.memory.retention import CompactionHints

    hints = CompactionHints(max_sessions=2)
    hints.learn("a", "s1", 200, 50)
    hints.learn("a", "s2", 200, 60)
    hints.learn("b", "s1", 200, 70)
    assert not hints.not_due("a", "s1", 200, 10)  # the oldest went
    assert hints.not_due("a", "s2", 200, 59) and not hints.not_due("a", "s2", 200, 60)
    assert not hints.not_due("a", "s2", 100, 59)  # another window is another hint
    hints.forget_user("a")
    assert not hints.not_due("a", "s2", 200, 59) and hints.not_due("b", "s1", 200, 69)
