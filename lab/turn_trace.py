"""The memory trace of each chat reply, read back from the event log (pure: no Streamlit).

For every assistant reply of a session: the turn it closed, the gate's numbers when an event
fired, the records injected (with their seat reason and score from the retrieval's score log),
what the reply reinforced, and the nearest record left out below the cut.

The log ties a reply to its turn through the reply's `stamp` event: the turn counter moves on when
the memory steps start, after the user message is stamped, so the reply's stamp carries the turn.

Turns older than the log's retention window are compacted (engine.memory.retention): an ordinary
turn's steps are folded into one "compacted" row (which names the reply and keeps the retrieval's
seats and nearest left-out row), an event turn's retrieval keeps the same in its own payload. Their
traces read those and say they are compacted (`Trace.compacted`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from engine.core.text import content_tokens, normalize

__all__ = ["DONT_KNOW", "EVENT_STEP_KINDS", "MISSED_CAPTION", "Seat", "Trace", "missed_words", "traces"]

#: How a reply says it does not know (lower-cased, curly apostrophes straightened before matching).
DONT_KNOW = ("i don't know", "i do not know", "i dont know", "我不知道")
#: The caption put under such a reply when the injected records named the question's keywords.
MISSED_CAPTION = "the answer may have been in what the model saw; the offline scripted model did not use it"

#: Log kinds that only appear when a memory event ran in the turn.
EVENT_STEP_KINDS = ("session", "overflow", "extract", "update", "induct", "truncate")
#: The kind of a compacted ordinary turn's summary row (engine.memory.retention.COMPACTED_KIND).
COMPACTED_KIND = "compacted"


class _Row(NamedTuple):
    """A score row as a compacted turn keeps it (engine.memory.retention.ROW_FIELDS)."""

    record_id: int
    verdict: str
    why: str
    S: float


def _kept_rows(summary: Mapping[str, Any]) -> tuple[list[_Row], _Row | None]:
    """The seats and the nearest left-out row a compacted retrieval kept."""
    def row(r: Any) -> _Row | None:
        try:
            return _Row(int(r[0]), str(r[1]), str(r[2]), float(r[3]))
        except (TypeError, ValueError, IndexError):
            return None

    seats = [x for x in (row(r) for r in summary.get("seats") or ()) if x is not None]
    return seats, row(summary.get("nearest")) if summary.get("nearest") else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Seat:
    record_id: int
    text: str
    why: str  # the ranking's seat rule ("floor:identity", "top-K", …) or why it was left out
    S: float | None = None
    verdict: str = ""


@dataclass(frozen=True, kw_only=True)
class Trace:
    turn: int
    event_no: int | None = None
    gate: Mapping[str, Any] | None = None  # the gate's logged numbers, kept when an event fired
    added: tuple[int, ...] = ()
    injected: list[Seat] = field(default_factory=list)
    reinforced: tuple[int, ...] = ()
    left_out: Seat | None = None
    retrieved: bool = False  # False: no retrieval this turn (on_event policy kept earlier picks)
    keywords: tuple[str, ...] = ()  # the retrieval's parsed query keywords (empty without a retrieval)
    compacted: Mapping[str, Any] | None = None  # the retention summary of a compacted turn (None: full rows)

    @property
    def event_fired(self) -> bool:
        return self.event_no is not None


def traces(events: Iterable[Any], *, scores: Callable[[int], Sequence[Any]],
           texts: Callable[[Sequence[int]], Mapping[int, str]]) -> dict[int, Trace]:
    """Assistant message id → its turn's trace, for one session's events (in log order).

    `scores(event_id)` gives a retrieval's logged score rows; `texts(ids)` the records' contents.
    """
    by_turn: dict[int, list[Any]] = {}
    reply_turn: dict[int, int] = {}
    for e in events:
        if e.turn is None:
            continue
        by_turn.setdefault(e.turn, []).append(e)
        if e.kind == "stamp" and e.payload.get("role") == "assistant" and e.payload.get("message_id") is not None:
            reply_turn[int(e.payload["message_id"])] = e.turn
        elif e.kind in (COMPACTED_KIND, "gate") and isinstance(e.payload.get("compacted"), Mapping) \
                and e.payload["compacted"].get("reply_message_id") is not None:
            reply_turn[int(e.payload["compacted"]["reply_message_id"])] = e.turn
    raw: dict[int, dict[str, Any]] = {}
    wanted: set[int] = set()
    for msg_id, turn in reply_turn.items():
        evs = by_turn.get(turn, [])
        fired = next((e.event_no for e in evs if e.kind in EVENT_STEP_KINDS and e.event_no is not None), None)
        gate = next((dict(e.payload) for e in evs if e.kind == "gate"), None)
        added = tuple(int(i) for e in evs if e.kind == "update" for i in e.payload.get("added", ()))
        retrieve = next((e for e in evs if e.kind == "retrieve"), None)
        summary = next((dict(e.payload.get("compacted") or {}) for e in evs if e.kind == COMPACTED_KIND
                        or (e.kind == "gate" and isinstance(e.payload.get("compacted"), Mapping))), None)
        kept = (retrieve.payload if retrieve is not None and retrieve.payload.get("compacted")
                else (summary or {}).get("retrieve") if retrieve is None else None)
        kept_nearest = None
        if kept is not None:  # a compacted retrieval: its seats and nearest row, no score rows
            rows, kept_nearest = _kept_rows(kept)
        else:
            rows = list(scores(retrieve.id)) if retrieve is not None and retrieve.id is not None else []
        inject = next((e for e in evs if e.kind == "inject"), None) or \
            next((e for e in evs if e.kind == COMPACTED_KIND), None)  # a compacted turn's row names what it injected
        picked = [int(i) for i in inject.payload.get("record_ids", ())] if inject is not None else []
        reinforced = tuple(int(i) for e in evs if e.kind == "reinforce" for i in e.payload.get("record_ids", ()))
        left = [r for r in rows if r.verdict != "picked" and r.record_id not in picked]
        nearest = max(left, key=lambda r: (r.S, -r.record_id)) if left else None
        if kept is not None:
            nearest = kept_nearest if kept_nearest is not None and kept_nearest.record_id not in picked else None
            keywords = tuple(str(k) for k in (kept.get("keywords") or (kept.get("query") or {}).get("keywords") or ()))
        elif retrieve is not None:
            keywords = tuple(str(k) for k in ((retrieve.payload.get("query") or {}).get("keywords") or ()))
        else:
            keywords = ()
        raw[msg_id] = {"turn": turn, "event_no": fired, "gate": gate if fired is not None else None, "added": added,
                       "rows": {r.record_id: r for r in rows}, "picked": picked, "reinforced": reinforced,
                       "nearest": nearest, "retrieved": retrieve is not None or kept is not None,
                       "keywords": keywords, "compacted": summary}
        wanted.update(picked)
        if nearest is not None:
            wanted.add(nearest.record_id)
    text = dict(texts(sorted(wanted))) if wanted else {}
    out: dict[int, Trace] = {}
    for msg_id, r in raw.items():
        rows = r["rows"]
        seats = []
        for rid in r["picked"]:
            row = rows.get(rid)
            why = row.why if row is not None else ("kept from the last event's retrieval" if not r["retrieved"]
                                                   else "seated (score row not logged)")
            seats.append(Seat(record_id=rid, text=text.get(rid, f"record #{rid}"), why=why,
                              S=row.S if row is not None else None, verdict="picked"))
        n = r["nearest"]
        out[msg_id] = Trace(
            turn=r["turn"], event_no=r["event_no"], gate=r["gate"], added=r["added"], injected=seats,
            reinforced=r["reinforced"], retrieved=r["retrieved"], keywords=r["keywords"], compacted=r["compacted"],
            left_out=None if n is None else Seat(record_id=n.record_id, text=text.get(n.record_id, f"record #{n.record_id}"),
                                                 why=n.why, S=n.S, verdict=n.verdict),
        )
    return out


def missed_words(reply: str, keywords: Iterable[str], injected: Iterable[str]) -> list[str]:
    """The question's keywords that the injected records contain, when the reply says it does not
    know; empty when the reply answers or no keyword was in what the model saw.

    A non-empty answer means the stand-in may have missed an answer it was shown (its word-overlap
    rule wants about half the question's words in one line).
    """
    said = normalize(reply or "").replace("’", "'")
    if not any(phrase in said for phrase in DONT_KNOW):
        return []
    seen = {tok for text in injected for tok in content_tokens(text or "")}
    out: list[str] = []
    for word in keywords:
        toks = content_tokens(str(word))
        if toks and all(t in seen for t in toks) and word not in out:
            out.append(word)
    return out
