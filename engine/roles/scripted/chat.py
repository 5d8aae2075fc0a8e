"""`ScriptedChatModel`: a deterministic LangChain chat model that answers only from what it was shown.

A question gets the shown line(s) that best overlap it (a line in the question's time range,
resolved against the prompt's current date, counts extra); a statement gets a short
acknowledgement; a bound tool named in the message is called. It never states anything it was
not shown, which makes memory injection measurable offline. Token usage is approximated with
engine.core.tokens, like every offline count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from engine.core.text import content_tokens, has_cjk, split_sentences
from engine.core.timeparse import resolve_times
from engine.core.timequery import parse_time_constraint, time_match
from engine.core.timespans import parse_time_label
from engine.core.tokens import approx_tokens, content_text
from engine.roles.scripted.lang import QUESTION_WORDS, is_question, is_zh

__all__ = ["ScriptedChatModel"]

_ANSWER_LEAD = re.compile(r"^(From what I have: |根据我掌握的信息：)+")
_CURRENT_DATE = re.compile(r"Current date: (\d{4}-\d{2}-\d{2})")
_DATE_LABEL = re.compile(r"\d{4}-\d{2}-\d{2}(?:\.\.\d{4}-\d{2}-\d{2})?|\d{4}-\d{2}(?!-)|(?<![\d-])\d{4}(?![\d-])")


def _stem(token: str) -> str:
    """A crude English stem (lives/lived/living -> liv) so the stand-in matches inflections."""
    if has_cjk(token) or len(token) <= 3:
        return token
    for suffix in ("ing", "ed", "es", "s"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            return token[: -len(suffix)].rstrip("e")
    return token.rstrip("e")


@lru_cache(maxsize=8192)
def _line_stems(line: str) -> frozenset[str]:
    """The stems of a shown line's content tokens (cached: a session's prompts show the same lines turn after turn)."""
    return frozenset(_stem(t) for t in content_tokens(line))


@lru_cache(maxsize=8192)
def _stated_sentences(text: str) -> tuple[str, ...]:
    """An earlier message's sentences that are not questions, without an earlier answer's lead-in
    (cached: a window shows the same messages turn after turn)."""
    return tuple(x for x in split_sentences(_ANSWER_LEAD.sub("", text)) if not is_question(x))


def _time_constraint(question: str, system: str):
    """The question's time constraint, resolved against the current date the prompt shows."""
    m = _CURRENT_DATE.search(system)
    if not m:
        return None
    now = datetime.fromisoformat(m.group(1)).replace(hour=12, tzinfo=UTC)
    try:
        return parse_time_constraint(question, now=now)
    except Exception:  # noqa: BLE001 - a stand-in never fails on odd text
        return None


def _time_words(question: str) -> set[str]:
    """The question's words that only say when (dropped from the overlap, the time is matched instead)."""
    words: set[str] = set()
    for mention in resolve_times(question, anchor=datetime(2000, 1, 1, tzinfo=UTC)):
        words.update(_stem(t) for t in content_tokens(mention.surface))
    return words | {"weekend", "week", "month", "year", "yesterday", "today"}


def _line_in_time(line: str, when) -> bool:
    """A date label on the line falls inside the question's time constraint."""
    for label in _DATE_LABEL.findall(line):
        try:
            span = parse_time_label(label, UTC)
        except Exception:  # noqa: BLE001
            continue
        if time_match(when, span) >= 0.99:
            return True
    return False


def _shown_data_lines(system: str) -> list[str]:
    """The lines of a system prompt that carry facts: inside the engine's data fences when the
    prompt has them (the instructions around them are not facts), else every line but the clock's
    ("Current date: ..." is the prompt's date, not something the user said)."""
    from engine.memory.injection import (
        CLOCK_PREFIX,
        PROFILE_CLOSE,
        PROFILE_OPEN,
        RECORDS_CLOSE,
        RECORDS_OPEN,
    )

    if RECORDS_OPEN not in system and PROFILE_OPEN not in system:
        return [line for line in system.splitlines() if not line.strip().startswith(CLOCK_PREFIX)]
    out: list[str] = []
    inside = False
    for line in system.splitlines():
        if line.strip() in (RECORDS_OPEN, PROFILE_OPEN):
            inside = True
        elif line.strip() in (RECORDS_CLOSE, PROFILE_CLOSE):
            inside = False
        elif inside:
            out.append(line)
    return out


class ScriptedChatModel(BaseChatModel):
    """A deterministic chat model that answers only from what it was shown.

    Candidate lines are the system message lines and the earlier messages; a question gets the
    best-overlapping line(s), a statement a short acknowledgement. It never states anything it was
    not shown, which makes memory injection measurable offline.
    """

    bound_tools: list[dict[str, Any]] = Field(default_factory=list)
    max_lines: int = 2

    @property
    def _llm_type(self) -> str:
        return "memlab-scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": "memlab-scripted", "tools": [t["function"]["name"] for t in self.bound_tools]}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        """A copy that knows these tools (LangChain tools, functions or OpenAI-style dicts)."""
        return self.model_copy(update={"bound_tools": [convert_to_openai_tool(t) for t in tools]})

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager=None, **kwargs: Any):
        reply, tool_calls = self._reply(messages)
        input_tokens = sum(approx_tokens(content_text(m.content)) for m in messages)
        output_tokens = approx_tokens(reply)
        message = AIMessage(
            content=reply,
            tool_calls=tool_calls,
            usage_metadata={
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            },
            response_metadata={"model_name": "memlab-scripted"},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _reply(self, messages: list[BaseMessage]) -> tuple[str, list[dict[str, Any]]]:
        last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None)
        if messages and isinstance(messages[-1], ToolMessage):
            tool_msg = messages[-1]
            name = tool_msg.name or "the tool"
            return f"{name} returned: {content_text(tool_msg.content)}", []
        if last_human is None:
            return "Hello. What would you like to talk about?", []
        question = content_text(messages[last_human].content)
        zh = is_zh(question)
        if tool_call := self._tool_call(question, last_human):
            return "", [tool_call]
        if not is_question(question):
            return ("好的，我记下了。" if zh else "Noted."), []
        lines: list[str] = []
        for i, m in enumerate(messages):
            if i == last_human:
                continue
            text = content_text(m.content)
            if isinstance(m, SystemMessage):
                lines.extend(line.strip(" -*•\t") for line in _shown_data_lines(text))
            elif i < last_human:
                # an earlier question is no answer, and an earlier answer's lead-in is no fact
                lines.extend(_stated_sentences(text))
        lines = [line for line in dict.fromkeys(lines) if _line_stems(line)]
        system = "\n".join(content_text(m.content) for m in messages if isinstance(m, SystemMessage))
        when = _time_constraint(question, system)
        time_words = _time_words(question) if when is not None else set()
        asked = {_stem(t) for t in content_tokens(question) if t not in QUESTION_WORDS} - time_words
        scored = []
        needed = max(1, math.ceil(len(asked) / 2))  # a shared name alone is not an answer
        for order, line in enumerate(lines):
            hits = len(asked & _line_stems(line))
            if when is not None and _line_in_time(line, when):
                hits += 2  # the question's time, resolved against the shown current date, fits this line
            if hits >= needed:
                scored.append((-hits, order, line))
        if not scored:
            return ("我不知道，我掌握的信息里没有提到。" if zh else "I don't know; nothing I was given mentions that."), []
        scored.sort()
        best = scored[0][0]
        picked = [line for hits, _, line in scored[: self.max_lines] if hits == best]
        joined = " ".join(picked)
        return (f"根据我掌握的信息：{joined}" if zh else f"From what I have: {joined}"), []

    def _tool_call(self, text: str, index: int) -> dict[str, Any] | None:
        for spec in self.bound_tools:
            fn = spec["function"]
            name = fn["name"]
            if not re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text):
                continue
            props = fn.get("parameters", {}).get("properties", {}) or {}
            arg_name = next((k for k, v in props.items() if v.get("type", "string") == "string"), None)
            arg_name = arg_name or next(iter(props), "query")
            rest = text.split(name, 1)[1]
            m = re.search(r"\b(?:for|in|about|on|with|of)\s+(?P<v>.+)", rest) or re.search(r"(?P<v>\S.*)", rest)
            value = (m.group("v") if m else text).strip(" ?？.!。,:：\"'")
            return {"name": name, "args": {arg_name: value or text}, "id": f"call_{index}_{name}", "type": "tool_call"}
        return None


