"""Shared fixtures: a virtual clock, a seeded rng, and a store factory that closes what it opens."""

from __future__ import annotations

import os

# tests never reach a real model provider (loopback test servers stay allowed)
os.environ.setdefault("MEMLAB_FORBID_REAL_MODELS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from datetime import UTC, datetime

import numpy as np
import pytest

from engine.core.clock import VirtualClock

START = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture
def store_factory(tmp_path):
    """`make(path=":memory:", dim=32, **kw)` -> SQLiteStore; a relative path lands in tmp_path."""
    from engine.stores.sqlite import SQLiteStore

    opened = []

    def make(path: str = ":memory:", *, dim: int = 32, **kwargs):
        target = path if path == ":memory:" else str(tmp_path / path)
        store = SQLiteStore(target, dim=dim, **kwargs)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def benchmark_script():
    """`load(name)` -> the module of `benchmarks/<name>.py` (the scripts are not a package)."""
    import importlib.util
    from pathlib import Path

    def load(name: str):
        path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"memlab_benchmark_{name}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load
