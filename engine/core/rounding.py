"""Python's `round(x, ndigits)` for a whole array of floats at once, to the same last bit.

`round(x, 6)` gives the double nearest to x's exact decimal value rounded half-even to 6 places.
Here `rint(x * 10**6) / 10**6` computes it for every element in numpy: the division of an exact
integer by an exact power of ten is correctly rounded, so it is the same double whenever the
integer is the right one, and the integer is the right one unless `x * 10**6` (rounded to a
double) lies within a couple of units in the last place of a half, or is out of range (inf, nan,
beyond 2**52). Those few elements are rounded by `round` itself. A retrieval's score rows round
eleven numbers each; one call per column replaces eleven `round` calls per row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["rounded"]

_EXACT = 2.0**52


def rounded(values: Sequence[float] | np.ndarray, ndigits: int = 6) -> list[float]:
    """`[round(float(v), ndigits) for v in values]`, exactly (0 <= ndigits <= 15)."""
    if not 0 <= ndigits <= 15:
        raise ValueError(f"ndigits must be within 0..15, got {ndigits}")
    x = np.asarray(values, dtype=np.float64).ravel()
    scale = float(10**ndigits)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x * scale
        out = (np.rint(y) / scale).tolist()
        doubt = ~(np.abs(y) < _EXACT) | (np.abs(y - np.floor(y) - 0.5) <= 2.0 * np.abs(np.spacing(y)))
    for i in np.flatnonzero(doubt).tolist():
        out[i] = round(float(x[i]), ndigits)
    return out
