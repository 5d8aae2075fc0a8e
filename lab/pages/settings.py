"""Settings: preset, embedder, models, database file, and export / import of the whole lab session."""

from __future__ import annotations

import json

from dataclasses import replace

import streamlit as st

from engine.core.config import PRESETS, MemoryConfig
from engine.core.errors import MemlabError
from lab import ui
from lab.state import (
    MAX_IMPORT_BYTES,
    LabImportError,
    export_session,
    get_lab,
    import_session,
    model_mode_label,
    new_lab,
    real_model_configured,
    set_lab,
)

lab = get_lab()
settings = lab.settings

ui.header(
    lab,
    "Settings",
    "How this lab session is built. The **preset** changes the live "
    "config at once and keeps the memory; the **embedder**, **models** and **database** are the "
    "engine's parts, so changing them starts a fresh engine (the clock restarts at its fixed start). "
    "**Export** saves the whole session as one JSON file; **import** replays it into a fresh engine."
)

# -- preset ----------------------------------------------------------------------------------
st.subheader("Preset")
choices = list(PRESETS)
current = lab.engine.config.preset
preset = st.selectbox("Preset", choices, index=choices.index(current) if current in choices else 0,
                      key="set_preset", help="Vocation presets from the first seed, and other published weightings")
if preset != current and st.button(f"Apply preset {preset!r}", key="apply_preset", type="primary"):
    lab.set_config(MemoryConfig.from_preset(preset))
    lab.settings = replace(settings, preset=preset)
    st.rerun()
cfg = lab.engine.config
st.caption(
    f"Live: τ_m {ui.format_seconds(cfg.tau_m)} · c_m {cfg.c_m:g} · τ {ui.format_seconds(cfg.tau)} · c {cfg.c:g} · slice {cfg.slice_value:g} · "
    f"long-term {cfg.long_term_value:g} · trigger {cfg.trigger} ≥ {cfg.trigger_threshold:g} · top-K {cfg.top_k}"
)

# -- engine parts ----------------------------------------------------------------------------
st.subheader("Engine")
if st.session_state.pop("set_confirm_reset", False):  # a fresh engine was built: ask again next time
    st.session_state["set_confirm_fresh"] = False
with st.form("engine_parts"):
    embedder = st.radio(
        "Embedder", ["hash", "minilm"], index=["hash", "minilm"].index(settings.embedder), horizontal=True,
        key="set_embedder",
        format_func=lambda e: {"hash": "hash (instant, lexical stand-in)",
                               "minilm": "all-MiniLM-L6-v2 (real, offline, loads once)"}[e],
    )
    real_ok = real_model_configured()
    mode = st.radio(
        "Models", ["scripted", "real"], index=["scripted", "real"].index(settings.model_mode), horizontal=True,
        key="set_mode", disabled=not real_ok,
        format_func=lambda m: "scripted models (offline stand-ins)" if m == "scripted" else "real model",
        help=None if real_ok else "Set DEEPSEEK_API_KEY (or OPENAI_API_KEY) in the environment to enable real models",
    )
    c1, c2 = st.columns(2)
    model_name = c1.text_input("Model name", value=settings.model_name, key="set_model_name")
    base_url = c2.text_input("Base URL (OpenAI-compatible, optional)", value=settings.base_url, key="set_base_url")
    db_path = st.text_input("Database file", value=settings.db_path, key="set_db",
                            help=":memory: keeps everything in this browser tab; a file path persists it")
    replay = st.checkbox("Replay this session into the new engine (its journal: turns, fast-forwards, edits)",
                         key="set_replay", help="Nothing is discarded: the new engine (in memory) replays every "
                                                "action of this session under the new settings")
    confirmed = st.checkbox("Yes, discard this session: its messages, memory, log and clock go",
                            key="set_confirm_fresh",
                            help="A fresh engine starts empty; export the session first to keep it")
    rebuild = st.form_submit_button("Apply and start a fresh engine")
if rebuild and replay:
    doc = json.loads(export_session(lab))
    doc["settings"].update(embedder=embedder, model_mode=mode if real_ok else "scripted",
                           model_name=model_name.strip() or settings.model_name, base_url=base_url.strip())
    try:
        with st.spinner("Replaying the session into the new engine…"):
            replayed = import_session(json.dumps(doc), embedder_for=ui.embedder_for)
    except (LabImportError, MemlabError, OSError, ImportError) as exc:
        st.error(f"Could not replay the session into the new engine: {exc}")
    else:
        replayed.notice = (f"New engine ({embedder} embedder, {model_mode_label(replayed.settings)}, in memory) "
                           f"with this session replayed: {len(lab.journal)} actions.")
        set_lab(replayed)
        st.rerun()
elif rebuild and not confirmed:
    st.warning("Nothing changed: tick **Yes, discard this session** to start a fresh engine "
               "(export the session below first to keep it).")
elif rebuild and confirmed:
    wanted = replace(settings, embedder=embedder, model_mode=mode if real_ok else "scripted",
                     model_name=model_name.strip() or settings.model_name, base_url=base_url.strip(),
                     db_path=db_path.strip() or ":memory:")
    try:
        fresh = new_lab(wanted, config=lab.engine.config, embedder=ui.embedder_for(wanted.embedder))
    except (MemlabError, OSError, ImportError) as exc:
        st.error(f"Could not build the engine: {exc}")
    else:
        fresh.user_id, fresh.session_id = lab.user_id, lab.session_id
        fresh.notice = f"Fresh engine: {wanted.embedder} embedder, {model_mode_label(wanted)}, {wanted.db_path}."
        set_lab(fresh)
        st.session_state["set_confirm_reset"] = True
        st.rerun()
if not real_model_configured():
    st.caption("Real models are off: no DEEPSEEK_API_KEY or OPENAI_API_KEY in the environment.")

# -- export / import ---------------------------------------------------------------------------
st.subheader("Export / import")
st.caption(
    "The file holds the settings, the starting config and clock, every action taken (turns, "
    "fast-forwards, config edits, forgets) and a snapshot of the store. Import validates it, "
    "builds a fresh in-memory engine and replays the actions; nothing in the file is executed."
)
st.download_button(
    "Export this session (JSON)", data=lambda: export_session(lab), file_name="memlab-lab-session.json",
    mime="application/json", key="export", icon=":material/download:", on_click="ignore",
)
uploaded = st.file_uploader("Import a session file", type=["json"], key="import_file",
                            max_upload_size=MAX_IMPORT_BYTES // 1_000_000)
if uploaded is not None and st.button("Import and replace this session", key="do_import", type="primary"):
    try:
        with st.spinner("Replaying the session…"):
            imported = import_session(uploaded.getvalue(), embedder_for=ui.embedder_for)
    except LabImportError as exc:
        st.error(f"Import failed: {exc}")
    except MemlabError as exc:
        st.error(f"Import failed while rebuilding the engine: {exc}")
    else:
        set_lab(imported)
        st.rerun()
