"""What the user asks the assistant to do: requests phrased as questions, imperatives, and whether
an instruction lasts or applies once.

"Could you add two bags of oat flour to my next delivery?" is an order, not a question: a request
whose verb is an action (add, cancel, send...) on something of the user's or something specific
("my Thursday booking", "the invoice"). "Can you ship to Canada?" (a capability) and "Could you
tell me your hours?" (information) stay questions. "Remember that I'm vegetarian" is the
statement it asks to remember.

An instruction is one-off (`lasting=False`) when it says so ("only this time", "just this once",
"for this order only", 只这一次, 这次先) or is scoped to one instance ("ship this one to my
office"); "always", "from now on", 以后, 每次 make it durable whatever else it says.
"""

from __future__ import annotations

import re

from engine.core.text import content_tokens

__all__ = ["ACTION_VERBS", "remembered_statement", "request_of", "instruction_of", "is_one_off", "is_durable"]

#: Verbs of things done for the user (a request with one of these is an order, not a question).
ACTION_VERBS = frozenset(
    """add cancel send ship deliver book change move put use keep call email text remind make set hold leave bring
    order reserve schedule switch update remove drop charge bill forward include pack wrap swap replace return refund
    upgrade downgrade renew extend postpone reschedule arrange pick get give write mark skip stop start delete
    transfer pause resume sign register enrol enroll apply fix repair install collect process approve submit print
    reorder rebook resend redeliver split combine double reduce increase lower raise upgrade credit waive block
    unblock close open activate deactivate subscribe unsubscribe confirm find plan prepare draft organise organize
    translate save archive share invite notify contact ring phone""".split()
)
_INFO_VERBS = frozenset(
    """tell explain describe say show clarify check repeat answer define list hear see understand believe imagine guess
    know think recommend suggest advise let look compare estimate calculate""".split()
)
_OPENER = r"^(?:(?:hi|hey|hello|so|also|and|oh|um|ok|okay|please|sorry|excuse me)[,!\s]+)*"
_REQUEST_EN = re.compile(
    _OPENER + r"(?:(?:could|can|would|will)\s+(?:you|u|ya)|(?:i was|i'm|i am) wondering if you could)\s+"
    r"(?:(?:please|kindly|possibly|just|also|maybe|perhaps)\s+)*(?P<action>(?P<verb>[a-z]+)\b.*?)"
    r"(?:,?\s*(?:please|pls|thanks|thank you))?\s*[?.!]*$",
    re.I,
)
_MIND_EN = re.compile(_OPENER + r"would you mind\s+(?P<ving>[a-z]+ing)\b(?P<rest>.*?)\s*[?.!]*$", re.I)
_PLEASE_EN = re.compile(_OPENER + r"(?:please|pls|kindly)\s+(?P<action>(?P<verb>[a-z]+)\b.*?)\s*[?.!]*$", re.I)
_IMPERATIVE_EN = re.compile(
    r"^(?:(?:please|pls|kindly|just)\s+)*(?P<neg>(?:don'?t|do not|never)\s+)?(?P<adv>(?:always|also|only|just)\s+)?"
    r"(?P<action>(?P<verb>[a-z]+)\b.*)$", re.I)
_IMPERATIVE_ZH = re.compile(
    r"^(?:(?:请|麻烦|帮我|给我)|(?:这次|这一次|这回|本次|以后|今后|每次|下次)?(?:都|先|就|还是)?"
    r"(?=(?:寄到|送到|发到|放在|放到|改到|改成|换成|寄|送|发|放(?![假心弃松学]))(?![了过])))(?P<action>.+)$")
_SPECIFIC = re.compile(r"\b(?:me|my|mine|us|our|ours|myself|I|the|this|that|these|those)\b|\d|@", re.I)
_REMEMBER = re.compile(
    _OPENER + r"(?:(?:could|can|would|will)\s+you\s+(?:please\s+)?)?(?:please\s+)?(?:remember|note|keep in mind|"
    r"make a note|bear in mind|don't forget)(?:\s+that|\s*[:,]|(?=\s+(?:I|I'm|my|we|our)\b))\s+(?P<s>.+?)\s*[?]?$"
    r"|^(?:请|麻烦)?(?:你|您)?(?:记住|记一下|记好|别忘了)(?:一下)?[:：,，]?(?P<zs>.+?)[？?]?$",
    re.I,
)
_LEADING_SCOPE = re.compile(
    r"^(?:(?:just|only)\s+)?(?:this (?:time|once)|for (?:now|today|this order)|from now on|going forward|in (?:the )?future|"
    r"for future orders|as usual|next time)\s*,?\s+", re.I)
_REQUEST_ZH = re.compile(
    r"^(?:请问)?(?:你|您|你们)?(?:能不能|能否|可不可以|可以|能|麻烦(?:你|您)?|请(?:你|您)?|帮忙)?"
    r"(?P<action>.+?)(?:好吗|可以吗|行吗|吗|吧|呢)?[？?。！!~～]*$"
)
_ZH_FOR_ME = re.compile(r"帮(?:我|忙)|给我|替我|把我|我的|把")
_ZH_ACTION = re.compile(
    r"加|添|取消|改|换|寄|送|发|订|预约|退|安排|延期|推迟|提前|修改|删除|放|留|买|下单|备注|保留|转|升级|续|打包|约"
)
_ZH_INFO = re.compile(r"告诉|介绍|解释|讲讲|说说|推荐|建议|查一下|查查|问一下|看看")
_ZH_OPENERS = re.compile(r"^(?:请问)?(?:你|您|你们)?(?:能不能|能否|可不可以|可以|能|麻烦|请|帮)")

_ONE_OFF = re.compile(
    r"\b(?:only this (?:time|once)|just this (?:once|time)|this (?:time|once) only|just (?:the )?once|"
    r"for this (?:order|delivery|shipment|one|booking|trip|time|parcel|package) only|"
    r"(?:just|only) for (?:this|today'?s?|tonight'?s?) (?:order|delivery|shipment|one|booking|trip|time|parcel|package)|"
    r"(?:just|only) (?:for )?(?:today|tonight)|one[- ]off|one time only)\b"
    r"|只这一次|就这一次|仅此一次|仅限(?:这|本)次|下不为例|这次先|这回先|本次先|只限这次|就这次|只这次|这一次先",
    re.I,
)
_INSTANCE = re.compile(
    r"\b(?:this (?:time|once|one|order|delivery|shipment|parcel|package|booking|reservation|invoice)|"
    r"next (?:delivery|order|shipment|booking|appointment|visit|box|parcel)|today'?s (?:order|delivery))\b"
    r"|这次|这一次|本次|这回|这单|这个订单|这一单|下一单|今天的订单",
    re.I,
)
_DURABLE = re.compile(
    r"\b(?:always|every time|each time|from now on|going forward|in (?:the )?future|any ?more|whenever|by default|"
    r"permanently|for good|as usual|every (?:order|delivery|week|month|day)|never)\b|以后|今后|每次|总是|一直|从现在起|从今以后|"
    r"默认|永远|照旧",
    re.I,
)


def remembered_statement(sentence: str) -> str | None:
    """The statement a "remember that ..." / "记住..." sentence asks to keep, else None."""
    m = _REMEMBER.match(sentence.strip())
    if not m:
        return None
    return (m.group("s") or m.group("zs") or "").strip() or None


def request_of(sentence: str) -> str | None:
    """The action a request asks for, in the user's words ("add two bags of oat flour to my next
    delivery"), when `sentence` is a request rather than a question for information; else None."""
    text = sentence.strip()
    if re.search(r"[\u4e00-\u9fff]", text):
        return _request_zh(text)
    if m := _MIND_EN.match(text):
        action = f"{_base_verb(m.group('ving'))}{m.group('rest')}"
    elif m := (_REQUEST_EN.match(text) or _PLEASE_EN.match(text)):
        action = m.group("action")
    else:
        return None
    verb = action.split()[0].lower() if action.split() else ""
    rest = action[len(verb):]
    if verb not in ACTION_VERBS or verb in _INFO_VERBS or re.match(r"\s*(?:me\s+)?(?:what|when|where|how|why|who|if|whether)\b", rest, re.I):
        return None
    substance = [t for t in content_tokens(rest) if t not in ("please", "thanks")]
    if not substance or not _SPECIFIC.search(rest):
        return None  # "Can you ship to Canada?" asks what is possible; "Can you do that?" says nothing
    return action.strip().rstrip("?.! ,")


def _request_zh(text: str) -> str | None:
    if not (_ZH_OPENERS.match(text) or text.startswith(("帮我", "给我"))) or _ZH_INFO.search(text):
        return None
    m = _REQUEST_ZH.match(text)
    if not m or not _ZH_FOR_ME.search(text) or not _ZH_ACTION.search(m.group("action")):
        return None
    action = re.sub(r"^(?:帮(?:我|忙)|替我)", "", m.group("action")).strip("，, ")
    return action or None


def instruction_of(clause: str) -> str | None:
    """The action an imperative clause gives ("ship this one to my office"), with "not " first for
    "don't ..."; else None."""
    text = clause.strip()
    if re.search(r"[\u4e00-\u9fff]", text):
        zh = _IMPERATIVE_ZH.match(text)
        return text.rstrip("。！!") if zh and _ZH_ACTION.search(text) else None
    scope = _LEADING_SCOPE.match(text)  # "Just this once, send it ..." → "send it ..., just this once"
    if scope:
        text = text[scope.end():]
    m = _IMPERATIVE_EN.match(text)
    if not m or m.group("verb").lower() not in ACTION_VERBS:
        return None
    if re.match(r"\s*(?:\S+\s+)?(?:is|are|was|were|has|had|will|would|can|should)\b", m.group("action")[len(m.group("verb")):]):
        return None  # "Order number is 123", "Book club was fun": a noun, not a verb
    action = m.group("action").strip().rstrip(".! ")
    action = action[:1].lower() + action[1:]
    if m.group("adv"):
        action = f"{m.group('adv').strip().lower()} {action}"
    if scope:
        action = f"{action}, {scope.group(0).strip(' ,').lower()}"
    return f"never {action}" if m.group("neg") and m.group("neg").lower().startswith("never") else \
        (f"not {action}" if m.group("neg") else action)


def is_one_off(text: str, *, instruction: bool) -> bool:
    """An instruction or request that applies once: said so, or scoped to one instance (only
    counted for an instruction); never when it also says always / from now on / 以后."""
    if _DURABLE.search(text):
        return False
    return bool(_ONE_OFF.search(text)) or (instruction and bool(_INSTANCE.search(text)))


def is_durable(text: str) -> bool:
    """An instruction meant to last: always, every time, from now on, never, as usual, 以后, 每次."""
    return bool(_DURABLE.search(text))


def _base_verb(ving: str) -> str:
    """The base form of an -ing verb ("sending" → "send", "shipping" → "ship", "moving" → "move")."""
    stem = ving[:-3].lower()
    doubled = len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls"  # shipping → ship
    if doubled or (stem.endswith("ll") and stem[:-1] in ACTION_VERBS):  # cancelling → cancel
        stem = stem[:-1]
    if stem in ACTION_VERBS:
        return stem
    if stem + "e" in ACTION_VERBS or re.search(r"[^aeiou][aeiou][^aeiouwxy]$", stem) and len(stem) <= 4:
        return stem + "e"
    return stem
