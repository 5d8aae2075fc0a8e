"""Chat: talk as a user in a session under the virtual clock, and watch the memory engine work."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.core.errors import MemlabError
from engine.core.records import EVENT_KINDS
from engine.core.text import keywords as text_keywords
from lab import ui
from lab.event_lines import compacted_caption, describe, group_by_turn
from lab.state import get_lab
from lab.turn_trace import MISSED_CAPTION, Trace, missed_words, traces

lab = get_lab()
engine = lab.engine


def _send() -> None:
    text = (st.session_state.get("chat_text") or "").strip()
    if not text:
        return
    try:
        lab.chat(text)
    except MemlabError as exc:
        st.session_state["chat_error"] = str(exc)


def _switch() -> None:
    lab.switch(user_id=st.session_state.get("chat_user", ""), session_id=st.session_state.get("chat_session", ""))


ui.header(
    lab,
    "Chat",
    "A conversation with the memory engine under a virtual clock. "
    "Each message is stamped with the clock's time. When the oldest unprocessed message is old "
    "enough (the *slice gate*) and the trigger fires, an **event** extracts memory records; every "
    "turn retrieves, ranks and injects the best records into the prompt. Use the clock buttons to "
    "let time pass; watch the working memory mature and the timeline fill."
)

# The switch form's fields show the current user and session. They are seeded through Session State
# only (no value= as well: Streamlit warns when a keyed widget gets both), and only when they differ,
# so a rerun never overwrites what is being typed.
for _key, _value in (("chat_user", lab.user_id), ("chat_session", lab.session_id)):
    if st.session_state.get(_key) != _value:
        st.session_state[_key] = _value

with st.expander(f"User **{lab.user_id}**, session **{lab.session_id}** (change)", expanded=False):
    with st.form("switch_form", border=False):
        c1, c2, c3 = st.columns([2, 2, 1], vertical_alignment="bottom")
        c1.text_input("User", key="chat_user")
        c2.text_input("Session", key="chat_session")
        c3.form_submit_button("Switch", on_click=_switch)
    known = {u: engine.store.sessions(u) for u in engine.store.users()}
    if known:
        st.caption("Known: " + "; ".join(f"{u} ({', '.join(s)})" for u, s in known.items()))

def _texts(ids):
    return {r.id: r.content for r in engine.store.get_records(lab.user_id, list(ids))}


def _trace(t: Trace) -> None:
    """One reply's memory trace: the gate when an event fired, the injected records, the nearest left out."""
    if t.event_fired:
        g = t.gate or {}
        st.markdown(
            f"**Event #{t.event_no} fired** · maturity {g.get('maturity', 0):.2f} of {g.get('slice_value', 0):g} · "
            f"trigger {g.get('trigger', '')} {g.get('trigger_value', 0):g} / {g.get('trigger_threshold', 0):g} · "
            f"idle gap {'open' if g.get('idle_open') else 'closed'} · {len(t.added)} record(s) added"
        )
    else:
        st.caption(f"Turn {t.turn}: no event (the gate stayed closed).")
    if t.injected:
        st.markdown("**Injected**")
        for seat in t.injected:
            score = f" · S {seat.S:.3f}" if seat.S is not None else ""
            used = " · :green[reinforced: the reply used it]" if seat.record_id in t.reinforced else ""
            st.markdown(f"- #{seat.record_id} {seat.text} — *{seat.why}*{score}{used}")
    else:
        st.caption("No record injected." if t.retrieved else "No retrieval this turn and nothing kept.")
    if t.left_out is not None:
        lo = t.left_out
        st.markdown(f"**Nearest left out:** #{lo.record_id} {lo.text} — {lo.verdict}, *{lo.why}* · S {lo.S:.3f}")
    if t.compacted is not None:
        st.caption(compacted_caption(t.compacted))


session_events = engine.store.events(user_id=lab.user_id, session_id=lab.session_id)
reply_traces = traces(session_events, scores=engine.store.scores, texts=_texts)

chat_col, side_col = st.columns([3, 2], gap="large")

with chat_col:
    messages = engine.store.messages(lab.user_id, session_id=lab.session_id)
    box = st.container(height=520, border=True, autoscroll=True)
    with box:
        if not messages:
            st.caption(
                "No messages in this session yet. Tell the assistant something about yourself "
                "(\"I'm Alice, I live in Lisbon, I prefer window seats\"), then fast-forward the clock."
            )
        question = ""
        for m in messages:
            if m.role == "user":
                question = m.content
            with st.chat_message("user" if m.role == "user" else "assistant"):
                st.markdown(m.content)
                st.caption(f"#{m.id} · {ui.when(m.created_at)}")
                if m.role == "assistant" and (tr := reply_traces.get(m.id)) is not None:
                    if missed := missed_words(m.content, tr.keywords or text_keywords(question),
                                              [seat.text for seat in tr.injected]):
                        caption = MISSED_CAPTION if engine.models.mode == "scripted" else \
                            MISSED_CAPTION.replace("the offline scripted model", "the model")
                        st.caption(f":orange[{caption}] (the injected records mention: {', '.join(missed)})")
                    n = len(tr.injected)
                    with st.expander(f"memory trace · turn {tr.turn} · {n} record{'s' if n != 1 else ''} injected"
                                     + (f" · event #{tr.event_no}" if tr.event_fired else "")):
                        _trace(tr)
    st.chat_input(f"Message as {lab.user_id}", key="chat_text", on_submit=_send)
    if err := st.session_state.pop("chat_error", None):
        st.error(err)
    last = lab.last_turn
    if last is not None:
        fired = f"event #{last.event_no} fired" if last.event_fired else "no event this turn"
        picked = len(last.retrieval.picked) if last.retrieval else 0
        st.caption(f"Last turn: {fired} · {picked} record(s) injected · prompt {last.prompt.total_tokens} tokens "
                   "(see *What the model saw*)")
        memory = {k: v for k, v in last.stages.items() if k != "chat"}
        st.caption(f"Time on this machine: memory steps {ui.stage_times(memory)}"
                   + (f" · retrieval {ui.stage_times(last.retrieval.stages)}" if last.retrieval else "")
                   + f" · model call {last.stages.get('chat', 0.0):.1f} ms")

with side_col:
    with st.container(border=True):
        st.markdown("##### Clock")
        ui.clock_panel(lab)

    gate = engine.gate_status(lab.user_id, lab.session_id, incoming=True)
    cfg = engine.config
    with st.container(border=True):
        st.markdown("##### Gate")
        g1, g2, g3 = st.columns(3)
        # gate is counted as if the next message arrived now; Pending shows only what was really said
        g1.metric("Pending", len(engine.pending(lab.user_id, lab.session_id)), help="messages not yet extracted")
        g2.metric("Maturity", f"{gate.maturity:.2f}", help=f"opens at slice_value {gate.slice_value:g}")
        g3.metric("Trigger", f"{gate.trigger_value:g} / {gate.trigger_threshold:g}",
                  help=f"{gate.trigger}: opens at {gate.trigger_threshold:g}")
        st.progress(min(1.0, gate.maturity / gate.slice_value) if gate.slice_value else 1.0,
                    text=f"maturity {gate.maturity:.2f} of the slice gate {gate.slice_value:g} "
                         f"(reached at age {ui.age(gate.slice_gate_seconds)})")
        parts = [
            f"maturity {'open' if gate.maturity_open else 'closed'}",
            f"trigger {'open' if gate.trigger_open else 'closed'}",
            f"idle gap {'open' if gate.idle_open else 'closed'}",
        ]
        verdict = ":green[an event fires]" if gate.will_fire else ":gray[no event]"
        st.markdown(f"Your next message: {verdict} — " + " · ".join(parts))
        st.caption("Counted as if your next message arrived now (it is stamped with the virtual clock); "
                   "an idle gap past the slice gate also opens the gate.")

    with st.container(border=True):
        st.markdown("##### Working memory")
        items = engine.working_memory(lab.user_id, lab.session_id)
        if not items:
            st.caption("Empty: no messages in this session yet.")
        else:
            st.dataframe(
                pd.DataFrame([
                    {"#": w.message.id, "role": w.message.role, "age": ui.age(w.age_seconds), "maturity": w.maturity,
                     "state": ("pending · mature" if w.mature else "pending") if w.pending else "kept (extracted)",
                     "message": w.message.content}
                    for w in items
                ]),
                hide_index=True, width="stretch",
                column_config={"maturity": st.column_config.ProgressColumn(
                    "maturity", min_value=0.0, max_value=1.0, format="%.2f",
                    help=f"M(age); the slice gate is {cfg.slice_value:g}")},
            )

st.subheader("Timeline")
st.caption("Every step the engine logged for this user and session, grouped by turn, newest first: one line "
           "per step; open a turn for the raw numbers.")
events = session_events
if not events:
    st.caption("Nothing logged yet.")
quiet = ("stamp", "reply", "extraction")  # extraction: the window and records verbatim (memlab export-extractions)
shown = st.multiselect("Kinds", EVENT_KINDS, default=[k for k in EVENT_KINDS if k not in quiet], key="tl_kinds")
_contents = {r.id: r.content for r in lab.engine.store.records(lab.user_id, include_invalid=True, limit=5000)} if events else {}
for turn, steps in group_by_turn([e for e in events if e.kind in shown])[:30]:
    first = steps[0]
    fired = sorted({e.event_no for e in steps if e.event_no is not None})
    head = f"**turn {turn}** · {first.at:%m-%d %H:%M:%S}" + (f" · event #{', #'.join(map(str, fired))}" if fired else "")
    st.markdown(head)
    st.markdown("\n".join(f"- {':red[' if e.kind == 'error' else ''}{describe(e.kind, e.payload, lambda i: _contents.get(i, '?'))}"
                          f"{']' if e.kind == 'error' else ''}" for e in steps))
    with st.expander(f"turn {turn}: details", expanded=False):
        for e in steps:
            st.caption(f"{e.at:%H:%M:%S} · {e.kind}" + (f" · event #{e.event_no}" if e.event_no is not None else ""))
            st.json(dict(e.payload), expanded=False)
