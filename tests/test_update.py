"""The dimension-aware update step on its own: blocking, cosine, the consolidator's three answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from engine.core.config import MemoryConfig
from engine.core.records import MemoryRecord, SourcePointer
from engine.core.text import content_tokens
from engine.memory.retrieval import record_text
from engine.memory.update import apply_updates, block, keyword_set
from engine.roles.embeddings import HashEmbeddings
from engine.roles.types import ConsolidationDecision
from engine.stores.sqlite import SQLiteStore

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
EMB = HashEmbeddings(384)
CFG = MemoryConfig.from_preset("customer service")


def rec(content, keywords, memory_type="fact", **kw):
    return MemoryRecord(user_id="u", content=content, memory_type=memory_type, keywords=tuple(keywords),
                        created_at=T0, last_reinforced_at=T0, source=SourcePointer(session_id="s", message_ids=(1,)),
                        **kw)


@pytest.fixture
def store():
    s = SQLiteStore(":memory:", dim=384)
    yield s
    s.close()


def put(store, r):
    return store.add_records([r], EMB.embed_documents([record_text(r)]))[0]


def run(store, new, answer):
    calls = []

    def decide(inp):
        calls.append(inp)
        return answer

    with store.transaction():
        stats = apply_updates(store, user_id="u", records=[new], vectors=EMB.embed_documents([record_text(new)]),
                              decide=decide, config=CFG, now=T0 + timedelta(days=1), cosine_threshold=0.3,
                              embed=EMB.embed_documents)
    return stats, calls


def test_merge_reinforces_and_reembeds_the_merged_text(store):
    old = put(store, rec("Li prefers email over phone calls", ["email", "phone"]))
    merged_text = "Li prefers email over phone calls, all day"
    stats, calls = run(store, rec("Li prefers email to phone calls", ["email", "phone"]),
                       ConsolidationDecision(action="MERGE", merged_content=merged_text, reason="same preference"))
    assert len(calls) == 1 and stats.merged[0]["existing"] == old.id and stats.merged[0]["reembedded"]
    after = store.get_records("u", [old.id])[0]
    assert after.content == merged_text and after.strengthen_count == old.strengthen_count + 1
    assert after.last_reinforced_at == T0 + timedelta(days=1)
    stored = np.asarray(store.vectors("u", [old.id])[old.id])
    expected = np.asarray(EMB.embed_documents([record_text(after)])[0])
    assert float(stored @ expected / (np.linalg.norm(stored) * np.linalg.norm(expected))) > 0.999
    assert store.count_records("u") == 1  # a restatement adds nothing
    assert [rid for rid, _ in store.search_bm25("u", "all day", k=5)] == [old.id]  # full text follows


def test_supersede_keeps_the_old_row_and_links_it(store):
    old = put(store, rec("Li lives in Beijing", ["lives in", "beijing"]))
    stats, _ = run(store, rec("Li lives in Shanghai", ["lives in", "shanghai"]),
                   ConsolidationDecision(action="SUPERSEDE", reason="moved"))
    new_id = stats.superseded[0]["successor"]
    before = store.get_records("u", [old.id])[0]
    assert not before.is_current and before.superseded_by == new_id and before.invalid_at is not None
    assert store.count_records("u", include_invalid=True) == 2  # never deleted


def test_keep_both_adds_a_record(store):
    put(store, rec("Li has a dog called Rex", ["dog", "rex"]))
    stats, _ = run(store, rec("Li has a dog called Bo", ["dog", "bo"]), ConsolidationDecision(action="KEEP_BOTH"))
    assert len(stats.kept_both) == 1 and store.count_records("u") == 2


def test_blocking_skips_unrelated_records_and_counts_what_it_saved(store):
    for i in range(12):
        put(store, rec(f"Li bought item number {i} at the market", [f"item {i}", "market"]))
    stats, calls = run(store, rec("Li's favourite colour is teal", ["favourite colour", "teal"]),
                       ConsolidationDecision(action="MERGE"))
    assert calls == [] and stats.comparisons_without_blocking == 12 and stats.comparisons_done == 0
    assert stats.comparisons_saved == 12 and len(stats.added) == 1


def test_block_needs_keyword_overlap_and_a_current_record():
    new = rec("Li lives in Porto", ["lives in", "porto"])
    same_attr = rec("Li lives in Lisbon", ["lives in", "lisbon"], id=1)
    other = rec("Li likes tea", ["tea"], id=2)
    gone = rec("Li lives in Faro", ["lives in", "faro"], id=3, invalid_at=T0, superseded_by=1)
    assert [r.id for r in block(new, [same_attr, other, gone], config=CFG)] == [1]
    assert keyword_set(rec("Li adopted a grey cat", [])) == set(content_tokens("Li adopted a grey cat")) != set()
