"""The lab's Memory over time page, the turn picker of "What the model saw" and the memory trace
under each chat reply, driven through Streamlit's AppTest like a user would."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from engine.core.forgetting import decay
from lab.state import LAB_START, new_lab
from lab.turn_trace import traces

APP = Path(__file__).resolve().parent.parent / "lab" / "streamlit_app.py"
FACTS = ("Hi, I'm Alice and I live in Lisbon.", "I prefer window seats when I fly.", "My sister is called Maria.")


@pytest.fixture(autouse=True)
def _skip_component_scan(monkeypatch):
    """The lab uses no custom components; skip AppTest's scan of every installed package."""
    from streamlit.components.v2.component_manager import BidiComponentManager

    monkeypatch.setattr(BidiComponentManager, "discover_and_register_components", lambda self, **kw: None)


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _say(at: AppTest, text: str) -> None:
    at.chat_input(key="chat_text").set_value(text).run()
    _ok(at)


def _open(at: AppTest, page: str, title: str) -> AppTest:
    at.switch_page(f"pages/{page}.py").run()
    _ok(at)
    assert at.title[0].value == title
    return at


@pytest.fixture(scope="module")
def chatted() -> AppTest:
    """Three facts, +1 h (the gate opens on the next message), a question, +1 day, another question."""
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    for text in FACTS:
        _say(at, text)
    at.button(key="ff_1h").click().run()
    _say(at, "Where do I live?")
    at.button(key="ff_1d").click().run()
    _say(at, "Which seat do I like on a plane?")
    return at


def _chart_frames(at: AppTest) -> tuple[list, str]:
    charts = at.get("vega_lite_chart")
    assert len(charts) == 1
    return [convert_arrow_bytes_to_pandas_df(d.data.data) for d in charts[0].proto.datasets], charts[0].proto.spec


def test_timeline_page_draws_one_line_per_record(chatted):
    at = _open(chatted, "timeline", "Memory over time")
    lab = at.session_state["lab"]
    store = lab.engine.store
    records = store.records("alice", include_invalid=True)
    assert len(records) >= 3
    frames, spec = _chart_frames(at)
    lines = next(f for f in frames if "seq" in f.columns)
    marks = next(f for f in frames if "marker" in f.columns)
    rules = pd.concat([f for f in frames if "rule" in f.columns])
    assert sorted(lines["id"].unique()) == sorted(r.id for r in records)
    assert lines.groupby("id")["text"].first().to_dict() == {r.id: r.content for r in records}
    assert lines["T"].between(0.0, 1.0).all()
    for r in records:  # dotted from when it was said, solid from its extraction
        own = lines[lines["id"] == r.id]
        pre, kept = own[own["phase"] == "said, not yet extracted"], own[own["phase"] == "in memory"]
        assert pre["x"].min() == pytest.approx((r.said_at - LAB_START).total_seconds() / 3600)
        assert kept["x"].min() == pytest.approx((r.created_at - LAB_START).total_seconds() / 3600)
    now_x = (lab.clock.now() - LAB_START).total_seconds() / 3600  # 25 h: the axis is in hours
    assert "hours since" in spec and '"record text"' in spec
    assert rules.loc[rules["rule"] == "now", "x"].tolist() == [pytest.approx(now_x)]
    assert lines["x"].max() == pytest.approx(now_x)
    reinforced = {r.id for r in records if r.last_reinforced_at is not None}
    assert reinforced and set(marks.loc[marks["marker"] == "reinforced", "id"]) == reinforced
    assert set(marks.loc[marks["marker"] == "injected", "id"]) >= set(lab.last_turn.prompt.record_ids)
    for rid in reinforced:  # each reinforcement puts the line back at T = 1
        assert (lines.loc[lines["id"] == rid, "T"] == 1.0).any()
    # the newest T on each line is what the Memory page calls "T now"
    cfg = lab.engine.config
    for r in records:
        last = lines[lines["id"] == r.id].sort_values("seq").iloc[-1]
        expect = decay((lab.clock.now() - r.reinforced_at).total_seconds(), tau=cfg.tau, c=cfg.c)
        assert last["T"] == pytest.approx(expect, abs=1e-4)


def test_timeline_cursor_ranks_by_T_as_it_stood_then(chatted):
    at = _open(chatted, "timeline", "Memory over time")
    lab = at.session_state["lab"]
    cfg = lab.engine.config
    first_reinforced = min((r for r in lab.engine.store.records("alice") if r.last_reinforced_at is not None),
                           key=lambda r: r.last_reinforced_at)
    at.slider(key="tl_cursor").set_value(0.5).run()  # 09:30: nothing extracted yet
    _ok(at)
    assert any("No record was in memory yet" in c.value for c in at.caption)
    at.slider(key="tl_cursor").set_value(1.5).run()  # 10:30: half an hour after the first reinforcement
    _ok(at)
    table = at.dataframe[0].value
    assert list(table["rank"]) == list(range(1, len(table) + 1))
    assert list(table["T"]) == sorted(table["T"], reverse=True)
    # the record the reply used at 10:00 leads, counted from that reinforcement; the rest count
    # from when they were said (09:00), not from their extraction at 10:00
    lead = table.iloc[0]
    assert int(lead["id"]) == first_reinforced.id and lead["content"] == first_reinforced.content
    assert first_reinforced.strengthen_count >= 1
    assert lead["T"] == pytest.approx(decay(1800, tau=cfg.tau, c=cfg.c))
    assert list(table["T"].iloc[1:]) == pytest.approx([decay(5400, tau=cfg.tau, c=cfg.c)] * (len(table) - 1))
    frames, _ = _chart_frames(at)
    rules = pd.concat([f for f in frames if "rule" in f.columns])
    assert set(rules.loc[rules["rule"] == "cursor", "x"]) == {1.5}


def test_timeline_without_records_guides_instead_of_drawing():
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    _say(at, "Hello there.")
    _open(at, "timeline", "Memory over time")
    assert any("No records yet" in i.value for i in at.info)
    assert not at.get("vega_lite_chart")


def test_turn_picker_shows_an_earlier_turns_prompt(chatted):
    at = _open(chatted, "prompt", "What the model saw")
    lab = at.session_state["lab"]
    turns = lab.session_turns()
    assert len(turns) == 5
    picker = at.selectbox(key="pr_turn")
    assert picker.options == [f"turn {i + 1} · {t.user_message.created_at:%m-%d %H:%M:%S} · “{t.user_message.content}”"
                              for i, t in enumerate(turns)]
    assert picker.value == 4  # the latest turn by default
    codes = [c.value for c in at.code]
    assert codes[: len(turns[-1].prompt.parts)] == [p.text or "(empty)" for p in turns[-1].prompt.parts]

    picker.set_value(0).run()
    _ok(at)
    first = turns[0].prompt
    codes = [c.value for c in at.code]
    assert codes[: len(first.parts)] == [p.text or "(empty)" for p in first.parts]
    assert any(FACTS[0] in c for c in codes) and not any("Which seat" in c for c in codes)
    assert at.metric[0].value == str(first.total_tokens)
    assert any(f"Message #{turns[0].user_message.id}: “{FACTS[0]}”" in c.value for c in at.caption)


def test_chat_trace_lists_the_injected_records(chatted):
    at = _open(chatted, "chat", "Chat")
    lab = at.session_state["lab"]
    store = lab.engine.store
    trace_boxes = [e for e in at.expander if e.label.startswith("memory trace")]
    assert len(trace_boxes) == 5  # one per reply
    assert all("injected" in e.label for e in trace_boxes)
    last = lab.last_turn
    assert last.prompt.record_ids
    box = trace_boxes[-1]
    text = " ".join(m.value for m in box.markdown)
    rows = {r.record_id: r for r in last.retrieval.rows}
    for rec in store.get_records("alice", list(last.prompt.record_ids)):
        assert f"#{rec.id} {rec.content} — *{rows[rec.id].why}* · S {rows[rec.id].S:.3f}" in text
    left = [r for r in last.retrieval.rows if r.verdict != "picked"]
    if left:
        best = max(left, key=lambda r: r.S)
        assert f"**Nearest left out:** #{best.record_id}" in text
    fired = next(e for e in trace_boxes if "event #1" in e.label)
    assert any(m.value.startswith("**Event #1 fired** · maturity 0.91 of 0.7") for m in fired.markdown)
    assert any("no event" in c.value for c in trace_boxes[0].caption)


def test_trace_under_the_on_event_policy_names_kept_picks():
    """Without a retrieval in the turn (on_event keeps the event's picks) the trace says so."""
    lab = new_lab()
    lab.set_config(lab.engine.config.with_overrides(retrieval_policy="on_event"))
    for text in FACTS:
        lab.chat(text)
    lab.fast_forward("1h")
    lab.chat("Where do I live?")
    lab.chat("And my sister?")
    store = lab.engine.store
    got = traces(store.events(user_id="alice", session_id="s1"), scores=store.scores,
                 texts=lambda ids: {r.id: r.content for r in store.get_records("alice", list(ids))})
    reply_ids = [m.id for m in store.messages("alice", session_id="s1") if m.role == "assistant"]
    assert sorted(got) == reply_ids
    event_turn, kept_turn = got[reply_ids[-2]], got[reply_ids[-1]]
    assert event_turn.event_fired and event_turn.retrieved and event_turn.injected
    assert not kept_turn.event_fired and not kept_turn.retrieved
    assert [s.record_id for s in kept_turn.injected] == list(lab.last_turn.prompt.record_ids)
    assert {s.why for s in kept_turn.injected} == {"kept from the last event's retrieval"}
    assert json.dumps([s.text for s in kept_turn.injected])
