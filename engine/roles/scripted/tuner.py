"""`ScriptedTuner`: scoring weights per theme by rule (identity-like → importance, time-sensitive → recency).

It proposes weights that already satisfy the constraints; it repairs nothing: the engine's tune
step validates and repairs whatever a tuner returns, once, and logs it.
"""

from __future__ import annotations

import re

from engine.core.text import normalize
from engine.roles.types import TuneInput, TuneOutput

__all__ = ["ScriptedTuner"]

_GAMMA_THEMES = frozenset("identity profile family name relationships pets health preferences 身份 家庭 宠物 健康".split())
_BETA_THEMES = frozenset("schedule travel appointment deadline events calendar plans 日程 出行 旅行 安排".split())


class ScriptedTuner:
    """Weights per theme: identity-like → γ (importance), time-sensitive → β (recency), else α."""

    def tune(self, inp: TuneInput) -> TuneOutput:
        theme = normalize(inp.theme).strip()
        if theme in _GAMMA_THEMES:
            alpha, beta, w, delta, why = 0.30, 0.15, (0.10, 0.70, 0.20), 0.05, "identity-like: favour importance (γ)"
        elif theme in _BETA_THEMES:
            alpha, beta, w, delta, why = 0.30, 0.45, (0.15, 0.75, 0.10), 0.0, "time-sensitive: favour recency (β)"
        else:
            alpha, beta, w, delta, why = 0.45, 0.25, (0.10, 0.80, 0.10), 0.0, "topical: favour relevance (α)"
        timed = sum(1 for s in inp.samples if re.search(r"\d{4}-\d{2}|\d{4}年", s))
        if inp.samples and timed * 2 > len(inp.samples):  # mostly dated samples: lean to recency
            shift = min(0.1, alpha - 0.2)
            alpha, beta = alpha - shift, beta + shift
            why += "; dated samples shift 0.1 from α to β"
        alpha, beta = round(alpha, 3), round(beta, 3)
        gamma = round(1.0 - alpha - beta, 3)
        w0, w1 = w[0], w[1]
        w2 = round(1.0 - w0 - w1, 3)
        return TuneOutput(alpha=alpha, beta=beta, gamma=gamma, delta=delta, w0=w0, w1=w1, w2=w2, rationale=why)

