"""`no-memory`: the chat model sees the newest messages of the session that fit the window budget."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.core.config import MemoryConfig
from engine.core.tokens import ApproxTokenCounter, content_text
from engine.eval.driver import TurnView
from engine.eval.strategies.base import RunContext, apply_overrides
from engine.eval.strategies.chat import chat_model, lc_messages, record_chat
from engine.roles.ledger import Ledger

__all__ = ["NoMemoryStrategy", "WindowRunner", "fit_window"]


def fit_window(messages: Sequence[Mapping[str, Any]], budget: int, counter: Any) -> list[Mapping[str, Any]]:
    """The newest messages that fit `budget` tokens; the current (last) one always stays.

    The same rule as MemoryEngine's window, so no-memory and memlab see equal windows.
    """
    kept: list[Mapping[str, Any]] = []
    used = 0
    for m in reversed(messages):
        cost = counter.count_messages([{"content": m["content"]}])
        if kept and used + cost > budget:
            break
        kept.append(m)
        used += cost
    kept.reverse()
    return kept


@dataclass(frozen=True, kw_only=True)
class NoMemoryStrategy:
    """The chat model sees only the newest messages of the session that fit the window budget."""

    name: str = "no-memory"
    description: str = "last messages of the session within context_budget; no store"
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def config_for(self, base: MemoryConfig) -> MemoryConfig:
        return apply_overrides(base, self.overrides)

    def budget(self, cfg: MemoryConfig) -> dict[str, Any]:
        return {"context_budget": cfg.context_budget, "memory_budget": 0, "top_k": None}

    def open(self, ctx: RunContext) -> WindowRunner:
        return WindowRunner(ctx)


class WindowRunner:
    """Keeps each session's messages in memory and sends the budget's newest suffix."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.ledger = Ledger()
        self.chat = chat_model(ctx.settings)
        self.counter = ApproxTokenCounter()
        self.history: dict[tuple[str, str], list[dict[str, str]]] = {}

    def turn(self, user_id: str, session_id: str, text: str, *, name: str | None = None) -> TurnView:
        cfg = self.ctx.config
        hist = self.history.setdefault((user_id, session_id), [])
        hist.append({"role": "user", "content": text})
        window = fit_window(hist, cfg.context_budget, self.counter)
        sent = [{"role": "system", "content": cfg.core_prompt}, *({"role": m["role"], "content": m["content"]}
                                                                  for m in window)]
        t0 = time.perf_counter()
        ai = self.chat.invoke(lc_messages(sent))
        record_chat(self.ledger, "chat", ai, (time.perf_counter() - t0) * 1000, self.ctx.settings)
        reply = content_text(ai.content)
        hist.append({"role": "assistant", "content": reply})
        return TurnView(reply=reply, shown="\n".join(m["content"] for m in sent[:-1]), prompt=sent, payload_tokens=0,
                        state={"session_messages": len(hist) - 1, "window_messages": len(window)})
