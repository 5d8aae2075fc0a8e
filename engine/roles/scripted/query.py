"""`ScriptedQueryParser`: a question → keywords, target types, time constraint, location, answer dimension."""

from __future__ import annotations

import re

from engine.core.text import content_tokens, has_cjk, normalize
from engine.core.timequery import parse_time_constraint
from engine.roles.scripted.lang import NOT_PLACES, QUESTION_WORDS
from engine.roles.types import ParsedQuery, QueryInput

__all__ = ["ScriptedQueryParser"]

_NEEDS_ASSISTANT = re.compile(
    r"\byou\s+(?:recommended|suggested|mentioned|said|told|gave|proposed|advised|wrote|listed)\b"
    r"|\bdid\s+you\s+(?:recommend|suggest|mention|say|tell|give|propose|advise|write|list)\b"
    r"|\byou\s+(?:recommend|suggest)\b.*\b(?:last time|earlier|before|previously)\b"
    r"|\byour\s+(?:recommendation|suggestion|advice|answer|reply)\b"
    r"|你(?:上次|之前|刚才|以前|前面)(?:推荐|建议|提到|说|讲|给)|你(?:推荐|建议|提到|说|讲)过",
    re.I,
)
_DIMENSIONS = [
    ("purpose", re.compile(r"\bwhat\s+for\b|\bwhat\b.*\bfor\s*[?？]?\s*$|\bfor what purpose\b|\bpurpose\b|\bin order to\b|为了什么|目的|为啥要", re.I)),
    ("time", re.compile(r"\bwhen\b|\bwhat (?:date|day|time|year|month)\b|\bhow long ago\b|什么时候|哪天|几号|哪一天|哪年|几月|何时", re.I)),
    ("location", re.compile(r"\bwhere\b|\bwhat (?:city|country|place)\b|哪里|哪儿|在哪|什么地方|哪个城市", re.I)),
    ("reason", re.compile(r"\bwhy\b|\bwhat made\b|\bhow come\b|为什么|为何|什么原因|为啥", re.I)),
]
_EPISODIC_Q = re.compile(r"\bwhen\b|\bwhat happened\b|\bwhat did\b.*\bdo\b|什么时候|发生了什么|做了什么|哪天", re.I)
_PROFILE_Q = re.compile(
    r"\bname\b|\bjob\b|\bwork\b|\boccupation\b|\blike\b|\blikes\b|\bfavou?rite\b|\bprefer|\blive\b|\blives\b|\bage\b"
    r"|名字|叫什么|工作|职业|喜欢|住在|住哪|多大|几岁",
    re.I,
)


class ScriptedQueryParser:
    """A question → keywords, target types, time constraint, location, answer dimension."""

    def parse(self, inp: QueryInput) -> ParsedQuery:
        text = inp.text
        kws = [t for t in content_tokens(text) if t not in QUESTION_WORDS]
        kws = list(dict.fromkeys(kws))
        targets: list[str] = []
        if _EPISODIC_Q.search(text):
            targets.append("episodic")
        if _PROFILE_Q.search(text):
            targets.append("profile")
        dimension = "content"
        for name, pattern in _DIMENSIONS:
            if pattern.search(text):
                dimension = name
                break
        location = None
        if m := re.search(r"\b(?:in|at|to|from)\s+(?P<p>[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)", text):
            place = " ".join(w for w in m.group("p").split() if w not in NOT_PLACES)
            location = place or None
        elif has_cjk(text) and (m := re.search(r"在(?P<p>[\u4e00-\u9fff]{2,6}?)(?:的|时|期间|做|干|吃|玩|工作|$)", text)):
            location = m.group("p")
        anchor_tokens = [t for t in re.split(r"(\s+)", text) if normalize(t.strip(" ?？.!,")) not in QUESTION_WORDS]
        anchor = re.sub(r"\s+", " ", "".join(anchor_tokens)).strip(" ?？.!。")
        if has_cjk(anchor):
            for word in sorted((w for w in QUESTION_WORDS if has_cjk(w)), key=len, reverse=True):
                anchor = anchor.replace(word, "")
        return ParsedQuery(
            text=text,
            anchor=anchor.strip(" ?？.!。"),
            keywords=kws,
            target_types=targets,
            time=parse_time_constraint(text, now=inp.now),
            location=location,
            needs_assistant=bool(_NEEDS_ASSISTANT.search(text)),
            answer_dimension=dimension,
        )

