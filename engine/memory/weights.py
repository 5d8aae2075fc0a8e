"""Score weights per theme: tuned once per (user, theme) by the tuner role, repaired, cached.

The tuner's answer is validated and repaired here, once (clip to the ranges, renormalise α+β+γ and
w₀+w₁+w₂ to 1, or fall back to the current weights), and every violation and repair is logged.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core.config import Weights, repair_weights, validate_weights
from engine.memory.context import EngineContext
from engine.roles.types import TuneInput, TuneOutput
from engine.stores.base import Store

__all__ = ["tune_theme", "weights_for", "WEIGHT_KEYS"]

WEIGHT_KEYS = ("alpha", "beta", "gamma", "delta", "w0", "w1", "w2")


def _key(theme: str) -> str:
    return f"weights:{theme}"


def weights_for(store: Store, user_id: str, theme: str | None, *, default: Weights, tuned: bool) -> Weights:
    """The weights to rank with: the theme's tuned weights when tuning is on and cached, else `default`."""
    if tuned and theme:
        cached = store.get_kv(user_id, _key(theme))
        if cached:
            return Weights.from_dict(cached)
    return default


def tune_theme(ctx: EngineContext, user_id: str, session_id: str, theme: str, samples: Sequence[str], *,
               event_no: int) -> None:
    """Ask the tuner for this theme's weights once (cached per user and theme) and log the outcome."""
    cfg = ctx.config
    if not cfg.tune_weights:
        return
    if ctx.store.get_kv(user_id, _key(theme)) is not None:
        ctx.log(user_id, session_id, "tune", {"theme": theme, "cached": True}, event_no=event_no)
        return
    try:
        out = ctx.call_role("tuner", ctx.models.tuner.tune,
                            TuneInput(theme=theme, samples=list(samples), current=cfg.weights.to_dict()))
        out = TuneOutput.model_validate(out, from_attributes=True)  # junk output: a logged error
    except Exception as exc:
        ctx.log(user_id, session_id, "error", {"step": "tune", "error": f"{type(exc).__name__}: {exc}"},
                event_no=event_no)
        return
    raw = {k: getattr(out, k) for k in WEIGHT_KEYS}
    numeric = all(isinstance(v, (int, float)) for v in raw.values())
    problems = validate_weights(Weights(**{k: float(v) for k, v in raw.items()})) if numeric else ["not numbers"]
    fixed, repairs = repair_weights(raw, fallback=cfg.weights.to_dict())
    weights = Weights(**fixed)
    ctx.store.set_kv(user_id, _key(theme), weights.to_dict())
    ctx.log(user_id, session_id, "tune", {"theme": theme, "cached": False, "weights": weights.to_dict(),
                                         "violations": problems, "repairs": repairs,
                                         "rationale": getattr(out, "rationale", "")}, event_no=event_no)
