"""The Chat timeline's one line per step (lab.event_lines), and the page that shows them."""

from types import SimpleNamespace

from lab.event_lines import describe, group_by_turn

TEXT = {1: "The user's name is Li Mingxuan.", 2: "Li Mingxuan lives in Hangzhou."}.get


def text_of(i):
    return TEXT(i, "?")


def test_lines_name_records_by_content_and_say_what_happened():
    assert describe("reinforce", {"cause": "used in reply", "record_ids": [2]}, text_of) == (
        "reinforced (used in reply): #2 “Li Mingxuan lives in Hangzhou.”")
    line = describe("update", {"added": [1, 2], "merged": [], "superseded": [3], "kept_both": []}, text_of)
    assert line.startswith("update: added 2, superseded 1; new #1 “The user's name is Li Mingxuan.”")
    gate = describe("gate", {"pending": 9, "mature": 8, "maturity": 0.93, "maturity_open": True, "slice_value": 0.7,
                             "trigger_open": True, "trigger_value": 9, "trigger_threshold": 8}, text_of)
    assert gate.startswith("gate opened by maturity, trigger: 9 pending, 8 mature (M 0.93 vs 0.7)")
    assert describe("retrieve", {"candidates": 5, "paths": {"bm25": 2}, "picked": []}, text_of).endswith("picked none")


def test_unknown_kinds_and_odd_payloads_still_get_a_line():
    assert describe("brand-new", {"b": 1, "a": 2}, text_of) == "brand-new (a, b)"
    assert describe("gate", {"maturity": "not a number"}, text_of).startswith("gate")


def test_events_group_by_turn_newest_first_in_order_within():
    ev = [SimpleNamespace(turn=1, kind="a"), SimpleNamespace(turn=1, kind="b"), SimpleNamespace(turn=2, kind="c")]
    groups = group_by_turn(ev)
    assert [t for t, _ in groups] == [2, 1]
    assert [e.kind for e in groups[1][1]] == ["a", "b"]


def test_the_chat_timeline_shows_one_line_per_step_with_record_text():
    from streamlit.testing.v1 import AppTest

    from pathlib import Path

    app = Path(__file__).resolve().parent.parent / "lab" / "streamlit_app.py"
    at = AppTest.from_file(str(app), default_timeout=60).run()
    for text in ("Hi, I'm Li Mingxuan and I live in Hangzhou.", "I love hiking on weekends."):
        at.chat_input(key="chat_text").set_value(text).run()
    lines = "\n".join(m.value for m in at.markdown)
    assert "**turn 2**" in lines and "**turn 1**" in lines
    assert "- gate closed:" in lines or "- gate opened" in lines
    assert not at.exception
