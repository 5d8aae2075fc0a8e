"""Memory over time: every record's strength T along the virtual timeline, with its reinforcements
and injections, the virtual "now", and a cursor to see the ranking by T at a past moment."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from lab import timeline_data as td
from lab import ui
from lab.state import get_lab

lab = get_lab()
engine = lab.engine
store = engine.store
cfg = engine.config
now = lab.clock.now()

ui.header(
    lab,
    "Memory over time",
    "Each line is one record's strength **T** (the decay curve of the *Curves* page) along the virtual "
    "timeline: it starts when the record was extracted (dotted before that: decay already counts from when its "
    "source was said, so a late extraction does not make an old fact look fresh), jumps back "
    "to 1 at each **reinforcement** (the reply used it, or the user restated it), and ends if the record "
    "was superseded. Points mark extractions, reinforcements and **injections** (shown to the model, "
    "which alone strengthens nothing by default). The solid rule is the virtual **now**; move the cursor "
    "to see how the records ranked by T at an earlier moment. Computed with the live config's τ and c."
)

user_id = ui.user_picker(lab, store, key="tl_user")

records = store.records(user_id, include_invalid=True)
if not records:
    st.info("No records yet. Chat a few turns on the **Chat** page, fast-forward **+1 h** and send one more "
            "message: the event extracts records, and their lines appear here.")
    st.stop()

hs = td.histories(records, store.events(user_id=user_id, kind="reinforce"))
# a compacted turn (engine.memory.retention) names what it injected in its summary row
inject_events = sorted(store.events(user_id=user_id, kind="inject") + store.events(user_id=user_id, kind="compacted"),
                       key=lambda e: e.id or 0)
start = min(lab.start, *(h.said_at for h in hs))
span = max((now - start).total_seconds(), 1.0)
unit, size = td.time_unit(span)
x_title = f"{unit} since {ui.when(start)}"
params = {"tau": cfg.tau, "c": cfg.c, "decay_enabled": cfg.decay_enabled}


def _label(rid: int, content: str) -> str:
    return f"#{rid} {content if len(content) <= 40 else content[:39] + '…'}"


labels = {h.record_id: _label(h.record_id, h.content) for h in hs}
texts = {h.record_id: h.content for h in hs}
points = td.series(hs, until=now, since=start, before_extraction=True, **params)
lines = pd.DataFrame([
    {"record": labels[p.record_id], "id": p.record_id, "text": texts[p.record_id], "x": td.elapsed(p.at, start, size),
     "T": round(p.T, 4), "when": ui.when(p.at), "seq": p.seq, "phase": p.phase}
    for p in points
])
marks = pd.DataFrame([
    {"record": labels[m.record_id], "id": m.record_id, "text": texts[m.record_id],
     "x": td.elapsed(m.at, start, size), "T": round(m.T, 4), "when": ui.when(m.at), "marker": m.kind,
     "detail": m.detail}
    for m in td.markers(hs, inject_events, until=now, **params)
])

max_x = td.elapsed(now, start, size)
if max_x > 0:
    cursor = st.slider(
        f"Cursor ({unit} since start)", min_value=0.0, max_value=round(max_x, 3), value=round(max_x, 3),
        step=round(max(max_x / 500, 1 / 60 if unit == "hours" else 1 / 1440), 4), key="tl_cursor",
        help="Scrub back in virtual time: the table below ranks the records by T as it stood then",
    )
else:
    cursor = 0.0
cursor_at = min(now, start + pd.Timedelta(seconds=cursor * size).to_pytimedelta())

x_enc = alt.X("x:Q", title=x_title, scale=alt.Scale(domain=[min(0.0, float(lines["x"].min())), max(max_x, 1e-6)]))
y_enc = alt.Y("T:Q", title="strength T (decay since last reinforcement)", scale=alt.Scale(domain=[0, 1.02]))
color = alt.Color("record:N", title="record", sort=list(labels.values()),
                  legend=alt.Legend(orient="bottom", columns=2, labelLimit=320))
base_tip = [alt.Tooltip("record:N"), alt.Tooltip("text:N", title="record text"), alt.Tooltip("when:N"),
            alt.Tooltip("T:Q", format=".3f")]
line_layer = alt.Chart(lines).mark_line(strokeWidth=2).encode(
    x=x_enc, y=y_enc, color=color, detail="id:N", order="seq:Q",
    strokeDash=alt.StrokeDash("phase:N", title="line", scale=alt.Scale(
        domain=[td.IN_MEMORY, td.PRE_PHASE], range=[[1, 0], [2, 3]]), legend=alt.Legend(orient="top")),
    tooltip=[*base_tip, alt.Tooltip("phase:N")])
point_layer = alt.Chart(marks).mark_point(filled=True, size=70).encode(
    x="x:Q", y="T:Q", color=alt.Color("record:N", sort=list(labels.values()), legend=None),
    shape=alt.Shape("marker:N", title="marker", scale=alt.Scale(
        domain=["extracted", "reinforced", "injected"], range=["circle", "triangle-up", "diamond"]),
        legend=alt.Legend(orient="top")),
    tooltip=[*base_tip, alt.Tooltip("marker:N"), alt.Tooltip("detail:N")],
)
rules = pd.DataFrame([
    {"x": max_x, "rule": "now", "when": ui.when(now)},
    *([{"x": cursor, "rule": "cursor", "when": ui.when(cursor_at)}] if cursor < max_x else []),
])
now_rule = alt.Chart(rules[rules["rule"] == "now"]).mark_rule(color="gray", strokeWidth=1.5).encode(
    x="x:Q", tooltip=["rule:N", "when:N"])
cursor_rule = alt.Chart(rules[rules["rule"] == "cursor"]).mark_rule(color="gray", strokeDash=[5, 4]).encode(
    x="x:Q", tooltip=["rule:N", "when:N"])
rule_text = alt.Chart(rules).mark_text(align="left", dx=4, dy=8, color="gray").encode(
    x="x:Q", y=alt.value(0), text="rule:N")
# fit-x: the width follows the page, the height is the plot's own; the legends add below it as they grow
chart = alt.layer(line_layer, point_layer, now_rule, cursor_rule, rule_text).properties(
    height=240 + 8 * min(len(hs), 20), autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
st.altair_chart(chart, width="stretch")
n_reinf = int((marks["marker"] == "reinforced").sum()) if not marks.empty else 0
n_inj = int((marks["marker"] == "injected").sum()) if not marks.empty else 0
st.caption(f"{len(hs)} record line(s) · {n_reinf} reinforcement(s) · {n_inj} injection(s) · "
           f"τ = {ui.age(cfg.tau)}, c = {cfg.c:g}" + ("" if cfg.decay_enabled else " · decay is off: T = 1"))

st.subheader(f"Ranking by T at {ui.when(cursor_at)}")
ranking = td.ranking_at(hs, cursor_at, **params)
if not ranking:
    st.caption("No record was in memory yet at this moment.")
else:
    st.dataframe(
        pd.DataFrame([
            {"rank": r["rank"], "id": r["record_id"], "T": r["T"], "reinforcements": r["reinforcements"],
             "decay counts from": r["decay counts from"], "content": r["content"]}
            for r in ranking
        ]),
        hide_index=True, width="stretch",
        column_config={
            "T": st.column_config.ProgressColumn("T then", min_value=0.0, max_value=1.0, format="%.3f"),
            "decay counts from": st.column_config.DatetimeColumn("decay counts from", format="YYYY-MM-DD HH:mm"),
        },
    )
    st.caption("T only: the full score also weighs relevance R to the query and importance F "
               "(see *Scoring*).")
