"""Curves: maturity M(Δt), decay T(Δt) and importance F(n) of the live config against another.

Editing τ, c and the gate values here changes the engine's live config; the chat goes on under it.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from engine.core.config import PRESETS, MemoryConfig
from engine.core.errors import ConfigError
from engine.core.forgetting import decay, importance, maturity, tag_union
from lab import ui
from lab.state import get_lab

lab = get_lab()
cfg = lab.engine.config

ui.header(
    lab,
    "Curves",
    "The three curves that decide what memlab remembers. "
    "**Maturity M(Δt)**: how ripe a message of age Δt is; when the oldest unprocessed message "
    "passes the *slice gate*, an event extracts records, and records past the *induction gate* "
    "feed the profile. **Decay T(Δt)**: how much of a record survives Δt after it was last "
    "reinforced (dotted: its half-life). **Importance F(n)**: type salience plus consolidation "
    "after n reinforcements. Solid = the live config, dashed = the comparison."
)

options = [p for p in PRESETS if p != "custom"]
other_name = st.selectbox(
    "Compare with", options, index=options.index("collaborative creation"), key="curves_compare",
    help="Another preset drawn dashed next to the live config",
)
other = MemoryConfig.from_preset(other_name)
log_x = st.toggle("Log time axis", value=True, key="curves_log",
                  help="Presets differ tenfold in their time scales; a log axis shows both")
DURATION_HELP = "A duration: 90s, 30min (or 30m), 12h, 3d, 1h30m; a plain number is seconds"
labels = {"live": f"live ({cfg.preset})", "other": f"{other_name}"}
#: Width follows the column, height is the plot's own (Streamlit's default "fit" squeezed the plot
#: into the height left over by the axis titles and the legend).
_FIT_X = alt.AutoSizeParams(type="fit-x", contains="padding")


def _unit(max_seconds: float) -> tuple[str, float]:
    for name, size, limit in (("min", 60.0, 3 * 3600), ("h", 3600.0, 4 * 86400)):
        if max_seconds <= limit:
            return name, size
    return "d", 86400.0  # the same unit names as ui.format_seconds


def _grid(span: float) -> np.ndarray:
    return np.geomspace(span / 2000, span, 240) if log_x else np.linspace(0.0, span, 240)


def _line_chart(frame: pd.DataFrame, marks: pd.DataFrame, *, x: str, y: str, title: str) -> alt.LayerChart:
    lines = (
        alt.Chart(frame)
        .mark_line()
        .encode(
            x=alt.X(f"{x}:Q", title=x, scale=alt.Scale(type="log" if log_x else "linear")),
            y=alt.Y(f"{y}:Q", title=y, scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("config:N", title=None, legend=alt.Legend(orient="bottom")),
            strokeDash=alt.StrokeDash("config:N", legend=None,
                                      scale=alt.Scale(domain=list(labels.values()), range=[[1, 0], [6, 4]])),
        )
    )
    rules = (
        alt.Chart(marks)
        .mark_rule(strokeDash=[2, 3])
        .encode(x=f"{x}:Q", color=alt.Color("config:N", legend=None), tooltip=["mark:N", "at:N"])
    )
    text = (
        alt.Chart(marks)
        .mark_text(align="left", dx=3, dy=-4, fontSize=11)
        .encode(x=f"{x}:Q", y=alt.Y("ypos:Q"), text="mark:N", color=alt.Color("config:N", legend=None))
    )
    return alt.layer(lines, rules, text).properties(title=title, height=220, autosize=_FIT_X)


left, right = st.columns(2)

# -- maturity ------------------------------------------------------------------------------
span_m = 1.6 * max(cfg.induction_gate_seconds, other.induction_gate_seconds)
unit_m, size_m = _unit(span_m)
grid_m = _grid(span_m)
x_m = f"message age ({unit_m})"
frames, marks = [], []
for key, c in (("live", cfg), ("other", other)):
    frames.append(pd.DataFrame({x_m: grid_m / size_m, "M": maturity(grid_m, tau_m=c.tau_m, c_m=c.c_m),
                                "config": labels[key]}))
    for mark, seconds, y in (("slice gate", c.slice_gate_seconds, c.slice_value),
                             ("induction gate", c.induction_gate_seconds, c.long_term_value)):
        marks.append({x_m: seconds / size_m, "mark": mark, "at": ui.format_seconds(seconds), "config": labels[key],
                      "ypos": y - (0.08 if key == "other" else 0.0)})
left.altair_chart(_line_chart(pd.concat(frames), pd.DataFrame(marks), x=x_m, y="M", title="Maturity M(Δt)"),
                  width="stretch")

# -- decay --------------------------------------------------------------------------------
span_t = 4.0 * max(cfg.decay_half_life_seconds, other.decay_half_life_seconds)
unit_t, size_t = _unit(span_t)
grid_t = _grid(span_t)
x_t = f"time since last reinforcement ({unit_t})"
frames, marks = [], []
for key, c in (("live", cfg), ("other", other)):
    frames.append(pd.DataFrame({x_t: grid_t / size_t, "T": decay(grid_t, tau=c.tau, c=c.c), "config": labels[key]}))
    hl = c.decay_half_life_seconds
    marks.append({x_t: hl / size_t, "mark": "half-life", "at": ui.format_seconds(hl), "config": labels[key],
                  "ypos": 0.5 - (0.08 if key == "other" else 0.0)})
right.altair_chart(_line_chart(pd.concat(frames), pd.DataFrame(marks), x=x_t, y="T", title="Decay T(Δt)"),
                   width="stretch")

# -- importance -----------------------------------------------------------------------------
n = np.arange(0, 13)
rows = []
for tags in (("identity",), ("preference",), ("fact",), ("chat",)):
    u = tag_union(tags)
    f = importance(u, n, w0=cfg.weights.w0, w1=cfg.weights.w1, w2=cfg.weights.w2, k=cfg.consolidation_k)
    rows.append(pd.DataFrame({"reinforcements n": n, "F": f, "tag": "+".join(tags)}))
chart_f = (
    alt.Chart(pd.concat(rows))
    .mark_line(point=True)
    .encode(x="reinforcements n:Q", y=alt.Y("F:Q", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("tag:N", legend=alt.Legend(orient="bottom")), tooltip=["tag", "reinforcements n", "F"])
    .properties(title="Importance F(n), live weights", height=200, autosize=_FIT_X)
)
left.altair_chart(chart_f, width="stretch")

with right:
    st.markdown("**Gate times**")
    st.dataframe(
        pd.DataFrame(
            [
                {"": labels[k], "slice gate": ui.format_seconds(c.slice_gate_seconds),
                 "induction gate": ui.format_seconds(c.induction_gate_seconds),
                 "decay half-life": ui.format_seconds(c.decay_half_life_seconds)}
                for k, c in (("live", cfg), ("other", other))
            ]
        ),
        hide_index=True,
    )

# -- edit the live config -------------------------------------------------------------------
st.subheader("Edit the live config")
st.caption("Applies to the running engine at once: the next chat turn gates, decays and ranks with these values.")
with st.form("curves_edit"):
    c1, c2, c3 = st.columns(3)
    tau_m_text = c1.text_input("τ_m, maturity scale", value=ui.format_seconds(cfg.tau_m, exact=True), key="e_tau_m",
                               help=DURATION_HELP)
    c_m = c1.number_input("c_m, maturity shape", min_value=0.05, max_value=5.0, value=float(cfg.c_m), step=0.05,
                          key="e_c_m")
    tau_text = c2.text_input("τ, decay scale", value=ui.format_seconds(cfg.tau, exact=True), key="e_tau",
                             help=DURATION_HELP)
    c = c2.number_input("c, decay shape", min_value=0.05, max_value=5.0, value=float(cfg.c), step=0.05, key="e_c")
    slice_value = c3.number_input("slice_value (gate)", min_value=0.0, max_value=0.999, value=float(cfg.slice_value),
                                  step=0.01, key="e_slice")
    long_term_value = c3.number_input("long_term_value (induction)", min_value=0.0, max_value=0.999,
                                      value=float(cfg.long_term_value), step=0.01, key="e_lt")
    apply = st.form_submit_button("Apply to the live engine", type="primary")
if apply:
    try:
        tau_m, tau = ui.parse_seconds(tau_m_text), ui.parse_seconds(tau_text)
        if tau_m <= 0 or tau <= 0:
            raise ValueError("τ_m and τ must be longer than 0 s")
        lab.set_config(cfg.with_overrides(preset="custom", tau_m=tau_m, c_m=c_m, tau=tau, c=c,
                                          slice_value=slice_value, long_term_value=long_term_value))
    except (ConfigError, ValueError) as exc:
        st.error(str(exc))
    else:
        st.rerun()
if st.button(f"Reset to the {lab.settings.preset!r} preset", key="curves_reset", icon=":material/restart_alt:"):
    lab.set_config(MemoryConfig.from_preset(lab.settings.preset))
    for k in ("e_tau_m", "e_c_m", "e_tau", "e_c", "e_slice", "e_lt"):
        st.session_state.pop(k, None)
    st.rerun()
