"""NUL-safe text for PostgreSQL: its text type cannot hold U+0000, so text travels escaped.

The escape is a noncharacter (U+10FFFE) that escapes itself (doubled) and NUL (followed by
"0"); `register_text` installs dumpers and loaders doing it on a connection, so every string
parameter and every text column round-trips exactly, NUL included.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg.types.string import (
    StrBinaryDumper,
    StrDumperUnknown,
    TextBinaryLoader,
    TextLoader,
)

__all__ = ["escape_text", "register_text", "unescape_text"]

_ESC = "\U0010fffe"
_UNESC = re.compile(_ESC + "(.)", re.DOTALL)


def escape_text(text: str) -> str:
    """The text without NUL, reversibly (see unescape_text)."""
    if "\x00" in text or _ESC in text:
        return text.replace(_ESC, _ESC + _ESC).replace("\x00", _ESC + "0")
    return text


def unescape_text(text: str) -> str:
    if _ESC in text:
        return _UNESC.sub(lambda m: "\x00" if m.group(1) == "0" else _ESC, text)
    return text


class _SafeStrDumper(StrDumperUnknown):
    def dump(self, obj: str) -> bytes:
        return super().dump(escape_text(obj))


class _SafeStrBinaryDumper(StrBinaryDumper):
    def dump(self, obj: str) -> bytes:
        return super().dump(escape_text(obj))


class _SafeTextLoader(TextLoader):
    def load(self, data: Any) -> str:
        return unescape_text(super().load(data))


class _SafeTextBinaryLoader(TextBinaryLoader):
    def load(self, data: Any) -> str:
        return unescape_text(super().load(data))


def register_text(conn: psycopg.Connection) -> None:
    """Make every str parameter and text/varchar/bpchar column of `conn` NUL-safe."""
    conn.adapters.register_dumper(str, _SafeStrBinaryDumper)
    conn.adapters.register_dumper(str, _SafeStrDumper)  # last registered: the default (unknown oid)
    for name in ("text", "varchar", "bpchar"):
        conn.adapters.register_loader(name, _SafeTextLoader)
        conn.adapters.register_loader(name, _SafeTextBinaryLoader)
