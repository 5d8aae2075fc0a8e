"""Tune: sweep config values over scenarios, see the recall/cost frontier, save the chosen preset.

Rendering only: the sweep, the frontier and the choice come from engine.eval.tuning.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import fields
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from engine.core.config import (
    DIM_CONSTRAINTS,
    PRESETS,
    RETRIEVAL_PATHS,
    MemoryConfig,
    Weights,
)
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
                          help='key=v1,v2 pairs separated by ";" — MemoryConfig fields, weights as weights.alpha; '
                               "weights=simplex:0.25 sweeps alpha/beta/gamma over a lattice that sums to 1")
TUNABLE = [f.name for f in fields(MemoryConfig) if f.name not in ("preset", "weights", "path_weights", "dim_weights")]
st.caption("Tunable keys: " + ", ".join(f"`{k}`" for k in TUNABLE)
           + " · weights: " + ", ".join(f"`weights.{f.name}`" for f in fields(Weights))
           + " (or `weights=simplex:STEP`, e.g. simplex:0.25 = 15 points on alpha+beta+gamma = 1)"
           + " · " + ", ".join(f"`path_weights.{k}`" for k in RETRIEVAL_PATHS)
           + " · " + ", ".join(f"`dim_weights.{k}`" for k in DIM_CONSTRAINTS))

if st.button("Run sweep", key="tune_run", type="primary", icon=":material/play_arrow:", disabled=not chosen_sc):
    bar = st.progress(0.0, text="starting…")
    try:
        grid = parse_grid(grid_text)
        result = sweep([load_scenario(bundled[n]) for n in chosen_sc], grid, base_preset=base_preset,
                       progress=lambda d, t, label: bar.progress(d / max(1, t), text=f"{d}/{t} · {label}"))
    except MemlabError as exc:
        st.session_state.pop(RESULT_KEY, None)  # never show the previous sweep under a failed run
        st.session_state.pop("tune_saved", None)
        st.error(str(exc))
    else:
        st.session_state.pop("tune_saved", None)
        st.session_state[RESULT_KEY] = result
    bar.empty()

result = st.session_state.get(RESULT_KEY)
if result is None:
    st.info("Set a grid and **Run sweep**.")
    st.stop()

base_pt = result.base
base_stale = base_pt.rejected_served if base_pt is not None else None
frame = pd.DataFrame([{
    "point": p.label, "kind": "reference" if p.reference else "grid", "recall": p.recall,
    "context recall": p.context_recall, "reply recall": p.reply_recall, "stale served": p.rejected_served,
    "payload tokens": p.payload_tokens, "model calls": p.calls, "frontier": p.frontier, "chosen": p.chosen,
    "safe": base_stale is None or p.rejected_served <= base_stale,
} for p in result.points])
# Points with the same payload and recall would hide each other: spread each stack sideways by a few
# percent of the x range (the tooltip and the table keep the true figures) and say how many share it.
span = max(1.0, float(frame["payload tokens"].max() - frame["payload tokens"].min()))
stack = frame.groupby(["payload tokens", "recall"])["point"]
frame["here"] = stack.transform("size")
frame["x"] = frame["payload tokens"] + (stack.cumcount() - (frame["here"] - 1) / 2) * span * 0.02
frame["status"] = frame.apply(lambda r: "chosen" if r["chosen"] else "frontier" if r["frontier"] else "dominated",
                              axis=1)
lo, hi = float(frame["recall"].min()), float(frame["recall"].max())
pad = max(0.02, (hi - lo) * 0.08)
# Ticks on a round step that reach past the best point, and a padded domain that holds them all:
# no point is ever drawn above the top tick, none sits on the plot's edge.
step = next((s for s in (0.01, 0.02, 0.05, 0.1, 0.2) if (hi - lo + 2 * pad) / s <= 8), 0.25)
first, last = math.floor((lo - pad) / step), math.ceil(hi / step - 1e-9)
y_ticks = [round(i * step, 6) for i in range(max(0, first), last + 1)]
y_scale = alt.Scale(domain=[min(y_ticks[0], max(0.0, lo - pad)), max(y_ticks[-1], hi + pad)], nice=False)
x_pad = span * 0.08
x_scale = alt.Scale(domain=[float(frame["x"].min()) - x_pad, float(frame["x"].max()) + x_pad], nice=False)
tooltip = ["point", "kind", "status", alt.Tooltip("recall:Q", format=".1%"), "stale served", "payload tokens",
           "model calls", alt.Tooltip("here:Q", title="points at this spot")]
x_enc = alt.X("x:Q", scale=x_scale, title="payload tokens (injected memory)")
y_enc = alt.Y("recall:Q", scale=y_scale, title="recall", axis=alt.Axis(format="%", values=y_ticks))
front = frame[frame["frontier"]].sort_values(["payload tokens", "recall"])
line = alt.Chart(front).mark_line(strokeDash=[4, 3], color="#1e88e5", opacity=0.6).encode(x=x_enc, y=y_enc)
dots = (
    alt.Chart(frame).mark_point(filled=True, opacity=0.9, stroke="black")
    .encode(x=x_enc, y=y_enc,
            color=alt.Color("status:N", scale=alt.Scale(domain=["chosen", "frontier", "dominated"],
                                                         range=["#e53935", "#1e88e5", "#bdbdbd"]),
                            legend=alt.Legend(orient="bottom", title="point")),
            size=alt.Size("status:N", scale=alt.Scale(domain=["chosen", "frontier", "dominated"], range=[320, 200, 70]),
                          legend=None),
            strokeWidth=alt.condition(alt.datum.frontier, alt.value(1.5), alt.value(0)),
            shape=alt.Shape("kind:N", legend=alt.Legend(orient="bottom")),
            tooltip=tooltip)
)
stale = alt.Chart(frame[frame["stale served"] > 0]).mark_text(dy=-14, fontSize=11, color="#b71c1c").encode(
    x=x_enc, y=y_enc, text=alt.Text("stale served:Q", format="d"), tooltip=tooltip)
labels = alt.Chart(frame[frame["chosen"]]).mark_text(dx=12, align="left", fontWeight="bold").encode(
    x=x_enc, y=y_enc, text=alt.value("← chosen"))
st.altair_chart(alt.layer(line, dots, stale, labels).properties(
    height=360, title="Recall against payload — frontier in blue, red numbers: stale values served (hover for calls)"))
st.caption(f"Stale values served by the base: **{base_stale if base_stale is not None else 'n/a'}**. "
           "A point serving more than the base is never chosen. Points at the same spot are spread apart slightly.")
st.dataframe(frame.drop(columns=["x", "here", "status"])
             .sort_values(["recall", "stale served", "payload tokens", "model calls"],
                          ascending=[False, True, True, True]),
             hide_index=True, key="tune_table", column_config={
                 "recall": st.column_config.NumberColumn(format="percent"),
                 "context recall": st.column_config.NumberColumn(format="percent"),
                 "reply recall": st.column_config.NumberColumn(format="percent"),
                 "stale served": st.column_config.NumberColumn(help="rejected (stale) values the point served")})
for values, why in result.skipped:
    st.caption(f"skipped {values}: {why}")

best = result.chosen
st.subheader("Save a frontier point")
st.markdown(f"Chosen by **{result.objective}**: `{best.label}` — recall {best.recall:.1%}, "
            f"{best.rejected_served} stale served, payload {best.payload_tokens} tokens, {best.calls} calls.")
# Savable: the grid points on the frontier, the base, and the choice (comparison presets are references only).
savable = [p for p in result.points if p is best or (p.frontier and (not p.reference or p is base_pt))]
labels_by = {p.label: p for p in savable}


def _describe(label: str) -> str:
    p = labels_by[label]
    tag = " · safe choice" if p is best else "" if base_stale is None or p.rejected_served <= base_stale \
        else " · serves more stale values than the base"
    return f"{label} — {p.recall:.1%}, {p.rejected_served} stale, {p.payload_tokens} tok{tag}"


pick = st.selectbox("Frontier point to save", list(labels_by), index=list(labels_by).index(best.label),
                    format_func=_describe, key="tune_pick")
picked = labels_by.get(pick, best)
if base_stale is not None and picked.rejected_served > base_stale:
    st.warning(f"`{picked.label}` serves {picked.rejected_served} stale values, more than the base's {base_stale}.")
name = st.text_input("Preset file name", value="tuned", key="tune_name", help=f"saved as {PRESET_DIR}/NAME.toml")
if st.button("Save preset and use it", key="tune_save", icon=":material/save:"):
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name or ""):
        st.error("Use letters, digits, - and _ only (at most 64) for the file name.")
    else:
        cfg = chosen_config(picked, result.base_preset)
        PRESET_DIR.mkdir(parents=True, exist_ok=True)
        path = cfg.save(PRESET_DIR / f"{name}.toml")
        lab.set_config(MemoryConfig.load(path))
        st.session_state["tune_saved"] = f"{path} ({picked.label})"
if saved := st.session_state.get("tune_saved"):
    st.success(f"Saved {saved} (preset 'custom'); it is now this lab session's live config.")
