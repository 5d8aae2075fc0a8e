"""`memlab check` re-derives each current record's vector and full-text body from its content."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from engine.core.records import MemoryRecord, SourcePointer, record_text
from engine.roles.embeddings import HashEmbeddings
from engine.stores.check import check_main
from engine.stores.check_content import check_content
from engine.stores.sqlite import SQLiteStore

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
EMB = HashEmbeddings(384)
TEXTS = ["Li prefers email over phone calls", "Li lives in Hangzhou near the West Lake",
         "Li's order 1234 shipped on Monday"]


def rec(content: str) -> MemoryRecord:
    return MemoryRecord(user_id="u", content=content, memory_type="fact", keywords=("li",), created_at=T0,
                        source=SourcePointer(session_id="s", message_ids=()))


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "m.db")
    store = SQLiteStore(path, dim=384)
    recs = [rec(t) for t in TEXTS]
    stored = store.add_records(recs, EMB.embed_documents([record_text(r) for r in recs]))
    yield path, store, stored
    store.close()


def test_a_sound_file_has_no_content_drift(db):
    _, store, _ = db
    assert check_content(store) == ([], [])


def test_a_vector_of_other_text_is_reported(db, capsys):
    path, store, stored = db
    store.replace_vectors("u", {stored[1].id: EMB.embed_documents(["something else entirely"])[0]})
    problems, _ = check_content(store)
    assert len(problems) == 1 and f"record {stored[1].id}" in problems[0] and "stored vector" in problems[0]
    assert check_main(path) == 1 and "does not match its content" in capsys.readouterr().out


def test_a_full_text_row_of_other_text_is_reported(db):
    _, store, stored = db
    with store.connection() as conn:
        conn.execute("UPDATE records_fts SET body = 'stale words' WHERE rowid = ?", (stored[2].id,))
    problems, _ = check_content(store)
    assert len(problems) == 1 and f"record {stored[2].id}" in problems[0] and "full-text" in problems[0]


def test_an_embedder_that_cannot_load_skips_vectors_and_says_so(db):
    _, store, stored = db
    store.stored_embedder_name = "no-such-embedder"
    store.replace_vectors("u", {stored[0].id: list(np.ones(384))})
    problems, notes = check_content(store)
    assert problems == [] and "vectors not compared" in notes[0]
