"""How a MemoryRecord maps to a PostgreSQL `records` row (pure functions).

Each datetime keeps its UTC offset in a companion `*_tz` column, so it comes back in the offset
it was written with; tags and keywords are text arrays; the source pointer is JSON text. The
full-text body (`fts_text`, with its length for BM25) is what SQLite's FTS5 sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.core.records import MemoryRecord, SourcePointer, TimeSpan
from engine.core.text import index_text
from engine.stores.dialect import POSTGRES, from_json, to_json, utc_offset

__all__ = ["RECORD_COLUMNS", "fts_text", "insert_row", "mutable_row", "record_from_row"]

_TIMES = ("time_start", "time_end", "created_at", "last_reinforced_at", "valid_from", "invalid_at", "said_at")
RECORD_COLUMNS = (
    "id, user_id, content, memory_type, tags, theme, granularity, time_text, location, reason, purpose, "
    "keywords, source, strengthen_count, superseded_by, lasting, " + ", ".join(f"{c}, {c}_tz" for c in _TIMES)
)


def record_from_row(row: Mapping[str, Any]) -> MemoryRecord:
    """A record from a dict row of RECORD_COLUMNS."""
    t = {c: POSTGRES.decode_time(row[c], row[f"{c}_tz"]) for c in _TIMES}
    span = None
    if t["time_start"] is not None:
        span = TimeSpan(start=t["time_start"], end=t["time_end"], granularity=row["granularity"], text=row["time_text"] or "")
    return MemoryRecord(
        id=row["id"],
        user_id=row["user_id"],
        content=row["content"],
        memory_type=row["memory_type"],
        tags=tuple(row["tags"]),
        theme=row["theme"],
        time=span,
        location=row["location"],
        reason=row["reason"],
        purpose=row["purpose"],
        keywords=tuple(row["keywords"]),
        source=None if row["source"] is None else SourcePointer.from_dict(from_json(row["source"])),
        created_at=t["created_at"],
        last_reinforced_at=t["last_reinforced_at"],
        strengthen_count=row["strengthen_count"],
        valid_from=t["valid_from"],
        invalid_at=t["invalid_at"],
        superseded_by=row["superseded_by"],
        said_at=t["said_at"],
        lasting=bool(row["lasting"]),
    )


def fts_text(rec: MemoryRecord) -> str:
    """What full text sees (as in SQLite): content, keywords, location, reason, purpose."""
    parts = [rec.content, " ".join(rec.keywords), rec.location or "", rec.reason or "", rec.purpose or ""]
    return index_text(" ".join(p for p in parts if p))


def mutable_row(rec: MemoryRecord) -> dict[str, Any]:
    """The columns `update_record` may change (everything but owner, creation and validity)."""
    text = fts_text(rec)
    out = {
        "content": rec.content,
        "memory_type": rec.memory_type,
        "tags": list(rec.tags),
        "theme": rec.theme,
        "time_start": None if rec.time is None else rec.time.start,
        "time_end": None if rec.time is None else rec.time.end,
        "granularity": None if rec.time is None else rec.time.granularity,
        "time_text": None if rec.time is None else rec.time.text,
        "location": rec.location,
        "reason": rec.reason,
        "purpose": rec.purpose,
        "keywords": list(rec.keywords),
        "source": None if rec.source is None else to_json(rec.source.to_dict()),
        "last_reinforced_at": rec.last_reinforced_at,
        "strengthen_count": rec.strengthen_count,
        "valid_from": rec.valid_from,
        "said_at": rec.said_at,
        "lasting": rec.lasting,
        "fts_text": text,
        "fts_len": max(1, len(text.split())),
    }
    for col in ("time_start", "time_end", "last_reinforced_at", "valid_from", "said_at"):
        out[f"{col}_tz"] = utc_offset(out[col])
    return out


def insert_row(rec: MemoryRecord, embedding: Any) -> dict[str, Any]:
    """Every column of a new row (the id comes from the identity column)."""
    row = mutable_row(rec) | {"user_id": rec.user_id, "embedding": embedding, "superseded_by": rec.superseded_by}
    for col in ("created_at", "invalid_at"):
        row[col], row[f"{col}_tz"] = getattr(rec, col), utc_offset(getattr(rec, col))
    return row
