"""`MemoryEngine.ingest` archives a batch whole or not at all."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.core.clock import VirtualClock
from engine.core.errors import ClockError
from engine.memory.engine import MemoryEngine

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LINES = ["I live in Lisbon.", "My cat is called Tom.", "I work as a nurse.", "I like green tea."]


def test_a_refused_message_archives_none_of_the_batch_and_the_batch_can_be_sent_again():
    engine = MemoryEngine(store=":memory:", clock=VirtualClock(T0 + timedelta(days=1)))
    batch = [{"role": "user", "content": t, "at": T0 + timedelta(minutes=i)} for i, t in enumerate(LINES)]
    bad = [*batch[:2], {**batch[2], "at": datetime(2026, 3, 2, 9, 2)}, batch[3]]  # a naive time
    with pytest.raises(ClockError, match="naive"):
        engine.ingest("u", "s1", bad)
    assert engine.store.messages("u", session_id="s1") == []
    assert engine.store.records("u") == [] and engine.store.events(user_id="u") == []
    out = engine.ingest("u", "s1", batch)
    assert [m.content for m in engine.store.messages("u", session_id="s1")] == LINES
    assert [m.id for m in out.messages] == [m.id for m in engine.store.messages("u", session_id="s1")]
    assert out.records_added > 0
