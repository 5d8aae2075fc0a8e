"""`MemoryMiddleware`: memlab's engine as a LangChain `create_agent` middleware.

It only translates between agent state and engine calls: new messages of the state are observed
(stamped by the engine's clock and archived), and each model call gets the prompt the engine
builds (`engine.prepare_call`: gate → event → retrieve → inject, once per user message; later calls
of the same turn reuse it with the tool messages in the window; the reply's use reinforces). Everything that matters
across turns lives in the engine's store, keyed by user and by session (= the LangGraph thread
id): the extraction cursor, the retrieval query (the session's last user message), the records
and the profile. The only thing kept in graph state is `memlab_seen`, how many state messages
were already observed, in a declared channel so the checkpointer keeps it.

Fixes over the reference middleware: declared state (its updates were dropped, so an event fired
every turn), sync and async hooks, a per-session cursor, no query held in process memory, the
model called exactly once per call (an error is logged, then propagates), list-typed content
counted by its text, and tool results stamped when the tool returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time as _time
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    PrivateStateAttr,
)
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from engine.core.errors import ConfigError
from engine.core.records import Event
from engine.core.tokens import content_text
from engine.memory.engine import MemoryEngine
from engine.memory.injection import BuiltPrompt
from engine.roles.ledger import record_chat_call, record_failed_call

__all__ = ["MemoryMiddleware", "MemoryState", "PROFILE_NAMESPACE", "tail_window"]

#: namespace prefix of the mirrored profile in a LangGraph BaseStore: ("memlab", user_id, "profile")
PROFILE_NAMESPACE = "memlab"
_STAMP = "memlab_message_id"  # response_metadata key on tool messages already observed


class MemoryState(AgentState[Any]):
    """Agent state plus the middleware's channels (declared, so updates are kept)."""

    user_id: NotRequired[str]
    memlab_seen: NotRequired[Annotated[int, PrivateStateAttr]]


def tail_window(messages: Sequence[BaseMessage], n: int) -> list[BaseMessage]:
    """The last `n` messages, widened backwards so no tool result loses the AI call that asked for it."""
    if n <= 0:
        return []
    start = max(0, len(messages) - n)
    while start > 0 and isinstance(messages[start], ToolMessage):
        start -= 1
    return list(messages[start:])


def _role(message: BaseMessage) -> str | None:
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    return None  # system prompts and other kinds are not conversation


def _text(message: BaseMessage) -> str:
    """The message's text; an AI tool call is written out so the archive shows what was asked."""
    text = content_text(message.content)
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        asked = "; ".join(f"[tool call] {c.get('name')}({c.get('args')})" for c in calls)
        text = f"{text}\n{asked}" if text else asked
    return text


class MemoryMiddleware(AgentMiddleware[MemoryState, Any, Any]):
    """Long-term memory for a LangGraph `create_agent` agent.

    User id: `runtime.context` (a dict or an object with `user_id_key`) or the `user_id` state key.
    Session: the thread id of the run's config (`configurable.thread_id`), so use a checkpointer.
    """

    state_schema = MemoryState

    def __init__(
        self,
        engine: MemoryEngine | None = None,
        *,
        config: Any = None,
        store: Any = None,
        user_id_key: str = "user_id",
        profile_store: Any = None,
        mirror_runtime_store: bool = False,
        replace_window: bool = True,
    ) -> None:
        super().__init__()
        if engine is not None and (config is not None or store is not None):
            raise ConfigError("pass either an engine or config/store to MemoryMiddleware, not both "
                              "(the engine already has its config and store)")
        if engine is None:
            from engine.core.clock import SystemClock

            engine = MemoryEngine(config, store=store, clock=SystemClock())
        self.engine = engine
        self.user_id_key = user_id_key
        self.profile_store = profile_store
        self.mirror_runtime_store = mirror_runtime_store
        self.replace_window = replace_window

    # ------------------------------------------------------------------ ids
    def _user_id(self, state: Any, runtime: Any) -> str:
        key = self.user_id_key
        ctx = getattr(runtime, "context", None)
        uid = ctx.get(key) if isinstance(ctx, Mapping) else getattr(ctx, key, None)
        if not uid and isinstance(state, Mapping):
            uid = state.get(key)
        if not isinstance(uid, str) or not uid.strip():
            raise ConfigError(
                f"MemoryMiddleware needs a user id: pass it in the run context "
                f"(agent.invoke(..., context={{'{key}': 'alice'}}), read from runtime.context.{key}) "
                f"or in the input state (agent.invoke({{'messages': [...], '{key}': 'alice'}}))"
            )
        return uid

    @staticmethod
    def _session_id(runtime: Any = None) -> str:
        cfg = getattr(runtime, "config", None)
        if not isinstance(cfg, Mapping):
            from langgraph.config import get_config

            try:
                cfg = get_config()
            except RuntimeError:
                cfg = {}
        thread = (cfg.get("configurable") or {}).get("thread_id")
        if thread is None or str(thread) == "":
            raise ConfigError(
                "MemoryMiddleware uses the LangGraph thread id as the memory session: compile the agent "
                "with a checkpointer and invoke it with config={'configurable': {'thread_id': '...'}}"
            )
        return str(thread)

    # ------------------------------------------------------------------ observing
    def _observe_new(self, state: Mapping[str, Any], user: str, session: str) -> dict[str, Any]:
        messages: Sequence[BaseMessage] = state.get("messages") or []
        seen = min(int(state.get("memlab_seen") or 0), len(messages))
        for m in messages[seen:]:
            role = _role(m)
            if role is None or (m.response_metadata or {}).get(_STAMP) is not None:
                continue  # not conversation, or a tool result observed when its tool returned
            self.engine.observe(user, session, role, _text(m), name=m.name,
                                tool_call_id=getattr(m, "tool_call_id", None))
        return {"memlab_seen": len(messages)}

    def _observe_tool_result(self, result: Any, user: str, session: str) -> Any:
        if isinstance(result, ToolMessage):
            return self._stamp(result, user, session)
        update = getattr(result, "update", None)  # a Command from the tool
        if isinstance(update, dict) and isinstance(update.get("messages"), list):
            msgs = [self._stamp(m, user, session) if isinstance(m, ToolMessage) else m for m in update["messages"]]
            return dataclasses.replace(result, update={**update, "messages": msgs})
        return result

    def _stamp(self, message: ToolMessage, user: str, session: str) -> ToolMessage:
        if (message.response_metadata or {}).get(_STAMP) is not None:
            return message
        stored = self.engine.observe(user, session, "tool", _text(message), name=message.name,
                                     tool_call_id=message.tool_call_id)
        meta = {**(message.response_metadata or {}), _STAMP: stored.id}
        return message.model_copy(update={"response_metadata": meta})

    # ------------------------------------------------------------------ the model call
    def _request(self, request: Any, prompt: BuiltPrompt) -> Any:
        system = prompt.system
        own = request.system_message.text if request.system_message is not None else ""
        if own:  # the agent's own instructions stay first (static, so the cached prefix grows)
            system = f"{own}\n\n{system}"
        overrides: dict[str, Any] = {"system_message": SystemMessage(content=system)}
        if self.replace_window:
            conversation: list[AnyMessage] = [m for m in request.messages if _role(m) is not None]
            overrides["messages"] = tail_window(conversation, len(prompt.messages) - 1)
        return request.override(**overrides)

    def _log_error(self, user: str, session: str, exc: BaseException, latency_ms: float, tokens: int) -> None:
        eng = self.engine
        eng.store.append_event(Event(user_id=user, session_id=session, kind="error", at=eng.now(),
                                     payload={"step": "chat", "error": f"{type(exc).__name__}: {exc}",
                                              "source": "middleware"}))
        record_failed_call(eng.ledger, "chat", exc, latency_ms, model=eng.models.mode, input_tokens=tokens)

    def _record(self, response: Any, latency_ms: float, prompt: BuiltPrompt) -> str:
        """Record the call in the engine's ledger; returns the reply's text ("" for none)."""
        result = getattr(response, "model_response", response)  # ExtendedModelResponse wraps one
        msgs = getattr(result, "result", None) or ([result] if isinstance(result, AIMessage) else [])
        ai = next((m for m in msgs if isinstance(m, AIMessage)), None)
        if ai is None:
            return ""
        models = self.engine.models
        record_chat_call(self.engine.ledger, "chat", ai, latency_ms, getattr(models, "settings", None),
                         mode=models.mode, fallback_input_tokens=prompt.total_tokens, counter=self.engine.counter)
        return content_text(ai.content)

    def _mirror(self, user: str, runtime: Any) -> tuple[Any, tuple[str, ...], dict[str, Any]] | None:
        target = self.profile_store
        if target is None and self.mirror_runtime_store:
            target = getattr(runtime, "store", None)
        if target is None:
            return None
        return target, (PROFILE_NAMESPACE, user, "profile"), self.engine.profile(user).to_dict()

    # ------------------------------------------------------------------ sync hooks
    def before_model(self, state: MemoryState, runtime: Any) -> dict[str, Any] | None:
        return self._observe_new(state, self._user_id(state, runtime), self._session_id())

    def after_model(self, state: MemoryState, runtime: Any) -> dict[str, Any] | None:
        return self._observe_new(state, self._user_id(state, runtime), self._session_id())

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        user, session = self._user_id(request.state, request.runtime), self._session_id()
        prepared = self.engine.prepare_call(user, session)  # once per user message, reused in tool loops
        prompt = prepared.prompt
        if mirror := self._mirror(user, request.runtime):
            mirror[0].put(mirror[1], "profile", mirror[2])
        t0 = _time.perf_counter()
        try:
            response = handler(self._request(request, prompt))  # exactly once: retries belong to the caller
        except Exception as exc:
            self._log_error(user, session, exc, (_time.perf_counter() - t0) * 1000, prompt.total_tokens)
            raise
        if reply := self._record(response, (_time.perf_counter() - t0) * 1000, prompt):
            self.engine.reinforce_used(prepared, reply)
        return response

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        user, session = self._user_id(request.state, request.runtime), self._session_id(request.runtime)
        return self._observe_tool_result(handler(request), user, session)

    # ------------------------------------------------------------------ async hooks
    # The engine is synchronous (SQLite, role calls); its work runs in a worker thread so the
    # event loop stays free. Ids are read here, in the run's context.
    async def abefore_model(self, state: MemoryState, runtime: Any) -> dict[str, Any] | None:
        user, session = self._user_id(state, runtime), self._session_id()
        return await asyncio.to_thread(self._observe_new, state, user, session)

    async def aafter_model(self, state: MemoryState, runtime: Any) -> dict[str, Any] | None:
        user, session = self._user_id(state, runtime), self._session_id()
        return await asyncio.to_thread(self._observe_new, state, user, session)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        user, session = self._user_id(request.state, request.runtime), self._session_id()
        prepared = await asyncio.to_thread(self.engine.prepare_call, user, session)
        prompt = prepared.prompt
        if mirror := await asyncio.to_thread(self._mirror, user, request.runtime):
            await mirror[0].aput(mirror[1], "profile", mirror[2])
        t0 = _time.perf_counter()
        try:
            response = await handler(self._request(request, prompt))
        except Exception as exc:
            self._log_error(user, session, exc, (_time.perf_counter() - t0) * 1000, prompt.total_tokens)
            raise
        if reply := self._record(response, (_time.perf_counter() - t0) * 1000, prompt):
            await asyncio.to_thread(self.engine.reinforce_used, prepared, reply)
        return response

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        user, session = self._user_id(request.state, request.runtime), self._session_id(request.runtime)
        result = await handler(request)
        return await asyncio.to_thread(self._observe_tool_result, result, user, session)
