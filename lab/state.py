"""The lab's per-browser-session state: one engine with its virtual clock, the current user and
session, the last turn, and a journal of what was done.

Streamlit reruns a page's script on every interaction, so mutable per-user objects (engine,
clock) live in `st.session_state`, built once per browser session. Only the MiniLM model,
immutable and slow to load, is shared across sessions (`st.cache_resource`, in lab/ui.py).

Export/import of a whole lab session is a journal, not a database dump: the settings, the
starting config and clock, and every action taken (turns, clock steps, config edits, hand edits
of memory, forgets), plus a snapshot of the store for reading and checking. Import validates the file (pydantic, no
pickle, nothing executed), rebuilds a fresh engine and replays the journal through the public
facade; with scripted models the replay is deterministic, and the snapshot confirms it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.core.clock import VirtualClock, parse_datetime, parse_duration
from engine.core.config import DEFAULT_PRESET, MemoryConfig
from engine.core.errors import ConfigError, MemlabError

__all__ = [
    "LAB_START",
    "LabSettings",
    "LabSession",
    "LabImportError",
    "get_lab",
    "set_lab",
    "new_lab",
    "build_engine",
    "real_model_configured",
    "model_mode_label",
    "export_session",
    "import_session",
    "store_snapshot",
    "MAX_IMPORT_BYTES",
]

#: The virtual clock of a fresh lab session starts here (a Monday morning, fixed, so runs repeat).
LAB_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
EXPORT_FORMAT = "memlab-lab-session"
EXPORT_VERSION = 1
MAX_IMPORT_BYTES = 20_000_000
MAX_JOURNAL = 20_000
#: Past chat turns kept in memory for the "What the model saw" turn picker (newest kept).
MAX_TURNS_KEPT = 200
STATE_KEY = "lab"
SCRIPTED_LABEL = "scripted models (offline stand-ins)"


@dataclass(frozen=True, kw_only=True, slots=True)
class LabSettings:
    """What the Settings page chooses; changing any of these rebuilds the engine."""

    preset: str = DEFAULT_PRESET
    embedder: Literal["hash", "minilm"] = "hash"
    model_mode: Literal["scripted", "real"] = "scripted"
    model_name: str = "deepseek-chat"
    base_url: str = ""
    db_path: str = ":memory:"


@dataclass(kw_only=True)
class LabSession:
    """Everything one browser tab works with. Mutable on purpose: it is the session's state."""

    engine: Any  # engine.pipeline.MemoryEngine
    settings: LabSettings
    start: datetime
    initial_config: dict[str, Any]
    user_id: str = "alice"
    session_id: str = "s1"
    last_turn: Any = None  # engine.pipeline.TurnResult of the latest chat turn
    turns: list[Any] = field(default_factory=list)  # recent TurnResults, oldest first (bounded)
    journal: list[dict[str, Any]] = field(default_factory=list)
    notice: str | None = None  # one-shot message for the next render (e.g. after an import)

    @property
    def clock(self) -> VirtualClock:
        return self.engine.clock

    # -- actions (each one journalled so an export can replay it) ------------------------
    def chat(self, text: str):
        """One full turn of the current user in the current session."""
        result = self.engine.turn(self.user_id, self.session_id, text)
        self.journal.append({"op": "turn", "user_id": self.user_id, "session_id": self.session_id, "text": text})
        self.last_turn = result
        self.turns.append(result)
        del self.turns[:-MAX_TURNS_KEPT]
        return result

    def session_turns(self, user_id: str | None = None, session_id: str | None = None) -> list[Any]:
        """The kept turns of a user's session (the current ones by default), oldest first."""
        uid, sid = user_id or self.user_id, session_id or self.session_id
        return [t for t in self.turns if (t.user_message.user_id, t.user_message.session_id) == (uid, sid)]

    def fast_forward(self, duration: str | float | timedelta) -> datetime:
        """Move the virtual clock forward (e.g. "1h", "3d", 90 seconds)."""
        step = parse_duration(duration)
        now = self.clock.advance(step)
        self.journal.append({"op": "advance", "seconds": step.total_seconds()})
        return now

    def set_config(self, config: MemoryConfig) -> None:
        self.engine.set_config(config)
        self.journal.append({"op": "config", "config": config.to_dict()})

    def switch(self, *, user_id: str | None = None, session_id: str | None = None) -> None:
        if user_id is not None:
            self.user_id = user_id.strip() or self.user_id
        if session_id is not None:
            self.session_id = session_id.strip() or self.session_id
        self.last_turn = None

    def new_session(self) -> str:
        """Start the next session of the current user (s1 → s2 …, skipping used names)."""
        used = set(self.engine.store.sessions(self.user_id)) | {self.session_id}
        n = 1
        while f"s{n}" in used:
            n += 1
        self.switch(session_id=f"s{n}")
        return self.session_id

    def edit_memory(self, action: str, user_id: str, record_id: int | None = None, content: str | None = None):
        """A hand edit of memory (engine.memory.editing): "edit" (with `content`), "pin", "unpin",
        "invalidate" or "undo" (the user's last edit; no record id). Returns what the engine returns."""
        engine = self.engine
        if action == "edit":
            out = engine.edit_record(user_id, record_id, content or "")
        elif action in ("pin", "unpin", "invalidate"):
            out = getattr(engine, f"{action}_record")(user_id, record_id)
        elif action == "undo":
            out = engine.undo_last_edit(user_id)
        else:
            raise ConfigError(f"unknown memory edit {action!r}; use edit, pin, unpin, invalidate or undo")
        entry: dict[str, Any] = {"op": "edit", "action": action, "user_id": user_id}
        if record_id is not None:
            entry["record_id"] = int(record_id)
        if action == "edit":
            entry["content"] = content or ""
        self.journal.append(entry)
        return out

    def forget_user(self, user_id: str) -> dict[str, int]:
        removed = self.engine.forget_user(user_id)
        self.journal.append({"op": "forget", "user_id": user_id})
        if user_id == self.user_id:
            self.last_turn = None
        self.turns = [t for t in self.turns if t.user_message.user_id != user_id]
        return removed


def real_model_configured() -> bool:
    """A real model may be chosen only when a provider key is present in the environment."""
    return any(os.environ.get(k) for k in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY"))


def model_mode_label(settings: LabSettings) -> str:
    return SCRIPTED_LABEL if settings.model_mode == "scripted" else f"real: {settings.model_name}"


def build_engine(
    settings: LabSettings,
    *,
    config: MemoryConfig | None = None,
    start: datetime = LAB_START,
    embedder: Any = None,
):
    """A fresh engine for these settings (store, clock, models, embedder)."""
    from engine.memory.engine import MemoryEngine
    from engine.roles.bundle import Models
    from engine.roles.embeddings import embedder_name, make_embedder
    from engine.stores.base import open_store

    embedder = embedder if embedder is not None else make_embedder(settings.embedder)
    store = open_store(settings.db_path, dim=int(getattr(embedder, "dim", 384)), embedder_name=embedder_name(embedder))
    models = _real_models(settings) if settings.model_mode == "real" else Models.scripted()
    cfg = config if config is not None else MemoryConfig.from_preset(settings.preset)
    return MemoryEngine(cfg, store=store, clock=VirtualClock(start), models=models, embedder=embedder)


def _real_models(settings: LabSettings):
    """Real roles on a LangChain chat model (engine.llm), only when a provider key is set."""
    from engine.roles.bundle import Models
    from engine.roles.llm import ModelSettings

    if not real_model_configured():
        raise ConfigError(
            "real models need DEEPSEEK_API_KEY or OPENAI_API_KEY in the environment; set one or stay scripted"
        )
    overrides: dict[str, Any] = {"model": settings.model_name}
    if settings.base_url:
        overrides["base_url"] = settings.base_url
    return Models.real(ModelSettings.from_env(**overrides))


def new_lab(settings: LabSettings | None = None, *, config: MemoryConfig | None = None, embedder: Any = None,
            start: datetime = LAB_START) -> LabSession:
    settings = settings or LabSettings()
    engine = build_engine(settings, config=config, start=start, embedder=embedder)
    return LabSession(engine=engine, settings=settings, start=start, initial_config=engine.config.to_dict())


def get_lab() -> LabSession:
    """This browser session's lab, created with the defaults on first use."""
    import streamlit as st

    if STATE_KEY not in st.session_state:
        st.session_state[STATE_KEY] = new_lab()
    return st.session_state[STATE_KEY]


def set_lab(lab: LabSession) -> None:
    import streamlit as st

    old = st.session_state.get(STATE_KEY)
    st.session_state[STATE_KEY] = lab
    if old is not None and old is not lab:
        _close(old)


def _close(lab: LabSession) -> None:
    try:
        lab.engine.store.close()
    except Exception:  # noqa: BLE001 - closing a discarded store must never break the page
        pass


# -- export / import ------------------------------------------------------------------------


class LabImportError(MemlabError, ValueError):
    """An imported lab session file cannot be used; the message says why and what to do."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Turn(_Strict):
    op: Literal["turn"]
    user_id: str = Field(min_length=1, max_length=200)
    session_id: str = Field(min_length=1, max_length=200)
    text: str = Field(max_length=100_000)


class _Advance(_Strict):
    op: Literal["advance"]
    seconds: float = Field(ge=0, le=100 * 365 * 86400)


class _Config(_Strict):
    op: Literal["config"]
    config: dict[str, Any]


class _Forget(_Strict):
    op: Literal["forget"]
    user_id: str = Field(min_length=1, max_length=200)


class _Edit(_Strict):
    op: Literal["edit"]
    action: Literal["edit", "pin", "unpin", "invalidate", "undo"]
    user_id: str = Field(min_length=1, max_length=200)
    record_id: int | None = None
    content: str | None = Field(default=None, max_length=100_000)


_Action = Annotated[_Turn | _Advance | _Config | _Forget | _Edit, Field(discriminator="op")]


class _SettingsIO(_Strict):
    preset: str = DEFAULT_PRESET
    embedder: Literal["hash", "minilm"] = "hash"
    model_mode: Literal["scripted", "real"] = "scripted"
    model_name: str = "deepseek-chat"
    base_url: str = ""
    db_path: str = ":memory:"


class _Current(_Strict):
    user_id: str = Field(min_length=1, max_length=200)
    session_id: str = Field(min_length=1, max_length=200)


class _ExportFile(_Strict):
    format: Literal["memlab-lab-session"]
    version: Literal[1]
    exported_at: str
    settings: _SettingsIO
    start: str
    initial_config: dict[str, Any]
    config: dict[str, Any]
    clock: str
    current: _Current
    journal: list[_Action] = Field(max_length=MAX_JOURNAL)
    snapshot: dict[str, Any] = Field(default_factory=dict)


def store_snapshot(engine) -> dict[str, Any]:
    """The store's contents per user (messages, records incl. superseded, profile and history),
    and its event log, as JSON-ready dicts. Used for export and to check an import."""
    store = engine.store
    users: dict[str, Any] = {}
    for uid in store.users():
        users[uid] = {
            "messages": [m.to_dict() for m in store.messages(uid)],
            "records": [r.to_dict() for r in store.records(uid, include_invalid=True)],
            "profile": store.get_profile(uid).to_dict(),
            "profile_history": [h.to_dict() for h in store.profile_history(uid)],
        }
    events = [e.to_dict() for e in store.events()]
    return {"users": users, "events": events}


def _comparable(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The parts of a snapshot a faithful replay must reproduce exactly."""
    return {
        uid: {
            "messages": [(m["role"], m["session_id"], m["content"], m["created_at"]) for m in u["messages"]],
            "records": [(r["content"], r["memory_type"], r["invalid_at"]) for r in u["records"]],
            "profile": u["profile"]["fields"],
        }
        for uid, u in snapshot.get("users", {}).items()
    }


def export_session(lab: LabSession) -> str:
    """The whole lab session as one JSON document (see the module docstring)."""
    doc = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": lab.clock.now().isoformat(),
        "settings": {
            "preset": lab.settings.preset,
            "embedder": lab.settings.embedder,
            "model_mode": lab.settings.model_mode,
            "model_name": lab.settings.model_name,
            "base_url": lab.settings.base_url,
            "db_path": lab.settings.db_path,
        },
        "start": lab.start.isoformat(),
        "initial_config": lab.initial_config,
        "config": lab.engine.config.to_dict(),
        "clock": lab.clock.now().isoformat(),
        "current": {"user_id": lab.user_id, "session_id": lab.session_id},
        "journal": lab.journal,
        "snapshot": store_snapshot(lab.engine),
    }
    return json.dumps(doc, ensure_ascii=False, indent=1, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"cannot export a {type(value).__name__}")


def import_session(data: str | bytes, *, embedder_for: Callable[[str], Any] | None = None) -> LabSession:
    """Rebuild a lab session from an exported file; raises LabImportError with the reason.

    `embedder_for(name)` supplies a shared embedder (the lab's cached MiniLM); None builds one.
    """
    if isinstance(data, bytes):
        if len(data) > MAX_IMPORT_BYTES:
            raise LabImportError(f"the file is {len(data):,} bytes; the limit is {MAX_IMPORT_BYTES:,}")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise LabImportError("the file is not UTF-8 text; export a session from the lab and import that") from None
    if len(data) > MAX_IMPORT_BYTES:
        raise LabImportError(f"the file is {len(data):,} characters; the limit is {MAX_IMPORT_BYTES:,}")
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise LabImportError(f"the file is not valid JSON ({exc}); export a session from the lab") from None
    if not isinstance(raw, dict) or raw.get("format") != EXPORT_FORMAT:
        raise LabImportError(f"this is not a memlab lab session (expected \"format\": \"{EXPORT_FORMAT}\")")
    try:
        doc = _ExportFile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise LabImportError(f"the session file is malformed: {problems}") from None
    try:
        start = parse_datetime(doc.start, what="start")
        end = parse_datetime(doc.clock, what="clock")
        settings = LabSettings(**{**doc.settings.model_dump(), "db_path": ":memory:"})
        if settings.model_mode == "real" and not real_model_configured():
            settings = replace(settings, model_mode="scripted")
        embedder = embedder_for(settings.embedder) if embedder_for else None
        lab = new_lab(settings, config=MemoryConfig.from_dict(doc.initial_config), embedder=embedder, start=start)
        for action in doc.journal:
            if isinstance(action, _Turn):
                lab.user_id, lab.session_id = action.user_id, action.session_id
                lab.chat(action.text)
            elif isinstance(action, _Advance):
                lab.fast_forward(timedelta(seconds=action.seconds))
            elif isinstance(action, _Config):
                lab.set_config(MemoryConfig.from_dict(action.config))
            elif isinstance(action, _Edit):
                lab.edit_memory(action.action, action.user_id, action.record_id, action.content)
            else:
                lab.forget_user(action.user_id)
        final = MemoryConfig.from_dict(doc.config)
        if final.to_dict() != lab.engine.config.to_dict():
            lab.set_config(final)
        if end > lab.clock.now():
            lab.fast_forward(end - lab.clock.now())
    except LabImportError:
        raise
    except (MemlabError, ValueError, TypeError, KeyError) as exc:
        raise LabImportError(f"the session could not be replayed: {exc}") from None
    lab.user_id, lab.session_id = doc.current.user_id, doc.current.session_id
    if lab.last_turn is not None and (lab.user_id, lab.session_id) != _last_turn_key(doc.journal):
        lab.last_turn = None
    replayed = _comparable(store_snapshot(lab.engine))
    if doc.snapshot and replayed != _comparable(doc.snapshot):
        lab.notice = (
            "Imported, but the replay differs from the exported snapshot (a real model answers "
            "differently each time, or the engine changed since the export)."
        )
    else:
        lab.notice = f"Imported {len(doc.journal)} actions; the store matches the exported snapshot."
    return lab


def _last_turn_key(journal: list[Any]) -> tuple[str, str] | None:
    for action in reversed(journal):
        if isinstance(action, _Turn):
            return action.user_id, action.session_id
    return None
