"""`source_context`: a record's stored vector blends in its source messages' text (off by default)."""

from datetime import UTC, datetime

import numpy as np
import pytest

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.errors import ConfigError
from engine.core.records import record_text
from engine.memory.engine import MemoryEngine

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LINES = ["I'm allergic to peanuts, and I moved to Porto last spring because of my new job at the harbour."]


def _ingested(w: float):
    engine = MemoryEngine(MemoryConfig.from_preset("customer service", source_context=w), clock=VirtualClock(T0))
    out = engine.ingest("u", "s1", [{"role": "user", "content": t, "at": T0} for t in LINES])
    assert out.records_added > 0
    recs = engine.store.records("u", include_invalid=False)
    return engine, recs, engine.store.vectors("u", [r.id for r in recs])


def _unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


def test_off_by_default_stores_the_record_text_embedding():
    assert MemoryConfig().source_context == 0.0
    engine, recs, vecs = _ingested(0.0)
    for r in recs:
        expected = engine.embedder.embed_documents([record_text(r)])[0]
        assert np.allclose(_unit(vecs[r.id]), _unit(expected), atol=1e-5)


def test_blend_takes_the_given_share_from_the_source_messages():
    engine, recs, vecs = _ingested(0.5)
    msgs = {m.id: m.content for m in engine.store.messages("u", session_id="s1")}
    for r in recs:
        own = _unit(engine.embedder.embed_documents([record_text(r)])[0])
        src = _unit(engine.embedder.embed_documents([" ".join(msgs[i] for i in r.source.message_ids)])[0])
        assert np.allclose(_unit(vecs[r.id]), _unit(0.5 * own + 0.5 * src), atol=1e-5)
        if not np.allclose(own, src):  # the blend moved the vector toward the turn
            assert float(_unit(vecs[r.id]) @ src) > float(own @ src)


def test_out_of_range_is_refused():
    with pytest.raises(ConfigError):
        MemoryConfig.from_preset("customer service", source_context=1.5)
