"""`ScriptedProfileInducer`: records → profile fields, skipping values that paraphrase one already there.

The user's name goes to the single-valued `name` field (a new name replaces the old); where they
live to `identity` as "lives in <place>" (a move replaces it); the occupation replaces the old
one; relationships, constraints, preferences and goals accumulate.
"""

from __future__ import annotations

import re

from engine.core.attributes import stated_attribute
from engine.core.records import PROFILE_FIELDS
from engine.core.text import content_tokens, jaccard, normalize
from engine.roles.scripted.lang import (
    CONSTRAINT,
    FAMILY,
    PREFERENCE,
    ZH_FAMILY,
    occupation_of,
)
from engine.roles.types import InductionInput, InductionOutput, RecordView

__all__ = ["ScriptedProfileInducer"]

_RELATION_EN = re.compile(
    r"(?:'s|\bmy)\s+(?P<r>%s)(?:'s name)?\s*(?:,\s*)?(?:is\s+(?:called\s+|named\s+)?|called\s+|named\s+)?(?P<n>[A-Z][\w'-]*)"
    % "|".join(FAMILY)
)
_RELATION_ZH = re.compile(rf"的(?P<r>{ZH_FAMILY})(?:叫|是|名叫)(?P<n>[\u4e00-\u9fffA-Za-z0-9]{{1,6}}?)(?=[，。,.!！\s]|$)")


def _same(a: str, b: str) -> bool:
    ta, tb = content_tokens(a), content_tokens(b)
    if not ta or not tb:
        return normalize(a).strip() == normalize(b).strip()
    return jaccard(ta, tb) >= 0.6


class _Changes:
    """The additions and removals an induction proposes, against the current profile."""

    def __init__(self, profile: dict[str, list[str]]):
        self.current = {k: list(v) for k, v in profile.items()}
        self.add: dict[str, list[str]] = {}
        self.remove: dict[str, list[str]] = {}

    def put(self, field_name: str, value: str, *, single_prefix: str | None = None) -> None:
        """Add `value` unless the field already says it. Single-valued (`single_prefix` given):
        the field's values starting with the prefix ("" = all of them) are replaced."""
        value = value.strip()
        if not value:
            return
        removed = self.remove.get(field_name, [])
        existing = [v for v in self.current.get(field_name, []) if v not in removed] + self.add.get(field_name, [])
        if single_prefix is not None:  # single-valued: same value exactly, or a replacement
            if any(normalize(value) == normalize(e) for e in existing):
                return
            for old in existing:
                if old.startswith(single_prefix):
                    if old in self.add.get(field_name, []):
                        self.add[field_name].remove(old)
                    else:
                        self.remove.setdefault(field_name, []).append(old)
        elif any(_same(value, e) for e in existing):
            return
        self.add.setdefault(field_name, []).append(value)

    def output(self) -> InductionOutput:
        return InductionOutput(
            add={k: v for k, v in self.add.items() if v and k in PROFILE_FIELDS},
            remove={k: v for k, v in self.remove.items() if v},
        )


class ScriptedProfileInducer:
    """Records → profile fields, skipping values that paraphrase one already there."""

    def induct(self, inp: InductionInput) -> InductionOutput:
        changes = _Changes(inp.profile)
        user = _User.of(inp)
        for rec in inp.records:
            if not rec.lasting:
                continue  # a one-off instruction ("only this time") never enters the profile
            used = self._attributes(rec, changes, user)
            text = rec.content
            for m in list(_RELATION_EN.finditer(text)) + list(_RELATION_ZH.finditer(text)):
                if user.owns(text[: m.start()]):  # the user's sister, not the neighbour's dog
                    changes.put("relationships", f"{m.group('r')}: {m.group('n')}")
                    used = True
            if CONSTRAINT.search(text) or "safety" in rec.tags:
                changes.put("constraints", text)
                used = True
            elif "preference" in rec.tags or (PREFERENCE.search(text) and user.is_subject(text)):
                changes.put("preferences", text)
                used = True
            elif "decision" in rec.tags and rec.memory_type != "episodic":
                changes.put("goals", text)
                used = True
            if not used and "identity" in rec.tags:
                changes.put("facts", text)
        return changes.output()

    @staticmethod
    def _attributes(rec: RecordView, changes: _Changes, user: _User) -> bool:
        """The single-valued fields a record sets of the user (name, occupation, where they live,
        their phone...); True if any. Someone else's attributes ("Ana lives in Porto") set none."""
        found = stated_attribute(rec.content)
        if found is not None and not user.is_named(found.subject):
            return False
        kind = found.name if found is not None else None
        used = False
        if found is not None and kind == "name":
            changes.put("name", found.raw, single_prefix="")
            used = True
        occupation = occupation_of(_first_person_again(rec.content)) if user.is_subject(rec.content) else None
        if occupation or (found is not None and kind == "occupation"):
            changes.put("occupation", occupation or found.value, single_prefix="")
            used = True
        if found is not None and kind == "residence":
            changes.put("identity", f"lives in {rec.location or found.raw}", single_prefix="lives in ")
            used = True
        elif found is not None and kind is not None and kind.split(":")[0] in _IDENTITY_LABELS:
            label = _IDENTITY_LABELS[kind.split(":")[0]] + (f" ({kind.split(':')[1]})" if ":" in kind else "")
            changes.put("identity", f"{label} {found.raw}", single_prefix=f"{label} ")
            used = True
        return used


#: single-valued attributes kept in the profile's identity field, by the label their value gets
_IDENTITY_LABELS = {"origin": "from", "employer": "works at", "phone": "phone:", "email": "email:",
                    "address": "address:", "age": "age:"}


class _User:
    """Who the user is in the records (the user, 用户, their profile name), and the third persons
    the profile and the records name (so "Ana lives in Porto" is not the user's city)."""

    def __init__(self, names: set[str], others: set[str]):
        self.names = names
        self.others = others

    @classmethod
    def of(cls, inp: InductionInput) -> _User:
        names = {"the user", "用户", *(normalize(n) for n in inp.profile.get("name", []))}
        others = {normalize(v.split(":", 1)[1]).strip() for v in inp.profile.get("relationships", []) if ":" in v}
        for rec in inp.records:
            for m in list(_RELATION_EN.finditer(rec.content)) + list(_RELATION_ZH.finditer(rec.content)):
                others.add(normalize(m.group("n")))
        return cls(names, others)

    def is_named(self, subject: str) -> bool:
        """`subject` (normalised) is the user: "the user", their name, or a bare name no relation has."""
        if subject in self.names:
            return True
        return bool(subject) and subject not in self.others and not re.search(r"'s\b|’s\b|的", subject)

    def is_subject(self, content: str) -> bool:
        """The record's sentence is about the user, not about someone the user knows."""
        head = re.split(r"\s+(?:is|are|was|were|works?|lives?|loves?|likes?|hates?|prefers?|enjoys?|has|had)\b"
                        r"|(?:是|住|喜欢|讨厌|爱|在)", content, maxsplit=1)[0]
        return self.is_named(normalize(head).strip(" ."))

    def owns(self, before: str) -> bool:
        """The possessor right before a relation ("Caroline's", "my") is the user."""
        tail = normalize(before).strip()
        if not tail:
            return True
        return self.is_named(tail) or tail.endswith(tuple(self.names))


def _first_person_again(content: str) -> str:
    """Undo "<Name> works as" → "I work as" so the occupation rules (first person) apply."""
    out = re.sub(r"^[\w .'-]+?\s+(?:works|worked)\s+as\b", "I work as", content)
    out = re.sub(r"^[\w .'-]+?\s+is\s+(an?)\b", r"I am \1", out)
    return re.sub(r"^[\u4e00-\u9fff]{1,4}?是", "我是", out)

