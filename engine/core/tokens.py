"""Token counting without a tokenizer download: a calibrated approximation, CJK aware.

`tiktoken` cannot fetch its encodings here, so the default counter approximates: about one token
per 4 characters of Latin text (words and punctuation), and about one token per Chinese character
(BPE vocabularies split CJK finely). List-typed message content (LangChain content blocks) is
counted by the text it holds, not by the number of elements (reference defect 11). Provider usage
fields, when a real model reports them, are recorded by the ledger instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["TokenCounter", "ApproxTokenCounter", "content_text"]

_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


@runtime_checkable
class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...

    def count_messages(self, messages: Iterable[Any]) -> int: ...


def content_text(content: Any) -> str:
    """The text of a message content: a string, or LangChain content blocks (list of str/dicts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        if content.get("type") in (None, "text") and isinstance(content.get("text"), str):
            return content["text"]
        return ""
    if isinstance(content, (list, tuple)):
        return "\n".join(t for t in (content_text(c) for c in content) if t)
    return str(content)


class ApproxTokenCounter:
    """chars/4 for Latin text, 1 per CJK character, +4 per message for role framing."""

    per_message: int = 4

    def count(self, text: str) -> int:
        if not text:
            return 0
        cjk = len(_CJK.findall(text))
        other = len(text) - cjk
        return cjk + math.ceil(other / 4)

    def count_messages(self, messages: Iterable[Any]) -> int:
        total = 0
        for m in messages:
            if isinstance(m, Mapping):
                content = m.get("content")
            else:
                content = getattr(m, "content", m)
            total += self.per_message + self.count(content_text(content))
        return total
