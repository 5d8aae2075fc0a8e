import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.config import PRESETS, MemoryConfig, Weights, validate_weights
from engine.core.errors import ConfigError


def test_presets_carry_the_reference_values():
    cs = MemoryConfig.from_preset("customer service")
    assert (cs.tau_m, cs.c_m, cs.tau, cs.c, cs.slice_value, cs.long_term_value) == (600, 0.5, 43200, 0.5, 0.7, 0.9)
    cc = MemoryConfig.from_preset("Collaborative-Creation")
    assert (cc.tau_m, cc.c_m, cc.tau, cc.c, cc.slice_value, cc.long_term_value) == (3600, 1.0, 604800, 0.7, 0.9, 0.98)
    ac = MemoryConfig.from_preset("accompany")
    assert (ac.tau_m, ac.c_m, ac.tau, ac.c, ac.slice_value, ac.long_term_value) == (7200, 0.8, 86400, 0.5, 0.8, 0.95)
    assert cs.weights == Weights()
    assert cs.top_k == 4 and cs.always_inject_types == ("identity", "preference")


def test_generative_agents_preset_uses_0995_per_hour():
    ga = MemoryConfig.from_preset("generative agents")
    from engine.core.forgetting import decay

    assert decay(3600, tau=ga.tau, c=ga.c) == pytest.approx(0.995)


def test_unknown_preset_names_the_choices():
    with pytest.raises(ConfigError, match="choose one of"):
        MemoryConfig.from_preset("pirate")


def test_validation_reports_every_violation_at_once():
    with pytest.raises(ConfigError) as info:
        MemoryConfig(tau=-1, c=0, slice_value=1.5, top_k=0, trigger="weekly",
                     weights=Weights(alpha=0.9, beta=0.9, gamma=0.9))
    problems = info.value.problems
    assert len(problems) >= 6
    text = str(info.value)
    for needle in ("tau", "c =", "slice_value", "top_k", "trigger", "alpha + beta + gamma"):
        assert needle in text


def test_weight_validation():
    assert validate_weights(Weights()) == []
    assert any("w0 + w1 + w2" in p for p in validate_weights(Weights(w0=0.5)))
    assert any("delta" in p for p in validate_weights(Weights(delta=3)))


def test_defaults_fire_in_a_normal_chat():
    # reference defect 1: trigger 0.8 x 1M tokens never fired
    cfg = MemoryConfig()
    assert cfg.trigger == "messages" and cfg.trigger_threshold <= 10


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_save_load_round_trip(tmp_path, suffix):
    cfg = MemoryConfig.from_preset("accompany", top_k=6, weights={"alpha": 0.5, "beta": 0.25, "gamma": 0.25},
                                   always_inject_types=("identity",), path_weights={"bm25": 1, "dense": 1, "dim": 0})
    path = cfg.save(tmp_path / f"p{suffix}")
    assert MemoryConfig.load(path) == cfg


def test_load_partial_file_takes_preset_values(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text('preset = "accompany"\ntop_k = 7\n')
    cfg = MemoryConfig.load(p)
    assert cfg.top_k == 7 and cfg.tau == 86400


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [("a.toml", "top_k = = 3", "not valid TOML"), ("a.json", "{", "not valid JSON"),
     ("a.json", "[1, 2]", "top level"), ("a.toml", 'colour = "blue"', "unknown key"),
     ("a.yaml", "x: 1", ".toml or .json"), ("a.toml", 'preset = "nope"', "choose one of")],
)
def test_bad_files_give_clear_errors(tmp_path, name, content, match):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(ConfigError, match=match) as info:
        MemoryConfig.load(p)
    assert str(p) in str(info.value) or "a.yaml" in str(info.value)


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        MemoryConfig.load(tmp_path / "missing.toml")
    p = tmp_path / "bin.toml"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="UTF-8"):
        MemoryConfig.load(p)


def test_derived_gate_times():
    cfg = MemoryConfig.from_preset("customer service")
    assert cfg.slice_gate_seconds == pytest.approx(870, rel=0.01)
    assert cfg.induction_gate_seconds == pytest.approx(53 * 60, rel=0.01)
    d = cfg.describe()
    assert d["slice_gate_seconds"] == pytest.approx(870, rel=0.01)
    json.dumps(d)


@given(st.dictionaries(st.sampled_from(["tau", "c", "top_k", "slice_value", "window", "overlap", "trigger_threshold"]),
                       st.one_of(st.integers(-5, 50), st.floats(allow_nan=True), st.text(max_size=3)), max_size=4))
def test_from_dict_never_raises_other_than_config_error(values):
    try:
        MemoryConfig.from_preset("custom", **values)
    except ConfigError:
        pass


def test_every_preset_builds():
    for name in PRESETS:
        assert MemoryConfig.from_preset(name).preset == name
