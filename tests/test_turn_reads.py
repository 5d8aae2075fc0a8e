"""An ordinary turn reads its live window once, and the live-window guard embeds a pending
message's live records once: the reads a turn makes do not grow with the session."""

from __future__ import annotations

import random
from datetime import timedelta
from types import SimpleNamespace

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.eval.perf.corpus import BENCH_NOW
from engine.eval.perf.counting import CountingStore
from engine.eval.perf.session import UserTalk
from engine.memory.contradiction import LiveRecords
from engine.memory.engine import MemoryEngine
from engine.memory.window import read_window, window_messages
from engine.roles.embeddings import HashEmbeddings
from engine.stores.sqlite import SQLiteStore


def test_an_ordinary_turn_reads_the_window_once():
    talk, steps, clock = UserTalk(3), random.Random(4), VirtualClock(BENCH_NOW)
    store = CountingStore(SQLiteStore(":memory:", dim=64, embedder_name="hash"))
    engine = MemoryEngine(MemoryConfig(), store=store, clock=clock, embedder=HashEmbeddings(64))
    seen = []
    for _ in range(60):
        store.reset()
        r = engine.turn("u", "s", talk())
        if not r.event_fired and not r.retrieval.query.needs_assistant:
            view = read_window(store.wrapped, "u", "s", keep_recent=engine.config.keep_recent)
            # the view read before the reply: the window now, less the reply just added
            seen.append((store.calls["messages"], store.rows["messages"], len(view.messages) - 1))
        clock.advance(timedelta(seconds=steps.uniform(30, 60)))
    assert len(seen) > 20
    assert all(calls == 2 for calls, _, _ in seen)
    assert all(rows <= n + 1 for _, rows, n in seen)
    messages, cursor = window_messages(store.wrapped, "u", "s", keep_recent=engine.config.keep_recent)
    view = read_window(store.wrapped, "u", "s", keep_recent=engine.config.keep_recent)
    assert (view.messages, view.cursor) == (messages, cursor)
    assert view.last_user() == store.wrapped.messages("u", session_id="s", newest_first=True, limit=1,
                                                      roles=("user",))[0]


class Counting:
    """An embedder that records the texts of each call."""

    def __init__(self, calls: list, emb=None):
        self.calls, self.emb = calls, emb or HashEmbeddings(32)

    def embed_documents(self, texts):
        self.calls.append(list(texts))
        return self.emb.embed_documents(texts)


def test_live_records_embed_each_text_once():
    calls = []
    emb = HashEmbeddings(32)
    ctx = SimpleNamespace(embedder=Counting(calls, emb))
    live = LiveRecords()
    first = live.vectors(ctx, ["a b", "c d"])
    again = live.vectors(ctx, ["c d", "a b", "e f"])
    assert calls == [["a b", "c d"], ["e f"]]
    assert again[0] == first[1] and again[1] == first[0] and again[2] == emb.embed_documents(["e f"])[0]
    ctx.embedder = Counting(calls, emb)  # another embedder: nothing cached is reused
    live.vectors(ctx, ["a b"])
    assert calls[-1] == ["a b"]


def test_live_record_vectors_of_a_full_cache_return_every_text():
    """Keeping a new text's vector may push out the least recently used one; a call asking for both
    still gets both (read first, then kept), without embedding the old one again."""
    calls = []
    emb = HashEmbeddings(32)
    ctx = SimpleNamespace(embedder=Counting(calls, emb))
    live = LiveRecords(max_messages=1)  # 4 vectors kept
    live.vectors(ctx, ["a", "b", "c", "d"])
    got = live.vectors(ctx, ["new", "a"])  # "a" is the least recently used
    assert calls[-1] == ["new"]
    assert got == emb.embed_documents(["new", "a"])
