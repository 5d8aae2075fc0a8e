"""Mechanical repairs of a structured answer, before validation: unknown keys, loose lists."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["drop_unknown_keys", "as_str_list", "validation_summary"]


def drop_unknown_keys(data: Any, model: type[BaseModel], path: str, notes: list[str]) -> Any:
    """Remove keys the schema does not know (the role models forbid extras), recursively."""
    if not isinstance(data, dict):
        return data
    fields = model.model_fields
    out = {}
    for k, v in data.items():
        if k not in fields:
            notes.append(f"dropped unknown field {path}{k}")
            continue
        sub = _nested_model(fields[k].annotation)
        if sub is not None:
            if isinstance(v, list):
                v = [drop_unknown_keys(x, sub, f"{path}{k}[{i}].", notes) for i, x in enumerate(v)]
            else:
                v = drop_unknown_keys(v, sub, f"{path}{k}.", notes)
        out[k] = v
    return out


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def as_str_list(value: Any) -> list[str]:
    """A loose answer as a list of non-blank strings: None → [], "x" → ["x"], [1, None] → ["1"]."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, (list, tuple)):
        return [str(x) for x in value if x is not None and str(x).strip()]
    return [str(value)]


def validation_summary(exc: ValidationError) -> str:
    """The first few validation errors as one short line ("records.0.tags: ...; (+3 more)")."""
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()[:4]]
    more = f" (+{exc.error_count() - 4} more)" if exc.error_count() > 4 else ""
    return "; ".join(parts) + more
