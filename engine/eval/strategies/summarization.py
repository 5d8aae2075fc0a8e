"""`summarization`: LangChain's real `SummarizationMiddleware` in a `create_agent` agent.

One `InMemorySaver` thread per session (a new session starts empty: its real behaviour),
triggered at `context_budget` tokens counted by the same `ApproxTokenCounter` the engine uses,
keeping the engine's `keep_recent` messages. Offline the summary model is `ScriptedSummarizer`
(the scripted chat model only acknowledges a summary prompt); with real models it is the same
chat model.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from engine.core.config import MemoryConfig
from engine.core.tokens import ApproxTokenCounter, content_text
from engine.eval.driver import TurnView
from engine.eval.strategies.base import RunContext, apply_overrides
from engine.eval.strategies.chat import (
    chat_model,
    record_chat,
    record_failed_chat,
    record_scripted_call,
    role_of,
)
from engine.roles.ledger import Ledger

__all__ = ["SummarizationStrategy", "SummaryRunner", "ScriptedSummarizer", "SUMMARY_PREFIX"]

SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"


class ScriptedSummarizer:
    """Offline stand-in for a summary model (labelled, honest, lossy): keeps the user's own
    statements verbatim, newest first until `max_tokens`, and drops questions and the assistant's
    replies. It carries the statements of an earlier summary forward. The scripted chat model
    returns only "Noted." to a summary prompt (it answers from what it was shown, and the prompt
    is not a question), so it cannot write a summary itself."""

    def __init__(self, *, max_tokens: int, ledger: Ledger, counter: Any = None):
        self.max_tokens = max_tokens
        self.ledger = ledger
        self.counter = counter or ApproxTokenCounter()

    def _statements(self, messages: Sequence[Any]) -> list[str]:
        statements: list[str] = []
        for m in messages:
            text = content_text(m.content).strip()
            if getattr(m, "type", "") != "human" or not text:
                continue
            if (getattr(m, "additional_kwargs", None) or {}).get("lc_source") == "summarization":
                statements.extend(line[2:].strip() for line in text.splitlines() if line.startswith("- "))
            elif not text.rstrip().endswith(("?", "？")):
                statements.append(" ".join(text.split()))
        return list(dict.fromkeys(statements))

    def __call__(self, messages: Sequence[Any]) -> str:
        t0 = time.perf_counter()
        kept: list[str] = []
        used = self.counter.count("The user said:")
        for s in reversed(self._statements(messages)):
            cost = self.counter.count(f"- {s}\n")
            if used + cost > self.max_tokens:
                break
            kept.append(s)
            used += cost
        kept.reverse()
        summary = "The user said:\n" + "\n".join(f"- {s}" for s in kept) if kept else "The user said nothing to keep."
        record_scripted_call(self.ledger, "summarizer",
                             input_tokens=sum(self.counter.count(content_text(m.content)) for m in messages),
                             output_tokens=self.counter.count(summary),
                             latency_ms=(time.perf_counter() - t0) * 1000)
        return summary


@dataclass(frozen=True, kw_only=True)
class SummarizationStrategy:
    """LangChain's SummarizationMiddleware around the same chat model, one thread per session."""

    name: str = "summarization"
    description: str = "LangChain SummarizationMiddleware, trigger at context_budget, one thread per session"
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def config_for(self, base: MemoryConfig) -> MemoryConfig:
        return apply_overrides(base, self.overrides)

    def budget(self, cfg: MemoryConfig) -> dict[str, Any]:
        return {"context_budget": cfg.context_budget, "memory_budget": cfg.injection_budget, "top_k": None}

    def open(self, ctx: RunContext) -> SummaryRunner:
        return SummaryRunner(ctx)


def _ledger_callback(ledger: Ledger, settings: Any):
    from langchain_core.callbacks import BaseCallbackHandler

    class _LedgerCallback(BaseCallbackHandler):
        """Records every chat-model call of the agent (main or summary) and the main call's input."""

        def __init__(self) -> None:
            self.roles: dict[UUID, tuple[str, float]] = {}
            self.last_prompt: list[Any] = []

        def on_chat_model_start(self, serialized, messages, *, run_id, metadata=None, **kwargs):
            role = "summarizer" if (metadata or {}).get("lc_source") == "summarization" else "chat"
            self.roles[run_id] = (role, time.perf_counter())
            if role == "chat":
                self.last_prompt = list(messages[0])

        def on_llm_end(self, response, *, run_id, **kwargs):
            role, t0 = self.roles.pop(run_id, ("chat", time.perf_counter()))
            ai = response.generations[0][0].message
            record_chat(ledger, role, ai, (time.perf_counter() - t0) * 1000, settings)

        def on_llm_error(self, error, *, run_id, **kwargs):
            role, t0 = self.roles.pop(run_id, ("chat", time.perf_counter()))
            record_failed_chat(ledger, role, error, (time.perf_counter() - t0) * 1000, settings)

    return _LedgerCallback()


class SummaryRunner:
    """One LangGraph thread per (user, session); reads back what the chat model was sent."""

    def __init__(self, ctx: RunContext):
        from langchain.agents import create_agent
        from langchain.agents.middleware import SummarizationMiddleware
        from langgraph.checkpoint.memory import InMemorySaver

        cfg = ctx.config
        self.ctx = ctx
        self.ledger = Ledger()
        self.counter = ApproxTokenCounter()
        chat = chat_model(ctx.settings)
        summarizer: Any = chat if ctx.settings is not None else ScriptedSummarizer(
            max_tokens=cfg.injection_budget, ledger=self.ledger, counter=self.counter)
        self.middleware = SummarizationMiddleware(
            chat, trigger=("tokens", cfg.context_budget), keep=("messages", max(1, cfg.keep_recent)),
            token_counter=self.counter.count_messages, summarizer=summarizer)
        self.agent = create_agent(chat, system_prompt=cfg.core_prompt, middleware=[self.middleware],
                                  checkpointer=InMemorySaver())
        self.callback = _ledger_callback(self.ledger, ctx.settings)

    def turn(self, user_id: str, session_id: str, text: str, *, name: str | None = None) -> TurnView:
        from langchain_core.messages import HumanMessage

        thread = f"{user_id}::{session_id}"
        self.callback.last_prompt = []
        out = self.agent.invoke({"messages": [HumanMessage(content=text)]},
                                config={"configurable": {"thread_id": thread}, "callbacks": [self.callback]})
        reply = content_text(out["messages"][-1].content)
        sent = self.callback.last_prompt
        last_human = max((i for i, m in enumerate(sent) if getattr(m, "type", "") == "human"), default=len(sent))
        summary = next((content_text(m.content) for m in sent
                        if (getattr(m, "additional_kwargs", None) or {}).get("lc_source") == "summarization"), "")
        prompt = [{"role": role_of(m), "content": content_text(m.content)} for m in sent]
        shown = "\n".join(p["content"] for i, p in enumerate(prompt) if i != last_human)
        return TurnView(reply=reply, shown=shown, prompt=prompt,
                        payload_tokens=self.counter.count(summary) if summary else 0,
                        state={"thread": thread, "thread_messages": len(out["messages"]),
                               "summary": summary.removeprefix(SUMMARY_PREFIX)})
