"""Single-valued attributes a record states: where someone lives, their phone, email, employer, name.

A person has one current value of each (one home city, one phone number), so two records that
state different values of the same attribute contradict each other and the newer one replaces the
older. `attribute_of` reads the attribute from a record's canonical content, the self-contained
third-person form the extractor writes ("Li lives in Beijing.", "李明轩住在北京。"), in English and
Chinese. It is pure, rule-based and never raises: used by the scripted consolidator and inducer
and by any rule-based contradiction check that must not depend on a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.core.text import content_tokens, normalize

__all__ = [
    "OCCUPATIONS",
    "ATTRIBUTE_NAMES",
    "StatedAttribute",
    "stated_attribute",
    "attribute_of",
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

# (attribute, pattern): first match wins, so the order matters ("name is" before "is an engineer").
# Group v holds the English value, w the Chinese one, k / zk the sub-attribute ("favourite <k>").
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("name", re.compile(r"(?:'s name is|^[^']*?\bname is|名字是|名字叫)\s*(?P<v>.+)", re.I)),
    ("residence", re.compile(
        r"\b(?:lives? in|living in|moved to|relocated to|is from|resides in)\s+(?P<v>.+)|(?:住在|搬到|搬去|来自)(?P<w>.+)",
        re.I)),
    ("occupation", re.compile(
        r"\b(?:works? as|is an?)\s+(?P<v>.*?\b(?:%s)s?\b.*)|是(?:一名|一个|一位)?(?P<w>.+?(?:师|员|生|经理|医生|老师))"
        % "|".join(OCCUPATIONS), re.I)),
    ("employer", re.compile(
        r"\b(?:works? (?:at|for)|is employed (?:at|by))\s+(?P<v>[A-Z][\w&'’-]*(?:\s+[A-Z][\w&'’-]*)*)"
        r"|(?:就职于|任职于)(?P<w>[\u4e00-\u9fffA-Za-z0-9]{2,12})|在(?P<x>[\u4e00-\u9fffA-Za-z0-9]{2,12}?公司)(?:上班|工作)")),
    ("favourite", re.compile(r"\bfavou?rite\s+(?P<k>[\w\s]+?)\s+(?:is|was)\s+(?P<v>.+)|最喜欢的(?P<zk>\S+?)是(?P<w>.+)", re.I)),
    ("phone", re.compile(
        r"\b(?:phone|mobile|cell)(?: number)?\s+(?:is|:)\s*(?P<v>.+)|(?:手机号|电话)(?:码)?(?:是|：|:)?(?P<w>.+)", re.I)),
    ("email", re.compile(r"\bemail(?: address)?\s+(?:is|:)\s*(?P<v>.+)|邮箱(?:是|：|:)?(?P<w>.+)", re.I)),
    ("address", re.compile(r"\baddress\s+(?:is|:)\s*(?P<v>.+)|地址(?:是|：|:)?(?P<w>.+)", re.I)),
    ("age", re.compile(r"\b(?:is|turned)\s+(?P<v>\d+)\s+years? old|(?P<w>\d+)岁", re.I)),
)

#: The attributes `attribute_of` knows ("favourite" comes as "favourite:<what>").
ATTRIBUTE_NAMES: tuple[str, ...] = tuple(name for name, _ in _PATTERNS)

_TRAILING = " .。!！"


@dataclass(frozen=True, kw_only=True, slots=True)
class StatedAttribute:
    """An attribute a text states: its name, its value as written, and that value for comparison."""

    name: str  # e.g. "residence", "phone", "favourite:food"
    raw: str  # the value as the text writes it, trailing punctuation removed ("Beijing Chaoyang")
    value: str  # comparable_value(raw) ("beijing chaoyang")


def stated_attribute(content: str) -> StatedAttribute | None:
    """The single-valued attribute `content` states, or None (also for an empty value)."""
    if not isinstance(content, str) or not content:
        return None
    for key, pattern in _PATTERNS:
        m = pattern.search(content)
        if m is None:
            continue
        groups = m.groupdict()
        raw = (groups.get("v") or groups.get("w") or groups.get("x") or "").strip().strip(_TRAILING).strip()
        sub = groups.get("k") or groups.get("zk")
        name = f"{key}:{normalize(sub).strip()}" if sub else key
        value = comparable_value(raw)
        return StatedAttribute(name=name, raw=raw, value=value) if value else None
    return None


def attribute_of(content: str) -> tuple[str, str] | None:
    """(attribute, comparable value) when `content` states a single-valued attribute, else None.

    >>> attribute_of("Li lives in Beijing Chaoyang.")
    ('residence', 'beijing chaoyang')
    >>> attribute_of("李明轩的手机号是13800001111。")
    ('phone', '13800001111')
    """
    found = stated_attribute(content)
    return (found.name, found.value) if found is not None else None


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
