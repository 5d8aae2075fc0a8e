"""The Memory page's rows, strike-through, conflicts and update decisions (lab/memory_view.py),
and the page under AppTest after a move from Lisbon to Porto."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

from engine.core.records import MemoryRecord
from lab.memory_view import (
    COLUMNS,
    DECIDING_COLUMNS,
    DIMENSION_COLUMNS,
    conflicts,
    record_rows,
    status_of,
    struck_line,
    update_decisions,
)

APP = Path(__file__).resolve().parent.parent / "lab" / "streamlit_app.py"
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _rec(rid: int, content: str, **kw) -> MemoryRecord:
    return MemoryRecord(user_id=kw.pop("user_id", "alice"), content=content, created_at=T0, id=rid, **kw)


def _rows(records):
    return record_rows(records, now=T0 + timedelta(hours=1), t_now=lambda r: 0.5, m_now=lambda r: 0.25)


def test_columns_deciding_first_then_dimensions():
    rows = _rows([_rec(1, "The user lives in Lisbon.", keywords=("lisbon", "home"))])
    cols = list(rows[0])
    assert cols == list(COLUMNS)
    assert cols[: len(DECIDING_COLUMNS)] == list(DECIDING_COLUMNS)
    assert cols[len(DECIDING_COLUMNS): len(DECIDING_COLUMNS) + len(DIMENSION_COLUMNS)] == list(DIMENSION_COLUMNS)
    assert rows[0]["keywords"] == "lisbon, home" and rows[0]["tags"] == "fact"


def test_no_none_cell_anywhere():
    old = _rec(1, "The user lives in Lisbon.", invalid_at=T0, superseded_by=2)
    new = _rec(2, "The user lives in Porto.")
    retracted = _rec(3, "Something retracted.", invalid_at=T0, superseded_by=3)
    for row in _rows([old, new, retracted]):
        assert all(v is not None and str(v) != "None" for v in row.values()), row
    rows = _rows([old, new, retracted])
    assert rows[0]["superseded by"] == 2 and rows[1]["superseded by"] == "" and rows[2]["superseded by"] == ""
    assert rows[1]["location"] == "" and rows[1]["time"] == "" and rows[1]["reinforced"] == ""


def test_superseded_is_struck_and_names_its_successor():
    old = _rec(1, "The user lives in Lisbon.", invalid_at=T0, superseded_by=2)
    new = _rec(2, "The user lives in Porto. " + "x" * 100)
    by_id = {1: old, 2: new}
    assert status_of(old, by_id).startswith("superseded → The user lives in Porto.")
    assert status_of(old, by_id).endswith("…") and len(status_of(old, by_id)) < 80
    assert status_of(new, by_id) == "current"
    line = struck_line(old, by_id)
    assert line.startswith("~~#1 The user lives in Lisbon.~~ → **#2** The user lives in Porto.")
    gone = _rec(3, "Retracted.", invalid_at=T0, superseded_by=3)
    assert status_of(gone, {3: gone}) == "retracted by hand"
    assert "~~#3 Retracted.~~ retracted by hand" in struck_line(gone, {3: gone})


def test_conflicts_are_two_current_records_of_one_attribute():
    a = _rec(1, "The user lives in Lisbon.")
    b = _rec(2, "The user lives in Porto.")
    other = _rec(3, "The user prefers window seats.")
    bob = _rec(4, "The user lives in Madrid.", user_id="bob")
    (c,) = conflicts([a, b, other, bob])
    assert (c.a.id, c.b.id) == (1, 2)
    assert c.line.startswith("conflict: #1 The user lives in Lisbon. vs #2 The user lives in Porto.")
    assert conflicts([replace(a, invalid_at=T0, superseded_by=2), b]) == []  # superseded: no conflict


def test_update_decisions_in_words():
    ev = SimpleNamespace(kind="update", event_no=2, at=T0, payload={
        "added": [2, 3, 5], "merged": [{"existing": 4, "cosine": 0.9, "reason": "same"}],
        "superseded": [{"existing": 1, "cosine": 0.7654, "reason": "residence changed", "successor": 2}],
        "kept_both": [{"existing": 1, "cosine": 0.71, "reason": "", "new": 3}]})
    texts = {1: "lives in Lisbon", 2: "lives in Porto", 3: "likes Porto", 4: "sister Maria", 5: "window seats"}
    ds = update_decisions([SimpleNamespace(kind="gate", payload={}), ev], texts)
    assert [d.decision for d in ds] == ["merge", "supersede", "keep both", "add"]
    sup = ds[1]
    assert sup.new == "#2 lives in Porto" and sup.compared == "#1 lives in Lisbon (cosine 0.765)"
    assert "**supersede**" in sup.line and "residence changed" in sup.line
    assert ds[3].new == "#5 window seats"


@pytest.fixture(autouse=True)
def _skip_component_scan(monkeypatch):
    from streamlit.components.v2.component_manager import BidiComponentManager

    monkeypatch.setattr(BidiComponentManager, "discover_and_register_components", lambda self, **kw: None)


def _say(at: AppTest, text: str) -> None:
    at.chat_input(key="chat_text").set_value(text).run()
    assert not at.exception, [e.value for e in at.exception]


def test_memory_page_shows_the_move_from_lisbon_to_porto():
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    _say(at, "I live in Lisbon")
    at.button(key="ff_1h").click().run()
    _say(at, "hello")
    at.button(key="ff_1h").click().run()
    _say(at, "I just moved to Porto")
    at.button(key="ff_1h").click().run()
    _say(at, "ok")
    at.switch_page("pages/memory.py").run()
    at.segmented_control(key="mem_show").set_value("all").run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(d.value for d in at.dataframe if "status" in d.value.columns)
    assert list(table.columns[:8]) == list(DECIDING_COLUMNS)
    old = table[table["content"].str.contains("Lisbon")].iloc[0]
    assert not old["current"] and old["status"].startswith("superseded → ") and "Porto" in old["status"]
    assert any("~~" in m.value and "Lisbon" in m.value and "Porto" in m.value for m in at.markdown)
    assert any("**supersede**" in m.value and "Lisbon" in m.value for m in at.markdown)
    assert not any(w.value.startswith("conflict:") for w in at.warning)
