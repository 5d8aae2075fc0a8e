"""A retrieval logs its score rows as one batch entry (engine.core.scorelog) that reads back as the rows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.records import ScoreRow
from engine.core.scorelog import BATCH_RECORD_ID, ScoreColumns, is_batch, score_rows
from engine.memory.engine import MemoryEngine
from engine.roles.embeddings import HashEmbeddings
from engine.stores.check import check_store
from engine.stores.dialect import from_json, to_json
from engine.stores.sqlite import SQLiteStore

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def _row(i: int, **kw) -> ScoreRow:
    base = dict(record_id=i, ranks={"bm25": i, "dense": None, "dim": 2}, path_scores={"bm25": 1.5 * i, "dense": 0.0,
                "dim": 0.25}, R=0.5, T=0.25, F=0.125, parts={"alpha_R": 0.1, "beta_T": 0.2, "gamma_F": 0.3,
                                                              "delta": 0.0},
                S=0.6 - i / 100, verdict="picked" if i < 2 else "near-miss", why="top-K", tokens=12, position=i)
    return ScoreRow(**{**base, **kw})


def test_columns_read_back_as_the_rows_and_their_json():
    rows = [_row(i) for i in range(1, 6)] + [_row(9, R=float("nan"), position=None, tokens=0)]
    cols = ScoreColumns.of(rows)
    stored = from_json(to_json(cols.to_json_obj()))
    assert is_batch(stored) and not is_batch(from_json(to_json(rows[0].to_dict())))
    back = score_rows([stored])
    # what one entry per row reads back: NaN is stored as null either way
    one_by_one = [ScoreRow.from_dict(from_json(to_json(r.to_dict()))) for r in rows]
    assert back == one_by_one and [to_json(r.to_dict()) for r in back] == [to_json(r.to_dict()) for r in one_by_one]
    assert cols[-1].record_id == 9 and cols[1:3] == rows[1:3] and len(cols) == 6
    with pytest.raises(IndexError):
        cols[6]
    assert list(cols.only([5, 2, 77])) == [rows[1], rows[4]] and len(cols.only([])) == 0
    assert len(ScoreColumns.of([])) == 0 and score_rows([ScoreColumns.of([]).to_json_obj()]) == []


def test_malformed_batches_and_mixed_rows_are_refused_clearly():
    good = ScoreColumns.of([_row(1), _row(2)]).to_json_obj()
    with pytest.raises(ValueError, match="unequal length"):
        ScoreColumns.from_json_obj({**good, "S": [0.1]})
    with pytest.raises(ValueError, match="malformed"):
        ScoreColumns.from_json_obj({k: v for k, v in good.items() if k != "why"})
    with pytest.raises(ValueError, match="same paths"):
        ScoreColumns.of([_row(1), _row(2, ranks={"bm25": 1})])


def _engine(tmp_path, **cfg) -> MemoryEngine:
    store = SQLiteStore(str(tmp_path / "m.db"), dim=64)
    engine = MemoryEngine(MemoryConfig(**cfg), store=store, clock=VirtualClock(T0), embedder=HashEmbeddings(64))
    for i in range(12):
        engine.turn("ana", "s", f"I moved to Lisbon in May and I drink oolong tea, note {i}.")
        engine.turn("ana", "s", f"My dog Rex chewed the blue kettle again, day {i}.")
        engine.clock.advance(900)
    return engine


@pytest.mark.parametrize("limit", [24, 3, 0])
def test_a_retrieval_logs_one_entry_that_reads_back_as_its_logged_rows(tmp_path, limit):
    engine = _engine(tmp_path, score_log_rows=limit)
    for q in ("oolong tea in Lisbon", "what did Rex chew", "where do I live"):
        got = engine.retrieve("ana", q, session_id="s2", log=True)
        want = got.ranking.logged_rows(limit, got.excluded)
        assert len(want) >= 1 and engine.store.scores(got.event_id) == want
        assert engine.events(kind="retrieve")[-1].payload["rows_logged"] == len(want)
        with engine.store.connection() as conn:
            entries = conn.execute("SELECT record_id FROM scores WHERE event_id = ?", (got.event_id,)).fetchall()
        assert [tuple(e) for e in entries] == [(BATCH_RECORD_ID,)]


def test_compaction_trims_a_batch_to_the_kept_records_and_counts_its_rows(tmp_path):
    engine = _engine(tmp_path)
    store = engine.store
    got = engine.retrieve("ana", "oolong tea in Lisbon", session_id="s2", log=True)
    rows = store.scores(got.event_id)
    keep = [rows[-1].record_id, rows[0].record_id]
    counts = store.compact_log("ana", keep_scores={got.event_id: keep})
    assert counts["scores_dropped"] == len(rows) - 2
    assert store.scores(got.event_id) == [rows[0], rows[-1]]  # the kept rows, in their order
    assert store.compact_log("ana", keep_scores={got.event_id: keep})["scores_dropped"] == 0
    assert store.compact_log("ana", drop=[got.event_id])["scores_dropped"] == 2
    assert store.scores(got.event_id) == []


def test_compaction_never_fails_on_an_unreadable_batch(tmp_path):
    engine = _engine(tmp_path)
    store = engine.store
    got = engine.retrieve("ana", "oolong tea in Lisbon", session_id="s2", log=True)
    with store.connection() as conn:
        conn.execute("UPDATE scores SET row = '{\"columns\": 3}' WHERE event_id = ?", (got.event_id,))
        conn.commit()
    with pytest.raises(ValueError, match="malformed"):
        store.scores(got.event_id)
    assert store.compact_log("ana", keep_scores={got.event_id: [1]})["scores_dropped"] == 0  # left as it is
    assert store.compact_log("ana", keep_scores={got.event_id: []})["scores_dropped"] == 1
    assert store.scores(got.event_id) == []


def test_check_reads_batches_and_names_a_cross_user_or_unreadable_one(tmp_path):
    engine = _engine(tmp_path)
    got = engine.retrieve("ana", "oolong tea in Lisbon", session_id="s2", log=True)
    engine.turn("bo", "s", "I collect stamps from Peru.")
    engine.clock.advance(3600)
    engine.turn("bo", "s", "I also collect coins.")
    store = engine.store
    assert check_store(store) == []
    (bo,) = [r.id for r in store.records("bo")][:1] or [None]
    assert bo is not None
    with store.connection() as conn:
        conn.execute("INSERT INTO scores (event_id, user_id, record_id, row) VALUES (?, 'ana', 0, ?)",
                     (got.event_id, to_json(ScoreColumns.of([_row(bo)]).to_json_obj())))
        conn.execute("INSERT INTO scores (event_id, user_id, record_id, row) VALUES (?, 'ana', 0, ?)",
                     (got.event_id, '{"columns": 2}'))
        conn.commit()
    text = "\n".join(check_store(store))
    assert "unreadable batch of score rows" in text
    assert f"1 scoring row(s) of user 'ana' point at record {bo} of user 'bo'" in text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=False, width=64, min_value=-1e6, max_value=1e6),
                          st.integers(0, 10**6), st.sampled_from(["picked", "near-miss", "dropped"])),
                min_size=1, max_size=30, unique_by=lambda t: t[1]))
def test_any_rows_round_trip_through_one_batch(items):
    rows = [_row(rid, S=s, verdict=v, R=s / 3, position=j) for j, (s, rid, v) in enumerate(items)]
    back = score_rows([from_json(to_json(ScoreColumns.of(rows).to_json_obj()))])
    assert back == rows
