"""What differs between the SQL back ends where the shared SQL layer (engine.stores.sql) meets them.

Three things: the parameter placeholder (`?` or `%s`), how a datetime is stored (SQLite: ISO
text keeping the offset, plus an epoch-seconds companion for range filters; PostgreSQL:
TIMESTAMPTZ plus the UTC offset in seconds, so the instant comes back in the offset it was
written with), and how one parameter matches a list (SQLite: a JSON array through json_each;
PostgreSQL: an array with `= ANY`). Everything else in the shared queries is SQL both speak
(upserts with ON CONFLICT, RETURNING, CASE).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, ClassVar

import orjson

__all__ = ["POSTGRES", "SQLITE", "Dialect", "PostgresDialect", "SQLiteDialect", "from_json", "to_json", "utc_offset"]


#: What `to_json` accepts is what `json.dumps` accepts: a datetime or a dataclass goes to `_plain`
#: (and is refused there), not to orjson's own encodings of them; int keys become strings.
_ORJSON = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_PASSTHROUGH_DATETIME \
    | orjson.OPT_PASSTHROUGH_DATACLASS


def to_json(value: Any) -> str:
    """JSON as stored: text (not jsonb), compact, non-ASCII kept, so key order and floats round-trip
    exactly. orjson writes it (a retrieval's score rows in 1/4 of `json.dumps`'s time). Standard
    JSON only: a non-finite float is written as null (`json.dumps` wrote the non-standard NaN)."""
    return orjson.dumps(value, default=_plain, option=_ORJSON).decode()


def from_json(text: str | bytes) -> Any:
    """Stored JSON back as Python values (orjson; `json` for what orjson refuses and earlier
    versions wrote: NaN, integers beyond 64 bits). Malformed text raises json.JSONDecodeError."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _plain(value: Any) -> Any:
    """orjson's fallback: float and int subclasses as plain numbers; anything else refused as json refuses it."""
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def utc_offset(value: datetime | None) -> int | None:
    """A datetime's UTC offset in whole seconds (None for None)."""
    return None if value is None else int(value.utcoffset().total_seconds())


@lru_cache(maxsize=512)
def _convert(text: str, placeholder: str) -> str:
    return text if placeholder == "?" else text.replace("?", placeholder)


class Dialect:
    """The back-end differences the shared SQL needs; see the module docstring."""

    name = "sql"
    placeholder = "?"

    def sql(self, text: str) -> str:
        """Shared SQL is written with `?`; this is it in the back end's placeholder style."""
        return _convert(text, self.placeholder)

    def time_aux(self, column: str) -> str:
        """The companion column stored beside the time column `column`."""
        raise NotImplementedError

    def encode_time(self, value: datetime | None) -> tuple[Any, Any]:
        """Values for (`column`, its companion)."""
        raise NotImplementedError

    def decode_time(self, main: Any, aux: Any) -> datetime | None:
        """The datetime back from (`column`, its companion), offset as written."""
        raise NotImplementedError

    def time_scalar(self, value: datetime) -> Any:
        """The value of a time column stored without a companion (ordering and display only)."""
        raise NotImplementedError

    def time_filter(self, column: str, value: datetime) -> tuple[str, Any]:
        """(column to compare, value) for a range filter on the time column `column`."""
        raise NotImplementedError

    def in_list(self, column: str) -> str:
        """SQL that is true when `column` is in the list passed as one parameter (see list_param)."""
        raise NotImplementedError

    def list_param(self, values: Sequence[Any]) -> Any:
        raise NotImplementedError


class SQLiteDialect(Dialect):
    name = "sqlite"
    placeholder = "?"
    #: companions named before the `<column>_ts` convention settled
    _AUX: ClassVar[dict[str, str]] = {"created_at": "created_ts"}

    def time_aux(self, column: str) -> str:
        return self._AUX.get(column, f"{column}_ts")

    def encode_time(self, value: datetime | None) -> tuple[Any, Any]:
        return (None, None) if value is None else (value.isoformat(), value.timestamp())

    def decode_time(self, main: Any, aux: Any) -> datetime | None:
        return None if main is None else datetime.fromisoformat(main)

    def time_scalar(self, value: datetime) -> Any:
        return value.isoformat()

    def time_filter(self, column: str, value: datetime) -> tuple[str, Any]:
        return self.time_aux(column), value.timestamp()

    def in_list(self, column: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(?))"

    def list_param(self, values: Sequence[Any]) -> Any:
        return to_json(list(values))


class PostgresDialect(Dialect):
    name = "postgres"
    placeholder = "%s"

    def time_aux(self, column: str) -> str:
        return f"{column}_tz"

    def encode_time(self, value: datetime | None) -> tuple[Any, Any]:
        return value, utc_offset(value)

    def decode_time(self, main: Any, aux: Any) -> datetime | None:
        if main is None:
            return None
        return main.astimezone(UTC if not aux else timezone(timedelta(seconds=aux)))

    def time_scalar(self, value: datetime) -> Any:
        return value

    def time_filter(self, column: str, value: datetime) -> tuple[str, Any]:
        return column, value

    def in_list(self, column: str) -> str:
        return f"{column} = ANY(%s)"

    def list_param(self, values: Sequence[Any]) -> Any:
        return list(values)


SQLITE = SQLiteDialect()
POSTGRES = PostgresDialect()
