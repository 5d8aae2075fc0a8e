"""What the Memory page shows, built without Streamlit (pure functions, unit-tested).

- `record_rows`: one row per record, the deciding columns first (content, type, tags, T now, said,
  reinforced, strengthen count, status), then the dimensions (theme, time, location, keywords,
  superseded by), then bookkeeping (id, current, M now, created, invalid at). Lists are joined by
  ", ", times are text, and no cell is None: an absent value is "".
- `status_of` / `successor_text`: "current", "superseded → <successor's text>" or "retracted by hand".
- `conflicts`: pairs of current records the update step would call the same subject + attribute
  (engine.memory.update.subject_attribute), which should not both be current.
- `update_decisions`: each logged "update" event's decisions, in words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.memory.update import subject_attribute

__all__ = [
    "COLUMNS",
    "DECIDING_COLUMNS",
    "DIMENSION_COLUMNS",
    "EXTRA_COLUMNS",
    "Conflict",
    "Decision",
    "clip",
    "conflicts",
    "record_rows",
    "stamp",
    "status_of",
    "struck_line",
    "successor_text",
    "update_decisions",
]

DECIDING_COLUMNS = ("content", "type", "tags", "T now", "said", "reinforced", "strengthen count", "status")
DIMENSION_COLUMNS = ("theme", "time", "location", "keywords", "superseded by")
EXTRA_COLUMNS = ("id", "current", "M now", "created", "invalid at")
COLUMNS = DECIDING_COLUMNS + DIMENSION_COLUMNS + EXTRA_COLUMNS
#: How much of a successor's text the status column shows.
SUCCESSOR_CHARS = 60


def clip(text: str | None, limit: int = SUCCESSOR_CHARS) -> str:
    """`text` cut to `limit` characters (with "…"), "" for None."""
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def stamp(value: datetime | None) -> str:
    """A time as "YYYY-MM-DD HH:MM", "" for None."""
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else ""


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(str(v) for v in value if v is not None and str(v) != "")
    return str(value)


def successor_text(record: Any, by_id: Mapping[int, Any]) -> str:
    """The successor's content (clipped) of a superseded record, "" when there is none."""
    nxt = record.superseded_by
    if record.is_current or nxt is None or nxt == record.id:
        return ""
    found = by_id.get(nxt)
    return clip(found.content) if found is not None else f"#{nxt}"


def status_of(record: Any, by_id: Mapping[int, Any]) -> str:
    if record.is_current:
        return "current"
    if record.superseded_by is None or record.superseded_by == record.id:
        return "retracted by hand"
    return f"superseded → {successor_text(record, by_id)}"


def struck_line(record: Any, by_id: Mapping[int, Any], *, when: Callable[[datetime | None], str] = stamp) -> str:
    """A markdown line for a record that is no longer current: its text struck, then its successor."""
    if record.superseded_by is None or record.superseded_by == record.id:
        return f"~~#{record.id} {record.content}~~ retracted by hand (invalid since {when(record.invalid_at)})"
    return (f"~~#{record.id} {record.content}~~ → **#{record.superseded_by}** {successor_text(record, by_id)} "
            f"(invalid since {when(record.invalid_at)})")


def record_rows(records: Sequence[Any], *, now: datetime, t_now: Callable[[Any], float],
                m_now: Callable[[Any], float]) -> list[dict[str, Any]]:
    """One display row per record, in `COLUMNS` order, with no None cell.

    `t_now(record)` / `m_now(record)` give its retention and maturity at `now` (the caller knows
    the config). "superseded by" is the successor's id, or "" for a current or retracted record.
    """
    by_id = {r.id: r for r in records}
    rows = []
    for r in records:
        successor = r.superseded_by if (not r.is_current and r.superseded_by not in (None, r.id)) else ""
        row = {
            "content": _text(r.content),
            "type": _text(r.memory_type),
            "tags": _text(r.tags),
            "T now": float(t_now(r)),
            "said": stamp(r.said_at or r.created_at),
            "reinforced": stamp(r.last_reinforced_at),
            "strengthen count": int(r.strengthen_count),
            "status": status_of(r, by_id),
            "theme": _text(r.theme),
            "time": _text(r.time.text if r.time is not None else None),
            "location": _text(r.location),
            "keywords": _text(r.keywords),
            "superseded by": successor,
            "id": r.id if r.id is not None else "",
            "current": bool(r.is_current),
            "M now": float(m_now(r)),
            "created": stamp(r.created_at),
            "invalid at": stamp(r.invalid_at),
        }
        rows.append({k: row[k] for k in COLUMNS})
    return rows


@dataclass(frozen=True, slots=True)
class Conflict:
    a: Any
    b: Any
    key: tuple[str, str]

    @property
    def line(self) -> str:
        return f"conflict: #{self.a.id} {clip(self.a.content)} vs #{self.b.id} {clip(self.b.content)}"


def conflicts(records: Iterable[Any], *, key: Callable[[Any], tuple[str, str] | None] = subject_attribute
              ) -> list[Conflict]:
    """Pairs of current records of the same user stating the same subject's single-valued
    attribute (the update step's blocking key), in id order."""
    groups: dict[tuple[str, tuple[str, str]], list[Any]] = {}
    for r in records:
        if not r.is_current:
            continue
        k = key(r)
        if k is not None:
            groups.setdefault((r.user_id, k), []).append(r)
    out = []
    for (_, k), rs in groups.items():
        rs = sorted(rs, key=lambda r: r.id or 0)
        out.extend(Conflict(rs[i], rs[j], k) for i in range(len(rs)) for j in range(i + 1, len(rs)))
    return out


@dataclass(frozen=True, slots=True)
class Decision:
    event_no: int | None
    at: datetime | None
    decision: str  # "merge", "supersede", "keep both" or "add"
    new: str  # the new record, in words
    compared: str  # the candidate it was compared with, in words
    reason: str = ""

    @property
    def line(self) -> str:
        tail = f" ({self.reason})" if self.reason else ""
        return f"**{self.decision}**: new {self.new}; compared with {self.compared}{tail}"


def update_decisions(events: Iterable[Any], texts: Mapping[int, str]) -> list[Decision]:
    """Every decision of the logged "update" events, oldest first, in words.

    `texts` maps record ids to their content. A merge has no new record of its own (the new text
    reinforced the existing one); an "add" is a new record that no candidate matched.
    """
    def name(rid: Any) -> str:
        if rid is None or rid == "":
            return "—"
        return f"#{rid} {clip(texts.get(int(rid), ''))}".rstrip()

    def how(item: Mapping[str, Any]) -> str:
        cos = item.get("cosine")
        return name(item.get("existing")) + (f" (cosine {float(cos):.3f})" if cos is not None else "")

    out: list[Decision] = []
    for e in events:
        if getattr(e, "kind", None) != "update":
            continue
        p = e.payload or {}
        paired: set[int] = set()
        for item in p.get("merged", ()):
            out.append(Decision(e.event_no, e.at, "merge", "(restated; reinforced the existing record)", how(item),
                                str(item.get("reason") or "")))
        for item in p.get("superseded", ()):
            paired.add(int(item.get("successor", -1)))
            out.append(Decision(e.event_no, e.at, "supersede", name(item.get("successor")), how(item),
                                str(item.get("reason") or "")))
        for item in p.get("kept_both", ()):
            paired.add(int(item.get("new", -1)))
            out.append(Decision(e.event_no, e.at, "keep both", name(item.get("new")), how(item),
                                str(item.get("reason") or "")))
        for rid in p.get("added", ()):
            if int(rid) not in paired:
                out.append(Decision(e.event_no, e.at, "add", name(rid), "no candidate close enough"))
    return out
