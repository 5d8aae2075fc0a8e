"""One readable line per logged step, for the Chat page's timeline (no Streamlit here).

`describe(kind, payload, text_of)` says what a step did in words and numbers; `text_of(id)` gives a
record's content so lines name records by what they say, not by id. Unknown kinds fall back to
their payload's keys, so a new event kind still gets a line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["compacted_caption", "describe", "group_by_turn"]

TextOf = Callable[[int], str]


def _names(ids: Sequence[Any], text_of: TextOf, limit: int = 3) -> str:
    ids = list(ids or [])
    if not ids:
        return "none"
    shown = [f"#{i} “{_short(text_of(int(i)))}”" for i in ids[:limit]]
    return ", ".join(shown) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _short(text: str, n: int = 48) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _gate(p: Mapping[str, Any], _: TextOf) -> str:
    opened = [name for name, key in (("maturity", "maturity_open"), ("trigger", "trigger_open"),
                                     ("idle gap", "idle_open")) if p.get(key)]
    state = f"opened by {', '.join(opened)}" if opened else "closed"
    return (f"gate {state}: {p.get('pending', 0)} pending, {p.get('mature', 0)} mature (M {p.get('maturity', 0):.2f} "
            f"vs {p.get('slice_value', 0):g}), trigger {p.get('trigger_value', 0):g}/{p.get('trigger_threshold', 0):g}")


def compacted_caption(summary: Mapping[str, Any]) -> str:
    """What retention left of an older turn (engine.memory.retention), in one sentence."""
    dropped = summary.get("events_dropped") or {}
    steps = ", ".join(f"{k} {v}" for k, v in dropped.items()) or "none"
    live = summary.get("live_window_extractions") or {}
    calls = f"; {live.get('calls', 0)} live-window extractor call(s) kept as counts" if live else ""
    held = f"; held back {len(summary.get('held') or [])}" if summary.get("held") else ""
    return (f"compacted (older than the log's full-row window): steps dropped: {steps}; "
            f"{summary.get('score_rows_dropped', 0)} score rows dropped, the seats and the nearest left out kept"
            f"{held}{calls}")


def _compacted(p: Mapping[str, Any], t: TextOf) -> str:
    r = (p.get("compacted") or {}).get("retrieve") or {}
    picked = [s[0] for s in r.get("seats") or () if isinstance(s, (list, tuple)) and s]
    retrieved = f"retrieved {r.get('candidates', 0)} candidates, picked {_names(picked, t)}; " if r else ""
    return f"{retrieved}{compacted_caption(p.get('compacted') or {})}"


def _retrieve(p: Mapping[str, Any], t: TextOf) -> str:
    if p.get("compacted"):
        picked = [s[0] for s in p.get("seats") or () if isinstance(s, (list, tuple)) and s]
        return (f"retrieved {p.get('candidates', 0)} candidates; picked {_names(picked, t)} "
                f"(compacted: {p.get('rows_dropped', 0)} score rows dropped)")
    paths = p.get("paths", {})
    found = ", ".join(f"{k} {v}" for k, v in paths.items())
    return f"retrieved {p.get('candidates', 0)} candidates ({found}); picked {_names(p.get('picked', []), t)}"


def _update(p: Mapping[str, Any], t: TextOf) -> str:
    parts = [f"{label} {len(p.get(key) or [])}" for label, key in (("added", "added"), ("merged", "merged"),
                                                                    ("superseded", "superseded"),
                                                                    ("kept both", "kept_both")) if p.get(key)]
    return "update: " + (", ".join(parts) or "nothing changed") + (
        f"; new {_names(p.get('added', []), t)}" if p.get("added") else "")


_LINES: dict[str, Callable[[Mapping[str, Any], TextOf], str]] = {
    "stamp": lambda p, t: f"{p.get('role', 'message')} message #{p.get('message_id')} stamped ({p.get('tokens', 0)} tokens)",
    "gate": _gate,
    "retrieve": _retrieve,
    "inject": lambda p, t: (f"injected {_names(p.get('record_ids', []), t)} ({p.get('payload_tokens', 0)} tokens) "
                            f"beside {p.get('window_messages', 0)} window messages"),
    "reply": lambda p, t: f"replied ({p.get('tokens', 0)} tokens)",
    "extract": lambda p, t: (f"extracted {p.get('records', 0)} records from {len(p.get('message_ids') or [])} messages"
                             + (f": “{_short((p.get('contents') or [''])[0])}”" if p.get("contents") else "")),
    "extraction": lambda p, t: f"extractor {p.get('extractor', '?')} returned {len((p.get('output') or {}).get('records', []) if isinstance(p.get('output'), dict) else p.get('output') or [])} records",
    "update": _update,
    "truncate": lambda p, t: f"window truncated at message #{p.get('cursor')}; {p.get('still_pending', 0)} still pending",
    "exposure": lambda p, t: f"shown (not reinforced): {_names(p.get('record_ids', []), t)}",
    "reinforce": lambda p, t: f"reinforced ({p.get('cause', '?')}): {_names(p.get('record_ids', []), t)}",
    "overflow": lambda p, t: f"overflow: {len(p.get('message_ids') or [])} pending messages extracted before leaving the window",
    "contradiction": lambda p, t: (f"live-window check ({p.get('mode', '?')}): {len(p.get('held') or {})} held back"
                                   f" of {p.get('compared_count', len(p.get('compared') or []))} compared"),
    "compacted": _compacted,
    "induct": lambda p, t: (f"profile induction waits: {p.get('eligible')} of {p.get('min_records')} records"
                            if p.get("deferred") else f"profile v{p.get('version', '?')}: " + (", ".join(
        f"{k} +{len(v.get('added', []))}/-{len(v.get('removed', []))}" for k, v in (p.get("diff") or {}).items()
        if isinstance(v, Mapping)) or "no change")),
    "user_edit": lambda p, t: f"hand edit: {p.get('action', '?')} {_names(p.get('record_ids', []) or [], t)}",
    "error": lambda p, t: f"error: {_short(str(p.get('error') or p.get('message') or dict(p)), 120)}",
}


def describe(kind: str, payload: Mapping[str, Any], text_of: TextOf) -> str:
    """One line saying what the step did."""
    fn = _LINES.get(kind)
    if fn is not None:
        try:
            return fn(payload, text_of)
        except (TypeError, ValueError, AttributeError):
            pass  # an older or unexpected payload shape: fall through to the generic line
    keys = ", ".join(sorted(payload)[:6])
    return f"{kind}" + (f" ({keys})" if keys else "")


def group_by_turn(events: Sequence[Any]) -> list[tuple[Any, list[Any]]]:
    """Events grouped by their turn, newest turn first, steps in order within a turn."""
    groups: dict[Any, list[Any]] = {}
    for e in events:
        groups.setdefault(e.turn, []).append(e)
    return sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0), reverse=True)
