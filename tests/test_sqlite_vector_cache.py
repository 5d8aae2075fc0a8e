"""SQLiteStore's in-memory vector partitions: exact, and current whoever wrote last."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_conformance import T0, rec, unit

from engine.stores.sqlite import SQLiteStore

DIM = 16


def _exact(store: SQLiteStore, user: str, q: np.ndarray, k: int, include_invalid: bool = False):
    """Brute force over what is stored: (top-k (id, cosine) best first, every candidate's cosine)."""
    recs = store.records(user, include_invalid=include_invalid)
    if not recs:
        return [], {}
    vecs = store.vectors(user, [r.id for r in recs])
    ids = np.array([r.id for r in recs])
    mat = np.array([vecs[i] for i in ids.tolist()], dtype=np.float64)
    cos = (mat @ q) / (np.linalg.norm(mat, axis=1) * np.linalg.norm(q))
    order = np.lexsort((ids, -cos))[:k]
    return [(int(ids[i]), float(cos[i])) for i in order], dict(zip(ids.tolist(), cos.tolist(), strict=True))


def _same(got, exact):
    """The same top-k up to ties: same scores in order, each id's true score, nothing better left out."""
    want, every = exact
    assert len(got) == len(want) and len({i for i, _ in got}) == len(got)
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)
    for rid, s in got:
        assert every[rid] == pytest.approx(s, abs=1e-5)
    if got:
        left_out = [c for i, c in every.items() if i not in {j for j, _ in got}]
        assert all(c <= got[-1][1] + 1e-5 for c in left_out)


@pytest.fixture
def pair(tmp_path):
    """Two stores on one file: two connections, as two processes would have."""
    a = SQLiteStore(str(tmp_path / "v.db"), dim=DIM)
    b = SQLiteStore(str(tmp_path / "v.db"), dim=DIM)
    yield a, b
    a.close()
    b.close()


def test_search_is_exact_and_read_once(pair, rng):
    a, _ = pair
    v = unit(rng, 300, DIM)
    a.add_records([rec("u", f"r{i}") for i in range(300)], v)
    for q in unit(rng, 5, DIM):
        _same(a.search_dense("u", q, k=20), _exact(a, "u", q, 20))
    part = a._vcache["u"]
    a.search_dense("u", v[0], k=5)
    assert a._vcache["u"] is part  # not read again while nothing changed


def test_other_connections_writes_are_seen(pair, rng):
    a, b = pair
    assert a.search_dense("u", unit(rng, 1, DIM)[0], k=5) == []  # an empty partition, remembered by a
    v = unit(rng, 50, DIM)
    rs = b.add_records([rec("u", f"r{i}") for i in range(50)], v)
    assert a.search_dense("u", v[7], k=1)[0][0] == rs[7].id
    assert [i for i, _ in a.search_bm25("u", "r7", k=5)] == [rs[7].id]
    b.supersede("u", rs[7].id, rs[8].id, T0 + timedelta(days=1))
    assert rs[7].id not in [i for i, _ in a.search_dense("u", v[7], k=5)]
    assert a.search_dense("u", v[7], k=1, include_invalid=True)[0][0] == rs[7].id
    new = unit(rng, 1, DIM)[0]
    b.replace_vectors("u", {rs[3].id: new})
    assert a.search_dense("u", new, k=1)[0] == (rs[3].id, pytest.approx(1.0, abs=1e-5))
    assert a.vectors("u", [rs[3].id])[rs[3].id] == pytest.approx(new.tolist(), abs=1e-6)
    b.forget_user("u")
    assert a.search_dense("u", new, k=5) == []
    again = b.add_records([rec("u", "back")], unit(rng, 1, DIM))
    assert [i for i, _ in a.search_dense("u", new, k=5)] == [again[0].id]


def test_own_writes_patch_the_copy_in_place(pair, rng):
    a, _ = pair
    v = unit(rng, 40, DIM)
    rs = a.add_records([rec("u", f"r{i}") for i in range(40)], v)
    a.search_dense("u", v[0], k=3)
    part = a._vcache["u"]
    more = unit(rng, 30, DIM)
    rs += a.add_records([rec("u", f"s{i}") for i in range(30)], more)
    a.supersede("u", rs[1].id, rs[2].id, T0)
    a.update_record(rs[5], vector=more[0])
    assert a._vcache["u"] is part and part.n == 70
    for q in [*unit(rng, 5, DIM), more[0], v[1]]:
        _same(a.search_dense("u", q, k=10), _exact(a, "u", q, 10))
        _same(a.search_dense("u", q, k=10, include_invalid=True), _exact(a, "u", q, 10, include_invalid=True))


def test_rollback_forgets_what_never_landed(pair, rng):
    a, b = pair
    a.add_records([rec("u", "kept")], unit(rng, 1, DIM))
    ghost = unit(rng, 1, DIM)[0]
    with pytest.raises(RuntimeError), a.transaction():
        (r,) = a.add_records([rec("u", "ghost")], [ghost])
        assert a.search_dense("u", ghost, k=1)[0][0] == r.id  # visible inside the transaction
        raise RuntimeError("abort")
    # the rolled-back write's version number (and record id) come round again from another writer
    (real,) = b.add_records([rec("u", "real")], unit(rng, 1, DIM))
    assert real.id == r.id
    _same(a.search_dense("u", ghost, k=5), _exact(b, "u", ghost, 5))
    assert len(a.search_dense("u", ghost, k=5)) == 2


def test_no_cache_falls_back_to_vec0_with_the_same_answer(tmp_path, rng):
    cached = SQLiteStore(str(tmp_path / "c.db"), dim=DIM)
    plain = SQLiteStore(str(tmp_path / "c.db"), dim=DIM, vector_cache_mb=0)
    try:
        v = unit(rng, 200, DIM)
        cached.add_records([rec("u", f"r{i}") for i in range(200)], v)
        cached.add_records([rec("other", f"o{i}") for i in range(50)], unit(rng, 50, DIM))
        for q in unit(rng, 5, DIM):
            _same(plain.search_dense("u", q, k=15), _exact(plain, "u", q, 15))
            _same(cached.search_dense("u", q, k=15), _exact(plain, "u", q, 15))
        assert "u" not in plain._vcache and "u" in cached._vcache
    finally:
        cached.close()
        plain.close()


def test_memory_budget_evicts_least_recently_used(tmp_path, rng):
    store = SQLiteStore(str(tmp_path / "b.db"), dim=DIM, vector_cache_mb=30 * (DIM * 4 + 120) / 2**20)
    try:
        for user in ("a", "b"):
            store.add_records([rec(user, f"{user}{i}") for i in range(20)], unit(rng, 20, DIM))
        q = unit(rng, 1, DIM)[0]
        store.search_dense("a", q, k=3)
        store.search_dense("b", q, k=3)
        assert list(store._vcache) == ["b"]
        store.add_records([rec("big", f"x{i}") for i in range(40)], unit(rng, 40, DIM))
        _same(store.search_dense("big", q, k=5), _exact(store, "big", q, 5))  # over budget: vec0
        assert "big" not in store._vcache
    finally:
        store.close()


def test_records_newest_first_and_tag_filter(store_factory):
    store = store_factory()
    rs = store.add_records(
        [rec("u", "a", tags=("fact",)), rec("u", "b", tags=("preference",)), rec("u", "c", tags=("identity", "fact")),
         rec("u", "d", tags=("preference", "episode"))],
        [np.ones(32, dtype=np.float32)] * 4,
    )
    got = store.records("u", tags_any=["preference", "identity"], newest_first=True, limit=2)
    assert [r.id for r in got] == [rs[3].id, rs[2].id]
    assert [r.content for r in store.records("u", tags_any=["preference"])] == ["b", "d"]
    assert store.records("u", tags_any=[]) == [] and store.records("u", tags_any=['", "']) == []


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["add_a", "add_b", "supersede_b", "replace_b", "forget_b", "search"]),
                              st.integers(0, 10_000)), min_size=1, max_size=12))
def test_any_interleaving_of_two_writers_stays_exact(tmp_path_factory, ops):
    path = str(tmp_path_factory.mktemp("h") / "h.db")
    a, b = SQLiteStore(path, dim=DIM), SQLiteStore(path, dim=DIM)
    try:
        for op, seed in ops:
            rng = np.random.default_rng(seed)
            current = [r.id for r in b.records("u")]
            if op == "add_a":
                a.add_records([rec("u", f"a{seed}")] * 3, unit(rng, 3, DIM))
            elif op == "add_b":
                b.add_records([rec("u", f"b{seed}")] * 2, unit(rng, 2, DIM))
            elif op == "supersede_b" and len(current) >= 2:
                b.supersede("u", current[seed % len(current)], current[(seed + 1) % len(current)], T0)
            elif op == "replace_b" and current:
                b.replace_vectors("u", {current[seed % len(current)]: unit(rng, 1, DIM)[0]})
            elif op == "forget_b":
                b.forget_user("u")
            q = unit(rng, 1, DIM)[0]
            _same(a.search_dense("u", q, k=4), _exact(b, "u", q, 4))
            _same(a.search_dense("u", q, k=4, include_invalid=True), _exact(b, "u", q, 4, include_invalid=True))
    finally:
        a.close()
        b.close()


def test_vector_cache_counts_a_copy_that_grew_after_it_was_kept():
    """A kept copy builds its sign-bit codes on its first search: the next `put` weighs it as it is
    now, so the budget holds (as it did when every put summed the copies' sizes)."""
    from engine.stores.sqlite.vector_cache import VectorCache, partition_from_rows

    dim = 64
    gen = np.random.default_rng(3)

    def part(n):
        return partition_from_rows(1, [(i + 1, 1, gen.standard_normal(dim).astype(np.float32).tobytes())
                                       for i in range(n)], dim)

    a, b = part(200), part(200)
    b.codes  # b at its full size
    small = a.nbytes
    cache = VectorCache(budget_bytes=small + b.nbytes + 64, dim=dim)
    assert cache.put("a", a) is a
    a.codes  # a's first search: it grows in place while kept
    assert a.nbytes > small + 64
    assert cache.put("b", b) is b
    assert "a" not in cache and "b" in cache  # a as it is now + b are over the budget: a (older) left
