"""Single-valued attributes read from a record's canonical content (placeholder until the roles split lands)."""

from __future__ import annotations

__all__ = ["attribute_of"]


def attribute_of(content: str) -> tuple[str, str] | None:
    from engine.roles.scripted import _attribute

    return _attribute(content)
