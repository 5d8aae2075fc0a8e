"""`memlab` dispatches each command to its main function and behaves as before: demo, presets,
replay, bench perf|locomo, tune; shared options parse the same way for every command."""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path

import pytest

from engine.cli import build_parser, main
from engine.core.config import PRESETS, MemoryConfig
from engine.core.errors import ConfigError
from engine.eval.options import model_settings_from_args, parse_sets, store_url

SCENARIO = str(Path(__file__).resolve().parent.parent / "scenarios" / "cross-session.yaml")


def test_demo_talks_then_shows_records_and_ranking(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("memlab demo · preset 'customer service'")
    assert "stored records:" in out and "Li Mingxuan" in out and "events fired:" in out


def test_presets_lists_every_preset_and_shows_one_as_toml(capsys):
    assert main(["presets"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in PRESETS)
    assert main(["presets", "--show", "accompany"]) == 0
    shown = tomllib.loads(capsys.readouterr().out)
    assert MemoryConfig.from_dict(shown) == MemoryConfig.from_preset("accompany")


def test_replay_prints_probes_events_and_recall_and_writes_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["replay", SCENARIO, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "== cross-session" in text and "events:" in text and "recall: context" in text
    doc = json.loads(out.read_text())
    assert doc["scenario"] == "cross-session" and doc["strategy"] == "memlab" and doc["probes"]


def test_replay_on_a_database_file_keeps_its_memory(tmp_path, capsys):
    db = tmp_path / "m.db"
    assert main(["replay", SCENARIO, "--db", str(db)]) == 0
    capsys.readouterr()
    from engine.stores.sqlite import SQLiteStore

    store = SQLiteStore(str(db))
    try:
        assert store.count_records() > 0 and "carol" in store.users()
    finally:
        store.close()


def test_bench_commands_dispatch(tmp_path, capsys):
    assert main(["bench", "perf", "--sizes", "100", "--queries", "2", "--turns", "0"]) == 0
    assert "MemoryEngine.retrieve" in capsys.readouterr().out
    assert main(["bench", "locomo", "--data", str(tmp_path / "none.json"), "--embedder", "hash"]) == 2


def test_parse_sets_reads_json_values_and_dotted_tables():
    assert parse_sets(["top_k=6", "weights.alpha=0.5", "retrieval_policy=on_event", "paths=[\"dense\"]"]) == {
        "top_k": 6, "weights": {"alpha": 0.5}, "retrieval_policy": "on_event", "paths": ["dense"]}
    with pytest.raises(ConfigError, match="key=value"):
        parse_sets(["top_k"])


def test_model_and_store_options_are_shared():
    args = build_parser().parse_args(["replay", SCENARIO, "--models", "real", "--model", "m1",
                                      "--base-url", "http://127.0.0.1:9/v1", "--cassette", "c.jsonl"])
    settings = model_settings_from_args(args)
    assert (settings.model, settings.base_url, settings.cassette_mode) == ("m1", "http://127.0.0.1:9/v1", "record")
    assert model_settings_from_args(argparse.Namespace(models="scripted")) is None
    with pytest.raises(ConfigError, match="--cassette"):
        model_settings_from_args(argparse.Namespace(models="cassette", model=None, base_url=None, cassette=None))
    assert store_url(argparse.Namespace(store="sqlite", db="x.db", dsn=None)) == "x.db"
    assert store_url(argparse.Namespace(store="postgres", db=None, dsn=None)) == "postgres"
