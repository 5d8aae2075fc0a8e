"""Offline, rule-based stand-ins for every model role, plus a scripted LangChain chat model.

They are honest: deterministic rules over the text they are given, never an invented fact. They
let the whole engine (extraction, update, tuning, profiles, replies) run and be tested without a
network, and they are what the lab uses until a real model is configured. English and Chinese.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from engine.core.records import PROFILE_FIELDS
from engine.core.text import (
    content_tokens,
    has_cjk,
    jaccard,
    keywords,
    normalize,
    split_clauses,
    split_sentences,
    tokenize,
)
from engine.core.timeparse import absolutize
from engine.core.timequery import parse_time_constraint
from engine.core.timespans import day_span, span_label
from engine.roles.types import (
    ROLE_NAMES,
    ConsolidationDecision,
    ConsolidationInput,
    ExtractedRecord,
    ExtractionInput,
    ExtractionOutput,
    InductionInput,
    InductionOutput,
    ParsedQuery,
    QueryInput,
    TuneInput,
    TuneOutput,
    WindowMessage,
)

__all__ = [
    "ScriptedExtractor",
    "ScriptedQueryParser",
    "ScriptedConsolidator",
    "ScriptedTuner",
    "ScriptedProfileInducer",
    "ScriptedChatModel",
    "scripted_roles",
    "THEMES",
]

ANONYMOUS = "The user"
ANONYMOUS_ZH = "用户"

# ---------------------------------------------------------------- lexicons

#: theme → words that signal it (English and Chinese). First best match wins; ties by order here.
THEMES: dict[str, tuple[str, ...]] = {
    "work": ("work", "job", "office", "boss", "colleague", "career", "company", "meeting", "project", "analyst",
             "engineer", "promotion", "salary", "client", "工作", "上班", "公司", "同事", "老板", "项目", "会议", "加班", "职业"),
    "family": ("family", "wife", "husband", "son", "daughter", "kids", "children", "mom", "dad", "mother", "father",
               "sister", "brother", "parents", "grandma", "家人", "妻子", "老婆", "丈夫", "老公", "儿子", "女儿", "孩子",
               "妈妈", "爸爸", "父母"),
    "health": ("health", "doctor", "hospital", "allergic", "allergy", "sick", "medicine", "therapy", "gym", "exercise",
               "run", "running", "diet", "sleep", "support", "counseling", "过敏", "医院", "医生", "生病", "健身", "锻炼", "药"),
    "food": ("food", "eat", "restaurant", "cook", "cooking", "dinner", "lunch", "breakfast", "coffee", "tea", "pizza",
             "sushi", "vegetarian", "peanuts", "spicy", "吃", "餐厅", "做饭", "咖啡", "茶", "火锅", "辣", "花生", "菜"),
    "travel": ("travel", "trip", "flight", "hotel", "vacation", "holiday", "visit", "visited", "abroad", "旅行", "旅游",
               "出差", "机票", "酒店", "度假"),
    "pets": ("pet", "dog", "cat", "puppy", "kitten", "狗", "猫", "宠物"),
    "hobbies": ("hobby", "painting", "paint", "music", "guitar", "piano", "read", "reading", "book", "books", "game",
                "games", "hiking", "photography", "swimming", "dance", "camping", "爱好", "画画", "音乐", "吉他", "钢琴",
                "看书", "游戏", "爬山", "摄影", "游泳"),
    "shopping": ("order", "buy", "bought", "purchase", "delivery", "refund", "shop", "shopping", "package", "订单",
                 "买", "购买", "快递", "退款", "退货"),
    "schedule": ("schedule", "appointment", "deadline", "busy", "calendar", "tomorrow", "weekend", "monday", "tuesday",
                 "wednesday", "thursday", "friday", "saturday", "sunday", "安排", "预约", "日程", "没空", "周末", "截止"),
    "education": ("school", "university", "college", "study", "studying", "class", "course", "degree", "exam",
                  "teacher", "student", "学校", "大学", "学习", "课程", "考试", "学生", "老师"),
    "finance": ("money", "bank", "card", "loan", "budget", "invest", "pay", "paid", "price", "cost", "savings",
                "银行", "信用卡", "卡", "贷款", "钱", "预算", "付款", "投资"),
    "home": ("home", "house", "apartment", "rent", "live", "lives", "moved", "move", "neighborhood", "住", "家",
             "房子", "公寓", "租", "搬家", "搬"),
    "identity": ("name", "名字", "叫"),
}  # fmt: skip

_OCCUPATIONS = (
    "engineer", "analyst", "teacher", "doctor", "nurse", "developer", "designer", "manager", "student", "lawyer",
    "writer", "artist", "counselor", "counsellor", "scientist", "programmer", "accountant", "chef", "architect",
    "consultant", "researcher", "professor", "pharmacist", "dentist", "photographer", "journalist", "editor",
    "musician", "driver", "pilot", "salesperson", "entrepreneur", "freelancer", "therapist", "officer", "worker",
    "assistant", "librarian", "mechanic", "electrician", "plumber", "farmer", "cook", "waiter", "waitress",
)  # fmt: skip
_ZH_OCCUPATION = re.compile(
    r"(?:工程师|分析师|设计师|会计师|律师|医生|护士|老师|教师|教授|学生|经理|程序员|厨师|司机|记者|编辑|销售|顾问|研究员|"
    r"建筑师|摄影师|作家|画家|演员|公务员|店主|主管|总监|产品经理)$"
)
_FAMILY = (
    "wife", "husband", "son", "daughter", "kids", "children", "mother", "father", "mom", "dad", "sister", "brother",
    "friend", "boyfriend", "girlfriend", "partner", "dog", "cat", "grandma", "grandpa", "puppy", "kitten",
)  # fmt: skip
_ZH_FAMILY = "妻子|老婆|丈夫|老公|儿子|女儿|孩子|妈妈|爸爸|母亲|父亲|姐姐|妹妹|哥哥|弟弟|朋友|男朋友|女朋友|狗|猫|宠物"

_GREETING = re.compile(
    r"^\s*(?:hi|hello|hey|yo|thanks|thank you|thx|ok|okay|sure|cool|great|nice|wow|lol|haha+|bye|goodbye|good (?:morning|"
    r"night|evening|afternoon)|see you|sounds (?:good|great)|that'?s (?:great|nice|cool|awesome|amazing|good)|"
    r"you'?re welcome|no problem|me too|yes|yeah|no|nope|awesome|amazing|got it|"
    r"你好|您好|嗨|谢谢|多谢|好的|好|嗯|哈哈+|再见|拜拜|没问题|对|是的|不客气|早上好|晚安)[\s!.,?~。！，？]*$",
    re.I,
)
_QUESTION_START = re.compile(
    r"^\s*(?:what|when|where|why|how|who|whom|which|whose|do|does|did|is|are|was|were|can|could|would|will|should|"
    r"have|has|shall|may)\b",
    re.I,
)
_QUESTION_WORDS = frozenset(
    """what when where why how who whom which whose do does did is are was were can could would will should shall
    may tell remember know 什么 什么时候 哪里 哪儿 哪 为什么 为何 怎么 怎样 谁 几 多少 吗 呢 哪天 几号 哪个 是否 请问
    记得 知道 告诉""".split()
)
_ZH_QUESTION = re.compile(r"(?:吗|呢|什么|谁|哪|几|怎么|为什么|为何|多少|是否)[^，。]*[?？]?$|[?？]\s*$")

_PREFERENCE = re.compile(
    r"\b(?:(?:I|we|really|also|still|do|don't|would|'d|they|you)\s+like|likes|love|loves|loved|enjoy|enjoys|prefer|prefers|preferred|hate|hates|dislike|dislikes|"
    r"can'?t stand|favou?rite|fond of|into)\b|喜欢|讨厌|最爱|爱吃|爱喝|偏好|更喜欢|不喜欢|受不了",
    re.I,
)
_NEGATIVE_PREF = re.compile(r"\b(?:hate|hates|dislike|dislikes|can'?t stand|don'?t like|no longer like)\b|讨厌|不喜欢|受不了", re.I)
_DECISION = re.compile(
    r"\b(?:decided|decide|will|'ll|plan to|plans to|planning|going to|gonna|intend|intends|want to|wants to|"
    r"am going|aim to|goal is|have to|has to)\b|决定|打算|准备|计划|想要|目标",
    re.I,
)
_CONSTRAINT = re.compile(
    r"\b(?:can'?t|cannot|can not|unable to|busy on|busy every|allergic|allergy|not available|unavailable|"
    r"must not|never eat|vegetarian|vegan)\b|不能|没空|没时间|过敏|不吃|忌口|不方便",
    re.I,
)
_CHANGE = re.compile(
    r"\b(?:no longer|not anymore|any ?more|now prefer|now prefers|now likes?|instead|switched to|changed to|"
    r"moved to|now lives?|new (?:phone|number|address|job))\b|不再|改成|换成|搬到|改为|现在",
    re.I,
)
_PAST = re.compile(
    r"\b(?:went|was|were|had|did|got|saw|met|visited|bought|made|took|came|gave|joined|finished|started|attended|"
    r"ran|won|lost|moved|adopted|\w+ed)\b|了|过",
    re.I,
)
_NAME_EN = re.compile(
    r"\b(?:my name is|my name's|call me|i am called|i'm called)\s+(?P<n>[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})"
    r"|\b(?:I'm|I am|this is)\s+(?P<m>[A-Z][a-z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})(?=\s*(?:[,.!;]|$|and\b|from\b|here\b))"
)
_NOT_NAMES = frozenset("sorry fine good ok okay happy sure glad tired here back new english chinese".split())
_NAME_ZH = re.compile(r"我(?:叫|的名字是|的名字叫|名叫)(?P<n>[\u4e00-\u9fff]{2,4}?)(?=[，。,.!！；;\s]|$|我|今年|是)")
_OCC_EN = re.compile(
    r"\b(?:I work as|I'm working as|I am working as|I am|I'm)\s+(?:an?\s+)(?P<o>(?:[\w-]+\s+){0,3}?(?:%s)s?)\b"
    % "|".join(_OCCUPATIONS),
    re.I,
)
_OCC_EN_AS = re.compile(r"\bI (?:work|worked) as\s+(?:an?\s+)?(?P<o>[\w\s-]+?)(?=\s+(?:at|in|for)\b|[,.;!]|$)", re.I)
_OCC_ZH = re.compile(r"我是(?:一名|一个|一位|个|名)?(?P<o>[\u4e00-\u9fff]{1,8}?)(?=[，。,.!！；;\s]|$)")
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
    % "|".join(_FAMILY),
    re.I,
)
_IDENTITY_ZH = re.compile(rf"我住在|我住|我来自|我老家|我家在|我今年|\d+岁|岁了|我在.+?工作|我的(?:{_ZH_FAMILY})|搬到|我的工作")
_LOCATION_EN = re.compile(
    r"\b(?:in|at|to|from|near|around|into|visited|visiting|visit)\s+(?:the\s+)?(?P<p>[A-Z][\w'’-]*(?:\s+(?:[A-Z][\w'’-]*|of|de))*(?:\s+[A-Z][\w'’-]*)?)"
)
_NOT_PLACES = frozenset(
    """January February March April May June July August September October November December Monday Tuesday Wednesday
    Thursday Friday Saturday Sunday I The A An My We You He She They It This That""".split()
)
_REASON_EN = re.compile(r"\b(?:because(?: of)?|since|as|due to|thanks to)\s+(?P<r>[^.;!?]+)", re.I)
_REASON_ZH = re.compile(r"(?:因为|由于)(?P<r>[^，。！？；,.;!?]+)")
_PURPOSE_EN = re.compile(
    r"\b(?:in order to|so as to|so that|so (?:I|he|she|we|they) can)\s+(?P<p>[^.;!?,]+)"
    r"|\bto\s+(?P<v>(?:learn|buy|see|visit|meet|celebrate|help|get|find|improve|save|prepare|study|relax|support|"
    r"practice|practise|train|earn|pay|pick up|attend|watch|explore|recover|lose|build|start|raise|spend|try)\b[^.;!?,]*)",
    re.I,
)
_PURPOSE_ZH = re.compile(r"(?:为了|是为了|以便|好让)(?P<p>[^，。！？；,.;!?]+)")


def _is_zh(text: str) -> bool:
    return has_cjk(text) and len(re.findall(r"[\u4e00-\u9fff]", text)) >= len(re.findall(r"[A-Za-z]+", text))


def _is_question(text: str) -> bool:
    stripped = text.strip()
    if stripped.endswith(("?", "？")):
        return True
    if _is_zh(stripped):
        return bool(re.search(r"(?:吗|呢)[。.!！]?$", stripped))
    return bool(_QUESTION_START.match(stripped)) and not re.match(r"^\s*(?:I|my)\b", stripped, re.I)


def _is_chitchat(text: str) -> bool:
    if _GREETING.match(text):
        return True
    return not content_tokens(text)


# ---------------------------------------------------------------- speaker resolution

_VERB_S = {
    "have": "has", "do": "does", "go": "goes", "am": "is", "was": "was", "watch": "watches", "wash": "washes",
    "teach": "teaches", "fix": "fixes", "miss": "misses", "try": "tries", "study": "studies", "carry": "carries",
    "worry": "worries", "cry": "cries", "fly": "flies",
}  # fmt: skip
_BASE_VERBS = frozenset(
    """love like live work prefer hate want need think enjoy play own feel know plan volunteer run read write paint
    cook drive walk eat drink visit teach study use speak keep take make hope believe remember prefer swim travel
    collect care spend dislike adore miss wish struggle attend practice practise sing dance listen watch stay
    support train get go do have""".split()
)


def _third_person(verb: str) -> str:
    low = verb.lower()
    if low in _VERB_S:
        return _VERB_S[low]
    if low in _BASE_VERBS:
        if low.endswith(("s", "sh", "ch", "x", "z", "o")):
            return verb + "es"
        if low.endswith("y") and low[-2:-1] not in "aeiou":
            return verb[:-1] + "ies"
        return verb + "s"
    return verb


def _resolve_speaker(text: str, speaker: str) -> str:
    """First person → the speaker: "I"→speaker, "my"→"<speaker>'s", 我→speaker (我们 kept)."""
    possessive = f"{speaker}'s"
    out = re.sub(r"\bI'm\b", f"{speaker} is", text)
    out = re.sub(r"\bI am\b", f"{speaker} is", out)
    out = re.sub(r"\bI've\b", f"{speaker} has", out)
    out = re.sub(r"\bI'd\b", f"{speaker} would", out)
    out = re.sub(r"\bI'll\b", f"{speaker} will", out)
    out = re.sub(r"\bI\s+([a-z]+)\b", lambda m: f"{speaker} {_third_person(m.group(1))}", out)
    out = re.sub(r"\bI\b", speaker, out)
    out = re.sub(r"\b[Mm]y\b", possessive, out)
    out = re.sub(r"\bmine\b", possessive, out)
    out = re.sub(r"\bmyself\b", speaker, out)
    out = re.sub(r"\bme\b", speaker, out)
    out = re.sub(r"我(?!们)", speaker, out)
    if speaker == ANONYMOUS:  # lower-case "the user" unless it opens the sentence
        out = re.sub(r"(?<!^)(?<![.!?]\s)\bThe user\b", "the user", out)
    return out


def _anonymous(speaker: str | None) -> bool:
    return not speaker or normalize(speaker) in ("user", "human", "the user", "用户")


def _introduced_name(text: str) -> str | None:
    if m := _NAME_EN.search(text):
        name = (m.group("n") or m.group("m") or "").strip()
        if name and normalize(name.split()[0]) not in _NOT_NAMES:
            return name
    if m := _NAME_ZH.search(text):
        return m.group("n")
    return None


# ---------------------------------------------------------------- dimensions


def _theme(text: str, fallback: Sequence[str]) -> str:
    tokens = [normalize(t) for t in tokenize(text)]
    best, best_score = "", 0
    for theme, words in THEMES.items():
        score = sum(1 for t in tokens if t in words)
        score += sum(1 for w in words if has_cjk(w) and w in text and w not in tokens)
        if score > best_score:
            best, best_score = theme, score
    if best:
        return best
    return fallback[0] if fallback else "chat"


def _location(text: str, exclude: Sequence[str]) -> str | None:
    excluded = {normalize(e) for e in exclude}
    for m in _LOCATION_EN.finditer(text):
        words = m.group("p").split()
        while words and words[0] in _NOT_PLACES:
            words = words[1:]
        while words and words[-1] in ("of", "de"):
            words = words[:-1]
        place = " ".join(words)
        if place and normalize(place) not in excluded and not any(normalize(place).startswith(e) for e in excluded if e):
            return place
    if has_cjk(text):
        import jieba.posseg as pseg

        from engine.core.text import _segmenter

        _segmenter()
        run: list[str] = []
        for pair in pseg.cut(text):
            if pair.flag == "ns":
                run.append(pair.word)
            elif run:
                break
        if run:
            return "".join(run)
    return None


def _reason(text: str) -> str | None:
    if m := _REASON_ZH.search(text):
        return m.group("r").strip()
    for m in _REASON_EN.finditer(text):
        reason = m.group("r").strip(" ,")
        if re.match(r"(?:\d|January|February|March|April|May|June|July|August|September|October|November|December|"
                     r"last|then|early|late|\d{4})", reason):
            continue  # "since May": temporal, not a reason
        if m.group(0).lower().startswith("as ") and not re.match(r"(?:\w+\s+){0,2}(?:is|are|was|were|had|have|has)\b", reason):
            continue  # "as a teacher": not a reason
        return reason
    return None


def _purpose(text: str) -> str | None:
    if m := _PURPOSE_ZH.search(text):
        return m.group("p").strip()
    if m := _PURPOSE_EN.search(text):
        return (m.group("p") or m.group("v")).strip()
    return None


# ---------------------------------------------------------------- extractor


_WEAK_KEYWORDS = frozenset("because as said called ends but also since 但是 而且 为了 对 了 去 说 年 月 日 号".split())


def _keywords(content: str, time_label: str | None, *, extra: Sequence[str]) -> list[str]:
    """Record keywords: names, numbers and content words, not the pieces of the date label."""
    spaced = re.sub(r"(?<=[0-9A-Za-z])(?=[\u4e00-\u9fff])|(?<=[\u4e00-\u9fff])(?=[0-9A-Za-z])", " ", content)
    date_parts = set(re.findall(r"\d+", time_label or ""))
    date_words = re.compile(r"^\d{4}年|^\d{1,2}[月日]$")
    candidates = keywords(spaced, limit=24, extra=extra)
    kept = [k for k in candidates if k not in date_parts and not date_words.match(k) and k not in _WEAK_KEYWORDS]
    return kept[:8]


class ScriptedExtractor:
    """Sentence/clause rules: one atomic, self-contained record per informative user clause."""

    def extract(self, inp: ExtractionInput) -> ExtractionOutput:
        names = self._known_names([*inp.context, *inp.new])
        records: list[ExtractedRecord] = []
        for msg in inp.new:
            if msg.role != "user":
                continue  # assistant statements are never user facts
            speaker = msg.speaker if not _anonymous(msg.speaker) else names.get(msg.role, "")
            records.extend(self._from_message(msg, speaker))
        return ExtractionOutput(records=records)

    @staticmethod
    def _known_names(messages: Sequence[WindowMessage]) -> dict[str, str]:
        """An anonymous user who introduced themselves is called by that name afterwards."""
        names: dict[str, str] = {}
        for msg in messages:
            if msg.role == "user" and _anonymous(msg.speaker):
                if name := _introduced_name(msg.content):
                    names["user"] = name
        return names

    def _from_message(self, msg: WindowMessage, speaker: str) -> list[ExtractedRecord]:
        out = []
        for sentence in split_sentences(msg.content):
            if _is_question(sentence) and _ADVICE.search(sentence):
                # asking for advice is an episode worth keeping: the assistant's answer to it is
                # what "what did you recommend last time?" recalls through this record's source
                record = self._advice(sentence, msg, speaker)
                if record is not None:
                    out.append(record)
                continue
            if _is_question(sentence) or _is_chitchat(sentence):
                continue
            for clause in split_clauses(sentence):
                if _is_chitchat(clause) or _is_question(clause):
                    continue
                if _ZH_SUBJECTLESS.match(clause):
                    clause = "我" + clause  # "我叫王芳，是一名老师": the second clause's subject is 我
                record = self._record(clause, msg, speaker)
                if record is not None:
                    out.append(record)
        return out

    def _advice(self, question: str, msg: WindowMessage, speaker: str) -> ExtractedRecord | None:
        zh = _is_zh(question)
        who = speaker or (ANONYMOUS_ZH if zh else ANONYMOUS)
        rewritten, mentions = absolutize(question, anchor=msg.at)
        asked = _resolve_speaker(rewritten, who).strip()
        substance = set(content_tokens(question)) - _QUESTION_WORDS - {"think", "recommend", "suggest", "advice",
                                                                       "tips", "ideas", "better", "one"}
        if len(substance) < 2:
            return None  # "What do you think?" carries nothing to remember
        day = span_label(day_span(msg.at.date(), msg.at.tzinfo))
        content = f"{who}在{day}请教：{asked}" if zh else f"On {day} {who} asked for advice: {asked}"
        kw = _keywords(asked, None, extra=[w for w in (speaker,) if w])
        return ExtractedRecord(content=content, memory_type="episodic", tags=["episode", "decision"],
                               theme=_theme(question, kw), time=day, keywords=kw, source_ids=[msg.id],
                               speaker=speaker or ANONYMOUS)

    def _record(self, clause: str, msg: WindowMessage, speaker: str) -> ExtractedRecord | None:
        zh = _is_zh(clause)
        who = speaker or (ANONYMOUS_ZH if zh else ANONYMOUS)
        rewritten, mentions = absolutize(clause, anchor=msg.at)
        name = _introduced_name(clause)
        occupation = self._occupation(clause)
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
            content = _resolve_speaker(rewritten, who)
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
        if _PREFERENCE.search(clause):
            tags.append("preference")
        if _DECISION.search(clause):
            tags.append("decision")
        time_label = span_label(mentions[0].span) if mentions else None
        past_event = bool(mentions) and mentions[0].span.start <= msg.at and bool(_PAST.search(clause))
        if past_event:
            tags.append("episode")
        if _CONSTRAINT.search(clause) or not tags:
            tags.append("fact")
        tags = list(dict.fromkeys(tags))

        if "identity" in tags or "preference" in tags:
            memory_type = "profile"
        elif "episode" in tags:
            memory_type = "episodic"
        else:
            memory_type = "fact"

        location = _location(content, exclude=[who, name or ""]) if not name else None
        kw = _keywords(content, time_label, extra=[w for w in (speaker, name, location) if w])
        if attr := _attribute(content):
            # the attribute a single-valued statement sets ("residence", "phone") is a keyword, so the
            # update step's keyword blocking pairs "lives in Beijing" with "lives in Shanghai"
            kw = list(dict.fromkeys([attr[0].replace(":", " ").strip(), *kw]))[:8]
        theme = "identity" if name else ("work" if occupation else _theme(clause, [k for k in kw if k != normalize(who)]))
        return ExtractedRecord(
            content=content,
            memory_type=memory_type,
            tags=tags,
            theme=theme,
            time=time_label,
            location=location,
            reason=_reason(content),
            purpose=_purpose(content),
            keywords=kw,
            source_ids=[msg.id],
            speaker=speaker or ANONYMOUS,
        )

    @staticmethod
    def _occupation(clause: str) -> str | None:
        if m := _OCC_EN_AS.search(clause):
            return m.group("o").strip()
        if m := _OCC_EN.search(clause):
            return m.group("o").strip()
        if (m := _OCC_ZH.search(clause)) and _ZH_OCCUPATION.search(m.group("o")):
            return m.group("o")
        return None


# ---------------------------------------------------------------- query parser

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
]
_EPISODIC_Q = re.compile(r"\bwhen\b|\bwhat happened\b|\bwhat did\b.*\bdo\b|什么时候|发生了什么|做了什么|哪天", re.I)
_PROFILE_Q = re.compile(
    r"\bname\b|\bjob\b|\bwork\b|\boccupation\b|\blike\b|\blikes\b|\bfavou?rite\b|\bprefer|\blive\b|\blives\b|\bage\b"
    r"|名字|叫什么|工作|职业|喜欢|住在|住哪|多大|几岁",
    re.I,
)


class ScriptedQueryParser:
    """A question → keywords, target types, time constraint, location, answer dimension."""

    def parse(self, inp: QueryInput) -> ParsedQuery:
        text = inp.text
        kws = [t for t in content_tokens(text) if t not in _QUESTION_WORDS]
        kws = list(dict.fromkeys(kws))
        targets: list[str] = []
        if _EPISODIC_Q.search(text):
            targets.append("episodic")
        if _PROFILE_Q.search(text):
            targets.append("profile")
        dimension = "content"
        for name, pattern in _DIMENSIONS:
            if pattern.search(text):
                dimension = name
                break
        location = None
        if m := re.search(r"\b(?:in|at|to|from)\s+(?P<p>[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)", text):
            place = " ".join(w for w in m.group("p").split() if w not in _NOT_PLACES)
            location = place or None
        elif has_cjk(text) and (m := re.search(r"在(?P<p>[\u4e00-\u9fff]{2,6}?)(?:的|时|期间|做|干|吃|玩|工作|$)", text)):
            location = m.group("p")
        anchor_tokens = [t for t in re.split(r"(\s+)", text) if normalize(t.strip(" ?？.!,")) not in _QUESTION_WORDS]
        anchor = re.sub(r"\s+", " ", "".join(anchor_tokens)).strip(" ?？.!。")
        if has_cjk(anchor):
            for word in sorted((w for w in _QUESTION_WORDS if has_cjk(w)), key=len, reverse=True):
                anchor = anchor.replace(word, "")
        return ParsedQuery(
            text=text,
            anchor=anchor.strip(" ?？.!。"),
            keywords=kws,
            target_types=targets,
            time=parse_time_constraint(text, now=inp.now),
            location=location,
            needs_assistant=bool(_NEEDS_ASSISTANT.search(text)),
            answer_dimension=dimension,
        )


# ---------------------------------------------------------------- consolidator

_ATTRIBUTES = [
    ("name", re.compile(r"(?:'s name is|^[^']*?\bname is|名字是|名字叫)\s*(?P<v>.+)", re.I)),
    ("residence", re.compile(r"\b(?:lives? in|living in|moved to|relocated to|is from|resides in)\s+(?P<v>.+)|(?:住在|搬到|搬去|来自)(?P<w>.+)", re.I)),
    ("occupation", re.compile(r"\b(?:works? as|is an?)\s+(?P<v>.*?\b(?:%s)s?\b.*)|是(?:一名|一个|一位)?(?P<w>.+?(?:师|员|生|经理|医生|老师))" % "|".join(_OCCUPATIONS), re.I)),
    ("favourite", re.compile(r"\bfavou?rite\s+(?P<k>[\w\s]+?)\s+(?:is|was)\s+(?P<v>.+)|最喜欢的(?P<zk>\S+?)是(?P<w>.+)", re.I)),
    ("phone", re.compile(r"\b(?:phone|mobile|cell)(?: number)?\s+(?:is|:)\s*(?P<v>.+)|(?:手机号|电话)(?:码)?(?:是|：|:)?(?P<w>.+)", re.I)),
    ("email", re.compile(r"\bemail(?: address)?\s+(?:is|:)\s*(?P<v>.+)|邮箱(?:是|：|:)?(?P<w>.+)", re.I)),
    ("address", re.compile(r"\baddress\s+(?:is|:)\s*(?P<v>.+)|地址(?:是|：|:)?(?P<w>.+)", re.I)),
    ("age", re.compile(r"\b(?:is|turned)\s+(?P<v>\d+)\s+years? old|(?P<w>\d+)岁", re.I)),
]


def _attribute(content: str) -> tuple[str, str] | None:
    """(attribute, value) when the content states a single-valued attribute, e.g. where one lives."""
    for key, pattern in _ATTRIBUTES:
        if m := pattern.search(content):
            groups = m.groupdict()
            value = groups.get("v") or groups.get("w") or ""
            sub = groups.get("k") or groups.get("zk")
            attr = f"{key}:{normalize(sub).strip()}" if sub else key
            value = normalize(value).strip(" .。!！")
            return attr, " ".join(content_tokens(value)) or value
    return None


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

        if kind == "episodic":
            if new.time and new.time == old.time and overlap >= 0.5:
                return ConsolidationDecision(action="MERGE", merged_content=merged, reason=f"same event on {new.time}")
            return ConsolidationDecision(action="KEEP_BOTH", reason="different events (time or content differ)")

        new_attr, old_attr = _attribute(new.content), _attribute(old.content)
        if new_attr and old_attr and new_attr[0] == old_attr[0]:
            a, b = set(new_attr[1].split()), set(old_attr[1].split())
            if a <= b or b <= a:  # same value, or one refines the other ("Beijing" / "Beijing Chaoyang")
                return ConsolidationDecision(action="MERGE", merged_content=merged, reason=f"same {new_attr[0]}")
            return ConsolidationDecision(
                action="SUPERSEDE", reason=f"{new_attr[0]} changed from {old_attr[1]!r} to {new_attr[1]!r}"
            )
        digits_new = {t for t in new_tokens if any(c.isdigit() for c in t)}
        digits_old = {t for t in old_tokens if any(c.isdigit() for c in t)}
        words_overlap = jaccard(set(new_tokens) - digits_new, set(old_tokens) - digits_old)
        if digits_new and digits_old and digits_new != digits_old and words_overlap >= 0.6 and kind != "episodic":
            return ConsolidationDecision(action="SUPERSEDE", reason="same statement with a changed number")

        if kind == "profile" or "preference" in new.tags:
            polarity_flip = bool(_NEGATIVE_PREF.search(new.content)) != bool(_NEGATIVE_PREF.search(old.content))
            if _CHANGE.search(new.content) and overlap >= 0.2:
                return ConsolidationDecision(action="SUPERSEDE", reason="explicit change of preference")
            if polarity_flip and words_overlap >= 0.4:
                return ConsolidationDecision(action="SUPERSEDE", reason="preference reversed")
            if overlap >= 0.6:
                return ConsolidationDecision(action="MERGE", merged_content=merged, reason="same preference")
            return ConsolidationDecision(action="KEEP_BOTH", reason="different preferences")

        if _CHANGE.search(new.content) and overlap >= 0.3:
            return ConsolidationDecision(action="SUPERSEDE", reason="explicit change of a fact")
        if overlap >= 0.7:
            return ConsolidationDecision(action="MERGE", merged_content=merged, reason="same fact")
        return ConsolidationDecision(action="KEEP_BOTH", reason="different facts")


# ---------------------------------------------------------------- tuner

_GAMMA_THEMES = frozenset("identity profile family name relationships pets health preferences 身份 家庭 宠物 健康".split())
_BETA_THEMES = frozenset("schedule travel appointment deadline events calendar plans 日程 出行 旅行 安排".split())


class ScriptedTuner:
    """Weights per theme: identity-like → γ (importance), time-sensitive → β (recency), else α."""

    def tune(self, inp: TuneInput) -> TuneOutput:
        theme = normalize(inp.theme).strip()
        if theme in _GAMMA_THEMES:
            alpha, beta, w, delta, why = 0.30, 0.15, (0.10, 0.70, 0.20), 0.05, "identity-like: favour importance (γ)"
        elif theme in _BETA_THEMES:
            alpha, beta, w, delta, why = 0.30, 0.45, (0.15, 0.75, 0.10), 0.0, "time-sensitive: favour recency (β)"
        else:
            alpha, beta, w, delta, why = 0.45, 0.25, (0.10, 0.80, 0.10), 0.0, "topical: favour relevance (α)"
        timed = sum(1 for s in inp.samples if re.search(r"\d{4}-\d{2}|\d{4}年", s))
        if inp.samples and timed * 2 > len(inp.samples):  # mostly dated samples: lean to recency
            shift = min(0.1, alpha - 0.2)
            alpha, beta = alpha - shift, beta + shift
            why += "; dated samples shift 0.1 from α to β"
        alpha, beta = round(alpha, 3), round(beta, 3)
        gamma = round(1.0 - alpha - beta, 3)
        w0, w1 = w[0], w[1]
        w2 = round(1.0 - w0 - w1, 3)
        return TuneOutput(alpha=alpha, beta=beta, gamma=gamma, delta=delta, w0=w0, w1=w1, w2=w2, rationale=why)


# ---------------------------------------------------------------- profile inducer

_SINGLE_VALUED = ("name: ", "lives in ")
_RELATION_EN = re.compile(
    r"(?:'s|\bmy)\s+(?P<r>%s)(?:'s name)?\s*(?:,\s*)?(?:is\s+(?:called\s+|named\s+)?|called\s+|named\s+)?(?P<n>[A-Z][\w'-]*)"
    % "|".join(_FAMILY)
)
_RELATION_ZH = re.compile(rf"的(?P<r>{_ZH_FAMILY})(?:叫|是|名叫)(?P<n>[\u4e00-\u9fffA-Za-z0-9]{{1,6}}?)(?=[，。,.!！\s]|$)")


def _same(a: str, b: str) -> bool:
    ta, tb = content_tokens(a), content_tokens(b)
    if not ta or not tb:
        return normalize(a).strip() == normalize(b).strip()
    return jaccard(ta, tb) >= 0.6


class ScriptedProfileInducer:
    """Records → profile fields, skipping values that paraphrase one already there."""

    def induct(self, inp: InductionInput) -> InductionOutput:
        current = {k: list(v) for k, v in inp.profile.items()}
        add: dict[str, list[str]] = {}
        remove: dict[str, list[str]] = {}

        def put(field_name: str, value: str, *, single_prefix: str | None = None) -> None:
            value = value.strip()
            if not value:
                return
            existing = current.get(field_name, []) + add.get(field_name, [])
            if single_prefix is not None:  # single-valued: same value exactly, or a replacement
                if any(normalize(value) == normalize(e) for e in existing):
                    return
            elif any(_same(value, e) for e in existing):
                return
            if single_prefix is not None:
                for old in existing:
                    if old.startswith(single_prefix) or single_prefix == "":
                        if old in add.get(field_name, []):
                            add[field_name].remove(old)
                        else:
                            remove.setdefault(field_name, []).append(old)
            add.setdefault(field_name, []).append(value)

        for rec in inp.records:
            text = rec.content
            attr = _attribute(text)
            used = False
            if attr and attr[0] == "name":
                name = re.sub(r"[.。!！]+$", "", re.split(r"(?:'s name is|名字是|名字叫)\s*", text, maxsplit=1)[-1]).strip()
                put("identity", f"name: {name}", single_prefix="name: ")
                used = True
            occupation = ScriptedExtractor._occupation(_first_person_again(text))
            if occupation or (attr and attr[0] == "occupation"):
                value = occupation or attr[1]
                put("occupation", value, single_prefix="")
                used = True
            if attr and attr[0] == "residence":
                raw = _ATTRIBUTES[1][1].search(text)
                place = rec.location or ((raw.group("v") or raw.group("w")) if raw else attr[1]).strip(" .。!！")
                put("identity", f"lives in {place}", single_prefix="lives in ")
                used = True
            for m in list(_RELATION_EN.finditer(text)) + list(_RELATION_ZH.finditer(text)):
                put("relationships", f"{m.group('r')}: {m.group('n')}")
                used = True
            if _CONSTRAINT.search(text):
                put("constraints", text)
                used = True
            elif "preference" in rec.tags or _PREFERENCE.search(text):
                put("preferences", text)
                used = True
            elif "decision" in rec.tags and rec.memory_type != "episodic":
                put("goals", text)
                used = True
            if not used and "identity" in rec.tags:
                put("facts", text)
        return InductionOutput(
            add={k: v for k, v in add.items() if v and k in PROFILE_FIELDS},
            remove={k: v for k, v in remove.items() if v},
        )


def _first_person_again(content: str) -> str:
    """Undo "<Name> works as" → "I work as" so the occupation rules (first person) apply."""
    out = re.sub(r"^[\w .'-]+?\s+(?:works|worked)\s+as\b", "I work as", content)
    out = re.sub(r"^[\w .'-]+?\s+is\s+(an?)\b", r"I am \1", out)
    return re.sub(r"^[\u4e00-\u9fff]{1,4}?是", "我是", out)


# ---------------------------------------------------------------- chat model

_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


def approx_tokens(text: str) -> int:
    """A rough token count: one per CJK character, one per four other characters."""
    cjk = len(_CJK_CHAR.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def _text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and part.get("type") == "text":
            parts.append(str(part.get("text", "")))
    return "\n".join(parts)


_CURRENT_DATE = re.compile(r"Current date: (\d{4}-\d{2}-\d{2})")
_DATE_LABEL = re.compile(r"\d{4}-\d{2}-\d{2}(?:\.\.\d{4}-\d{2}-\d{2})?|\d{4}-\d{2}(?!-)|(?<![\d-])\d{4}(?![\d-])")


def _stem(token: str) -> str:
    """A crude English stem (lives/lived/living -> liv) so the stand-in matches inflections."""
    if has_cjk(token) or len(token) <= 3:
        return token
    for suffix in ("ing", "ed", "es", "s"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            return token[: -len(suffix)].rstrip("e")
    return token.rstrip("e")


def _time_constraint(question: str, system: str):
    """The question's time constraint, resolved against the current date the prompt shows."""
    from datetime import UTC, datetime

    m = _CURRENT_DATE.search(system)
    if not m:
        return None
    now = datetime.fromisoformat(m.group(1)).replace(hour=12, tzinfo=UTC)
    try:
        return parse_time_constraint(question, now=now)
    except Exception:  # noqa: BLE001 - a stand-in never fails on odd text
        return None


def _time_words(question: str) -> set[str]:
    from datetime import UTC, datetime

    from engine.core.timeparse import resolve_times

    words: set[str] = set()
    for mention in resolve_times(question, anchor=datetime(2000, 1, 1, tzinfo=UTC)):
        words.update(_stem(t) for t in content_tokens(mention.surface))
    return words | {"weekend", "week", "month", "year", "yesterday", "today"}


def _line_in_time(line: str, when) -> bool:
    from datetime import UTC

    from engine.core.timequery import time_match
    from engine.core.timespans import parse_time_label

    for label in _DATE_LABEL.findall(line):
        try:
            span = parse_time_label(label, UTC)
        except Exception:  # noqa: BLE001
            continue
        if time_match(when, span) >= 0.99:
            return True
    return False


def _shown_data_lines(system: str) -> list[str]:
    """The lines of a system prompt that carry facts: inside the engine's data fences when the
    prompt has them (the instructions around them are not facts), else every line."""
    from engine.memory.injection import (
        PROFILE_CLOSE,
        PROFILE_OPEN,
        RECORDS_CLOSE,
        RECORDS_OPEN,
    )

    if RECORDS_OPEN not in system and PROFILE_OPEN not in system:
        return system.splitlines()
    out: list[str] = []
    inside = False
    for line in system.splitlines():
        if line.strip() in (RECORDS_OPEN, PROFILE_OPEN):
            inside = True
        elif line.strip() in (RECORDS_CLOSE, PROFILE_CLOSE):
            inside = False
        elif inside:
            out.append(line)
    return out


class ScriptedChatModel(BaseChatModel):
    """A deterministic chat model that answers only from what it was shown.

    Candidate lines are the system message lines and the earlier messages; a question gets the
    best-overlapping line(s), a statement a short acknowledgement. It never states anything it was
    not shown, which makes memory injection measurable offline.
    """

    bound_tools: list[dict[str, Any]] = Field(default_factory=list)
    max_lines: int = 2

    @property
    def _llm_type(self) -> str:
        return "memlab-scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": "memlab-scripted", "tools": [t["function"]["name"] for t in self.bound_tools]}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        """A copy that knows these tools (LangChain tools, functions or OpenAI-style dicts)."""
        return self.model_copy(update={"bound_tools": [convert_to_openai_tool(t) for t in tools]})

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager=None, **kwargs: Any):
        reply, tool_calls = self._reply(messages)
        input_tokens = sum(approx_tokens(_text_of(m)) for m in messages)
        output_tokens = approx_tokens(reply)
        message = AIMessage(
            content=reply,
            tool_calls=tool_calls,
            usage_metadata={
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            },
            response_metadata={"model_name": "memlab-scripted"},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _reply(self, messages: list[BaseMessage]) -> tuple[str, list[dict[str, Any]]]:
        last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None)
        if messages and isinstance(messages[-1], ToolMessage):
            tool_msg = messages[-1]
            name = tool_msg.name or "the tool"
            return f"{name} returned: {_text_of(tool_msg)}", []
        if last_human is None:
            return "Hello. What would you like to talk about?", []
        question = _text_of(messages[last_human])
        zh = _is_zh(question)
        if tool_call := self._tool_call(question, last_human):
            return "", [tool_call]
        lines: list[str] = []
        for i, m in enumerate(messages):
            if i == last_human:
                continue
            text = _text_of(m)
            if isinstance(m, SystemMessage):
                lines.extend(line.strip(" -*•\t") for line in _shown_data_lines(text))
            elif i < last_human:
                lines.extend(split_sentences(text))
        lines = [line for line in dict.fromkeys(lines) if content_tokens(line)]
        if not _is_question(question):
            return ("好的，我记下了。" if zh else "Noted."), []
        system = "\n".join(_text_of(m) for m in messages if isinstance(m, SystemMessage))
        when = _time_constraint(question, system)
        time_words = _time_words(question) if when is not None else set()
        asked = {_stem(t) for t in content_tokens(question) if t not in _QUESTION_WORDS} - time_words
        scored = []
        needed = max(1, math.ceil(len(asked) / 2))  # a shared name alone is not an answer
        for order, line in enumerate(lines):
            hits = len(asked & {_stem(t) for t in content_tokens(line)})
            if when is not None and _line_in_time(line, when):
                hits += 2  # the question's time, resolved against the shown current date, fits this line
            if hits >= needed:
                scored.append((-hits, order, line))
        if not scored:
            return ("我不知道，我掌握的信息里没有提到。" if zh else "I don't know; nothing I was given mentions that."), []
        scored.sort()
        best = scored[0][0]
        picked = [line for hits, _, line in scored[: self.max_lines] if hits == best]
        joined = " ".join(picked)
        return (f"根据我掌握的信息：{joined}" if zh else f"From what I have: {joined}"), []

    def _tool_call(self, text: str, index: int) -> dict[str, Any] | None:
        for spec in self.bound_tools:
            fn = spec["function"]
            name = fn["name"]
            if not re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text):
                continue
            props = fn.get("parameters", {}).get("properties", {}) or {}
            arg_name = next((k for k, v in props.items() if v.get("type", "string") == "string"), None)
            arg_name = arg_name or next(iter(props), "query")
            rest = text.split(name, 1)[1]
            m = re.search(r"\b(?:for|in|about|on|with|of)\s+(?P<v>.+)", rest) or re.search(r"(?P<v>\S.*)", rest)
            value = (m.group("v") if m else text).strip(" ?？.!。,:：\"'")
            return {"name": name, "args": {arg_name: value or text}, "id": f"call_{index}_{name}", "type": "tool_call"}
        return None


def scripted_roles() -> dict[str, object]:
    """One scripted instance of every model role, keyed by engine.roles.ROLE_NAMES."""
    makers = {
        "extractor": ScriptedExtractor,
        "query_parser": ScriptedQueryParser,
        "consolidator": ScriptedConsolidator,
        "tuner": ScriptedTuner,
        "inducer": ScriptedProfileInducer,
        "chat": ScriptedChatModel,
    }
    return {name: makers[name]() for name in ROLE_NAMES}
