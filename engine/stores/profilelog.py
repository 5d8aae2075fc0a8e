"""Profile history entries as the stores keep them: each one's changes to the entry before it.

An induction's `ProfileHistoryEntry` holds the profile before it and after it. Storing both whole
made the history grow with the square of a long life. LoCoMo's five conversations as one
2,760-turn session stored 354 entries, 18.2 MB, 39 % of the database, for a profile of ~700
values. So an entry is stored as its changes whenever its `before` is exactly the `after` of
the entry stored before it (the chain's tip). That is checked by a digest every entry carries
(`after_digest`: blake2b of the `after` in its order). The stored form is:
- `order`: the fields of `after`, in order;
- `changes`: for each field that changed, the values `removed` from it and those `appended` to
  it, or its whole `values` when it changed in another way (values reordered);
- `after_digest`.

The entry is verified once more before it is written: rebuilding `after` from `before` must
give it back exactly, fields and values in order. Anything else is stored whole, as before. So are
the first entry of a user and an entry after a profile saved without one. Reading rebuilds each
entry from the one before it, in id order. Entries stored whole by earlier versions read as they
always did.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from engine.core.errors import StoreError
from engine.core.records import ProfileHistoryEntry
from engine.stores.dialect import to_json

__all__ = ["digest", "stored_entry", "read_entries", "rebuilt"]

Fields = Mapping[str, Sequence[str]]


def digest(fields: Fields) -> str:
    """A profile's fields, in order, as a short hex digest (blake2b, 16 bytes)."""
    return hashlib.blake2b(to_json({k: list(v) for k, v in fields.items()}).encode(), digest_size=16).hexdigest()


def stored_entry(entry: ProfileHistoryEntry, tip_digest: str | None) -> dict[str, Any]:
    """The JSON object to store for `entry`, given the `after_digest` of the user's last stored
    entry (None: there is none, or it has no digest)."""
    whole = {**entry.to_dict(), "after_digest": digest(entry.after)}
    if tip_digest is None or tip_digest != digest(entry.before):
        return whole
    changes: dict[str, dict[str, list[str]]] = {}
    for key, values in entry.after.items():
        new, old = list(values), list(entry.before.get(key, ()))
        if new == old:
            continue
        kept = [v for v in old if v in new]
        if new[:len(kept)] == kept and len(set(new)) == len(new):
            changes[key] = {"removed": [v for v in old if v not in new], "appended": new[len(kept):]}
        else:
            changes[key] = {"values": new}
    compact = {"user_id": entry.user_id, "version": entry.version, "at": whole["at"], "record_ids": whole["record_ids"],
               "order": list(entry.after), "changes": changes, "after_digest": whole["after_digest"]}
    if list(rebuilt(entry.before, compact).items()) != [(k, tuple(v)) for k, v in entry.after.items()]:
        return whole
    return compact


def rebuilt(before: Fields, stored: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The `after` of a stored compact entry, from the `before` it continues."""
    out: dict[str, tuple[str, ...]] = {}
    changes = stored.get("changes") or {}
    for key in stored["order"]:
        old = tuple(before.get(key, ()))
        change = changes.get(key)
        if change is None:
            out[key] = old
        elif "values" in change:
            out[key] = tuple(change["values"])
        else:
            gone = set(change.get("removed", ()))
            out[key] = tuple(v for v in old if v not in gone) + tuple(change.get("appended", ()))
    return out


def read_entries(user_id: str, stored: Sequence[Mapping[str, Any]]) -> list[ProfileHistoryEntry]:
    """A user's stored entries (in id order) as `ProfileHistoryEntry`s, each compact one rebuilt
    from the one before it. A compact entry with nothing before it raises StoreError."""
    out: list[ProfileHistoryEntry] = []
    tip: dict[str, tuple[str, ...]] | None = None
    for n, obj in enumerate(stored):
        if "changes" not in obj:
            entry = ProfileHistoryEntry.from_dict(obj)
        elif tip is None:
            raise StoreError(f"profile history of user {user_id!r}: entry {n + 1} (version {obj.get('version')}) "
                             "holds changes to an entry that is not stored; run `memlab check`")
        else:
            entry = ProfileHistoryEntry.from_dict({**obj, "before": tip, "after": rebuilt(tip, obj)})
        tip = {k: tuple(v) for k, v in entry.after.items()}
        out.append(entry)
    return out
