"""How much a statement matters, by rule: safety constraints, life events, open problems, filler,
tautologies, and whose preference a preference is.

- Safety: allergies and intolerances, medical conditions and medications, legal constraints,
  accessibility needs. They get the "safety" tag and keywords naming their general class
  ("allergy", "medical", "legal", "accessibility"), so a question months later that does not
  repeat the word ("recommend me a dinner") can still be served them. A negated mention ("no
  allergies") is not a constraint.
- Life events (a bereavement, a diagnosis, a move, a wedding, a birth, a job lost or found, a
  graduation) and open problems (a refund that has not arrived, a heater still broken, a
  complaint) are episodes with the theme they belong to, never small talk.
- Filler ("By the way.", "Okay", "哈哈", "好的") yields no record; a tautology ("X's name is X")
  neither.
- A preference is the speaker's own only when the speaker holds it: "my neighbour loves dogs"
  is about the neighbour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.core.text import content_tokens, normalize
from engine.roles.scripted.people import PERSON_RELATIONS

__all__ = [
    "SafetyClass",
    "safety_classes",
    "safety_keywords",
    "life_event_theme",
    "is_open_problem",
    "PROBLEM_KEYWORDS",
    "strip_discourse",
    "is_filler",
    "is_tautology",
    "holds_preference",
]


@dataclass(frozen=True, slots=True)
class SafetyClass:
    """A kind of safety-critical constraint: its trigger words and the keywords naming the class."""

    name: str
    pattern: re.Pattern[str]
    keywords_en: tuple[str, ...]
    keywords_zh: tuple[str, ...]


_SAFETY: tuple[SafetyClass, ...] = (
    SafetyClass("allergy", re.compile(
        r"\b(?:allergic|allerg(?:y|ies)|intoleran(?:t|ce)|anaphyla\w*|epi-?pen|coeliac|celiac)\b|过敏|不耐受", re.I),
        ("allergy", "allergic", "medical"), ("过敏", "医疗")),
    SafetyClass("medical", re.compile(
        r"\b(?:diabet\w*|asthma\w*|epilep\w*|seizures?|heart (?:condition|disease|problems?)|high blood pressure|"
        r"hypertension|blood thinners?|insulin|warfarin|medications?|meds|prescri(?:bed|ption)|chemo\w*|dialysis|"
        r"pregnan\w*|cancer|migraines?|diagnosed|diagnosis|chronic|pacemaker|crohn'?s|arthritis|adhd|ptsd|"
        r"medical condition)\b|糖尿病|哮喘|癫痫|心脏病|高血压|胰岛素|处方|服药|吃药|药物|化疗|透析|怀孕|孕期|癌|偏头痛|确诊|"
        r"慢性病|起搏器|抑郁症", re.I),
        ("medical", "condition"), ("医疗", "病情")),
    SafetyClass("legal", re.compile(
        r"\b(?:restraining order|protective order|court order|custody|parole|work permit|residence permit|"
        r"visa (?:restrictions?|status|expires?|expired|does(?:n'?t| not) allow|won'?t allow|rules|application|issues?|"
        r"problems?)|(?:student|work|tourist|spouse|travel|h-?1b|schengen|my) visa(?! card| debit| credit)|on a visa|"
        r"not (?:allowed|permitted) to (?:leave|travel|enter|work|contact)|banned from|ankle monitor|on bail|"
        r"immigration status|deport\w*)\b|限制令|禁止令|保护令|缓刑|假释|签证|工作许可|居留许可|禁止出境|不能出境|"
        r"法院|监护权|取保候审", re.I),
        ("legal", "restriction"), ("法律", "限制")),
    SafetyClass("accessibility", re.compile(
        r"\b(?:wheelchair|screen ?reader|blind(?!\s+(?:date|spot|tasting|test))|visually impaired|low vision|deaf|hard of hearing|hearing aids?|"
        r"hearing (?:impair\w*|loss)|sign language|mobility (?:issues?|aid|scooter|problems?)|crutches|"
        r"(?:use|uses|with) a walker|white cane|walking (?:cane|stick)|step-free|braille|dyslexi\w*|guide dog|"
        r"service dog|prosthetic|paraplegic|amputee|can'?t (?:use|climb|manage) (?:the )?stairs)\b|轮椅|读屏|盲人|失明|"
        r"视障|视力障碍|听障|耳聋|聋|助听器|手语|无障碍|拐杖|行动不便|导盲犬|残疾", re.I),
        ("accessibility", "disability"), ("无障碍", "残障")),
)
_NEGATION_BEFORE = re.compile(r"\b(?:not|no|never|isn'?t|aren'?t|am not|'m not|without|zero)\s+(?:\w+\s+){0,2}$|(?:不|没有|没|无)$",
                              re.I)
_ALLERGEN_EN = re.compile(
    r"\b(?:allergic|allerg(?:y|ies)|intoleran(?:t|ce))\s+(?:to\s+|of\s+)?(?P<a>[\w\s-]+?)(?=[,.;!?]|\s+(?:and|but|so|which)\b|$)",
    re.I)
_ALLERGEN_ZH_OBJECT = re.compile(r"对(?P<a>[\u4e00-\u9fffA-Za-z]{1,8}?)(?:严重|有点|有些)?(?:过敏|不耐受)")
_ALLERGEN_ZH = re.compile(r"(?<![我他她])(?P<a>[\u4e00-\u9fff]{1,4}?)(?:过敏|不耐受)")


def safety_classes(text: str) -> list[SafetyClass]:
    """The safety classes `text` states a constraint of (a negated mention does not count)."""
    out = []
    for cls in _SAFETY:
        for m in cls.pattern.finditer(text):
            if not _NEGATION_BEFORE.search(text[: m.start()]):
                out.append(cls)
                break
    return out


def safety_keywords(text: str, classes: list[SafetyClass], *, zh: bool) -> list[str]:
    """The class keywords of `classes` and, for an allergy, the allergen ("peanuts", 花生)."""
    words: list[str] = []
    for cls in classes:
        words.extend(cls.keywords_zh if zh else cls.keywords_en)
        if cls.name == "allergy":
            if m := (_ALLERGEN_ZH_OBJECT.search(text) or _ALLERGEN_ZH.search(text)):
                words.append(m.group("a"))
            elif m := _ALLERGEN_EN.search(text):
                words.extend(content_tokens(m.group("a"))[:3])
    return list(dict.fromkeys(w for w in words if w))


# ---------------------------------------------------------------- life events and open problems

_RELATION_WORDS = "|".join(sorted((*PERSON_RELATIONS, "dog", "cat", "pet"), key=len, reverse=True))

_LIFE_EVENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("family", re.compile(
        rf"\b(?:passed away|funeral|bereave\w*|(?:{_RELATION_WORDS})(?:\s+[A-Z]\w+)?\s+(?:has\s+|had\s+)?died|"
        rf"lost (?:my|our|his|her) (?:{_RELATION_WORDS}))\b|去世|过世|离世|病逝|葬礼", re.I)),
    ("health", re.compile(
        r"\b(?:diagnosed|diagnosis|surgery|(?:had|having|after|before) (?:an? |my |his |her )?operation|hospitali[sz]ed|"
        r"in (?:the )?hospital|miscarriage|injured|broke (?:my|his|her) (?:arm|leg|wrist|ankle|hip)|(?<!by )accident)\b"
        r"|确诊|诊断|手术|住院|流产|受伤|骨折|车祸", re.I)),
    ("home", re.compile(r"\b(?:moved|moving|relocat\w*)\s+(?:to|into|out|house|back|abroad|away|in with|from)\b|搬家|搬到|搬去",
                        re.I)),
    ("family", re.compile(
        r"\b(?:got married|getting married|wedding|engaged|divorc\w*|separated|broke up|break-?up|had a baby|gave birth|"
        r"newborn|was born|expecting a baby)\b|结婚|婚礼|订婚|离婚|分手|生了(?:个)?(?:孩子|宝宝|儿子|女儿)|出生", re.I)),
    ("work", re.compile(
        r"\b(?:laid off|lost (?:my|his|her) job|got fired|was fired|been fired|sacked|made redundant|redundancy|"
        r"unemployed|(?:got|started|found|start) (?:a |my )?new job|got a job|got promoted|got (?:a|the) promotion|"
        r"my promotion|(?<!a )(?<!an )(?<!the )retired|retiring|"
        r"quit (?:my|his|her) job|resigned)\b|被裁|裁员|失业|辞职|升职|退休|被开除|找到(?:了)?(?:新)?工作|换了?(?:新)?工作", re.I)),
    ("education", re.compile(r"\b(?:graduated|graduation|got (?:my|a) degree|dropped out)\b|毕业|退学", re.I)),
)

_OPEN_PROBLEM = re.compile(
    r"\b(?:still (?:hasn'?t|haven'?t|has not|have not) (?:arrived|come|been|received|got|gotten|heard|shown)|"
    r"still (?:not|no) (?:arrived|here|fixed|working|resolved|refunded|delivered|received|reply|response|answer|refund|"
    r"word|sign|update)|still (?:waiting|broken|missing|leaking|down|faulty|stuck)|"
    r"still (?:doesn'?t|won'?t|didn'?t|can'?t) (?:work|start|turn on|open|load|connect|charge|arrive)|"
    r"(?:hasn'?t|haven'?t|has not|have not) (?:arrived|come|shown up|been (?:fixed|resolved|refunded|delivered|"
    r"processed|answered|repaired|sorted))|never (?:arrived|came|showed up|received (?:my|the|a|it))|"
    r"(?:is|are|was|were|keeps?|arrived) (?:broken|damaged|missing|faulty|defective|leaking|cracked)|stopped working|"
    r"(?:it|this|that|the\s+\w+|my\s+\w+(?:\s+\w+)?)\s+(?:still\s+)?(?:doesn'?t|won'?t|isn'?t|is not|does not)\s+work(?:ing)?|"
    r"wrong (?:item|size|order|colou?r|address|product)|charged (?:me )?twice|double[- ]charged|overcharged|"
    r"no (?:one|reply|response|answer) (?:has|yet|from)|nobody (?:has )?(?:called|replied|answered|fixed|come)|"
    r"(?:want|would like|need|have) to (?:complain|file a complaint)|(?:my|a|the) complaint|"
    r"keeps? (?:crashing|failing|breaking|freezing|dropping|leaking))\b"
    r"|还没(?:有)?(?:到|收到|退|修|解决|处理|回复|发货|送到|好)|一直没(?:有)?(?:收到|到|回复|解决|处理|退款|修好|发货)|迟迟|至今没|"
    r"(?<![饿累乐气吓急])坏了|不能用|用不了|还是不行|投诉|扣了两次|重复扣款|多收|发错|送错|破损|漏水|没人(?:回复|处理|管)",
    re.I,
)
#: Keywords an open problem carries, so "any open issues?" finds it: English, Chinese.
PROBLEM_KEYWORDS = ("problem", "问题")


def life_event_theme(text: str) -> str | None:
    """The theme of the life event `text` reports (a death → family, a diagnosis → health), else None."""
    for theme, pattern in _LIFE_EVENTS:
        if pattern.search(text):
            return theme
    return None


def is_open_problem(text: str) -> bool:
    """`text` reports a problem that is still open (not arrived, still broken, a complaint)."""
    return bool(_OPEN_PROBLEM.search(text))


# ---------------------------------------------------------------- filler and tautologies

# discourse markers that never carry content; the first group may run straight into the sentence
# ("By the way I moved"), the second only stands alone ("Well,", "Okay.")
_LEADING_MARKER = re.compile(
    r"^(?:by the way|btw|anyways?|actually|honestly|basically|also|oh and|and also|one more thing|quick update|"
    r"(?:just )?(?:an )?update|fyi|just so you know|incidentally|speaking of which|for what it'?s worth|fwiw|"
    r"对了|顺便说一下|顺便说一句|顺便问一下|顺便|话说|另外|还有)(?:[\s,，:：.。!！…~～-]+|$)"
    r"|^(?:well|so|um+|uh+|er+|hmm+|right|alright|all right|oh|ah|okay|ok|yeah|yes|no|sure|i see|i mean|you know|"
    r"thanks|thank you|thanks (?:a lot|so much|again)|thank you (?:so much|very much|again)|many thanks|"
    r"much appreciated|cheers|great|perfect|cool|nice|sounds good|got it|hi|hello|hey|good morning|"
    r"oh well|never ?mind|no worries|fair enough|makes sense|good to know|i guess|let me think|so yeah|"
    r"那个|嗯+|好吧|行吧|行|可以|收到|明白了?|知道了|了解|哦+|啊+|呃+|额+|嘿嘿|呵呵|嘻嘻|哈哈+|没事|算了|好嘞|好滴|好的)"
    r"(?:[,，:：.。!！?？…~～]+\s*|\s*$)",
    re.I,
)


def strip_discourse(text: str) -> str:
    """`text` without the discourse markers it opens with ("By the way, ", "对了，", "Okay. ")."""
    out = text.strip()
    while True:
        stripped = _LEADING_MARKER.sub("", out, count=1).strip()
        if stripped == out:
            return out
        out = stripped


def is_filler(text: str) -> bool:
    """Nothing but discourse markers, interjections and punctuation: no record at all."""
    rest = strip_discourse(text)
    return not rest or not content_tokens(rest) or bool(re.fullmatch(r"[\W_]+", rest))


_TAUTOLOGY_EN = re.compile(r"^(?P<a>[^.!?]+?)(?:['’]s name)?\s+(?:is|am|are)\s+(?:called\s+|named\s+)?(?P<b>[^.!?]+?)[.!]?$", re.I)
_TAUTOLOGY_ZH = re.compile(r"^(?P<a>[^。！？]+?)(?:的名字)?(?:是|叫)(?P<b>[^。！？]+?)[。！]?$")


def is_tautology(content: str) -> bool:
    """A statement that says a thing is itself ("Li's name is Li", "The user is the user", 王芳是王芳)."""
    for pattern in (_TAUTOLOGY_EN, _TAUTOLOGY_ZH):
        if m := pattern.match(content.strip()):
            a, b = (re.sub(r"^(?:the|a|an)\s+", "", normalize(x).strip()) for x in (m.group("a"), m.group("b")))
            if a and a == b:
                return True
    return False


# ---------------------------------------------------------------- whose preference

_HOLDER_ADVERBS = re.compile(
    r"\b(?:really|also|still|do|does|don'?t|doesn'?t|would|'d|just|absolutely|totally|kind of|sort of|actually|truly|so|"
    r"all|both|definitely|always|usually|generally|genuinely|honestly|now|no longer|never|rather|much|very|"
    r"especially|particularly|'m|am|is|are|was|were|quite|even|personally)\b",
    re.I,
)
_HOLDER_ZH_ADVERBS = re.compile(r"也|很|特别|非常|真|还|最|比较|更|一直|不太|都|挺|超|蛮|就|确实|其实|本来|从小|现在|不再|不|其实|真的|还是")


def holds_preference(clause: str, start: int) -> bool:
    """The preference word at `start` in a first-person `clause` is the speaker's own: its holder
    is I / we / my, or nobody is named ("Love the new design!"), not "my neighbour" or "she"."""
    before = clause[:start]
    if _first_person_favourite(clause, start):
        return True
    if re.search(r"[\u4e00-\u9fff]", before) or not before.strip():
        holder = _HOLDER_ZH_ADVERBS.sub("", before).strip(" ，,")
        return holder in ("", "我", "我们", "咱们", "咱")
    holder = _HOLDER_ADVERBS.sub(" ", before)
    holder = re.sub(r"^\W+|\W+$", "", re.sub(r"\s+", " ", holder)).strip()
    return holder.lower() in ("", "i", "we", "i'm", "we're", "i’m") or bool(re.fullmatch(r"(?:I|we)(?:'m|'re)?", holder))


def _first_person_favourite(clause: str, start: int) -> bool:
    """"my favourite ..." / "one of our favourite ...": a favourite the speaker holds."""
    return bool(re.search(r"\b(?:my|our)\s+(?:\w+\s+)?$", clause[:start], re.I)) and \
        clause[start:].lower().startswith(("favourite", "favorite"))
