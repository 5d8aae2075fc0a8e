"""Whole turns of ONE long session: `MemoryEngine.turn` at turn 10, 100 and 1,000.

One user talks for `turns` turns in one session, on a virtual clock stepping a seeded 30–60 s per
turn, so memory events fire as the gate decides in production (the default preset's slice gate
is about 15 minutes). The store is a fresh SQLite file wrapped in a `CountingStore`, and every
turn's wall time, whether an event fired, and the store rows it read are kept. At each mark the
report gives the ordinary (no-event) turns in the window before the mark, the event turns
nearest the mark, and the rows an ordinary turn read: the figure that shows whether a turn's
reads grow with the session's length. At each mark the database is measured too (its pages, in
use and free, and the rows of the log tables `events` and `scores`): bytes per turn so far and
since the previous mark show whether the log is bounded (engine.memory.retention).
"""

from __future__ import annotations

import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.eval.perf.corpus import BENCH_NOW
from engine.eval.perf.counting import CountingStore
from engine.memory.engine import MemoryEngine
from engine.roles.embeddings import HashEmbeddings
from engine.stores.sqlite import SQLiteStore

__all__ = ["DEFAULT_MARKS", "TurnSample", "UserTalk", "run_session", "summarize_session"]

DEFAULT_MARKS: tuple[int, ...] = (10, 100, 1000)
STEP_SECONDS = (30.0, 60.0)
EVENT_TURNS_NEAR_MARK = 3

_CITIES = ["Lisbon", "Osaka", "Denver", "Nairobi", "Hanoi", "Bergen", "Quito", "Tbilisi"]
_FOODS = ["ramen", "tacos", "dumplings", "paella", "falafel", "pho", "risotto", "curry"]
_PETS = ["Rex", "Miso", "Pepper", "Biscuit", "Luna", "Otis"]
_THINGS = ["the blue kettle", "a USB-C cable", "hiking boots", "a standing desk", "noise-cancelling headphones"]
_JOBS = ["data analyst", "nurse", "architect", "teacher", "pharmacist", "mechanic"]
_TEMPLATES = [
    "I live in {city} now, close to the river.",
    "My favourite food is {food}, especially on Fridays.",
    "My dog {pet} chewed {thing} again yesterday.",
    "I work as a {job} at a small firm in {city}.",
    "I prefer email over phone calls because I am in meetings all day.",
    "I decided to order {thing} before the weekend.",
    "My order number is {num} and the parcel has not arrived.",
    "Can you check whether {thing} ships to {city}?",
    "What did I say about {food} last time?",
    "How long does delivery to {city} usually take?",
    "Thanks, that helps.",
    "I'm allergic to peanuts, so no {food} with satay sauce.",
    "We visited {city} in spring and loved it.",
    "Is there a discount on {thing} this month?",
]


class UserTalk:
    """A seeded stream of ordinary customer messages: facts, preferences, questions, small talk."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def __call__(self) -> str:
        r = self.rng
        return r.choice(_TEMPLATES).format(city=r.choice(_CITIES), food=r.choice(_FOODS), pet=r.choice(_PETS),
                                           thing=r.choice(_THINGS), job=r.choice(_JOBS), num=r.randint(10000, 99999))


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnSample:
    """One turn's figures: its number, wall time, whether an event fired, store rows read."""

    n: int
    seconds: float
    event: bool
    rows_read: int
    reads: dict[str, int]  # rows per read method
    db: dict[str, int] | None = None  # the database at this turn (measured at the report's marks only)
    control: bool = False  # a turn of the control session (`run_session(control_turns=...)`)


def measure_db(path: str) -> dict[str, int]:
    """The SQLite file's size in pages (WAL included: a fresh connection reads through it), its free
    pages, and the rows of the log tables."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        one = lambda q: int(conn.execute(q).fetchone()[0])  # noqa: E731
        page = one("PRAGMA page_size")
        return {"bytes": one("PRAGMA page_count") * page, "free_bytes": one("PRAGMA freelist_count") * page,
                "events": one("SELECT count(*) FROM events"), "scores": one("SELECT count(*) FROM scores"),
                "messages": one("SELECT count(*) FROM messages"), "records": one("SELECT count(*) FROM records")}
    finally:
        conn.close()


def run_session(*, turns: int = 1000, config: MemoryConfig | None = None, seed: int = 0, dim: int = 384,
                progress: Callable[[str], None] | None = None, marks: Sequence[int] = (),
                control_turns: int = 0) -> list[TurnSample]:
    """Play one session of `turns` scripted turns; one sample per turn (with the database's size
    and log rows at the `marks`, measured after the timed turn). `control_turns` > 0: then a new
    user's first turns in the same store and engine (`control=True` samples, after the others):
    turns as early as the session's first ones, timed minutes later, so a slower machine is told
    apart from a slower turn (this 2-core machine's speed drifts 10-25 % over a run)."""
    at_marks = {int(m) for m in marks}
    talk = UserTalk(seed)
    steps = random.Random(seed + 1)
    clock = VirtualClock(BENCH_NOW)
    samples: list[TurnSample] = []
    with tempfile.TemporaryDirectory(prefix="memlab-session-") as tmpdir:
        path = os.path.join(tmpdir, "session.db")
        store = CountingStore(SQLiteStore(path, dim=dim, embedder_name="hash"))
        try:
            engine = MemoryEngine(config, store=store, clock=clock, embedder=HashEmbeddings(dim))

            def play(n: int, user_id: str, session_id: str, text: str, *, control: bool = False) -> None:
                """One timed turn, its sample, and the clock's step to the next."""
                store.reset()
                t0 = time.perf_counter()
                result = engine.turn(user_id, session_id, text)
                seconds = time.perf_counter() - t0
                samples.append(TurnSample(n=n, seconds=seconds, event=bool(result.event_fired),
                                          rows_read=store.rows_read(), reads=store.reads_by_method(),
                                          db=measure_db(path) if n in at_marks and not control else None,
                                          control=control))
                clock.advance(timedelta(seconds=steps.uniform(*STEP_SECONDS)))

            for n in range(1, turns + 1):
                play(n, "session-user", "long-session", talk())
                if progress and n % 100 == 0:
                    progress(f"session: turn {n}/{turns}")
            control_talk = UserTalk(seed + 2)
            for n in range(1, control_turns + 1):
                play(n, "control-user", "control-session", control_talk(), control=True)
        finally:
            store.close()
    return samples


def _ms(xs: Sequence[float]) -> float | None:
    return round(statistics.median(xs) * 1000, 3) if xs else None


def _db_at(samples: Sequence[TurnSample], mark: int, previous: int | None) -> dict[str, Any] | None:
    """The database at the mark: bytes, bytes per turn so far and since the previous mark, log rows."""
    here = samples[mark - 1].db if 0 < mark <= len(samples) else None
    if here is None:
        return None
    out: dict[str, Any] = {**here, "bytes_per_turn": round(here["bytes"] / mark, 1)}
    before = samples[previous - 1].db if previous and 0 < previous <= len(samples) else None
    if before is not None and mark > previous:
        out["bytes_per_turn_since"] = {"from_turn": previous,
                                       "bytes": round((here["bytes"] - before["bytes"]) / (mark - previous), 1),
                                       "in_use_bytes": round(((here["bytes"] - here["free_bytes"])
                                                              - (before["bytes"] - before["free_bytes"]))
                                                             / (mark - previous), 1)}
    return out


def _at_mark(samples: Sequence[TurnSample], mark: int, previous: int | None = None) -> dict[str, Any]:
    window = max(10, mark // 10)
    ordinary = [s for s in samples if mark - window < s.n <= mark and not s.event]
    events = sorted((s for s in samples if s.event), key=lambda s: (abs(s.n - mark), s.n))
    near = sorted(events[:EVENT_TURNS_NEAR_MARK], key=lambda s: s.n)
    last = max(ordinary, key=lambda s: s.n) if ordinary else None
    return {
        "mark": mark,
        "ordinary_window": [max(1, mark - window + 1), mark],
        "ordinary_turns": len(ordinary),
        "ordinary_p50_ms": _ms([s.seconds for s in ordinary]),
        "ordinary_max_ms": round(max(s.seconds for s in ordinary) * 1000, 3) if ordinary else None,
        "event_turns": [s.n for s in near],
        "event_p50_ms": _ms([s.seconds for s in near]),
        "rows_read_ordinary_p50": statistics.median([s.rows_read for s in ordinary]) if ordinary else None,
        "rows_read_last_ordinary": None if last is None else {"turn": last.n, "rows": last.rows_read,
                                                             "by_method": last.reads},
        "db": _db_at(samples, mark, previous),
    }


def summarize_session(samples: Sequence[TurnSample], marks: Sequence[int] = DEFAULT_MARKS) -> dict[str, Any]:
    """Per mark (within the session's length): ordinary and event turn times and rows read; with
    control samples, their ordinary turns' median."""
    control = [s for s in samples if s.control]
    samples = [s for s in samples if not s.control]
    length = len(samples)
    shown = [m for m in marks if m <= length]
    out: dict[str, Any] = {
        "turns": length,
        "events": sum(1 for s in samples if s.event),
        "step_seconds": list(STEP_SECONDS),
        "marks": [_at_mark(samples, m, prev) for m, prev in zip(shown, [None, *shown[:-1]])],
    }
    if control:
        ordinary = [s for s in control if not s.event]
        out["control"] = {"what": "a new user's first turns in the same store and engine, played after the session",
                          "turns": len(control), "ordinary_turns": len(ordinary),
                          "ordinary_p50_ms": _ms([s.seconds for s in ordinary])}
    return out
