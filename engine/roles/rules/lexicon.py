"""Small English and Chinese lexicons shared by the rule-based roles (and the scripted stand-ins)."""

from __future__ import annotations

__all__ = ["QUESTION_WORDS", "NOT_PLACES"]

#: Words that make a sentence a question, never keywords of what it asks about.
QUESTION_WORDS = frozenset(
    """what when where why how who whom which whose do does did is are was were can could would will should shall
    may tell remember know 什么 什么时候 哪里 哪儿 哪 为什么 为何 怎么 怎样 谁 几 多少 吗 呢 哪天 几号 哪个 是否 请问
    记得 知道 告诉""".split()
)

#: Capitalised words that are never place names (months, weekdays, pronouns, articles).
NOT_PLACES = frozenset(
    """January February March April May June July August September October November December Monday Tuesday Wednesday
    Thursday Friday Saturday Sunday I The A An My We You He She They It This That""".split()
)
