"""Fault injection: role objects that raise, time out or return junk; an embedder that fails; a
database locked past busy_timeout, read-only, or full.

Each fault gives a clear error or a logged retry, the turn answers where it can, and nothing
stored before is lost. One function per fault family; `run_faults` runs them all on one tally.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness.common import fast_config, turn_text, user_marker
from engine.core.clock import VirtualClock
from engine.core.errors import MemlabError, ModelCallError, StoreError
from engine.memory.engine import DEFAULT_START, MemoryEngine
from engine.stores.check import check_store
from engine.stores.sqlite import SQLiteStore

__all__ = ["FaultReport", "ROLE_FAULTS", "run_faults"]


@dataclass(frozen=True, kw_only=True)
class FaultReport:
    injected: dict[str, int]
    handled: dict[str, int]
    failures: list[str]
    lost: int

    @property
    def total(self) -> int:
        return sum(self.injected.values())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total": self.total}


class _Boom:
    """A role object whose every method raises `exc` (a timeout, a provider error)."""

    def __init__(self, exc: BaseException):
        self.exc = exc
        self.calls = 0

    def __getattr__(self, name: str):
        def fail(*_a, **_k):
            self.calls += 1
            raise self.exc

        return fail


class _Junk:
    """A role object that answers with junk instead of its schema."""

    def __init__(self) -> None:
        self.calls = 0

    def __getattr__(self, name: str):
        def junk(*_a, **_k):
            self.calls += 1
            return {"records": "not a list", "oops": float("nan")}

        return junk


class _BadEmbedder:
    def __init__(self, inner: Any, *, docs: bool = True, query: bool = False):
        self.inner, self.dim, self.docs, self.query = inner, inner.dim, docs, query

    def embed_documents(self, texts):
        if self.docs:
            raise ConnectionError("embedding service unreachable")
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        if self.query:
            raise ConnectionError("embedding service unreachable")
        return self.inner.embed_query(text)


#: Model-role faults: kind -> (the role on `engine.models`, a factory for the broken stand-in).
ROLE_FAULTS: dict[str, tuple[str, Any]] = {
    "extractor timeout": ("extractor", lambda: _Boom(TimeoutError("extractor timed out after 30 s"))),
    "extractor exception": ("extractor", lambda: _Boom(RuntimeError("provider 500"))),
    "extractor malformed output": ("extractor", _Junk),
    "consolidator exception": ("consolidator", lambda: _Boom(ModelCallError("consolidator failed after 3 retries"))),
    "tuner malformed output": ("tuner", _Junk),
    "inducer timeout": ("inducer", lambda: _Boom(TimeoutError("inducer timed out"))),
    "inducer malformed output": ("inducer", _Junk),
    "query parser exception": ("query_parser", lambda: _Boom(RuntimeError("query parser 503"))),
    "query parser malformed output": ("query_parser", _Junk),
}


@dataclass
class _Tally:
    """What the fault families inject, handle, fail and lose; and the engines they start."""

    work: Path
    injected: Counter[str] = field(default_factory=Counter)
    handled: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    lost: int = 0

    def fresh(self, name: str, **store_kw) -> tuple[MemoryEngine, VirtualClock]:
        """A file-backed engine with four turns stored before the fault."""
        clock = VirtualClock(DEFAULT_START)
        store = SQLiteStore(str(self.work / f"fault-{name}.db"), **store_kw)
        eng = MemoryEngine(fast_config(), store=store, clock=clock)
        for i in range(4):
            eng.turn("fu", "fs", turn_text("fu", i))
            clock.advance(35)
        return eng, clock

    @staticmethod
    def stored(eng: MemoryEngine) -> tuple[list[str], list[str]]:
        return ([m.content for m in eng.store.messages("fu")],
                [r.content for r in eng.store.records("fu", include_invalid=True)])

    def count_lost(self, eng: MemoryEngine, before: tuple[list[str], list[str]]) -> int:
        """Messages and records stored before the fault that are gone now; added to the tally."""
        msgs, recs = self.stored(eng)
        n = sum(1 for m in before[0] if m not in msgs) + sum(1 for r in before[1] if r not in recs)
        self.lost += n
        return n

    def report(self) -> FaultReport:
        return FaultReport(injected=dict(self.injected), handled=dict(self.handled), failures=self.failures,
                           lost=self.lost)


def _still_pending_after_recovery(eng: MemoryEngine, clock: VirtualClock, text: str) -> bool:
    """One more turn (its event retries what was kept pending); True if an older message is still pending."""
    clock.advance(35)
    last = eng.turn("fu", "fs", text)
    return bool([m for m in eng.pending("fu", "fs") if m.id < last.user_message.id])


def _role_fault(t: _Tally, kind: str) -> None:
    """A model role raises, times out or returns junk: the turn answers, the error is logged, and
    the next event (role repaired) extracts what was kept pending."""
    role, make_broken = ROLE_FAULTS[kind]
    broken = make_broken()
    probe = "My order number is 7781 and my account tag is " + user_marker("fu") + "."  # an update: consolidates
    t.injected[kind] += 1
    eng, clock = t.fresh(kind.replace(" ", "-"))
    before = t.stored(eng)
    good = getattr(eng.models, role)
    setattr(eng.models, role, broken)
    errs_before = len(eng.store.events(user_id="fu", kind="error"))
    try:
        answered = bool(eng.turn("fu", "fs", probe).reply)
        clock.advance(35)  # the probe matures now: the next event extracts it under the fault
        answered = answered and bool(eng.turn("fu", "fs", "Is that noted?").reply)
    except MemlabError as exc:
        answered = False
        t.failures.append(f"{kind}: the turn did not answer ({type(exc).__name__}: {exc})")
    except Exception as exc:  # noqa: BLE001 - an unexpected type is exactly what we report
        answered = False
        t.failures.append(f"{kind}: the turn raised {type(exc).__name__}: {exc}")
    logged = len(eng.store.events(user_id="fu", kind="error")) > errs_before
    setattr(eng.models, role, good)
    pending_old = _still_pending_after_recovery(eng, clock, "Thanks, that is all.")
    n_lost = t.count_lost(eng, before)
    if not broken.calls:
        t.failures.append(f"{kind}: the fault was never reached (the {role} was not called)")
    elif answered and logged and not pending_old and not n_lost:
        t.handled[kind] += 1
    elif answered:
        t.failures.append(f"{kind}: error logged={logged}, message still pending after recovery={pending_old}")
    eng.store.close()


def _chat_fault(t: _Tally) -> None:
    """The chat model fails: a clear ModelCallError that says retry, the user message kept."""
    t.injected["chat exception"] += 1
    eng, _clock = t.fresh("chat")
    before = t.stored(eng)
    good_chat = eng.models.chat
    eng.models.chat = _Boom(TimeoutError("chat timed out"))
    try:
        eng.turn("fu", "fs", "Are you there?")
        t.failures.append("chat exception: the turn returned without a reply")
    except ModelCallError as exc:
        kept = any(m.content == "Are you there?" for m in eng.store.messages("fu"))
        if kept and "retry" in str(exc):
            t.handled["chat exception"] += 1
        else:
            t.failures.append(f"chat exception: kept={kept}, message {exc}")
    eng.models.chat = good_chat
    t.count_lost(eng, before)
    eng.store.close()


def _embedder_fault(t: _Tally, kind: str, *, docs: bool, query: bool) -> None:
    """The embedder fails for documents or queries: the turn answers, nothing stays pending after recovery."""
    t.injected[kind] += 1
    eng, clock = t.fresh(kind.replace(" ", "-"))
    before = t.stored(eng)
    good_emb = eng.embedder
    eng.embedder = _BadEmbedder(good_emb, docs=docs, query=query)
    try:
        answered = bool(eng.turn("fu", "fs", "My parcel locker code is 5521.").reply)
        clock.advance(35)
        answered = answered and bool(eng.turn("fu", "fs", "Is that noted?").reply)
    except Exception as exc:  # noqa: BLE001
        answered = False
        t.failures.append(f"{kind}: the turn raised {type(exc).__name__}: {exc}")
    eng.embedder = good_emb
    pending_old = _still_pending_after_recovery(eng, clock, "Thanks.")
    n = t.count_lost(eng, before)
    if answered and not pending_old and not n:
        t.handled[kind] += 1
    elif answered:
        t.failures.append(f"{kind}: message still pending after recovery={pending_old}")
    eng.store.close()


def _locked_fault(t: _Tally) -> None:
    """Another connection holds the write lock past busy_timeout: a StoreError naming both, then recovery."""
    t.injected["database locked"] += 1
    eng, _clock = t.fresh("locked", busy_timeout_ms=150)
    before = t.stored(eng)
    blocker = SQLiteStore(str(t.work / "fault-locked.db"))  # a second connection through the same driver
    blocker.conn.execute("BEGIN IMMEDIATE")
    try:
        eng.turn("fu", "fs", "Hello while locked")
        t.failures.append("database locked: a write succeeded while another connection held the lock")
    except StoreError as exc:
        if "locked" in str(exc).lower() and "busy_timeout" in str(exc):
            t.handled["database locked"] += 1
        else:
            t.failures.append(f"database locked: unclear error {exc}")
    except Exception as exc:  # noqa: BLE001
        t.failures.append(f"database locked: raised {type(exc).__name__}: {exc}")
    finally:
        blocker.conn.execute("ROLLBACK")
        blocker.close()
    try:
        eng.turn("fu", "fs", "Hello after the lock")
    except Exception as exc:  # noqa: BLE001
        t.failures.append(f"database locked: the store did not recover after the lock ({exc})")
    t.count_lost(eng, before)
    eng.store.close()


def _read_only_fault(t: _Tally) -> None:
    """A read-only database (query_only: root ignores file modes, so SQLite enforces it): a clear StoreError."""
    t.injected["read-only database"] += 1
    eng, _clock = t.fresh("readonly")
    before = t.stored(eng)
    eng.store.conn.execute("PRAGMA query_only = ON")
    try:
        eng.turn("fu", "fs", "Hello read-only")
        t.failures.append("read-only database: a write succeeded")
    except StoreError as exc:
        if "read" in str(exc).lower():
            t.handled["read-only database"] += 1
        else:
            t.failures.append(f"read-only database: unclear error {exc}")
    except Exception as exc:  # noqa: BLE001
        t.failures.append(f"read-only database: raised {type(exc).__name__}: {exc}")
    eng.store.conn.execute("PRAGMA query_only = OFF")
    t.count_lost(eng, before)
    eng.store.close()


def _disk_full_fault(t: _Tally) -> None:
    """The page count capped just above what is used: a StoreError saying full; the file stays sound."""
    t.injected["disk full"] += 1
    eng, clock = t.fresh("full")
    before = t.stored(eng)
    pages = eng.store.conn.execute("PRAGMA page_count").fetchone()[0]
    eng.store.conn.execute(f"PRAGMA max_page_count = {pages + 2}")
    err = None
    try:
        for i in range(200):
            eng.turn("fu", "fs", ("A long note about my travel plans to Kyoto and Osaka. " * 40) + str(i))
            clock.advance(35)
    except StoreError as exc:
        err = exc
    except Exception as exc:  # noqa: BLE001
        t.failures.append(f"disk full: raised {type(exc).__name__}: {exc}")
    if err is not None and "full" in str(err).lower():
        t.handled["disk full"] += 1
    elif err is not None:
        t.failures.append(f"disk full: unclear error {err}")
    else:
        t.failures.append("disk full: never reported a full database")
    eng.store.conn.execute("PRAGMA max_page_count = 1073741823")
    t.count_lost(eng, before)
    path = eng.store.path
    eng.store.close()
    with SQLiteStore(path) as s:
        t.failures.extend(f"disk full: {p}" for p in check_store(s))


def run_faults(workdir: str | Path) -> FaultReport:
    """Inject each fault kind into a live engine on a file DB; check error, answer and no loss."""
    t = _Tally(work=Path(workdir))
    for kind in ROLE_FAULTS:
        _role_fault(t, kind)
    _chat_fault(t)
    _embedder_fault(t, "embedder documents failure", docs=True, query=False)
    _embedder_fault(t, "embedder query failure", docs=False, query=True)
    _locked_fault(t)
    _read_only_fault(t)
    _disk_full_fault(t)
    return t.report()
