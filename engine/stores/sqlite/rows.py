"""How a MemoryRecord maps to an SQLite `records` row and its full-text body (pure functions).

Times are ISO text keeping their UTC offset (exact round trip), with epoch-seconds companions
(`created_ts`, `start_ts`, `end_ts`) for range filters; tags, keywords and the source pointer are
JSON text. `valid` mirrors `invalid_at IS NULL` so the vector index can filter on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from functools import lru_cache
from typing import Any

from engine.core.records import (
    GRANULARITIES,
    MEMORY_TYPES,
    TYPE_SCORES,
    USER_TAGS,
    MemoryRecord,
    SourcePointer,
    TimeSpan,
)
from engine.core.text import index_text, user_key
from engine.stores.dialect import from_json, to_json

__all__ = ["MUTABLE_COLUMNS", "RECORD_COLUMNS", "body_text", "fts_body", "ids_json", "insert_values", "mutable_values",
           "record_from_row"]

RECORD_COLUMNS = (
    "id, user_id, content, memory_type, tags, theme, time_start, time_end, granularity, time_text, "
    "location, reason, purpose, keywords, source, created_at, last_reinforced_at, strengthen_count, "
    "valid_from, invalid_at, superseded_by, said_at, lasting"
)
#: What update_record may change (everything but owner, creation and validity), in mutable_values order.
MUTABLE_COLUMNS = (
    "content, memory_type, tags, theme, time_start, time_end, start_ts, end_ts, granularity, time_text, "
    "location, reason, purpose, keywords, source, last_reinforced_at, strengthen_count, valid_from, said_at, lasting"
)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _dt(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


@lru_cache(maxsize=4096)
def _tags(text: str) -> tuple[str, ...]:
    """A record's tags from their JSON (few distinct values, parsed once each)."""
    return tuple(from_json(text))


def ids_json(ids: Sequence[int]) -> str:
    """Ids as one JSON parameter for `IN (SELECT value FROM json_each(?))`."""
    return to_json([int(i) for i in ids])


#: MemoryRecord's slot setters in field order: a row the store wrote was validated when it was
#: written, so reading it back sets the fields directly (~5x cheaper than the validating __init__).
_FIELD_NAMES = tuple(f.name for f in fields(MemoryRecord))
_SETTERS = tuple(getattr(MemoryRecord, name).__set__ for name in _FIELD_NAMES)
_KNOWN_TAGS = frozenset((*TYPE_SCORES, *USER_TAGS))


@lru_cache(maxsize=4096)
def _tags_known(text: str) -> bool:
    return all(t in _KNOWN_TAGS for t in _tags(text))


#: Records already built, keyed by the whole row they were built from (records are frozen, and a
#: row that reads back identical builds an identical record, so this can never be stale: every
#: read still asks the database, only the parsing is saved). Bounded: the older half goes when full.
_BUILT: dict[tuple, MemoryRecord] = {}
_BUILT_MAX = 1 << 15


def record_from_row(row: Sequence[Any]) -> MemoryRecord:
    """A record from a row of RECORD_COLUMNS (the one built before from an identical row, if any)."""
    key = tuple(row)
    rec = _BUILT.get(key)
    if rec is None:
        rec = _build_record(row)
        if len(_BUILT) >= _BUILT_MAX:
            keep = list(_BUILT.items())[_BUILT_MAX // 2:]
            _BUILT.clear()
            _BUILT.update(keep)
        _BUILT[key] = rec
    return rec


_TIME_SETTERS = tuple(getattr(TimeSpan, f.name).__set__ for f in fields(TimeSpan))
_SOURCE_SETTERS = tuple(getattr(SourcePointer, f.name).__set__ for f in fields(SourcePointer))


def _direct(cls: type, setters: Sequence[Any], values: Sequence[Any]) -> Any:
    """An instance of the frozen slots dataclass `cls` with `values` set by its slots' `setters`, in
    field order, without its __init__ (for values already checked, or that need no check)."""
    out = object.__new__(cls)
    for setter, value in zip(setters, values):
        setter(out, value)
    return out


def _source(data: Mapping[str, Any]) -> SourcePointer:
    """`SourcePointer.from_dict(data)` with the fields set directly: its frozen __init__ sets each by
    object.__setattr__ and checks nothing (the same values; 3.4 -> 1.5 us, and every record has one)."""
    return _direct(SourcePointer, _SOURCE_SETTERS,
                   (data["session_id"], tuple(map(int, data.get("message_ids", ()))), data.get("speaker", "user"),
                    data.get("reply_message_id"), tuple(map(str, data.get("external_ids", ())))))


def _time_span(start: datetime, end: datetime, granularity: str, text: str) -> TimeSpan:
    """A record's time, its fields set directly when TimeSpan's checks pass (aware, in order, a known
    granularity); otherwise the validating constructor, which raises the error it always did."""
    if start.utcoffset() is not None and end.utcoffset() is not None and granularity in GRANULARITIES \
            and not end < start:
        return _direct(TimeSpan, _TIME_SETTERS, (start, end, granularity, text))
    return TimeSpan(start=start, end=end, granularity=granularity, text=text)


def _build_record(row: Sequence[Any]) -> MemoryRecord:
    """A record from a row of RECORD_COLUMNS.

    Fields are set without MemoryRecord's __init__ when the cheap checks pass (known type and
    tags, aware times, a count >= 0); a row edited by hand into something invalid goes through
    the validating constructor and raises the error it always did."""
    time = None if row[6] is None else _time_span(datetime.fromisoformat(row[6]), datetime.fromisoformat(row[7]),
                                                  row[8], row[9] or "")
    source = None if row[14] is None else _source(from_json(row[14]))
    created = datetime.fromisoformat(row[15])
    reinforced, valid_from, invalid_at, said_at = _dt(row[16]), _dt(row[18]), _dt(row[19]), _dt(row[21])
    values = (row[1], row[2], row[3], _tags(row[4]), row[5], time, row[10], row[11], row[12],
              tuple(from_json(row[13])), source, created, reinforced, row[17], valid_from, invalid_at,
              row[20], row[0], said_at, bool(row[22]))
    if (row[3] in MEMORY_TYPES and _tags_known(row[4]) and row[17] >= 0 and created.tzinfo is not None
            and all(d is None or d.tzinfo is not None for d in (reinforced, valid_from, invalid_at, said_at))):
        return _direct(MemoryRecord, _SETTERS, values)
    return MemoryRecord(**dict(zip(_FIELD_NAMES, values, strict=True)))


def fts_body(r: MemoryRecord) -> str:
    """What full text sees: content, keywords, location, reason, purpose, segmented like queries,
    every term keyed by the owner (`user_key`), so each user's postings are their own doclists."""
    return body_text(r.user_id, r.content, r.keywords, r.location, r.reason, r.purpose)


def body_text(user_id: str, content: str, keywords: Sequence[str], location: str | None, reason: str | None,
              purpose: str | None) -> str:
    """`fts_body` from the stored fields (the migration rebuilds the index from rows with it)."""
    parts = [content, " ".join(keywords), location or "", reason or "", purpose or ""]
    return index_text(" ".join(p for p in parts if p), key=user_key(user_id))


def mutable_values(r: MemoryRecord) -> list[Any]:
    """Values for MUTABLE_COLUMNS, in order."""
    t = r.time
    return [
        r.content,
        r.memory_type,
        to_json(list(r.tags)),
        r.theme,
        None if t is None else t.start.isoformat(),
        None if t is None else t.end.isoformat(),
        None if t is None else t.start.timestamp(),
        None if t is None else t.end.timestamp(),
        None if t is None else t.granularity,
        None if t is None else t.text,
        r.location,
        r.reason,
        r.purpose,
        to_json(list(r.keywords)),
        None if r.source is None else to_json(r.source.to_dict()),
        _iso(r.last_reinforced_at),
        r.strengthen_count,
        _iso(r.valid_from),
        _iso(r.said_at),
        int(r.lasting),
    ]


def insert_values(r: MemoryRecord) -> list[Any]:
    """Values for `id, user_id, MUTABLE_COLUMNS, created_at, created_ts, invalid_at, superseded_by, valid`."""
    return [r.id, r.user_id, *mutable_values(r), r.created_at.isoformat(), r.created_at.timestamp(),
            _iso(r.invalid_at), r.superseded_by, int(r.invalid_at is None)]  # fmt: skip
