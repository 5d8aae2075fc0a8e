"""Preset tuning: grid parsing with readable errors, the sweep and its frontier, the objective,
and the saved custom preset round-tripping through MemoryConfig.load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from engine.core.config import MemoryConfig
from engine.core.errors import ConfigError
from engine.eval.scenario import load_scenario
from engine.eval.tuning import (
    SweepPoint,
    choose,
    chosen_config,
    grid_points,
    mark_frontier,
    nest,
    parse_grid,
    sweep,
    tune_main,
)

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


@pytest.fixture(scope="module")
def swept():
    sc = load_scenario(SCENARIOS / "cross-session.yaml")
    return sweep([sc], parse_grid("top_k=1,4;tau=3600"))


def test_parse_grid_values_types_and_nesting():
    grid = parse_grid('tau=3600, 43200; top_k=3,4,6; weights.alpha=0.5; retrieval_policy=per_turn,on_event;'
                      ' always_inject_types=["identity","preference"],[]')
    assert grid == {"tau": [3600, 43200], "top_k": [3, 4, 6], "weights.alpha": [0.5],
                    "retrieval_policy": ["per_turn", "on_event"],
                    "always_inject_types": [["identity", "preference"], []]}
    assert len(grid_points(grid)) == 2 * 3 * 1 * 2 * 2
    assert grid_points({"a": [1, 2], "b": [3]}) == [{"a": 1, "b": 3}, {"a": 2, "b": 3}]
    assert nest({"weights.alpha": 1, "weights.beta": 0, "top_k": 2}) == {"weights": {"alpha": 1, "beta": 0},
                                                                          "top_k": 2}


@pytest.mark.parametrize(("spec", "message"), [
    ("tua=3600", "'tua' is not a MemoryConfig field; use one of .*tau"),
    ("weights.alfa=1", "weights has no 'alfa'; use one of alpha"),
    ("top_k", "needs the form key=v1,v2"),
    ("top_k=3;top_k=4", "twice"),
    ("top_k=3,,4", "empty value"),
    ("preset=accompany", "--base-preset"),
    ("", "empty"),
    ("foo.bar=1", "dotted sub-key"),
])
def test_bad_grids_name_the_key_and_the_fix(spec, message):
    with pytest.raises(ConfigError, match=message):
        parse_grid(spec)


def test_invalid_points_are_skipped_with_the_reason_and_an_all_invalid_grid_fails():
    sc = load_scenario(SCENARIOS / "idle-gap-decay.yaml")
    res = sweep([sc], parse_grid("top_k=0,3"), references=False)
    assert [p.label for p in res.points] == ["top_k=3"]
    assert res.skipped and res.skipped[0][0] == {"top_k": 0} and "top_k" in res.skipped[0][1]
    with pytest.raises(ConfigError, match="no grid point makes a valid config.*alpha\\+beta\\+gamma"):
        sweep([sc], parse_grid("weights.alpha=0.9"))
    with pytest.raises(ConfigError, match="objective"):
        sweep([sc], parse_grid("top_k=3"), objective="cheapest")


def test_sweep_measures_points_references_frontier_and_choice(swept):
    labels = [p.label for p in swept.points]
    assert labels[:2] == ["top_k=1 tau=3600", "top_k=4 tau=3600"]
    assert {"generative agents", "relevance only"} <= set(labels) and any(lab.startswith("base") for lab in labels)
    by = {p.label: p for p in swept.points}
    small, big = by["top_k=1 tau=3600"], by["top_k=4 tau=3600"]
    assert small.expected == big.expected == 3
    assert small.payload_tokens < big.payload_tokens  # one record injected instead of up to four
    chosen = swept.chosen
    grid = [p for p in swept.points if not p.reference]
    top = max(p.recall for p in grid)
    assert not chosen.reference and chosen.recall == top
    assert chosen.payload_tokens == min(p.payload_tokens for p in grid if p.recall == top)
    # here the floor (identity, preference) and the profile carry the facts: one slot recalls as much
    assert chosen is (small if small.recall == big.recall else big)
    assert any(p.frontier for p in swept.points)
    assert not any(p.chosen for p in swept.points if p.reference)


def test_chosen_point_saves_as_a_custom_preset_that_round_trips(swept, tmp_path):
    cfg = chosen_config(swept.chosen)
    assert cfg.preset == "custom" and cfg.top_k == swept.chosen.values["top_k"] and cfg.tau == 3600
    for suffix in ("toml", "json"):
        path = cfg.save(tmp_path / f"p.{suffix}")
        assert MemoryConfig.load(path) == cfg
    weighted = chosen_config(SweepPoint(label="w", values={"weights.alpha": 1.0, "weights.beta": 0.0,
                                                           "weights.gamma": 0.0}), "accompany")
    assert weighted.tau == MemoryConfig.from_preset("accompany").tau  # the base preset's other values stay
    assert (weighted.weights.alpha, weighted.weights.w1) == (1.0, 0.8)


def _pt(label, recall, payload, calls, reference=False):
    return SweepPoint(label=label, values={"x": label}, reference=reference, context_recall=recall,
                      reply_recall=recall, payload_tokens=payload, calls=calls)


def test_objective_breaks_recall_ties_by_payload_then_calls():
    pts = [_pt("a", 0.5, 100, 10), _pt("b", 0.8, 300, 12), _pt("c", 0.8, 200, 14), _pt("d", 0.8, 200, 11),
           _pt("ref", 0.9, 10, 1, reference=True)]
    assert choose(pts).label == "d"
    front = {p.label for p in mark_frontier(pts)}
    assert front == {"ref"}  # the reference dominates everything here
    assert {p.label for p in mark_frontier(pts[:4])} == {"a", "d"}


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.tuples(hs.integers(0, 4), hs.integers(0, 5), hs.integers(0, 5)), min_size=1, max_size=12))
def test_frontier_is_exactly_the_undominated_points(triples):
    pts = [_pt(str(i), r / 4, pay, calls) for i, (r, pay, calls) in enumerate(triples)]
    front = mark_frontier(pts)
    assert front

    def dominates(q, p):
        return (q.recall >= p.recall and q.payload_tokens <= p.payload_tokens and q.calls <= p.calls
                and (q.recall, -q.payload_tokens, -q.calls) != (p.recall, -p.payload_tokens, -p.calls))

    for p in pts:
        assert p.frontier == (not any(dominates(q, p) for q in pts if q is not p))
    best = choose(pts)
    assert best.recall == max(p.recall for p in pts)


def test_tune_main_end_to_end(tmp_path, capsys):
    out, js = tmp_path / "tuned.toml", tmp_path / "sweep.json"
    code = tune_main(["--scenarios", str(SCENARIOS / "cross-session.yaml"), "--grid", "top_k=1,4",
                      "--base-preset", "customer service", "--out", str(out), "--json", str(js)])
    assert code == 0
    text = capsys.readouterr().out
    data = json.loads(js.read_text())
    (chosen,) = [p for p in data["points"] if p["chosen"]]
    assert "Pareto frontier" in text and "generative agents" in text
    assert f"chosen (recall-cost): {chosen['label']}" in text
    cfg = MemoryConfig.load(out)
    assert cfg.preset == "custom" and cfg.top_k == chosen["values"]["top_k"]
    assert cfg == chosen_config(SweepPoint(label="", values=chosen["values"]), "customer service")


def test_cli_tune_reports_a_bad_grid_as_a_usage_error(capsys):
    from engine.cli import main

    assert main(["tune", "--scenarios", str(SCENARIOS / "cross-session.yaml"), "--grid", "tua=1"]) == 2
    err = capsys.readouterr().err
    assert "'tua' is not a MemoryConfig field" in err
    assert main(["tune", "--scenarios", "nowhere/*.yaml"]) == 2
