"""Which model to call and how (`ModelSettings`), and the chat model those settings describe.

`make_chat_model(ModelSettings())` builds DeepSeek by default, any `init_chat_model` provider, or
any OpenAI-compatible base URL (a local vLLM or Ollama), on memlab's guarded HTTP clients and with
the client's own retries off, so every attempt is memlab's, visible and recorded in the ledger.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine.core.errors import ConfigError
from engine.roles.ledger import DEEPSEEK_PRICE, Price
from engine.roles.llm.guard import (
    forbidden_error,
    guarded_http_clients,
    is_loopback_url,
    real_requests_forbidden,
)

__all__ = ["ModelSettings", "make_chat_model", "DEEPSEEK_API_BASE", "DEFAULT_KEY_ENV", "LOCAL_DUMMY_KEY"]

DEEPSEEK_API_BASE = "https://api.deepseek.com/v1"
DEFAULT_KEY_ENV = "DEEPSEEK_API_KEY"
#: Sent to local OpenAI-compatible servers that need no key (the SDK insists on one).
LOCAL_DUMMY_KEY = "memlab-local-no-key"


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
        raise forbidden_error(s.target_url, f"make_chat_model({s.model!r})")
    openai_compatible = s.uses_deepseek_client or s.provider in ("openai", "deepseek")
    if s.uses_deepseek_client:
        key = _api_key(s)
        if key is None:
            raise ConfigError(
                f"{s.api_key_env} is not set: export {s.api_key_env}=<your key> to use {s.model!r}, "
                "set base_url to a local OpenAI-compatible server, or use the scripted models"
            )
        from langchain_deepseek import ChatDeepSeek

        http_client, http_async_client = guarded_http_clients(s)
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
        kwargs["http_client"], kwargs["http_async_client"] = guarded_http_clients(s)
    elif s.cassette is not None:
        raise ConfigError(f"cassettes need an OpenAI-compatible client; provider {s.provider!r} is not one")
    try:
        return init_chat_model(s.model, model_provider=s.provider, **kwargs)
    except ImportError as exc:
        raise ConfigError(f"provider {s.provider!r} needs its LangChain package: {exc}") from exc
