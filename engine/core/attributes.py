"""Single-valued attributes a record states: where someone lives, their phone, email, employer, name.

A person has one current value of each (one home city, one phone number), so two records that
state different values of the same attribute of the same subject contradict each other and the
newer one replaces the older. `stated_attribute` reads the attribute, its value and whose it is
(the subject) from a record's canonical content, the self-contained third-person form the
extractor writes ("Li lives in Beijing.", "李明轩住在北京。"), in English and Chinese. A named
thing is an attribute of its own: "The detective is called Tomás." states `name:detective`,
"Caroline's dog is called Max." states `name:dog` of Caroline. A negated statement ("no longer
lives in Lisbon") states no value. It is pure, rule-based and never raises: used by the scripted
consolidator and inducer and by any rule-based contradiction check that must not depend on a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.core.text import content_tokens, has_cjk, normalize

__all__ = [
    "OCCUPATIONS",
    "CHINESE_SURNAMES",
    "ATTRIBUTE_NAMES",
    "StatedAttribute",
    "stated_attribute",
    "attribute_of",
    "same_attribute",
    "comparable_value",
    "values_agree",
]

#: English occupation nouns: "is an engineer" states an occupation, "is a good friend" does not.
OCCUPATIONS: tuple[str, ...] = (
    "engineer", "analyst", "teacher", "doctor", "nurse", "developer", "designer", "manager", "student", "lawyer",
    "writer", "artist", "counselor", "counsellor", "scientist", "programmer", "accountant", "chef", "architect",
    "consultant", "researcher", "professor", "pharmacist", "dentist", "photographer", "journalist", "editor",
    "musician", "driver", "pilot", "salesperson", "entrepreneur", "freelancer", "therapist", "officer", "worker",
    "assistant", "librarian", "mechanic", "electrician", "plumber", "farmer", "cook", "waiter", "waitress",
)  # fmt: skip

_CALLED_EN = r"\b(?:is|are)\s+(?:now\s+|still\s+|also\s+)?(?:called|named)\s+(?P<v>[^,.;!?]+)"
_CALLED_ZH = r"(?:现在|已经|也)?(?:改名叫|改名为|改叫|名叫|叫做|叫)(?P<w>(?![了过着])[\u4e00-\u9fffA-Za-z0-9·'-]{1,8})(?=[，。,.!！；;\s]|$)"

# (attribute, pattern): first match wins, so the order matters ("name is" before "is an engineer").
# Group v holds the English value, w (or x) the Chinese one, k / zk the sub-attribute
# ("favourite <k>", "<k> phone"); the text before the match is the subject.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("name", re.compile(
        r"(?:'s name (?:is now|is|changed to)|^[^']*?\bname is|名字(?:现在)?(?:是|叫|改成了?|改为))\s*(?P<v>[^,.;!?，。；！？]+)", re.I)),
    ("name", re.compile(r"\brenam(?:e|ed|ing)\s+(?P<k>[\w\s'-]+?)\s+(?:to|as)\s+(?P<v>[^,.;!?]+)", re.I)),
    ("called", re.compile(_CALLED_EN, re.I)),
    ("called", re.compile(_CALLED_ZH)),
    ("residence", re.compile(
        r"\b(?:lives? in|living in|moved to|moved back to|relocated to|resides in|is based in)\s+(?P<v>.+)"
        r"|(?:住在|搬到了?|搬去了?|搬回了?)(?P<w>.+)", re.I)),
    ("origin", re.compile(r"\b(?:is|comes) from\s+(?P<v>.+)|来自(?P<w>.+)|老家(?:是|在)(?P<x>.+)", re.I)),
    ("occupation", re.compile(
        r"\b(?:works? as|is an?)\s+(?P<v>.*?\b(?:%s)s?\b.*)|是(?:一名|一个|一位)?(?P<w>.+?(?:师|员|生|经理|医生|老师))"
        % "|".join(OCCUPATIONS), re.I)),
    ("employer", re.compile(
        r"\b(?:works? (?:at|for)|is employed (?:at|by))\s+(?P<v>[A-Z][\w&'’-]*(?:\s+[A-Z][\w&'’-]*)*)"
        r"|(?:就职于|任职于)(?P<w>[\u4e00-\u9fffA-Za-z0-9]{2,12})|在(?P<x>[\u4e00-\u9fffA-Za-z0-9]{2,12}?公司)(?:上班|工作)")),
    ("favourite", re.compile(r"\bfavou?rite\s+(?P<k>[\w\s]+?)\s+(?:is|was)\s+(?P<v>.+)|最喜欢的(?P<zk>\S+?)是(?P<w>.+)", re.I)),
    ("phone", re.compile(
        r"\b(?:(?P<k>work|home|office)\s+)?(?:phone|mobile|cell|telephone)(?: number)?\s+(?:is now|is|:|changed to)\s*(?P<v>.+)"
        r"|(?:手机号|电话)(?:码)?(?:是|：|:|改成了?|换成了?)?(?P<w>.+)", re.I)),
    ("email", re.compile(r"\bemail(?: address)?\s+(?:is now|is|:|changed to)\s*(?P<v>.+)|邮箱(?:是|：|:)?(?P<w>.+)", re.I)),
    ("address", re.compile(
        r"\b(?:(?P<k>home|work|office|billing|shipping|delivery)\s+)?address\s+(?:is now|is|:|changed to)\s*(?P<v>.+)"
        r"|地址(?:是|：|:)?(?P<w>.+)", re.I)),
    ("age", re.compile(r"\b(?:is|turned)\s+(?P<v>\d+)\s+years? old|(?P<w>\d+)岁", re.I)),
)

#: The attributes `attribute_of` knows ("favourite" comes as "favourite:<what>", a named thing as
#: "name:<thing>", a qualified phone or address as "phone:work", "address:billing").
ATTRIBUTE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(name for name, _ in _PATTERNS if name != "called"))

_TRAILING = " .。!！"
_SAID = re.compile(r"^[^:：]{1,60}?\bsaid:\s*", re.I)
_NEGATED = re.compile(r"\b(?:no longer|not|never|doesn'?t|don'?t|didn'?t|isn'?t|wasn'?t)\s+(?:\w+\s+)?$|(?:不再|没有|没|不)$", re.I)
_SUBJECT_ADVERBS = re.compile(
    r"(?:\s+(?:now|still|currently|also|just|recently|actually|finally|officially|already))+$|(?:现在|已经|目前|也|还|今年|刚刚|刚)+$",
    re.I,
)
_QUALIFIERS = re.compile(
    r"(?:\s+(?:new|old|current|updated|latest|previous|primary|main|personal))+$|(?:新的|新|现在的|旧的|以前的)$", re.I)
_ARTICLE = re.compile(r"^(?:the|a|an|our|this|that)\s+", re.I)
#: Sentence adverbials before a subject ("These days the user's favourite …", "Honestly, Li …").
_LEADING_ADVERBIALS = re.compile(
    r"^(?:(?:these days|nowadays|lately|recently|currently|now|at the moment|right now|from now on|honestly|"
    r"actually|well|so|anyway|by the way|in fact|since then|these weeks)\s*,?\s+)+|^(?:现在|最近|如今|其实|目前)，?",
    re.I)
_NOT_A_THING_ZH = frozenset({"用户", "我", "他", "她", "它"})


@dataclass(frozen=True, kw_only=True, slots=True)
class StatedAttribute:
    """An attribute a text states: its name, its value as written, that value for comparison, and
    whose attribute it is."""

    name: str  # e.g. "residence", "phone", "favourite:food", "name:detective"
    raw: str  # the value as the text writes it, trailing punctuation removed ("Beijing Chaoyang")
    value: str  # comparable_value(raw) ("beijing chaoyang")
    subject: str = ""  # whose: normalised ("li", "the user", "the user's sister"); "" for a thing named alone


def stated_attribute(content: str) -> StatedAttribute | None:
    """The single-valued attribute `content` states, or None (also for an empty or negated value)."""
    if not isinstance(content, str) or not content:
        return None
    text = _SAID.sub("", content.strip(), count=1)
    for key, pattern in _PATTERNS:
        m = pattern.search(text)
        if m is None:
            continue
        before = text[: m.start()]
        if _NEGATED.search(before):
            return None  # "no longer lives in Lisbon" says where the subject does not live
        groups = m.groupdict()
        raw = (groups.get("v") or groups.get("w") or groups.get("x") or "").strip().strip(_TRAILING).strip()
        value = comparable_value(raw)
        if not value:
            return None
        sub = groups.get("k") or groups.get("zk")
        found = _named(key, before, sub, raw, value)
        if found is not None:
            return found
    return None


def _named(key: str, before: str, sub: str | None, raw: str, value: str) -> StatedAttribute | None:
    """The attribute `key` with its subject and sub-attribute worked out from the text before it."""
    subject = _subject(before)
    if sub:  # "favourite coffee now is …": the sub-attribute without its adverbs
        sub = _SUBJECT_ADVERBS.sub("", sub.strip()).strip() or sub
    if key == "name" and sub:  # "renamed the detective to Inês"
        return StatedAttribute(name=f"name:{_thing(sub)}", raw=raw, value=value, subject="")
    if key in ("name", "called"):
        owner, thing = _possessed(subject)
        if key == "called" and not thing and (not owner or has_cjk(owner)):
            return None  # "用户叫车去机场" orders a car: a person's own name is "名字是", not 叫
        if thing:
            return StatedAttribute(name=f"name:{thing}", raw=raw, value=value, subject=owner)
        return StatedAttribute(name="name", raw=raw, value=value, subject=owner)
    name = f"{key}:{normalize(sub).strip()}" if sub else key
    return StatedAttribute(name=name, raw=raw, value=value, subject=subject)


def _subject(before: str) -> str:
    """The subject phrase before an attribute: normalised, trailing adverbs and possessive dropped."""
    clause = re.split(r"[:;：；,，]\s*", before.strip(" ,，"))[-1]  # "New idea: the detective is now called …"
    text = _QUALIFIERS.sub("", _LEADING_ADVERBIALS.sub("", clause))
    text = _SUBJECT_ADVERBS.sub("", text.strip())
    text = re.sub(r"(?:'s|’s|的)$", "", text.strip())
    return re.sub(r"\s+", " ", normalize(text)).strip()


def _thing(phrase: str) -> str:
    return _ARTICLE.sub("", normalize(phrase).strip()).strip()


def _possessed(subject: str) -> tuple[str, str]:
    """(owner, thing) of a subject: "caroline's dog" → ("caroline", "dog"), "the detective" →
    ("", "detective"), "用户的猫" → ("用户", "猫"); a person ("caroline", "the user") → ("caroline", "")."""
    for sep in ("'s ", "’s ", "的"):
        if sep in subject:
            owner, _, thing = subject.rpartition(sep)
            return owner.strip(), _thing(thing)
    if _ARTICLE.match(subject) and subject != "the user":
        return "", _thing(subject)
    if re.fullmatch(r"[\u4e00-\u9fff]{1,4}", subject) and subject not in _NOT_A_THING_ZH and not _looks_named(subject):
        return "", subject  # "侦探叫托马斯": a thing named alone
    return subject, ""


def _looks_named(subject: str) -> bool:
    """A Chinese subject that is a person's name rather than a common noun (a rough surname test)."""
    return len(subject) in (2, 3) and subject[0] in CHINESE_SURNAMES


#: Common single-character Chinese surnames: a short subject starting with one is a person, not a thing.
CHINESE_SURNAMES = frozenset("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤")


def attribute_of(content: str) -> tuple[str, str] | None:
    """(attribute, comparable value) when `content` states a single-valued attribute, else None.

    >>> attribute_of("Li lives in Beijing Chaoyang.")
    ('residence', 'beijing chaoyang')
    >>> attribute_of("李明轩的手机号是13800001111。")
    ('phone', '13800001111')
    >>> attribute_of("The detective is now called Inês.")
    ('name:detective', 'inês')
    """
    found = stated_attribute(content)
    return (found.name, found.value) if found is not None else None


def same_attribute(a: StatedAttribute | None, b: StatedAttribute | None) -> bool:
    """Both state the same attribute of the same subject (Ana's city is not the user's city)."""
    return a is not None and b is not None and a.name == b.name and a.subject == b.subject


def comparable_value(value: str) -> str:
    """A value as attributes compare it: NFKC, lower case, content words only, space-separated.

    "Beijing, Chaoyang." and "beijing chaoyang" compare equal; a value of stopwords only keeps
    its normalised text so it is never empty unless the input was.
    """
    text = normalize(value or "").strip(_TRAILING).strip()
    return " ".join(content_tokens(text)) or text


def values_agree(a: str, b: str) -> bool:
    """True when two comparable values name the same thing, or one refines the other
    ("beijing" / "beijing chaoyang"); False means the value changed."""
    ta, tb = set(comparable_value(a).split()), set(comparable_value(b).split())
    return ta <= tb or tb <= ta
