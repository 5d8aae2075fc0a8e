"""Tune: sweep config values over scenarios, see the recall/cost frontier, save the chosen preset.

Rendering only: the sweep, the frontier and the choice come from engine.eval.tuning.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from engine.core.config import PRESETS, MemoryConfig
from engine.core.errors import MemlabError
from engine.eval.scenario import load_scenario
from engine.eval.tuning import chosen_config, parse_grid, sweep
from lab import ui
from lab.state import get_lab

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_DIR = ROOT / "scenarios"
PRESET_DIR = Path(os.environ.get("MEMLAB_PRESET_DIR") or ROOT / "build" / "presets")
RESULT_KEY = "tune_result"
SMALL_GRID = "top_k=2,4;tau=3600,43200"

lab = get_lab()
ui.header(
    lab,
    "Tune",
    "A sweep runs the memlab engine (scripted models) on the chosen scenarios once per grid point "
    "(the cartesian product of the values) and measures **recall** (mean of context and reply recall), "
    "the **payload** (injected memory tokens) and the **model calls**. A point is on the **frontier** "
    "when no other point has at least its recall with no more payload and calls. The objective "
    "picks the highest recall, then the smallest payload, then the fewest calls. The comparison presets "
    "and the base preset run alongside as references. Saving writes a TOML preset and makes it the "
    "live config of this lab session.",
)

bundled = {p.stem: p for p in sorted(SCENARIO_DIR.glob("*.yaml"))}
c1, c2 = st.columns([3, 2])
chosen_sc = c1.multiselect("Scenarios", list(bundled), default=[n for n in ("cross-session", "needle-basic")
                                                               if n in bundled], key="tune_scenarios")
base_options = ["(each scenario's own)", *[p for p in PRESETS if p != "custom"]]
base_label = c2.selectbox("Base preset", base_options, key="tune_base")
base_preset = None if base_label == base_options[0] else base_label
grid_text = st.text_input("Grid", value=SMALL_GRID, key="tune_grid",
                          help='key=v1,v2 pairs separated by ";" — MemoryConfig fields, weights as weights.alpha')

if st.button("Run sweep", key="tune_run", type="primary", icon=":material/play_arrow:", disabled=not chosen_sc):
    bar = st.progress(0.0, text="starting…")
    try:
        grid = parse_grid(grid_text)
        result = sweep([load_scenario(bundled[n]) for n in chosen_sc], grid, base_preset=base_preset,
                       progress=lambda d, t, label: bar.progress(d / max(1, t), text=f"{d}/{t} · {label}"))
    except MemlabError as exc:
        st.error(str(exc))
    else:
        st.session_state[RESULT_KEY] = result
    bar.empty()

result = st.session_state.get(RESULT_KEY)
if result is None:
    st.info("Set a grid and **Run sweep**.")
    st.stop()

frame = pd.DataFrame([{
    "point": p.label, "kind": "reference" if p.reference else "grid", "recall": p.recall,
    "context recall": p.context_recall, "reply recall": p.reply_recall, "rejected served": p.rejected_served,
    "payload tokens": p.payload_tokens, "model calls": p.calls, "frontier": p.frontier, "chosen": p.chosen,
} for p in result.points])
chart = (
    alt.Chart(frame).mark_point(filled=True, size=120)
    .encode(x=alt.X("payload tokens:Q", scale=alt.Scale(zero=False)),
            y=alt.Y("recall:Q", axis=alt.Axis(format="%"), scale=alt.Scale(zero=False)),
            color=alt.Color("frontier:N", scale=alt.Scale(domain=[True, False], range=["#1e88e5", "#bdbdbd"]),
                            legend=alt.Legend(orient="bottom", title="on the frontier")),
            shape=alt.Shape("kind:N", legend=alt.Legend(orient="bottom")),
            tooltip=["point", "kind", alt.Tooltip("recall:Q", format=".1%"), "payload tokens", "model calls",
                     "rejected served"])
    .properties(height=320, title="Recall against payload (hover for calls)")
)
labels = alt.Chart(frame[frame["chosen"]]).mark_text(dx=8, align="left").encode(
    x="payload tokens:Q", y="recall:Q", text=alt.value("← chosen"))
st.altair_chart(alt.layer(chart, labels))
st.dataframe(frame.sort_values(["recall", "payload tokens", "model calls"], ascending=[False, True, True]),
             hide_index=True, key="tune_table", column_config={
                 "recall": st.column_config.NumberColumn(format="percent"),
                 "context recall": st.column_config.NumberColumn(format="percent"),
                 "reply recall": st.column_config.NumberColumn(format="percent")})
for values, why in result.skipped:
    st.caption(f"skipped {values}: {why}")

best = result.chosen
st.subheader("Save the chosen point")
st.markdown(f"Chosen by **{result.objective}**: `{best.label}` — recall {best.recall:.1%}, "
            f"payload {best.payload_tokens} tokens, {best.calls} calls.")
name = st.text_input("Preset file name", value="tuned", key="tune_name", help=f"saved as {PRESET_DIR}/NAME.toml")
if st.button("Save preset and use it", key="tune_save", icon=":material/save:"):
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name or ""):
        st.error("Use letters, digits, - and _ only (at most 64) for the file name.")
    else:
        cfg = chosen_config(best, result.base_preset)
        PRESET_DIR.mkdir(parents=True, exist_ok=True)
        path = cfg.save(PRESET_DIR / f"{name}.toml")
        lab.set_config(MemoryConfig.load(path))
        st.session_state["tune_saved"] = str(path)
if saved := st.session_state.get("tune_saved"):
    st.success(f"Saved {saved} (preset 'custom'); it is now this lab session's live config.")
