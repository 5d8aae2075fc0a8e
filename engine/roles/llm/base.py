"""`LLMRole`: one model role on a LangChain chat model, with structured output, bounded retries
and logged mechanical repairs.

Structured output uses `method="function_calling"` (DeepSeek's default): the schema goes out as
one forced tool, which DeepSeek, vLLM and Ollama all honour and which a plain OpenAI-compatible
server answers with ordinary `tool_calls`. The tool arguments are validated here, not trusted:
mechanical faults (a wrong source id, an unknown tag, an extra key, a JSON answer in `content`
instead of a tool call) are repaired and logged; anything else is retried with exponential
backoff (tenacity) up to `max_retries`, then raised as ModelOutputError / ModelCallError so the
pipeline keeps the messages pending. Every attempt is recorded in the role's ledger (the
engine's, once the engine binds it).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from engine.core.errors import MemlabError, ModelCallError, ModelOutputError
from engine.roles.ledger import Ledger, record_chat_call
from engine.roles.llm.guard import (
    forbidden_error,
    model_target,
    real_requests_forbidden,
)
from engine.roles.llm.repairs import drop_unknown_keys, validation_summary
from engine.roles.llm.settings import ModelSettings

__all__ = ["LLMRole", "RoleResult", "AttemptFailed", "Retryable", "compact_json", "tool_schema"]

log = logging.getLogger("engine.roles.llm")

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)


def compact_json(payload: Any) -> str:
    """A role's input as its user message: compact JSON, keys in their order, non-ASCII kept."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def _compact_schema(node: Any, *, descriptions: bool) -> Any:
    """A JSON schema without what a model does not need to fill it: an optional field's
    `anyOf [X, null]` becomes X; `null`/empty defaults, `additionalProperties: false` and the models'
    docstrings (engine notes, not instructions) go; field descriptions stay if `descriptions`."""
    if isinstance(node, list):
        return [_compact_schema(x, descriptions=descriptions) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" or (key == "additionalProperties" and value is False):
            continue
        if key == "default" and value in (None, "", [], {}):
            continue
        if key == "description" and (not descriptions or "properties" in node):
            continue
        if key == "anyOf" and isinstance(value, list):
            kept = [v for v in value if v != {"type": "null"}]
            if len(kept) == 1 and isinstance(kept[0], dict):
                out.update(_compact_schema(kept[0], descriptions=descriptions))
                continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _compact_schema(sub, descriptions=descriptions) for name, sub in value.items()}
            continue
        out[key] = _compact_schema(value, descriptions=descriptions)
    return out


def tool_schema(model: type[BaseModel], *, descriptions: bool = True) -> dict[str, Any]:
    """The forced tool a role sends: the output model's name and its compact JSON schema (the
    answer is still validated against the full pydantic model). Every token of it is sent, and
    billed, on every call of the role, so a role whose prompt already explains its fields sends
    them without descriptions (`descriptions=False`)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    fn = convert_to_openai_tool(model)["function"]
    return {"type": "function", "function": {"name": fn["name"], "description": "",
                                             "parameters": _compact_schema(fn["parameters"],
                                                                           descriptions=descriptions)}}


@dataclass(frozen=True, kw_only=True, slots=True)
class RoleResult(Generic[Out]):
    """A role's validated output with the repairs applied to it and the attempts it took."""

    output: Out
    repairs: tuple[str, ...] = ()
    attempts: int = 1


class AttemptFailed(Exception):
    """One attempt failed; `kind` decides the final error type, `retryable` whether to go on."""

    def __init__(self, message: str, *, kind: Literal["output", "call"], retryable: bool = True):
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable


class Retryable(AttemptFailed):
    """A failed attempt worth another try (a role's `_finish` raises it to ask again)."""


def _classify(exc: Exception) -> AttemptFailed:
    """Map a client exception to an attempt failure (non-retryable for 4xx other than 408/409/429)."""
    import openai

    name = type(exc).__name__
    if isinstance(exc, openai.APITimeoutError):
        return Retryable(f"timed out ({name})", kind="call")
    if isinstance(exc, openai.APIConnectionError):
        return Retryable(f"connection failed ({name}: {exc})", kind="call")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        msg = f"HTTP {status} ({name}: {str(exc)[:200]})"
        if status in (408, 409, 429) or status >= 500:
            return Retryable(msg, kind="call")
        return AttemptFailed(msg, kind="call", retryable=False)
    if isinstance(exc, (ValueError, KeyError, TypeError)):
        return Retryable(f"malformed response ({name}: {str(exc)[:200]})", kind="output")
    return Retryable(f"provider error ({name}: {str(exc)[:200]})", kind="call")


class LLMRole(Generic[In, Out]):
    """One role over `chat_model.with_structured_output(Output, include_raw=True)`.

    Subclasses set `role`, `output_model`, `instructions`, and may override `_payload`,
    `_prepare` (repairs on the raw dict) and `_finish` (repairs on the validated model; raise
    `Retryable` to ask again). `last_result` keeps the latest RoleResult (repairs, attempts).
    """

    role: ClassVar[str]
    output_model: ClassVar[type[BaseModel]]
    instructions: ClassVar[str]
    #: Whether the sent tool schema keeps the field descriptions (False where the prompt gives them).
    schema_descriptions: ClassVar[bool] = True

    def __init__(
        self, chat_model: Any, *, settings: ModelSettings | None = None, ledger: Ledger | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.chat_model = chat_model
        self.settings = settings or ModelSettings()
        self.ledger = ledger if ledger is not None else Ledger()
        self._sleep = sleep
        self._structured = chat_model.with_structured_output(
            tool_schema(self.output_model, descriptions=self.schema_descriptions), method="function_calling", include_raw=True
        )
        self.last_result: RoleResult[Out] | None = None

    # overridable hooks -------------------------------------------------------------------------
    def _payload(self, inp: In) -> dict[str, Any]:
        return inp.model_dump(mode="json", exclude_none=True)

    def _prepare(self, data: dict[str, Any], inp: In, notes: list[str]) -> dict[str, Any]:
        return data

    def _finish(self, out: Out, inp: In, notes: list[str]) -> Out:
        return out

    # the call ----------------------------------------------------------------------------------
    def messages(self, inp: In) -> list[tuple[str, str]]:
        """The static system prompt, then the input as compact JSON."""
        return [("system", self.instructions), ("human", compact_json(self._payload(inp)))]

    def run(self, inp: In) -> RoleResult[Out]:
        if not self.settings.offline and real_requests_forbidden():
            remote, url = model_target(self.chat_model)
            if remote:
                raise forbidden_error(url, f"the {self.role} role")
        messages = self.messages(inp)
        attempts = 0

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning("%s attempt %d failed: %s; retrying", self.role, state.attempt_number, exc)

        retrying = Retrying(
            stop=stop_after_attempt(1 + self.settings.max_retries),
            wait=wait_exponential(multiplier=self.settings.backoff, max=self.settings.backoff_max),
            retry=retry_if_exception_type(Retryable),
            reraise=True,
            sleep=self._sleep,
            before_sleep=before_sleep,
        )
        try:
            for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    result = self._attempt(messages, inp, attempts)
        except AttemptFailed as exc:
            err = ModelOutputError if exc.kind == "output" else ModelCallError
            raise err(
                f"{self.role} on {self.settings.model!r} failed after {attempts} attempt(s): {exc}; the input "
                "stays pending. Check the model and base_url, or raise timeout / max_retries in ModelSettings"
            ) from exc
        self.last_result = replace(result, attempts=attempts)
        return self.last_result

    def _attempt(self, messages: list[tuple[str, str]], inp: In, attempt: int) -> RoleResult[Out]:
        start = time.perf_counter()
        raw = None
        try:
            try:
                reply = self._structured.invoke(messages)
            except MemlabError:
                raise
            except Exception as exc:  # classified: timeouts, HTTP errors, malformed bodies
                raise _classify(exc) from exc
            raw = reply.get("raw")
            data, notes = self._arguments(raw)
            data = drop_unknown_keys(data, self.output_model, "", notes)
            data = self._prepare(data, inp, notes)
            try:
                out = self.output_model.model_validate(data)
            except ValidationError as exc:
                raise Retryable(f"output does not fit {self.output_model.__name__}: {validation_summary(exc)}",
                                kind="output") from exc
            out = self._finish(out, inp, notes)
        except AttemptFailed as exc:
            self._record(raw, start, attempt, ok=False, error=str(exc))
            raise
        self._record(raw, start, attempt, ok=True, error=None)
        for note in notes:
            log.info("%s repair: %s", self.role, note)
        return RoleResult(output=out, repairs=tuple(notes), attempts=attempt)

    def _arguments(self, raw: Any) -> tuple[dict[str, Any], list[str]]:
        """The structured answer as a dict: the tool call's arguments, or JSON content (repaired)."""
        notes: list[str] = []
        if raw is None:
            raise Retryable("no message in the response", kind="output")
        tool_calls = getattr(raw, "tool_calls", None) or []
        if tool_calls:
            args = tool_calls[0].get("args")
            if isinstance(args, dict):
                return args, notes
        bad = getattr(raw, "invalid_tool_calls", None) or []
        if bad:
            raise Retryable(f"tool arguments are not valid JSON: {str(bad[0].get('args'))[:200]!r}", kind="output")
        content = getattr(raw, "content", "")
        text = content if isinstance(content, str) else "".join(
            b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
        text = text.strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:
            data = json.loads(text) if text else None
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            notes.append("answer came as JSON content instead of a tool call; parsed it")
            return data, notes
        raise Retryable(f"no tool call and no JSON object in the answer: {text[:200]!r}", kind="output")

    def _record(self, raw: Any, start: float, attempt: int, *, ok: bool, error: str | None) -> None:
        latency = (time.perf_counter() - start) * 1000.0
        record_chat_call(self.ledger, self.role, raw, latency, self.settings, mode="real", ok=ok, attempts=attempt,
                         error=error)
