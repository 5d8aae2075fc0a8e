"""`memlab bench longmemeval` on a small file in the published LongMemEval format (made here)."""

import json

import pytest

from engine.cli import main
from engine.core.errors import ConfigError
from engine.eval.longmemeval import load_longmemeval, parse_lme_date, run_longmemeval
from engine.roles.embeddings import make_embedder


def _q(qid, qtype, question, sessions, dates, *, answer="x", qdate="2023/06/01 (Thu) 10:00"):
    return {"question_id": qid, "question_type": qtype, "question": question, "answer": answer,
            "question_date": qdate, "haystack_session_ids": [f"s{i}" for i in range(len(sessions))],
            "haystack_dates": dates, "haystack_sessions": sessions, "answer_session_ids": []}


def _u(text, ans=False):
    return {"role": "user", "content": text, **({"has_answer": True} if ans else {})}


def _a(text):
    return {"role": "assistant", "content": text}


FILLER = [_u("What a rainy afternoon it has been today."), _a("Rainy days are good for reading."),
          _u("I watched a documentary about whales."), _a("Whales are fascinating.")]
DATA = [
    _q("q1", "single-session-user", "Which city did I say my sister lives in?",
       [FILLER, [_u("My sister lives in Valparaiso and works as a nurse there.", True), _a("Lovely city.")]],
       ["2023/05/01 (Mon) 09:00", "2023/05/10 (Wed) 18:30"]),
    _q("q2", "knowledge-update", "What car do I drive now?",
       [[_u("I drive a blue Corolla to work every day.", True), _a("Nice.")], FILLER,
        [_u("I sold the Corolla and now I drive a red Tesla.", True), _a("Congratulations!")]],
       ["2023/04/01 (Sat) 09:00", "2023/04/20 (Thu) 09:00", "2023/05/20 (Sat) 09:00"]),
    _q("q3", "multi-session", "How many instruments do I play?",
       [[_u("I have played the cello since I was eight.", True)], FILLER,
        [_u("Last month I started learning the banjo.", True)]],
       ["2023/03/01 (Wed) 09:00", "2023/03/05 (Sun) 09:00", "2023/05/05 (Fri) 09:00"]),
    _q("q4_abs", "single-session-user", "What is my dog's name?", [FILLER], ["2023/05/01 (Mon) 09:00"]),
]


@pytest.fixture
def data_file(tmp_path):
    p = tmp_path / "lme.json"
    p.write_text(json.dumps(DATA), encoding="utf-8")
    return p


def test_reader_keeps_evidence_dates_and_abstention(data_file):
    qs = load_longmemeval(data_file)
    assert [q.question_id for q in qs] == ["q1", "q2", "q3", "q4_abs"]
    assert qs[0].evidence == {"s1:0"}
    assert qs[1].evidence == {"s0:0", "s2:0"}
    assert qs[3].abstention and not qs[3].evidence
    assert qs[0].sessions[1].at.isoformat() == "2023-05-10T18:30:00+00:00"
    assert parse_lme_date("2023/05/30 (Tue) 23:40").hour == 23


def test_the_engine_path_finds_the_evidence_turns(data_file):
    result = run_longmemeval(load_longmemeval(data_file), ks=(1, 5), embedder=make_embedder("hash"))
    cfg = result["config"]
    assert (cfg["questions"], cfg["scored"], cfg["abstention"]) == (4, 3, 1)
    for method in ("bm25-turns", "tripath-scripted"):
        m = result["methods"][method]
        assert all(0.0 <= v <= 1.0 for v in m["overall"].values())
        assert m["questions_by_type"] == {"knowledge-update": 1, "multi-session": 1, "single-session-user": 1}
    tri = result["methods"]["tripath-scripted"]
    assert tri["by_type"]["single-session-user"]["5"] == 1.0  # the sister's city is found
    assert tri["records"] > 0


def test_command_writes_json_and_refuses_bad_files(data_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["bench", "longmemeval", "--data", str(data_file), "--embedder", "hash", "--ks", "1,5",
                 "--quiet", "--json", str(out)]) == 0
    assert "tripath-scripted" in capsys.readouterr().out
    assert json.loads(out.read_text())["config"]["scored"] == 3
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question_id": "x", "question_type": "t"}]), encoding="utf-8")
    assert main(["bench", "longmemeval", "--data", str(bad), "--embedder", "hash", "--quiet"]) == 2
    assert "missing" in capsys.readouterr().err
    bad.write_text("{not json", encoding="utf-8")
    assert main(["bench", "longmemeval", "--data", str(bad), "--embedder", "hash", "--quiet"]) == 2
    with pytest.raises(ConfigError, match="date"):
        parse_lme_date("yesterday-ish")
