"""Real model roles on LangChain chat models: structured output, bounded retries, logged repair.

`make_chat_model(ModelSettings())` builds the chat model (DeepSeek by default, any
`init_chat_model` provider, or any OpenAI-compatible base URL such as a local vLLM or Ollama);
`real_roles(settings, ledger)` wraps it in one object per role of engine.roles.

Structured output uses `method="function_calling"` (DeepSeek's default): the schema goes out as
one forced tool, which DeepSeek, vLLM and Ollama all honour and which a plain OpenAI-compatible
server answers with ordinary `tool_calls`. The tool arguments are validated here, not trusted:
mechanical faults (a wrong source id, an unknown tag, weights not summing to 1, an extra key,
a JSON answer in `content` instead of a tool call) are repaired and logged; anything else is
retried with exponential backoff (tenacity) up to `max_retries`, then raised as
ModelOutputError / ModelCallError so the pipeline keeps the messages pending. The client's own
retries are off (max_retries=0) so every HTTP attempt is visible and recorded in the ledger.

Prompts put one static system message first (identical across calls, so provider prompt caches
hit) and the variable input as one compact JSON user message; no conversation history.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, TypeVar
from urllib.parse import urlparse

import httpx
from pydantic import BaseModel, ValidationError
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from engine.core.config import repair_weights
from engine.core.errors import (
    ConfigError,
    MemlabError,
    ModelCallError,
    ModelOutputError,
    RealModelForbiddenError,
)
from engine.core.records import MEMORY_TYPES, TAGS
from engine.roles.cassette import CassetteTransport
from engine.roles.ledger import DEEPSEEK_PRICE, CallRecord, Ledger, Price
from engine.roles.types import (
    ConsolidationDecision,
    ConsolidationInput,
    ExtractionInput,
    ExtractionOutput,
    InductionInput,
    InductionOutput,
    ParsedQuery,
    QueryInput,
    TimeConstraint,
    TuneInput,
    TuneOutput,
)

__all__ = [
    "ModelSettings",
    "make_chat_model",
    "forbid_real_requests",
    "allow_real_requests",
    "real_requests_forbidden",
    "is_loopback_url",
    "usage_from_message",
    "record_chat_call",
    "repair_weights",
    "RoleResult",
    "LLMRole",
    "LLMExtractor",
    "LLMQueryParser",
    "LLMConsolidator",
    "LLMTuner",
    "LLMProfileInducer",
    "real_roles",
    "FORBID_ENV",
    "DEEPSEEK_API_BASE",
]

log = logging.getLogger(__name__)

FORBID_ENV = "MEMLAB_FORBID_REAL_MODELS"
DEEPSEEK_API_BASE = "https://api.deepseek.com/v1"
DEFAULT_KEY_ENV = "DEEPSEEK_API_KEY"
#: Sent to local OpenAI-compatible servers that need no key (the SDK insists on one).
LOCAL_DUMMY_KEY = "memlab-local-no-key"
_TRUTHY = {"1", "true", "yes", "on"}


# --------------------------------------------------------------------------------------------
# The switch that forbids real model requests (tests)
# --------------------------------------------------------------------------------------------

_override_lock = threading.Lock()
_overrides: list[bool] = []  # innermost context wins; global so worker threads obey it too


def real_requests_forbidden() -> bool:
    """True inside `forbid_real_requests()`, or when MEMLAB_FORBID_REAL_MODELS=1 and not allowed."""
    with _override_lock:
        if _overrides:
            return _overrides[-1]
    return os.environ.get(FORBID_ENV, "").strip().lower() in _TRUTHY


@contextlib.contextmanager
def _override(forbidden: bool) -> Iterator[None]:
    with _override_lock:
        _overrides.append(forbidden)
    try:
        yield
    finally:
        with _override_lock:
            _overrides.pop()


def forbid_real_requests() -> contextlib.AbstractContextManager[None]:
    """Within the block, any model request to a non-loopback host raises RealModelForbiddenError."""
    return _override(True)


def allow_real_requests() -> contextlib.AbstractContextManager[None]:
    """Within the block, real requests are allowed even if MEMLAB_FORBID_REAL_MODELS=1."""
    return _override(False)


def is_loopback_url(url: str | None) -> bool:
    """True for http(s)://127.x / [::1] / localhost URLs; None (a provider default) is remote."""
    if not url:
        return False
    host = urlparse(url if "//" in url else f"//{url}").hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _forbidden_error(target: str | None, what: str) -> RealModelForbiddenError:
    return RealModelForbiddenError(
        f"{what} would reach {target or 'the provider default endpoint'} while real model requests are "
        f"forbidden ({FORBID_ENV}=1 or forbid_real_requests()): use the scripted models, a loopback "
        "base_url (a local server), a cassette in replay mode, or allow_real_requests()"
    )


# --------------------------------------------------------------------------------------------
# Settings and the chat model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSettings:
    """Which model to call and how. The API key comes only from the `api_key_env` variable.

    provider None: DeepSeek (ChatDeepSeek) for "deepseek*" models or whenever `base_url` is given
    (any OpenAI-compatible server, e.g. local vLLM/Ollama); otherwise `init_chat_model(model,
    model_provider=provider)`. `max_retries` are memlab's retries; the client's are off.
    """

    model: str = "deepseek-chat"
    provider: str | None = None
    base_url: str | None = None
    temperature: float = 0.0
    timeout: float = 30
    max_retries: int = 2
    backoff: float = 0.5
    backoff_max: float = 8.0
    api_key_env: str = DEFAULT_KEY_ENV
    price: Price = DEEPSEEK_PRICE
    cassette: str | Path | None = None
    cassette_mode: Literal["record", "replay", "auto"] = "replay"

    def __post_init__(self) -> None:
        problems = []
        if not self.model:
            problems.append("model must be a model name, e.g. 'deepseek-chat'")
        if not (self.timeout > 0):
            problems.append(f"timeout = {self.timeout} must be > 0 seconds")
        if self.max_retries < 0:
            problems.append(f"max_retries = {self.max_retries} must be >= 0")
        if self.backoff < 0 or self.backoff_max < 0:
            problems.append("backoff and backoff_max must be >= 0 seconds")
        if self.cassette_mode not in ("record", "replay", "auto"):
            problems.append(f"cassette_mode = {self.cassette_mode!r} must be record, replay or auto")
        if problems:
            raise ConfigError(problems, source="ModelSettings")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ModelSettings:
        """Settings from MEMLAB_MODEL / MEMLAB_BASE_URL / MEMLAB_PROVIDER (and MEMLAB_CASSETTE,
        MEMLAB_CASSETTE_MODE) when set; keyword overrides win."""
        env = os.environ if environ is None else environ
        kwargs: dict[str, Any] = {}
        for var, name in (
            ("MEMLAB_MODEL", "model"),
            ("MEMLAB_BASE_URL", "base_url"),
            ("MEMLAB_PROVIDER", "provider"),
            ("MEMLAB_CASSETTE", "cassette"),
            ("MEMLAB_CASSETTE_MODE", "cassette_mode"),
        ):
            if env.get(var):
                kwargs[name] = env[var]
        kwargs.update(overrides)
        return cls(**kwargs)

    @property
    def uses_deepseek_client(self) -> bool:
        if self.provider is None:
            return self.base_url is not None or self.model.startswith("deepseek")
        return self.provider == "deepseek"

    @property
    def target_url(self) -> str | None:
        """Where requests go: the base URL, DeepSeek's API, or None (another provider's default)."""
        if self.base_url:
            return self.base_url
        return DEEPSEEK_API_BASE if self.uses_deepseek_client else None

    @property
    def offline(self) -> bool:
        """A replaying cassette answers every request; nothing leaves the process."""
        return self.cassette is not None and self.cassette_mode == "replay"


class _GuardTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Checks the forbid switch on every request, so the chat role used directly obeys it too."""

    def __init__(self, inner: Any):
        self._inner = inner

    def _check(self, request: httpx.Request) -> None:
        if real_requests_forbidden() and not is_loopback_url(str(request.url)):
            raise _forbidden_error(f"{request.url.scheme}://{request.url.host}", "a model request")

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self._check(request)
        return self._inner.handle_request(request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self._check(request)
        return await self._inner.handle_async_request(request)

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()


class MemlabHttpClient(httpx.Client):
    """The httpx client memlab gives OpenAI-compatible models: forbid guard (+ cassette)."""


class MemlabAsyncHttpClient(httpx.AsyncClient):
    """Async twin of MemlabHttpClient."""


def _http_clients(settings: ModelSettings) -> tuple[httpx.Client, httpx.AsyncClient]:
    sync_t: Any = _GuardTransport(httpx.HTTPTransport())
    async_t: Any = _GuardTransport(httpx.AsyncHTTPTransport())
    if settings.cassette is not None:
        sync_t = CassetteTransport(mode=settings.cassette_mode, path=settings.cassette, inner=sync_t)
        async_t = CassetteTransport(mode=settings.cassette_mode, path=settings.cassette, async_inner=async_t)
    timeout = httpx.Timeout(settings.timeout, connect=min(settings.timeout, 10.0))
    return (
        MemlabHttpClient(transport=sync_t, timeout=timeout, follow_redirects=True),
        MemlabAsyncHttpClient(transport=async_t, timeout=timeout, follow_redirects=True),
    )


def _api_key(settings: ModelSettings) -> str | None:
    key = os.environ.get(settings.api_key_env, "").strip()
    if key:
        return key
    if settings.base_url or settings.offline:
        return LOCAL_DUMMY_KEY
    return None


def make_chat_model(settings: ModelSettings | None = None):  # -> BaseChatModel (lazy import)
    """The chat model the settings describe, with the client's own retries off."""
    s = settings or ModelSettings()
    if not s.offline and real_requests_forbidden() and not is_loopback_url(s.target_url):
        raise _forbidden_error(s.target_url, f"make_chat_model({s.model!r})")
    openai_compatible = s.uses_deepseek_client or s.provider in ("openai", "deepseek")
    if s.uses_deepseek_client:
        key = _api_key(s)
        if key is None:
            raise ConfigError(
                f"{s.api_key_env} is not set: export {s.api_key_env}=<your key> to use {s.model!r}, "
                "set base_url to a local OpenAI-compatible server, or use the scripted models"
            )
        from langchain_deepseek import ChatDeepSeek

        http_client, http_async_client = _http_clients(s)
        return ChatDeepSeek(
            model=s.model,
            api_key=key,
            api_base=s.target_url or DEEPSEEK_API_BASE,
            temperature=s.temperature,
            timeout=s.timeout,
            max_retries=0,
            http_client=http_client,
            http_async_client=http_async_client,
        )
    from langchain.chat_models import init_chat_model

    kwargs: dict[str, Any] = {"temperature": s.temperature, "timeout": s.timeout, "max_retries": 0}
    if s.base_url:
        kwargs["base_url"] = s.base_url
    if s.api_key_env != DEFAULT_KEY_ENV or s.base_url:
        # A provider reads its own key variable unless told which one to use.
        key = _api_key(s)
        if key is None:
            raise ConfigError(f"{s.api_key_env} is not set: export {s.api_key_env}=<your key> to use {s.model!r}")
        kwargs["api_key"] = key
    if openai_compatible:
        kwargs["http_client"], kwargs["http_async_client"] = _http_clients(s)
    elif s.cassette is not None:
        raise ConfigError(f"cassettes need an OpenAI-compatible client; provider {s.provider!r} is not one")
    try:
        return init_chat_model(s.model, model_provider=s.provider, **kwargs)
    except ImportError as exc:
        raise ConfigError(f"provider {s.provider!r} needs its LangChain package: {exc}") from exc


# --------------------------------------------------------------------------------------------
# Usage and the ledger
# --------------------------------------------------------------------------------------------


def usage_from_message(message: Any) -> dict[str, int | None]:
    """input/output tokens and DeepSeek cache hit/miss tokens from an AIMessage.

    Reads `usage_metadata` (langchain-deepseek puts cache hits in input_token_details.cache_read)
    and `response_metadata['token_usage']` (the raw `usage`, with DeepSeek's prompt_cache_*).
    """
    um = getattr(message, "usage_metadata", None) or {}
    tu = (getattr(message, "response_metadata", None) or {}).get("token_usage") or {}
    input_tokens = um.get("input_tokens", tu.get("prompt_tokens")) or 0
    output_tokens = um.get("output_tokens", tu.get("completion_tokens")) or 0
    hit = tu.get("prompt_cache_hit_tokens")
    if hit is None:
        hit = (um.get("input_token_details") or {}).get("cache_read")
    miss = tu.get("prompt_cache_miss_tokens")
    if miss is None and hit is not None:
        miss = max(0, int(input_tokens) - int(hit))
    return {"input_tokens": int(input_tokens), "output_tokens": int(output_tokens), "cache_hit_tokens": hit,
            "cache_miss_tokens": miss}


def _call_record(
    *, role: str, model: str, message: Any, latency_ms: float, price: Price, ok: bool, attempts: int,
    error: str | None,
) -> CallRecord:
    u = usage_from_message(message) if message is not None else {
        "input_tokens": 0, "output_tokens": 0, "cache_hit_tokens": None, "cache_miss_tokens": None}
    cost = price.cost(input_tokens=u["input_tokens"], output_tokens=u["output_tokens"], cache_hit_tokens=u["cache_hit_tokens"])
    return CallRecord(role=role, model=model, latency_ms=latency_ms, cost=cost, ok=ok, attempts=attempts, error=error, **u)


def record_chat_call(
    ledger: Ledger | None, role: str, ai_message: Any, latency_ms: float, settings: ModelSettings | None = None,
    *, ok: bool = True, attempts: int = 1, error: str | None = None,
) -> CallRecord:
    """Record one call of the main chat model (the pipeline times it with perf_counter)."""
    s = settings or ModelSettings()
    model = ((getattr(ai_message, "response_metadata", None) or {}).get("model_name")) or s.model
    rec = _call_record(role=role, model=model, message=ai_message, latency_ms=latency_ms, price=s.price, ok=ok,
                       attempts=attempts, error=error)
    if ledger is not None:
        ledger.record(rec)
    return rec


# --------------------------------------------------------------------------------------------
# Repairs (pure; weight repair lives in engine.config)
# --------------------------------------------------------------------------------------------


def _drop_unknown_keys(data: Any, model: type[BaseModel], path: str, notes: list[str]) -> Any:
    """Remove keys the schema does not know (the role models forbid extras), recursively."""
    if not isinstance(data, dict):
        return data
    fields = model.model_fields
    out = {}
    for k, v in data.items():
        if k not in fields:
            notes.append(f"dropped unknown field {path}{k}")
            continue
        sub = _nested_model(fields[k].annotation)
        if sub is not None:
            if isinstance(v, list):
                v = [_drop_unknown_keys(x, sub, f"{path}{k}[{i}].", notes) for i, x in enumerate(v)]
            else:
                v = _drop_unknown_keys(v, sub, f"{path}{k}.", notes)
        out[k] = v
    return out


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def _as_str_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, (list, tuple)):
        return [str(x) for x in value if x is not None and str(x).strip()]
    return [str(value)]


# --------------------------------------------------------------------------------------------
# Roles
# --------------------------------------------------------------------------------------------

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)


@dataclass(frozen=True, kw_only=True, slots=True)
class RoleResult(Generic[Out]):
    """A role's validated output with the repairs applied to it and the attempts it took."""

    output: Out
    repairs: tuple[str, ...] = ()
    attempts: int = 1


class _AttemptFailed(Exception):
    """One attempt failed; `kind` decides the final error type, `retryable` whether to go on."""

    def __init__(self, message: str, *, kind: Literal["output", "call"], retryable: bool = True):
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable


class _Retryable(_AttemptFailed):
    pass


def _classify(exc: Exception) -> _AttemptFailed:
    """Map a client exception to an attempt failure (non-retryable for 4xx other than 408/409/429)."""
    import openai

    name = type(exc).__name__
    if isinstance(exc, openai.APITimeoutError):
        return _Retryable(f"timed out ({name})", kind="call")
    if isinstance(exc, openai.APIConnectionError):
        return _Retryable(f"connection failed ({name}: {exc})", kind="call")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        msg = f"HTTP {status} ({name}: {str(exc)[:200]})"
        if status in (408, 409, 429) or status >= 500:
            return _Retryable(msg, kind="call")
        return _AttemptFailed(msg, kind="call", retryable=False)
    if isinstance(exc, (ValueError, KeyError, TypeError)):
        return _Retryable(f"malformed response ({name}: {str(exc)[:200]})", kind="output")
    return _Retryable(f"provider error ({name}: {str(exc)[:200]})", kind="call")


def _model_target(chat_model: Any) -> tuple[bool, str | None]:
    """(could reach a real remote host, where) for a chat model not built by make_chat_model."""
    try:
        from langchain_openai.chat_models.base import BaseChatOpenAI
    except ImportError:  # pragma: no cover - langchain-openai is a dependency
        BaseChatOpenAI = ()  # type: ignore[assignment]  # noqa: N806
    if isinstance(chat_model, BaseChatOpenAI):
        if isinstance(getattr(chat_model, "http_client", None), MemlabHttpClient):
            return False, None  # its transport enforces the switch per request
        url = getattr(chat_model, "api_base", None) or getattr(chat_model, "openai_api_base", None) or "https://api.openai.com/v1"
        return not is_loopback_url(url), url
    module = type(chat_model).__module__
    if module.startswith(("engine.", "langchain_core.", "tests.")) or module == "__main__":
        return False, None  # scripted and fake models make no requests
    url = getattr(chat_model, "base_url", None)
    return not is_loopback_url(url if isinstance(url, str) else None), url if isinstance(url, str) else None


class LLMRole(Generic[In, Out]):
    """One role over `chat_model.with_structured_output(Output, include_raw=True)`.

    Subclasses set `role`, `output_model`, `instructions`, and may override `_payload`,
    `_prepare` (repairs on the raw dict) and `_finish` (repairs on the validated model; raise
    `_Retryable` to ask again). `last_result` keeps the latest RoleResult (repairs, attempts).
    """

    role: ClassVar[str]
    output_model: ClassVar[type[BaseModel]]
    instructions: ClassVar[str]

    def __init__(
        self, chat_model: Any, *, settings: ModelSettings | None = None, ledger: Ledger | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.chat_model = chat_model
        self.settings = settings or ModelSettings()
        self.ledger = ledger if ledger is not None else Ledger()
        self._sleep = sleep
        self._structured = chat_model.with_structured_output(
            self.output_model, method="function_calling", include_raw=True
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
        payload = json.dumps(self._payload(inp), ensure_ascii=False, separators=(",", ":"), sort_keys=False)
        return [("system", self.instructions), ("human", payload)]

    def run(self, inp: In) -> RoleResult[Out]:
        if not self.settings.offline and real_requests_forbidden():
            remote, url = _model_target(self.chat_model)
            if remote:
                raise _forbidden_error(url, f"the {self.role} role")
        messages = self.messages(inp)
        attempts = 0

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning("%s attempt %d failed: %s; retrying", self.role, state.attempt_number, exc)

        retrying = Retrying(
            stop=stop_after_attempt(1 + self.settings.max_retries),
            wait=wait_exponential(multiplier=self.settings.backoff, max=self.settings.backoff_max),
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
            sleep=self._sleep,
            before_sleep=before_sleep,
        )
        try:
            for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    result = self._attempt(messages, inp, attempts)
        except _AttemptFailed as exc:
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
            data = _drop_unknown_keys(data, self.output_model, "", notes)
            data = self._prepare(data, inp, notes)
            try:
                out = self.output_model.model_validate(data)
            except ValidationError as exc:
                raise _Retryable(f"output does not fit {self.output_model.__name__}: {_short(exc)}", kind="output") from exc
            out = self._finish(out, inp, notes)
        except _AttemptFailed as exc:
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
            raise _Retryable("no message in the response", kind="output")
        tool_calls = getattr(raw, "tool_calls", None) or []
        if tool_calls:
            args = tool_calls[0].get("args")
            if isinstance(args, dict):
                return args, notes
        bad = getattr(raw, "invalid_tool_calls", None) or []
        if bad:
            raise _Retryable(f"tool arguments are not valid JSON: {str(bad[0].get('args'))[:200]!r}", kind="output")
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
        raise _Retryable(f"no tool call and no JSON object in the answer: {text[:200]!r}", kind="output")

    def _record(self, raw: Any, start: float, attempt: int, *, ok: bool, error: str | None) -> None:
        latency = (time.perf_counter() - start) * 1000.0
        model = ((getattr(raw, "response_metadata", None) or {}).get("model_name")) or self.settings.model
        self.ledger.record(_call_record(role=self.role, model=model, message=raw, latency_ms=latency,
                                        price=self.settings.price, ok=ok, attempts=attempt, error=error))


def _short(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()[:4]]
    more = f" (+{exc.error_count() - 4} more)" if exc.error_count() > 4 else ""
    return "; ".join(parts) + more


_EXTRACT = """You extract long-term memory records from a chat between a user and an assistant.
Input JSON: {"context": [...], "new": [...]}; each message has id, role, speaker, at (ISO time), content.
Rules:
- Use only the `new` messages as sources. `context` is there to resolve references; never record it.
- One atomic, self-contained statement per record: replace pronouns with the speaker's name (or "the user"); turn relative dates ("yesterday", "next Friday") into absolute dates computed from that message's `at`.
- Record user-side facts only: what the user said, is, did, plans, prefers or decided. Skip the assistant's suggestions unless the user adopts them, and skip greetings and small talk.
- memory_type: "profile" for lasting traits (identity, job, stable preferences), "episodic" for an event at a time, otherwise "fact".
- tags: any of identity, decision, preference, fact, episode, chat.
- Fill time (YYYY-MM-DD, YYYY-MM, YYYY, or START..END), location, reason and purpose only where the messages state them. theme: a short topic label. keywords: 2-6 salient words.
- source_ids: ids of the `new` messages the record rests on. speaker: who it is about.
- Write in the language of the messages. Return an empty list when nothing is worth remembering.
Answer only by calling the tool."""

_QUERY = """You parse a question put to a memory store into search dimensions.
Input JSON: {"text", "now" (ISO time), "speaker"}.
- text: the question unchanged. anchor: its core subject in a few words. keywords: 2-6 salient search words, no stopwords.
- target_types: record types that would answer it (fact, episodic, profile); empty when unsure.
- time: only when the question constrains time. op: on, before, after, around or between; start and end: absolute ISO datetimes with a UTC offset, resolved against `now`; granularity: instant, day, month, year or range; text: the time expression.
- location: a place the question is restricted to. needs_assistant: true when it asks what the assistant said.
- answer_dimension: what the answer is: time, location, reason, purpose or content.
Answer only by calling the tool."""

_CONSOLIDATE = """You decide how a new memory record relates to an existing record on the same subject.
Input JSON: {"new", "existing", "cosine"} (cosine: their embedding similarity).
- MERGE: they say the same thing or complete each other; merged_content: one self-contained record holding both.
- SUPERSEDE: the new record updates or contradicts the existing one (a changed preference, plan or fact).
- KEEP_BOTH: they are about different things.
reason: one short sentence. Answer only by calling the tool."""

_TUNE = """You tune memory-scoring weights for one conversation theme.
A memory's score is S = alpha*R + beta*T + gamma*F + delta, where R is relevance to the query, T is recency (forgetting-curve decay), F is importance, delta a bias in [-1, 1].
Importance is F = w0 + w1*u + w2*(1 - exp(-k*n)), u the salience of the memory's type, n how often it was reinforced.
alpha+beta+gamma must equal 1 and w0+w1+w2 must equal 1, each in [0, 1].
Input JSON: {"theme", "samples" (recent messages on it), "current" (current weights)}.
Favour relevance for lookups, recency for fast-changing topics, importance for identity and commitments; stay near `current` unless the samples call for a change. rationale: one short sentence.
Answer only by calling the tool."""

_INDUCE = """You maintain a user's long-term profile from their memory records.
Input JSON: {"profile": {field: [values]}, "records": [...]}.
Fields: identity, occupation, preferences, goals, constraints, relationships, facts.
- add: per field, short values the records establish that the profile lacks.
- remove: per field, existing values the records show are no longer true.
Keep values short (a few words), in the records' language; leave out anything uncertain.
Answer only by calling the tool."""


class LLMExtractor(LLMRole[ExtractionInput, ExtractionOutput]):
    """Records from a window; source ids outside the new messages and unknown tags are repaired."""

    role = "extractor"
    output_model = ExtractionOutput
    instructions = _EXTRACT

    def _payload(self, inp: ExtractionInput) -> dict[str, Any]:
        def msgs(ms: list[Any]) -> list[dict[str, Any]]:
            return [{"id": m.id, "role": m.role, "speaker": m.speaker, "at": m.at.isoformat(), "content": m.content}
                    for m in ms]

        return {"context": msgs(inp.context), "new": msgs(inp.new)}

    def extract(self, inp: ExtractionInput) -> ExtractionOutput:
        return self.run(inp).output

    def _prepare(self, data: dict[str, Any], inp: ExtractionInput, notes: list[str]) -> dict[str, Any]:
        records = data.get("records", [])
        if not isinstance(records, list):
            raise _Retryable(f"records is a {type(records).__name__}, not a list", kind="output")
        new_ids = [m.id for m in inp.new]
        kept = []
        for i, rec in enumerate(records):
            if not isinstance(rec, dict) or not str(rec.get("content") or "").strip():
                notes.append(f"records[{i}] dropped: no content")
                continue
            rec = dict(rec)
            if rec.get("memory_type", "fact") not in MEMORY_TYPES:
                notes.append(f"records[{i}].memory_type {rec['memory_type']!r} is unknown; set to 'fact'")
                rec["memory_type"] = "fact"
            if "tags" in rec:
                tags = _as_str_list(rec["tags"])
                good = [t for t in tags if t in TAGS]
                if len(good) != len(tags):
                    notes.append(f"records[{i}].tags dropped {[t for t in tags if t not in TAGS]}")
                rec["tags"] = list(dict.fromkeys(good)) or ["fact"]
            if "keywords" in rec:
                rec["keywords"] = _as_str_list(rec["keywords"])
            ids = []
            for x in rec.get("source_ids") or []:
                try:
                    ids.append(int(x))
                except (TypeError, ValueError):
                    ids.append(None)
            valid = [x for x in ids if x in new_ids]
            if not valid:
                valid = list(new_ids)
            if valid != ids:
                notes.append(f"records[{i}].source_ids {rec.get('source_ids')} not among new ids {new_ids}; set to {valid}")
            rec["source_ids"] = list(dict.fromkeys(valid))
            for key in ("time", "location", "reason", "purpose"):
                if key in rec and rec[key] is not None and not isinstance(rec[key], str):
                    rec[key] = str(rec[key])
            kept.append(rec)
        return {**data, "records": kept}


class LLMQueryParser(LLMRole[QueryInput, ParsedQuery]):
    """A question into dimensions; a bad time constraint is dropped, naive times get `now`'s zone."""

    role = "query_parser"
    output_model = ParsedQuery
    instructions = _QUERY
    _DIMENSIONS = ("time", "location", "reason", "purpose", "content")

    def parse(self, inp: QueryInput) -> ParsedQuery:
        return self.run(inp).output

    def _payload(self, inp: QueryInput) -> dict[str, Any]:
        return {"text": inp.text, "now": inp.now.isoformat(), "speaker": inp.speaker}

    def _prepare(self, data: dict[str, Any], inp: QueryInput, notes: list[str]) -> dict[str, Any]:
        data = dict(data)
        if data.get("text") != inp.text:
            if data.get("text"):
                notes.append("text rewritten by the model; restored the question")
            data["text"] = inp.text
        if "keywords" in data:
            data["keywords"] = _as_str_list(data["keywords"])
        if "target_types" in data:
            types = _as_str_list(data["target_types"])
            good = [t for t in types if t in MEMORY_TYPES]
            if len(good) != len(types):
                notes.append(f"target_types dropped {[t for t in types if t not in MEMORY_TYPES]}")
            data["target_types"] = list(dict.fromkeys(good))
        if data.get("answer_dimension") not in (None, *self._DIMENSIONS):
            notes.append(f"answer_dimension {data['answer_dimension']!r} is unknown; dropped")
            data["answer_dimension"] = None
        if data.get("time") is not None:
            try:
                tc = TimeConstraint.model_validate(data["time"])
            except ValidationError as exc:
                notes.append(f"time constraint dropped: {_short(exc)}")
                data["time"] = None
            else:
                tz = inp.now.tzinfo
                start = tc.start if tc.start.tzinfo else tc.start.replace(tzinfo=tz)
                end = tc.end if tc.end.tzinfo else tc.end.replace(tzinfo=tz)
                if (start, end) != (tc.start, tc.end):
                    notes.append("time constraint had no UTC offset; used the one of `now`")
                if end < start:
                    notes.append("time constraint start after end; swapped")
                    start, end = end, start
                data["time"] = tc.model_copy(update={"start": start, "end": end})
        return data


class LLMConsolidator(LLMRole[ConsolidationInput, ConsolidationDecision]):
    """MERGE / SUPERSEDE / KEEP_BOTH; a spelling variant of the action is normalised."""

    role = "consolidator"
    output_model = ConsolidationDecision
    instructions = _CONSOLIDATE

    def decide(self, inp: ConsolidationInput) -> ConsolidationDecision:
        return self.run(inp).output

    def _prepare(self, data: dict[str, Any], inp: ConsolidationInput, notes: list[str]) -> dict[str, Any]:
        action = data.get("action")
        if isinstance(action, str):
            norm = action.strip().upper().replace("-", "_").replace(" ", "_")
            if norm != action and norm in ("MERGE", "SUPERSEDE", "KEEP_BOTH"):
                notes.append(f"action {action!r} normalised to {norm!r}")
                data = {**data, "action": norm}
        return data

    def _finish(self, out: ConsolidationDecision, inp: ConsolidationInput, notes: list[str]) -> ConsolidationDecision:
        if out.action == "MERGE" and not (out.merged_content or "").strip():
            raise _Retryable("MERGE without merged_content", kind="output")
        return out


class LLMTuner(LLMRole[TuneInput, TuneOutput]):
    """Weights for a theme, clipped to their ranges and renormalised (logged) when off."""

    role = "tuner"
    output_model = TuneOutput
    instructions = _TUNE

    def tune(self, inp: TuneInput) -> TuneOutput:
        return self.run(inp).output

    def _finish(self, out: TuneOutput, inp: TuneInput, notes: list[str]) -> TuneOutput:
        names = ("alpha", "beta", "gamma", "delta", "w0", "w1", "w2")
        fixed, changes = repair_weights({n: getattr(out, n) for n in names}, fallback=inp.current)
        notes.extend(changes)
        return out.model_copy(update={n: fixed[n] for n in names}) if changes else out


class LLMProfileInducer(LLMRole[InductionInput, InductionOutput]):
    """Profile additions and removals; bare strings become one-value lists."""

    role = "inducer"
    output_model = InductionOutput
    instructions = _INDUCE

    def induct(self, inp: InductionInput) -> InductionOutput:
        return self.run(inp).output

    def _prepare(self, data: dict[str, Any], inp: InductionInput, notes: list[str]) -> dict[str, Any]:
        data = dict(data)
        for part in ("add", "remove"):
            value = data.get(part)
            if value is None:
                continue
            if not isinstance(value, dict):
                notes.append(f"{part} was a {type(value).__name__}, not an object; dropped")
                data[part] = {}
                continue
            fixed = {}
            for k, v in value.items():
                vals = _as_str_list(v)
                if not isinstance(v, list):
                    notes.append(f"{part}.{k} was not a list; wrapped")
                if vals:
                    fixed[str(k)] = vals
            data[part] = fixed
        return data


def real_roles(settings: ModelSettings | None = None, ledger: Ledger | None = None) -> dict[str, object]:
    """Every role of engine.roles.ROLE_NAMES on one chat model built from `settings`."""
    s = settings or ModelSettings()
    led = ledger if ledger is not None else Ledger()
    chat = make_chat_model(s)
    return {
        "extractor": LLMExtractor(chat, settings=s, ledger=led),
        "query_parser": LLMQueryParser(chat, settings=s, ledger=led),
        "consolidator": LLMConsolidator(chat, settings=s, ledger=led),
        "tuner": LLMTuner(chat, settings=s, ledger=led),
        "inducer": LLMProfileInducer(chat, settings=s, ledger=led),
        "chat": chat,
    }
