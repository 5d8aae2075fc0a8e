"""The lab under Streamlit's AppTest: every page renders, chat and the clock drive the engine,
what-if re-ranking leaves the store alone, and export → import round-trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lab.state import (
    LabImportError,
    export_session,
    import_session,
    new_lab,
    store_snapshot,
)

APP = Path(__file__).resolve().parent.parent / "lab" / "streamlit_app.py"
PAGES = {
    "chat": "Chat",
    "prompt": "What the model saw",
    "memory": "Memory",
    "timeline": "Memory over time",
    "scoring": "Scoring",
    "curves": "Curves",
    "settings": "Settings",
}
TURNS = ("Hi, I'm Alice and I live in Lisbon.", "I prefer window seats when I fly.", "My sister is called Maria.")


@pytest.fixture(autouse=True)
def _skip_component_scan(monkeypatch):
    """Every new AppTest scans all installed packages for custom components (seconds each); the lab
    uses none, so the scan is skipped."""
    from streamlit.components.v2.component_manager import BidiComponentManager

    monkeypatch.setattr(BidiComponentManager, "discover_and_register_components", lambda self, **kw: None)


def _app() -> AppTest:
    return AppTest.from_file(str(APP), default_timeout=60).run()


def _open(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{page}.py").run()
    _ok(at)
    assert at.title[0].value == PAGES[page]
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _lab(at: AppTest):
    return at.session_state["lab"]


def _say(at: AppTest, text: str) -> None:
    at.chat_input(key="chat_text").set_value(text).run()
    _ok(at)


def _maturities(at: AppTest) -> list[float]:
    frame = next(d.value for d in at.dataframe if "maturity" in d.value.columns)
    return [float(v) for v in frame["maturity"]]


@pytest.fixture
def chatted() -> AppTest:
    """One app session: three turns, +1 h, one more turn (the gate opens and records appear)."""
    at = _app()
    for text in TURNS:
        _say(at, text)
    at.button(key="ff_1h").click().run()
    _say(at, "Where do I live?")
    return at


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_renders_on_a_fresh_session(page):
    at = _app()
    _ok(at)
    _open(at, page)
    captions = " ".join(c.value for c in at.caption)
    assert "What am I looking at?" in captions
    status = at.markdown[0].value  # the status line every page shows under its title
    assert "scripted models (offline stand-ins)" in status
    assert "2026-01-05 09:00:00" in status  # the fixed virtual start


def test_empty_memory_shows_guidance_not_fake_data():
    at = _app()
    _open(at, "memory")
    assert any("fast-forward" in i.value and "+1 h" in i.value for i in at.info)
    assert not at.dataframe
    _open(at, "scoring")
    assert any("No retrieval yet" in i.value for i in at.info)


def test_chatting_logs_events_and_fast_forward_matures_messages():
    at = _app()
    for text in TURNS[:2]:
        _say(at, text)
    lab = _lab(at)
    kinds = {e.kind for e in lab.engine.store.events(user_id="alice")}
    assert {"stamp", "gate", "inject", "reply"} <= kinds
    assert not any(e.kind == "extract" for e in lab.engine.store.events(user_id="alice"))
    assert _maturities(at) == [0.0, 0.0, 0.0, 0.0]
    steps = "\n".join(m.value for m in at.markdown)
    assert "- gate closed:" in steps  # the timeline: one line per step, grouped by turn

    t0 = lab.clock.now()
    at.button(key="ff_1h").click().run()
    _ok(at)
    assert (lab.clock.now() - t0).total_seconds() == 3600
    assert all(m > lab.engine.config.slice_value for m in _maturities(at))
    assert "Mon 2026-01-05 10:00:00" in at.markdown[0].value

    _say(at, "Where do I live?")
    assert lab.last_turn.event_fired
    timing = [c.value for c in at.caption if c.value.startswith("Time on this machine: memory steps ")]
    assert timing and " ms (" in timing[0] and "event" in timing[0] and "· retrieval " in timing[0]
    assert lab.engine.store.count_records("alice") > 0
    assert "- extracted " in "\n".join(m.value for m in at.markdown)


def test_custom_fast_forward_and_bad_duration():
    at = _app()
    lab = _lab(at)
    t0 = lab.clock.now()
    at.text_input(key="ff_text").set_value("1h30m")
    at.button(key="FormSubmitter:ff_custom-Fast-forward").click().run()
    _ok(at)
    assert (lab.clock.now() - t0).total_seconds() == 5400
    at.text_input(key="ff_text").set_value("soon")
    at.button(key="FormSubmitter:ff_custom-Fast-forward").click().run()
    _ok(at)
    assert any("not understood" in e.value for e in at.error)
    assert (lab.clock.now() - t0).total_seconds() == 5400


def test_new_session_keeps_long_term_memory(chatted):
    at = chatted
    _open(at, "chat")
    lab = _lab(at)
    at.button(key="new_session").click().run()
    _ok(at)
    assert lab.session_id == "s2"
    assert _lab(at).engine.store.count_records("alice") > 0
    assert not any("maturity" in d.value.columns for d in at.dataframe)  # empty working memory
    at.text_input(key="chat_session").set_value("s1")
    at.button(key="FormSubmitter:switch_form-Switch").click().run()
    assert lab.session_id == "s1"


def test_decay_shown_on_memory_page_falls_after_a_week(chatted):
    at = chatted
    _open(at, "memory")
    before = next(d.value for d in at.dataframe if "T now" in d.value.columns)
    _open(at, "chat")
    at.button(key="ff_1w").click().run()
    _open(at, "memory")
    after = next(d.value for d in at.dataframe if "T now" in d.value.columns)
    assert list(before["id"]) == list(after["id"])
    assert all(a < b for a, b in zip(after["T now"], before["T now"], strict=True))
    assert all(m >= b for m, b in zip(after["M now"], before["M now"], strict=True))


def test_prompt_page_shows_parts_and_cacheable_prefix(chatted):
    at = _open(chatted, "prompt")
    turn = _lab(at).last_turn
    text = " ".join(m.value for m in at.markdown)
    for part in turn.prompt.parts:
        assert f"**{part.name}** · {part.tokens} tokens" in text
    assert "stable prefix · cacheable" in text
    assert [c.value for c in at.code][: len(turn.prompt.parts)] == [p.text or "(empty)" for p in turn.prompt.parts]


def test_what_if_sliders_rerank_without_touching_the_store(chatted):
    at = _open(chatted, "scoring")
    lab = _lab(at)
    retrieval = lab.last_turn.retrieval
    assert len(retrieval.picked) >= 2
    before = store_snapshot(lab.engine)
    table = next(d.value for d in at.dataframe if "αR" in d.value.columns)
    assert list(table["id"]) == [r.record_id for r in retrieval.rows]
    assert any("Same injected set" in s.value for s in at.success)

    at.slider(key="wi_topk").set_value(1).run()
    _ok(at)
    assert any("injected set changes" in w.value for w in at.warning)
    table = next(d.value for d in at.dataframe if "αR" in d.value.columns)
    assert (table["verdict"] == "picked").sum() == 1
    at.slider(key="wi_alpha").set_value(1.0)
    at.slider(key="wi_beta").set_value(0.0)
    at.slider(key="wi_gamma").set_value(0.0).run()
    _ok(at)
    table = next(d.value for d in at.dataframe if "αR" in d.value.columns)
    assert list(table["S"]) == sorted(table["S"], reverse=True)
    assert table["R"].iloc[0] == table["R"].max()
    assert store_snapshot(lab.engine) == before

    at.button(key="wi_reset").click().run()
    assert at.slider(key="wi_topk").value == lab.engine.config.top_k


def test_scoring_a_typed_query_logs_nothing(chatted):
    at = _open(chatted, "scoring")
    lab = _lab(at)
    n_events = len(lab.engine.store.events())
    at.segmented_control(key="sc_source").set_value("a query typed here").run()
    at.text_input(key="sc_query_text").set_value("window seats")
    at.button(key="FormSubmitter:sc_query-Score").click().run()
    _ok(at)
    assert any("window seats" in c.value for c in at.caption)
    assert any(" candidates scored in " in c.value and " ms (" in c.value for c in at.caption)
    assert len(lab.engine.store.events()) == n_events


def test_curves_edit_the_live_config_and_reset(chatted):
    at = _open(chatted, "curves")
    lab = _lab(at)
    assert len(at.get("vega_lite_chart")) == 3
    at.text_input(key="e_tau").set_value("2h")
    at.button(key="FormSubmitter:curves_edit-Apply to the live engine").click().run()
    _ok(at)
    assert lab.engine.config.tau == 7200.0 and lab.engine.config.preset == "custom"
    assert lab.journal[-1]["op"] == "config"
    at.number_input(key="e_lt").set_value(0.5)  # below slice_value: invalid, reported, not applied
    at.button(key="FormSubmitter:curves_edit-Apply to the live engine").click().run()
    _ok(at)
    assert any("long_term_value" in e.value for e in at.error)
    assert lab.engine.config.long_term_value == 0.9
    at.button(key="curves_reset").click().run()
    _ok(at)
    assert lab.engine.config.tau == 43200.0 and lab.engine.config.preset == "customer service"


def test_settings_preset_applies_live_and_keeps_memory(chatted):
    at = _open(chatted, "settings")
    lab = _lab(at)
    n = lab.engine.store.count_records("alice")
    at.selectbox(key="set_preset").set_value("accompany").run()
    at.button(key="apply_preset").click().run()
    _ok(at)
    assert lab.engine.config.preset == "accompany" and lab.engine.config.tau == 86400
    assert lab.engine.store.count_records("alice") == n
    assert not at.radio(key="set_mode").proto.disabled or at.radio(key="set_mode").value == "scripted"


def test_forget_user_erases_only_that_user():
    at = _app()
    lab = _lab(at)
    lab.switch(user_id="bob")
    lab.chat("I'm Bob.")
    lab.switch(user_id="alice")
    for text in TURNS:
        lab.chat(text)
    lab.fast_forward("1h")
    lab.chat("hello again")
    assert lab.engine.store.count_records("alice") > 0
    _open(at, "memory")
    at.checkbox(key="mem_forget_confirm").check().run()
    at.button(key="mem_forget").click().run()
    _ok(at)
    assert lab.engine.store.count_records("alice") == 0
    assert "alice" not in lab.engine.store.users() and "bob" in lab.engine.store.users()


def _built_lab():
    lab = new_lab()
    for text in TURNS:
        lab.chat(text)
    lab.fast_forward("1h")
    lab.chat("Where do I live?")
    lab.set_config(lab.engine.config.with_overrides(top_k=3))
    lab.new_session()
    lab.fast_forward("2d")
    lab.chat("I moved to Porto last week.")
    lab.fast_forward("35s")
    return lab


def test_export_import_round_trips():
    lab = _built_lab()
    text = export_session(lab)
    back = import_session(text)
    assert store_snapshot(back.engine) == store_snapshot(lab.engine)
    assert back.clock.now() == lab.clock.now()
    assert back.engine.config == lab.engine.config
    assert (back.user_id, back.session_id) == (lab.user_id, lab.session_id)
    assert "matches the exported snapshot" in back.notice
    assert json.loads(export_session(back))["journal"] == json.loads(text)["journal"]


def test_import_through_the_settings_page():
    lab = _built_lab()
    data = export_session(lab).encode()
    at = _open(_app(), "settings")
    at.file_uploader(key="import_file").set_value(("session.json", data, "application/json")).run()
    at.button(key="do_import").click().run()
    _ok(at)
    assert not at.error
    assert store_snapshot(_lab(at).engine) == store_snapshot(lab.engine)
    assert any("matches the exported snapshot" in i.value for i in at.info)


@pytest.mark.parametrize(
    "payload, reason",
    [
        (b"\x80\x81 not utf-8", "not UTF-8"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2, 3]", "not a memlab lab session"),
        (json.dumps({"format": "memlab-lab-session", "version": 1}).encode(), "malformed"),
        (b'{"format": "memlab-lab-session", "__class__": "os.system"}', "malformed"),
        (b"[" * 100_000 + b"]" * 100_000, "not"),
    ],
)
def test_hostile_or_corrupt_imports_give_a_clear_error(payload, reason):
    with pytest.raises(LabImportError, match=reason):
        import_session(payload)
    at = _open(_app(), "settings")
    before = _lab(at)
    at.file_uploader(key="import_file").set_value(("evil.json", payload, "application/json")).run()
    at.button(key="do_import").click().run()
    _ok(at)
    assert any("Import failed" in e.value for e in at.error)
    assert _lab(at) is before


def test_import_with_an_impossible_journal_is_reported():
    doc = json.loads(export_session(_built_lab()))
    doc["journal"].insert(0, {"op": "config", "config": {"tau": -5}})
    with pytest.raises(LabImportError, match="could not be replayed"):
        import_session(json.dumps(doc))
    doc["journal"][0] = {"op": "advance", "seconds": -60}
    with pytest.raises(LabImportError, match="malformed"):
        import_session(json.dumps(doc))


def test_real_models_only_when_configured(monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    at = _open(_app(), "settings")
    assert at.radio(key="set_mode").proto.disabled
    assert any("Real models are off" in c.value for c in at.caption)

    monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key-not-used")
    monkeypatch.setenv("MEMLAB_FORBID_REAL_MODELS", "1")  # building the client sends nothing; be sure
    at.run()
    assert not at.radio(key="set_mode").proto.disabled
    at.radio(key="set_mode").set_value("real")
    at.text_input(key="set_base_url").set_value("http://127.0.0.1:9/v1")
    at.checkbox(key="set_confirm_fresh").check()
    at.button(key="FormSubmitter:engine_parts-Apply and start a fresh engine").click().run()
    _ok(at)
    lab = _lab(at)
    assert lab.engine.models.mode == "real"
    assert "real: deepseek-chat" in at.markdown[0].value
