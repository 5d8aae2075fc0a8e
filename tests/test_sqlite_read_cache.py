"""SQLiteStore's read caches: tagged reads kept while the `record_writes` counter is unchanged, and
records built once per identical row. Every way records change must show in the next read: each
store write, a hand edit through another connection, another process, a rolled-back transaction."""

from __future__ import annotations

import multiprocessing
import sqlite3
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
from store_conformance import T0, rec, unit

from engine.stores.sqlite import SQLiteStore
from engine.stores.sqlite.rows import record_from_row

DIM = 16


def tagged(store, user="u", tag="preference", k=5):
    """The tagged read (and, checked alongside, get_records of every id: its cache too)."""
    got = [(r.id, r.content, r.tags, r.strengthen_count, r.is_current)
           for r in store.records(user, tags_any=[tag], limit=k, newest_first=True)]
    ids = [*range(1, 12), 3, 2]
    by_id = [(r.id, r.content, r.tags, r.strengthen_count, r.is_current) for r in store.get_records(user, ids)]
    current = [x for x in by_id if x[4] and tag in x[2]]
    assert got == sorted(current, reverse=True)[:k], (got, by_id)
    with store._read() as conn:
        expected = [x[0] for x in conn.execute("SELECT id FROM records WHERE user_id = ? ORDER BY id", (user,))]
    assert [x[0] for x in by_id] == [i for i in expected if i < 12]
    return got


@contextmanager
def reads_of_records(store):
    """The statements reading `records` that the store runs inside the block."""
    statements = []
    store.conn.set_trace_callback(statements.append)
    try:
        yield statements
    finally:
        store.conn.set_trace_callback(None)
        statements[:] = [s for s in statements if "FROM records" in s]


def fresh(path):
    """What a store that never cached anything reads."""
    other = SQLiteStore(path, dim=DIM)
    try:
        return tagged(other)
    finally:
        other.close()


@pytest.fixture
def setup(tmp_path):
    path = str(tmp_path / "c.db")
    store = SQLiteStore(path, dim=DIM)
    rng = np.random.default_rng(0)
    rs = store.add_records([rec("u", f"likes {i}", tags=("preference",)) for i in range(4)]
                           + [rec("v", "other user", tags=("preference",))], unit(rng, 5, DIM))
    yield store, path, rs, rng
    store.close()


def test_cached_tagged_read_is_reused_until_a_write(setup):
    store, path, _, _ = setup
    first = tagged(store)
    assert store._tagged_cache and store._by_id, "the reads were not kept"
    assert tagged(store) == first == fresh(path)


def test_every_store_write_shows_in_the_next_tagged_read(setup):
    store, path, rs, rng = setup
    tagged(store)
    store.add_records([rec("u", "likes new", tags=("preference",))], unit(rng, 1, DIM))
    assert tagged(store) == fresh(path) and tagged(store)[0][1] == "likes new"
    store.update_record(replace(rs[1], content="likes edited"))
    assert tagged(store) == fresh(path) and any(c == "likes edited" for _, c, *_ in tagged(store))
    store.update_record(replace(rs[2], tags=("fact",)))
    assert tagged(store) == fresh(path) and rs[2].id not in [i for i, *_ in tagged(store)]
    store.reinforce("u", [rs[0].id], T0 + timedelta(days=1))
    assert tagged(store) == fresh(path) and {i: n for i, _, _, n, _ in tagged(store)}[rs[0].id] == 1
    store.supersede("u", rs[0].id, rs[1].id, T0 + timedelta(days=2))
    assert tagged(store) == fresh(path) and rs[0].id not in [i for i, *_ in tagged(store)]
    store.supersede("u", rs[3].id, rs[3].id, T0 + timedelta(days=3))  # invalidate_record's write
    assert tagged(store) == fresh(path) and rs[3].id not in [i for i, *_ in tagged(store)]
    store.forget_user("u")
    assert tagged(store) == [] == fresh(path)


def test_a_write_to_another_user_and_a_hand_edit_show(setup):
    store, path, rs, _ = setup
    before = tagged(store)
    store.update_record(replace(rs[4], content="other edited"))
    assert tagged(store) == before
    with sqlite3.connect(path) as hand:  # by hand, another connection (the CLI, a script)
        hand.execute("UPDATE records SET content = 'hand edited' WHERE id = ?", (rs[1].id,))
    assert tagged(store) == fresh(path) and any(c == "hand edited" for _, c, *_ in tagged(store))
    with sqlite3.connect(path) as hand:
        hand.execute("DELETE FROM records WHERE id = ?", (rs[2].id,))
    assert tagged(store) == fresh(path) and rs[2].id not in [i for i, *_ in tagged(store)]


def test_a_rolled_back_write_is_not_kept(setup):
    store, path, rs, _ = setup
    tagged(store)
    with pytest.raises(RuntimeError), store.transaction():
        store.update_record(replace(rs[1], content="rolled back"))
        assert any(c == "rolled back" for _, c, *_ in tagged(store))  # inside: reads its own write
        raise RuntimeError
    assert tagged(store) == fresh(path) and all(c != "rolled back" for _, c, *_ in tagged(store))
    store.update_record(replace(rs[2], content="committed"))  # the counter moves on past the rollback
    assert tagged(store) == fresh(path) and any(c == "committed" for _, c, *_ in tagged(store))


def test_reads_inside_a_transaction_are_kept_but_not_past_a_savepoint_rollback(setup):
    store, path, rs, _ = setup
    tagged(store)
    with store.transaction():
        first = tagged(store)
        assert tagged(store) == first  # kept inside the transaction as outside
        with pytest.raises(RuntimeError), store.transaction():  # a savepoint
            store.update_record(replace(rs[1], content="rolled back"))
            assert any(c == "rolled back" for _, c, *_ in tagged(store))
            raise RuntimeError
        store.update_record(replace(rs[2], content="kept"))  # the counter reaches the savepoint's count again
        inside = tagged(store)
        assert all(c != "rolled back" for _, c, *_ in inside) and any(c == "kept" for _, c, *_ in inside)
    assert tagged(store) == inside == fresh(path)


def _other_process_edit(path, rid):
    other = SQLiteStore(path, dim=DIM)
    try:
        [r] = other.get_records("u", [rid])
        other.update_record(replace(r, content="from another process"))
    finally:
        other.close()


def test_another_process_write_shows(setup):
    store, path, rs, _ = setup
    tagged(store)
    p = multiprocessing.get_context("spawn").Process(target=_other_process_edit, args=(path, rs[1].id))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert any(c == "from another process" for _, c, *_ in tagged(store)) and tagged(store) == fresh(path)


def test_built_records_follow_their_rows(setup):
    _, path, rs, _ = setup
    with sqlite3.connect(path) as conn:
        from engine.stores.sqlite.rows import RECORD_COLUMNS
        row = conn.execute(f"SELECT {RECORD_COLUMNS} FROM records WHERE id = ?", (rs[0].id,)).fetchone()
    a = record_from_row(row)
    assert record_from_row(tuple(row)) is a  # an identical row: the record built before
    changed = list(row)
    changed[17] = 5  # strengthen_count
    b = record_from_row(changed)
    assert b.strengthen_count == 5 and a.strengthen_count == 0 and b.content == a.content
    changed[2] = "new content"
    assert record_from_row(changed).content == "new content"
    bad = list(row)
    bad[3] = "no such type"
    for _ in range(2):  # an invalid row raises every time (nothing kept)
        with pytest.raises(ValueError):
            record_from_row(bad)


def test_own_reinforcement_patches_the_kept_records(setup):
    """A reinforcement through this store changes known rows in a known way: the kept records are
    patched (not read again) and equal, field for field, what a fresh store reads; a rolled-back one
    leaves nothing behind."""
    store, path, rs, _ = setup
    ids = [r.id for r in rs[:4]]  # u's
    tagged(store)
    store.get_records("v", [rs[4].id])
    at = T0 + timedelta(days=1, microseconds=7)
    store.reinforce("u", [rs[0].id, rs[0].id, rs[1].id, rs[4].id], at)  # rs[4] is v's: not touched
    with reads_of_records(store) as statements:
        got = store.get_records("u", ids)
        kept_tagged = store.records("u", tags_any=["preference"], limit=5, newest_first=True)
    assert not statements, statements  # served from memory
    other = SQLiteStore(path, dim=DIM)
    try:
        assert got == other.get_records("u", ids)
        assert kept_tagged == other.records("u", tags_any=["preference"], limit=5, newest_first=True)
        assert store.get_records("v", [rs[4].id]) == other.get_records("v", [rs[4].id])
    finally:
        other.close()
    assert [r.strengthen_count for r in got[:2]] == [1, 1] and got[0].last_reinforced_at == at
    with pytest.raises(RuntimeError), store.transaction():
        store.reinforce("u", [rs[2].id], at)
        assert store.get_records("u", [rs[2].id])[0].strengthen_count == 1
        raise RuntimeError
    assert store.get_records("u", [rs[2].id])[0].strengthen_count == 0
    assert tagged(store) == fresh(path)


def test_own_adds_supersedes_and_updates_keep_the_other_kept_records(setup):
    """After this store's own insert, supersede or update, the records kept by `get_records` stay
    (the changed row is replaced by what a read gives back) and equal, field for field, a fresh
    store's read; the tagged read is read again and shows the write."""
    store, path, rs, rng = setup
    ids = [r.id for r in rs[:4]]
    store.get_records("u", ids)
    new = store.add_records([rec("u", "likes tea now", tags=("preference",))], unit(rng, 1, DIM))[0]
    store.supersede("u", rs[0].id, new.id, T0 + timedelta(hours=2))
    store.update_record(replace(store.get_records("u", [rs[1].id])[0], content="likes green tea"))
    with reads_of_records(store) as statements:
        got = store.get_records("u", ids)
    assert not statements, statements  # served from memory
    other = SQLiteStore(path, dim=DIM)
    try:
        assert got == other.get_records("u", ids)
        assert store.records("u", tags_any=["preference"], limit=9, newest_first=True) == other.records(
            "u", tags_any=["preference"], limit=9, newest_first=True)
    finally:
        other.close()
    assert not got[0].is_current and got[0].superseded_by == new.id and got[1].content == "likes green tea"
    assert tagged(store) == fresh(path)


def test_a_write_by_another_connection_between_read_and_own_write_still_shows(setup):
    """The kept records are carried across an own write only when nothing else wrote since they were
    read: a hand edit through another connection first means everything is read again."""
    store, path, rs, rng = setup
    store.get_records("u", [rs[2].id])
    hand = sqlite3.connect(path)
    try:
        hand.execute("UPDATE records SET content = 'edited by hand' WHERE id = ?", (rs[2].id,))
        hand.commit()
    finally:
        hand.close()
    store.add_records([rec("u", "another", tags=("preference",))], unit(rng, 1, DIM))
    assert store.get_records("u", [rs[2].id])[0].content == "edited by hand"
