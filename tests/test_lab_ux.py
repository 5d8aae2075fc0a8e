"""Lab guards and hints: a fresh engine asks first, Pending counts only what was said, the favicon
is an emoji (no font CDN), New session leaves no widget-key warning, and a reply that says it does
not know is flagged when the injected records held the question's words."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lab.turn_trace import MISSED_CAPTION, missed_words

APP = Path(__file__).resolve().parent.parent / "lab" / "streamlit_app.py"
FRESH = "FormSubmitter:engine_parts-Apply and start a fresh engine"
DONT_KNOW = "I don't know; nothing I was given mentions that."


@pytest.fixture(autouse=True)
def _skip_component_scan(monkeypatch):
    """As in test_lab_apptest: skip the scan of installed packages for custom components."""
    from streamlit.components.v2.component_manager import BidiComponentManager

    monkeypatch.setattr(BidiComponentManager, "discover_and_register_components", lambda self, **kw: None)


def _app() -> AppTest:
    return AppTest.from_file(str(APP), default_timeout=60).run()


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _say(at: AppTest, text: str) -> None:
    at.chat_input(key="chat_text").set_value(text).run()
    _ok(at)


def _open(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{page}.py").run()
    _ok(at)
    return at


# -- missed_words (pure) ---------------------------------------------------------------------------
def test_missed_words_when_the_reply_does_not_know_but_the_records_name_the_question():
    shown = ["User's sister is called Maria.", "Alice lives in Lisbon."]
    assert missed_words(DONT_KNOW, ["car", "sister", "maria"], shown) == ["sister", "maria"]
    assert missed_words("I do not know.", ["lisbon"], shown) == ["lisbon"]
    assert missed_words("I DON’T KNOW", ["Lisbon"], shown) == ["Lisbon"]  # curly apostrophe, any case
    assert missed_words("我不知道，我掌握的信息里没有提到。", ["maria"], shown) == ["maria"]


def test_missed_words_is_empty_when_the_reply_answers_or_nothing_matched():
    shown = ["User's sister is called Maria."]
    assert missed_words("From what I have: sister is called Maria.", ["sister"], shown) == []
    assert missed_words(DONT_KNOW, ["car", "drive"], shown) == []
    assert missed_words(DONT_KNOW, ["sister"], []) == []
    assert missed_words(DONT_KNOW, [], shown) == []
    assert missed_words("", ["sister"], shown) == []


# -- AppTest ---------------------------------------------------------------------------------------
@pytest.fixture
def told() -> AppTest:
    at = _app()
    for text in ("Hi, I'm Alice and I live in Lisbon.", "I prefer window seats when I fly.",
                 "My sister is called Maria."):
        _say(at, text)
    at.button(key="ff_1h").click().run()
    _ok(at)
    return at


def test_a_reply_that_missed_what_it_was_shown_gets_the_caption(told):
    at = told
    _say(at, "Where do I live?")
    assert not [c for c in at.caption if MISSED_CAPTION in c.value]  # answered: no caption
    _say(at, "What car does my sister Maria drive to work each morning?")
    lab = at.session_state["lab"]
    assert lab.engine.store.messages("alice")[-1].content.startswith("I don't know")
    flagged = [c.value for c in at.caption if MISSED_CAPTION in c.value]
    assert len(flagged) == 1 and "sister" in flagged[0] and "maria" in flagged[0]


def test_pending_does_not_count_the_unsent_message():
    at = _app()
    pending = lambda: next(m for m in at.metric if m.label == "Pending").value
    assert str(pending()) == "0"
    _say(at, "Hi, I'm Alice and I live in Lisbon.")
    lab = at.session_state["lab"]
    said = len(lab.engine.pending(lab.user_id, lab.session_id))
    assert said >= 1 and str(pending()) == str(said)


def test_a_fresh_engine_asks_for_confirmation_first(told):
    at = _open(told, "settings")
    lab = at.session_state["lab"]
    assert lab.engine.store.messages("alice")
    at.button(key=FRESH).click().run()
    _ok(at)
    assert at.session_state["lab"] is lab  # nothing discarded
    assert any("tick" in w.value for w in at.warning)
    at.checkbox(key="set_confirm_fresh").check()
    at.button(key=FRESH).click().run()
    _ok(at)
    fresh = at.session_state["lab"]
    assert fresh is not lab and not fresh.engine.store.messages("alice")
    assert at.checkbox(key="set_confirm_fresh").value is False  # asks again next time
    at.button(key=FRESH).click().run()
    _ok(at)
    assert at.session_state["lab"] is fresh


def test_favicon_is_an_emoji_not_a_font_cdn_icon():
    source = APP.read_text(encoding="utf-8")
    assert 'page_icon="🧠"' in source
    assert 'page_icon=":material' not in source


def test_new_session_leaves_no_widget_key_warning(told, monkeypatch):
    from streamlit.elements.lib import policies

    warned: list[str] = []
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)  # Streamlit warns once a process
    monkeypatch.setattr(policies._LOGGER, "warning", lambda msg, *a, **kw: warned.append(str(msg) % a))
    at = told
    lab = at.session_state["lab"]
    at.button(key="new_session").click().run()
    _ok(at)
    at.run()
    assert lab.session_id == "s2"
    assert at.text_input(key="chat_session").value == "s2"
    assert not warned, warned
    at.text_input(key="chat_session").set_value("s1")
    at.button(key="FormSubmitter:switch_form-Switch").click().run()
    _ok(at)
    assert lab.session_id == "s1" and at.text_input(key="chat_session").value == "s1"


def test_a_new_engine_can_replay_the_session_instead_of_discarding_it(told):
    at = _open(told, "settings")
    lab = at.session_state["lab"]
    said = [m.content for m in lab.engine.store.messages("alice")]
    assert said
    at.checkbox(key="set_replay").check()
    at.button(key=FRESH).click().run()
    _ok(at)
    replayed = at.session_state["lab"]
    assert replayed is not lab
    assert [m.content for m in replayed.engine.store.messages("alice")] == said  # nothing lost
    assert replayed.clock.now() == lab.clock.now()
