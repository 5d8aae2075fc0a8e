"""Partitions over the memory budget: sign bits and ids in memory, floats memory-mapped from the saved copy."""

from __future__ import annotations

import numpy as np

from engine.core.records import MemoryRecord
from engine.eval.perf.corpus import BENCH_NOW, synthetic_corpus
from engine.stores.sqlite import SQLiteStore
from engine.stores.sqlite.sidecar import SIDECAR_MIN
from engine.stores.sqlite.vectors import INELIGIBLE, VectorPartition

DIM = 16
N = SIDECAR_MIN + 500
#: Too small for the floats (N x (16·4 + 120) B), large enough for the mapped copy (N x (8 + 16 + 4 + 120) B,
#: ~174 B once an append doubled its arrays).
BUDGET_MB = N * 180 / 2**20


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    return synthetic_corpus(dim=DIM, seed=seed, vocab=200, topics=30).vectors(n).astype(np.float32)


def _exact(mat: np.ndarray, ids: list[int], q: np.ndarray, k: int) -> list[int]:
    cos = (mat @ q) / np.linalg.norm(mat, axis=1)
    return [ids[i] for i in np.lexsort((np.array(ids), -cos))[:k]]


def _store(path: str, vecs: np.ndarray) -> tuple[SQLiteStore, list[int]]:
    store = SQLiteStore(path, dim=DIM, vector_cache_mb=BUDGET_MB)
    recs = [MemoryRecord(user_id="u", content=f"note {i}", created_at=BENCH_NOW) for i in range(len(vecs))]
    ids = [r.id for r in store.add_records(recs, vecs)]
    return store, ids


def test_hamming_counts_differing_sign_bits_and_marks_superseded_rows():
    mat = _vectors(300)
    valid = np.ones(300, dtype=bool)
    valid[::5] = False
    part = VectorPartition(1, np.arange(300, dtype=np.int64), mat, valid)
    q = _vectors(1, seed=3)[0]
    naive = ((mat > 0) != (q > 0)).sum(axis=1)
    assert part.hamming(q, True).tolist() == naive.tolist()
    ham = part.hamming(q, False)
    assert (ham[~valid] == INELIGIBLE).all() and ham[valid].tolist() == naive[valid].tolist()


def test_a_mapped_partition_searches_as_the_in_memory_one_does(tmp_path):
    mat = _vectors(3000)
    path = tmp_path / "m.npy"
    np.save(path, mat)
    valid = np.ones(3000, dtype=bool)
    valid[::9] = False
    ids = np.arange(7, 3007, dtype=np.int64)
    mem = VectorPartition(1, ids.copy(), mat.copy(), valid.copy())
    mapped = VectorPartition(1, ids.copy(), np.load(path, mmap_mode="c"), valid.copy(), mapped=True)
    extra = _vectors(40, seed=9)
    for part in (mem, mapped):
        part.append(list(range(5000, 5040)), extra, [True] * 40)  # the mapped one keeps them in its tail
        part.set_vector(5003, -extra[3])
        part.set_vector(20, extra[0])
    assert mapped.nbytes < mem.nbytes - 3000 * DIM * 4 + 1
    for i in range(15):
        q = extra[i] if i % 2 else mat[i * 97]
        want = mem.search(q, 10, False, coarse_above=0, coarse_min=200, coarse_factor=1)
        assert mapped.search(q, 10, False, coarse_min=200, coarse_factor=1) == want  # always coarse when mapped
    assert mapped.search(mat[0], 5, True, coarse_min=4000) == mem.search(mat[0], 5, True)  # pool >= n: exact
    got = mapped.vectors([20, 5003, 99999])
    assert sorted(got) == [20, 5003] and np.allclose(got[20], extra[0]) and np.allclose(got[5003], -extra[3])


def test_a_store_over_its_budget_maps_the_saved_copy_patches_it_and_opens_it_again(tmp_path):
    vecs = _vectors(N)
    path = str(tmp_path / "s.db")
    store, ids = _store(path, vecs)
    rng = np.random.default_rng(0)
    queries = vecs[rng.integers(0, N, 20)] + 0.1 * rng.standard_normal((20, DIM)).astype(np.float32)
    hits = []
    for q in queries:
        got = store.search_dense("u", q, k=10)
        exact = _exact(vecs, ids, q, 10)
        hits.append(len({r for r, _ in got} & set(exact)) / 10)
        cos = dict(zip(ids, (vecs @ q) / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(q)), strict=True))
        assert all(abs(cos[r] - s) < 1e-5 for r, s in got)  # rescored exactly on the floats
    assert np.mean(hits) >= 0.95
    part = store._vcache["u"]
    assert part.mapped and isinstance(part.mat, np.memmap)
    assert part.nbytes <= store.vector_cache_bytes
    # patches: a superseded record leaves, a new one and a replaced vector are found
    q = queries[0]
    top = store.search_dense("u", q, k=2)[0][0]
    store.supersede("u", top, ids[-1], BENCH_NOW)
    assert top not in dict(store.search_dense("u", q, k=10))
    new = store.add_records([MemoryRecord(user_id="u", content="newest", created_at=BENCH_NOW)], [(-q).tolist()])[0]
    assert store.search_dense("u", -q, k=1)[0][0] == new.id
    store.replace_vectors("u", {ids[5]: (q * 3).tolist()})
    assert store.search_dense("u", q, k=1)[0][0] == ids[5]
    assert np.allclose(store.vectors("u", [ids[5]])[ids[5]], q * 3, atol=1e-6)
    assert store._vcache["u"] is part  # patched in place, never copied into memory
    store.close()  # saves the patched copy
    with SQLiteStore(path, dim=DIM, vector_cache_mb=BUDGET_MB) as again:
        assert again.search_dense("u", -q, k=1)[0][0] == new.id
        assert again.search_dense("u", q, k=1)[0][0] == ids[5]
        assert top not in dict(again.search_dense("u", q, k=10))
        assert again._vcache["u"].mapped and again._sidecar.saved  # loaded, not rebuilt
    with SQLiteStore(path, dim=DIM, vector_cache_mb=0) as none:  # no budget at all: the sqlite-vec path
        assert none.search_dense("u", -q, k=1)[0][0] == new.id
        assert "u" not in none._vcache


def test_an_in_memory_database_over_its_budget_searches_with_sqlite_vec():
    vecs = _vectors(N)
    store, ids = _store(":memory:", vecs)
    q = vecs[11]
    assert store.search_dense("u", q, k=1)[0][0] == ids[11]
    assert "u" not in store._vcache
    store.close()


def test_rows_are_found_by_id_whether_the_ids_ascend_or_not():
    mat = _vectors(50)
    for ids in (np.arange(100, 150, dtype=np.int64), np.random.default_rng(4).permutation(50).astype(np.int64) + 100):
        part = VectorPartition(1, ids.copy(), mat.copy(), np.ones(50, dtype=bool))
        rid = int(ids[17])
        assert np.array_equal(part.vectors([rid, 999])[rid], mat[17]) and 999 not in part.vectors([999])
        part.set_valid(rid, False)
        assert not part.valid[17]
        part.append([90, 160], _vectors(2, seed=5), [True, True])  # 90 breaks the ascending order
        assert part.row(90) == 50 and part.row(160) == 51 and part.row(rid) == 17
        try:
            part.row(12345)
        except KeyError:
            pass
        else:
            raise AssertionError("a missing id must raise KeyError")
