"""Scenarios: replay bundled scenarios through several memory strategies side by side.

Rendering only: the runs and aggregates come from engine.eval.strategies, the probe checks from the
one scenario driver (engine.eval.driver).
"""

from __future__ import annotations

import json
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from engine.core.errors import MemlabError
from engine.eval.scenario import load_scenario
from engine.eval.strategies import (
    STRATEGY_NAMES,
    aggregate,
    budget_notes,
    compare,
    make_strategy,
)
from lab import ui
from lab.state import get_lab

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"
RESULT_KEY = "scn_result"

lab = get_lab()
ui.header(
    lab,
    "Scenarios",
    "Each bundled scenario is a scripted conversation on a virtual clock with probes at the end. "
    "Every strategy replays the **same** turns at the **same** times with the **same** context budget; "
    "only what reaches the chat model differs. **Context recall**: the expected keyword was in what the "
    "model saw for that probe. **Reply recall**: it was in the reply to that probe (only that one). "
    "**Payload**: injected memory tokens (records, profile or summary). The scrubber replays what one "
    "strategy sent to the model at any turn.",
)

bundled = {p.stem: p for p in sorted(SCENARIO_DIR.glob("*.yaml"))}
c1, c2 = st.columns([3, 2])
chosen = c1.multiselect("Scenarios", list(bundled), default=[n for n in ("needle-basic", "cross-session")
                                                            if n in bundled], key="scn_scenarios")
strategies = c2.multiselect("Strategies", list(STRATEGY_NAMES), default=list(STRATEGY_NAMES), key="scn_strategies",
                            help="; ".join(f"{n}: {make_strategy(n).description}" for n in STRATEGY_NAMES))
c3, c4 = st.columns([1, 4], vertical_alignment="bottom")
samples = c3.number_input("Samples", min_value=1, max_value=5, value=1, step=1, key="scn_samples",
                          help="Scripted models are deterministic; samples matter with a real model")
use_real = lab.settings.model_mode == "real"
c4.caption(f"Models: **{'real: ' + lab.settings.model_name if use_real else 'scripted (offline stand-ins)'}** "
           "— the lab's Settings choose them.")


def _settings():
    if not use_real:
        return None
    from engine.roles.llm import ModelSettings

    kw = {"model": lab.settings.model_name}
    if lab.settings.base_url:
        kw["base_url"] = lab.settings.base_url
    return ModelSettings(**kw)


if st.button("Run comparison", key="scn_run", type="primary", icon=":material/play_arrow:",
             disabled=not chosen or not strategies):
    bar = st.progress(0.0, text="starting…")
    try:
        runs = compare([load_scenario(bundled[n]) for n in chosen], [make_strategy(s) for s in strategies],
                       samples=int(samples), settings=_settings(),
                       progress=lambda d, t, label: bar.progress(d / max(1, t), text=f"{d}/{t} · {label}"))
    except MemlabError as exc:
        st.error(str(exc))
    else:
        st.session_state[RESULT_KEY] = runs
    bar.empty()

runs = st.session_state.get(RESULT_KEY)
if not runs:
    st.info("Pick scenarios and strategies, then **Run comparison**.")
    st.stop()

rows = aggregate(runs)
order = [s for s in STRATEGY_NAMES if any(r["strategy"] == s for r in rows)]
table = pd.DataFrame([{
    "scenario": r["scenario"], "strategy": r["strategy"], "context recall": r["context_recall"],
    "reply recall": r["reply_recall"], "rejected served": r["rejected_served"], "payload tokens": r["payload_tokens"],
    "model calls": r["calls"], "input tokens": r["input_tokens"], "output tokens": r["output_tokens"],
    "cost": r["cost"], "context budget": r["budget"].get("context_budget"),
    "memory budget": r["budget"].get("memory_budget") or None,
    "calls by role": ", ".join(f"{k} {v:g}" for k, v in r["calls_by_role"].items()),
} for r in rows])
st.subheader("Results")
st.dataframe(table, hide_index=True, key="scn_table", column_config={
    "context recall": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="percent"),
    "reply recall": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="percent"),
    "cost": st.column_config.NumberColumn(format="%.5f"),
})
for note in budget_notes(runs):
    st.warning(f"Unequal budget — {note}")

long = table.melt(id_vars=["scenario", "strategy"], value_vars=["context recall", "reply recall"],
                  var_name="measure", value_name="recall")
recall_chart = (
    alt.Chart(long).mark_bar()
    .encode(x=alt.X("strategy:N", sort=order, title=None), xOffset="measure:N",
            y=alt.Y("recall:Q", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
            color=alt.Color("measure:N", legend=alt.Legend(orient="bottom")),
            column=alt.Column("scenario:N", title=None),
            tooltip=["scenario", "strategy", "measure", alt.Tooltip("recall:Q", format=".0%")])
    .properties(width=220, height=200, title="Recall by strategy")
)
st.altair_chart(recall_chart)
tokens = table.melt(id_vars=["scenario", "strategy"], value_vars=["payload tokens", "input tokens"],
                    var_name="measure", value_name="tokens")
token_chart = (
    alt.Chart(tokens).mark_bar()
    .encode(x=alt.X("strategy:N", sort=order, title=None), xOffset="measure:N", y="tokens:Q",
            color=alt.Color("measure:N", legend=alt.Legend(orient="bottom")),
            column=alt.Column("scenario:N", title=None), tooltip=["scenario", "strategy", "measure", "tokens"])
    .properties(width=220, height=200, title="Tokens by strategy (payload: injected memory; input: all calls)")
)
st.altair_chart(token_chart)

grid = pd.DataFrame([{
    "probe": f"{r.scenario} · {p['ask']} → {kw}", "strategy": r.strategy,
    "mark": ("✓" if v["reply"] else "◐" if v["context"] else "✗"),
    "result": ("in reply" if v["reply"] else "seen, not answered" if v["context"] else "not seen"),
    "reply": p["reply"],
} for r in runs if r.sample == 0 for p in r.probes for kw, v in p["expect"].items()])
if not grid.empty:
    # Size to the data: one step per probe row and per strategy column, long probe labels kept
    # readable (limit + tooltip for the full text), strategy names angled so they never overlap.
    longest = int(grid["probe"].str.len().max())
    base = alt.Chart(grid).encode(
        x=alt.X("strategy:N", sort=order, title="strategy",
                axis=alt.Axis(orient="top", labelAngle=-30, labelLimit=160, labelPadding=4)),
        y=alt.Y("probe:N", title="probe · question → expected keyword", sort=None,
                # the title sits above the labels (never across them), right-aligned to the grid
                axis=alt.Axis(labelLimit=min(520, 7 * longest + 10), labelFontSize=11, titleAngle=0,
                              titleAlign="right", titleBaseline="bottom", titleX=-6, titleY=-8)))
    probe_chart = alt.layer(
        base.mark_rect(stroke="white", strokeWidth=1).encode(color=alt.Color("result:N", scale=alt.Scale(
            domain=["in reply", "seen, not answered", "not seen"], range=["#4caf50", "#ffc107", "#e57373"]),
            legend=alt.Legend(orient="bottom", title="result")), tooltip=["probe", "strategy", "result", "reply"]),
        base.mark_text(fontSize=14).encode(text="mark:N", tooltip=["probe", "strategy", "result", "reply"]),
    ).properties(width=alt.Step(90), height=alt.Step(28), title="Per probe and keyword (sample 1)")
    st.altair_chart(probe_chart)

st.subheader("Turn scrubber")
s1, s2 = st.columns(2)
pick_sc = s1.selectbox("Scenario", sorted({r.scenario for r in runs}), key="scn_pick_scenario")
pick_st = s2.selectbox("Strategy", [s for s in order if any(r.strategy == s and r.scenario == pick_sc for r in runs)],
                       key="scn_pick_strategy")
run = next(r for r in runs if r.scenario == pick_sc and r.strategy == pick_st and r.sample == 0)
n = st.slider("Turn", min_value=1, max_value=max(2, len(run.turns)), value=len(run.turns), key="scn_turn") \
    if len(run.turns) > 1 else 1
turn = run.turns[min(n, len(run.turns)) - 1]
st.markdown(f"**Turn {turn['n']}** ({turn['kind']}) · {turn['at'][:16].replace('T', ' ')} · "
            f"{turn['user']} / {turn['session']} · payload {turn['payload_tokens']} tok")
left, right = st.columns(2)
with left:
    st.caption("User said")
    st.markdown(f"> {turn['text']}")
    st.caption("Reply")
    st.markdown(f"> {turn['reply'] or '—'}")
    st.caption("Strategy state after this turn")
    st.json(turn["state"], expanded=False)
with right:
    st.caption(f"The prompt it sent ({len(turn['prompt'])} messages)")
    for m in turn["prompt"]:
        st.markdown(f"**{m['role']}**")
        st.code(m["content"], language=None, wrap_lines=True)
st.download_button("Download runs (JSON)", json.dumps({"runs": [r.to_dict() for r in runs]}, ensure_ascii=False,
                                                      indent=1),
                   file_name="memlab-compare.json", mime="application/json", key="scn_download")
