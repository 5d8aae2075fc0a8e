"""Small rendering helpers the pages share: the sidebar status, the clock panel, formatting.

Rendering only: every number shown comes from the engine.
"""

from __future__ import annotations

from datetime import datetime

import streamlit as st

from engine.core.clock import format_duration, parse_duration
from engine.core.errors import MemlabError
from lab.state import LabSession

__all__ = ["header", "sidebar_status", "clock_panel", "minilm_embedder", "embedder_for", "when", "age", "FAST_FORWARD"]

#: The fast-forward buttons of the clock panel: label → duration string for engine.clock.
FAST_FORWARD = {"+1 min": "1min", "+1 h": "1h", "+1 day": "1d", "+1 week": "1w"}


@st.cache_resource(show_spinner="Loading all-MiniLM-L6-v2 (once per server)…")
def minilm_embedder():
    """The real MiniLM embedder, loaded once and shared by every browser session (read-only)."""
    from engine.roles.embeddings import MiniLMEmbeddings

    MiniLMEmbeddings.load()
    return MiniLMEmbeddings()


def embedder_for(name: str):
    """The shared MiniLM for "minilm"; None (the engine builds its own) for "hash"."""
    return minilm_embedder() if name == "minilm" else None


def when(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%a %Y-%m-%d %H:%M:%S %Z")


def age(seconds: float) -> str:
    return format_duration(max(0.0, seconds))


def sidebar_status(lab: LabSession) -> None:
    """Model mode, virtual now, user and session: visible on every page."""
    with st.sidebar:
        st.caption("Models")
        st.markdown(f"**{lab.engine.models.label}**")
        st.caption("Virtual clock")
        st.markdown(f"**{when(lab.clock.now())}**")
        st.caption("User · session · preset")
        st.markdown(f"**{lab.user_id}** · **{lab.session_id}** · {lab.engine.config.preset}")


def header(lab: LabSession, title: str, what: str) -> None:
    """Title, the always-visible status line (models, virtual now, user), the page's explanation,
    and any one-shot notice (e.g. after an import)."""
    st.title(title)
    mode = lab.engine.models
    st.markdown(
        f":{'gray' if mode.mode == 'scripted' else 'green'}-badge[:material/smart_toy: {mode.label}] "
        f":blue-badge[:material/schedule: {when(lab.clock.now())}] "
        f":violet-badge[:material/person: {lab.user_id} · {lab.session_id}] "
        f":orange-badge[:material/tune: {lab.engine.config.preset}]"
    )
    st.caption(f"**What am I looking at?** {what}")
    if lab.notice:
        st.info(lab.notice)
        lab.notice = None


def clock_panel(lab: LabSession) -> None:
    """Virtual now, fast-forward buttons, a custom step and "new session" (callbacks: state first)."""
    st.markdown(f"**Virtual now:** {when(lab.clock.now())}")
    cols = st.columns(len(FAST_FORWARD))
    for col, (label, step) in zip(cols, FAST_FORWARD.items(), strict=True):
        col.button(label, key=f"ff_{step}", width="stretch", on_click=lab.fast_forward, args=(step,))
    with st.form("ff_custom", border=False):
        c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
        c1.text_input("Custom step", placeholder="e.g. 35s, 10min, 2h, 3d, 1h30m", key="ff_text")
        c2.form_submit_button("Fast-forward", width="stretch", on_click=_custom_step, args=(lab,))
    if err := st.session_state.pop("ff_error", None):
        st.error(err)
    st.button("New session", key="new_session", icon=":material/add:", on_click=_new_session, args=(lab,),
              help="Same user, next session id: the working memory starts empty, long-term memory stays")


def _custom_step(lab: LabSession) -> None:
    try:
        step = parse_duration(st.session_state.get("ff_text", ""))
    except MemlabError as exc:
        st.session_state["ff_error"] = str(exc)
        return
    lab.fast_forward(step)


def _new_session(lab: LabSession) -> None:
    st.session_state["chat_session"] = lab.new_session()
