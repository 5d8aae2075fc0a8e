"""A tuning point and its measurement: recall, stale values served, payload and calls.

Every point runs the memlab strategy with scripted models (offline, repeatable) over a set of
scenarios. Recall is the mean of context and reply recall over every expected keyword; stale
values served counts each rejected keyword that reached the model's context or its reply (a
superseded city, a one-off instruction, an old booking); payload is the injected memory tokens
over all probes; calls are every model call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.core.config import MemoryConfig
from engine.eval.driver import probe_recall
from engine.eval.scenario import Scenario
from engine.eval.strategies.base import apply_overrides
from engine.eval.strategies.run import make_strategy, run_strategy
from engine.eval.tuning.grid import complete_simplexes, nest

__all__ = ["Measure", "SweepPoint", "measure", "point_configs", "split_scenarios"]


@dataclass(frozen=True, kw_only=True)
class Measure:
    """What a point did over a set of scenarios."""

    scenarios: int = 0
    expected: int = 0
    context_recall: float = 0.0
    reply_recall: float = 0.0
    rejected_served: int = 0
    payload_tokens: int = 0
    calls: int = 0

    @property
    def recall(self) -> float:
        return (self.context_recall + self.reply_recall) / 2

    def to_dict(self) -> dict[str, Any]:
        return {"scenarios": self.scenarios, "expected": self.expected, "context_recall": self.context_recall,
                "reply_recall": self.reply_recall, "recall": self.recall, "rejected_served": self.rejected_served,
                "payload_tokens": self.payload_tokens, "calls": self.calls}


@dataclass
class SweepPoint:
    """One setting: its values (flat keys like `weights.alpha`), its training measure and, when the
    scenarios were split, its validation measure. The flat figures are the training ones."""

    label: str
    values: dict[str, Any]  # flat grid values; empty for reference points
    reference: bool = False
    preset: str | None = None  # a reference point's preset
    expected: int = 0
    context_recall: float = 0.0
    reply_recall: float = 0.0
    rejected_served: int = 0
    payload_tokens: int = 0
    calls: int = 0
    frontier: bool = False
    chosen: bool = False
    validation: Measure | None = None

    @property
    def recall(self) -> float:
        return (self.context_recall + self.reply_recall) / 2

    def record(self, train: Measure, validation: Measure | None = None) -> None:
        self.expected, self.context_recall, self.reply_recall = train.expected, train.context_recall, train.reply_recall
        self.rejected_served, self.payload_tokens, self.calls = train.rejected_served, train.payload_tokens, train.calls
        self.validation = validation

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "values": self.values, "reference": self.reference, "preset": self.preset,
                "expected": self.expected, "context_recall": self.context_recall, "reply_recall": self.reply_recall,
                "recall": self.recall, "rejected_served": self.rejected_served,
                "payload_tokens": self.payload_tokens, "calls": self.calls, "frontier": self.frontier,
                "chosen": self.chosen, "validation": None if self.validation is None else self.validation.to_dict()}


def point_configs(scenarios: Sequence[Scenario], base_preset: str | None, values: Mapping[str, Any]) -> list[MemoryConfig]:
    """Each scenario's config with the point's values on top (weight groups kept on the simplex)."""
    out = []
    for sc in scenarios:
        base = sc.memory_config(preset=base_preset)
        out.append(apply_overrides(base, complete_simplexes(nest(values), base.weights)))
    return out


def measure(scenarios: Sequence[Scenario], configs: Sequence[MemoryConfig]) -> Measure:
    """Run the memlab strategy on each scenario with its config; sum the figures."""
    strategy = make_strategy("memlab")
    probes: list[dict[str, Any]] = []
    payload = calls = 0
    for sc, cfg in zip(scenarios, configs, strict=True):
        run = run_strategy(strategy, sc, config=cfg)
        probes.extend(run.probes)
        payload += run.payload_tokens
        calls += sum(run.calls.values())
    rc = probe_recall(probes)
    n = rc["expected"]
    return Measure(scenarios=len(scenarios), expected=n, context_recall=rc["context"] / n if n else 0.0,
                   reply_recall=rc["reply"] / n if n else 0.0, rejected_served=rc["rejected_served"],
                   payload_tokens=payload, calls=calls)


@dataclass(frozen=True)
class Split:
    training: list[Scenario] = field(default_factory=list)
    validation: list[Scenario] = field(default_factory=list)


def split_scenarios(scenarios: Sequence[Scenario], *, validation_share: float, seed: int = 0) -> Split:
    """A deterministic split by scenario name (a hash, not the file order): about
    `validation_share` of the scenarios validate, the rest train. 0 keeps every one for training."""
    if validation_share <= 0 or len(scenarios) < 2:
        return Split(training=list(scenarios))
    ranked = sorted(scenarios, key=lambda s: hashlib.sha256(f"{seed}:{s.name}".encode()).hexdigest())
    n_val = min(len(ranked) - 1, max(1, round(len(ranked) * validation_share)))
    val = {s.name for s in ranked[:n_val]}
    return Split(training=[s for s in scenarios if s.name not in val], validation=[s for s in scenarios if s.name in val])
