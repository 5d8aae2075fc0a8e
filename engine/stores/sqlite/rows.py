"""How a MemoryRecord maps to an SQLite `records` row and its full-text body (pure functions).

Times are ISO text keeping their UTC offset (exact round trip), with epoch-seconds companions
(`created_ts`, `start_ts`, `end_ts`) for range filters; tags, keywords and the source pointer are
JSON text. `valid` mirrors `invalid_at IS NULL` so the vector index can filter on it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from engine.core.records import MemoryRecord, SourcePointer, TimeSpan
from engine.core.text import index_text, user_key
from engine.stores.dialect import to_json

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
    return tuple(json.loads(text))


def ids_json(ids: Sequence[int]) -> str:
    """Ids as one JSON parameter for `IN (SELECT value FROM json_each(?))`."""
    return json.dumps([int(i) for i in ids])


def record_from_row(row: Sequence[Any]) -> MemoryRecord:
    """A record from a row of RECORD_COLUMNS."""
    time = None
    if row[6] is not None:
        time = TimeSpan(start=datetime.fromisoformat(row[6]), end=datetime.fromisoformat(row[7]),
                        granularity=row[8], text=row[9] or "")  # fmt: skip
    source = None if row[14] is None else SourcePointer.from_dict(json.loads(row[14]))
    return MemoryRecord(
        id=row[0],
        user_id=row[1],
        content=row[2],
        memory_type=row[3],
        tags=_tags(row[4]),
        theme=row[5],
        time=time,
        location=row[10],
        reason=row[11],
        purpose=row[12],
        keywords=tuple(json.loads(row[13])),
        source=source,
        created_at=datetime.fromisoformat(row[15]),
        last_reinforced_at=_dt(row[16]),
        strengthen_count=row[17],
        valid_from=_dt(row[18]),
        invalid_at=_dt(row[19]),
        superseded_by=row[20],
        said_at=_dt(row[21]),
        lasting=bool(row[22]),
    )


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
