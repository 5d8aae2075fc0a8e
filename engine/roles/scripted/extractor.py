"""`ScriptedExtractor`: one atomic, self-contained record per informative user clause.

A window's user messages are cut into sentences and clauses; questions and small talk are
skipped (except a request for advice, kept as an episode); first person becomes the speaker,
relative times become absolute, and each record gets its type, tags, theme, time, location,
reason, purpose and keywords by rule.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.core.attributes import attribute_of
from engine.core.text import content_tokens, normalize, split_clauses, split_sentences
from engine.core.timeparse import absolutize
from engine.core.timespans import day_span, span_label
from engine.roles.scripted.lang import (
    ANONYMOUS,
    ANONYMOUS_ZH,
    CONSTRAINT,
    FAMILY,
    PREFERENCE,
    QUESTION_WORDS,
    ZH_FAMILY,
    introduced_name,
    is_anonymous,
    is_chitchat,
    is_question,
    is_zh,
    location_of,
    occupation_of,
    purpose_of,
    reason_of,
    record_keywords,
    resolve_speaker,
    theme_of,
)
from engine.roles.types import (
    ExtractedRecord,
    ExtractionInput,
    ExtractionOutput,
    WindowMessage,
)

__all__ = ["ScriptedExtractor"]

_DECISION = re.compile(
    r"\b(?:decided|decide|will|'ll|plan to|plans to|planning|going to|gonna|intend|intends|want to|wants to|"
    r"am going|aim to|goal is|have to|has to)\b|决定|打算|准备|计划|想要|目标",
    re.I,
)
_PAST = re.compile(
    r"\b(?:went|was|were|had|did|got|saw|met|visited|bought|made|took|came|gave|joined|finished|started|attended|"
    r"ran|won|lost|moved|adopted|\w+ed)\b|了|过",
    re.I,
)
_ADVICE = re.compile(
    r"\b(?:should I|should the|should we|should my|do you recommend|would you recommend|can you recommend|"
    r"could you recommend|recommend|suggest|any (?:tips|advice|ideas)|what do you think|which (?:one|is better)|"
    r"or\b.*\?)|推荐|建议|应该|哪个好|怎么办",
    re.I,
)
_ZH_SUBJECTLESS = re.compile(r"^(?:是|在|住|喜欢|讨厌|有|对|今年|每周|每天)[\u4e00-\u9fff]")
_MOVED = re.compile(
    r"\bI(?:'ve| have)? (?:just )?(?:moved|relocated) to\s+(?:the\s+)?(?P<p>[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)"
    r"|我.{0,6}?搬(?:到|去)了?(?P<zp>[\u4e00-\u9fff]{2,6}?)(?=[，。,.!！；;\s]|$)"
)
_IDENTITY_EN = re.compile(
    r"\b(?:I live|I'm living|I am living|I moved|I'm from|I am from|I grew up|my hometown|I'm \d+|I am \d+|"
    r"\d+ years old|years old|my (?:%s)\b|I'm an? (?:mother|father|mom|dad|wife|husband|parent)|I work|my job)"
    % "|".join(FAMILY),
    re.I,
)
_IDENTITY_ZH = re.compile(rf"我住在|我住|我来自|我老家|我家在|我今年|\d+岁|岁了|我在.+?工作|我的(?:{ZH_FAMILY})|搬到|我的工作")


class ScriptedExtractor:
    """Sentence/clause rules: one atomic, self-contained record per informative user clause."""

    def extract(self, inp: ExtractionInput) -> ExtractionOutput:
        names = self._known_names([*inp.context, *inp.new])
        records: list[ExtractedRecord] = []
        for msg in inp.new:
            if msg.role != "user":
                continue  # assistant statements are never user facts
            speaker = msg.speaker if not is_anonymous(msg.speaker) else names.get(msg.role, "")
            records.extend(self._from_message(msg, speaker))
        return ExtractionOutput(records=records)

    @staticmethod
    def _known_names(messages: Sequence[WindowMessage]) -> dict[str, str]:
        """An anonymous user who introduced themselves is called by that name afterwards."""
        names: dict[str, str] = {}
        for msg in messages:
            if msg.role == "user" and is_anonymous(msg.speaker):
                if name := introduced_name(msg.content):
                    names["user"] = name
        return names

    def _from_message(self, msg: WindowMessage, speaker: str) -> list[ExtractedRecord]:
        out = []
        for sentence in split_sentences(msg.content):
            if is_question(sentence) and _ADVICE.search(sentence):
                # asking for advice is an episode worth keeping: the assistant's answer to it is
                # what "what did you recommend last time?" recalls through this record's source
                record = self._advice(sentence, msg, speaker)
                if record is not None:
                    out.append(record)
                continue
            if is_question(sentence) or is_chitchat(sentence):
                continue
            for clause in split_clauses(sentence):
                if is_chitchat(clause) or is_question(clause):
                    continue
                if _ZH_SUBJECTLESS.match(clause):
                    clause = "我" + clause  # "我叫王芳，是一名老师": the second clause's subject is 我
                record = self._record(clause, msg, speaker)
                if record is not None:
                    out.append(record)
        return out

    def _advice(self, question: str, msg: WindowMessage, speaker: str) -> ExtractedRecord | None:
        zh = is_zh(question)
        who = speaker or (ANONYMOUS_ZH if zh else ANONYMOUS)
        rewritten, mentions = absolutize(question, anchor=msg.at)
        asked = resolve_speaker(rewritten, who).strip()
        substance = set(content_tokens(question)) - QUESTION_WORDS - {"think", "recommend", "suggest", "advice",
                                                                       "tips", "ideas", "better", "one"}
        if len(substance) < 2:
            return None  # "What do you think?" carries nothing to remember
        day = span_label(day_span(msg.at.date(), msg.at.tzinfo))
        content = f"{who}在{day}请教：{asked}" if zh else f"On {day} {who} asked for advice: {asked}"
        kw = record_keywords(asked, None, extra=[w for w in (speaker,) if w])
        return ExtractedRecord(content=content, memory_type="episodic", tags=["episode", "decision"],
                               theme=theme_of(question, kw), time=day, keywords=kw, source_ids=[msg.id],
                               speaker=speaker or ANONYMOUS)

    def _record(self, clause: str, msg: WindowMessage, speaker: str) -> ExtractedRecord | None:
        zh = is_zh(clause)
        who = speaker or (ANONYMOUS_ZH if zh else ANONYMOUS)
        rewritten, mentions = absolutize(clause, anchor=msg.at)
        name = introduced_name(clause)
        occupation = occupation_of(clause)
        if name:
            content = f"{who}的名字是{name}" if zh else f"{who}'s name is {name}"
            if who in (ANONYMOUS, ANONYMOUS_ZH):
                content = f"用户的名字是{name}" if zh else f"The user's name is {name}"
        elif move := _MOVED.search(clause):
            # a move states the new value of a single-valued attribute: say it canonically, so the
            # update step sees "lives in Shanghai" beside "lives in Beijing" and can supersede
            place = (move.group("p") or move.group("zp") or "").strip(" .。,，")
            content = f"{who}住在{place}" if zh else f"{who} lives in {place}"  # when: the time dimension
            first_person = True
        else:
            content = resolve_speaker(rewritten, who)
            first_person = re.search(r"\b(?:I|my|me|mine|myself|I'm|I've|I'd|I'll)\b", clause, re.I) or "我" in clause
            if not first_person and not zh:
                content = f"{who} said: {content}"
        content = content.strip().rstrip(",;，；")
        if zh and not re.search(r"[。！!？?]$", content):
            content += "。"
        elif not zh and not re.search(r"[.!?]$", content):
            content += "."

        tags: list[str] = []
        if name or occupation or _IDENTITY_EN.search(clause) or _IDENTITY_ZH.search(clause):
            tags.append("identity")
        if PREFERENCE.search(clause):
            tags.append("preference")
        if _DECISION.search(clause):
            tags.append("decision")
        time_label = span_label(mentions[0].span) if mentions else None
        past_event = bool(mentions) and mentions[0].span.start <= msg.at and bool(_PAST.search(clause))
        if past_event:
            tags.append("episode")
        if CONSTRAINT.search(clause) or not tags:
            tags.append("fact")
        tags = list(dict.fromkeys(tags))

        if "identity" in tags or "preference" in tags:
            memory_type = "profile"
        elif "episode" in tags:
            memory_type = "episodic"
        else:
            memory_type = "fact"

        location = location_of(content, exclude=[who, name or ""]) if not name else None
        kw = record_keywords(content, time_label, extra=[w for w in (speaker, name, location) if w])
        if attr := attribute_of(content):
            # the attribute a single-valued statement sets ("residence", "phone") is a keyword, so the
            # update step's keyword blocking pairs "lives in Beijing" with "lives in Shanghai"
            kw = list(dict.fromkeys([attr[0].replace(":", " ").strip(), *kw]))[:8]
        theme = "identity" if name else ("work" if occupation else theme_of(clause, [k for k in kw if k != normalize(who)]))
        return ExtractedRecord(
            content=content,
            memory_type=memory_type,
            tags=tags,
            theme=theme,
            time=time_label,
            location=location,
            reason=reason_of(content),
            purpose=purpose_of(content),
            keywords=kw,
            source_ids=[msg.id],
            speaker=speaker or ANONYMOUS,
        )
