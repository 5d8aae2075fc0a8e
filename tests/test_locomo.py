"""The LoCoMo benchmark on a hand-made three-turn conversation with known evidence recall."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.errors import ConfigError
from engine.eval.locomo import (
    METHODS,
    evidence_recall,
    load_locomo,
    locomo_main,
    parse_session_datetime,
    run_benchmark,
    split_evidence,
)
from engine.roles.embeddings import HashEmbeddings

SAMPLE = {
    "sample_id": "tiny-1",
    "conversation": {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Alice", "dia_id": "D1:1", "text": "I adopted a golden retriever named Biscuit."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely! I went hiking in the mountains last week.",
             "img_url": ["https://example.invalid/x.jpg"], "blip_caption": "a photo of a snowy mountain trail"},
        ],
        "session_2_date_time": "10:04 am on 19 June, 2023",
        "session_2": [
            {"speaker": "Alice", "dia_id": "D2:1", "text": "My sister plays the cello in an orchestra."},
        ],
    },
    "observation": {
        "session_1_observation": {
            "Alice": [["Alice adopted a golden retriever named Biscuit.", "D1:1"]],
            "Bob": [["Bob went hiking in the mountains.", "D1:2"]],
        },
        "session_2_observation": {"Alice": [["Alice's sister plays the cello.", "D2:1"]]},
    },
    "qa": [
        # BM25 must rank D1:1 first: recall 1.0 at k=1
        {"question": "What is the name of the retriever Alice adopted?", "answer": "Biscuit",
         "evidence": ["D1:1"], "category": 4},
        # the words point at D1:1, the gold is D1:2: recall 0.0 at k=1
        {"question": "Did Alice adopt a golden retriever?", "answer": "yes", "evidence": ["D1:2"], "category": 1},
        # two gold ids, the cello turn is found, the other is not: 0.5 at k=1
        {"question": "Who plays the cello in an orchestra?", "answer": "Alice's sister",
         "evidence": ["D2:1", "D1:1"], "category": 2},
        # malformed: one entry holding two ids, and an id matching no turn (kept, still scored)
        {"question": "What did Bob share a photo of?", "answer": "a mountain trail",
         "evidence": ["D1:2; D9:17"], "category": 3},
        # only unmatched / unusable evidence: counted, not scored
        {"question": "Where is the lake house?", "answer": "?", "evidence": ["D7:3", "D"], "category": 4},
        {"question": "What is Bob's favourite food?", "answer": "?", "evidence": [], "category": 4},
        {"question": "Adversarial question?", "answer": "?", "evidence": ["D1:1"], "category": 5},
    ],
}


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "tiny_locomo.json"
    path.write_text(json.dumps([SAMPLE]), encoding="utf-8")
    return path


def test_session_dates_parse_to_aware_utc():
    assert parse_session_datetime("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_datetime("10:04 am on 19 December, 2023") == datetime(2023, 12, 19, 10, 4, tzinfo=UTC)
    with pytest.raises(ConfigError, match="not a date"):
        parse_session_datetime("sometime last spring-ish")


def test_evidence_ids_are_split_and_repaired():
    assert split_evidence("D1:3") == (["D1:3"], False)
    assert split_evidence("D8:6; D9:17") == (["D8:6", "D9:17"], True)
    assert split_evidence("D:11:26") == (["D11:26"], True)
    assert split_evidence("D") == ([], True)


def test_loader_counts_bad_evidence_and_folds_photos(data_file):
    data = load_locomo(data_file)
    (conv,) = data.conversations
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    assert conv.turns[1].text.endswith("[shares a photo of a snowy mountain trail]")
    assert conv.turns[1].item_text.startswith('Bob said, "Lovely!')
    assert conv.now == datetime(2023, 6, 19, 10, 4, tzinfo=UTC)  # the last session's date
    assert len(conv.observations) == 3 and conv.observations[2].dia_ids == ("D2:1",)
    s = data.stats
    assert s.questions_total == 6  # category 5 left out
    assert s.questions_scored == 4
    assert s.questions_without_evidence == 1
    assert s.questions_without_matched_evidence == 1
    assert s.repaired_ids == 2  # "D8:6; D9:17"-style entry and the bare "D"
    assert sorted(s.unmatched_ids) == ["tiny-1:D", "tiny-1:D7:3", "tiny-1:D9:17"]
    photo_q = conv.questions[3]
    assert photo_q.evidence == ("D1:2",) and photo_q.unmatched == ("D9:17",)


def test_bm25_turn_recall_is_exact(data_file):
    data = load_locomo(data_file)
    result = run_benchmark(data, methods=["bm25-turns"], ks=[1, 3], embedder=HashEmbeddings(64))
    r = result.methods["bm25-turns"]
    assert r.questions == 4
    assert r.by_category[4][1] == 1.0
    assert r.by_category[1][1] == 0.0
    assert r.by_category[2][1] == 0.5
    assert r.by_category[3][1] == 1.0  # "photo" and "Bob" are in D1:2's text (caption folded in)
    assert r.overall[1] == pytest.approx((1.0 + 0.0 + 0.5 + 1.0) / 4)
    # BM25 returns only turns sharing a term: D1:2 never comes up for "golden retriever"
    assert r.overall[3] == pytest.approx((1.0 + 0.0 + 0.5 + 1.0) / 4)
    assert r.items == 3


def test_every_method_runs_and_json_has_the_declared_shape(data_file, tmp_path, capsys):
    out = tmp_path / "res" / "locomo.json"
    code = locomo_main(["--data", str(data_file), "--embedder", "hash", "--k", "1,2", "--json", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "tripath-scripted" in printed and "unmatched evidence ids: 3" in printed
    assert "tripath-scripted per conversation (all@1/2)" in printed
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert set(doc) == {"config", "methods"}
    cfg = doc["config"]
    assert cfg["k"] == [1, 2] and cfg["embedder"] == "hash" and cfg["methods"] == list(METHODS)
    assert "last session" in cfg["now_rule"]
    assert cfg["tripath"]["decay_enabled"] is False and cfg["tripath"]["always_inject_types"] == []
    assert cfg["evidence"]["unmatched_count"] == 3
    assert set(doc["methods"]) == set(METHODS)
    for m in doc["methods"].values():
        assert set(m["overall"]) == {"1", "2"}
        assert m["questions"] == 4
        assert set(m["by_category"]) == {"multi-hop", "temporal", "open-domain", "single-hop"}
        for per_k in [m["overall"], *m["by_category"].values()]:
            assert all(0.0 <= v <= 1.0 for v in per_k.values())
            assert per_k["1"] <= per_k["2"]  # recall never falls as k grows
        # per conversation: one conversation here, so its recall is the overall recall
        assert list(m["by_conversation"]) == [c.sample_id for c in load_locomo(data_file).conversations]
        assert next(iter(m["by_conversation"].values())) == m["overall"]
    # the observation records point at the right turns: its k = 2 finds the cello fact for q3
    assert doc["methods"]["tripath-observations"]["by_category"]["temporal"]["2"] >= 0.5


def test_cli_errors_name_the_fix(tmp_path, capsys):
    assert locomo_main(["--data", str(tmp_path / "missing.json"), "--embedder", "hash"]) == 2
    assert "--data" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("[{}]", encoding="utf-8")
    assert locomo_main(["--data", str(bad), "--embedder", "hash"]) == 2
    assert "LoCoMo" in capsys.readouterr().err
    assert locomo_main(["--data", str(bad), "--embedder", "hash", "--k", "five"]) == 2


@given(
    gold=st.sets(st.sampled_from([f"D1:{i}" for i in range(1, 9)]), min_size=1),
    ranked=st.lists(st.sets(st.sampled_from([f"D1:{i}" for i in range(1, 12)]), max_size=3), max_size=8),
    k=st.integers(min_value=1, max_value=10),
)
def test_recall_is_a_monotone_fraction(gold, ranked, k):
    r = evidence_recall(gold, ranked, k)
    assert 0.0 <= r <= 1.0
    assert r * len(gold) == pytest.approx(round(r * len(gold)))
    assert evidence_recall(gold, ranked, k + 1) >= r
    assert evidence_recall(gold, [gold], 1) == 1.0


# ------------------------------------------------------------------ the engine's real path

MOVES = {
    "sample_id": "moves-1",
    "conversation": {
        "speaker_a": "Alice", "speaker_b": "Bob",
        "session_1_date_time": "9:00 am on 1 March, 2023",
        "session_1": [{"speaker": "Alice", "dia_id": "D1:1", "text": "I live in Paris with my cat."},
                      {"speaker": "Bob", "dia_id": "D1:2", "text": "Paris is lovely."}],
        "session_2_date_time": "9:00 am on 1 June, 2023",
        "session_2": [{"speaker": "Alice", "dia_id": "D2:1", "text": "I moved to Berlin last month."},
                      {"speaker": "Alice", "dia_id": "D2:2", "text": "I live in Berlin now with my cat."}],
    },
    "qa": [{"question": "Where does Alice live?", "answer": "Berlin", "evidence": ["D2:1"], "category": 4}],
}


def _load(tmp_path, sample):
    path = tmp_path / f"{sample['sample_id']}.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return load_locomo(path)


def test_the_engine_path_ingests_each_session_at_its_time_and_retrieves_at_the_questions(tmp_path, monkeypatch):
    from engine.memory.engine import MemoryEngine

    ingests, retrievals = [], []
    real_ingest, real_retrieve = MemoryEngine.ingest, MemoryEngine.retrieve

    def ingest(self, user_id, session_id, messages, **kw):
        ingests.append((session_id, self.clock.now(), [dict(m) for m in messages]))
        return real_ingest(self, user_id, session_id, messages, **kw)

    def retrieve(self, user_id, query, **kw):
        retrievals.append(kw)
        return real_retrieve(self, user_id, query, **kw)

    monkeypatch.setattr(MemoryEngine, "ingest", ingest)
    monkeypatch.setattr(MemoryEngine, "retrieve", retrieve)
    data = _load(tmp_path, SAMPLE)
    run_benchmark(data, methods=["tripath-scripted"], ks=[1], embedder=HashEmbeddings(64))
    (conv,) = data.conversations
    assert [s for s, _, _ in ingests] == ["S1", "S2"]
    for (session, now, messages), n in zip(ingests, (1, 2), strict=True):
        turns = [t for t in conv.turns if t.session == n]
        assert now == max(t.at for t in turns)  # the clock stands at the session's end
        assert messages == [{"role": "user", "content": t.text, "at": t.at, "name": t.speaker} for t in turns]
    question_calls = [kw for kw in retrievals if kw.get("session_id") == "questions"]
    assert len(question_calls) == len(conv.questions)
    assert all(kw["now"] == conv.ends_at and kw["log"] is True for kw in question_calls)


def test_merges_and_supersedes_are_reported_and_a_superseded_record_is_not_served(tmp_path, capsys):
    out = tmp_path / "moves.json"
    path = tmp_path / "moves-data.json"
    path.write_text(json.dumps([MOVES]), encoding="utf-8")
    assert locomo_main(["--data", str(path), "--embedder", "hash", "--k", "1,2", "--methods", "tripath-scripted",
                        "--json", str(out), "--quiet"]) == 0
    assert "tripath-scripted ingest moves-1: 2 sessions, 4 messages" in capsys.readouterr().out
    doc = json.loads(out.read_text(encoding="utf-8"))["methods"]["tripath-scripted"]
    stats = doc["ingest"]["moves-1"]
    assert stats["superseded"] == 1 and stats["merged"] == 1 and stats["records_added"] == 3
    assert stats["current_records"] == 2 and doc["items"] == 3  # the superseded record stays, invalid
    assert doc["ingest_total"]["superseded"] == 1
    assert doc["overall"] == {"1": 1.0, "2": 1.0}  # Berlin (D2:1) first; Paris (D1:1) is history


def test_the_benchmark_never_calls_a_private_engine_method():
    import ast
    from pathlib import Path

    import engine.eval.locomo as pkg

    for path in Path(pkg.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                assert isinstance(node.value, ast.Name) and node.value.id == "self", \
                    f"{path.name}:{node.lineno} reaches a private name .{node.attr}"
