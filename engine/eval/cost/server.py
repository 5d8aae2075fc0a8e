"""A local OpenAI-compatible chat server on 127.0.0.1 (a random free port), for offline runs of
the real model clients: `memlab bench cost` and the tests.

Serves `/v1/chat/completions` (and `/chat/completions`) from a queue of canned `Reply`s, else from
a `responder` (a function of the request body; `engine.eval.cost.responder.ScriptedResponder`
answers as the scripted roles), and keeps every request it received. The real `ChatDeepSeek` /
`ChatOpenAI` clients are pointed at it, so the whole HTTP and parsing path is exercised.

    with FakeOpenAI(responder=ScriptedResponder()) as server:
        model = ChatDeepSeek(model="deepseek-chat", api_base=server.base_url, api_key="k")
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["FakeOpenAI", "Received", "Reply", "chat_body", "error_reply", "requested_tool", "usage"]

Body = bytes | str | Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One canned HTTP answer. `body` may be a function of the request body (see tool_reply)."""

    status: int = 200
    body: Body = b""
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})


@dataclass(frozen=True, kw_only=True)
class Received:
    """A request as the server saw it (header names lower-cased)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    raw: bytes


def usage(prompt: int, completion: int, *, hit: int | None = None, miss: int | None = None) -> dict[str, int]:
    """An OpenAI `usage` object, with DeepSeek's cache fields when `hit`/`miss` are given."""
    out = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if hit is not None:
        out["prompt_cache_hit_tokens"] = hit
        out["prompt_cache_miss_tokens"] = prompt - hit if miss is None else miss
    elif miss is not None:
        out["prompt_cache_miss_tokens"] = miss
    return out


def chat_body(
    *,
    content: str | None = None,
    tool_name: str | None = None,
    tool_arguments: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str = "deepseek-chat",
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """A chat.completion response body: plain content, or one tool call with raw JSON arguments."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_name is not None:
        message["tool_calls"] = [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": tool_name, "arguments": tool_arguments or "{}"},
            }
        ]
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1767603600,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_name else "stop"),
            }
        ],
    }
    if usage is not None:
        body["usage"] = dict(usage)
    return body


def requested_tool(request: Mapping[str, Any]) -> str:
    """The function the request forces (tool_choice) or else its first tool's name."""
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        return choice.get("function", {}).get("name", "")
    tools = request.get("tools") or []
    return tools[0]["function"]["name"] if tools else ""


def error_reply(status: int = 500, message: str = "internal error") -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": "server_error", "code": status}})


class FakeOpenAI:
    """Threaded local server; `push` canned replies, read `requests`. An empty queue answers 500."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply] | None = None):
        self.responder = responder
        self.requests: list[Received] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------------------------
    def start(self) -> Self:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running: call start() or use it as a context manager")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # canned replies --------------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _next_reply(self, request: dict[str, Any] | None) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(request or {})
        return error_reply(500, "fake_openai: no canned response queued; push() one in the test")

    def _record(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)


def _make_handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            if path not in ("/v1/chat/completions", "/chat/completions"):
                self._send(error_reply(404, f"fake_openai: no route {path}"), None)
                return
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = None
            server._record(Received(path=path, headers={k.lower(): v for k, v in self.headers.items()}, body=body, raw=raw))
            reply = server._next_reply(body)
            if reply.delay and server._stopping.wait(reply.delay):
                return
            self._send(reply, body)

        def _send(self, reply: Reply, request: dict[str, Any] | None) -> None:
            body = reply.body
            if callable(body):
                body = body(request or {})
            data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else json.dumps(body).encode()
            try:
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

    return Handler
