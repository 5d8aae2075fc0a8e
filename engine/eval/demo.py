"""`memlab demo`: a short conversation under the virtual clock, then what was stored and how it ranked."""

from __future__ import annotations

from engine.core.clock import VirtualClock, format_duration
from engine.core.config import MemoryConfig
from engine.memory.engine import DEFAULT_START, MemoryEngine
from engine.roles.embeddings import make_embedder

__all__ = ["demo_main"]


def demo_main(embedder: str = "hash") -> int:
    """A short conversation under the virtual clock, then what was stored and how it ranked."""
    clock = VirtualClock(DEFAULT_START)
    engine = MemoryEngine(MemoryConfig.from_preset("customer service"), clock=clock,
                          embedder=make_embedder(embedder))
    cfg = engine.config
    print(f"memlab demo · preset '{cfg.preset}' · slice gate {format_duration(cfg.slice_gate_seconds)} · "
          f"{engine.models.label} · embedder {embedder}")
    lines = [
        "Hi, I'm Li Mingxuan, I work as a data analyst in Shanghai.",
        "My order number is 88231 and the parcel has not arrived.",
        "I prefer email over phone calls because I am in meetings all day.",
        "My dog Rex chewed the charger, so I need a new USB-C cable.",
    ]
    for text in lines:
        r = engine.turn("alice", "s1", text)
        print(f"[{clock.now():%H:%M}] user: {text}\n         assistant: {r.reply}")
        clock.advance("5min")
    clock.advance("1h")
    print(f"\n… one hour later (virtual clock {clock.now():%Y-%m-%d %H:%M}) …")
    q = "What is my order number?"
    r = engine.turn("alice", "s1", q)
    print(f"user: {q}\nassistant: {r.reply}\n")
    print("stored records:")
    for rec in engine.records("alice"):
        print(f"  #{rec.id} [{rec.memory_type}; {', '.join(rec.tags)}; theme {rec.theme}] {rec.content}")
    if r.retrieval:
        print("\nranking for the last question (R relevance, T decay, F importance, S score):")
        for row in r.retrieval.rows[:8]:
            print(f"  #{row.record_id:<3} R {row.R:.2f}  T {row.T:.2f}  F {row.F:.2f}  S {row.S:.3f}  "
                  f"{row.verdict} ({row.why})")
    print(f"\nevents fired: {len({e.event_no for e in engine.events(user_id='alice') if e.event_no})}; "
          f"open the lab with `memlab lab` to watch it live.")
    return 0
