"""`memlab bench perf` measures the engine's own path: retrieval is `MemoryEngine.retrieve` as a
turn calls it, turns are `MemoryEngine.turn` in one session, and the counting store proxy is a
transparent store that counts the rows it returns. Tiny sizes only: speed is never asserted."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from engine.core.clock import VirtualClock
from engine.core.errors import ConfigError
from engine.core.records import record_text
from engine.eval.perf import (
    CountingStore,
    format_table,
    perf_main,
    run_perf,
    summarize_session,
)
from engine.eval.perf.counting import rows_in
from engine.eval.perf.session import TurnSample, run_session
from engine.memory.engine import DEFAULT_START, MemoryEngine
from engine.stores.sqlite import SQLiteStore


def _talk(engine: MemoryEngine, clock: VirtualClock) -> list[str]:
    replies = []
    for text in ("Hi, I'm Ada Park and I live in Lisbon.", "My cat Miso hates the rain.", "Where do I live?"):
        replies.append(engine.turn("ada", "s1", text).reply)
        clock.advance("20min")
    return replies


def test_the_counting_store_is_the_same_store_to_the_engine():
    plain_clock, counted_clock = VirtualClock(DEFAULT_START), VirtualClock(DEFAULT_START)
    plain = MemoryEngine(store=SQLiteStore(":memory:"), clock=plain_clock)
    proxy = CountingStore(SQLiteStore(":memory:"))
    counted = MemoryEngine(store=proxy, clock=counted_clock)
    assert _talk(plain, plain_clock) == _talk(counted, counted_clock)
    assert [r.content for r in plain.records("ada")] == [r.content for r in counted.records("ada")]
    assert [e.kind for e in plain.events(user_id="ada")] == [e.kind for e in counted.events(user_id="ada")]
    assert proxy.dim == proxy.wrapped.dim and proxy.calls["add_message"] == 6


def test_the_counting_store_counts_returned_rows_per_method():
    proxy = CountingStore(SQLiteStore(":memory:"))
    engine = MemoryEngine(store=proxy)
    for text in ("one", "two", "three"):
        engine.observe("u", "s", "user", text)
    proxy.reset()
    assert len(proxy.messages("u", session_id="s")) == 3
    proxy.get_cursor("u", "s", "extract")
    proxy.get_kv("u", "nothing-here")
    assert proxy.reads_by_method() == {"get_cursor": 1, "messages": 3}
    assert proxy.rows_read() == 4 and proxy.calls["get_kv"] == 1
    with proxy.transaction():  # a context manager passes through
        proxy.set_kv("u", "k", 1)
    assert proxy.rows_read() == 4  # writes are not reads
    assert (rows_in(None), rows_in([1, 2]), rows_in({1: 2}), rows_in(7)) == (0, 2, 1, 1)


def test_retrieval_is_timed_through_memory_engine_retrieve_as_a_turn_calls_it(monkeypatch):
    seen = []
    original = MemoryEngine.retrieve

    def spy(self, user_id, query, **kw):
        got = original(self, user_id, query, **kw)
        seen.append((user_id, kw.get("session_id"), kw.get("log"), got))
        return got

    monkeypatch.setattr(MemoryEngine, "retrieve", spy)
    result = run_perf(sizes=(120,), repeats=4, dim=16, k=8)
    row = result["sizes"]["120"]
    timed = [s for s in seen if s[0] == "bench-user"]
    assert len(timed) == 4 + 4 + 1  # warm-up (up to five), the timed queries, the first on a reopened store
    assert all(session and log is True for _, session, log, _ in timed)
    # the stages the engine timed for the timed queries (not the warm-ups), and their candidates
    from engine.eval.perf.stages import stage_medians

    measured = [got for *_, got in timed[4:8]]
    assert row["stages_p50_ms"] == stage_medians([got.stages for got in measured])
    assert {"parse", "embed", "bm25", "dense", "read", "dim", "rank", "log"} <= set(row["stages_p50_ms"])
    assert row["candidates_p50"] == int(np.median([len(got.ranking.cands) for got in measured]))
    assert row["first_retrieve_ms"] > 0 and row["open_ms"] > 0 and row["rss_mb"] > 0 and 0 < row["rss_anon_mb"] <= row["rss_mb"]
    assert row["keyword_4users_p50_ms"] > 0
    assert row["records_user"] == 120 and row["records_total"] > 120
    assert row["retrieve_p95_ms"] >= row["retrieve_p50_ms"] > 0
    assert result["config"]["k"] == 8 and result["config"]["paths"] == ["bm25", "dense", "dim"]
    assert result["session"] is None  # no session unless asked


def test_one_session_reports_ordinary_and_event_turns_and_rows_read_at_its_marks():
    samples = run_session(turns=40, dim=16, seed=3)
    assert [s.n for s in samples] == list(range(1, 41))
    assert any(s.event for s in samples), "events fire on the virtual clock as in production"
    assert all(s.rows_read == sum(s.reads.values()) for s in samples)
    summary = summarize_session(samples, marks=(10, 40, 1000))
    assert [m["mark"] for m in summary["marks"]] == [10, 40]  # marks past the session's length are left out
    ten = summary["marks"][0]
    ordinary = [s for s in samples[:10] if not s.event]
    assert ten["ordinary_turns"] == len(ordinary) and ten["ordinary_window"] == [1, 10]
    assert ten["rows_read_last_ordinary"]["turn"] == ordinary[-1].n
    assert ten["rows_read_last_ordinary"]["rows"] == ordinary[-1].rows_read
    events = [s.n for s in samples if s.event]
    assert set(ten["event_turns"]) <= set(events) and len(ten["event_turns"]) == min(3, len(events))
    assert summary["events"] == len(events)


def test_event_turns_nearest_a_mark_are_chosen_by_distance():
    samples = [TurnSample(n=n, seconds=0.001 * n, event=n in (2, 9, 15, 30), rows_read=n, reads={"messages": n})
               for n in range(1, 31)]
    mark = summarize_session(samples, marks=(10,))["marks"][0]
    assert mark["event_turns"] == [2, 9, 15]
    assert mark["ordinary_turns"] == 8 and mark["rows_read_last_ordinary"]["turn"] == 10
    # and every event turn of the mark's window (turns 1-10), apart from the three nearest the mark
    assert mark["window_event_turns"] == 2 and mark["window_event_p50_ms"] == 5.5
    later = summarize_session(samples, marks=(30,))["marks"][0]  # window 21-30: one event turn
    assert later["window_event_turns"] == 1 and later["window_event_p50_ms"] == 30.0


def test_perf_main_prints_one_table_and_writes_json_with_run_metadata(tmp_path, capsys):
    out = tmp_path / "perf.json"
    assert perf_main(["--sizes", "150", "--queries", "3", "--turns", "12", "--marks", "10", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "MemoryEngine.retrieve" in text and "one session of 12 turns" in text and "rows read" in text
    doc = json.loads(out.read_text())
    assert {"config", "sizes", "stores", "session"} <= set(doc)
    cfg = doc["config"]
    assert {"cores", "versions", "git_commit", "run_at", "dim", "k", "queries", "sizes"} <= set(cfg)
    assert doc["session"]["turns"] == 12 and doc["session"]["marks"][0]["mark"] == 10
    assert doc["sizes"]["150"]["turn_p50_ms"] is not None
    assert format_table(doc) in text
    # the machine's speed before and after the run, so a slow spell shows as one
    probe = cfg["machine_probe"]
    assert set(probe) == {"before", "after"}
    assert all(set(p) == {"python", "numpy", "sqlite"} and all(ms > 0 for ms in p.values()) for p in probe.values())
    assert "machine probe ms (before / after the run): python" in text


def test_the_machine_probe_line_reads_what_a_run_recorded():
    from engine.eval.runinfo import format_probe

    assert format_probe(None) is None and format_probe({}) is None  # results written before the probe
    line = format_probe({"before": {"python": 3.0, "numpy": 0.5}, "after": {"python": 4.25, "numpy": 0.75}})
    assert line == "machine probe ms (before / after the run): python 3.00 / 4.25, numpy 0.50 / 0.75"
    assert format_probe({"before": {"sqlite": 1.0}}) == "machine probe ms (before / after the run): sqlite 1.00"


def test_records_can_be_stored_with_their_texts_hash_embedded_like_the_questions(monkeypatch):
    """`--record-vectors hash`: the stored vectors are the records' texts hash-embedded (the offline
    default's sparse vectors), not the synthetic dense ones; the run says which it measured."""
    from engine.roles.embeddings import HashEmbeddings

    stored = []
    original = SQLiteStore.add_records

    def spy(self, records, vectors):
        stored.append((list(records), np.asarray(vectors, dtype=np.float32)))
        return original(self, records, vectors)

    monkeypatch.setattr(SQLiteStore, "add_records", spy)
    result = run_perf(sizes=(120,), repeats=2, dim=32, k=8, record_vectors="hash")
    assert result["config"]["record_vectors"] == "hash" and "record vectors hash" in format_table(result)
    records, vectors = stored[0]
    want = np.asarray(HashEmbeddings(32).embed_documents([record_text(r) for r in records]), dtype=np.float32)
    np.testing.assert_array_equal(vectors, want)
    stored.clear()
    run_perf(sizes=(120,), repeats=2, dim=32, k=8)
    assert not np.array_equal(stored[0][1], np.asarray(HashEmbeddings(32).embed_documents(
        [record_text(r) for r in stored[0][0]]), dtype=np.float32))
    with pytest.raises(ConfigError, match="record vectors"):
        run_perf(sizes=(120,), repeats=2, dim=32, record_vectors="minilm")


@pytest.mark.parametrize("bad", [["--sizes", "ten"], ["--store", "oracle"], ["--record-vectors", "minilm"]])
def test_perf_main_rejects_bad_arguments(bad):
    with pytest.raises(SystemExit) as info:
        perf_main(bad)
    assert info.value.code == 2


def test_side_by_side_rounds_follow_the_session_and_are_summarised_apart():
    """After the session, rounds of its next turn, a new session of the same user and a new user
    (turns 1-10 of each, then the next), each round starting one group later; the marks see the
    session alone, and the ratios are the groups' ordinary medians divided."""
    samples = run_session(turns=12, dim=16, seed=3, side_by_side=13)
    main = [s for s in samples if s.group == "session"]
    assert [s.n for s in main] == list(range(1, 13)) and samples[:12] == main
    beside = samples[12:]
    assert [s.group for s in beside[:6]] == ["long", "same-user", "new-user", "same-user", "new-user", "long"]
    by = {g: [s for s in beside if s.group == g] for g in ("long", "same-user", "new-user")}
    assert [s.n for s in by["long"]] == list(range(13, 26))
    assert [s.n for s in by["same-user"]] == [*range(1, 11), 1, 2, 3] == [s.n for s in by["new-user"]]
    summary = summarize_session(samples, marks=(10,))
    alone = summarize_session(main, marks=(10,))
    assert summary["turns"] == 12 and "side_by_side" not in alone and alone["marks"] == summary["marks"]
    sbs = summary["side_by_side"]
    assert sbs["rounds"] == 13 and sbs["groups"]["long"]["turns"] == [13, 25]
    p50 = {g: round(statistics.median([s.seconds for s in v if not s.event]) * 1000, 3) for g, v in by.items()}
    assert {g: sbs["groups"][g]["ordinary_p50_ms"] for g in p50} == p50
    assert sbs["history_ratio"] == round(p50["long"] / p50["same-user"], 3)
    assert sbs["memory_ratio"] == round(p50["same-user"] / p50["new-user"], 3)
    assert sbs["long_vs_first_turns"] == round(p50["long"] / p50["new-user"], 3)
    from engine.eval.perf.report import _session_lines

    lines = _session_lines(summary)
    assert any(line.startswith("side by side, 13 rounds after the session") and "turns 13-25" in line for line in lines)
    assert any(line.startswith(f"  history x{sbs['history_ratio']:.2f}") for line in lines)


def test_side_by_side_reports_what_the_memory_costs_stage_by_stage():
    """Each group's ordinary turns give stage medians (the turn's steps and its retrieval's stages),
    and the memory's cost by stage is the same user's medians minus the new user's, largest first."""
    from engine.eval.perf.report import _session_lines
    from engine.eval.perf.stages import stage_gaps, stage_medians

    samples = run_session(turns=12, dim=16, seed=3, side_by_side=13)
    ordinary = [s for s in samples if s.group == "same-user" and not s.event]
    assert all({"observe", "recall", "inject", "chat", "recall/parse", "recall/rank"} <= set(s.stages) for s in ordinary)
    sbs = summarize_session(samples, marks=(10,))["side_by_side"]
    groups = sbs["groups"]
    assert groups["same-user"]["stages_p50_ms"] == stage_medians([s.stages for s in ordinary])
    gaps = sbs["memory_by_stage_ms"]
    assert gaps == stage_gaps(groups["same-user"]["stages_p50_ms"], groups["new-user"]["stages_p50_ms"])
    assert list(gaps.values()) == sorted(gaps.values(), reverse=True)
    assert any(line.startswith("  memory by stage (same user - new user, p50 ms): ") for line in _session_lines(
        summarize_session(samples, marks=(10,))))


def test_stage_medians_count_a_missing_stage_as_nothing_and_gaps_subtract_them():
    from engine.eval.perf.stages import format_stages, stage_gaps, stage_medians, turn_stages

    med = stage_medians([{"a": 1.0, "b": 4.0}, {"a": 3.0}, {"a": 2.0, "c": 9.0}])
    assert med == {"a": 2.0, "b": 0.0, "c": 0.0} and list(med) == ["a", "b", "c"]
    gaps = stage_gaps({"a": 2.0, "b": 1.0}, {"a": 0.5, "c": 0.25})
    assert gaps == {"a": 1.5, "b": 1.0, "c": -0.25} and list(gaps) == ["a", "b", "c"]
    assert format_stages(gaps, top=2, signed=True) == "a +1.50, b +1.00" and format_stages({}) == "-"

    class Turn:
        stages = {"observe": 0.1}

        class retrieval:
            stages = {"bm25": 0.2}

    assert turn_stages(Turn()) == {"observe": 0.1, "recall/bm25": 0.2}
