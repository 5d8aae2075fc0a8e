"""Memory: every record of the user with its dimensions and live decay, history, and the profile."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.core.errors import MemlabError
from engine.core.forgetting import decay, maturity
from lab import ui
from lab.memory_view import (
    COLUMNS,
    conflicts,
    record_rows,
    struck_line,
    update_decisions,
)
from lab.state import get_lab

lab = get_lab()
engine = lab.engine
store = engine.store
now = lab.clock.now()

ui.header(
    lab,
    "Memory",
    "What the engine has learned about one user. **Records** are atomic "
    "memories extracted at events, with their dimensions (type, tags, theme, time, place, keywords); "
    "**T** is how much of each survives right now (decay since last reinforcement) and **M** its "
    "maturity (past the induction gate it feeds the profile). An update never deletes: a superseded "
    "record stays, struck through, pointing to its successor. The **profile** is the long-term summary, "
    "with what each induction changed."
)

user_id = ui.user_picker(lab, store, key="mem_user")

records = store.records(user_id, include_invalid=True)
if not records:
    st.info(
        "No records yet. Chat a few turns on the **Chat** page, then fast-forward **+1 h** to see the "
        "slice gate open: the next turn extracts records from the matured messages."
    )
else:
    cfg = engine.config
    rows = record_rows(
        records, now=now,
        t_now=lambda r: decay((now - r.reinforced_at).total_seconds(), tau=cfg.tau, c=cfg.c)
        if cfg.decay_enabled else 1.0,
        # the induction gate's age: since the source was said (valid_from), not since extraction
        m_now=lambda r: maturity((now - (r.valid_from or r.created_at)).total_seconds(), tau_m=cfg.tau_m, c_m=cfg.c_m),
    )
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    # successor ids stay numbers (nullable), shown as "#id", and an empty cell is blank, never "None"
    frame["superseded by"] = pd.array([v if v != "" else None for v in frame["superseded by"]], dtype="Int64")

    f1, f2, f3, f4 = st.columns([2, 2, 2, 3])
    show = f1.segmented_control("Show", ["current", "history", "all"], default="current", key="mem_show")
    types = f2.multiselect("Type", sorted(frame["type"].unique()), key="mem_types")
    tags = f3.multiselect("Tag", sorted({t for r in records for t in r.tags}), key="mem_tags")
    text = f4.text_input("Contains", key="mem_text", placeholder="filter by words in the content")
    view = frame
    if show == "current":
        view = view[view["current"]]
    elif show == "history":
        view = view[~view["current"]]
    if types:
        view = view[view["type"].isin(types)]
    if tags:
        view = view[view["tags"].apply(lambda s: any(t in s.split(", ") for t in tags))]
    if text:
        view = view[view["content"].str.contains(text, case=False, regex=False)]
    st.markdown(f"**{len(view)}** of {len(frame)} records ({int(frame['current'].sum())} current)")
    struck = view.style.apply(
        lambda row: ["" if row["current"] else "text-decoration: line-through; color: gray"] * len(row), axis=1
    ).format({"superseded by": lambda v: "" if pd.isna(v) else f"#{int(v)}"}, na_rep="")
    st.dataframe(
        struck, hide_index=True, width="stretch",
        column_config={
            "T now": st.column_config.ProgressColumn("T now", min_value=0.0, max_value=1.0, format="%.3f"),
            "M now": st.column_config.ProgressColumn("M now", min_value=0.0, max_value=1.0, format="%.3f"),
            "current": st.column_config.CheckboxColumn("current"),
        },
    )
    by_id = {r.id: r for r in records}
    for c in conflicts(records):
        st.warning(c.line, icon=":material/warning:")
    superseded = [r for r in records if not r.is_current]
    if superseded:
        with st.expander(f"History: {len(superseded)} superseded record(s)"):
            st.markdown("\n".join(f"- {struck_line(r, by_id, when=ui.when)}" for r in superseded))
    decisions = update_decisions(engine.events(user_id=user_id, kind="update"),
                                 {r.id: r.content for r in records})
    if decisions:
        with st.expander(f"updates ({len(decisions)} decision(s))"):
            st.caption("Each new record of an event was compared with the current records sharing its subject's "
                       "attribute or its keywords; the closest one reached the consolidator, which decided.")
            for d in decisions:
                st.markdown(f"- event {d.event_no} at {ui.when(d.at)}: {d.line}")

# -- correct by hand -------------------------------------------------------------------------
st.subheader("Correct by hand")
st.caption(
    "Edit, pin or invalidate one record. An edit writes a new, re-embedded version that supersedes "
    "the old one (nothing is deleted); a pinned record holds a seat in every retrieval, like a safety "
    "record; invalidating retracts it from now on. Each change is a `user_edit` event, and **Undo "
    "last edit** reverses the newest one (again for the one before)."
)


def _apply(action: str, record_id: int | None = None, content: str | None = None, done: str = "") -> None:
    try:
        lab.edit_memory(action, user_id, record_id, content)
    except MemlabError as exc:
        st.error(str(exc))
        return
    lab.notice = done
    st.rerun()


current = [r for r in records if r.is_current]
if current:
    by_current = {r.id: r for r in current}
    pick = st.selectbox("Record", list(by_current), key="mem_edit_pick",
                        format_func=lambda rid: f"#{rid} {by_current[rid].content}")
    chosen = by_current[pick]
    new_text = st.text_area("Content", value=chosen.content, key=f"mem_edit_text_{chosen.id}")
    b1, b2, b3 = st.columns(3)
    if b1.button("Save edit", key="mem_edit_save", icon=":material/edit:"):
        _apply("edit", chosen.id, new_text, f"Record #{chosen.id} edited: a new version supersedes it.")
    pinned = "pinned" in chosen.tags
    if b2.button("Unpin" if pinned else "Pin", key="mem_pin", icon=":material/push_pin:"):
        _apply("unpin" if pinned else "pin", chosen.id, done=f"Record #{chosen.id} {'un' if pinned else ''}pinned.")
    if b3.button("Invalidate", key="mem_invalidate", icon=":material/block:"):
        _apply("invalidate", chosen.id, done=f"Record #{chosen.id} invalidated.")
elif records:
    st.info("No current record to correct; undo the last edit to bring one back.")
if engine.events(user_id=user_id, kind="user_edit", limit=1) and st.button(
        "Undo last edit", key="mem_undo", icon=":material/undo:"):
    _apply("undo", done="Undid the last hand edit.")

# -- profile --------------------------------------------------------------------------------
st.subheader("Profile")
profile = store.get_profile(user_id)
if profile.is_empty():
    st.info(
        "The profile is empty. It is induced from records whose maturity passed the induction gate "
        f"({ui.age(engine.config.induction_gate_seconds)} with the live config): chat, fast-forward, chat again."
    )
else:
    st.caption(f"version {profile.version} · updated {ui.when(profile.updated_at)}")
    for key, values in profile.fields.items():
        if values:
            st.markdown(f"**{key}**: " + "; ".join(values))
history = store.profile_history(user_id)
if history:
    with st.expander(f"Induction history ({len(history)})"):
        for entry in reversed(history):
            st.markdown(f"**v{entry.version}** at {ui.when(entry.at)} from records {list(entry.record_ids)}")
            for key, change in entry.diff().items():
                for value in change["added"]:
                    st.markdown(f"- {key}: :green[+ {value}]")
                for value in change["removed"]:
                    st.markdown(f"- {key}: :red[− ~~{value}~~]")

# -- forget ----------------------------------------------------------------------------------
st.subheader("Forget this user")
st.caption("Erases every row of the user: messages, records, profile, cursors, events. Other users are untouched.")
confirm = st.checkbox(f"Yes, erase everything about {user_id!r}", key="mem_forget_confirm")
if st.button("Forget this user", key="mem_forget", type="primary", disabled=not confirm, icon=":material/delete:"):
    removed = lab.forget_user(user_id)
    st.session_state.pop("mem_forget_confirm", None)
    lab.notice = f"Forgot {user_id}: " + ", ".join(f"{k} {v}" for k, v in removed.items() if v)
    st.rerun()
