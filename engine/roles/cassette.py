"""Record and replay model calls at the HTTP level, byte for byte.

A cassette is a JSON Lines file; each line maps a request hash to one raw response body. The
hash is the sha256 of a canonical JSON of what decides the answer (path, model, messages, tools,
tool choice, response format, sampling parameters), so it is stable across ports, hosts, keys
and client versions that add bookkeeping fields. Working as an `httpx` transport makes it fit
any client built on httpx (the OpenAI SDK under ChatDeepSeek and ChatOpenAI):

    transport = CassetteTransport(mode="replay", path="runs/deepseek.jsonl")
    ChatDeepSeek(..., http_client=httpx.Client(transport=transport))

Request headers are never written (no API key or Authorization header can reach the file);
of the response headers only the content type is kept. A request recorded several times (a
retry after bad output) replays its answers in recorded order, then repeats the last one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

import httpx

from engine.core.errors import MemlabUsageError

__all__ = ["CassetteTransport", "CassetteMissError", "request_key", "CASSETTE_MODES", "HASHED_FIELDS"]

CassetteMode = Literal["record", "replay", "auto"]
CASSETTE_MODES: tuple[str, ...] = ("record", "replay", "auto")
#: Request body fields that decide the answer; anything else (stream options, user ids, flags a
#: newer client adds) is left out of the hash.
HASHED_FIELDS: tuple[str, ...] = (
    "model",
    "messages",
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "response_format",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "n",
    "seed",
    "stream",
)
_KEPT_RESPONSE_HEADERS = ("content-type",)


class CassetteMissError(MemlabUsageError):
    """Replay met a request the cassette does not hold (the prompt, model or schema changed)."""


def request_key(method: str, path: str, content: bytes) -> tuple[str, dict[str, Any]]:
    """(sha256 hex, canonical request) for a request; JSON bodies keep only HASHED_FIELDS."""
    try:
        body = json.loads(content) if content else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict):
        kept: Any = {k: body[k] for k in HASHED_FIELDS if k in body}
    else:
        kept = {"sha256": hashlib.sha256(content).hexdigest()}
    canonical = {"method": method.upper(), "path": path, "body": kept}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest(), canonical


class CassetteTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """An httpx transport that records responses to, or replays them from, a cassette file.

    mode "record" always calls `inner` and appends; "replay" never touches the network; "auto"
    replays what the cassette holds and records the rest. Usable by sync and async clients.
    """

    def __init__(
        self,
        *,
        mode: CassetteMode,
        path: str | Path,
        inner: httpx.BaseTransport | None = None,
        async_inner: httpx.AsyncBaseTransport | None = None,
    ):
        if mode not in CASSETTE_MODES:
            raise MemlabUsageError(f"cassette mode {mode!r} is not one of {', '.join(CASSETTE_MODES)}")
        self.mode = mode
        self.path = Path(path)
        self._inner = inner
        self._async_inner = async_inner
        self._lock = threading.Lock()
        self._entries: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._served: dict[str, int] = defaultdict(int)
        if self.path.exists():
            self._load()
        elif mode == "replay":
            raise MemlabUsageError(
                f"cassette {self.path} does not exist; record it first with cassette_mode='record'"
            )

    def _load(self) -> None:
        for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                self._entries[entry["key"]].append(entry["response"])
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise MemlabUsageError(
                    f"cassette {self.path} line {n} is not a cassette entry ({exc}); re-record it"
                ) from exc

    def __len__(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._entries.values())

    # replay ------------------------------------------------------------------------------------
    def _replay(self, key: str, canonical: dict[str, Any]) -> httpx.Response | None:
        with self._lock:
            answers = self._entries.get(key)
            if not answers:
                if self.mode == "replay":
                    body = canonical.get("body") or {}
                    raise CassetteMissError(
                        f"cassette {self.path} has no response for request {key[:12]} "
                        f"(model {body.get('model')!r}, {len(body.get('messages') or [])} messages): the prompt, "
                        "model, schema or settings changed since it was recorded; re-record it with "
                        "cassette_mode='record' (delete the file first) or 'auto'"
                    )
                return None
            i = self._served[key]
            if i >= len(answers) and self.mode == "auto":
                return None  # auto records what the cassette ran out of (a retry's second answer)
            self._served[key] = i + 1
            stored = answers[min(i, len(answers) - 1)]
        content = base64.b64decode(stored["body_b64"]) if "body_b64" in stored else stored["body"].encode("utf-8")
        return httpx.Response(stored["status"], headers=stored.get("headers") or {}, content=content)

    # record ------------------------------------------------------------------------------------
    def _store(self, key: str, canonical: dict[str, Any], status: int, headers: httpx.Headers, content: bytes) -> None:
        stored: dict[str, Any] = {
            "status": status,
            "headers": {h: headers[h] for h in _KEPT_RESPONSE_HEADERS if h in headers},
        }
        try:
            stored["body"] = content.decode("utf-8")
        except UnicodeDecodeError:
            stored["body_b64"] = base64.b64encode(content).decode("ascii")
        line = json.dumps({"key": key, "request": canonical, "response": stored}, ensure_ascii=False, sort_keys=True)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
            self._entries[key].append(stored)
            self._served[key] += 1

    def _prepare(self, request: httpx.Request) -> tuple[str, dict[str, Any], httpx.Response | None]:
        key, canonical = request_key(request.method, request.url.path, request.content)
        cached = None if self.mode == "record" else self._replay(key, canonical)
        return key, canonical, cached

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        key, canonical, cached = self._prepare(request)
        if cached is not None:
            return cached
        if self._inner is None:
            self._inner = httpx.HTTPTransport()
        response = self._inner.handle_request(request)
        try:
            content = response.read()  # decoded by httpx; the stored copy carries no content-encoding
        finally:
            response.close()
        self._store(key, canonical, response.status_code, response.headers, content)
        return httpx.Response(
            response.status_code,
            headers={h: response.headers[h] for h in _KEPT_RESPONSE_HEADERS if h in response.headers},
            content=content,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        key, canonical, cached = self._prepare(request)
        if cached is not None:
            return cached
        if self._async_inner is None:
            self._async_inner = httpx.AsyncHTTPTransport()
        response = await self._async_inner.handle_async_request(request)
        try:
            content = await response.aread()
        finally:
            await response.aclose()
        self._store(key, canonical, response.status_code, response.headers, content)
        return httpx.Response(
            response.status_code,
            headers={h: response.headers[h] for h in _KEPT_RESPONSE_HEADERS if h in response.headers},
            content=content,
        )

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()

    async def aclose(self) -> None:
        if self._async_inner is not None:
            await self._async_inner.aclose()
