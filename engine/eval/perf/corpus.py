"""The perf benchmark's data: seeded synthetic records and vectors, and the store back ends.

Records and vectors are synthetic but shaped like real ones: Zipf-distributed words from a
seeded vocabulary (the most frequent ranks left out, as stopwords are), vectors clustered around
topics, tags, ages up to 90 days and reinforcement counts. Same seed, same data. Back ends are
looked up by name in `STORE_FACTORIES`, so another one can be compared side by side.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from engine.core.records import TAGS, MemoryRecord

__all__ = ["DIM", "BENCH_NOW", "STORE_FACTORIES", "bulk_loading", "synthetic_corpus"]

DIM = 384
BENCH_NOW = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)


def _sqlite_factory(tmpdir: str, dim: int):
    from engine.stores.sqlite import SQLiteStore

    return SQLiteStore(os.path.join(tmpdir, "bench.db"), dim=dim, embedder_name="synthetic")


def _postgres_factory(tmpdir: str, dim: int):
    """A throwaway schema (dropped on close) on MEMLAB_PG_DSN, else the local pgserver in build/."""
    import uuid

    from engine.stores.postgres import PostgresStore

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    return PostgresStore(os.environ.get("MEMLAB_PG_DSN"), dim=dim, embedder_name="synthetic", schema=schema,
                         temporary=True)


#: name -> factory(tmpdir, dim) -> Store. Add "postgres" here (or register at import) to compare.
STORE_FACTORIES: dict[str, Callable[[str, int], Any]] = {"sqlite": _sqlite_factory, "postgres": _postgres_factory}


class bulk_loading:  # noqa: N801 - reads as a function at call sites
    """`with bulk_loading(store) as bulk:` the store's `bulk_load()` block where it has one
    (PostgreSQL: the HNSW index built once at the end; SQLite: the full-text index merged into one
    segment at the end); `bulk.seconds` is what entering and leaving it cost (the index build),
    for the ingest rate to include."""

    def __init__(self, store: Any):
        self._block = store.bulk_load() if callable(getattr(store, "bulk_load", None)) else None
        self.seconds = 0.0

    def __enter__(self) -> bulk_loading:
        if self._block is not None:
            t0 = time.perf_counter()
            self._block.__enter__()
            self.seconds += time.perf_counter() - t0
        return self

    def __exit__(self, *exc: object) -> None:
        if self._block is not None:
            t0 = time.perf_counter()
            self._block.__exit__(*exc)  # type: ignore[arg-type]
            self.seconds += time.perf_counter() - t0


class synthetic_corpus:  # noqa: N801 - reads as a function at call sites
    """Seeded sentences and topic-clustered unit vectors."""

    def __init__(self, *, dim: int = DIM, seed: int = 0, vocab: int = 6000, topics: int = 300):
        self.rng = np.random.default_rng(seed)
        self.dim = dim
        syll = ["ka", "lo", "mi", "ner", "tas", "vi", "qu", "ren", "sol", "tra", "pe", "dun", "shi", "mor", "gal",
                "fe", "zor", "bli", "an", "ox"]
        words = set()
        while len(words) < vocab:
            n = int(self.rng.integers(2, 4))
            words.add("".join(self.rng.choice(syll, size=n)))
        self.words = np.array(sorted(words))
        ranks = np.arange(1, vocab + 1, dtype=float)
        p = 1 / ranks**1.07
        p[:150] = 0.0  # the most frequent words of real text are stopwords, which never reach the index query
        self.cdf = np.cumsum(p / p.sum())
        self.rng.shuffle(self.words)
        c = self.rng.standard_normal((topics, dim)).astype(np.float32)
        self.centroids = c / np.linalg.norm(c, axis=1, keepdims=True)

    def sentence(self, n_min: int = 8, n_max: int = 20) -> str:
        n = int(self.rng.integers(n_min, n_max + 1))
        idx = np.minimum(np.searchsorted(self.cdf, self.rng.random(n)), len(self.words) - 1)
        return " ".join(self.words[idx])

    def vectors(self, n: int) -> np.ndarray:
        topic = self.rng.integers(0, len(self.centroids), size=n)
        noise = self.rng.standard_normal((n, self.dim)).astype(np.float32) / np.sqrt(self.dim)
        v = self.centroids[topic] + noise  # same-topic cosine ~0.5, unrelated ~0
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def records(self, user_id: str, n: int, now: datetime) -> list[MemoryRecord]:
        out = []
        ages = self.rng.uniform(0, 90 * 86400, size=n)
        counts = self.rng.poisson(0.7, size=n)
        for i in range(n):
            k = int(self.rng.integers(1, 3))
            tags = tuple(dict.fromkeys(self.rng.choice(TAGS, size=k).tolist()))
            created = now - timedelta(seconds=float(ages[i]))
            out.append(
                MemoryRecord(
                    user_id=user_id,
                    content=self.sentence(),
                    memory_type="fact",
                    tags=tags,
                    keywords=tuple(self.sentence(1, 3).split()),
                    created_at=created,
                    last_reinforced_at=created + timedelta(seconds=float(ages[i]) / 2) if counts[i] else None,
                    strengthen_count=int(counts[i]),
                )
            )
        return out
