"""Log retention: a session's last `log_full_turns` turns keep every row; older turns are compacted.

Every turn writes ~10 events and up to `score_log_rows` (+ seated and held-back) scoring rows;
kept forever, that is ~18 KB per turn. Compaction runs on the turn path in bounded steps
(`MemoryEngine.remember_and_recall`): read the session's events after the retention cursor
(kv `log-compacted:{session}`, an event id) through the (user, session, id) index, in chunks and at
most `BATCH`, compact the whole turns among them now older than the window (`Store.compact_log`:
updates and deletes by event id, one transaction) and move the cursor. A step waits until
`stride(full_turns)` whole turns are due (12 for the default 200; every turn for a window under
32), so a caught-up session's turn reads one event to see that nothing is due (and, with the
engine's `CompactionHints`, nothing at all until a step can be due), and every 12th turn compacts
12 turns at once; nothing before the cursor is read again; a backlog (the policy
turned on for an old database) is worked off `BATCH` events per turn.

What a compacted turn keeps (what the lab's views and the engine read back):

- on a turn where a memory event ran, the event's own steps in full (session, overflow, extract,
  the extractor's input and output, update, tune, induct, truncate: the provenance of records and
  the training pairs of `memlab export-extractions`) and its gate, which carries the summary
  under "compacted";
- injections (record ids and token counts), reinforcements, hand edits, errors and every kind not
  named here, in full;
- of a retrieval, its keywords, candidate count, the seated rows and the nearest row left out as
  `[record_id, verdict, why, S]` (what the memory trace shows); its score rows are deleted;
- of the live-window guard, counts: its extractor calls (purpose "live-window") become call,
  message and record counts in the summary (they are not training pairs), its contradiction
  checks the ids they held back.

Dropped: reply, exposure and stamp events (the assistant stamp's message id stays in the summary).
An ordinary turn (no memory event) keeps one row: its gate's, rewritten to kind "compacted" with
the gate's pending and mature counts, the injected record ids (top-level `record_ids`, as an inject
event has them), the retrieval's summary and the counts of what was dropped, plus its
reinforcements. Turns within the window, and every turn while `log_full_turns` is 0, are never
touched, so short replays and the golden logs are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.core.lru import LRU
from engine.core.records import Event
from engine.stores.base import Store

__all__ = ["BATCH", "COMPACTED_KIND", "CompactionHints", "EVENT_STEP_KINDS", "ROW_FIELDS", "compact_session", "compact_turn", "cursor_key",
           "stride"]

#: Events read per turn at most (a turn writes ~10; a backlog is worked off this many at a time).
BATCH = 256
#: Events per read (a turn writes about 10).
CHUNK = 24
#: Compaction runs in steps of this share of the window (200 full turns: a step every 12 turns, over
#: the 12 turns then due), so most turns only look at the first event after the cursor; the window
#: keeps between `full_turns` and `full_turns + stride - 1` whole turns.
STRIDE_SHARE = 16
#: The largest step, in turns.
MAX_STRIDE = 16
#: The kind of an ordinary turn's summary row (its gate event, rewritten).
COMPACTED_KIND = "compacted"
#: Log kinds that only appear when a memory event ran in the turn.
EVENT_STEP_KINDS = ("session", "overflow", "extract", "update", "induct", "truncate")
#: Dropped from an ordinary compacted turn (counted in its summary).
DROP_ORDINARY = ("reply", "exposure")
#: What a compacted inject event keeps (the Memory over time view reads its record ids).
INJECT_KEPT = ("record_ids", "payload_tokens", "window_messages")
#: A compacted retrieval's kept rows: one list per row, in this order.
ROW_FIELDS = ("record_id", "verdict", "why", "S")


def cursor_key(session_id: str) -> str:
    return f"log-compacted:{session_id}"


def stride(full_turns: int) -> int:
    """Whole turns a compaction step waits for (1 for a small window: every turn)."""
    return max(1, min(MAX_STRIDE, full_turns // STRIDE_SHARE))


class CompactionHints:
    """The turn before which a session's next compaction step cannot be due, learned from the one
    row `compact_session` reads to see that nothing is due (the first event after the cursor, whose
    turn only grows: the cursor only moves forward and new events carry later turns). A hint
    skips that read until its turn; it never decides what is compacted, only when to look again.
    Bounded (least recently used sessions go); `forget_user` drops a user's hints."""

    def __init__(self, max_sessions: int = 4096):
        self.max_sessions = max_sessions
        self._due: LRU[tuple[str, str, int], int] = LRU(max_sessions)

    def not_due(self, user_id: str, session_id: str, full_turns: int, turn: int) -> bool:
        return turn < (self._due.peek((user_id, session_id, full_turns)) or 0)

    def learn(self, user_id: str, session_id: str, full_turns: int, due: int) -> None:
        key = (user_id, session_id, full_turns)
        self._due.put(key, due)

    def forget_user(self, user_id: str) -> None:
        self._due.drop(lambda k: k[0] == user_id)


def compact_session(store: Store, user_id: str, session_id: str, *, turn: int, full_turns: int,
                    hints: CompactionHints | None = None) -> dict[str, int] | None:
    """Compact the session's turns older than the last `full_turns` (up to `BATCH` events) once
    `stride(full_turns)` whole turns are due; returns the store's counts, None when nothing was
    due. `full_turns` 0 keeps everything. `hints`: when the next step can be due, kept between
    turns so a caught-up session reads nothing until then."""
    if full_turns <= 0 or turn <= full_turns:
        return None
    if hints is not None and hints.not_due(user_id, session_id, full_turns, turn):
        return None
    cutoff = turn - full_turns
    key = cursor_key(session_id)
    cursor = int(store.get_kv(user_id, key) or 0)
    step = stride(full_turns)
    if step > 1:  # one row tells whether a step is due (a backlog always is)
        first = store.events(user_id=user_id, session_id=session_id, after_id=cursor, limit=1)
        if not first or (first[0].turn is not None and first[0].turn > cutoff - step + 1):
            if hints is not None and first and first[0].turn is not None:
                # due once cutoff - step + 1 reaches that turn: turn - full_turns - step + 1 >= first turn
                hints.learn(user_id, session_id, full_turns, first[0].turn + full_turns + step - 1)
            return None
    chunk_size = max(CHUNK, 12 * step)
    batch: list[Event] = []
    considered: list[Event] = []  # the batch up to the first turn still inside the window
    inside = False
    while not inside and len(batch) < BATCH:  # small reads: a caught-up session reads about one turn
        chunk = store.events(user_id=user_id, session_id=session_id, after_id=batch[-1].id if batch else cursor,
                             limit=min(chunk_size, BATCH - len(batch)))
        batch.extend(chunk)
        for e in chunk:
            if e.turn is not None and e.turn > cutoff:
                inside = True
                break
            considered.append(e)
        if len(chunk) < min(chunk_size, BATCH - len(batch) + len(chunk)):
            break
    groups: list[list[Event]] = []  # consecutive events of one turn (events without a turn stay as they are)
    for e in considered:
        if e.turn is None:
            continue
        if groups and groups[-1][0].turn == e.turn:
            groups[-1].append(e)
        else:
            groups.append([e])
    if not inside and len(batch) >= BATCH and len(groups) > 1:
        # the batch may have cut the last turn short: it waits for the next step
        first_cut = groups.pop()[0]
        considered = considered[:considered.index(first_cut)]
    if not considered:
        return None
    rewrite: dict[int, tuple[str, dict[str, Any]]] = {}
    drop: list[int] = []
    keep_scores: dict[int, list[int]] = {}
    for evs in groups:
        r, d, k = compact_turn(evs, scores=store.scores)
        rewrite.update(r)
        drop.extend(d)
        keep_scores.update(k)
    last = int(considered[-1].id or 0)
    with store.transaction():
        counts = store.compact_log(user_id, rewrite=rewrite, drop=drop, keep_scores=keep_scores)
        store.set_kv(user_id, key, last)
    return counts


def compact_turn(events: Sequence[Event], *, scores) -> tuple[dict[int, tuple[str, dict[str, Any]]], list[int],
                                                                 dict[int, list[int]]]:
    """One turn's compaction: (rewrites id → (kind, payload), events to drop, retrieval id → score
    rows' record ids to keep). `scores(event_id)` reads a retrieval's rows. A turn compacted
    before is left as it is."""
    if any(e.kind == COMPACTED_KIND or (isinstance(e.payload, Mapping) and e.payload.get("compacted"))
           for e in events):
        return {}, [], {}
    fired = any(e.kind in EVENT_STEP_KINDS and e.event_no is not None for e in events)
    gate = next((e for e in events if e.kind == "gate"), None)
    # an ordinary turn folds its steps into one summary row (its gate's); an event turn, or a turn
    # without a gate row (split by a batch), shortens them where they are
    fold = gate is not None and not fired
    rewrite: dict[int, tuple[str, dict[str, Any]]] = {}
    drop: list[int] = []
    keep_scores: dict[int, list[int]] = {}
    dropped: dict[str, int] = {}
    summary: dict[str, Any] = {}
    injected: list[int] | None = None

    def gone(e: Event) -> None:
        drop.append(int(e.id or 0))
        dropped[e.kind] = dropped.get(e.kind, 0) + 1

    for e in events:
        p, eid = dict(e.payload), int(e.id or 0)
        if e is gate:
            continue
        if e.kind == "retrieve":
            rows = list(scores(eid))
            summary["score_rows_dropped"] = summary.get("score_rows_dropped", 0) + len(rows)
            if fold:
                summary["retrieve"] = _compact_retrieve(p, rows)
                gone(e)
            else:
                rewrite[eid] = (e.kind, {"compacted": True, **_compact_retrieve(p, rows), "rows_dropped": len(rows)})
                keep_scores[eid] = []
        elif e.kind == "extraction" and p.get("purpose") == "live-window":
            calls = summary.setdefault("live_window_extractions", {"calls": 0, "messages": 0, "records": 0})
            for k, v in _extraction_counts(p).items():
                calls[k] += v
            gone(e)
        elif e.kind == "contradiction":
            if p.get("held"):
                summary["held"] = sorted({*summary.get("held", ()), *(int(i) for i in p["held"])})
            if fold or not p.get("held"):
                gone(e)
            else:
                rewrite[eid] = (e.kind, {"compacted": True, "mode": p.get("mode"), "held": p["held"],
                                         "compared_count": len(p.get("compared") or [])})
        elif gate is None:
            continue  # a turn split by a batch (no summary row): the rest stays as it is
        elif e.kind in DROP_ORDINARY:
            gone(e)
        elif e.kind == "stamp":
            if p.get("role") == "assistant" and p.get("message_id") is not None:
                summary["reply_message_id"] = p["message_id"]
            gone(e)
        elif e.kind == "inject" and fold and injected is None:
            injected = [int(i) for i in p.get("record_ids") or ()]
            drop.append(eid)  # folded into the summary row, which carries its record ids
        elif e.kind == "inject":
            rewrite[eid] = (e.kind, {"compacted": True, **{k: p[k] for k in INJECT_KEPT if k in p}})
    summary["events_dropped"] = dict(sorted(dropped.items()))
    if gate is not None:
        g = dict(gate.payload)
        if fold:
            rewrite[int(gate.id or 0)] = (COMPACTED_KIND, {
                "record_ids": injected or [], "gate": {k: g[k] for k in ("pending", "mature") if k in g},
                "compacted": summary})
        else:
            rewrite[int(gate.id or 0)] = (gate.kind, {**g, "compacted": summary})
    return rewrite, drop, keep_scores


def _kept_rows(rows: Sequence[Any]) -> tuple[list[list[Any]], list[Any] | None]:
    """The rows worth keeping as [record_id, verdict, why, S] (ROW_FIELDS): the seated ones, and
    the best one not seated (the memory trace's "nearest left out", held back or not)."""
    seated = [r for r in rows if r.verdict == "picked"]
    left = [r for r in rows if r.verdict != "picked"]
    nearest = max(left, key=lambda r: (r.S, -r.record_id)) if left else None

    def short(r: Any) -> list[Any]:
        return [int(r.record_id), r.verdict, r.why, round(float(r.S), 4)]

    return [short(r) for r in seated], None if nearest is None else short(nearest)


def _compact_retrieve(p: Mapping[str, Any], rows: Sequence[Any]) -> dict[str, Any]:
    query = p.get("query") or {}
    seats, nearest = _kept_rows(rows)
    return {"keywords": query.get("keywords") or [], "candidates": p.get("candidates", 0), "seats": seats,
            "nearest": nearest}


def _extraction_counts(p: Mapping[str, Any]) -> dict[str, int]:
    inp = p.get("input") if isinstance(p.get("input"), Mapping) else {}
    outp = p.get("output") if isinstance(p.get("output"), Mapping) else {}
    return {"calls": 1, "messages": len(inp.get("new") or []), "records": len(outp.get("records") or [])}
