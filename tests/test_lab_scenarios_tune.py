"""The Scenarios and Tune pages under AppTest: they render, a small comparison produces a table and
a scrubbable turn, and a saved preset round-trips into the file and the lab's live config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.core.config import MemoryConfig

APP = Path(__file__).resolve().parent.parent / "lab" / "streamlit_app.py"


@pytest.fixture(autouse=True)
def _skip_component_scan(monkeypatch):
    """AppTest scans installed packages for custom components (seconds each); the lab uses none."""
    from streamlit.components.v2.component_manager import BidiComponentManager

    monkeypatch.setattr(BidiComponentManager, "discover_and_register_components", lambda self, **kw: None)


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _specs(at: AppTest) -> dict[str, dict]:
    """The page's Vega-Lite specs by title."""
    out = {}
    for el in at.get("vega_lite_chart"):
        spec = json.loads(el.proto.spec)
        title = spec.get("title")
        out[title.get("text") if isinstance(title, dict) else title] = spec
    return out


def _chart_rows(at: AppTest, title_start: str) -> list[dict]:
    """The largest dataset of the chart whose title starts so (Streamlit ships them as Arrow)."""
    import pyarrow as pa

    for el in at.get("vega_lite_chart"):
        title = json.loads(el.proto.spec).get("title")
        title = title.get("text") if isinstance(title, dict) else title
        if title and title.startswith(title_start):
            tables = [pa.ipc.open_stream(d.data.data).read_all() for d in el.proto.datasets]
            return max(tables, key=lambda t: t.num_rows).to_pylist()
    raise AssertionError(f"no chart titled {title_start!r}")


def _open(page: str, title: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    _ok(at)
    at.switch_page(f"pages/{page}.py").run()
    _ok(at)
    assert at.title[0].value == title
    return at


@pytest.mark.parametrize(("page", "title"), [("scenarios", "Scenarios"), ("tune", "Tune")])
def test_page_renders_before_any_run(page, title):
    at = _open(page, title)
    assert any("Run" in b.label for b in at.button)
    assert at.info  # asks the user to run something first


def test_a_small_comparison_gives_a_table_charts_and_a_turn_scrubber():
    at = _open("scenarios", "Scenarios")
    at.multiselect(key="scn_scenarios").set_value(["cross-session"])
    at.multiselect(key="scn_strategies").set_value(["no-memory", "memlab"])
    at.button(key="scn_run").click().run()
    _ok(at)
    table = next(d.value for d in at.dataframe if "context recall" in d.value.columns)
    assert sorted(table["strategy"]) == ["memlab", "no-memory"]
    by = table.set_index("strategy")
    assert by.loc["no-memory", "context recall"] == 0.0  # a new session: nothing in its window
    assert by.loc["memlab", "context recall"] > 0.0
    assert by.loc["memlab", "context budget"] == by.loc["no-memory", "context budget"]
    # scrub back to the first turn of the memlab run: the prompt it sent is shown
    at.selectbox(key="scn_pick_strategy").set_value("memlab").run()
    at.slider(key="scn_turn").set_value(1).run()
    _ok(at)
    assert any("Turn 1" in m.value for m in at.markdown)
    assert any("Carol Jensen" in c.value for c in at.code)


def test_the_probe_grid_sizes_to_its_rows_and_titles_its_axes():
    at = _open("scenarios", "Scenarios")
    at.multiselect(key="scn_scenarios").set_value(["cross-session", "needle-basic"])
    at.multiselect(key="scn_strategies").set_value(["no-memory", "memlab"])
    at.button(key="scn_run").click().run()
    _ok(at)
    spec = _specs(at)["Per probe and keyword (sample 1)"]
    assert spec["height"] == {"step": 28} and spec["width"] == {"step": 90}  # grows with rows/columns
    enc = spec["layer"][0]["encoding"]
    assert enc["x"]["title"] and enc["y"]["title"]
    assert enc["x"]["axis"]["labelAngle"] and enc["y"]["axis"]["labelLimit"] >= 100


def test_a_sweep_saves_a_preset_that_round_trips(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLAB_PRESET_DIR", str(tmp_path))
    at = _open("tune", "Tune")
    at.multiselect(key="tune_scenarios").set_value(["cross-session"])
    at.text_input(key="tune_grid").set_value("top_k=1,4")
    at.button(key="tune_run").click().run()
    _ok(at)
    frame = next(d.value for d in at.dataframe if "payload tokens" in d.value.columns)
    assert {"top_k=1", "top_k=4", "generative agents", "relevance only"} <= set(frame["point"])
    assert frame["frontier"].any() and int(frame["chosen"].sum()) == 1
    chosen = frame[frame["chosen"]].iloc[0]
    at.text_input(key="tune_name").set_value("swept")
    at.button(key="tune_save").click().run()
    _ok(at)
    saved = MemoryConfig.load(tmp_path / "swept.toml")
    assert saved.preset == "custom" and f"top_k={saved.top_k}" == chosen["point"]
    assert at.session_state["lab"].engine.config == saved
    assert at.success


def test_the_tune_chart_marks_the_frontier_and_a_picked_point_saves(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLAB_PRESET_DIR", str(tmp_path))
    at = _open("tune", "Tune")
    assert any("Tunable keys" in c.value and "weights=simplex" in c.value and "`top_k`" in c.value
               for c in at.caption)
    at.multiselect(key="tune_scenarios").set_value(["cross-session"])
    at.text_input(key="tune_grid").set_value("top_k=1,4;weights=simplex:0.5")
    at.button(key="tune_run").click().run()
    _ok(at)
    frame = next(d.value for d in at.dataframe if "payload tokens" in d.value.columns)
    assert "stale served" in frame.columns
    spec = next(s for t, s in _specs(at).items() if t and t.startswith("Recall against payload"))
    data = _chart_rows(at, "Recall against payload")
    y_dom = spec["layer"][1]["encoding"]["y"]["scale"]["domain"]
    assert y_dom[1] > max(r["recall"] for r in data) and y_dom[0] <= min(r["recall"] for r in data)
    ticks = spec["layer"][1]["encoding"]["y"]["axis"]["values"]
    assert max(ticks) >= max(r["recall"] for r in data) - 1e-9  # no point above the top tick
    assert {"chosen", "frontier"} <= {r["status"] for r in data}
    # stacked points (same payload and recall) are drawn apart
    spots = {}
    for r in data:
        spots.setdefault((r["payload tokens"], r["recall"]), set()).add(r["x"])
    assert all(len(xs) == sum(1 for r in data if (r["payload tokens"], r["recall"]) == k) for k, xs in spots.items())
    options = at.selectbox(key="tune_pick").options
    assert options and at.selectbox(key="tune_pick").value == frame[frame["chosen"]].iloc[0]["point"]
    other = next((o for o in options if o.split(" — ")[0] != at.selectbox(key="tune_pick").value), None)
    if other is not None:
        label = other.split(" — ")[0]
        at.selectbox(key="tune_pick").set_value(label).run()
    else:
        label = at.selectbox(key="tune_pick").value
    at.text_input(key="tune_name").set_value("picked")
    at.button(key="tune_save").click().run()
    _ok(at)
    assert (tmp_path / "picked.toml").exists() and label in at.success[0].value


def test_a_failed_sweep_clears_the_previous_result():
    at = _open("tune", "Tune")
    at.multiselect(key="tune_scenarios").set_value(["cross-session"])
    at.text_input(key="tune_grid").set_value("top_k=2")
    at.button(key="tune_run").click().run()
    _ok(at)
    assert "tune_result" in at.session_state
    at.text_input(key="tune_grid").set_value("no_such_key=1")
    at.button(key="tune_run").click().run()
    _ok(at)
    assert at.error and "tune_result" not in at.session_state
    assert not any("payload tokens" in d.value.columns for d in at.dataframe)
