"""The rule-based query parser: a question → the records' dimensions, without a model call.

Keywords, target memory types, the salience asked for (a hobby question wants preference
records, a dinner question the user's safety constraints), the single-valued attribute asked for
("what do I do for a living?" asks for the occupation), a time constraint resolved against the
question's date (`engine.core.timequery`), a location, the dimension the answer needs, and
whether an earlier assistant reply is needed. English and Chinese.

`FallbackQueryParser` puts a model parser behind the rules: the model is called only when the
rules cannot resolve the question (`RuleQueryParser.unresolved`: a time expression the rules could
not turn into dates), and the reason is kept (`last_fallback`) for the event log.
"""

from __future__ import annotations

import re
from typing import Any

from engine.core.text import content_tokens, has_cjk, normalize
from engine.core.timequery import parse_time_constraint
from engine.roles.rules.lexicon import NOT_PLACES, QUESTION_WORDS
from engine.roles.types import ParsedQuery, QueryInput

__all__ = ["RuleQueryParser", "FallbackQueryParser", "asked_attributes", "asked_tags"]

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
]  # fmt: skip
_EPISODIC_Q = re.compile(r"\bwhen\b|\bwhat happened\b|\bwhat did\b.*\bdo\b|什么时候|发生了什么|做了什么|哪天", re.I)
_PROFILE_Q = re.compile(
    r"\bname\b|\bjob\b|\bwork\b|\boccupation\b|\blike\b|\blikes\b|\bfavou?rite\b|\bprefer|\blive\b|\blives\b|\bage\b"
    r"|\bhobb(?:y|ies)\b|\bfor a living\b|名字|叫什么|工作|职业|喜欢|住在|住哪|多大|几岁|爱好",
    re.I,
)
#: Question phrasings → the single-valued attribute they ask for (engine.core.attributes names).
_ASKED_ATTRIBUTES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("occupation", re.compile(r"\bfor a living\b|\b(?:my|her|his|their) (?:job|occupation|profession|line of work)\b"
                              r"|\bwhat do (?:i|you) (?:do|work as)\b|\bwork as\b|做什么工作|职业|干什么的|什么工作", re.I)),
    ("employer", re.compile(r"\bwho do (?:i|you) work for\b|\bwhich company\b|\bmy employer\b|在哪(?:家|个)公司", re.I)),
    ("residence", re.compile(r"\bwhere do (?:i|you) live\b|\bwhich city do (?:i|you) live\b|\bmy home town\b|住在哪|住哪", re.I)),
    ("name", re.compile(r"\bmy name\b|\bwhat am i called\b|\bwho am i\b|我叫什么|我的名字", re.I)),
    ("phone", re.compile(r"\bphone\b|\bmobile number\b|\bnumber to call\b|电话|手机号", re.I)),
    ("email", re.compile(r"\be-?mail\b|邮箱", re.I)),
    ("address", re.compile(r"\baddress\b|\bdeliver(?:y|ed)? to\b|\bwhere (?:will|should|do) you (?:deliver|send|ship)\b"
                           r"|\bwhere should (?:the|my) (?:parcel|package|order)\b|地址|寄到哪|送到哪", re.I)),
    ("age", re.compile(r"\bhow old\b|\bmy age\b|多大|几岁", re.I)),
)
#: Question phrasings → the salience of the records that answer them.
_ASKED_TAGS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("preference", re.compile(r"\bhobb(?:y|ies)\b|\bdo i (?:like|love|enjoy|prefer)\b|\bfavou?rite\b|\bwhat i like\b"
                              r"|\bpreferences?\b|爱好|喜欢什么|最喜欢|偏好", re.I)),
    ("safety", re.compile(r"\ballerg|\bintoleran|\bmedical\b|\bmedication|\bcan i eat\b|\bsafe (?:for me|to eat)\b"
                          r"|\bdiet\b|\brecommend\b.*\b(?:dinner|lunch|breakfast|meal|food|dish|snack|restaurant)\b"
                          r"|\bsuggest\b.*\b(?:dinner|lunch|breakfast|meal|food|dish|snack|restaurant)\b"
                          r"|过敏|忌口|能吃|推荐.*(?:菜|餐|饭)", re.I)),
)
#: A question whose answer gathers several items, perhaps said in different conversations.
_AGGREGATE = re.compile(
    r"\bhow many\b|\bhow often\b|\bwhat (?:kinds?|sorts?|types?) of\b|\b(?:list|name)\s+(?:all|the|some|every)\b"
    r"|\b(?:what|which)\s+(?:[\w'+-]+\s+){0,2}\w{3,}s\s+(?:has|have|had|did|does|do)\b"
    r"|\b(?:where|what)\s+(?:has|have)\b|\bever\b|\ball (?:the )?(?:times|places|things)\b"
    r"|哪些|几次|多少次|都(?:有|去过|做过)",
    re.I)
#: A time expression that constrains dates (not a time of day, not "last chapter" or "before bed"):
#: when the rules find one and resolve no time constraint from it, the model parser has a look.
_WHEN = (r"(?:days?|nights?|weeks?|weekends?|months?|years?|decades?|spring|summer|autumn|fall|winter|"
         r"mondays?|tuesdays?|wednesdays?|thursdays?|fridays?|saturdays?|sundays?|january|february|march|april|may|"
         r"june|july|august|september|october|november|december|christmas|easter|new year|holidays?|vacation)")
_COUNT = r"(?:\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|twelve|a few|few|several|(?:a )?couple(?: of)?)"
_DATE_NUMBER = r"\d+(?![\d:]|\s*(?:[ap]\.?m\b|o'?clock|h\b|hours?|minutes?))"
_TIME_EXPRESSION = re.compile(
    rf"\b{_COUNT}\s+{_WHEN}\s+ago\b"
    rf"|\b(?:last|next|previous|past|this past|coming|early|late)\s+{_WHEN}\b"
    r"|\b(?:day|week|weekend|month|year)\s+(?:before|after)\s+(?:last|next|yesterday|tomorrow)\b"
    rf"|\b(?:since|before|after|until|till|between|during|around|from)\s+(?:the\s+|last\s+|next\s+|this\s+|early\s+|late\s+)?"
    rf"(?:{_DATE_NUMBER}|{_WHEN}\b|yesterday\b|tomorrow\b|today\b)"
    r"|\b(?:yesterday|tomorrow|tonight|recently|lately)\b"
    r"|上个?月|下个?月|上周|下周|上个?星期|下个?星期|去年|明年|前年|昨天|明天|前天|后天|最近"
    r"|[0-9一二三四五六七八九十几两]+(?:天|周|个?星期|个月|年)(?:前|后|以前|以后)"
    r"|(?:今年|去年|明年)?(?:春天|夏天|秋天|冬天)|(?:春节|国庆|中秋)(?:前|后|期间)?",
    re.I)


def asked_attributes(question: str) -> list[str]:
    """The single-valued attributes a question asks for ("what do I do for a living?" → occupation)."""
    return [name for name, pattern in _ASKED_ATTRIBUTES if pattern.search(question)]


def asked_tags(question: str) -> list[str]:
    """The salience of the records that answer the question (a hobby → preference; a meal
    recommendation → the user's safety constraints)."""
    return [tag for tag, pattern in _ASKED_TAGS if pattern.search(question)]


class RuleQueryParser:
    """A question → keywords, target types and tags, asked attributes, time, location, answer dimension."""

    #: Rules are not a model: the engine's ledger records no call for them.
    model_calls = False

    def parse(self, inp: QueryInput) -> ParsedQuery:
        text = inp.text
        kws = list(dict.fromkeys(t for t in content_tokens(text) if t not in QUESTION_WORDS))
        targets: list[str] = []
        if _EPISODIC_Q.search(text):
            targets.append("episodic")
        if _PROFILE_Q.search(text):
            targets.append("profile")
        dimension = next((name for name, pattern in _DIMENSIONS if pattern.search(text)), "content")
        return ParsedQuery(
            text=text,
            anchor=_anchor(text),
            keywords=kws,
            target_types=targets,
            target_tags=asked_tags(text),
            target_attributes=asked_attributes(text),
            time=parse_time_constraint(text, now=inp.now),
            location=_location(text),
            needs_assistant=bool(_NEEDS_ASSISTANT.search(text)),
            answer_dimension=dimension,
            aggregate=bool(_AGGREGATE.search(text)),
        )

    def unresolved(self, inp: QueryInput, parsed: ParsedQuery) -> str | None:
        """Why the rules' parse may be incomplete (None when it is complete): a time expression
        that constrains dates ("last summer", "two weekends ago") with no time constraint resolved
        from it. Times of day ("before 8 am"), habits ("every morning") and words that only look
        like time ("the last chapter", "before bed", "a winter jacket") are not unresolved."""
        if parsed.time is None and (m := _TIME_EXPRESSION.search(inp.text)):
            return f"time expression {m.group(0)!r} not resolved to dates"
        return None


class FallbackQueryParser:
    """The rules first; the model parser only when the rules cannot resolve the question."""

    #: The model parser records its own calls (only the ones actually made).
    model_calls = False

    def __init__(self, rules: RuleQueryParser, model: Any):
        self.rules, self.model = rules, model
        self.last_fallback: str | None = None

    @property
    def ledger(self) -> Any:  # the model parser records its own calls into the engine's ledger
        return getattr(self.model, "ledger", None)

    @ledger.setter
    def ledger(self, value: Any) -> None:
        if hasattr(self.model, "ledger"):
            self.model.ledger = value

    def parse(self, inp: QueryInput) -> ParsedQuery:
        parsed = self.rules.parse(inp)
        self.last_fallback = self.rules.unresolved(inp, parsed)
        if self.last_fallback is None:
            return parsed
        return ParsedQuery.model_validate(self.model.parse(inp), from_attributes=True)


def _location(text: str) -> str | None:
    if m := re.search(r"\b(?:in|at|to|from)\s+(?P<p>[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)", text):
        place = " ".join(w for w in m.group("p").split() if w not in NOT_PLACES)
        return place or None
    if has_cjk(text) and (m := re.search(r"在(?P<p>[\u4e00-\u9fff]{2,6}?)(?:的|时|期间|做|干|吃|玩|工作|$)", text)):
        return m.group("p")
    return None


def _anchor(text: str) -> str:
    tokens = [t for t in re.split(r"(\s+)", text) if normalize(t.strip(" ?？.!,")) not in QUESTION_WORDS]
    anchor = re.sub(r"\s+", " ", "".join(tokens)).strip(" ?？.!。")
    if has_cjk(anchor):
        for word in sorted((w for w in QUESTION_WORDS if has_cjk(w)), key=len, reverse=True):
            anchor = anchor.replace(word, "")
    return anchor.strip(" ?？.!。")
