"""The engine-backed strategies: a `MemoryEngine` configured as a design, never subclassed.

- `bmdm` (first seed): retrieval only when an event fires, the dense path only, the seed's
  set-relative cosine relevance (`fusion = "seed"`), forgetting-curve score, no dimension path.
- `dimmem` (second seed): records and tri-path retrieval ranked by relevance alone (S = R), no
  always-inject floor, no forgetting curve.
- `memlab`: the default engine (the combination).

Each is a `MemoryConfig` (the design's values, then the user's overrides) and an `EngineRunner`
over a fresh engine on the driver's clock; the engine owns the one ledger its calls go to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.core.config import MemoryConfig
from engine.eval.replay import EngineRunner
from engine.eval.strategies.base import RunContext, apply_overrides
from engine.memory.engine import MemoryEngine
from engine.roles.bundle import Models
from engine.roles.embeddings import make_embedder

__all__ = ["EngineStrategy", "DESIGNS"]

#: What the seeds do not have (memlab's additions), switched off to reproduce them.
_SEED_OFF: Mapping[str, Any] = {"min_relevance": 0.0, "min_score_ratio": 0.0, "safety_seats": 0,
                                "overflow_extract": False}

#: name -> (description, the config values that make the design)
DESIGNS: dict[str, tuple[str, Mapping[str, Any]]] = {
    "bmdm": ("first seed: on-event retrieval, dense only, set-relative cosine, forgetting curve, every "
             "injection reinforces",
             {**_SEED_OFF, "retrieval_policy": "on_event", "path_weights": {"bm25": 0.0, "dense": 1.0, "dim": 0.0},
              "paths": ("dense",), "fusion": "seed", "reinforce_on": "injection", "tune_weights": True}),
    "dimmem": ("second seed: records + tri-path retrieval, S = R, no floor, no decay",
               {**_SEED_OFF, "weights": {"alpha": 1.0, "beta": 0.0, "gamma": 0.0}, "tune_weights": False,
                "always_inject_types": ()}),
    "memlab": ("the default engine", {}),
}


@dataclass(frozen=True, kw_only=True)
class EngineStrategy:
    """A MemoryEngine configuration: the design's config (paths, fusion, weights) plus the user's overrides."""

    name: str
    description: str
    design: Mapping[str, Any] = field(default_factory=dict)  # what makes it this design
    overrides: Mapping[str, Any] = field(default_factory=dict)  # the user's, on top
    query_parsing: str = "rules"  # with real models: "rules" first (the model only when they cannot), or "model"

    @classmethod
    def named(cls, name: str, overrides: Mapping[str, Any] | None = None, *, query_parsing: str = "rules",
              label: str | None = None) -> EngineStrategy:
        description, design = DESIGNS[name]
        return cls(name=label or name, description=description, design=design, overrides=dict(overrides or {}),
                   query_parsing=query_parsing)

    def config_for(self, base: MemoryConfig) -> MemoryConfig:
        return apply_overrides(base, self.design, self.overrides)

    def budget(self, cfg: MemoryConfig) -> dict[str, Any]:
        return {"context_budget": cfg.context_budget, "memory_budget": cfg.injection_budget, "top_k": cfg.top_k}

    def open(self, ctx: RunContext) -> EngineRunner:
        models = Models.real(ctx.settings, query_parsing=self.query_parsing) if ctx.settings is not None else None
        engine = MemoryEngine(ctx.config, clock=ctx.clock, models=models, embedder=make_embedder(ctx.embedder))
        return EngineRunner(engine, detail=True)
