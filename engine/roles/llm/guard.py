"""The switch that forbids real model requests, and the guarded HTTP clients that enforce it.

Tests (and anyone offline) set MEMLAB_FORBID_REAL_MODELS=1 or enter `forbid_real_requests()`:
then every model request to a non-loopback host raises RealModelForbiddenError, whether it goes
through a role or through the chat model used directly, because memlab's HTTP clients check the
switch on every request. Loopback servers (a local vLLM/Ollama, the test fakes) stay allowed.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import httpx

from engine.core.errors import RealModelForbiddenError
from engine.roles.cassette import CassetteTransport

__all__ = [
    "FORBID_ENV",
    "real_requests_forbidden",
    "forbid_real_requests",
    "allow_real_requests",
    "is_loopback_url",
    "forbidden_error",
    "GuardTransport",
    "MemlabHttpClient",
    "MemlabAsyncHttpClient",
    "guarded_http_clients",
    "model_target",
]

FORBID_ENV = "MEMLAB_FORBID_REAL_MODELS"
_TRUTHY = {"1", "true", "yes", "on"}

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


def forbidden_error(target: str | None, what: str) -> RealModelForbiddenError:
    """The error for `what` reaching `target` while real requests are forbidden (says what to do)."""
    return RealModelForbiddenError(
        f"{what} would reach {target or 'the provider default endpoint'} while real model requests are "
        f"forbidden ({FORBID_ENV}=1 or forbid_real_requests()): use the scripted models, a loopback "
        "base_url (a local server), a cassette in replay mode, or allow_real_requests()"
    )


class GuardTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Checks the forbid switch on every request, so the chat role used directly obeys it too."""

    def __init__(self, inner: Any):
        self._inner = inner

    def _check(self, request: httpx.Request) -> None:
        if real_requests_forbidden() and not is_loopback_url(str(request.url)):
            raise forbidden_error(f"{request.url.scheme}://{request.url.host}", "a model request")

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


def guarded_http_clients(settings: Any) -> tuple[httpx.Client, httpx.AsyncClient]:
    """Sync and async clients whose transports check the switch (and replay/record a cassette when
    `settings.cassette` is set), with the settings' timeout."""
    sync_t: Any = GuardTransport(httpx.HTTPTransport())
    async_t: Any = GuardTransport(httpx.AsyncHTTPTransport())
    if settings.cassette is not None:
        sync_t = CassetteTransport(mode=settings.cassette_mode, path=settings.cassette, inner=sync_t)
        async_t = CassetteTransport(mode=settings.cassette_mode, path=settings.cassette, async_inner=async_t)
    timeout = httpx.Timeout(settings.timeout, connect=min(settings.timeout, 10.0))
    return (
        MemlabHttpClient(transport=sync_t, timeout=timeout, follow_redirects=True),
        MemlabAsyncHttpClient(transport=async_t, timeout=timeout, follow_redirects=True),
    )


def model_target(chat_model: Any) -> tuple[bool, str | None]:
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
