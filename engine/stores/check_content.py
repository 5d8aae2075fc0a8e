"""`memlab check`, second half: every current record's indexes agree with its content.

The row checks in `engine.stores.check` prove that records, vectors and full-text rows exist one
to one; they cannot see a vector or a full-text body that belongs to *older* content (a merge that
rewrote the text but kept the new record's vector did exactly that). This module re-derives both
from the stored content and compares:

- the dense vector: the record's text (`record_text`) embedded again with the embedder the file
  was written with (its `embedder_name`), cosine against the stored vector;
- the full-text body (SQLite): `fts_body(record)` asked back as a phrase of the record's FTS5 row.

Embedders are deterministic, so a sound record scores cosine 1.0 up to float32 rounding; anything
below `MIN_COSINE` means the vector was computed from other text. When the file's embedder cannot
be loaded here (an unknown name, missing weights), the vector half is skipped and said so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from engine.core.errors import MemlabError
from engine.core.records import MemoryRecord, record_text

__all__ = ["MIN_COSINE", "check_content", "BATCH"]

#: Below this, a stored vector was not computed from the record's current text.
MIN_COSINE = 0.999
#: Records embedded per call (bounded memory on large files).
BATCH = 256


def check_content(store: Any, *, embedder: Any | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes): content drift of each current record's vector and full-text row.

    `embedder` defaults to the one the store was written with; notes say what was skipped.
    """
    notes: list[str] = []
    if embedder is None:
        embedder, note = _stored_embedder(store)
        if note:
            notes.append(note)
    problems: list[str] = []
    bodies = _fts_reader(store)
    if bodies is None:
        notes.append("full-text bodies are not visible through this back end's protocol; not compared")
    for user in store.users():
        for batch in _batches(store.records(user), BATCH):
            if embedder is not None:
                problems.extend(_vector_drift(store, embedder, user, batch))
            if bodies is not None:
                problems.extend(_body_drift(bodies, user, batch))
    return problems, notes


def _batches(records: list[MemoryRecord], size: int) -> Iterator[list[MemoryRecord]]:
    for i in range(0, len(records), size):
        yield records[i:i + size]


def _stored_embedder(store: Any) -> tuple[Any | None, str]:
    from engine.roles.embeddings import make_embedder

    name = getattr(store, "stored_embedder_name", None) or getattr(store, "embedder_name", None) or "hash"
    try:
        return make_embedder(str(name), dim=int(getattr(store, "dim", 384))), ""
    except (MemlabError, ImportError, OSError) as exc:
        return None, f"vectors not compared: the file's embedder {name!r} cannot be loaded here ({exc})"


def _vector_drift(store: Any, embedder: Any, user: str, batch: list[MemoryRecord]) -> list[str]:
    stored = store.vectors(user, [r.id for r in batch])
    fresh = embedder.embed_documents([record_text(r) for r in batch])
    problems = []
    for rec, vec in zip(batch, fresh, strict=True):
        have = stored.get(rec.id)
        if have is None:
            continue  # a missing vector row is the row checks' finding
        a, b = np.asarray(have, dtype=float), np.asarray(vec, dtype=float)
        denom = float(np.linalg.norm(a) * np.linalg.norm(b))
        cos = float(a @ b) / denom if denom else 0.0
        if cos < MIN_COSINE:
            problems.append(f"record {rec.id} of user {user!r}: its stored vector does not match its content "
                            f"(cosine {cos:.3f} with the text embedded again); re-embed it")
    return problems


def _fts_reader(store: Any) -> Any | None:
    """A function records -> {id: whether its full-text row indexes its body} for SQLite, else None.

    The index is contentless (its text is not stored), so each body is asked back as one phrase
    restricted to the record's row: a row indexing other text, or another user's key, fails.
    Records without a row are left out (that is the row checks' finding).
    """
    from engine.stores.sqlite import SQLiteStore
    from engine.stores.sqlite.rows import fts_body

    if not isinstance(store, SQLiteStore):
        return None

    def read(batch: list[MemoryRecord]) -> dict[int, bool]:
        out: dict[int, bool] = {}
        with store.connection() as conn:
            for rec in batch:
                if conn.execute("SELECT 1 FROM records_fts WHERE rowid = ?", (rec.id,)).fetchone() is None:
                    continue
                body = fts_body(rec)
                out[rec.id] = not body or conn.execute(
                    "SELECT 1 FROM records_fts WHERE records_fts MATCH ? AND rowid = ?",
                    ('"' + body.replace('"', '""') + '"', rec.id)).fetchone() is not None
        return out

    return read


def _body_drift(read: Any, user: str, batch: list[MemoryRecord]) -> list[str]:
    have = read(batch)
    return [f"record {rec.id} of user {user!r}: its full-text row indexes other text than its content "
            f"({rec.content[:60]!r}); re-index it" for rec in batch if have.get(rec.id) is False]
