"""Strategies by name, and running them through the one driver.

`run_strategy` builds a strategy's runner on a fresh clock at the scenario's start and hands it
to `engine.eval.driver.drive`; every strategy therefore sees the identical conversation at the
identical times and is judged by the identical probe checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.errors import ConfigError
from engine.eval.driver import drive
from engine.eval.options import parse_sets
from engine.eval.scenario import Scenario
from engine.eval.strategies.base import (
    STRATEGY_NAMES,
    RunContext,
    Strategy,
    StrategyRun,
)
from engine.eval.strategies.engine_backed import DESIGNS, EngineStrategy
from engine.eval.strategies.summarization import SummarizationStrategy
from engine.eval.strategies.window import NoMemoryStrategy

__all__ = ["make_strategy", "parse_compare", "run_strategy", "compare"]


def make_strategy(name: str, overrides: Mapping[str, Any] | None = None) -> Strategy:
    """A strategy by name (see STRATEGY_NAMES) with optional config overrides for it alone."""
    key = name.strip().lower()
    ov = dict(overrides or {})
    if key == "no-memory":
        return NoMemoryStrategy(overrides=ov)
    if key == "summarization":
        return SummarizationStrategy(overrides=ov)
    if key in DESIGNS:
        return EngineStrategy.named(key, ov)
    raise ConfigError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGY_NAMES)}")


def parse_compare(spec: str) -> list[Strategy]:
    """`no-memory,memlab` or with per-strategy overrides `no-memory:context_budget=8000,memlab`."""
    out: list[Strategy] = []
    for item in (s.strip() for s in (spec or "").split(",")):
        if not item:
            continue
        name, *sets = item.split(":")
        out.append(make_strategy(name, parse_sets(sets)))
    if not out:
        raise ConfigError(f"--compare needs strategy names, e.g. --compare {','.join(STRATEGY_NAMES)}")
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"--compare lists a strategy twice ({', '.join(names)}); list each once")
    return out


def run_strategy(
    strategy: Strategy,
    scenario: Scenario,
    *,
    config: MemoryConfig | None = None,
    settings: Any = None,
    embedder: str = "hash",
    sample: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> StrategyRun:
    """Drive one scenario through one strategy's runner; the driver checks the probes."""
    cfg = strategy.config_for(config or scenario.memory_config())
    clock = VirtualClock(scenario.start)
    runner = strategy.open(RunContext(config=cfg, clock=clock, settings=settings, embedder=embedder))
    run = drive(scenario, runner, clock, progress=progress)
    return StrategyRun(strategy=strategy.name, scenario=scenario.name, sample=sample, probes=run.probes,
                       payload_tokens=run.payload_tokens, ledger=runner.ledger.summary(),
                       budget=strategy.budget(cfg), config=cfg.to_dict(), turns=run.turns)


def compare(
    scenarios: Sequence[Scenario],
    strategies: Sequence[Strategy],
    *,
    samples: int = 1,
    preset: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    settings: Any = None,
    embedder: str = "hash",
    progress: Callable[[int, int, str], None] | None = None,
) -> list[StrategyRun]:
    """Every strategy on every scenario, `samples` times, on matched budgets unless overridden."""
    if samples < 1:
        raise ConfigError(f"--samples {samples} must be at least 1")
    jobs = [(sc, st, i) for sc in scenarios for i in range(samples) for st in strategies]
    runs = []
    for done, (sc, st, i) in enumerate(jobs):
        if progress:
            progress(done, len(jobs), f"{sc.name} · {st.name}")
        base = sc.memory_config(preset=preset, overrides=overrides)
        runs.append(run_strategy(st, sc, config=base, settings=settings, embedder=embedder, sample=i))
    if progress:
        progress(len(jobs), len(jobs), "done")
    return runs
