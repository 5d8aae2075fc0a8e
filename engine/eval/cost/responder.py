"""`ScriptedResponder`: a local OpenAI-compatible "model" that answers as memlab's scripted roles.

The real client path (ChatDeepSeek → HTTP → structured-output parsing → repair → ledger) runs
end to end against it: a structured-output request is answered by the scripted role that owns
the requested schema, LangChain `SummarizationMiddleware`'s summary prompt by the scripted
summarizer (the user's own statements, newest first within `summary_tokens`), and any other chat
request by the scripted chat model. This is the stand-in model by design, reached through
`Models.scripted()` like every other use of the stand-ins. Usage fields mimic DeepSeek's: prompt tokens
count the tool schemas too, and a prompt prefix (whole messages) the server has seen before is a
cache hit, so the ledger's cache and cost columns are exercised. `python -m engine.eval.cost.responder` runs one by hand (it prints its base
URL) for `memlab replay --models real --base-url URL`.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import threading
from typing import Any

from engine.core.tokens import ApproxTokenCounter
from engine.eval.cost.server import FakeOpenAI, Reply, chat_body, requested_tool
from engine.roles import types as R
from engine.roles.bundle import Models
from engine.roles.ledger import Ledger

__all__ = ["SUMMARY_MARKER", "ScriptedResponder", "scripted_server"]

_COUNTER = ApproxTokenCounter()
_CACHE_UNIT = 64  # providers cache prompt prefixes in fixed-size units
#: How LangChain's default summary prompt introduces the history it asks to summarise.
SUMMARY_MARKER = "<messages>\nMessages to summarize:\n"
_XML_MESSAGE = re.compile(r'<message type="(?P<type>[a-z]+)"[^>]*>(?P<text>.*?)</message>', re.DOTALL)


class ScriptedResponder:
    """Answers chat-completions requests with the scripted roles; counts the requests per kind."""

    def __init__(self, *, summary_tokens: int = 300) -> None:
        self.models = Models.scripted()
        self.summary_tokens = summary_tokens  # the scripted summarizer's length (bench cost: the memory budget)
        self.seen_prefixes: set[str] = set()
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request.get("messages") or []
        tool = requested_tool(request)
        if tool:
            payload = json.loads(messages[-1]["content"])
            args = json.dumps(self._structured(tool, payload), ensure_ascii=False)
            self._count(tool)
            return Reply(body=chat_body(tool_name=tool, tool_arguments=args,
                                        usage=self._usage(messages, args, tools=request.get("tools"))))
        last = str((messages[-1].get("content") if messages else "") or "")
        if SUMMARY_MARKER in last:
            text, kind = self._summary(last), "summary"
        else:
            text, kind = self._chat(messages), "chat"
        self._count(kind)
        return Reply(body=chat_body(content=text, usage=self._usage(messages, text)))

    def _count(self, name: str) -> None:
        with self._lock:
            self.calls[name] = self.calls.get(name, 0) + 1

    def _structured(self, tool: str, payload: dict[str, Any]) -> dict[str, Any]:
        m = self.models
        if tool == "ExtractionOutput":
            inp = R.ExtractionInput(user_id="u", session_id="s",
                                    context=[R.WindowMessage(**x) for x in payload.get("context", [])],
                                    new=[R.WindowMessage(**x) for x in payload.get("new", [])],
                                    profile=payload.get("profile"))
            out = m.extractor.extract(inp)
        elif tool == "ParsedQuery":
            out = m.query_parser.parse(R.QueryInput.model_validate(payload))
        elif tool == "ConsolidationDecision":
            out = m.consolidator.decide(R.ConsolidationInput.model_validate(payload))
        elif tool == "TuneOutput":
            out = m.tuner.tune(R.TuneInput.model_validate(payload))
        elif tool == "InductionOutput":
            out = m.inducer.induct(R.InductionInput.model_validate(payload))
        else:
            raise ValueError(f"no scripted role answers the schema {tool!r}")
        return out.dump() if isinstance(out, R.ExtractionOutput) else out.model_dump(mode="json")

    def _summary(self, prompt: str) -> str:
        """The summary prompt's XML history back into messages, summarised as the offline
        strategy's `ScriptedSummarizer` does (an earlier summary's statements carried forward)."""
        from langchain_core.messages import AIMessage, HumanMessage

        from engine.eval.strategies.summarization import (
            SUMMARY_PREFIX,
            ScriptedSummarizer,
        )

        history = prompt.split(SUMMARY_MARKER, 1)[1]
        msgs: list[Any] = []
        for m in _XML_MESSAGE.finditer(history):
            text = html.unescape(m.group("text"))
            if m.group("type") == "human":
                earlier = text.startswith(SUMMARY_PREFIX)
                msgs.append(HumanMessage(content=text.removeprefix(SUMMARY_PREFIX) if earlier else text,
                                         additional_kwargs={"lc_source": "summarization"} if earlier else {}))
            elif m.group("type") == "ai":
                msgs.append(AIMessage(content=text))
        return ScriptedSummarizer(max_tokens=self.summary_tokens, ledger=Ledger(), counter=_COUNTER)(msgs)

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
        return str(self.models.chat.invoke(lc).content)

    def _usage(self, messages: list[dict[str, Any]], output: str, *, tools: Any = None) -> dict[str, int]:
        """Usage as DeepSeek reports it: prompt tokens are every message plus the tool schemas sent
        (a forced tool's JSON schema is part of the prompt), and a cache hit is the longest prefix
        of whole messages (tools first) seen in an earlier request, in 64-token units."""
        parts = [json.dumps(tools, ensure_ascii=False, separators=(",", ":")) if tools else ""]
        parts += [f"{m.get('role')}:{m.get('content') or ''}" for m in messages]
        sizes = [_COUNTER.count(parts[0])] + [_COUNTER.count(str(m.get("content") or "")) + 4 for m in messages]
        prompt = sum(sizes)
        cached = 0
        with self._lock:
            key = ""
            matching = True
            for part, size in zip(parts, sizes, strict=True):
                key = hashlib.sha1(f"{key}\x1e{part}".encode()).hexdigest()
                if matching and key in self.seen_prefixes:
                    cached += size
                else:
                    matching = False
                    self.seen_prefixes.add(key)
        hit = (cached // _CACHE_UNIT) * _CACHE_UNIT
        completion = _COUNTER.count(output)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": prompt - hit}


def scripted_server(**kwargs: Any) -> FakeOpenAI:
    """A server (use as a context manager) answering with the scripted roles."""
    return FakeOpenAI(responder=ScriptedResponder(**kwargs))


if __name__ == "__main__":  # pragma: no cover - manual use
    import time

    with scripted_server() as server:
        print(server.base_url, flush=True)
        while True:
            time.sleep(3600)
