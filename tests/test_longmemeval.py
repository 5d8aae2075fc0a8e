"""`memlab bench longmemeval` on a hand-made file in the published LongMemEval format."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest

from engine.cli import main
from engine.core.errors import ConfigError
from engine.eval.longmemeval import load_longmemeval, parse_lme_date, run_longmemeval
from engine.roles.embeddings import HashEmbeddings


def turn(role: str, content: str, has_answer: bool = False) -> dict:
    out = {"role": role, "content": content}
    if has_answer:
        out["has_answer"] = True
    return out


QUESTIONS = [
    {"question_id": "e47becba", "question_type": "single-session-user", "question": "What breed is my dog Biscuit?",
     "answer": "a golden retriever", "question_date": "2023/06/20 (Tue) 10:00",
     "haystack_session_ids": ["sharegpt_x1", "answer_e47becba"],
     "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/08 (Mon) 13:56"],
     "haystack_sessions": [
         [turn("user", "Can you suggest a recipe for lentil soup?"),
          turn("assistant", "Sure: lentils, onion, cumin and stock.")],
         [turn("user", "I adopted a golden retriever puppy named Biscuit last week.", True),
          turn("assistant", "Congratulations on Biscuit!")]],
     "answer_session_ids": ["answer_e47becba"]},
    {"question_id": "ku_city", "question_type": "knowledge-update", "question": "Which city do I live in now?",
     "answer": "Berlin", "question_date": "2023/09/01 (Fri) 12:00",
     "haystack_session_ids": ["answer_ku_1", "ultrachat_7", "answer_ku_2"],
     "haystack_dates": ["2023/03/01 (Wed) 09:00", "2023/04/01 (Sat) 09:00", "2023/08/01 (Tue) 18:30"],
     "haystack_sessions": [
         [turn("user", "I live in Paris and work as a nurse.", True), turn("assistant", "Paris is lovely.")],
         [turn("user", "How do I fix a flat bicycle tyre?"), turn("assistant", "Remove the wheel, patch the tube.")],
         [turn("user", "I just moved to Berlin last month, I live in Berlin now.", True),
          turn("assistant", "Welcome to Berlin!")]],
     "answer_session_ids": ["answer_ku_1", "answer_ku_2"]},
    {"question_id": "ssa_soup", "question_type": "single-session-assistant",
     "question": "What spice did you recommend for my lentil soup?", "answer": "cumin",
     "question_date": "2023/06/01 (Thu) 08:00",
     "haystack_session_ids": ["answer_ssa", "sharegpt_x2"],
     "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/02 (Tue) 09:00"],
     "haystack_sessions": [
         [turn("user", "Can you suggest a spice for lentil soup?"),
          turn("assistant", "Add cumin to the lentil soup.", True)],
         [turn("user", "My sister plays the cello."), turn("assistant", "How wonderful.")]],
     "answer_session_ids": ["answer_ssa"]},
    {"question_id": "cat_name_abs", "question_type": "single-session-user", "question": "What is my cat called?",
     "answer": "You did not mention a cat.", "question_date": "2023/06/20 (Tue) 10:00",
     "haystack_session_ids": ["s_d", "s_e"], "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/03 (Wed) 09:00"],
     "haystack_sessions": [[turn("user", "I love hiking."), turn("assistant", "Great hobby.")],
                           [turn("user", "I drink tea."), turn("assistant", "Nice.")]],
     "answer_session_ids": []},
]


def write(tmp_path, questions, name="lme.json"):
    path = tmp_path / name
    path.write_text(json.dumps(questions), encoding="utf-8")
    return path


@pytest.fixture
def data_file(tmp_path):
    return write(tmp_path, QUESTIONS)


def run_cli(*args: str) -> int:
    return main(["bench", "longmemeval", *args, "--embedder", "hash", "--quiet"])


def test_dates_parse_to_aware_utc():
    assert parse_lme_date("2023/05/30 (Tue) 23:40") == datetime(2023, 5, 30, 23, 40, tzinfo=UTC)
    assert parse_lme_date("2023/5/3 07:05") == datetime(2023, 5, 3, 7, 5, tzinfo=UTC)
    for bad in ("30 May 2023", "2023/13/01 (Xyz) 10:00", None, 20230530):
        with pytest.raises(ConfigError, match="not a date like"):
            parse_lme_date(bad)


def test_loader_reads_turn_evidence_and_counts_abstention(data_file):
    data = load_longmemeval(data_file)
    q1, ku, ssa, abs_q = data.questions
    assert q1.evidence == ("S2:0",) and not q1.abstention
    assert ku.evidence == ("S1:0", "S3:0") and ku.question_type == "knowledge-update"
    assert ssa.evidence == ("S1:1",) and ssa.turns[1].role == "assistant"
    assert abs_q.abstention and abs_q.evidence == ()
    assert q1.asked_at == datetime(2023, 6, 20, 10, 0, tzinfo=UTC)
    assert [t.at.second for t in ku.sessions[2].turns] == [0, 1]  # ordered inside the session
    c = data.counts()
    assert (c["questions_read"], c["questions_scored"], c["abstention"], c["without_evidence_turns"]) == (4, 3, 1, 0)
    assert c["sessions"] == 9 and c["turns"] == 18
    assert len(load_longmemeval(data_file, limit=2).questions) == 2


def test_numeric_answers_and_ids_are_read_as_text(tmp_path):
    # some published answers are integers ("How many ...?": 3)
    qs = _broken(lambda qs: qs[1].update(answer=3, question_id=12345))
    q = load_longmemeval(write(tmp_path, qs)).questions[1]
    assert (q.answer, q.question_id) == ("3", "12345")


def test_command_reports_recall_by_type_and_writes_json(data_file, tmp_path, capsys):
    out = tmp_path / "res" / "lme.json"
    assert run_cli("--data", str(data_file), "--ks", "1,5", "--methods", "bm25-turns,tripath-scripted",
                   "--json", str(out)) == 0
    text = capsys.readouterr().out
    assert "abstention (_abs, not scored) 1" in text and "scored 3" in text
    assert "knowledge-update" in text and "R@5" in text
    doc = json.loads(out.read_text(encoding="utf-8"))
    cfg = doc["config"]
    assert cfg["k"] == [1, 5] and cfg["counts"]["abstention"] == 1 and cfg["embedder"]
    assert cfg["git_commit"] is None or len(cfg["git_commit"]) == 40
    assert "versions" in cfg and "machine" in cfg
    for method in ("bm25-turns", "tripath-scripted"):
        m = doc["methods"][method]
        assert m["questions"] == {"knowledge-update": 1, "single-session-assistant": 1, "single-session-user": 1,
                                  "all": 3}
        values = [v for table in ("turn_recall", "session_recall") for per_k in m[table].values()
                  for v in per_k.values()]
        assert values and all(0.0 <= v <= 1.0 for v in values)
        assert "cat_name_abs" not in {q["question_id"] for q in m["per_question"]}
    bm25 = doc["methods"]["bm25-turns"]["turn_recall"]
    # "live" and "now" put the Berlin turn first; the Paris turn (only "live") second
    assert bm25["knowledge-update"] == {"1": 0.5, "5": 1.0}
    tri = doc["methods"]["tripath-scripted"]
    # the easy question: the engine's record of the adoption cites the evidence turn, ranked first
    assert tri["turn_recall"]["single-session-user"]["1"] == 1.0
    easy = next(q for q in tri["per_question"] if q["question_id"] == "e47becba")
    assert "S2:0" in easy["top"][0]
    assert tri["ingest_total"]["sessions"] == 7 and tri["ingest_total"]["messages"] == 14


def test_the_engine_path_ingests_each_session_at_its_time_and_retrieves_at_the_question_date(data_file,
                                                                                             monkeypatch):
    from engine.memory.engine import MemoryEngine

    ingests, retrievals = [], []
    real_ingest, real_retrieve = MemoryEngine.ingest, MemoryEngine.retrieve

    def ingest(self, user_id, session_id, messages, **kw):
        ingests.append((session_id, self.clock.now(), [dict(m) for m in messages]))
        return real_ingest(self, user_id, session_id, messages, **kw)

    def retrieve(self, user_id, query, **kw):
        retrievals.append((query, kw))
        return real_retrieve(self, user_id, query, **kw)

    monkeypatch.setattr(MemoryEngine, "ingest", ingest)
    monkeypatch.setattr(MemoryEngine, "retrieve", retrieve)
    data = load_longmemeval(data_file, limit=2)
    run_longmemeval(data, methods=["tripath-scripted"], ks=[1], embedder=HashEmbeddings(64))
    ku = data.questions[1]
    assert [s for s, _, _ in ingests] == ["S1", "S2", "S1", "S2", "S3"]
    for (_, now, messages), session in zip(ingests[2:], ku.sessions, strict=True):
        assert now == session.turns[-1].at  # the clock stands at the session's end
        assert messages == [{"role": t.role, "content": t.content, "at": t.at} for t in session.turns]
    asked = [(q, kw) for q, kw in retrievals if kw.get("session_id") == "questions"]
    assert [q for q, _ in asked] == [data.questions[0].question, ku.question]
    assert [kw["now"] for _, kw in asked] == [data.questions[0].asked_at, ku.asked_at]
    assert all(kw["log"] is True for _, kw in asked)


def _broken(mutate) -> list:
    qs = copy.deepcopy(QUESTIONS)
    mutate(qs)
    return qs


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda qs: qs[1].pop("haystack_sessions"), "question 1 (ku_city): missing field(s) haystack_sessions"),
    (lambda qs: qs[0]["haystack_dates"].pop(), "must have the same length"),
    (lambda qs: qs[2].update(question_date="June 1st"), "question 2 (ssa_soup) question_date 'June 1st' is not a date"),
    (lambda qs: qs[0]["haystack_sessions"][1][0].update(role="system"), "turn 0: 'role' must be 'user' or 'assistant'"),
    (lambda qs: qs[1]["haystack_sessions"].__setitem__(0, "oops"), "a session must be a list of turns"),
    (lambda qs: qs.__setitem__(3, ["not", "an", "object"]), "question 3: expected an object"),
])
def test_malformed_files_exit_2_naming_the_question_and_field(tmp_path, capsys, mutate, message):
    path = write(tmp_path, _broken(mutate))
    assert run_cli("--data", str(path)) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_every_problem_is_reported_at_once(tmp_path):
    def two(qs):
        qs[0].pop("question")
        qs[2]["haystack_dates"][0] = "soon"

    with pytest.raises(ConfigError) as info:
        load_longmemeval(write(tmp_path, _broken(two)))
    assert len(info.value.problems) == 2


def test_unreadable_files_and_bad_options_exit_2(tmp_path, capsys, data_file):
    assert run_cli("--data", str(tmp_path / "missing.json")) == 2
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert run_cli("--data", str(bad)) == 2
    assert "not valid JSON" in capsys.readouterr().err
    bad.write_text(json.dumps({"question_id": "x"}), encoding="utf-8")
    assert run_cli("--data", str(bad)) == 2
    assert "expected a list of LongMemEval question objects" in capsys.readouterr().err
    assert run_cli("--data", str(data_file), "--ks", "five") == 2
    assert run_cli("--data", str(data_file), "--methods", "grep") == 2
    assert "unknown method" in capsys.readouterr().err
    assert run_cli("--data", str(data_file), "--limit", "0") == 2


def test_the_benchmark_never_reaches_a_private_name():
    import ast
    from pathlib import Path

    import engine.eval.longmemeval as pkg

    files = list(Path(pkg.__file__).parent.glob("*.py"))
    assert len(files) == 4
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                assert isinstance(node.value, ast.Name) and node.value.id == "self", \
                    f"{path.name}:{node.lineno} reaches a private name .{node.attr}"
            if isinstance(node, ast.ImportFrom):
                assert not any(a.name.startswith("_") for a in node.names), f"{path.name}:{node.lineno}"
