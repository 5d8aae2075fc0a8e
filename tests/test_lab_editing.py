"""The Memory page's hand edits under AppTest: edit a chatted fact, pin, invalidate, undo, and the
edits survive export → import."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lab.state import export_session, import_session

APP = Path(__file__).resolve().parent.parent / "lab" / "streamlit_app.py"
NEW = "The user lives in Porto now."


@pytest.fixture(autouse=True)
def _skip_component_scan(monkeypatch):
    from streamlit.components.v2.component_manager import BidiComponentManager

    monkeypatch.setattr(BidiComponentManager, "discover_and_register_components", lambda self, **kw: None)


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _say(at: AppTest, text: str) -> None:
    at.chat_input(key="chat_text").set_value(text).run()
    _ok(at)


def _table(at: AppTest):
    return next(d.value for d in at.dataframe if "superseded by" in d.value.columns)


@pytest.fixture
def memory_page() -> AppTest:
    """Chat a fact, let the gate open (+1 h, one more turn), open the Memory page."""
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    _say(at, "Hi, I'm Alice and I live in Lisbon.")
    _say(at, "I prefer window seats when I fly.")
    at.button(key="ff_1h").click().run()
    _say(at, "Where do I live?")
    at.switch_page("pages/memory.py").run()
    _ok(at)
    return at


def _lisbon(at: AppTest):
    lab = at.session_state["lab"]
    return next(r for r in lab.engine.records("alice", include_invalid=False) if "Lisbon" in r.content)


def test_edit_on_memory_page_supersedes_the_old_record(memory_page):
    at = memory_page
    old = _lisbon(at)
    assert old.content in list(_table(at)["content"])
    at.selectbox(key="mem_edit_pick").set_value(old.id).run()
    _ok(at)
    at.text_area(key=f"mem_edit_text_{old.id}").set_value(NEW).run()
    at.button(key="mem_edit_save").click().run()
    _ok(at)
    table = _table(at)  # "current" view: the new text is there, the old one is not
    assert NEW in list(table["content"]) and old.content not in list(table["content"])
    at.segmented_control(key="mem_show").set_value("all").run()
    _ok(at)
    table = _table(at)
    row = table[table["id"] == old.id].iloc[0]
    new_row = table[table["content"] == NEW].iloc[0]
    assert not row["current"] and row["superseded by"] == new_row["id"] and new_row["current"]
    lab = at.session_state["lab"]
    (ev,) = lab.engine.events(user_id="alice", kind="user_edit")
    assert ev.payload["action"] == "edit" and ev.payload["before"]["content"] == old.content
    # the next turn is served the corrected fact
    result = lab.chat("Where do I live?")
    assert "Porto" in result.prompt.messages[0]["content"]


def test_pin_invalidate_undo_and_export_replay(memory_page):
    at = memory_page
    lab = at.session_state["lab"]
    old = _lisbon(at)
    at.selectbox(key="mem_edit_pick").set_value(old.id).run()
    at.button(key="mem_pin").click().run()
    _ok(at)
    assert "pinned" in lab.engine.store.get_records("alice", [old.id])[0].tags
    assert at.button(key="mem_pin").label == "Unpin"
    at.button(key="mem_invalidate").click().run()
    _ok(at)
    assert not lab.engine.store.get_records("alice", [old.id])[0].is_current
    assert old.content not in list(_table(at)["content"])
    assert any("retracted by hand" in m.value for m in at.markdown)
    at.button(key="mem_undo").click().run()
    _ok(at)
    assert old.content in list(_table(at)["content"])
    assert [e.payload["action"] for e in lab.engine.events(user_id="alice", kind="user_edit")] == [
        "pin", "invalidate", "undo"]
    again = import_session(export_session(lab))
    assert "matches the exported snapshot" in again.notice
    assert [e.payload["action"] for e in again.engine.events(user_id="alice", kind="user_edit")] == [
        "pin", "invalidate", "undo"]
