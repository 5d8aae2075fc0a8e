"""What the model saw: the exact prompt of a chat call (the last, or an earlier turn picked), part by part."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from lab import ui
from lab.state import get_lab

lab = get_lab()

ui.header(
    lab,
    "What the model saw",
    "The exact input of a chat call (the latest, or pick an earlier turn), in the order it was built: "
    "**core** instructions → the user's **profile** → the injected memory **records** (marked as data, "
    "never as instructions) → the conversation **window**. The first parts never change between turns, "
    "so a provider can cache them: that stable prefix is marked *cacheable*."
)

turns = lab.session_turns()
if not turns and lab.last_turn is not None:
    turns = [lab.last_turn]
if not turns:
    st.info("No model call yet in this session. Send a message on the **Chat** page, then come back here.")
    st.stop()


def _turn_no(t) -> int | None:
    """The log's turn number (the user message is stamped before the turn is counted: take the max)."""
    return max((e.turn for e in t.events if e.turn is not None), default=None)


def _turn_label(i: int) -> str:
    t = turns[i]
    text = t.user_message.content
    text = text if len(text) <= 60 else text[:59] + "…"
    no = _turn_no(t)
    return f"{'turn ' + str(no) if no is not None else 'turn'} · {t.user_message.created_at:%m-%d %H:%M:%S} · “{text}”"


pick = st.selectbox(
    "Turn", list(range(len(turns))), index=len(turns) - 1, format_func=_turn_label, key="pr_turn",
    help=f"The turns of {lab.user_id} · {lab.session_id} sent in this lab session, newest last",
)
turn = turns[pick]

prompt = turn.prompt
cached = sum(p.tokens for p in prompt.parts if p.cacheable)
c1, c2, c3, c4 = st.columns(4)
c1.metric("Total tokens", prompt.total_tokens)
c2.metric("Stable prefix (cacheable)", cached)
c3.metric("Injected memory", prompt.payload_tokens, help="profile + records")
c4.metric("Records injected", len(prompt.record_ids))
st.caption(f"Message #{turn.user_message.id}: “{turn.user_message.content}” · "
           f"{'event #' + str(turn.event_no) + ' fired' if turn.event_fired else 'no event'}")

frame = pd.DataFrame([
    {"part": p.name, "tokens": p.tokens, "kind": "stable prefix (cacheable)" if p.cacheable else "per turn"}
    for p in prompt.parts
])
bar = (
    alt.Chart(frame)
    .mark_bar()
    .encode(
        y=alt.Y("part:N", sort=list(frame["part"]), title=None, axis=alt.Axis(labelOverlap=False)),
        x=alt.X("tokens:Q", title="tokens"),
        color=alt.Color("kind:N", title=None, scale=alt.Scale(domain=["stable prefix (cacheable)", "per turn"])),
        tooltip=["part", "tokens", "kind"],
    )
    .properties(height=max(90, 32 * len(frame)))
)
st.altair_chart(bar, width="stretch")

for part in prompt.parts:
    badge = "stable prefix · cacheable" if part.cacheable else "changes per turn"
    st.markdown(f"**{part.name}** · {part.tokens} tokens · *{badge}*")
    st.code(part.text or "(empty)", language=None, wrap_lines=True)

with st.expander("The messages exactly as sent (role, content)"):
    st.json([dict(m) for m in prompt.messages], expanded=1)

st.markdown("##### Model calls and cost per role (this lab session)")
ledger = lab.engine.ledger.summary()
if ledger:
    st.dataframe(
        pd.DataFrame([
            {"role": role, "calls": int(v["calls"]), "input tokens": int(v["input_tokens"]),
             "output tokens": int(v["output_tokens"]), "cache-hit tokens": int(v["cache_hit_tokens"]),
             "cost": round(v["cost"], 6), "failures": int(v["failures"])}
            for role, v in sorted(ledger.items())
        ]),
        hide_index=True,
        width="stretch",
    )
    st.caption("Scripted models are counted with the approximate token counter and cost nothing; a real model's "
               "calls carry the provider's usage fields and prices.")
