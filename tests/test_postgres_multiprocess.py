"""Several processes x several users against one PostgreSQL: nothing lost, nothing crosses users,
cursors only move forward. Workers are spawned (fresh interpreters), each with its own pool."""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid

import numpy as np
from pg_support import POSTGRES_MARKS

PROCESSES, USERS, OPS, RECORD_EVERY, DIM = 4, 3, 20, 5, 16


pytestmark = POSTGRES_MARKS


def _worker(dsn: str, schema: str, worker: int) -> dict:
    """Interleave the users: message, cursor move (refused when another process got further), records."""
    from datetime import UTC, datetime

    from engine.core.errors import CursorRewindError
    from engine.core.records import MemoryRecord, Message
    from engine.stores.postgres import PostgresStore

    at = datetime(2026, 3, 2, 9, tzinfo=UTC)
    rng = np.random.default_rng(worker)
    store = PostgresStore(dsn, dim=DIM, schema=schema, pool_size=2)
    ops = refused = 0
    monotone = True
    last_seen = {f"user{u}": 0 for u in range(USERS)}
    try:
        for op in range(OPS):
            for u in range(USERS):
                user = f"user{u}"
                m = store.add_message(Message(user_id=user, session_id=f"w{worker}", role="user",
                                              content=f"{user}|w{worker}|{op}", created_at=at))  # fmt: skip
                before = store.get_cursor(user, "", "seen")
                moved = True
                try:
                    store.set_cursor(user, "", "seen", m.id)
                except CursorRewindError:  # another process already moved past this message
                    moved, refused = False, refused + 1
                after = store.get_cursor(user, "", "seen")
                monotone &= before >= last_seen[user] and after >= before and (after >= m.id if moved else after > m.id)
                last_seen[user] = after
                ops += 4
                if op % RECORD_EVERY == 0:
                    vec = rng.standard_normal(DIM).astype(np.float32)
                    store.add_records([MemoryRecord(user_id=user, content=f"{user} note from w{worker} op {op}",
                                                    created_at=at)], [vec / np.linalg.norm(vec)])  # fmt: skip
                    ops += 1
    finally:
        store.close()
    return {"ops": ops, "refused": refused, "monotone": monotone}


def test_processes_and_users_lose_nothing_and_never_cross(request):

    from engine.stores.postgres import (
        DEFAULT_DATA_DIR,
        PostgresStore,
        start_local_server,
    )

    dsn = os.environ.get("MEMLAB_PG_DSN") or start_local_server(DEFAULT_DATA_DIR.parent / "pgdata-test")
    schema = f"mp_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(dsn, dim=DIM, schema=schema, temporary=True, hnsw_m=8, hnsw_ef_construction=32)
    try:
        ctx = multiprocessing.get_context("spawn")
        t0 = time.perf_counter()
        with ctx.Pool(PROCESSES) as pool:
            results = pool.starmap(_worker, [(dsn, schema, w) for w in range(PROCESSES)])
        elapsed = time.perf_counter() - t0

        assert all(r["monotone"] for r in results)
        for u in range(USERS):
            user = f"user{u}"
            got = store.messages(user)
            expected = {f"{user}|w{w}|{op}" for w in range(PROCESSES) for op in range(OPS)}
            assert len(got) == PROCESSES * OPS and {m.content for m in got} == expected  # none lost, none foreign
            assert store.get_cursor(user, "", "seen") == max(m.id for m in got)  # the furthest move won
            mine = {r.id for r in store.records(user)}
            assert len(mine) == PROCESSES * len(range(0, OPS, RECORD_EVERY))
            assert {i for i, _ in store.search_bm25(user, "note from op", k=1000)} == mine
            assert {i for i, _ in store.search_bm25(user, "user0 user1 user2", k=1000)} <= mine
            probe = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
            assert {i for i, _ in store.search_dense(user, probe, k=1000)} == mine
        ops = sum(r["ops"] for r in results)
        refused = sum(r["refused"] for r in results)
        print(
            f"\n{PROCESSES} processes x {USERS} users x {OPS} rounds: {ops} store ops in {elapsed:.2f} s "
            f"({ops / elapsed:.0f} ops/s incl. spawn), {refused} cursor rewinds refused"
        )
    finally:
        store.close()


def _open_at_once(dsn: str, schema: str, worker: int, barrier) -> dict:
    """Wait for the others, open the (new) schema, write and read one message."""
    from datetime import UTC, datetime

    from engine.core.records import Message
    from engine.stores.postgres import PostgresStore

    barrier.wait(timeout=120)
    t0 = time.perf_counter()
    store = PostgresStore(dsn, dim=DIM, schema=schema, pool_size=1, hnsw_m=8, hnsw_ef_construction=32)
    opened_ms = (time.perf_counter() - t0) * 1000
    try:
        m = store.add_message(Message(user_id=f"w{worker}", session_id="s", role="user", content=f"hello {worker}",
                                      created_at=datetime(2026, 3, 2, 9, tzinfo=UTC)))  # fmt: skip
        return {"read_back": [x.id for x in store.messages(f"w{worker}")] == [m.id],
                "version": store.schema_version, "opened_ms": opened_ms}  # fmt: skip
    finally:
        store.close()


def test_processes_opening_one_new_schema_at_once_migrate_it_once(request):
    import psycopg
    from psycopg import sql

    from engine.stores.postgres import DEFAULT_DATA_DIR, MIGRATIONS, start_local_server

    dsn = os.environ.get("MEMLAB_PG_DSN") or start_local_server(DEFAULT_DATA_DIR.parent / "pgdata-test")
    schema = f"mo_{uuid.uuid4().hex[:12]}"
    ctx = multiprocessing.get_context("spawn")
    try:
        with ctx.Manager() as manager:
            barrier = manager.Barrier(PROCESSES)
            with ctx.Pool(PROCESSES) as pool:
                results = pool.starmap(_open_at_once, [(dsn, schema, w, barrier) for w in range(PROCESSES)])
        assert all(r["read_back"] for r in results)
        assert {r["version"] for r in results} == {MIGRATIONS[-1].version}
        with psycopg.connect(dsn) as conn:
            applied = [r[0] for r in conn.execute(
                sql.SQL("SELECT version FROM {}.schema_version ORDER BY version").format(sql.Identifier(schema)))]
        assert applied == [m.version for m in MIGRATIONS]  # each step once
        print(f"\n{PROCESSES} processes opened one new schema at once; open ms: "
              f"{sorted(round(r['opened_ms']) for r in results)}")
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
