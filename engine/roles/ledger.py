"""The cost ledger: one `CallRecord` per model call, summed per role.

Scripted roles are recorded too (tokens from the approximate counter, price 0), so call counts
and token volumes compare across strategies in offline runs. Prices are per million tokens;
the default is DeepSeek's published price list (cache-hit input, cache-miss input, output).

`record_chat_call` is the one way a model call becomes a CallRecord (real roles, the engine's
chat call, the middleware, strategies); `record_failed_call` records a call that raised.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from engine.core.tokens import approx_tokens, content_text

__all__ = [
    "Price",
    "CallRecord",
    "Ledger",
    "DEEPSEEK_PRICE",
    "ZERO_PRICE",
    "usage_from_message",
    "record_chat_call",
    "record_failed_call",
]


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


#: Calls a ledger keeps one by one (the newest); its per-role totals cover every call ever recorded.
MAX_KEPT_CALLS = 10_000

_ZERO_ROW = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cache_hit_tokens": 0, "cache_miss_tokens": 0,
             "cost": 0.0, "latency_ms": 0.0, "failures": 0}


def _add(out: dict[str, dict[str, float]], c: CallRecord) -> None:
    row = out.setdefault(c.role, dict(_ZERO_ROW))
    row["calls"] += 1
    row["input_tokens"] += c.input_tokens
    row["output_tokens"] += c.output_tokens
    row["cache_hit_tokens"] += c.cache_hit_tokens or 0
    row["cache_miss_tokens"] += c.cache_miss_tokens or 0
    row["cost"] += c.cost
    row["latency_ms"] += c.latency_ms
    row["failures"] += 0 if c.ok else 1


class Ledger:
    """Thread-safe record of model calls: exact per-role totals over every call, and the newest
    `max_calls` calls one by one (so a long-lived process does not grow without bound)."""

    def __init__(self, calls: Iterable[CallRecord] = (), *, max_calls: int = MAX_KEPT_CALLS):
        self._lock = threading.Lock()
        self.max_calls = max_calls
        self._calls: deque[CallRecord] = deque(maxlen=max_calls)
        self._totals: dict[str, dict[str, float]] = {}
        self._count = 0
        self.extend(calls)

    @property
    def calls(self) -> list[CallRecord]:
        """The newest calls kept, oldest first."""
        with self._lock:
            return list(self._calls)

    def record(self, call: CallRecord) -> CallRecord:
        with self._lock:
            self._calls.append(call)
            _add(self._totals, call)
            self._count += 1
        return call

    def extend(self, calls: Iterable[CallRecord]) -> None:
        for c in calls:
            self.record(c)

    def mark(self) -> int:
        """A position to read from later (see `since`): the number of calls recorded so far."""
        return self._count

    def since(self, mark: int) -> list[CallRecord]:
        """The calls recorded after `mark` (those still kept)."""
        with self._lock:
            n = self._count - mark
            return list(self._calls)[-n:] if n > 0 else []

    def summary(self, calls: Iterable[CallRecord] | None = None) -> dict[str, dict[str, float]]:
        """Per role: calls, input/output tokens, cache hit/miss tokens, cost, latency, failures
        (over every call recorded, or over `calls`)."""
        if calls is None:
            with self._lock:
                return {role: dict(row) for role, row in self._totals.items()}
        out: dict[str, dict[str, float]] = {}
        for c in calls:
            _add(out, c)
        return out

    def totals(self, calls: Iterable[CallRecord] | None = None) -> dict[str, float]:
        rows = self.summary(calls).values()
        return {k: sum(r[k] for r in rows) for k in _ZERO_ROW}

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


# --------------------------------------------------------------------------------------------
# Model calls → records
# --------------------------------------------------------------------------------------------


def usage_from_message(message: Any) -> dict[str, int | None]:
    """input/output tokens and DeepSeek cache hit/miss tokens from an AIMessage (0 / None if absent).

    Reads `usage_metadata` (langchain-deepseek puts cache hits in input_token_details.cache_read)
    and `response_metadata['token_usage']` (the raw `usage`, with DeepSeek's prompt_cache_*).
    """
    u = _reported_usage(message)
    return {**u, "input_tokens": u["input_tokens"] or 0, "output_tokens": u["output_tokens"] or 0}


def _reported_usage(message: Any) -> dict[str, int | None]:
    """The usage the message reports; a token count it does not report is None."""
    um = getattr(message, "usage_metadata", None) or {}
    tu = (getattr(message, "response_metadata", None) or {}).get("token_usage") or {}
    input_tokens = um.get("input_tokens", tu.get("prompt_tokens"))
    output_tokens = um.get("output_tokens", tu.get("completion_tokens"))
    hit = tu.get("prompt_cache_hit_tokens")
    if hit is None:
        hit = (um.get("input_token_details") or {}).get("cache_read")
    miss = tu.get("prompt_cache_miss_tokens")
    if miss is None and hit is not None:
        miss = max(0, int(input_tokens or 0) - int(hit))
    as_int = lambda v: None if v is None else int(v)  # noqa: E731
    return {"input_tokens": as_int(input_tokens), "output_tokens": as_int(output_tokens),
            "cache_hit_tokens": as_int(hit), "cache_miss_tokens": as_int(miss)}


def record_chat_call(
    ledger: Ledger | None,
    role: str,
    ai_message: Any,
    latency_ms: float,
    settings: Any = None,
    *,
    mode: str | None = None,
    fallback_input_tokens: int | None = None,
    counter: Any = None,
    ok: bool = True,
    attempts: int = 1,
    error: str | None = None,
) -> CallRecord:
    """One model call as a CallRecord, recorded in `ledger` (unless None) and returned.

    mode "real" (the default when `settings`, a ModelSettings, is given): tokens as the provider
    reports them (DeepSeek cache hit/miss included; unreported counts are 0), priced with
    `settings.price` (DeepSeek's list without settings). mode "scripted" (the default without
    settings): tokens from `usage_metadata` when present, else approximated (`fallback_input_tokens`
    for the input, `counter.count` or approx_tokens of the reply for the output), price 0.
    The model is the one the reply names, else `settings.model`, else the mode. `ai_message` may be
    None (a call that got no reply: zero tokens).
    """
    mode = mode or ("real" if settings is not None else "scripted")
    u = _reported_usage(ai_message)
    if mode == "scripted":
        if u["input_tokens"] is None:
            u["input_tokens"] = int(fallback_input_tokens or 0)
        if u["output_tokens"] is None and ai_message is not None:
            text = content_text(getattr(ai_message, "content", ""))
            u["output_tokens"] = int(counter.count(text)) if counter is not None else approx_tokens(text)
    u["input_tokens"], u["output_tokens"] = u["input_tokens"] or 0, u["output_tokens"] or 0
    price = getattr(settings, "price", None) or (ZERO_PRICE if mode == "scripted" else DEEPSEEK_PRICE)
    named = (getattr(ai_message, "response_metadata", None) or {}).get("model_name")
    model = str(named or getattr(settings, "model", None) or mode)
    cost = price.cost(input_tokens=u["input_tokens"], output_tokens=u["output_tokens"],
                      cache_hit_tokens=u["cache_hit_tokens"])
    rec = CallRecord(role=role, model=model, latency_ms=latency_ms, cost=cost, ok=ok, attempts=attempts, error=error,
                     **u)
    if ledger is not None:
        ledger.record(rec)
    return rec


def record_failed_call(
    ledger: Ledger | None,
    role: str,
    error: BaseException | str,
    latency_ms: float = 0.0,
    *,
    model: str,
    input_tokens: int = 0,
    attempts: int = 1,
) -> CallRecord:
    """A call that raised before any reply: ok=False, no output, `error` (an exception is recorded
    by its type name), `input_tokens` as the caller estimated the prompt; recorded unless ledger is None."""
    name = type(error).__name__ if isinstance(error, BaseException) else str(error)
    rec = CallRecord(role=role, model=model, input_tokens=int(input_tokens), output_tokens=0, latency_ms=latency_ms,
                     ok=False, attempts=attempts, error=name)
    if ledger is not None:
        ledger.record(rec)
    return rec
