"""Bounded process state, measured: many turns round-robin over many users in ONE process through
ONE MemoryEngine (scripted models, VirtualClock, in-memory or file SQLite), with the process's RSS
and the sizes of every in-process collection sampled every N turns.

The structures are found, not named: every dict, list, set or deque held by the engine, its store,
ledger, recovery and model roles, and every `lru_cache` in an `engine.*` module. So the harness
keeps working when the engine's internals are renamed, and a new per-user cache shows up by itself.
A figure that grows with users × turns at the end of the run is state without a bound.
"""

from __future__ import annotations

import gc
import multiprocessing
import sys
import time
import zlib
from array import array
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.common import fast_config, turn_text
from engine.core.clock import VirtualClock
from engine.eval.runinfo import resident_memory
from engine.memory.engine import DEFAULT_START, MemoryEngine

__all__ = ["SoakReport", "rss_mb", "process_structures", "run_soak"]

_COLLECTIONS = (dict, list, set, frozenset, deque, tuple)


def rss_mb() -> float:
    """This process's resident set size in MB (`resident_memory`; elsewhere the peak from `resource`)."""
    now = resident_memory()["rss_mb"]
    if now is not None:
        return now
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def _containers(obj: Any, prefix: str, out: dict[str, int]) -> None:
    """The length of every collection among obj's attributes (and their total bytes when they hold arrays)."""
    for name, value in sorted(getattr(obj, "__dict__", {}).items()):
        if isinstance(value, _COLLECTIONS) and not isinstance(value, tuple):
            out[f"{prefix}.{name}"] = len(value)
            items = value.values() if isinstance(value, Mapping) else ()
            nbytes = sum(int(getattr(v, "nbytes", 0)) for v in items)
            if nbytes:
                out[f"{prefix}.{name} bytes"] = nbytes


def _lru_caches(out: dict[str, int]) -> None:
    """The current size of every functools.lru_cache defined at module level in engine.*."""
    for mod_name, mod in sorted(sys.modules.items()):
        if mod is None or not (mod_name == "engine" or mod_name.startswith("engine.")):
            continue
        for attr, fn in sorted(vars(mod).items()):
            info = getattr(fn, "cache_info", None)
            if callable(info) and getattr(fn, "__module__", None) == mod_name:
                out[f"lru {mod_name}.{attr}"] = info().currsize


def process_structures(engine: MemoryEngine) -> dict[str, int]:
    """Sizes of the engine's, store's, ledger's, recovery's and roles' collections, and engine.* lru_caches."""
    out: dict[str, int] = {}
    _containers(engine, "engine", out)
    parts = ("store", "ledger", "recovery", "models", "counter", "embedder")
    for part in parts:
        sub = getattr(engine, part, None)
        if sub is not None:
            _containers(sub, part, out)
    for name, sub in sorted(vars(engine).items()):  # the engine's own helpers (its log, caches) one level down
        if name not in parts and not name.startswith("__") and hasattr(sub, "__dict__") and not callable(sub) \
                and not isinstance(sub, type):
            _containers(sub, f"engine.{name.lstrip('_')}", out)
    models = getattr(engine, "models", None)
    for role, impl in sorted(getattr(models, "__dict__", {}).items()):
        if hasattr(impl, "__dict__") and not isinstance(impl, (str, int, float)):
            _containers(impl, f"models.{role}", out)
    _lru_caches(out)
    return out


@dataclass(frozen=True, kw_only=True)
class SoakReport:
    turns: int
    users: int
    store: str
    seconds: float
    turns_per_second: float
    events_fired: int
    messages_expected: int
    messages_found: int
    lost: int
    rss_start_mb: float
    rss_end_mb: float
    rss_peak_mb: float
    gc_objects_start: int
    gc_objects_end: int
    sqlite_page_cache_cap_mb: float | None
    structures_start: dict[str, int]
    structures_end: dict[str, int]
    samples: list[dict[str, Any]]

    @property
    def rss_growth_mb(self) -> float:
        return round(self.rss_end_mb - self.rss_start_mb, 1)

    def grown(self) -> dict[str, tuple[int, int]]:
        """The structures larger at the end than at the start: name -> (start, end)."""
        return {k: (self.structures_start.get(k, 0), v) for k, v in self.structures_end.items()
                if v > self.structures_start.get(k, 0)}

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rss_growth_mb": self.rss_growth_mb}


def _sample(engine: MemoryEngine, turn: int, *, collect: bool = False) -> dict[str, Any]:
    if collect:
        gc.collect()
    return {"turn": turn, "rss_mb": rss_mb(), "gc_objects": len(gc.get_objects()),
            "structures": process_structures(engine)}


def _page_cache_cap_mb(store: Any) -> float | None:
    """The store connection's SQLite page-cache cap (PRAGMA cache_size): RSS it may fill with file pages."""
    conn = getattr(store, "conn", None)
    if conn is None:
        return None
    size = conn.execute("PRAGMA cache_size").fetchone()[0]
    if size >= 0:
        size *= conn.execute("PRAGMA page_size").fetchone()[0]
    else:
        size *= -1024
    return round(size / 2**20, 1)


def _count_found(engine: MemoryEngine, users: list[str], mids: array, rids: array, crcs: array) -> int:
    """Acknowledged messages stored as sent: each turn's text (re-derived) and its reply (by checksum)."""
    found = 0
    for i in range(len(mids)):
        user = users[i % len(users)]
        got = {m.id: m.content for m in engine.store.get_messages(user, [mids[i], rids[i]])}
        found += int(got.get(mids[i]) == turn_text(user, i))
        found += int(mids[i] != rids[i] and rids[i] in got and zlib.crc32(got[rids[i]].encode()) == crcs[i])
    return found


def run_soak(turns: int = 10_000, users: int = 1_000, *, workdir: str | Path | None = None, sample_every: int = 500,
             session_every: int = 5, advance_seconds: float = 35, config: Any = None,
             fresh_process: bool = False) -> SoakReport:
    """Drive `turns` turns round-robin over `users` users (a new session every `session_every` turns of a
    user) through one engine; sample RSS and structure sizes every `sample_every` turns.

    `workdir` None: an in-memory SQLite store (its pages, ~1.5 MB of vec0 chunk per user, count in
    RSS); else `workdir/soak.db`. RSS at the start is taken after one warm-up turn on a throwaway
    engine (imports, tokenisers) and a gc.collect(); at the end after a gc.collect().
    `fresh_process`: run in a spawned interpreter, so RSS holds nothing but this soak."""
    if fresh_process:
        kw = dict(workdir=workdir, sample_every=sample_every, session_every=session_every,
                  advance_seconds=advance_seconds, config=config)
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            return pool.apply(run_soak, (turns, users), kw)
    MemoryEngine(fast_config()).turn("warm-up", "w", turn_text("warm-up", 0))
    path = ":memory:" if workdir is None else str(Path(workdir) / "soak.db")
    for stale in ([] if workdir is None else [path, path + "-wal", path + "-shm"]):
        Path(stale).unlink(missing_ok=True)  # the soak's own scratch file: every run starts empty
    clock = VirtualClock(DEFAULT_START)
    engine = MemoryEngine(config or fast_config(), store=path, clock=clock)
    names = [f"soak-u{u:05d}" for u in range(users)]
    mids, rids, crcs = array("q"), array("q"), array("L")
    fired = 0
    samples = [_sample(engine, 0, collect=True)]
    t0 = time.perf_counter()
    for i in range(turns):
        user = names[i % users]
        session = f"{user}-s{(i // users) // max(1, session_every)}"
        r = engine.turn(user, session, turn_text(user, i))
        fired += int(r.event_fired)
        mids.append(r.user_message.id)
        rids.append(r.reply_message.id if r.reply_message is not None else r.user_message.id)
        crcs.append(zlib.crc32(r.reply.encode()))
        clock.advance(advance_seconds)
        if (i + 1) % sample_every == 0 and i + 1 < turns:
            samples.append(_sample(engine, i + 1))
    seconds = time.perf_counter() - t0
    samples.append(_sample(engine, turns, collect=True))
    found = _count_found(engine, names, mids, rids, crcs)
    cache_cap = _page_cache_cap_mb(engine.store)
    engine.store.close()
    return SoakReport(
        turns=turns, users=users, store="memory" if workdir is None else "file", seconds=round(seconds, 2),
        turns_per_second=round(turns / max(seconds, 1e-9), 1), events_fired=fired, messages_expected=2 * turns,
        messages_found=found, lost=2 * turns - found, rss_start_mb=samples[0]["rss_mb"],
        rss_end_mb=samples[-1]["rss_mb"], rss_peak_mb=max(s["rss_mb"] for s in samples),
        gc_objects_start=samples[0]["gc_objects"], gc_objects_end=samples[-1]["gc_objects"],
        sqlite_page_cache_cap_mb=cache_cap,
        structures_start=samples[0]["structures"], structures_end=samples[-1]["structures"], samples=samples)
