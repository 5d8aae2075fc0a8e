"""`ScriptedConsolidator`: MERGE / SUPERSEDE / KEEP_BOTH by rule.

Statements of the same single-valued attribute of the same subject (engine.core.attributes) merge
when their values agree and supersede when the value changed, whatever type each record got (a
move typed `fact` supersedes a residence typed `profile`); the same attribute of two different
subjects (Ana's city, the user's city) keeps both. Otherwise episodes merge only when they are the
same event (same time, overlapping content); a changed number, an explicit change ("no longer",
"now prefers") or a reversed preference supersedes; near-identical statements merge, unless one
swaps what the other is about ("set in the lighthouse" / "set in an observatory": both are kept).
"""

from __future__ import annotations

from engine.core.attributes import same_attribute, stated_attribute, values_agree
from engine.core.text import content_tokens, jaccard, normalize
from engine.roles.scripted.lang import CHANGE, NEGATIVE_PREFERENCE
from engine.roles.types import ConsolidationDecision, ConsolidationInput

__all__ = ["ScriptedConsolidator"]


def _stems(tokens: list[str]) -> set[str]:
    return {t[:-1] if len(t) > 3 and t.endswith("s") else t for t in tokens}


def substituted(new_tokens: list[str], old_tokens: list[str]) -> bool:
    """One thing put in another's place in the same frame ("the chapter is set in the lighthouse" /
    "… in an observatory"): each side keeps one or two words the other lacks. A restatement
    refines or rephrases; it does not swap what it is about."""
    a, b = _stems(new_tokens), _stems(old_tokens)
    only_new, only_old = a - b, b - a
    return bool(only_new) and bool(only_old) and len(only_new) <= 2 and len(only_old) <= 2


def _richer(a: str, b: str) -> str:
    ta, tb = set(content_tokens(a)), set(content_tokens(b))
    if len(tb) > len(ta) or (len(tb) == len(ta) and len(b) > len(a)):
        return b
    return a


class ScriptedConsolidator:
    """MERGE / SUPERSEDE / KEEP_BOTH by record type (fact: values; episodic: same event; profile)."""

    def decide(self, inp: ConsolidationInput) -> ConsolidationDecision:
        new, old = inp.new, inp.existing
        new_tokens, old_tokens = content_tokens(new.content), content_tokens(old.content)
        overlap = jaccard(new_tokens, old_tokens)
        same_text = normalize(new.content).strip(" .。") == normalize(old.content).strip(" .。")
        merged = _richer(old.content, new.content)
        kind = new.memory_type
        if same_text:
            return ConsolidationDecision(action="MERGE", merged_content=merged, reason="same statement")

        new_attr, old_attr = stated_attribute(new.content), stated_attribute(old.content)
        if same_attribute(new_attr, old_attr):  # regardless of memory_type: a move typed fact vs a profile city
            if values_agree(new_attr.value, old_attr.value):  # same value, or a refinement ("Beijing" / "Beijing Chaoyang")
                return ConsolidationDecision(action="MERGE", merged_content=merged, reason=f"same {new_attr.name}")
            return ConsolidationDecision(
                action="SUPERSEDE", reason=f"{new_attr.name} changed from {old_attr.raw!r} to {new_attr.raw!r}"
            )
        if new_attr and old_attr and new_attr.name == old_attr.name:
            return ConsolidationDecision(
                action="KEEP_BOTH", reason=f"{new_attr.name} of different subjects ({old_attr.subject!r}, {new_attr.subject!r})"
            )

        swapped = substituted(new_tokens, old_tokens)
        if kind == "episodic":
            if new.time and new.time == old.time and overlap >= 0.5 and not swapped:
                return ConsolidationDecision(action="MERGE", merged_content=merged, reason=f"same event on {new.time}")
            return ConsolidationDecision(action="KEEP_BOTH", reason="different events (time or content differ)")
        digits_new = {t for t in new_tokens if any(c.isdigit() for c in t)}
        digits_old = {t for t in old_tokens if any(c.isdigit() for c in t)}
        words_overlap = jaccard(set(new_tokens) - digits_new, set(old_tokens) - digits_old)
        if digits_new and digits_old and digits_new != digits_old and words_overlap >= 0.6 and kind != "episodic":
            return ConsolidationDecision(action="SUPERSEDE", reason="same statement with a changed number")

        if kind == "profile" or "preference" in new.tags:
            negative_new, negative_old = NEGATIVE_PREFERENCE.search(new.content), NEGATIVE_PREFERENCE.search(old.content)
            polarity_flip = bool(negative_new) != bool(negative_old)
            if CHANGE.search(new.content) and overlap >= 0.2:
                return ConsolidationDecision(action="SUPERSEDE", reason="explicit change of preference")
            if polarity_flip and words_overlap >= 0.4:
                return ConsolidationDecision(action="SUPERSEDE", reason="preference reversed")
            if overlap >= 0.6 and not swapped:
                return ConsolidationDecision(action="MERGE", merged_content=merged, reason="same preference")
            return ConsolidationDecision(action="KEEP_BOTH", reason="different preferences")

        if CHANGE.search(new.content) and overlap >= 0.3:
            return ConsolidationDecision(action="SUPERSEDE", reason="explicit change of a fact")
        if overlap >= 0.7 and not swapped:
            return ConsolidationDecision(action="MERGE", merged_content=merged, reason="same fact")
        if swapped:
            return ConsolidationDecision(action="KEEP_BOTH", reason="the same statement about something else")
        return ConsolidationDecision(action="KEEP_BOTH", reason="different facts")

