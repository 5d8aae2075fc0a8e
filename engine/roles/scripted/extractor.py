"""`ScriptedExtractor`: one atomic, self-contained record per informative user clause.

A window's user messages are cut into sentences and clauses. Filler ("By the way.", 好的) and
questions for information are skipped; a request for advice is kept as an episode, and a request
phrased as a question ("could you add ... to my next delivery?") or as an imperative is a
decision record of what was asked. Third-person pronouns become the person last named
(`people.Referents`), first person becomes the speaker, relative times become absolute, and each
record gets its type, tags, theme, time, location, reason, purpose, keywords and `lasting` by
rule: safety constraints (allergies, medical, legal, accessibility), life events and open
problems get the salience they have (`salience`), a preference is the speaker's only when the
speaker holds it, and a single-valued attribute is stated canonically ("lives in Porto") with the
attribute among the keywords, so the update step pairs old and new values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.core.attributes import stated_attribute
from engine.core.text import content_tokens, normalize, split_clauses, split_sentences
from engine.core.timeparse import absolutize
from engine.core.timespans import day_span, span_label
from engine.roles.scripted.intent import (
    instruction_of,
    is_durable,
    is_one_off,
    remembered_statement,
    request_of,
)
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
from engine.roles.scripted.people import (
    PERSON_RELATIONS,
    ZH_PERSON_RELATIONS,
    Referents,
)
from engine.roles.scripted.salience import (
    PROBLEM_KEYWORDS,
    holds_preference,
    is_filler,
    is_open_problem,
    is_tautology,
    life_event_theme,
    safety_classes,
    safety_keywords,
    strip_discourse,
)
from engine.roles.scripted.inducer import ScriptedProfileInducer
from engine.roles.types import (
    ExtractedRecord,
    ExtractionInput,
    ExtractionOutput,
    InductionInput,
    RecordView,
    WindowMessage,
)

__all__ = ["ScriptedExtractor"]

_DECISION = re.compile(
    r"\b(?:decided|decide|(?-i:will)|'ll|plan to|plans to|planning|going to|gonna|intend|intends|want to|wants to|"
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
    r"\bI(?:'ve| have)? (?:just |recently |finally )?(?:moved|relocated)(?: back| over)? to\s+(?:the\s+)?"
    r"(?P<p>[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)"
    r"|我.{0,6}?搬(?:到|去|回)了?(?P<zp>[\u4e00-\u9fff]{2,6}?)(?=[，。,.!！；;\s]|$|了)"
)
_IDENTITY_EN = re.compile(
    r"\b(?:I live|I'm living|I am living|I(?: just| recently)? moved (?:to|from|back|abroad|house|into|out)\b|I'm from|I am from|I grew up|my hometown|I'm \d+|I am \d+|"
    r"\d+ years old|years old|my (?:%s)\b(?!['’]s\s+(?!name\b))|I'm an? (?:mother|father|mom|dad|wife|husband|parent)|I work|my job)"
    % "|".join(FAMILY),
    re.I,
)
_IDENTITY_ZH = re.compile(rf"我住在|我住|我来自|我老家|我家在|我今年|\d+岁|岁了|我在.+?工作|我(?:的)?(?:{ZH_FAMILY})(?!的)|搬到|我的工作")
#: someone else's pet or thing ("my neighbour's dog"): an episode about them, not about the user
_PERSON_RELS = "|".join(sorted(PERSON_RELATIONS, key=len, reverse=True))
_ZH_PERSON_RELS = "|".join(ZH_PERSON_RELATIONS)
_OTHERS_THING = re.compile(
    rf"^(?:[Mm]y|[Oo]ur)\s+(?:\w+\s+)?(?:{_PERSON_RELS})['’]s\s+(?!name\b)\w+(?!.*\b(?:is|are|was|were)\b)"
    rf"|^我(?:的)?(?:{_ZH_PERSON_RELS})的(?:狗|猫|宠物|车|房子)(?!.*是)")
#: a constraint someone else has ("my son is allergic"): recorded, but not as the user's profile
_OTHERS_SUBJECT = re.compile(rf"\b(?:[Mm]y|[Oo]ur)\s+(?:\w+\s+)?(?:{_PERSON_RELS})\b|我(?:的)?(?:{_ZH_PERSON_RELS})")
#: attributes that, stated of the user, are part of who they are
_IDENTITY_ATTRIBUTES = ("name", "residence", "origin", "occupation", "employer", "phone", "email", "address", "age")
_FIRST_PERSON = re.compile(r"\b(?:I|my|me|mine|myself|I'm|I've|I'd|I'll)\b", re.I)


@dataclass(frozen=True, slots=True)
class _Said:
    """One message being read: who said it, when, and the people seen so far."""

    msg: WindowMessage
    speaker: str
    people: Referents


class ScriptedExtractor:
    """Sentence/clause rules: one atomic, self-contained record per informative user clause."""

    def extract(self, inp: ExtractionInput) -> ExtractionOutput:
        names = self._known_names([*inp.context, *inp.new])
        users = {*names.values(), *(m.speaker for m in [*inp.context, *inp.new]
                                    if m.role == "user" and not is_anonymous(m.speaker))}
        people = Referents(user_names=users)
        for msg in inp.context:
            people.observe(msg.content)
        records: list[ExtractedRecord] = []
        for msg in inp.new:
            if msg.role != "user":
                people.observe(msg.content)  # assistant statements are never user facts
                continue
            speaker = msg.speaker if not is_anonymous(msg.speaker) else names.get(msg.role, "")
            records.extend(self._from_message(_Said(msg=msg, speaker=speaker, people=people)))
        if inp.profile is None:
            return ExtractionOutput(records=records)
        # asked for the profile too: what the scripted inducer would make of these records
        views = [RecordView(content=r.content, memory_type=r.memory_type, tags=list(r.tags), time=r.time,
                            location=r.location, reason=r.reason, purpose=r.purpose, keywords=list(r.keywords),
                            theme=r.theme, lasting=r.lasting) for r in records]
        profile = ScriptedProfileInducer().induct(InductionInput(profile=inp.profile, records=views))
        return ExtractionOutput(records=records, profile=profile)

    @staticmethod
    def _known_names(messages: Sequence[WindowMessage]) -> dict[str, str]:
        """An anonymous user who introduced themselves is called by that name afterwards."""
        names: dict[str, str] = {}
        for msg in messages:
            if msg.role == "user" and is_anonymous(msg.speaker):
                if name := introduced_name(msg.content):
                    names["user"] = name
        return names

    def _from_message(self, said: _Said) -> list[ExtractedRecord]:
        out: list[ExtractedRecord] = []
        for raw in split_sentences(said.msg.content):
            sentence = strip_discourse(raw)
            if is_filler(sentence):
                continue
            sentence = said.people.resolve(sentence)
            if not introduced_name(sentence):  # "Call me Ishmael", "我是李明轩": a name, not a request
                if statement := remembered_statement(sentence):
                    sentence = statement  # "remember that I'm vegetarian": the statement itself
                elif is_question(sentence) and _ADVICE.search(sentence):
                    # asking for advice is an episode worth keeping: the assistant's answer to it is
                    # what "what did you recommend last time?" recalls through this record's source
                    out.extend(r for r in [self._advice(sentence, said)] if r is not None)
                    continue
                elif action := request_of(sentence):
                    out.append(self._asked(action, sentence, said))
                    continue
            if is_question(sentence) or is_chitchat(sentence):
                continue
            for piece in split_clauses(sentence):
                clause = strip_discourse(piece)
                if is_filler(clause) or is_chitchat(clause) or is_question(clause):
                    continue
                if _ZH_SUBJECTLESS.match(clause):
                    clause = "我" + clause  # "我叫王芳，是一名老师": the second clause's subject is 我
                action = None if introduced_name(clause) else instruction_of(clause)
                record = self._asked(action, clause, said) if action else self._record(clause, said)
                if record is not None and not is_tautology(record.content):
                    out.append(record)
        return out

    def _advice(self, question: str, said: _Said) -> ExtractedRecord | None:
        msg, speaker = said.msg, said.speaker
        zh = is_zh(question)
        who = speaker or (ANONYMOUS_ZH if zh else ANONYMOUS)
        rewritten, _ = absolutize(question, anchor=msg.at)
        asked = resolve_speaker(rewritten, who).strip()
        substance = set(content_tokens(question)) - QUESTION_WORDS - {"think", "recommend", "suggest", "advice",
                                                                       "tips", "ideas", "better", "one"}
        if len(substance) < 2:
            return None  # "What do you think?" carries nothing to remember
        day = span_label(day_span(msg.at.date(), msg.at.tzinfo))
        subject = "the user" if who == ANONYMOUS else who
        content = f"{who}在{day}请教：{asked}" if zh else f"On {day} {subject} asked for advice: {asked}"
        kw = record_keywords(asked, None, extra=[w for w in (speaker,) if w])
        return ExtractedRecord(content=content, memory_type="episodic", tags=["episode", "decision"],
                               theme=theme_of(question, kw), time=day, keywords=kw, source_ids=[msg.id],
                               speaker=speaker or ANONYMOUS)

    def _asked(self, action: str, text: str, said: _Said) -> ExtractedRecord:
        """What the user asked the assistant to do: a decision, one-off or durable as it says."""
        msg, speaker = said.msg, said.speaker
        zh = is_zh(text)
        who = speaker or (ANONYMOUS_ZH if zh else ANONYMOUS)
        rewritten, mentions = absolutize(action, anchor=msg.at)
        asked = resolve_speaker(rewritten, who).strip().rstrip("。.!！?？")
        one_off = is_one_off(text, instruction=True)
        durable = not one_off and is_durable(text)
        day = span_label(day_span(msg.at.date(), msg.at.tzinfo))
        subject = who if zh or who != ANONYMOUS else "the user"
        if zh:
            content = f"{who}请求{asked}。" if durable else f"{who}在{day}请求{asked}。"
        elif asked.startswith(("not ", "never ")):
            negation, rest = asked.split(" ", 1)
            content = f"{who} asked {negation} to {rest}." if durable else f"On {day} {subject} asked {negation} to {rest}."
        else:
            content = f"{who} asked to {asked}." if durable else f"On {day} {subject} asked to {asked}."
        time_label = span_label(mentions[0].span) if mentions else (None if durable else day)
        location = location_of(asked, exclude=[who])
        kw = record_keywords(asked, time_label, extra=[w for w in (speaker, location) if w])
        if attr := stated_attribute(asked):
            kw = _with_attribute(kw, attr.name)
        tags = ["preference", "decision"] if durable else ["decision", "episode"]
        return ExtractedRecord(
            content=content, memory_type="profile" if durable else "episodic", tags=tags,
            theme=theme_of(text, [k for k in kw if k not in _speaker_tokens(who)]), time=time_label,
            location=location, reason=reason_of(asked), purpose=purpose_of(asked), keywords=kw,
            source_ids=[msg.id], speaker=speaker or ANONYMOUS, lasting=not one_off,
        )

    def _record(self, clause: str, said: _Said) -> ExtractedRecord | None:
        msg, speaker = said.msg, said.speaker
        zh = is_zh(clause)
        who = speaker or (ANONYMOUS_ZH if zh else ANONYMOUS)
        rewritten, mentions = absolutize(clause, anchor=msg.at)
        name = introduced_name(clause)
        content = _content(clause, rewritten, who, name, zh=zh, people=said.people)
        time_label = span_label(mentions[0].span) if mentions else None
        past_event = bool(mentions) and mentions[0].span.start <= msg.at and bool(_PAST.search(clause))
        salience = _Salience.of(clause, content, who, name=name, past_event=past_event, zh=zh)
        if salience.problem and time_label is None:
            time_label = span_label(day_span(msg.at.date(), msg.at.tzinfo))  # reported on this day

        location = location_of(content, exclude=[who, name or ""]) if not name else None
        kw = record_keywords(content, time_label, extra=[w for w in (speaker, name, location) if w])
        kw = list(dict.fromkeys([*salience.keywords, *kw]))[:8]
        if salience.attribute:
            # the attribute a single-valued statement sets ("residence", "phone") is a keyword, so the
            # update step's keyword blocking pairs "lives in Beijing" with "lives in Shanghai"
            kw = _with_attribute(kw, salience.attribute)
        fallback = [salience.theme] if salience.theme else [k for k in kw if k not in _speaker_tokens(who)]
        if name:
            theme = "identity"
        elif occupation_of(clause):
            theme = "work"
        else:
            theme = salience.forced_theme or theme_of(clause, fallback)
            if salience.theme and theme in ("schedule", *fallback) and salience.theme != "problem":
                theme = salience.theme  # "we got married last Saturday": family, not schedule
        return ExtractedRecord(
            content=content,
            memory_type=salience.memory_type,
            tags=salience.tags,
            theme=theme,
            time=time_label,
            location=location,
            reason=reason_of(content),
            purpose=purpose_of(content),
            keywords=kw,
            source_ids=[msg.id],
            speaker=speaker or ANONYMOUS,
            lasting=not is_one_off(clause, instruction=False),
        )


def _content(clause: str, rewritten: str, who: str, name: str | None, *, zh: bool, people: Referents) -> str:
    """The clause as a self-contained third-person statement, canonical for names and moves."""
    if name:
        if who in (ANONYMOUS, ANONYMOUS_ZH) or normalize(name) == normalize(who):
            content = f"用户的名字是{name}" if zh else f"The user's name is {name}"  # never "Li's name is Li"
        else:
            content = f"{who}的名字是{name}" if zh else f"{who}'s name is {name}"
    elif move := _MOVED.search(clause):
        # a move states the new value of a single-valued attribute: say it canonically, so the
        # update step sees "lives in Shanghai" beside "lives in Beijing" and can supersede
        place = (move.group("p") or move.group("zp") or "").strip(" .。,，")
        content = f"{who}住在{place}" if zh else f"{who} lives in {place}"  # when: the time dimension
    else:
        content = resolve_speaker(rewritten, who)
        first_person = _FIRST_PERSON.search(clause) or "我" in clause
        if not first_person and not zh and not people.starts_with_person(content):
            content = f"{who} said: {content}"
    content = content.strip().rstrip(",;，；")
    if zh and not re.search(r"[。！!？?]$", content):
        content += "。"
    elif not zh and not re.search(r"[.!?]$", content):
        content += "."
    return content


@dataclass(frozen=True, slots=True)
class _Salience:
    """A statement's tags, memory type, class keywords and theme, by rule."""

    tags: list[str]
    memory_type: str
    keywords: list[str]
    attribute: str | None
    theme: str | None  # a fallback theme (a life event's, an open problem's)
    forced_theme: str | None  # a theme that wins over the words (a safety constraint's)
    problem: bool

    @classmethod
    def of(cls, clause: str, content: str, who: str, *, name: str | None, past_event: bool, zh: bool) -> _Salience:
        tags: list[str] = []
        found = stated_attribute(content)
        own_attribute = found is not None and found.subject in _subjects(who) and \
            found.name.split(":")[0] in _IDENTITY_ATTRIBUTES and not found.name.startswith("name:")
        preferences = [holds_preference(clause, m.start()) for m in PREFERENCE.finditer(clause)]
        others_preference = bool(preferences) and not any(preferences)  # "my sister hates cilantro"
        relation = (_IDENTITY_EN.search(clause) or _IDENTITY_ZH.search(clause)) and not others_preference
        if name or occupation_of(clause) or relation or own_attribute:
            tags.append("identity")
        if any(preferences):
            tags.append("preference")
        if _DECISION.search(clause):
            tags.append("decision")
        life = life_event_theme(clause)
        problem = is_open_problem(clause)
        others = bool(_OTHERS_THING.match(clause))
        if past_event or life or problem or others:
            tags.append("episode")
        safety = safety_classes(clause)
        keywords = safety_keywords(clause, safety, zh=zh)
        if safety:
            tags.append("safety")
        if problem:
            keywords.append(PROBLEM_KEYWORDS[1] if zh else PROBLEM_KEYWORDS[0])
        if CONSTRAINT.search(clause) or safety or life or problem or not tags:
            tags.append("fact")
        tags = list(dict.fromkeys(tags))
        own = bool(_FIRST_PERSON.search(clause) or "我" in clause) and not others and not _OTHERS_SUBJECT.search(clause)
        if own_attribute or (safety and own):
            memory_type = "profile"
        elif safety:
            memory_type = "fact"
        elif life or problem or others:
            memory_type = "episodic"
        elif "identity" in tags or "preference" in tags:
            memory_type = "profile"
        elif "episode" in tags:
            memory_type = "episodic"
        else:
            memory_type = "fact"
        forced = ("legal" if safety[0].name == "legal" else "health") if safety else None
        return cls(tags=tags, memory_type=memory_type, keywords=keywords,
                   attribute=found.name if found is not None else None,
                   theme=life or ("problem" if problem else None), forced_theme=forced, problem=problem)


def _subjects(who: str) -> set[str]:
    """The subjects a record about `who` has in canonical content ("the user", "caroline")."""
    return {normalize(who), "the user", "用户"}


def _speaker_tokens(who: str) -> set[str]:
    return {normalize(who), *content_tokens(who)}


def _with_attribute(keywords: list[str], attribute: str) -> list[str]:
    """`keywords` with the attribute's words first ("residence"; "name", "detective")."""
    parts = [p.strip() for p in attribute.split(":") if p.strip()]
    return list(dict.fromkeys([*parts, *keywords]))[:8]
