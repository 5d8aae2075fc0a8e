"""What every reliability harness shares: a harsh config, per-user facts and markers, the repo root."""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.core.config import MemoryConfig

__all__ = ["REPO_ROOT", "FACTS", "fast_config", "user_marker", "turn_text"]

#: The repository root (benchmarks/harness/common.py → two levels up).
REPO_ROOT = Path(__file__).resolve().parents[2]

#: Message templates the harnesses cycle through: facts, an update, a question.
FACTS = (
    "My order number is {n} and my account tag is {m}.",
    "I prefer email over phone calls; my account tag is {m}.",
    "I work as a nurse in Lyon, ticket {m}-{n}.",
    "My dog is called Rex and my loyalty code is {m}.",
    "What was my account tag again?",
    "I moved to Porto last month, reference {m}.",
)


def fast_config() -> MemoryConfig:
    """A config whose gate opens every turn and every role runs (tuning, and the inducer's own call,
    included): the harshest load on extraction, cursors and the roles."""
    return MemoryConfig.from_preset("customer service", tau_m=1, slice_value=0.01, trigger="messages",
                                    trigger_threshold=2, tune_weights=True, induct_in_extraction=False)


def user_marker(user_id: str) -> str:
    """A token unique to one user, so any leak of their facts is visible by plain search."""
    return "mk" + hashlib.sha1(user_id.encode()).hexdigest()[:10]


def turn_text(user_id: str, i: int) -> str:
    """The i-th message of a user: deterministic, so a harness can re-derive what it sent."""
    return FACTS[i % len(FACTS)].format(n=1000 + i, m=user_marker(user_id))
