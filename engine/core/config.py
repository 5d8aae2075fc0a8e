"""`MemoryConfig`: every tunable of the engine, the vocation presets, and preset files.

Validated at construction; every violation is reported at once. Load and save TOML or JSON.
The presets carry the forgetting-curve design's published values; other published designs'
recency/importance/relevance weightings are offered for comparison.

Trigger defaults fire in a normal chat: the reference's 0.8 × 1M tokens never did. The default
trigger is a message count (8 unprocessed messages, i.e. four exchanges) so the maturity gate,
not the trigger, decides when an event fires, as in the seed's "production regime".
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from engine.core.errors import ConfigError
from engine.core.forgetting import gate_time, half_life
from engine.core.frozen import FrozenMap
from engine.core.records import TAGS

__all__ = ["Weights", "MemoryConfig", "PRESETS", "VOCATIONS", "COMPARISON_PRESETS", "preset_names", "validate_weights",
           "repair_weights", "DEFAULT_PRESET"]

DEFAULT_PRESET = "customer service"


@dataclass(frozen=True, kw_only=True, slots=True)
class Weights:
    """Score weights (α, β, γ, δ) and importance weights (w₀, w₁, w₂). α+β+γ = 1, w₀+w₁+w₂ = 1."""

    alpha: float = 0.33
    beta: float = 0.33
    gamma: float = 0.34
    delta: float = 0.0
    w0: float = 0.1
    w1: float = 0.8
    w2: float = 0.1

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Weights:
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ConfigError(f"unknown weight(s) {sorted(unknown)}; known: alpha beta gamma delta w0 w1 w2")
        return cls(**{k: float(v) for k, v in data.items()})


SCORE_WEIGHTS = ("alpha", "beta", "gamma")
IMPORTANCE_WEIGHTS = ("w0", "w1", "w2")


def repair_weights(values: Mapping[str, float], *, fallback: Mapping[str, float] | None = None) -> tuple[dict[str, float], list[str]]:
    """Clip weights to their ranges and renormalise α+β+γ and w₀+w₁+w₂ to 1; say what changed.

    A group that sums to 0 after clipping takes `fallback`'s values (the current weights), or
    equal thirds.
    """
    out = dict(values)
    notes: list[str] = []
    for name in (*SCORE_WEIGHTS, *IMPORTANCE_WEIGHTS):
        v = float(out[name])
        c = min(1.0, max(0.0, v)) if v == v else 0.0
        if c != v:
            notes.append(f"{name} {v:.4g} clipped to {c:.4g}")
        out[name] = c
    d = float(out.get("delta", 0.0))
    dc = min(1.0, max(-1.0, d)) if d == d else 0.0
    if dc != d:
        notes.append(f"delta {d:.4g} clipped to {dc:.4g}")
    out["delta"] = dc
    for group in (SCORE_WEIGHTS, IMPORTANCE_WEIGHTS):
        total = sum(out[n] for n in group)
        if abs(total - 1.0) <= 1e-9:
            continue
        if total <= 0.0:
            base = fallback if fallback and all(n in fallback for n in group) else {n: 1.0 for n in group}
            total_b = sum(float(base[n]) for n in group) or 1.0
            for n in group:
                out[n] = float(base[n]) / total_b
            notes.append(f"{'+'.join(group)} summed to 0; reset to {[round(out[n], 4) for n in group]}")
            continue
        for n in group:
            out[n] = out[n] / total
        notes.append(f"{'+'.join(group)} summed to {total:.4g}; renormalised to 1")
    return out, notes


def validate_weights(w: Weights, *, tol: float = 1e-6) -> list[str]:
    """Every violation of the weight constraints, as readable strings (empty when valid)."""
    problems = []
    for name in ("alpha", "beta", "gamma", "w0", "w1", "w2"):
        v = getattr(w, name)
        if not (isinstance(v, (int, float)) and math.isfinite(v)) or not 0.0 <= v <= 1.0:
            problems.append(f"{name} = {v} must be a number in [0, 1]")
    if not (math.isfinite(w.delta) and -1.0 <= w.delta <= 1.0):
        problems.append(f"delta = {w.delta} must be in [-1, 1]")
    s1 = w.alpha + w.beta + w.gamma
    if math.isfinite(s1) and abs(s1 - 1.0) > tol:
        problems.append(f"alpha + beta + gamma = {s1:.6g} must equal 1")
    s2 = w.w0 + w.w1 + w.w2
    if math.isfinite(s2) and abs(s2 - 1.0) > tol:
        problems.append(f"w0 + w1 + w2 = {s2:.6g} must equal 1")
    return problems


#: Vocation presets (seconds), exact values from the first seed.
VOCATIONS: dict[str, dict[str, float]] = {
    "customer service": dict(tau_m=600, c_m=0.5, tau=43200, c=0.5, slice_value=0.7, long_term_value=0.9),
    "collaborative creation": dict(
        tau_m=3600, c_m=1.0, tau=604800, c=0.7, slice_value=0.9, long_term_value=0.98
    ),
    "accompany": dict(tau_m=7200, c_m=0.8, tau=86400, c=0.5, slice_value=0.8, long_term_value=0.95),
}

#: Other published recency/importance/relevance weightings, for comparison in the lab and tuning.
#: Generative Agents (Park et al. 2023): equal weights, recency 0.995 per hour => exponential decay
#: with τ = 1 h / −ln(0.995) ≈ 199.5 h and c = 1.
COMPARISON_PRESETS: dict[str, dict[str, Any]] = {
    "generative agents": dict(
        tau=3600.0 / -math.log(0.995),
        c=1.0,
        weights=dict(alpha=1 / 3, beta=1 / 3, gamma=1 / 3, delta=0.0, w0=0.1, w1=0.8, w2=0.1),
        always_inject_types=(),
        tune_weights=False,
    ),
    "relevance only": dict(
        weights=dict(alpha=1.0, beta=0.0, gamma=0.0, delta=0.0, w0=0.1, w1=0.8, w2=0.1),
        always_inject_types=(),
        tune_weights=False,
    ),
}

PRESETS: tuple[str, ...] = (*VOCATIONS, "custom", *COMPARISON_PRESETS)

#: The retrieval paths, the fusions, and the default weight tables (each path's share of R; the
#: dimension path's constraint weights, DimMem's LongMemEval values, renormalised per query).
RETRIEVAL_PATHS: tuple[str, ...] = ("bm25", "dense", "dim", "message")
#: The paths that run by default ("message", engine.memory.messagepath, is opt-in: its weight is
#: `path_weights["message"]`, 0 when absent).
DEFAULT_PATHS: tuple[str, ...] = ("bm25", "dense", "dim")
FUSIONS: tuple[str, ...] = ("anchored", "minmax", "seed")
#: How the live-window guard picks the pending user messages it reads (engine.memory.contradiction).
GUARD_MODES: tuple[str, ...] = ("cues", "always", "off")
#: What strengthens a memory: its use (restated, or used in the reply), or every injection (the first seed).
REINFORCE_MODES: tuple[str, ...] = ("use", "injection")
DEFAULT_PATH_WEIGHTS: dict[str, float] = {"bm25": 0.4, "dense": 0.4, "dim": 0.2}
DIM_CONSTRAINTS: tuple[str, ...] = ("type", "tag", "attribute", "answer", "time", "location", "keyword_phrase",
                                    "keyword_tokens")
#: memlab adds "tag" (the salience a question asks for: preference, safety, ...) and "answer" (the
#: record states the kind of thing asked for: a place for "where", a time for "when"), each at the
#: type's weight, and "attribute" (the record states the attribute asked for: an occupation for
#: "what do I do for a living?") at the time constraint's weight, being as specific.
DEFAULT_DIM_WEIGHTS: dict[str, float] = {"type": 0.15, "tag": 0.15, "attribute": 0.30, "answer": 0.15, "time": 0.30,
                                         "location": 0.20, "keyword_phrase": 0.15, "keyword_tokens": 0.15}


def preset_names() -> list[str]:
    return list(PRESETS)


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryConfig:
    """Every knob of the engine. Build with `MemoryConfig.from_preset(name, **overrides)`."""

    preset: str = DEFAULT_PRESET
    # -- forgetting curve (seconds) --
    tau_m: float = 600.0
    c_m: float = 0.5
    tau: float = 43200.0
    c: float = 0.5
    slice_value: float = 0.7
    long_term_value: float = 0.9
    induct_min_records: int = 3  # the inducer waits until this many mature, lasting, current records are past its cursor
    induct_max_wait: float = 604800.0  # ... or until the oldest of them was said this many seconds ago
    induct_at_once: bool = True  # records the profile shows at once (identity, preference, ...) never wait for a batch
    induct_in_extraction: bool = True  # the extractor also says what its records change in the profile: no inducer call
    decay_enabled: bool = True
    consolidation_k: float = 0.5
    # -- trigger: when working memory is "full enough" for an event --
    trigger: str = "messages"  # "fraction" | "tokens" | "messages"
    trigger_threshold: float = 8  # messages, tokens, or a fraction of context_budget
    context_budget: int = 4000  # tokens of working memory the chat model is given
    keep_recent: int = 4  # messages kept in the window after truncation, for continuity
    overflow_extract: bool = True  # no blind spot: extract pending messages before the budgeted window drops them
    overflow_keep: float = 0.1  # a window overflow extracts pending messages until the rest fit this share of the budget
    idle_event: bool = True  # an idle gap past the slice gate opens the gate without the trigger
    skip_contentless: bool = True  # a window whose user messages are only questions and acknowledgements: no extractor call
    cue_event: bool = True  # a pending user message with a change cue opens the gate: extracted on its turn, not read twice
    # -- weights (defaults; tuned per theme when tune_weights) --
    weights: Weights = field(default_factory=Weights)
    tune_weights: bool = False  # per-theme weights by the tuner role: measured to change no bundled outcome, so off
    # -- selection --
    top_k: int = 4
    always_inject_types: tuple[str, ...] = ("identity", "preference")
    min_relevance: float = 0.15  # set-relative R a seat needs (floor and top-K): an empty seat beats an irrelevant one
    min_score_ratio: float = 0.6  # a seat needs S >= this share of the best candidate's S (0 = off)
    distinct_sources: bool = True  # a record whose source messages are all in seated records waits for the distinct ones
    spread_sessions: bool = False  # an aggregate question seats one record per session first (LoCoMo: -.024 @10, off)
    diversity: float = 0.0  # top-K seats by maximal marginal relevance: this share of the score goes to being unlike the seated (0 = off)
    diversity_pool: int = 40  # ... chosen among this many best candidates by S (the rest follow in S order)
    safety_seats: int = 1  # seats held by "safety" records (allergies, medical, legal, accessibility), relevance or not
    reinforce_on: str = "use"  # "use": restated or used in the reply, once per session | "injection": the first seed's
    injection_budget: int = 600  # tokens of injected records at most
    profile_budget: int = 400  # tokens of profile lines a prompt, extractor or inducer is shown (engine.memory.profileview)
    candidate_k: int = 50  # per retrieval path
    source_context: float = 0.0  # share of a record's vector taken from its source messages' text (0: off)
    score_log_rows: int = 24  # scoring rows per retrieval: every seated or held-back one + the best N (at most 3 below the bar; 0: all)
    log_full_turns: int = 200  # log retention: a session's last N turns keep every row; older turns are compacted (0: keep all)
    retrieval_policy: str = "per_turn"  # "per_turn" | "on_event"
    include_history: bool = False  # serve superseded records too
    live_contradiction: str = "cues"  # the live-window guard: "cues" | "always" | "off" (engine.memory.contradiction)
    # -- dimensional extraction and retrieval --
    window: int = 40
    overlap: int = 3
    paths: tuple[str, ...] = DEFAULT_PATHS  # which retrieval paths run
    fusion: str = "anchored"  # score fusion over the paths: "anchored" | "minmax" | "seed" (the first seed's dense-only R)
    path_weights: Mapping[str, float] = field(default_factory=lambda: FrozenMap(DEFAULT_PATH_WEIGHTS))
    dim_weights: Mapping[str, float] = field(default_factory=lambda: FrozenMap(DEFAULT_DIM_WEIGHTS))
    message_prev_weight: float = 0.0  # message path: + weight * max(0, cos) of the turn before / after (0 = off)
    message_next_weight: float = 0.0
    message_candidates: int = 0  # engine.memory.expansion: records of the N nearest messages join (0 = off)
    message_per_turn: int = 1  # ... at most this many per message (0: all)
    bm25_prefix: int = 0  # retrieval's BM25: a query word of >= N letters also matches as a prefix (0 = exact words)
    unnamed_query: float = 0.0  # engine.memory.querywide: the question's vector moved this far toward it without names
    # -- dimension-aware update --
    update_jaccard: float = 0.3
    update_cosine: float | None = None  # None: the embedder's calibrated threshold (MiniLM 0.7)
    # -- chat --
    core_prompt: str = "You are a helpful assistant with long-term memory of this user."

    def __post_init__(self) -> None:
        for name in ("path_weights", "dim_weights"):
            table = getattr(self, name)
            if isinstance(table, Mapping) and not isinstance(table, FrozenMap):
                object.__setattr__(self, name, FrozenMap(table))
        problems = [*_number_problems(self), *_choice_problems(self), *_table_problems(self)]
        if problems:
            raise ConfigError(problems)

    # -- derived quantities --------------------------------------------------------------
    @property
    def slice_gate_seconds(self) -> float:
        """Age at which a message is mature enough to slice: τ_m·(−ln(1 − slice_value))^(1/c_m)."""
        return gate_time(self.slice_value, tau=self.tau_m, c=self.c_m)

    @property
    def induction_gate_seconds(self) -> float:
        """Age at which a record is mature enough to induct into the profile."""
        return gate_time(self.long_term_value, tau=self.tau_m, c=self.c_m)

    @property
    def decay_half_life_seconds(self) -> float:
        return half_life(tau=self.tau, c=self.c)

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_preset(cls, name: str = DEFAULT_PRESET, **overrides: Any) -> MemoryConfig:
        """A preset by name (case-insensitive), with overrides applied on top."""
        key = _preset_key(name)
        values: dict[str, Any] = {"preset": key}
        if key in VOCATIONS:
            values.update(VOCATIONS[key])
        elif key in COMPARISON_PRESETS:
            values.update(COMPARISON_PRESETS[key])
        values.update(overrides)
        return cls.from_dict(values)

    def with_overrides(self, **overrides: Any) -> MemoryConfig:
        data = self.to_dict()
        data.update(overrides)
        return MemoryConfig.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Weights):
                v = v.to_dict()
            elif isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, Mapping):
                v = dict(v)
            out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None) -> MemoryConfig:
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(
                [f"unknown key {k!r}; known keys: {', '.join(known)}" for k in unknown], source=source
            )
        values = dict(data)
        try:
            if "weights" in values and not isinstance(values["weights"], Weights):
                base = Weights().to_dict()
                base.update(dict(values["weights"]))
                values["weights"] = Weights.from_dict(base)
            for name in ("always_inject_types", "paths"):
                if name in values and not isinstance(values[name], str):
                    values[name] = tuple(values[name])
            if "preset" in values:
                values["preset"] = _preset_key(values["preset"])
            for name in ("path_weights", "dim_weights"):
                if name in values:
                    values[name] = FrozenMap({str(k): float(v) for k, v in dict(values[name]).items()})
            for name in INTEGER_MINIMUMS:  # every integer knob: 4.0 from a TOML or a slider is 4
                if name in values and isinstance(values[name], float) and values[name].is_integer():
                    values[name] = int(values[name])
        except ConfigError as exc:
            raise ConfigError(exc.problems, source=source) from None
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc), source=source) from None
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(exc.problems, source=source) from None
        except TypeError as exc:
            raise ConfigError(str(exc), source=source) from None

    # -- files ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write this config as TOML (.toml) or JSON (.json)."""
        path = Path(path)
        data = self.to_dict()
        if path.suffix.lower() == ".json":
            path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        elif path.suffix.lower() == ".toml":
            import tomli_w

            # TOML has no null: a None knob is left out, and `load` takes it from the preset (None)
            path.write_text(tomli_w.dumps({k: v for k, v in data.items() if v is not None}), encoding="utf-8")
        else:
            raise ConfigError(f"cannot save config to {path}: use a .toml or .json file name")
        return path

    @classmethod
    def load(cls, path: str | Path) -> MemoryConfig:
        """Read a config saved by `save` (TOML or JSON); a missing key takes its preset's value."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", source=str(path)) from None
        try:
            text = raw.decode("utf-8")
            if path.suffix.lower() == ".json":
                data = json.loads(text)
            elif path.suffix.lower() == ".toml":
                data = tomllib.loads(text)
            else:
                raise ConfigError("use a .toml or .json file", source=str(path))
        except UnicodeDecodeError:
            raise ConfigError("the file is not UTF-8 text", source=str(path)) from None
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"the file is not valid {path.suffix[1:].upper()}: {exc}", source=str(path)) from None
        if not isinstance(data, dict):
            raise ConfigError("the top level must be a table of keys", source=str(path))
        preset = data.get("preset", DEFAULT_PRESET)
        if not isinstance(preset, str):
            raise ConfigError(f"preset must be a string, got {preset!r}", source=str(path))
        try:
            base = cls.from_preset(preset).to_dict()
        except ConfigError as exc:
            raise ConfigError(exc.problems, source=str(path)) from None
        base.update(data)
        return cls.from_dict(base, source=str(path))

    def describe(self) -> dict[str, Any]:
        """The config plus its derived gate times, for printing with results."""
        out = self.to_dict()
        out["slice_gate_seconds"] = round(self.slice_gate_seconds, 3)
        out["induction_gate_seconds"] = round(self.induction_gate_seconds, 3)
        out["decay_half_life_seconds"] = round(self.decay_half_life_seconds, 3)
        return out


#: Numeric knobs and their bounds: name -> (test, what the value must be).
NUMBER_BOUNDS: dict[str, tuple[Callable[[float], bool], str]] = {
    "tau_m": (lambda v: v > 0, "a positive number of seconds"),
    "tau": (lambda v: v > 0, "a positive number of seconds"),
    "c_m": (lambda v: 0 < v <= 5, "in (0, 5]"),
    "c": (lambda v: 0 < v <= 5, "in (0, 5]"),
    "slice_value": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "long_term_value": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "overflow_keep": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "consolidation_k": (lambda v: v > 0, "> 0"), "min_relevance": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "min_score_ratio": (lambda v: 0 <= v <= 1, "in [0, 1]"), "diversity": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "source_context": (lambda v: 0 <= v <= 1, "in [0, 1]"), "unnamed_query": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "update_jaccard": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "message_prev_weight": (lambda v: 0 <= v <= 1, "in [0, 1]"), "message_next_weight": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "induct_max_wait": (lambda v: v >= 0, "a number of seconds >= 0"),
}
#: Integer knobs and their least value.
INTEGER_MINIMUMS: dict[str, int] = {"context_budget": 1, "top_k": 1, "injection_budget": 1, "candidate_k": 1, "window": 2,
                                    "keep_recent": 0, "overlap": 0, "safety_seats": 0, "score_log_rows": 0, "bm25_prefix": 0,
                                    "log_full_turns": 0, "induct_min_records": 1, "message_candidates": 0, "message_per_turn": 0,
                                    "diversity_pool": 1, "profile_budget": 1}
TRIGGERS: tuple[str, ...] = ("fraction", "tokens", "messages")
RETRIEVAL_POLICIES: tuple[str, ...] = ("per_turn", "on_event")


def _number_problems(cfg: MemoryConfig) -> list[str]:
    problems = []
    for name, (ok, what) in NUMBER_BOUNDS.items():
        v = getattr(cfg, name)
        if not (_num(v) and ok(v)):
            problems.append(f"{name} = {v!r} must be {what}")
    if cfg.update_cosine is not None and not (_num(cfg.update_cosine) and 0 <= cfg.update_cosine <= 1):
        problems.append(f"update_cosine = {cfg.update_cosine!r} must be in [0, 1] (or unset: the embedder's)")
    if _num(cfg.slice_value) and _num(cfg.long_term_value) and cfg.long_term_value < cfg.slice_value:
        problems.append(f"long_term_value ({cfg.long_term_value}) must be >= slice_value ({cfg.slice_value}): "
                        "a record is inducted only after it was sliced")
    for name, lo in INTEGER_MINIMUMS.items():
        v = getattr(cfg, name)
        if not (isinstance(v, int) and not isinstance(v, bool) and v >= lo):
            problems.append(f"{name} = {v!r} must be an integer >= {lo}")
    if isinstance(cfg.window, int) and isinstance(cfg.overlap, int) and cfg.overlap >= cfg.window:
        problems.append(f"overlap ({cfg.overlap}) must be smaller than window ({cfg.window})")
    return problems


def _choice_problems(cfg: MemoryConfig) -> list[str]:
    problems = []
    if cfg.preset not in PRESETS:
        problems.append(f"preset {cfg.preset!r} is unknown; choose one of: {', '.join(PRESETS)}")
    for name, choices in (("trigger", TRIGGERS), ("retrieval_policy", RETRIEVAL_POLICIES),
                          ("reinforce_on", REINFORCE_MODES), ("live_contradiction", GUARD_MODES),
                          ("fusion", FUSIONS)):
        if getattr(cfg, name) not in choices:
            problems.append(f"{name} {getattr(cfg, name)!r} must be one of {', '.join(choices)}")
    if cfg.trigger in TRIGGERS:
        if not _num(cfg.trigger_threshold) or cfg.trigger_threshold <= 0:
            problems.append(f"trigger_threshold = {cfg.trigger_threshold!r} must be > 0")
        elif cfg.trigger == "fraction" and cfg.trigger_threshold > 1:
            problems.append(f"trigger_threshold = {cfg.trigger_threshold} is a fraction of the budget: use (0, 1]")
    bad_types = [t for t in cfg.always_inject_types if t not in TAGS]
    if bad_types:
        problems.append(f"always_inject_types {bad_types} are not tags; use some of {', '.join(TAGS)}")
    bad_paths = [p for p in cfg.paths if p not in RETRIEVAL_PATHS] if isinstance(cfg.paths, tuple) else None
    if bad_paths is None or bad_paths or not cfg.paths:
        problems.append(f"paths {cfg.paths!r} must be a non-empty tuple of {', '.join(RETRIEVAL_PATHS)}")
    return problems


def _table_problems(cfg: MemoryConfig) -> list[str]:
    problems = []
    if not isinstance(cfg.weights, Weights):
        problems.append("weights must be a Weights")
    else:
        problems.extend(f"weights: {p}" for p in validate_weights(cfg.weights))
    problems.extend(_check_simplex("path_weights", cfg.path_weights, RETRIEVAL_PATHS))
    problems.extend(_check_simplex("dim_weights", cfg.dim_weights, DIM_CONSTRAINTS, need_sum=False))
    return problems


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _preset_key(name: Any) -> str:
    if not isinstance(name, str):
        raise ConfigError(f"preset name must be a string, got {name!r}")
    key = " ".join(name.strip().lower().replace("_", " ").replace("-", " ").split())
    if key not in PRESETS:
        raise ConfigError(f"preset {name!r} is unknown; choose one of: {', '.join(PRESETS)}")
    return key


def _check_simplex(name: str, weights: Mapping[str, float], keys: tuple[str, ...], need_sum: bool = True):
    problems = []
    if not isinstance(weights, Mapping):
        return [f"{name} must be a table of {', '.join(keys)}"]
    unknown = set(weights) - set(keys)
    if unknown:
        problems.append(f"{name} has unknown key(s) {sorted(unknown)}; use {', '.join(keys)}")
    for k, v in weights.items():
        if not (_num(v) and v >= 0):
            problems.append(f"{name}.{k} = {v!r} must be a number >= 0")
    if not problems and sum(weights.values()) <= 0:
        problems.append(f"{name} must have a positive sum")
    return problems
