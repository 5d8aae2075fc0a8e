"""The scripted roles' shared language rules, English and Chinese: lexicons, question and
small-talk detection, speaker resolution, names and occupations, and the dimensions of a
statement (theme, location, reason, purpose, keywords).

Deterministic rules over the text they are given; they never invent a fact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.core.attributes import OCCUPATIONS
from engine.core.text import (
    content_tokens,
    has_cjk,
    keywords,
    normalize,
    segmenter,
    tokenize,
)
from engine.roles.rules.lexicon import NOT_PLACES, QUESTION_WORDS  # noqa: F401 - re-exported for the stand-ins
from engine.roles.scripted.names import ZH_OCCUPATION, chinese_self_name

__all__ = [
    "ANONYMOUS",
    "ANONYMOUS_ZH",
    "THEMES",
    "FAMILY",
    "ZH_FAMILY",
    "QUESTION_WORDS",
    "PREFERENCE",
    "NEGATIVE_PREFERENCE",
    "CONSTRAINT",
    "CHANGE",
    "NOT_PLACES",
    "is_zh",
    "is_question",
    "is_chitchat",
    "resolve_speaker",
    "third_person",
    "is_anonymous",
    "introduced_name",
    "occupation_of",
    "theme_of",
    "location_of",
    "reason_of",
    "purpose_of",
    "record_keywords",
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

FAMILY = (
    "wife", "husband", "son", "daughter", "kids", "children", "mother", "father", "mom", "dad", "sister", "brother",
    "friend", "boyfriend", "girlfriend", "partner", "dog", "cat", "grandma", "grandpa", "puppy", "kitten",
)  # fmt: skip
ZH_FAMILY = "妻子|老婆|丈夫|老公|儿子|女儿|孩子|妈妈|爸爸|母亲|父亲|姐姐|妹妹|哥哥|弟弟|朋友|男朋友|女朋友|狗|猫|宠物"

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
PREFERENCE = re.compile(
    r"\b(?:(?:I|we|really|also|still|do|don't|would|'d|they|you)\s+like|likes|love|loves|loved|enjoy|enjoys|prefer|prefers|preferred|hate|hates|dislike|dislikes|"
    r"can'?t stand|favou?rite|fond of|into)\b|喜欢|讨厌|最爱|爱吃|爱喝|偏好|更喜欢|不喜欢|受不了",
    re.I,
)
NEGATIVE_PREFERENCE = re.compile(r"\b(?:hate|hates|dislike|dislikes|can'?t stand|don'?t like|no longer like)\b|讨厌|不喜欢|受不了", re.I)
CONSTRAINT = re.compile(
    r"\b(?:can'?t|cannot|can not|unable to|busy on|busy every|allergic|allergy|not available|unavailable|"
    r"must not|never eat|vegetarian|vegan)\b|不能|没空|没时间|过敏|不吃|忌口|不方便",
    re.I,
)
CHANGE = re.compile(
    r"\b(?:no longer|not anymore|any ?more|now prefer|now prefers|now likes?|instead|switched to|changed to|"
    r"moved to|now lives?|new (?:phone|number|address|job))\b|不再|改成|换成|搬到|改为|现在",
    re.I,
)
_NAME_EN = re.compile(
    r"\b(?i:my name is|my name's|call me|i am called|i'm called)\s+(?P<n>[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})"
    r"|\b(?:I'm|I am|this is)\s+(?P<m>[A-Z][a-z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})(?=\s*(?:[,.!;]|$|and\b|from\b|here\b))"
)
_NOT_NAMES = frozenset("sorry fine good ok okay happy sure glad tired here back new english chinese".split())
_OCC_EN = re.compile(
    r"\b(?:I work as|I'm working as|I am working as|I am|I'm)\s+(?:an?\s+)(?P<o>(?:[\w-]+\s+){0,3}?(?:%s)s?)\b"
    % "|".join(OCCUPATIONS),
    re.I,
)
_OCC_EN_AS = re.compile(r"\bI (?:work|worked) as\s+(?:an?\s+)?(?P<o>[\w\s-]+?)(?=\s+(?:at|in|for)\b|[,.;!]|$)", re.I)
_OCC_ZH = re.compile(r"我是(?:一名|一个|一位|个|名)?(?P<o>[\u4e00-\u9fff]{1,8}?)(?=[，。,.!！；;\s]|$)")

_LOCATION_EN = re.compile(
    r"(?<!\blooking )(?<!\blook )(?<!\blooked )(?<!\bgood )(?<!\bgreat )(?<!\bbad )(?<!\btalk )(?<!\btalking )"
    r"(?<!\blistening )(?<!\blisten )(?<!\bswitched )(?<!\bswitch )(?<!\bupgrade )(?<!\bupgraded )"
    r"\b(?:in|at|to|from|near|around|into|visited|visiting|visit)\s+(?:the\s+)?(?P<p>[A-Z][\w'’-]*(?:\s+(?:[A-Z][\w'’-]*|of|de))*(?:\s+[A-Z][\w'’-]*)?)"
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


def is_zh(text: str) -> bool:
    """Mostly Chinese: at least as many Han characters as Latin words."""
    return has_cjk(text) and len(re.findall(r"[\u4e00-\u9fff]", text)) >= len(re.findall(r"[A-Za-z]+", text))


def is_question(text: str) -> bool:
    """A question: ends in ?, a Chinese 吗/呢 ending, or an English question word first."""
    stripped = text.strip()
    if stripped.endswith(("?", "？")):
        return True
    if is_zh(stripped):
        return bool(re.search(r"(?:吗|呢)[。.!！]?$", stripped))
    if not _QUESTION_START.match(stripped) or re.match(r"^\s*(?:I|my)\b", stripped, re.I):
        return False
    return not _month_or_name_first(stripped)


#: question words that are also a month or a name ("May delivery goes to the office", "Will is my brother")
_MODAL_OR_NOUN = re.compile(r"^\s*(?P<w>May|Will)\s+(?P<next>\S+)")
_SUBJECTS = frozenset(
    """i we you he she they it one this that these those the a an my your our his her their someone somebody anyone
    everyone there not""".split()
)


def _month_or_name_first(text: str) -> bool:
    """A capitalised May / Will opening a sentence is a month or a name unless a subject follows:
    "May I ask" and "Will you come" are questions, "May delivery goes..." and "May 5 is..." are not."""
    m = _MODAL_OR_NOUN.match(text)
    if not m:
        return False
    following = m.group("next").strip(",.;:!").lower()
    return following not in _SUBJECTS and not (m.group("next")[:1].isupper() and m.group("w") == "Will")


def is_chitchat(text: str) -> bool:
    """Small talk (greetings, thanks, "ok") or no content word at all: nothing to remember."""
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


#: words after "I" that stay as they are: modals, past forms (regular ones end in -ed), words
#: whose present and past are the same ("I put it there yesterday"), and words that are no verb
_UNCHANGED = frozenset(
    """can could will would shall should must might may did was were had went got bought made took came saw met said
    told gave found left felt kept thought brought began ran wrote ate drank spent lost paid sent built sold taught
    caught fell won knew grew drew flew threw wore chose spoke broke woke drove rode rose sang swam sat stood
    understood held heard meant slept fed led became forgot hid shook stole struck sought fought bit lit dealt
    put read cut let set hit hurt cost quit shut spread split bet cast and or but too so then not alone myself
    personally only even either neither both""".split()
)


def third_person(verb: str) -> str:
    """The third person singular of an English base verb ("have" → "has", "live" → "lives", "shop" →
    "shops"); past forms, modals and non-verbs are returned unchanged."""
    low = verb.lower()
    if low in _VERB_S:
        return _VERB_S[low]
    if low in _BASE_VERBS or (low.isalpha() and low not in _UNCHANGED and not low.endswith(("ed", "ly"))):
        if low.endswith(("s", "sh", "ch", "x", "z", "o")):
            return verb + "es"
        if low.endswith("y") and low[-2:-1] not in "aeiou":
            return verb[:-1] + "ies"
        return verb + "s"
    return verb


def resolve_speaker(text: str, speaker: str) -> str:
    """First person → the speaker: "I"→speaker, "my"→"<speaker>'s", 我→speaker (我们 kept)."""
    possessive = f"{speaker}'s"
    out = re.sub(r"\bI'm\b", f"{speaker} is", text)
    out = re.sub(r"\bI am\b", f"{speaker} is", out)
    out = re.sub(r"\bI don'?t\b", f"{speaker} doesn't", out)
    out = re.sub(r"\bI do not\b", f"{speaker} does not", out)
    out = re.sub(r"\bI haven'?t\b", f"{speaker} hasn't", out)
    out = re.sub(r"\bI have not\b", f"{speaker} has not", out)
    out = re.sub(r"\bI've\b", f"{speaker} has", out)
    out = re.sub(r"\bI'd\b", f"{speaker} would", out)
    out = re.sub(r"\bI'll\b", f"{speaker} will", out)
    out = re.sub(r"\bI\s+((?:(?:no longer|also|still|just|really|now|always|never|usually|often|sometimes|already|"
                 r"recently|actually|finally|only|mostly|rarely|even|\w+ly)\s+)*)([a-z]+)\b",
                 lambda m: f"{speaker} {m.group(1)}{third_person(m.group(2))}", out)
    out = re.sub(r"\bI\b", speaker, out)
    out = re.sub(r"\b[Mm]y\b", possessive, out)
    out = re.sub(r"\bmine\b", possessive, out)
    out = re.sub(r"\bmyself\b", speaker, out)
    out = re.sub(r"\bme\b", speaker, out)
    out = re.sub(rf"我(?=(?:{ZH_FAMILY}))", f"{speaker}的", out)  # 我妹妹 → 王芳的妹妹
    out = re.sub(r"我(?!们)", speaker, out)
    if speaker == ANONYMOUS:  # lower-case "the user" unless it opens the sentence
        out = re.sub(r"(?<!^)(?<![.!?]\s)\bThe user\b", "the user", out)
    return out


def is_anonymous(speaker: str | None) -> bool:
    """The speaker is unnamed ("user", "human", 用户): records say "The user" until a name is known."""
    return not speaker or normalize(speaker) in ("user", "human", "the user", "用户")


def introduced_name(text: str) -> str | None:
    """The name a speaker introduces themselves by ("my name is Li", "I'm Carol,", 我叫王芳, 我是李明轩)."""
    if m := _NAME_EN.search(text):
        name = (m.group("n") or m.group("m") or "").strip()
        if name and normalize(name.split()[0]) not in _NOT_NAMES:
            return name
    return chinese_self_name(text)


# ---------------------------------------------------------------- dimensions


def theme_of(text: str, fallback: Sequence[str]) -> str:
    """The THEMES entry the text signals most (ties by THEMES order), else the first fallback, else "chat"."""
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


_STREET_ADDRESS = re.compile(
    r"\b(?P<a>\d{1,5}[A-Za-z]?\s+(?:[A-Z][\w'’-]*\s+){0,3}(?:Lane|Street|St|Road|Rd|Avenue|Ave|Boulevard|Blvd|Way|"
    r"Drive|Dr|Court|Ct|Place|Pl|Square|Sq|Terrace|Close|Crescent|Hill|Row)\b\.?(?:,\s*[A-Z][\w'’-]+)?)"
    r"|\b(?P<b>(?:\d{1,5}\s+)?(?:Rua|Avenida|Calle|Via|Rue|Straße|Strasse)\s+(?:[A-Za-z][\w'’-]*\s*){1,4}\d{0,5}(?:,\s*[A-Z][\w'’-]+)?)")


def location_of(text: str, exclude: Sequence[str]) -> str | None:
    """A place the text names (a street address, a capitalised place after in/at/to..., or jieba's
    place names), not one of `exclude`."""
    excluded = {normalize(e) for e in exclude}
    if m := _STREET_ADDRESS.search(text):  # "ship it to 12 Larch Lane, Bristol": the address is the place
        return (m.group("a") or m.group("b")).strip(" ,.")
    for m in _LOCATION_EN.finditer(text):
        words = m.group("p").split()
        while words and words[0] in NOT_PLACES:
            words = words[1:]
        while words and words[-1] in ("of", "de"):
            words = words[:-1]
        place = " ".join(words)
        if place and normalize(place) not in excluded and not any(normalize(place).startswith(e) for e in excluded if e):
            return place
    if has_cjk(text):
        import jieba.posseg as pseg

        segmenter()  # loads jieba's dictionary once, quietly
        run: list[str] = []
        for pair in pseg.cut(text):
            if pair.flag == "ns":
                run.append(pair.word)
            elif run:
                break
        if run:
            return "".join(run)
    return None


def reason_of(text: str) -> str | None:
    """The reason the text gives ("because ...", 因为...), not a temporal "since May"."""
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


def purpose_of(text: str) -> str | None:
    """The purpose the text gives ("in order to ...", "to learn ...", 为了...)."""
    if m := _PURPOSE_ZH.search(text):
        return m.group("p").strip()
    if m := _PURPOSE_EN.search(text):
        return (m.group("p") or m.group("v")).strip()
    return None


def occupation_of(clause: str) -> str | None:
    """The occupation a first-person clause states ("I work as a data analyst" → "data analyst")."""
    if m := _OCC_EN_AS.search(clause):
        return m.group("o").strip()
    if m := _OCC_EN.search(clause):
        return m.group("o").strip()
    if (m := _OCC_ZH.search(clause)) and ZH_OCCUPATION.search(m.group("o")):
        return m.group("o")
    return None


_WEAK_KEYWORDS = frozenset("because as said called ends but also since 但是 而且 为了 对 了 去 说 年 月 日 号 把 帮 请求 先".split())


def record_keywords(content: str, time_label: str | None, *, extra: Sequence[str]) -> list[str]:
    """Record keywords: names, numbers and content words, not the pieces of the date label."""
    spaced = re.sub(r"(?<=[0-9A-Za-z])(?=[\u4e00-\u9fff])|(?<=[\u4e00-\u9fff])(?=[0-9A-Za-z])", " ", content)
    date_parts = set(re.findall(r"\d+", time_label or ""))
    date_words = re.compile(r"^\d{4}年|^\d{1,2}[月日]$")
    candidates = keywords(spaced, limit=24, extra=extra)
    kept = [k for k in candidates if k not in date_parts and not date_words.match(k) and k not in _WEAK_KEYWORDS]
    return kept[:8]
