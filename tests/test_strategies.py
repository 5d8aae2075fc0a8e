"""Comparison strategies: same conversation, clock and budget; known outcomes on short scenarios;
matched budgets; the per-probe judge reads only that probe's reply; the CLI's table and JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from langchain_core.messages import AIMessage, HumanMessage

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.errors import ConfigError
from engine.core.tokens import ApproxTokenCounter
from engine.eval.scenario import load_scenario, parse_scenario
from engine.eval.strategies import (
    STRATEGY_NAMES,
    RunContext,
    ScriptedSummarizer,
    aggregate,
    budget_notes,
    compare,
    compare_main,
    fit_window,
    make_strategy,
    overall,
    parse_compare,
    run_strategy,
)
from engine.roles.ledger import Ledger

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"

JUDGE = """
name: judge-reads-its-own-probe
user: dana
start: 2026-03-02T09:00:00+00:00
turns:
  - user: "My locker code is 4471."
probes:
  - ask: "What is my locker code?"
    expect: ["4471"]
  - ask: "Is it going to rain today?"
    expect: ["4471"]
"""


@pytest.fixture(scope="module")
def needle():
    return load_scenario(SCENARIOS / "needle-basic.yaml")


@pytest.fixture(scope="module")
def cross():
    return load_scenario(SCENARIOS / "cross-session.yaml")


def _ctx(run, keyword):
    return [p["expect"][keyword]["context"] for p in run.probes if keyword in p["expect"]][0]


def test_no_memory_loses_an_early_fact_under_a_small_window_while_memlab_keeps_it(needle):
    nomem = run_strategy(make_strategy("no-memory"), needle)
    mem = run_strategy(make_strategy("memlab"), needle)
    assert needle.memory_config().context_budget == 220
    assert _ctx(nomem, "Li Mingxuan") is False
    assert nomem.recall()["context"] == 0 and nomem.payload_tokens == 0
    assert _ctx(mem, "Li Mingxuan") is True
    assert mem.recall()["context"] > nomem.recall()["context"]
    # the no-memory window really is the budget: every prompt's window fits it (the current message aside)
    counter = ApproxTokenCounter()
    for t in nomem.turns:
        window = t["prompt"][1:]
        assert counter.count_messages(window[:-1]) <= 220 or len(window) == 1


def test_a_new_session_starts_empty_for_summarization_but_not_for_memlab(cross):
    summ = run_strategy(make_strategy("summarization"), cross)
    mem = run_strategy(make_strategy("memlab"), cross)
    assert summ.recall()["context"] == 0 and summ.recall()["reply"] == 0
    assert mem.recall()["context"] > 0
    probe_turns = [t for t in summ.turns if t["kind"] == "probe"]
    assert {t["session"] for t in probe_turns} == {"carol-s2"}
    assert all(t["state"]["thread"] == "carol::carol-s2" for t in probe_turns)


def test_summarization_summarises_at_the_budget_and_serves_the_summary(needle):
    run = run_strategy(make_strategy("summarization"), needle)
    assert run.calls.get("summarizer", 0) >= 1
    last = run.turns[-1]
    assert "Li Mingxuan" in last["state"]["summary"]
    assert last["payload_tokens"] > 0
    assert any(m["content"].startswith("Here is a summary") for m in last["prompt"])
    # the summary is memory payload, capped at the same memory budget as the engines' injection
    assert max(t["payload_tokens"] for t in run.turns) <= needle.memory_config().injection_budget + 20


def test_per_probe_judge_reads_only_that_probes_reply():
    sc = parse_scenario(JUDGE)
    for name in ("no-memory", "memlab"):
        run = run_strategy(make_strategy(name), sc)
        first, second = run.probes
        assert first["expect"]["4471"]["reply"] is True, name
        assert "4471" not in second["reply"]
        # the earlier reply (with the keyword) is in the later probe's context, not in its reply
        assert second["expect"]["4471"]["context"] is True, name
        assert second["expect"]["4471"]["reply"] is False, name


def _engine_of(name: str, scenario):
    cfg = make_strategy(name).config_for(scenario.memory_config())
    runner = make_strategy(name).open(RunContext(config=cfg, clock=VirtualClock(scenario.start)))
    return cfg, runner


def test_bmdm_and_dimmem_are_the_seed_designs(cross):
    cfg, runner = _engine_of("bmdm", cross)
    assert cfg.retrieval_policy == "on_event" and cfg.decay_enabled
    for text in ("Hello, my name is Carol Jensen and I'm a pastry chef.", "What is my job?"):
        runner.turn("carol", "s1", text)
    retrievals = runner.engine.events(kind="retrieve")
    assert retrievals and all(e.payload["paths"]["bm25"] == 0 and e.payload["paths"]["dim"] == 0 for e in retrievals)
    cfg, runner = _engine_of("dimmem", cross)
    assert (cfg.weights.alpha, cfg.weights.beta, cfg.weights.gamma) == (1.0, 0.0, 0.0)
    assert cfg.tune_weights is False and cfg.always_inject_types == ()
    assert cfg.retrieval_policy == "per_turn"
    cfg, _ = _engine_of("memlab", cross)
    assert cfg == cross.memory_config()


def test_budgets_are_matched_by_default_and_an_unequal_one_is_reported(cross):
    strategies = parse_compare(",".join(STRATEGY_NAMES))
    runs = compare([cross], strategies)
    ctx = {r.budget["context_budget"] for r in runs}
    mem = {r.budget["memory_budget"] for r in runs if r.strategy != "no-memory"}
    assert len(ctx) == 1 and len(mem) == 1
    assert budget_notes(runs) == []
    skewed = compare([cross], parse_compare("no-memory:context_budget=9000,memlab"))
    notes = budget_notes(skewed)
    assert len(notes) == 1 and "no-memory=9000" in notes[0] and "context_budget" in notes[0]


def test_parse_compare_rejects_unknown_and_repeated_strategies():
    with pytest.raises(ConfigError, match="unknown strategy 'rag'.*no-memory"):
        parse_compare("memlab,rag")
    with pytest.raises(ConfigError, match="twice"):
        parse_compare("memlab,memlab")
    with pytest.raises(ConfigError, match="context_budget"):
        run_strategy(make_strategy("memlab", {"context_budget": -1}), parse_scenario(JUDGE))


def test_samples_aggregate_to_mean_and_zero_spread_when_deterministic():
    sc = parse_scenario(JUDGE)
    runs = compare([sc], parse_compare("no-memory,memlab"), samples=2)
    assert len(runs) == 4 and {r.sample for r in runs} == {0, 1}
    rows = aggregate(runs)
    assert {r["strategy"] for r in rows} == {"no-memory", "memlab"}
    for row in rows:
        assert row["samples"] == 2 and row["context_recall_std"] == 0.0 and row["calls"] > 0
    tot = {r["strategy"]: r for r in overall(runs)}
    assert tot["memlab"]["expected"] == 2 and tot["no-memory"]["calls_by_role"] == {"chat": 3.0}


def test_compare_main_prints_tables_and_writes_the_json(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    args = argparse.Namespace(scenarios=[str(SCENARIOS / "cross-session.yaml")], compare="no-memory,memlab",
                              samples=1, models="scripted", model=None, base_url=None, cassette=None, preset=None,
                              set=[], json=str(out), embedder="hash", verbose=False)
    assert compare_main(args) == 0
    text = capsys.readouterr().out
    assert "cross-session" in text and "no-memory" in text and "memlab" in text and "budgets matched" in text
    data = json.loads(out.read_text())
    assert {tuple(sorted(r)) for r in data["runs"]} == {tuple(sorted(
        ["strategy", "scenario", "sample", "probes", "payload_tokens", "calls", "input_tokens", "output_tokens",
         "cost", "budget"]))}
    run = next(r for r in data["runs"] if r["strategy"] == "memlab")
    assert set(run["probes"][0]) >= {"ask", "user", "expect", "reject", "reply", "payload_tokens"}
    assert run["calls"]["chat"] == 7 and run["input_tokens"] > 0


def test_cli_replay_compare_flag_reaches_compare_main(tmp_path, capsys):
    from engine.cli import main

    sc = tmp_path / "judge.yaml"
    sc.write_text(JUDGE, encoding="utf-8")
    assert main(["replay", str(sc), "--compare", "no-memory,summarization"]) == 0
    assert "summarization" in capsys.readouterr().out
    assert main(["replay", str(sc), "--compare", "nonsense"]) == 2


def test_scripted_summarizer_keeps_statements_within_its_limit_and_carries_a_summary_forward():
    ledger = Ledger()
    summ = ScriptedSummarizer(max_tokens=30, ledger=ledger)
    first = summ([HumanMessage("I live in Porto."), AIMessage("Noted."), HumanMessage("Where is my parcel?"),
                  HumanMessage("My cat is called Miso.")])
    assert first.splitlines() == ["The user said:", "- I live in Porto.", "- My cat is called Miso."]
    carried = HumanMessage("Here is a summary of the conversation to date:\n\n" + first,
                           additional_kwargs={"lc_source": "summarization"})
    second = summ([carried, HumanMessage("I work night shifts at the harbour as a crane operator today.")])
    assert "crane operator" in second and "Miso" in second
    assert ApproxTokenCounter().count(second) <= 30
    assert "Porto" not in second  # lossy: the oldest statement fell out of the limit
    assert [c.role for c in ledger.calls] == ["summarizer", "summarizer"]


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.text(min_size=1, max_size=60).filter(lambda s: s.strip() and not s.strip().endswith("?")),
                min_size=1, max_size=12), hs.integers(min_value=5, max_value=120))
def test_scripted_summary_never_exceeds_its_limit_nor_invents(statements, limit):
    out = ScriptedSummarizer(max_tokens=limit, ledger=Ledger())([HumanMessage(s) for s in statements])
    if out.startswith("The user said:\n"):
        assert ApproxTokenCounter().count(out) <= limit
        normalised = {" ".join(s.split()) for s in statements}
        assert all(line[2:] in normalised for line in out.splitlines()[1:])


@settings(max_examples=80, deadline=None)
@given(hs.lists(hs.text(max_size=80), min_size=1, max_size=15), hs.integers(min_value=1, max_value=200))
def test_fit_window_is_the_newest_suffix_within_the_budget(texts, budget):
    counter = ApproxTokenCounter()
    msgs = [{"role": "user", "content": t} for t in texts]
    kept = fit_window(msgs, budget, counter)
    assert kept and kept == msgs[len(msgs) - len(kept):]
    assert len(kept) == 1 or counter.count_messages(kept) <= budget
    if len(kept) < len(msgs):  # the next older message would not have fitted
        assert counter.count_messages(msgs[len(msgs) - len(kept) - 1:]) > budget


def test_strategy_configs_keep_the_scenario_overrides(needle):
    base = needle.memory_config()
    for name in STRATEGY_NAMES:
        cfg = make_strategy(name).config_for(base)
        assert isinstance(cfg, MemoryConfig) and cfg.context_budget == 220 and cfg.injection_budget == 600
