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
    # a partly named weight group is completed on the simplex; one that cannot sum to 1 is invalid
    with pytest.raises(ConfigError, match="no grid point makes a valid config.*alpha\\+beta\\+gamma"):
        sweep([sc], parse_grid("weights.alpha=0.9;weights.beta=0.5"))
    with pytest.raises(ConfigError, match="objective"):
        sweep([sc], parse_grid("top_k=3"), objective="cheapest")


def test_sweep_measures_points_references_frontier_and_choice(swept):
    labels = [p.label for p in swept.points]
    assert labels[:2] == ["top_k=1 tau=3600", "top_k=4 tau=3600"]
    assert {"generative agents", "relevance only"} <= set(labels) and any(lab.startswith("base") for lab in labels)
    by = {p.label: p for p in swept.points}
    small, big = by["top_k=1 tau=3600"], by["top_k=4 tau=3600"]
    assert small.expected == big.expected == 3
    # one record injected instead of up to four; here the extra ones are what the profile already
    # says (not rendered twice), so the payloads may tie
    assert small.payload_tokens <= big.payload_tokens
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


# -- weights on the simplex, stale values, validation, Optuna ------------------------------------

def test_weights_sweep_on_the_simplex():
    from engine.core.config import Weights
    from engine.eval.tuning import complete_simplexes, simplex_lattice

    lattice = simplex_lattice(0.25)
    assert len(lattice) == 15 and all(abs(sum(w.values()) - 1) < 1e-9 for w in lattice)
    points = grid_points(parse_grid("weights=simplex:0.5;top_k=2"))
    assert len(points) == 6 and all(set(p) == {"weights.alpha", "weights.beta", "weights.gamma", "top_k"} for p in points)
    base = Weights(alpha=0.33, beta=0.33, gamma=0.34)
    assert complete_simplexes({"weights": {"alpha": 0.4, "beta": 0.5}}, base)["weights"]["gamma"] == pytest.approx(0.1)
    shared = complete_simplexes({"weights": {"alpha": 0.6}}, base)["weights"]
    assert shared["beta"] + shared["gamma"] == pytest.approx(0.4) and shared["beta"] < shared["gamma"]
    with pytest.raises(ConfigError, match="step must divide 1"):
        simplex_lattice(0.3)
    for values in points:
        assert chosen_config(SweepPoint(label="", values=values)).weights.alpha == values["weights.alpha"]


def _stale(label, recall, stale, payload=100, reference=False):
    p = _pt(label, recall, payload, 10, reference=reference)
    p.rejected_served = stale
    return p


def test_a_point_serving_more_stale_values_than_the_base_is_never_chosen():
    pts = [_stale("greedy", 0.95, 3), _stale("safe", 0.80, 0), _stale("base (x)", 0.75, 1, reference=True)]
    mark_frontier(pts)
    assert {p.label for p in pts if p.frontier} == {"greedy", "safe"}
    assert choose(pts).label == "safe"
    worse = [_stale("a", 0.9, 2), _stale("base (x)", 0.7, 0, reference=True)]
    assert choose(worse).label == "base (x)"  # nothing beats the base safely
    assert all(choose(pts).frontier for _ in range(1))


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.tuples(hs.integers(0, 4), hs.integers(0, 3), hs.integers(0, 5)), min_size=1, max_size=10),
       hs.integers(0, 3))
def test_the_choice_is_on_the_frontier_and_no_staler_than_the_base(triples, base_stale):
    pts = [_stale(str(i), r / 4, st, pay) for i, (r, st, pay) in enumerate(triples)]
    pts.append(_stale("base (b)", 0.5, base_stale, 50, reference=True))
    mark_frontier(pts)
    best = choose(pts)
    assert best.rejected_served <= base_stale
    assert best.frontier or not any(p.frontier and not p.reference and p.rejected_served <= base_stale for p in pts)


def test_a_split_sweep_reports_validation_and_optuna_searches(tmp_path):
    from engine.eval.tuning import search, split_scenarios

    scs = [load_scenario(SCENARIOS / f"{n}.yaml") for n in ("cross-session", "idle-gap-decay", "knowledge-update")]
    split = split_scenarios(scs, validation_share=0.34)
    assert len(split.validation) == 1 and len(split.training) == 2
    assert split_scenarios(scs, validation_share=0.34).validation == split.validation  # deterministic
    res = sweep(scs, parse_grid("top_k=2,4"), validation_share=0.34)
    assert res.validation == [s.name for s in split.validation]
    assert all(p.validation is not None and p.validation.expected > 0 for p in res.points)
    found = search(scs, trials=3, seed=1, validation_share=0.34)
    assert found.search.startswith("optuna") and sum(not p.reference for p in found.points) == 3
    assert found.chosen is not None and found.chosen.rejected_served <= found.base.rejected_served
    again = search(scs, trials=3, seed=1, validation_share=0.34)
    assert [p.values for p in again.points] == [p.values for p in found.points]  # seeded: repeatable
