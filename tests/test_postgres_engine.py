"""The whole engine on PostgreSQL: a bundled scenario replays to the same probes as on SQLite."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from pg_support import POSTGRES_MARKS

from engine.eval.scenario import load_scenario, replay
from engine.memory.engine import MemoryEngine

pytestmark = POSTGRES_MARKS
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


@pytest.fixture(scope="module")
def pg_dsn():
    from engine.stores.postgres import DEFAULT_DATA_DIR, start_local_server

    return os.environ.get("MEMLAB_PG_DSN") or start_local_server(DEFAULT_DATA_DIR.parent / "pgdata-test")


@pytest.mark.parametrize("name", ["knowledge-update", "cross-session"])
def test_a_scenario_on_postgres_matches_sqlite(pg_dsn, name):
    from engine.stores.postgres import PostgresStore

    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    stores = []

    def on_postgres(**kw):
        store = PostgresStore(pg_dsn, schema=f"e_{uuid.uuid4().hex[:12]}", temporary=True)
        stores.append(store)
        return MemoryEngine(store=store, **kw)

    try:
        pg = replay(sc, engine_factory=on_postgres)
    finally:
        for s in stores:
            s.close()
    lite = replay(sc)
    assert pg.probes == lite.probes
    assert pg.recall() == lite.recall() and pg.recall()["rejected_served"] == 0
    assert [e["kind"] for e in pg.event_log] == [e["kind"] for e in lite.event_log]
