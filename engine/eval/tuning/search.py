"""Running a tuning: a grid sweep, or Optuna's multi-objective search, always with reference points.

Both measure every point on the training scenarios and, when the scenarios are split, on the
validation scenarios too; the base preset and the comparison presets ("generative agents",
"relevance only") run alongside as reference points. The Optuna search (NSGA-II, seeded, so a
search is repeatable) maximises recall and minimises stale values served and payload; its trials
become points like a grid's, and the choice is the same safe frontier choice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.core.config import COMPARISON_PRESETS, MemoryConfig
from engine.core.errors import ConfigError, ScenarioError
from engine.eval.scenario import Scenario
from engine.eval.tuning.frontier import OBJECTIVES, choose, mark_frontier
from engine.eval.tuning.grid import grid_points
from engine.eval.tuning.points import (
    Measure,
    SweepPoint,
    measure,
    point_configs,
    split_scenarios,
)

__all__ = ["SweepResult", "sweep", "search", "SEARCH_SPACE"]

Progress = Callable[[int, int, str], None]

#: The knobs the Optuna search explores by default, with their ranges (weights on the simplex).
SEARCH_SPACE: dict[str, tuple] = {
    "tau": ("log", 3600.0, 30 * 86400.0),
    "c": ("float", 0.3, 1.0),
    "top_k": ("int", 2, 8),
    "min_relevance": ("float", 0.0, 0.4),
    "min_score_ratio": ("float", 0.0, 0.9),
    "weights": ("simplex",),
}


@dataclass
class SweepResult:
    points: list[SweepPoint]
    skipped: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # invalid points, why
    base_preset: str | None = None
    objective: str = "recall-cost"
    training: list[str] = field(default_factory=list)  # scenario names
    validation: list[str] = field(default_factory=list)
    search: str = "grid"

    @property
    def chosen(self) -> SweepPoint | None:
        return next((p for p in self.points if p.chosen), None)

    @property
    def base(self) -> SweepPoint | None:
        return next((p for p in self.points if p.reference and p.label.startswith("base")), None)


def _label(values: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={_short(v)}" for k, v in values.items()) or "(base)"


def _short(v: Any) -> Any:
    return round(v, 4) if isinstance(v, float) else v


def _check(scenarios: Sequence[Scenario], objective: str, base_preset: str | None) -> None:
    if not scenarios:
        raise ScenarioError("no scenarios to tune on; pass --scenarios 'scenarios/*.yaml'")
    if objective not in OBJECTIVES:
        raise ConfigError(f"--objective {objective!r} is unknown; use one of {', '.join(OBJECTIVES)}")
    if base_preset is not None:
        MemoryConfig.from_preset(base_preset)  # a bad name fails here, naming the presets


class _Runner:
    """Measures points on the training (and validation) scenarios, with progress."""

    def __init__(self, scenarios: Sequence[Scenario], base_preset: str | None, validation_share: float, seed: int,
                 progress: Progress | None):
        split = split_scenarios(scenarios, validation_share=validation_share, seed=seed)
        self.train, self.val = split.training, split.validation
        self.base_preset, self.progress, self.done = base_preset, progress, 0

    def configs(self, values: Mapping[str, Any]) -> tuple[list[MemoryConfig], list[MemoryConfig]]:
        return (point_configs(self.train, self.base_preset, values), point_configs(self.val, self.base_preset, values))

    def run(self, point: SweepPoint, configs: tuple[list[MemoryConfig], list[MemoryConfig]], total: int) -> SweepPoint:
        if self.progress:
            self.progress(self.done, total, point.label)
        train = measure(self.train, configs[0])
        val: Measure | None = measure(self.val, configs[1]) if self.val else None
        point.record(train, val)
        self.done += 1
        return point

    def references(self, total: int) -> list[SweepPoint]:
        base = SweepPoint(label=f"base ({self.base_preset or 'scenario presets'})", values={}, reference=True,
                          preset=self.base_preset)
        out = [self.run(base, self.configs({}), total)]
        for name in COMPARISON_PRESETS:
            pt = SweepPoint(label=name, values={}, reference=True, preset=name)
            out.append(self.run(pt, ([sc.memory_config(preset=name) for sc in self.train],
                                     [sc.memory_config(preset=name) for sc in self.val]), total))
        return out

    def result(self, points: list[SweepPoint], skipped, objective: str, search: str) -> SweepResult:
        if self.progress:
            self.progress(self.done, self.done, "done")
        mark_frontier(points)
        choose(points, objective).chosen = True
        return SweepResult(points=points, skipped=skipped, base_preset=self.base_preset, objective=objective,
                           training=[s.name for s in self.train], validation=[s.name for s in self.val],
                           search=search)


def sweep(
    scenarios: Sequence[Scenario],
    grid: Mapping[str, Sequence[Any]],
    *,
    base_preset: str | None = None,
    objective: str = "recall-cost",
    references: bool = True,
    validation_share: float = 0.0,
    split_seed: int = 0,
    progress: Progress | None = None,
) -> SweepResult:
    """Run every valid grid point (and the reference presets); mark the frontier and the choice.
    Invalid points are skipped with the reason; a grid with no valid point is a ConfigError."""
    _check(scenarios, objective, base_preset)
    runner = _Runner(scenarios, base_preset, validation_share, split_seed, progress)
    jobs, skipped = [], []
    for values in grid_points(grid):
        try:
            jobs.append((SweepPoint(label=_label(values), values=values), runner.configs(values)))
        except ConfigError as exc:
            skipped.append((values, "; ".join(exc.problems)))
    if not jobs:
        first = skipped[0]
        raise ConfigError(f"no grid point makes a valid config; e.g. {_label(first[0])}: {first[1]}. "
                          "Fix the values (weights must keep alpha+beta+gamma = 1 in every point)")
    total = len(jobs) + (1 + len(COMPARISON_PRESETS) if references else 0)
    points = [runner.run(p, cfgs, total) for p, cfgs in jobs]
    if references:
        points += runner.references(total)
    return runner.result(points, skipped, objective, "grid")


def search(
    scenarios: Sequence[Scenario],
    *,
    trials: int = 40,
    seed: int = 0,
    space: Mapping[str, tuple] | None = None,
    base_preset: str | None = None,
    objective: str = "recall-cost",
    validation_share: float = 0.0,
    split_seed: int = 0,
    progress: Progress | None = None,
) -> SweepResult:
    """Optuna's multi-objective search (recall up, stale values down, payload down) over `space`."""
    import optuna

    _check(scenarios, objective, base_preset)
    if trials < 1:
        raise ConfigError(f"--trials {trials} must be at least 1")
    runner = _Runner(scenarios, base_preset, validation_share, split_seed, progress)
    space = dict(space or SEARCH_SPACE)
    total = trials + 1 + len(COMPARISON_PRESETS)
    points: list[SweepPoint] = []
    skipped: list[tuple[dict[str, Any], str]] = []

    def objective_fn(trial: Any) -> tuple[float, float, float]:
        values = _suggest(trial, space)
        try:
            configs = runner.configs(values)
        except ConfigError as exc:
            skipped.append((values, "; ".join(exc.problems)))
            raise optuna.TrialPruned() from None
        p = runner.run(SweepPoint(label=f"trial {trial.number}: {_label(values)}", values=values), configs, total)
        points.append(p)
        return p.recall, float(p.rejected_served), float(p.payload_tokens)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize", "minimize", "minimize"],
                                sampler=optuna.samplers.NSGAIISampler(seed=seed))
    study.optimize(objective_fn, n_trials=trials)
    if not points:
        raise ConfigError("no trial made a valid config; widen the search space")
    return runner.result(points + runner.references(total), skipped, objective, f"optuna ({trials} trials)")


def _suggest(trial: Any, space: Mapping[str, tuple]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, spec in space.items():
        kind = spec[0]
        if kind == "simplex":  # three uniforms normalised: a point on the weight simplex
            raw = [trial.suggest_float(f"{key}.{n}", 0.0, 1.0) for n in ("alpha", "beta", "gamma")]
            total = sum(raw) or 1.0
            values.update({f"weights.{n}": round(r / total, 4) for n, r in zip(("alpha", "beta", "gamma"), raw,
                                                                                  strict=True)})
            a = values["weights.alpha"]
            values["weights.beta"] = min(values["weights.beta"], round(1.0 - a, 4))
            values["weights.gamma"] = round(max(0.0, 1.0 - a - values["weights.beta"]), 4)
        elif kind == "log":
            values[key] = round(trial.suggest_float(key, spec[1], spec[2], log=True), 1)
        elif kind == "float":
            values[key] = round(trial.suggest_float(key, spec[1], spec[2]), 3)
        elif kind == "int":
            values[key] = trial.suggest_int(key, spec[1], spec[2])
        else:
            raise ConfigError(f"search space {key!r}: unknown kind {kind!r} (log, float, int, simplex)")
    return values
