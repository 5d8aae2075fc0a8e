"""A local OpenAI-compatible server whose "model" is memlab's scripted roles.

The real client path (ChatDeepSeek → HTTP → structured-output parsing → repair → ledger) runs
end to end against it: a structured-output request is answered by the scripted role that owns
the requested schema, a plain chat request by the scripted chat model. Usage fields mimic
DeepSeek's, including prompt-cache hits for a system prompt the server has seen before, so the
ledger's cache and cost columns are exercised. Run it by hand with
`python tests/scripted_server.py` (it prints its base URL) and point `memlab replay --models real
--base-url URL` at it.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai import FakeOpenAI, Reply, chat_body, requested_tool  # noqa: E402

from engine.core.tokens import ApproxTokenCounter  # noqa: E402
from engine.roles import types as R  # noqa: E402
from engine.roles.scripted import ScriptedChatModel, scripted_roles  # noqa: E402

__all__ = ["ScriptedResponder", "scripted_server"]

_COUNTER = ApproxTokenCounter()
_CACHE_UNIT = 64  # providers cache prompt prefixes in fixed-size units


class ScriptedResponder:
    """Answers chat-completions requests with the scripted roles."""

    def __init__(self) -> None:
        roles = scripted_roles()
        self.roles = roles
        self.seen_prefixes: set[str] = set()
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request.get("messages") or []
        tool = requested_tool(request)
        if tool:
            payload = json.loads(messages[-1]["content"])
            args = self._structured(tool, payload)
            body = chat_body(tool_name=tool, tool_arguments=json.dumps(args, ensure_ascii=False),
                             usage=self._usage(messages, json.dumps(args)))
            self._count(tool)
            return Reply(body=body)
        text = self._chat(messages)
        self._count("chat")
        return Reply(body=chat_body(content=text, usage=self._usage(messages, text)))

    def _count(self, name: str) -> None:
        with self._lock:
            self.calls[name] = self.calls.get(name, 0) + 1

    def _structured(self, tool: str, payload: dict[str, Any]) -> dict[str, Any]:
        if tool == "ExtractionOutput":
            inp = R.ExtractionInput(user_id="u", session_id="s",
                                    context=[R.WindowMessage(**m) for m in payload.get("context", [])],
                                    new=[R.WindowMessage(**m) for m in payload.get("new", [])])
            out = self.roles["extractor"].extract(inp)
        elif tool == "ParsedQuery":
            out = self.roles["query_parser"].parse(R.QueryInput.model_validate(payload))
        elif tool == "ConsolidationDecision":
            out = self.roles["consolidator"].decide(R.ConsolidationInput.model_validate(payload))
        elif tool == "TuneOutput":
            out = self.roles["tuner"].tune(R.TuneInput.model_validate(payload))
        elif tool == "InductionOutput":
            out = self.roles["inducer"].induct(R.InductionInput.model_validate(payload))
        else:
            raise ValueError(f"no scripted role answers the schema {tool!r}")
        return out.model_dump(mode="json")

    def _chat(self, messages: list[dict[str, Any]]) -> str:
        from langchain_core.messages import (
            AIMessage,
            HumanMessage,
            SystemMessage,
            ToolMessage,
        )

        kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
        lc = []
        for m in messages:
            content = m.get("content") or ""
            if m["role"] == "tool":
                lc.append(ToolMessage(content=content, tool_call_id=m.get("tool_call_id", "t")))
            else:
                lc.append(kinds.get(m["role"], HumanMessage)(content=content))
        return str(ScriptedChatModel().invoke(lc).content)

    def _usage(self, messages: list[dict[str, Any]], output: str) -> dict[str, int]:
        prompt = sum(_COUNTER.count(str(m.get("content") or "")) + 4 for m in messages)
        system = next((str(m.get("content") or "") for m in messages if m["role"] == "system"), "")
        with self._lock:
            hit = (_COUNTER.count(system) // _CACHE_UNIT) * _CACHE_UNIT if system in self.seen_prefixes else 0
            self.seen_prefixes.add(system)
        completion = _COUNTER.count(output)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": prompt - hit}


def scripted_server() -> FakeOpenAI:
    """A started server (use as a context manager) answering with the scripted roles."""
    return FakeOpenAI(responder=ScriptedResponder())


if __name__ == "__main__":  # pragma: no cover - manual use
    import argparse
    import time

    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    with FakeOpenAI(responder=ScriptedResponder()) as server:
        print(server.base_url, flush=True)
        while True:
            time.sleep(3600)
