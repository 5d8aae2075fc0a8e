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

Side by side (`run_session(side_by_side=N)`): after the session, N rounds of three turns played
one after another, so the machine's speed (which drifts up to 2x within an hour here) is the same
for all three: the long session's next turn, a turn of a new session of the same user (turns 1-10
of each, then another session: the same memory, a short history), and a turn of a new user
(turns 1-10 of each: no memory, a short history). Their ordinary turns' medians part a long
session's cost into what its history adds (long ÷ same user's new session) and what the user's
memory adds (same user's new session ÷ new user); the product is the long session's turn against
a first turn, measured at the same moments.
"""

from __future__ import annotations

import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.eval.perf.corpus import BENCH_NOW
from engine.eval.perf.counting import CountingStore
from engine.eval.perf.stages import stage_gaps, stage_medians, turn_stages
from engine.memory.engine import MemoryEngine
from engine.roles.embeddings import HashEmbeddings
from engine.stores.sqlite import SQLiteStore

__all__ = ["DEFAULT_MARKS", "FRESH_TURNS", "SIDE_BY_SIDE_GROUPS", "TurnSample", "UserTalk", "run_session", "summarize_session"]

DEFAULT_MARKS: tuple[int, ...] = (10, 100, 1000)
STEP_SECONDS = (30.0, 60.0)
EVENT_TURNS_NEAR_MARK = 3
#: The side-by-side groups, in the order of the first round (each round starts one group later).
SIDE_BY_SIDE_GROUPS = ("long", "same-user", "new-user")
#: Turns per new session (same user) and per new user in the side-by-side rounds: "turn 10" at most.
FRESH_TURNS = 10

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
    group: str = "session"  # "session", or a side-by-side group (SIDE_BY_SIDE_GROUPS)
    stages: dict[str, float] = field(default_factory=dict)  # the turn's steps and retrieval stages, ms (stages.turn_stages)


def measure_db(path: str) -> dict[str, int]:
    """The SQLite file's size in pages (WAL included: a fresh connection reads through it), its free
    pages, and the rows of the log tables (`scores`: score rows; `score_entries`: the table's rows)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        one = lambda q: int(conn.execute(q).fetchone()[0])  # noqa: E731
        page = one("PRAGMA page_size")
        return {"bytes": one("PRAGMA page_count") * page, "free_bytes": one("PRAGMA freelist_count") * page,
                "events": one("SELECT count(*) FROM events"),
                # score rows (a retrieval's batch entry counts its rows, engine.core.scorelog) and entries
                "scores": one("SELECT coalesce(sum(CASE WHEN record_id = 0 THEN json_extract(row, '$.columns') "
                              "ELSE 1 END), 0) FROM scores"),
                "score_entries": one("SELECT count(*) FROM scores"),
                "messages": one("SELECT count(*) FROM messages"), "records": one("SELECT count(*) FROM records")}
    finally:
        conn.close()


def run_session(*, turns: int = 1000, config: MemoryConfig | None = None, seed: int = 0, dim: int = 384,
                progress: Callable[[str], None] | None = None, marks: Sequence[int] = (),
                side_by_side: int = 0) -> list[TurnSample]:
    """Play one session of `turns` scripted turns; one sample per turn (with the database's size
    and log rows at the `marks`, measured after the timed turn). `side_by_side` > 0: then that many
    rounds of the long session's next turn, a new session of the same user and a new user, played
    one after another in the same store and engine (samples with their `group`; see the module)."""
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

            def play(n: int, user_id: str, session_id: str, text: str, *, group: str = "session") -> None:
                """One timed turn, its sample, and the clock's step to the next."""
                store.reset()
                t0 = time.perf_counter()
                result = engine.turn(user_id, session_id, text)
                seconds = time.perf_counter() - t0
                samples.append(TurnSample(n=n, seconds=seconds, event=bool(result.event_fired),
                                          rows_read=store.rows_read(), reads=store.reads_by_method(),
                                          db=measure_db(path) if n in at_marks and group == "session" else None,
                                          group=group, stages=turn_stages(result)))
                clock.advance(timedelta(seconds=steps.uniform(*STEP_SECONDS)))

            for n in range(1, turns + 1):
                play(n, "session-user", "long-session", talk())
                if progress and n % 100 == 0:
                    progress(f"session: turn {n}/{turns}")
            fresh_talk = UserTalk(seed + 2)
            for i in range(side_by_side):
                j, nth = i % FRESH_TURNS + 1, i // FRESH_TURNS
                for k in range(len(SIDE_BY_SIDE_GROUPS)):  # each round starts one group later: no group always first
                    group = SIDE_BY_SIDE_GROUPS[(i + k) % len(SIDE_BY_SIDE_GROUPS)]
                    if group == "long":
                        play(turns + i + 1, "session-user", "long-session", talk(), group=group)
                    elif group == "same-user":
                        play(j, "session-user", f"new-session-{nth}", fresh_talk(), group=group)
                    else:
                        play(j, f"new-user-{nth}", "first-session", fresh_talk(), group=group)
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
    turns = [s for s in samples if mark - window < s.n <= mark]
    ordinary = [s for s in turns if not s.event]
    in_window = [s for s in turns if s.event]
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
        # every event turn of the ordinary turns' window (about one in nine turns): a median over
        # enough of them to compare runs by, which the three nearest the mark are not
        "window_event_turns": len(in_window),
        "window_event_p50_ms": _ms([s.seconds for s in in_window]),
        "rows_read_ordinary_p50": statistics.median([s.rows_read for s in ordinary]) if ordinary else None,
        "rows_read_last_ordinary": None if last is None else {"turn": last.n, "rows": last.rows_read,
                                                             "by_method": last.reads},
        "db": _db_at(samples, mark, previous),
    }


def summarize_session(samples: Sequence[TurnSample], marks: Sequence[int] = DEFAULT_MARKS) -> dict[str, Any]:
    """Per mark (within the session's length): ordinary and event turn times and rows read; with
    side-by-side samples, each group's ordinary turns' median and the ratios between them."""
    beside = [s for s in samples if s.group != "session"]
    samples = [s for s in samples if s.group == "session"]
    length = len(samples)
    shown = [m for m in marks if m <= length]
    out: dict[str, Any] = {
        "turns": length,
        "events": sum(1 for s in samples if s.event),
        "step_seconds": list(STEP_SECONDS),
        "marks": [_at_mark(samples, m, prev) for m, prev in zip(shown, [None, *shown[:-1]])],
    }
    if beside:
        out["side_by_side"] = _side_by_side(beside)
    return out


def _side_by_side(samples: Sequence[TurnSample]) -> dict[str, Any]:
    """Each group's turns and ordinary p50, and the ratios: history (the long session against a new
    session of the same user), memory (that against a new user) and both (the long session against
    a new user)."""
    groups: dict[str, Any] = {}
    for g in SIDE_BY_SIDE_GROUPS:
        mine = [s for s in samples if s.group == g]
        ordinary = [s for s in mine if not s.event]
        groups[g] = {"turns": [min(s.n for s in mine), max(s.n for s in mine)] if mine else None,
                     "ordinary_turns": len(ordinary), "ordinary_p50_ms": _ms([s.seconds for s in ordinary]),
                     "stages_p50_ms": stage_medians([s.stages for s in ordinary])}

    def ratio(a: str, b: str) -> float | None:
        x, y = groups[a]["ordinary_p50_ms"], groups[b]["ordinary_p50_ms"]
        return round(x / y, 3) if x and y else None

    return {"what": "after the session, rounds of: its next turn, a turn of a new session of the same user, a turn "
                    f"of a new user (turns 1-{FRESH_TURNS} of each new session and user), one after another",
            "rounds": max((sum(1 for s in samples if s.group == g) for g in SIDE_BY_SIDE_GROUPS), default=0),
            "groups": groups, "history_ratio": ratio("long", "same-user"),
            "memory_ratio": ratio("same-user", "new-user"), "long_vs_first_turns": ratio("long", "new-user"),
            "memory_by_stage_ms": stage_gaps(groups["same-user"]["stages_p50_ms"], groups["new-user"]["stages_p50_ms"])}
