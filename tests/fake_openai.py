"""Canned replies for the local OpenAI-compatible server (engine.eval.cost.server.FakeOpenAI),
and a pytest fixture running one.

Canned replies cover what real providers do wrong: malformed bodies, invalid tool arguments,
wrong schemas, HTTP 500s and slow answers (for timeouts).

    with FakeOpenAI() as server:
        server.push(tool_reply({"records": []}, usage=usage(120, 30, hit=100)))
        model = ChatDeepSeek(model="deepseek-chat", api_base=server.base_url, api_key="k")
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from engine.eval.cost.server import (
    FakeOpenAI,
    Received,
    Reply,
    chat_body,
    error_reply,
    requested_tool,
    usage,
)

__all__ = [
    "FakeOpenAI",
    "Received",
    "Reply",
    "chat_body",
    "content_reply",
    "error_reply",
    "fake_openai",
    "raw_reply",
    "requested_tool",
    "tool_reply",
    "usage",
]


def tool_reply(
    args: Mapping[str, Any] | str,
    *,
    name: str | None = None,
    usage: Mapping[str, int] | None = None,
    delay: float = 0.0,
) -> Reply:
    """A structured-output answer: a tool call named like the requested tool (unless `name`).

    `args` as a string is sent verbatim, so malformed JSON arguments can be served.
    """
    arguments = args if isinstance(args, str) else json.dumps(args)

    def build(request: dict[str, Any]) -> dict[str, Any]:
        return chat_body(tool_name=name or requested_tool(request), tool_arguments=arguments, usage=usage)

    return Reply(body=build, delay=delay)


def content_reply(text: str, *, usage: Mapping[str, int] | None = None, delay: float = 0.0) -> Reply:
    """A plain assistant message (the chat role, or a model ignoring the tool)."""
    return Reply(body=chat_body(content=text, usage=usage), delay=delay)


def raw_reply(raw: bytes | str, *, status: int = 200, content_type: str = "application/json") -> Reply:
    """A body served byte for byte (e.g. not JSON at all)."""
    return Reply(status=status, body=raw if isinstance(raw, bytes) else raw.encode(), headers={"Content-Type": content_type})


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A running FakeOpenAI, stopped after the test."""
    with FakeOpenAI() as server:
        yield server
