"""Small rendering helpers the pages share: the sidebar status, the clock panel, formatting.

Rendering only: every number shown comes from the engine.
"""

from __future__ import annotations

import math
import re
from datetime import datetime

import streamlit as st

from engine.core.clock import parse_duration
from engine.core.errors import MemlabError
from lab.state import LabSession

__all__ = ["format_seconds", "parse_seconds", "header", "sidebar_status", "clock_panel", "minilm_embedder", "embedder_for", "when", "age", "FAST_FORWARD"]

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


#: The lab's one set of duration units, largest first: every page shows τ, τ_m and gate times in these.
_UNITS = (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0))
#: What `parse_seconds` reads as each unit (case-insensitive).
_UNIT_WORDS = {
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
}
_PART = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", re.IGNORECASE)


def format_seconds(seconds: float, *, exact: bool = False) -> str:
    """Seconds in the lab's one unit set: 43200 → "12 h", 1800 → "30 min", 259200 → "3 d".

    The largest unit that is at least 1 is used. Shown values keep 3 significant digits
    (90000 → "1.04 d"); `exact=True` is for editable fields: it picks the largest unit whose value
    reads back without loss (90000 → "25 h"), so `parse_seconds(format_seconds(x, exact=True)) == x`.
    """
    s = float(seconds)
    if not math.isfinite(s):
        return str(s)
    if s < 0:
        return "-" + format_seconds(-s, exact=exact)
    for unit, size in _UNITS:
        if s < size and size > 1.0:
            continue
        value = s / size
        if size == 1.0 and exact:
            return f"{s:.6f}".rstrip("0").rstrip(".") + " s"
        if not exact:
            return f"{float(f'{value:.3g}'):g} {unit}"
        text = f"{value:.6g}"
        if math.isclose(float(text) * size, s, rel_tol=1e-12, abs_tol=1e-9):
            return f"{text} {unit}"
    raise AssertionError("unreachable: the seconds unit always matches")


def parse_seconds(text: str | float) -> float:
    """Read a duration as seconds: "12h", "30m", "3d", "90s", "1h30m", "1.5 h", "2 days" or a plain
    number of seconds ("90"). Anything else raises ValueError with a message that says what to write."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        raw = str(text).strip()
        if not raw:
            raise ValueError("empty duration; write e.g. 90s, 30m, 12h or 3d (a plain number is seconds)")
        value, pos, units = 0.0, 0, 0
        while pos < len(raw):
            m = _PART.match(raw, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"can't read {raw!r} as a duration; write e.g. 90s, 30m, 12h or 3d "
                                 "(a plain number is seconds)")
            number, unit = m.group(1), m.group(2).lower()
            if unit and unit not in _UNIT_WORDS:
                raise ValueError(f"unknown unit {m.group(2)!r} in {raw!r}; use s, min (or m), h, d or w")
            if not unit and (units or m.end() < len(raw)):
                raise ValueError(f"can't read {raw!r} as a duration: every part after the first needs a unit "
                                 "(e.g. 1h30m)")
            value += float(number) * (_UNIT_WORDS[unit] if unit else 1.0)
            units += 1
            pos = m.end()
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"duration {text!r} must be a finite, non-negative number of seconds")
    return value


def when(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%a %Y-%m-%d %H:%M:%S %Z")


def age(seconds: float) -> str:
    return format_seconds(max(0.0, seconds))


def stage_times(stages: dict[str, float], *, top: int = 4) -> str:
    """ "4.2 ms (dim 1.1, bm25 0.9, dense 0.7, …)": a measurement's total and its largest stages
    (engine.core.laps; wall time on this machine, so it varies from run to run)."""
    if not stages:
        return "-"
    big = sorted(stages.items(), key=lambda kv: -kv[1])[:top]
    more = ", …" if len(stages) > top else ""
    return f"{sum(stages.values()):.1f} ms ({', '.join(f'{k} {v:.1f}' for k, v in big)}{more})"


def sidebar_status(lab: LabSession) -> None:
    """Model mode, virtual now, user and session: visible on every page."""
    with st.sidebar:
        st.caption("Models")
        st.markdown(f"**{lab.engine.models.label}**")
        st.caption("Virtual clock")
        st.markdown(f"**{when(lab.clock.now())}**")
        st.caption("User · session · preset")
        st.markdown(f"**{lab.user_id}** · **{lab.session_id}** · {lab.engine.config.preset}")


def user_picker(lab: LabSession, store, *, key: str) -> str:
    """A select box of the store's users, the lab's own user first when it has no rows yet."""
    users = store.users()
    if lab.user_id not in users:
        users = [lab.user_id, *users]
    return st.selectbox("User", users, index=users.index(lab.user_id), key=key)


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
    lab.new_session()  # the chat page seeds its session field from the lab
