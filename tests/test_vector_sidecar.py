"""The per-user vector partitions saved beside a database file: used only while current, rebuilt otherwise."""

from __future__ import annotations

import os

import numpy as np

from engine.core.records import MemoryRecord
from engine.eval.perf.corpus import BENCH_NOW
from engine.stores.sqlite import SQLiteStore
from engine.stores.sqlite.sidecar import SIDECAR_MIN

DIM = 16


def _unit(rng, n):
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _fill(path, n, rng):
    with SQLiteStore(path, dim=DIM) as store:
        recs = [MemoryRecord(user_id="u", content=f"note {i}", created_at=BENCH_NOW) for i in range(n)]
        vecs = _unit(rng, n)
        ids = [r.id for r in store.add_records(recs, vecs)]
        store.add_records([MemoryRecord(user_id="small", content="x", created_at=BENCH_NOW)], _unit(rng, 1))
        q = _unit(rng, 1)[0]
        first = store.search_dense("u", q, k=10)
        store.search_dense("small", q, k=1)
    assert [i for i, _ in first] == [ids[j] for j in np.argsort(-(vecs @ q), kind="stable")[:10]]  # exact
    return q, first


def test_a_new_store_object_loads_the_saved_partition_and_a_stale_one_is_rebuilt(tmp_path):
    rng = np.random.default_rng(0)
    path = str(tmp_path / "s.db")
    q, first = _fill(path, SIDECAR_MIN + 10, rng)
    root = path + ".vectors"
    assert len([f for f in os.listdir(root) if f.endswith(".json")]) == 1  # the small partition is not saved
    with SQLiteStore(path, dim=DIM) as store:
        assert store.search_dense("u", q, k=10) == first
        assert store._sidecar.saved  # loaded from the saved copy
        part = store._vcache["u"]
        assert isinstance(part.mat, np.memmap)  # memory-mapped, copy-on-write
        rid = first[0][0]
        store.supersede("u", rid, first[1][0], BENCH_NOW)
        assert rid not in dict(store.search_dense("u", q, k=10))  # patched in memory, saved at close
    with SQLiteStore(path, dim=DIM) as store:
        assert rid not in dict(store.search_dense("u", q, k=10))
        # another writer (no cache of its own) makes the saved copy stale behind this store's back
        other = SQLiteStore(path, dim=DIM, vector_cache_mb=0)
        new = other.add_records([MemoryRecord(user_id="u", content="newest", created_at=BENCH_NOW)], [q.tolist()])[0]
        other.close()
    with SQLiteStore(path, dim=DIM) as store:
        assert store.search_dense("u", q, k=1)[0][0] == new.id  # rebuilt from the database, not the stale copy
    # a damaged copy is ignored too
    for name in os.listdir(root):
        if name.endswith(".mat.npy"):
            with open(os.path.join(root, name), "r+b") as f:
                f.truncate(100)
    with SQLiteStore(path, dim=DIM) as store:
        assert store.search_dense("u", q, k=1)[0][0] == new.id
        stem = os.path.basename(store._sidecar._stem("u"))
        assert any(f.startswith(stem) for f in os.listdir(root))
        store.forget_user("u")
        assert not any(f.startswith(stem) for f in os.listdir(root))  # nothing of the user stays beside the file
    with SQLiteStore(path, dim=DIM) as store:
        assert store.search_dense("u", q, k=1) == []


def test_a_copy_saved_beside_another_database_of_the_same_name_is_not_used(tmp_path):
    path = str(tmp_path / "s.db")
    _fill(path, SIDECAR_MIN + 1, np.random.default_rng(1))
    for suffix in ("", "-wal", "-shm"):  # the file is deleted and built again: same ids, counts and versions
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    q2, second = _fill(path, SIDECAR_MIN + 1, np.random.default_rng(2))  # _fill checks against exact numpy
    with SQLiteStore(path, dim=DIM) as store:
        assert store.search_dense("u", q2, k=10) == second
