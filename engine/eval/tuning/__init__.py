"""Preset tuning: sweep a grid (weights on the simplex) or search with Optuna over scenarios, find
the Pareto frontier of recall against stale values served, payload and calls, choose safely on it,
and save the chosen point as a custom preset.

`grid` parses `key=v1,v2;…` specs; `points` measures a setting (training and validation
scenarios); `frontier` marks the frontier and chooses; `search` runs grids and Optuna; `cli` is
`memlab tune`.
"""

from engine.eval.tuning.cli import chosen_config, render, tune_main
from engine.eval.tuning.frontier import OBJECTIVES, choose, dominates, mark_frontier
from engine.eval.tuning.grid import (
           DEFAULT_GRID,
           complete_simplexes,
           grid_points,
           nest,
           parse_grid,
           simplex_lattice,
)
from engine.eval.tuning.points import (
           Measure,
           SweepPoint,
           measure,
           point_configs,
           split_scenarios,
)
from engine.eval.tuning.search import SEARCH_SPACE, SweepResult, search, sweep

__all__ = ["DEFAULT_GRID", "OBJECTIVES", "SEARCH_SPACE", "Measure", "SweepPoint", "SweepResult", "choose",
           "chosen_config", "complete_simplexes", "dominates", "grid_points", "mark_frontier", "measure", "nest",
           "parse_grid", "point_configs", "render", "search", "simplex_lattice", "split_scenarios", "sweep",
           "tune_main"]
