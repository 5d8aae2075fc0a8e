from pathlib import Path

import pytest

from engine.core.errors import ScenarioError
from engine.eval.replay import replay
from engine.eval.scenario import keyword_in, load_scenario, parse_scenario

SCENARIOS = sorted((Path(__file__).resolve().parent.parent / "scenarios").glob("*.yaml"))

GOOD = """\
name: t
user: alice
start: 2026-03-02T09:00:00+08:00
turns:
  - user: "My name is Ada."
  - advance: 2h
  - session: new
  - as: bob
    user: "I'm Bob."
probes:
  - ask: "What is my name?"
    expect: ["Ada"]
"""


def test_parse_good_scenario():
    sc = parse_scenario(GOOD, source="t.yaml")
    assert sc.users == ["alice", "bob"]
    assert sc.turns[1].advance.total_seconds() == 7200 and sc.turns[2].new_session
    assert sc.turns[3].speaker == "bob" and sc.turns[3].line == 8
    assert sc.probes[0].expect == ("Ada",)
    assert sc.turn_seconds == 35


@pytest.mark.parametrize(
    ("text", "line", "fix"),
    [
        (GOOD.replace("turns:", "colour: red\nturns:"), 1, "unknown key"),
        (GOOD.replace("  - advance: 2h", "  - advance: 2 parsecs"), 6, "e.g."),
        (GOOD.replace("  - session: new", "  - session: old"), 7, "session: new"),
        (GOOD.replace('    expect: ["Ada"]', '    expect: ["Ada"]\n    judge: strict'), 11, "unknown probe key"),
        (GOOD.replace("start: 2026-03-02T09:00:00+08:00", "start: 2026-03-02T09:00:00"), 1, "offset"),
        (GOOD.replace("user: alice\n", ""), 1, "missing `user`"),
        (GOOD.replace('  - ask: "What is my name?"', '  - ask: ""'), 11, "ask"),
        (GOOD + "preset: pirate\n", 1, "choose one of"),
        ("name: [unclosed", 1, "not valid YAML"),
        ("- just\n- a list\n", 1, "mapping"),
        (GOOD.replace('  - user: "My name is Ada."', "  - {}"), 5, "empty turn"),
    ],
)
def test_errors_name_file_line_and_fix(text, line, fix):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, source="bad.yaml")
    msg = str(info.value)
    assert msg.startswith(f"bad.yaml:{line}:"), msg
    assert fix in msg


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenario(tmp_path / "nope.yaml")


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_bundled_scenario_replays_and_its_keywords_were_said(path):
    sc = load_scenario(path)
    said = " ".join(t.text or "" for t in sc.turns)
    for p in sc.probes:
        for kw in (*p.expect, *p.reject):
            assert keyword_in(kw, said), f"{path.name}: {kw!r} never occurs in what the user said"
    res = replay(sc)
    assert len(res.probes) == len(sc.probes)
    assert res.events, "no memory event fired"
    rec = res.recall()
    assert rec["context"] >= 1


def test_keyword_in():
    assert keyword_in("Li Mingxuan", "hello li  mingxuan!")
    assert keyword_in("北京", "我住在北京朝阳区")
    assert not keyword_in("", "anything")
