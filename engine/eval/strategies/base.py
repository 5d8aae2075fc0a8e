"""What a comparison strategy is: a named config plus a runner the one driver plays.

A strategy never subclasses the engine: it is configuration (`config_for`: the scenario's config
with the design's values and the user's overrides on top) and a small adapter (`open`: a runner
with `turn(user, session, text, name=) -> TurnView` and the `ledger` its model calls went to).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.eval.driver import TurnView, probe_recall
from engine.roles.ledger import Ledger

__all__ = ["STRATEGY_NAMES", "RunContext", "StrategyRunner", "Strategy", "StrategyRun", "apply_overrides"]

STRATEGY_NAMES: tuple[str, ...] = ("no-memory", "summarization", "bmdm", "dimmem", "memlab")
_TABLES = ("weights", "path_weights", "dim_weights")


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What a strategy's runner gets: its config, the driver's clock and the model choice."""

    config: MemoryConfig
    clock: VirtualClock
    settings: Any = None  # engine.roles.llm.ModelSettings for real/cassette models; None = scripted
    embedder: str = "hash"


class StrategyRunner(Protocol):
    """A driver runner that also shows the ledger of its model calls."""

    ledger: Ledger

    def turn(self, user_id: str, session_id: str, text: str, *, name: str | None = None) -> TurnView: ...


class Strategy(Protocol):
    name: str
    description: str
    overrides: Mapping[str, Any]

    def config_for(self, base: MemoryConfig) -> MemoryConfig: ...

    def budget(self, cfg: MemoryConfig) -> dict[str, Any]: ...

    def open(self, ctx: RunContext) -> StrategyRunner: ...


def apply_overrides(base: MemoryConfig, *layers: Mapping[str, Any]) -> MemoryConfig:
    """`base` with override layers on top; a partial table (weights, path_weights, dim_weights)
    updates the base's table instead of replacing it."""
    values: dict[str, Any] = {}
    for layer in layers:
        for k, v in layer.items():
            if k in _TABLES and isinstance(v, Mapping):
                current = getattr(base, k)
                merged = dict(values.get(k) or (current.to_dict() if k == "weights" else dict(current)))
                merged.update(v)
                values[k] = merged
            else:
                values[k] = v
    return base.with_overrides(**values) if values else base


@dataclass
class StrategyRun:
    """One strategy on one scenario (one sample): the driver's checked probes plus cost and turns."""

    strategy: str
    scenario: str
    sample: int
    probes: list[dict[str, Any]]
    payload_tokens: int
    ledger: dict[str, dict[str, float]]
    budget: dict[str, Any]
    config: dict[str, Any]
    turns: list[dict[str, Any]] = field(default_factory=list)

    @property
    def calls(self) -> dict[str, int]:
        return {role: int(v["calls"]) for role, v in sorted(self.ledger.items())}

    @property
    def input_tokens(self) -> int:
        return int(sum(v["input_tokens"] for v in self.ledger.values()))

    @property
    def output_tokens(self) -> int:
        return int(sum(v["output_tokens"] for v in self.ledger.values()))

    @property
    def cost(self) -> float:
        return float(sum(v["cost"] for v in self.ledger.values()))

    def recall(self) -> dict[str, int]:
        return probe_recall(self.probes)

    def to_dict(self, *, turns: bool = False) -> dict[str, Any]:
        out = {"strategy": self.strategy, "scenario": self.scenario, "sample": self.sample, "probes": self.probes,
               "payload_tokens": self.payload_tokens, "calls": self.calls, "input_tokens": self.input_tokens,
               "output_tokens": self.output_tokens, "cost": self.cost, "budget": self.budget}
        if turns:
            out["turns"] = self.turns
        return out
