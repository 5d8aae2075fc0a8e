"""The cost ledger: one `CallRecord` per model call, summed per role.

Scripted roles are recorded too (tokens from the approximate counter, price 0), so call counts
and token volumes compare across strategies in offline runs. Prices are per million tokens;
the default is DeepSeek's published price list (cache-hit input, cache-miss input, output).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Price", "CallRecord", "Ledger", "DEEPSEEK_PRICE", "ZERO_PRICE"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Price:
    """Per-million-token prices in `currency`."""

    cache_hit_input: float
    cache_miss_input: float
    output: float
    currency: str = "CNY"

    def cost(self, *, input_tokens: int, output_tokens: int, cache_hit_tokens: int | None = None) -> float:
        hit = cache_hit_tokens or 0
        miss = max(0, input_tokens - hit)
        return (hit * self.cache_hit_input + miss * self.cache_miss_input + output_tokens * self.output) / 1e6


#: DeepSeek's published prices (¥ per 1M tokens: cache-hit input 0.02, cache-miss input 1, output 2),
#: as measured against in the first seed.
DEEPSEEK_PRICE = Price(cache_hit_input=0.02, cache_miss_input=1.0, output=2.0, currency="CNY")
ZERO_PRICE = Price(cache_hit_input=0.0, cache_miss_input=0.0, output=0.0, currency="CNY")


@dataclass(frozen=True, kw_only=True, slots=True)
class CallRecord:
    role: str
    model: str
    input_tokens: int
    output_tokens: int
    cache_hit_tokens: int | None = None
    cache_miss_tokens: int | None = None
    latency_ms: float = 0.0
    cost: float = 0.0
    ok: bool = True
    attempts: int = 1
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Ledger:
    """Thread-safe list of calls with per-role totals."""

    calls: list[CallRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def record(self, call: CallRecord) -> CallRecord:
        with self._lock:
            self.calls.append(call)
        return call

    def extend(self, calls: Iterable[CallRecord]) -> None:
        with self._lock:
            self.calls.extend(calls)

    def mark(self) -> int:
        """A position to sum from later (see `since`)."""
        return len(self.calls)

    def since(self, mark: int) -> list[CallRecord]:
        with self._lock:
            return list(self.calls[mark:])

    def summary(self, calls: Iterable[CallRecord] | None = None) -> dict[str, dict[str, float]]:
        """Per role: calls, input/output tokens, cache hit/miss tokens, cost, latency, failures."""
        out: dict[str, dict[str, float]] = {}
        with self._lock:
            items = list(self.calls if calls is None else calls)
        for c in items:
            row = out.setdefault(
                c.role,
                {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cache_hit_tokens": 0,
                 "cache_miss_tokens": 0, "cost": 0.0, "latency_ms": 0.0, "failures": 0},
            )
            row["calls"] += 1
            row["input_tokens"] += c.input_tokens
            row["output_tokens"] += c.output_tokens
            row["cache_hit_tokens"] += c.cache_hit_tokens or 0
            row["cache_miss_tokens"] += c.cache_miss_tokens or 0
            row["cost"] += c.cost
            row["latency_ms"] += c.latency_ms
            row["failures"] += 0 if c.ok else 1
        return out

    def totals(self, calls: Iterable[CallRecord] | None = None) -> dict[str, float]:
        rows = self.summary(calls).values()
        keys = ("calls", "input_tokens", "output_tokens", "cache_hit_tokens", "cache_miss_tokens", "cost",
                "latency_ms", "failures")
        return {k: sum(r[k] for r in rows) for k in keys}

    @staticmethod
    def format_table(summary: Mapping[str, Mapping[str, float]], currency: str = "CNY") -> str:
        lines = [f"{'role':<14}{'calls':>6}{'in tok':>9}{'out tok':>9}{'hit tok':>9}{'cost ' + currency:>13}"]
        for role in sorted(summary):
            r = summary[role]
            lines.append(
                f"{role:<14}{int(r['calls']):>6}{int(r['input_tokens']):>9}{int(r['output_tokens']):>9}"
                f"{int(r['cache_hit_tokens']):>9}{r['cost']:>13.6f}"
            )
        return "\n".join(lines)
