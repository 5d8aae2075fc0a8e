"""The engine times its own stages (engine.core.laps) without letting the times touch anything else."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from engine.core.clock import VirtualClock
from engine.core.laps import Laps
from engine.memory.engine import MemoryEngine
from engine.roles.embeddings import HashEmbeddings

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
RETRIEVAL_STAGES = ["parse", "embed", "floors", "bm25", "dense", "read", "dim", "candidates", "held_back", "rank"]


def test_laps_charge_the_time_since_the_last_lap_and_add_up_a_stage_that_comes_back():
    laps = Laps()
    laps.lap("a")
    laps.lap("b")
    first = laps.ms["a"]
    laps.lap("a")
    assert list(laps.ms) == ["a", "b"] and laps.ms["a"] >= first >= 0 and laps.ms["b"] >= 0
    laps.skip()
    before = dict(laps.ms)
    laps.add({"x": 1.5, "a": 2.0})
    assert laps.ms["x"] == 1.5 and laps.ms["a"] == before["a"] + 2.0 and list(laps.ms) == ["a", "b", "x"]


def _engine() -> MemoryEngine:
    return MemoryEngine(clock=VirtualClock(T0), embedder=HashEmbeddings(64))


def _talk(engine: MemoryEngine, user: str, n: int) -> list:
    out = []
    for i in range(n):
        out.append(engine.turn(user, "s", f"I moved to Lisbon in May and I drink oolong tea, note {i}."))
        engine.clock.advance(600)
    return out


def test_a_turn_and_its_retrieval_say_where_their_time_went():
    engine = _engine()
    results = _talk(engine, "ana", 6)
    ordinary = [r for r in results if not r.event_fired and r.retrieval is not None]
    assert ordinary and any(r.event_fired for r in results)
    for r in ordinary:
        assert list(r.stages) == ["observe", "compact", "catch_up", "window", "gate", "recall", "inject", "chat",
                                  "reply", "reinforce"]
        assert list(r.retrieval.stages) == [*RETRIEVAL_STAGES, "log"]
        assert all(ms >= 0 for ms in [*r.stages.values(), *r.retrieval.stages.values()])
    fired = [r for r in results if r.event_fired]
    assert all("event" in r.stages for r in fired)
    # the stages sum to about the turn: nothing big goes untimed
    assert all(sum(r.stages.values()) > 0 for r in results)


def test_stage_times_stay_out_of_the_log_and_out_of_equality():
    engine = _engine()
    _talk(engine, "ana", 4)
    got = engine.retrieve("ana", "Where did I move?", session_id="s", log=True)
    assert list(got.stages) == [*RETRIEVAL_STAGES, "log"]
    unlogged = engine.retrieve("ana", "Where did I move?", session_id="s")
    assert "log" not in unlogged.stages
    payloads = [e.payload for e in engine.store.events(user_id="ana", kind="retrieve")]
    assert payloads and not any("stages" in str(p) or "parse" in p for p in payloads)
    assert replace(got, stages={"parse": 1e9}) == got  # a machine's speed never makes two retrievals differ
