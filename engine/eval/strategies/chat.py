"""The chat model of the strategies without an engine (no-memory, summarization), and the one
place their chat calls reach a ledger.

The model is the one an engine would get (`Models.scripted().chat` offline, the real models'
chat model otherwise), so every strategy talks to the same model. Engine-backed strategies never
come here: the engine records its own calls in its own ledger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.roles.bundle import Models
from engine.roles.ledger import CallRecord, Ledger, record_chat_call, record_failed_call

__all__ = ["chat_model", "record_chat", "record_scripted_call", "record_failed_chat", "lc_messages", "role_of"]


def chat_model(settings: Any):
    """The scripted chat model (settings None) or the configured real one."""
    return (Models.scripted() if settings is None else Models.real(settings)).chat


def record_chat(ledger: Ledger, role: str, ai: Any, latency_ms: float, settings: Any) -> None:
    """One successful chat call (the one ledger path: provider usage with real models, the
    message's own usage with the scripted model, price 0)."""
    record_chat_call(ledger, role, ai, latency_ms, settings)


def record_scripted_call(ledger: Ledger, role: str, *, input_tokens: int, output_tokens: int,
                         latency_ms: float) -> None:
    """A call of an offline stand-in that is not a chat model (the scripted summarizer)."""
    ledger.record(CallRecord(role=role, model="scripted", input_tokens=input_tokens, output_tokens=output_tokens,
                             latency_ms=latency_ms))


def record_failed_chat(ledger: Ledger, role: str, error: BaseException, latency_ms: float, settings: Any) -> None:
    record_failed_call(ledger, role, error, latency_ms, model="real" if settings else "scripted")


def lc_messages(messages: Sequence[Mapping[str, str]]):
    """Role/content dicts as LangChain messages."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds[m["role"]](content=m["content"]) for m in messages]


def role_of(message: Any) -> str:
    """A LangChain message's role as a role/content dict spells it."""
    t = getattr(message, "type", "")
    return {"human": "user", "ai": "assistant"}.get(t, t or "user")
