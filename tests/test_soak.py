"""Bounded process state, measured: a short soak (300 turns over 100 users, one process, one engine)
completes with nothing lost, and its sampler sees the process's RSS and every in-process structure.
The full soak (10,000 turns over 1,000 users) runs in `python benchmarks/reliability.py --full`.
"""

from __future__ import annotations

from benchmarks.harness.common import fast_config
from benchmarks.harness.soak import process_structures, rss_mb, run_soak
from engine.memory.engine import MemoryEngine


def test_short_soak_loses_nothing_and_samples_rss_and_structures(tmp_path):
    r = run_soak(300, 100, workdir=tmp_path, sample_every=100)
    print(f"\nsoak: {r.turns} turns / {r.users} users, {r.turns_per_second} turns/s, RSS {r.rss_start_mb} → "
          f"{r.rss_end_mb} MB (peak {r.rss_peak_mb}); grown: {r.grown()}")
    assert r.turns == 300 and r.users == 100 and r.store == "file"
    assert r.messages_expected == 600
    assert r.lost == 0 and r.messages_found == 600
    assert r.events_fired > 100  # the gate opened: extraction and updates ran for many users
    assert [s["turn"] for s in r.samples] == [0, 100, 200, 300]
    assert 0 < r.rss_start_mb <= r.rss_peak_mb and r.rss_end_mb > 0
    assert any(k.startswith("engine.") for k in r.structures_end)
    assert any(k.startswith("store.") for k in r.structures_end)
    assert any(k.startswith("lru engine.") for k in r.structures_end)
    assert r.grown(), "nothing grew over 300 turns: the sampler is not looking at the engine"


def test_sampler_finds_structures_by_shape_not_by_name():
    engine = MemoryEngine(fast_config())
    before = process_structures(engine)
    engine.per_user_thing_added_later = {"u1": 1, "u2": 2}
    engine.store.renamed_cache = ["a", "b", "c"]
    after = process_structures(engine)
    assert "engine.per_user_thing_added_later" not in before
    assert after["engine.per_user_thing_added_later"] == 2
    assert after["store.renamed_cache"] == 3
    assert rss_mb() > 0
