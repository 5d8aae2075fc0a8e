"""Third persons in a conversation: who was last named, and what he, she, they, 他 and 她 refer to.

`Referents` reads a window (context, then new messages) in order and keeps the people it has
seen: named ones ("my sister Ana", "Ana, my colleague", "I met Tom", 我妹妹安娜) and unnamed ones
("my brother", "my parents"), with a gender where the relation gives one. A pronoun resolves to
the latest compatible mention (she: female or unknown; he: male or unknown; they: a single person
of unknown gender); when that mention has no name the pronoun stays as it is rather than jump to
an older name. The user is never a referent: first person is `lang.resolve_speaker`'s job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from engine.core.attributes import OCCUPATIONS
from engine.core.text import normalize
from engine.roles.scripted.lang import NOT_PLACES, third_person
from engine.roles.scripted.names import is_chinese_name

__all__ = ["Mention", "Referents", "RELATIONS", "ZH_RELATIONS", "PERSON_RELATIONS", "ZH_PERSON_RELATIONS"]

_FEMALE = ("sister", "mother", "mom", "mum", "wife", "daughter", "girlfriend", "aunt", "niece", "grandma",
           "grandmother", "granddaughter", "stepmother", "stepdaughter", "landlady", "fiancée", "fiancee")
_MALE = ("brother", "father", "dad", "husband", "son", "boyfriend", "uncle", "nephew", "grandpa", "grandfather",
         "grandson", "stepfather", "stepson", "landlord", "fiancé", "fiance")
_NEUTRAL = ("friend", "partner", "colleague", "coworker", "co-worker", "boss", "manager", "neighbour", "neighbor",
            "roommate", "flatmate", "housemate", "cousin", "teacher", "doctor", "therapist", "kid", "child", "baby",
            "classmate", "teammate", "client", "customer", "sibling", "spouse", "mentor", "tutor", "coach")
_PETS = ("dog", "cat", "puppy", "kitten", "horse", "rabbit", "hamster", "parrot")
_PLURAL = ("parents", "kids", "children", "friends", "neighbours", "neighbors", "colleagues", "coworkers",
           "siblings", "cousins", "grandparents", "family", "team", "in-laws", "twins")
#: English relation nouns → gender ("f", "m", "?") or "plural".
RELATIONS: dict[str, str] = {**{w: "f" for w in _FEMALE}, **{w: "m" for w in _MALE},
                             **{w: "?" for w in (*_NEUTRAL, *_PETS)},
                             **{w: "plural" for w in _PLURAL}}
#: Chinese relation nouns → gender or "plural" (longest first, so 女朋友 wins over 朋友).
ZH_RELATIONS: dict[str, str] = dict(sorted({
    **dict.fromkeys("姐姐 妹妹 妈妈 母亲 妻子 老婆 女儿 女朋友 奶奶 外婆 姥姥 阿姨 姑姑 婶婶 嫂子 闺蜜".split(), "f"),
    **dict.fromkeys("哥哥 弟弟 爸爸 父亲 丈夫 老公 儿子 男朋友 爷爷 外公 姥爷 叔叔 舅舅 伯伯".split(), "m"),
    **dict.fromkeys("朋友 同事 老板 领导 邻居 室友 同学 老师 医生 孩子 宝宝 客户 表姐 表妹 表哥 表弟".split(), "?"),
    **dict.fromkeys("父母 爸妈 家人 朋友们 同事们 邻居们 孩子们".split(), "plural"),
}.items(), key=lambda kv: -len(kv[0])))

#: Relation nouns that are people (not pets), English and Chinese.
PERSON_RELATIONS: tuple[str, ...] = tuple(w for w in RELATIONS if w not in _PETS)
ZH_PERSON_RELATIONS: tuple[str, ...] = tuple(ZH_RELATIONS)

_NAME = r"(?:(?:Dr|Mr|Mrs|Ms|Miss|Prof)\.?\s+)?[A-Z][a-z][\w'’-]*(?:\s+[A-Z][a-z][\w'’-]*)?"
_ADJ = r"(?:(?:older|younger|little|big|baby|best|new|old|eldest|oldest|youngest|twin|step|dear|good|close)\s+)*"
_REL = "|".join(sorted(RELATIONS, key=len, reverse=True))
_REL_NAMED = re.compile(
    rf"\b(?:[Mm]y|[Oo]ur)\s+{_ADJ}(?P<rel>{_REL})\b(?!['’]s)"
    rf"(?:(?:\s*,\s*|\s+)(?:(?:who\s+is\s+|is\s+|was\s+)?(?:called|named)\s+)?(?P<name>{_NAME})\b|['’]s name is (?P<name2>{_NAME}))?"
)
_NAME_REL = re.compile(rf"\b(?P<name>{_NAME})\s*(?:,\s*|\s+is\s+)(?:my|our)\s+{_ADJ}(?P<rel>{_REL})\b")
_PERSON_CONTEXT = re.compile(
    rf"\b(?:with|met|meet|meets|meeting|told|asked|texted|invited|married|marry|dating|thanked|hired|hugged)\s+(?P<name>{_NAME})\b"
    rf"|^(?P<subj>{_NAME})\s+(?:and I|said|says|told|tells|asked|asks|called|calls|texted|thinks|thought|wants|wanted|"
    rf"loves|loved|likes|liked|hates|lives|lived|works|worked|moved|has been|is an? (?:\w+\s+)?(?:{'|'.join(OCCUPATIONS)}))\b"
)
_STORY_ROLE = {"character": "?", "protagonist": "?", "narrator": "?", "detective": "?", "hero": "m", "heroine": "f",
               "villain": "?", "girl": "f", "boy": "m", "woman": "f", "man": "m", "lady": "f", "guy": "m"}
_NAMED = re.compile(
    rf"\b(?i:(?P<role>{'|'.join(_STORY_ROLE)})\s+(?:named\s+|called\s+)?|(?:named|called)\s+)(?P<name>{_NAME})\b")
_PAIR = re.compile(rf"\b{_NAME}\s+and\s+{_NAME}\b")
_ZH_REL = "|".join(ZH_RELATIONS)
_ZH_NAMED = re.compile(rf"我(?:的)?(?:大|小|亲|好)?(?P<rel>{_ZH_REL})(?P<called>叫|名叫|叫做)?(?P<rest>[\u4e00-\u9fff]{{0,4}})")
_ZH_CONTEXT = re.compile(r"(?:和|跟|告诉|遇到了?|见到了?)(?P<n>[\u4e00-\u9fff]{2,3}?)(?=[，。,.!！？?；;\s]|$|一起|说|去|吃|聊|见面)")
_PRONOUN = re.compile(r"\b(?P<p>she|he|her|him|his|hers|herself|himself|they|them|their|theirs|themselves)\b"
                      r"(?P<contr>['’](?:re|ve|ll|d|s)\b)?"
                      r"(?P<verb>\s+(?!(?:she|he|her|him|his|hers|they|them|their)\b)(?:are|were|have|do|don't|[a-z]+))?|(?<![其吉])(?P<zh>她|他)(?![们])", re.I)
_OBJECT_NEXT = frozenset(
    """a an the some to with for about at in on and or that this these those yesterday today tonight last again back
    up out off so very too because but if when how what why where whether everything something nothing anything it
    me us him them my your once twice every all""".split()
)
_NOT_PERSONS = frozenset({"God", "Christmas", "Easter", "Google", "Amazon", "Apple", "English", "Chinese", "Spanish",
                          "French", "German", "Portuguese", "Japanese", "Internet", "Tube", "Uber"})


@dataclass(frozen=True, slots=True)
class Mention:
    """A person seen in the conversation: a name (None when unnamed) and "f", "m", "?" or "plural"."""

    name: str | None
    gender: str
    neutral_relation: bool = False  # named through "friend", "partner"...: singular they can mean them


class Referents:
    """The people of a window, in the order they were mentioned, for resolving pronouns."""

    def __init__(self, user_names: Iterable[str] = ()):
        self.user_names = {normalize(n) for n in user_names if n}
        self.mentions: list[Mention] = []
        self.genders: dict[str, str] = {}  # learned from use: "Viktor ... he" makes Viktor male

    @property
    def names(self) -> set[str]:
        """Every third person named so far."""
        return {m.name for m in self.mentions if m.name}

    def observe(self, text: str) -> None:
        """Record the people `text` mentions, without rewriting it."""
        for _, mention in self._mentions(text):
            self.mentions.append(mention)

    def resolve(self, text: str) -> str:
        """`text` with each third-person pronoun replaced by the latest compatible named mention
        (mentions earlier in `text` count); the mentions are recorded as it goes."""
        mentions = self._mentions(text)
        out: list[str] = []
        last = 0
        taken: dict[str, str] = {}  # name → the gender of the pronoun it already stands for in `text`
        for m in _PRONOUN.finditer(text):
            for _, mention in [x for x in mentions if x[0] < m.start()]:
                self.mentions.append(mention)
            mentions = [x for x in mentions if x[0] >= m.start()]
            replacement = self._replacement(m, text, taken)
            if replacement is not None:
                out.append(text[last:m.start()])
                out.append(replacement)
                last = m.end()
        out.append(text[last:])
        self.mentions.extend(mention for _, mention in mentions)
        return "".join(out)

    def starts_with_person(self, text: str) -> bool:
        """`text` opens with the name of a third person seen so far ("Ana lives in Porto")."""
        return any(text.startswith(name) for name in self.names)

    # ---------------------------------------------------------------- internals

    def _mentions(self, text: str) -> list[tuple[int, Mention]]:
        found: list[tuple[int, Mention]] = []
        apposed = [m for m in _NAME_REL.finditer(text) if self._is_person_name(m.group("name"))]
        for m in apposed:
            rel = m.group("rel").lower()
            found.append((m.start(), Mention(m.group("name"), RELATIONS[rel], rel in _NEUTRAL)))
        for m in _REL_NAMED.finditer(text):
            if any(a.start() <= m.start() < a.end() for a in apposed):
                continue  # "Ana, my colleague": one person
            rel = m.group("rel").lower()
            name = m.group("name") or m.group("name2")
            if name and not self._is_person_name(name):
                name = None
            found.append((m.start(), Mention(name, RELATIONS[rel], neutral_relation=rel in _NEUTRAL)))
        for m in _PERSON_CONTEXT.finditer(text):
            name = m.group("name") or m.group("subj")
            if self._is_person_name(name) and not any(x[1].name == name for x in found):
                found.append((m.start(), Mention(name, _title_gender(name))))
        for m in _NAMED.finditer(text):
            name = m.group("name")
            if self._is_person_name(name) and not any(x[1].name == name for x in found):
                role = (m.group("role") or "").lower()
                found.append((m.start(), Mention(name, _STORY_ROLE.get(role, "?"))))
        for m in _PAIR.finditer(text):
            found.append((m.end(), Mention(None, "plural")))
        for m in _ZH_NAMED.finditer(text):
            rel = m.group("rel")
            name = _zh_name_after(m.group("rest"), called=bool(m.group("called")))
            found.append((m.start(), Mention(name if name and normalize(name) not in self.user_names else None,
                                             ZH_RELATIONS[rel], ZH_RELATIONS[rel] == "?")))
        for m in _ZH_CONTEXT.finditer(text):
            if is_chinese_name(m.group("n")) and normalize(m.group("n")) not in self.user_names:
                found.append((m.start(), Mention(m.group("n"), "?")))
        return sorted(found, key=lambda x: x[0])

    def _is_person_name(self, name: str) -> bool:
        first = name.split()[0].rstrip(".")
        return (first not in NOT_PLACES and first not in _NOT_PERSONS and normalize(name) not in self.user_names
                and normalize(first) not in self.user_names)

    def _referent(self, pronoun: str, taken: dict[str, str]) -> Mention | None:
        """The latest mention `pronoun` can refer to, if it has a name (not one another pronoun
        of `taken` already stands for: in "he is her handler" he and her are two people)."""
        gender = _pronoun_gender(pronoun)
        wanted = ("?", "plural") if gender == "plural" else (gender, "?")
        for mention in reversed(self.mentions):
            known = self.genders.get(mention.name or "", mention.gender)
            if known not in wanted or (mention.name in taken and taken[mention.name] != gender):
                continue
            if gender == "plural" and (known == "plural" or not mention.neutral_relation):
                return None  # "they" after a group, or after a person we cannot tell is a singular they
            return mention if mention.name else None
        return None

    def _replacement(self, m: re.Match[str], text: str, taken: dict[str, str]) -> str | None:
        pronoun = m.group("p") or m.group("zh")
        referent = self._referent(pronoun, taken)
        if referent is None:
            return None
        name = referent.name
        gender = _pronoun_gender(pronoun)
        taken[name] = gender
        if gender in ("f", "m") and referent.gender == "?":
            self.genders[name] = gender
        if m.group("zh"):
            return name
        low = pronoun.lower()
        verb = m.group("verb") or ""
        rest = text[m.end():]
        if low in ("his", "their", "hers", "theirs"):
            return f"{name}'s{verb}"
        if low == "her":
            following = (verb.strip() or re.match(r"\s*(\S*)", rest).group(1)).lower().strip(".,!?;:")
            possessive = bool(following) and following not in _OBJECT_NEXT
            return f"{name}'s{verb}" if possessive else f"{name}{verb}"
        if m.group("contr") and low in ("he", "she", "they"):
            short = m.group("contr")[1:]
            if short == "s":  # he's: is, or has before a participle ("she's got", "he's been")
                short = "ve" if verb.strip().lower() in ("got", "been", "had", "gone", "done", "seen", "made") else "re"
            return f"{name} {_CONTRACTED[short]}{verb}"
        if low == "they" and verb:
            return f"{name} {_agree(verb.strip())}"
        return f"{name}{verb}"


def _pronoun_gender(pronoun: str) -> str:
    low = pronoun.lower()
    if low in ("she", "her", "hers", "herself", "她"):
        return "f"
    if low in ("he", "him", "his", "himself", "他"):
        return "m"
    return "plural"


def _zh_name_after(rest: str, *, called: bool) -> str | None:
    """The name right after a Chinese relation noun ("妹妹安娜是…" → 安娜; "妹妹叫米娅" → 米娅)."""
    for k in (3, 2):
        if len(rest) >= k and is_chinese_name(rest[:k]):
            return rest[:k]
    if called and 2 <= len(rest) <= 3 and not rest.startswith(("了", "过", "着")):
        return rest  # "叫" names whatever follows, up to the clause's end
    return None


_CONTRACTED = {"re": "is", "ve": "has", "ll": "will", "d": "would"}


def _agree(verb: str) -> str:
    """A verb after singular "they", in the third person singular ("they are" → "is")."""
    fixed = {"are": "is", "were": "was", "have": "has", "do": "does", "don't": "doesn't"}
    return fixed.get(verb.lower(), third_person(verb))


def _title_gender(name: str) -> str:
    if re.match(r"(?:Mr)\b", name):
        return "m"
    if re.match(r"(?:Mrs|Ms|Miss)\b", name):
        return "f"
    return "?"
