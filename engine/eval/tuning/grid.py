"""Tuning grids: `key=v1,v2;…` specs, their points, and weight groups kept on the simplex."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from engine.core.config import DIM_CONSTRAINTS, RETRIEVAL_PATHS, MemoryConfig, Weights
from engine.core.errors import ConfigError

__all__ = ["DEFAULT_GRID", "parse_grid", "grid_points", "nest", "simplex_lattice", "complete_simplexes", "SIMPLEXES"]

DEFAULT_GRID = "top_k=3,4,6;tau=3600,43200"
_TABLE_KEYS = {"weights": {f.name for f in fields(Weights)}, "path_weights": set(RETRIEVAL_PATHS),
               "dim_weights": set(DIM_CONSTRAINTS)}
#: The two weight groups that must each sum to 1 (engine.core.config.validate_weights).
SIMPLEXES = (("alpha", "beta", "gamma"), ("w0", "w1", "w2"))


def _split_top(text: str, sep: str) -> list[str]:
    """Split on `sep` outside brackets and quotes, so list values like ["identity"] survive."""
    out, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur))
    return out


def _check_key(key: str) -> None:
    known = [f.name for f in fields(MemoryConfig) if f.name != "preset"]
    if "." in key:
        head, sub = key.split(".", 1)
        if head not in _TABLE_KEYS:
            raise ConfigError(f"grid key {key!r}: only {', '.join(_TABLE_KEYS)} take a dotted sub-key "
                              f"(e.g. weights.alpha=0.5,1)")
        if sub not in _TABLE_KEYS[head]:
            raise ConfigError(f"grid key {key!r}: {head} has no {sub!r}; use one of "
                              f"{', '.join(sorted(_TABLE_KEYS[head]))}")
        return
    if key == "preset":
        raise ConfigError("grid key 'preset' cannot be swept; use --base-preset NAME for the starting preset")
    if key not in known:
        raise ConfigError(f"grid key {key!r} is not a MemoryConfig field; use one of {', '.join(known)} "
                          "(weights as weights.alpha, path_weights.bm25, …)")


def parse_grid(spec: str) -> dict[str, list[Any]]:
    """`"tau=3600,43200;top_k=3,4,6;weights.alpha=0.33,1"` → {key: [values]} (values JSON when they parse)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f'--grid is empty; give key=v1,v2 pairs separated by ";", e.g. "{DEFAULT_GRID}"')
    grid: dict[str, list[Any]] = {}
    for part in (p.strip() for p in _split_top(spec, ";")):
        if not part:
            continue
        if "=" not in part:
            raise ConfigError(f'--grid part {part!r} needs the form key=v1,v2 (e.g. "top_k=3,4,6")')
        key, raw = (x.strip() for x in part.split("=", 1))
        _check_key(key)
        if key in grid:
            raise ConfigError(f"--grid names {key!r} twice; list all its values once: {key}=v1,v2")
        values = []
        for item in (v.strip() for v in _split_top(raw, ",")):
            if not item:
                raise ConfigError(f"--grid {key}: an empty value in {raw!r}; separate values with single commas")
            try:
                values.append(json.loads(item))
            except json.JSONDecodeError:
                values.append(item)
        if not values:
            raise ConfigError(f"--grid {key} has no values; write {key}=v1,v2")
        grid[key] = values
    if not grid:
        raise ConfigError(f'--grid has no key=values pairs, e.g. "{DEFAULT_GRID}"')
    return grid


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of the grid, in order (first key varies slowest).

    `weights=simplex:STEP` stands for every (alpha, beta, gamma) on a lattice of that step that
    sums to 1 (e.g. simplex:0.25 gives 15 points)."""
    expanded: dict[str, list[Any]] = {}
    for key, values in grid.items():
        if key == "weights" and len(values) == 1 and str(values[0]).startswith("simplex:"):
            expanded["weights"] = simplex_lattice(float(str(values[0]).split(":", 1)[1]))
        else:
            expanded[key] = list(values)
    keys = list(expanded)
    out = []
    for combo in itertools.product(*(expanded[k] for k in keys)):
        point: dict[str, Any] = {}
        for k, v in zip(keys, combo, strict=True):
            if k == "weights" and isinstance(v, Mapping):
                point.update({f"weights.{name}": w for name, w in v.items()})
            else:
                point[k] = v
        out.append(point)
    return out


def simplex_lattice(step: float) -> list[dict[str, float]]:
    """Every (alpha, beta, gamma) with coordinates on a `step` lattice that sums to 1."""
    if not 0 < step <= 1 or abs(round(1 / step) * step - 1) > 1e-9:
        raise ConfigError(f"weights=simplex:{step}: the step must divide 1 (e.g. 0.5, 0.25, 0.2, 0.1)")
    n = round(1 / step)
    return [{"alpha": round(a * step, 6), "beta": round(b * step, 6), "gamma": round((n - a - b) * step, 6)}
            for a in range(n + 1) for b in range(n + 1 - a)]


def complete_simplexes(overrides: Mapping[str, Any], base: Weights) -> dict[str, Any]:
    """Fill each weight group the point names only partly so it sums to 1: a missing member takes
    the rest (e.g. alpha and beta given → gamma = 1 − alpha − beta); with two missing, they share
    the rest in the base weights' proportion. A group that cannot sum to 1 is left as given (and
    the config's validation says why)."""
    given = dict(overrides.get("weights") or {})
    if not given:
        return dict(overrides)
    full = dict(given)
    for group in SIMPLEXES:
        named = [k for k in group if k in given]
        missing = [k for k in group if k not in given]
        if not named or not missing:
            continue
        rest = 1.0 - sum(float(given[k]) for k in named)
        if rest < -1e-9:
            continue
        base_share = sum(getattr(base, k) for k in missing)
        for k in missing:
            full[k] = round(max(0.0, rest) * (getattr(base, k) / base_share if base_share > 0 else 1 / len(missing)), 9)
    return {**overrides, "weights": full}


def nest(point: Mapping[str, Any]) -> dict[str, Any]:
    """Flat grid keys (weights.alpha) → MemoryConfig overrides ({"weights": {"alpha": …}})."""
    out: dict[str, Any] = {}
    for k, v in point.items():
        if "." in k:
            head, sub = k.split(".", 1)
            out.setdefault(head, {})[sub] = v
        else:
            out[k] = v
    return out


