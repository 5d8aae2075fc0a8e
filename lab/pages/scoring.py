"""Scoring: every candidate of a retrieval, its R/T/F parts and score, and live what-if re-ranking."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from engine.core.config import Weights
from engine.core.errors import ConfigError, MemlabError
from engine.memory.ranking import sensitivity
from lab import ui
from lab.state import get_lab

lab = get_lab()
engine = lab.engine

ui.header(
    lab,
    "Scoring",
    "How one retrieval ranked the user's records. Three paths find "
    "candidates (BM25 words, dense vectors, dimension match: type, time, place, keywords); their "
    "fused relevance is **R**. Each candidate also has decay **T** (time since last reinforced) and "
    "importance **F** (tags + reinforcements). The score is **S = αR + βT + γF + δ**; identity and "
    "preference records hold seats first, then the best S up to top-K. Move the **what-if** sliders "
    "to re-rank the same candidates live: nothing stored changes."
)

source = st.segmented_control("Retrieval", ["last chat turn", "a query typed here"], default="last chat turn",
                              key="sc_source")
retrieval = None
if source == "a query typed here":
    with st.form("sc_query", border=False):
        c1, c2 = st.columns([5, 1], vertical_alignment="bottom")
        query = c1.text_input("Query", key="sc_query_text", placeholder="e.g. where does she live?")
        go = c2.form_submit_button("Score", type="primary", width="stretch")
    if go and query.strip():
        try:
            st.session_state["sc_retrieval"] = engine.retrieve(lab.user_id, query.strip(), log=False)
        except MemlabError as exc:
            st.error(str(exc))
    retrieval = st.session_state.get("sc_retrieval")
else:
    retrieval = lab.last_turn.retrieval if lab.last_turn is not None else None

if retrieval is None:
    st.info("No retrieval yet. Chat a few turns (and fast-forward **+1 h** so records get extracted), "
            "or type a query above.")
    st.stop()
if not retrieval.rows:
    st.info(f"The query “{retrieval.query.text}” found no candidates: {lab.user_id} has no records yet. "
            "Chat a few turns, then fast-forward +1 h to see the gate open.")
    st.stop()

cfg = engine.config
base_w = retrieval.weights
st.caption(f"Query “{retrieval.query.text}” at {retrieval.at:%Y-%m-%d %H:%M} · "
           f"keywords {retrieval.query.keywords} · "
           f"weights in use α {base_w.alpha:.2f} β {base_w.beta:.2f} γ {base_w.gamma:.2f} δ {base_w.delta:.2f} "
           "(tuned for the theme when tuning is on)")
st.caption(f"{len(retrieval.rows)} candidates scored in {ui.stage_times(retrieval.stages)} on this machine")

# -- what-if knobs ---------------------------------------------------------------------------
defaults = {"wi_alpha": base_w.alpha, "wi_beta": base_w.beta, "wi_gamma": base_w.gamma, "wi_delta": base_w.delta,
            "wi_tau": ui.format_seconds(cfg.tau, exact=True), "wi_c": cfg.c, "wi_topk": cfg.top_k}
stamp = (id(retrieval), cfg.to_dict().__repr__())
if st.session_state.get("wi_for") != stamp or st.button("Reset what-if", key="wi_reset"):
    st.session_state.update(defaults)
    st.session_state["wi_for"] = stamp

with st.container(border=True):
    st.markdown("##### What-if")
    k1, k2, k3, k4 = st.columns(4)
    alpha = k1.slider("α relevance", 0.0, 1.0, step=0.01, key="wi_alpha")
    beta = k2.slider("β decay", 0.0, 1.0, step=0.01, key="wi_beta")
    gamma = k3.slider("γ importance", 0.0, 1.0, step=0.01, key="wi_gamma")
    delta = k4.slider("δ offset", -1.0, 1.0, step=0.01, key="wi_delta")
    k5, k6, k7 = st.columns(3)
    tau_text = k5.text_input("τ decay scale", key="wi_tau",
                             help="A duration: 90s, 30min (or 30m), 12h, 3d, 1h30m; a plain number is seconds")
    c = k6.slider("c decay shape", 0.05, 3.0, step=0.05, key="wi_c")
    top_k = k7.slider("top-K", 1, 20, step=1, key="wi_topk")
    total = alpha + beta + gamma
    if total <= 0:
        st.error("α, β and γ are all zero: raise at least one.")
        st.stop()
    try:
        tau = ui.parse_seconds(tau_text)
        if tau <= 0:
            raise ValueError("τ must be longer than 0 s")
    except ValueError as exc:
        st.error(f"τ: {exc}")
        st.stop()
    try:
        weights = Weights(alpha=alpha / total, beta=beta / total, gamma=1.0 - alpha / total - beta / total,
                          delta=delta, w0=base_w.w0, w1=base_w.w1, w2=base_w.w2)
        what_cfg = cfg.with_overrides(tau=tau, c=c, top_k=int(top_k))
    except ConfigError as exc:
        st.error(str(exc))
        st.stop()
    st.caption(f"Normalised so α+β+γ = 1: α {weights.alpha:.3f} · β {weights.beta:.3f} · γ {weights.gamma:.3f}")

what = engine.rescore(retrieval, what_cfg, weights)
was, now_set = set(retrieval.picked), set(what.picked)
if was == now_set:
    st.success(f"Same injected set: {sorted(was)}")
else:
    st.warning(f"The injected set changes: + {sorted(now_set - was) or '—'} · − {sorted(was - now_set) or '—'}")

knobs = sensitivity(retrieval.candidates, config=what_cfg, weights=weights)
flips = [f"**{v}**" for v in knobs.values() if v]
st.markdown("Nearest single-knob change that would change the injected set: "
            + (" · ".join(flips) if flips else "none on the tested grid (the choice is robust)"))

# -- the table ---------------------------------------------------------------------------------
orig = {r.record_id: r for r in retrieval.rows}
rows = []
for r in what.rows:
    rec = retrieval.records.get(r.record_id)
    o = orig[r.record_id]
    rows.append({
        "id": r.record_id,
        "record": rec.content if rec else "",
        "bm25 #": r.ranks.get("bm25"), "dense #": r.ranks.get("dense"), "dim #": r.ranks.get("dim"),
        "R": r.R, "T": r.T, "F": r.F,
        "αR": r.parts["alpha_R"], "βT": r.parts["beta_T"], "γF": r.parts["gamma_F"], "S": r.S,
        "verdict": r.verdict, "why": r.why, "tokens": r.tokens,
        "stored S": o.S, "stored verdict": o.verdict,
    })
table = pd.DataFrame(rows)
st.dataframe(
    table, hide_index=True, width="stretch",
    column_config={k: st.column_config.NumberColumn(k, format="%.3f") for k in ("R", "T", "F", "αR", "βT", "γF",
                                                                                 "S", "stored S")},
)
st.caption("Ranks are per path (1 = best, empty = not found by that path). *verdict/why*: picked by a floor "
           "seat (floor:identity) or top-K; near-miss = just below the last seat; dropped by top-K or the "
           "token budget. *stored* columns are the retrieval as it happened.")

parts = table.melt(id_vars=["id", "verdict"], value_vars=["αR", "βT", "γF"], var_name="part", value_name="value")
labels = {i: f"#{i} {text[:40]}" for i, text in zip(table["id"], table["record"], strict=True)}
parts["candidate"] = parts["id"].map(labels)
order = [labels[i] for i in table["id"]]
chart = (
    alt.Chart(parts)
    .mark_bar()
    .encode(
        y=alt.Y("candidate:N", sort=order, title=None, axis=alt.Axis(labelOverlap=False, labelLimit=320)),
        x=alt.X("value:Q", title="S = αR + βT + γF (stacked, what-if)", stack="zero"),
        color=alt.Color("part:N"),
        opacity=alt.condition(alt.datum.verdict == "picked", alt.value(1.0), alt.value(0.45)),
        tooltip=["candidate", "part", alt.Tooltip("value:Q", format=".3f"), "verdict"],
    )
    .properties(height=max(120, 30 * len(order)))
)
st.markdown("**Score parts per candidate** (faded = not picked)")
st.altair_chart(chart, width="stretch")
