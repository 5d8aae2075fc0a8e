"""memlab lab: the st.navigation entrypoint (`streamlit run lab` runs this file).

Builds the page list, makes sure this browser session has its engine, and shows in the sidebar
what every page shares: which models answer, the virtual clock, the current user and session.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `streamlit run lab` puts lab/, not the repo, on sys.path
    sys.path.insert(0, str(_ROOT))

import streamlit as st  # noqa: E402

from lab import ui  # noqa: E402
from lab.state import get_lab  # noqa: E402

st.set_page_config(page_title="memlab lab", page_icon="🧠", layout="wide")

_PAGES = Path(__file__).resolve().parent / "pages"
pages = {
    "Run": [
        st.Page(_PAGES / "chat.py", title="Chat", icon=":material/chat:", default=True),
        st.Page(_PAGES / "prompt.py", title="What the model saw", icon=":material/description:"),
    ],
    "Inspect": [
        st.Page(_PAGES / "memory.py", title="Memory", icon=":material/database:"),
        st.Page(_PAGES / "timeline.py", title="Memory over time", icon=":material/timeline:"),
        st.Page(_PAGES / "scoring.py", title="Scoring", icon=":material/leaderboard:"),
        st.Page(_PAGES / "curves.py", title="Curves", icon=":material/show_chart:"),
    ],
    "Compare": [
        st.Page(_PAGES / "scenarios.py", title="Scenarios", icon=":material/compare_arrows:"),
        st.Page(_PAGES / "tune.py", title="Tune", icon=":material/tune:"),
    ],
    "Configure": [
        st.Page(_PAGES / "settings.py", title="Settings", icon=":material/settings:"),
    ],
}
page = st.navigation(pages)
lab = get_lab()
ui.sidebar_status(lab)
page.run()
