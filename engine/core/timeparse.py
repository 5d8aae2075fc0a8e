"""Time expressions → absolute `TimeSpan`s, resolved against the message's (or question's) own time.

Records must carry absolute times ("yesterday" said on 2023-05-08 means 2023-05-07 forever), and
questions ("what did I do last weekend?") must be resolved against the question's date. Finding
the expressions uses a small pattern table (so offsets are exact and arbitrary text is cheap);
the date arithmetic is done by `dateparser` wherever it understands the expression (English and
the Chinese relative words it knows: 昨天, 前天, 明天, 上个月, 去年, N天前 …), with small rules for
what it does not do: week and weekend ranges, "上周五", "the week before <date>", Chinese dates
without a year, Chinese numerals.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo

from engine.core.clock import ensure_aware
from engine.core.records import TimeSpan
from engine.core.timespans import (
    day_span,
    month_span,
    parse_time_label,
    range_span,
    span_for,
    span_label,
    year_span,
)

__all__ = ["TimeMention", "resolve_times", "absolutize"]

@dataclass(frozen=True, kw_only=True, slots=True)
class TimeMention:
    """One time expression found in a text: its surface, char offsets and resolved span."""

    surface: str
    start: int
    end: int
    span: TimeSpan
    relative: bool = True  # False when the surface states the year itself (nothing to rewrite)


# ---------------------------------------------------------------- dateparser

_parsers: dict[tuple[str, datetime], object] = {}
_parser_lock = threading.Lock()


def _dateparser(lang: str, base: datetime):
    """A cached `DateDataParser` for one language and relative base (construction is slow)."""
    key = (lang, base)
    parser = _parsers.get(key)
    if parser is None:
        from dateparser.date import DateDataParser

        parser = DateDataParser(
            languages=[lang],
            settings={"RELATIVE_BASE": base, "RETURN_TIME_AS_PERIOD": True, "PREFER_DAY_OF_MONTH": "first"},
        )
        with _parser_lock:
            if len(_parsers) > 64:
                _parsers.clear()
            _parsers[key] = parser
    return parser


def _dp(text: str, lang: str, anchor: datetime) -> tuple[date, str] | None:
    """(date, period) from dateparser, relative to the anchor's local day; None if unknown."""
    return _dp_on_day(text, lang, anchor.date())


@functools.lru_cache(maxsize=4096)
def _dp_on_day(text: str, lang: str, day: date) -> tuple[date, str] | None:
    # Only the date of a result is used, so noon of the anchor's local day is an exact base and
    # lets one parser (and one cached answer) serve every message of that day.
    base = datetime.combine(day, time(12))
    try:
        data = _dateparser(lang, base).get_date_data(text)
    except (ValueError, OverflowError, TypeError, KeyError, IndexError):
        return None
    if data is None or data.date_obj is None:
        return None
    return data.date_obj.date(), (data.period or "day")


# ---------------------------------------------------------------- the pattern table

_MONTHS = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
)
_MONTHS_CAP = _MONTHS  # bare months are matched case-sensitively (so "may" the verb is not a month)
_ORD = r"(?:st|nd|rd|th)?"
_NUM_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3,
    "several": 3, "couple of": 2, "few": 3,
}  # fmt: skip
_NUM = r"(?:\d{1,3}|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_PREP = r"(?:in|during|since|until|till|before|after|by|between|and|around|about|of|from|to|early|late|mid|through)"
_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_NUM = r"[0-9零〇一二两三四五六七八九十]+"
_CN_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "末": -1}


def _cn_int(text: str) -> int:
    """'12' / '十二' / '二十三' / '两' / '二〇二三' → int."""
    if text.isdigit():
        return int(text)
    if "十" not in text:
        return int("".join(str(_CN_DIGITS[c]) for c in text))
    tens, _, ones = text.partition("十")
    return (_CN_DIGITS[tens] if tens else 1) * 10 + (_CN_DIGITS[ones] if ones else 0)


Resolver = Callable[[re.Match, datetime], TimeSpan | None]


def _via_dp(lang: str = "en", *, normalize: Callable[[re.Match], str] | None = None, period: str | None = None):
    def resolve(m: re.Match, anchor: datetime) -> TimeSpan | None:
        text = normalize(m) if normalize else m.group("t")
        found = _dp(text, lang, anchor)
        if found is None:
            return None
        point, found_period = found
        return span_for(point, period or found_period, anchor.tzinfo)

    return resolve


def _ago_text(m: re.Match) -> str:
    n = m.group("n").lower()
    count = _NUM_WORDS.get(n, None) or int(n)
    return f"{count} {m.group('u').lower().rstrip('s')}s ago" if count != 1 else f"1 {m.group('u').lower().rstrip('s')} ago"


def _in_text(m: re.Match) -> str:
    n = m.group("n").lower()
    count = _NUM_WORDS.get(n, None) or int(n)
    return f"in {count} {m.group('u').lower().rstrip('s')}s"


def _unit_period(m: re.Match) -> str:
    unit = m.group("u").lower().rstrip("s")
    return {"day": "day", "week": "day", "month": "month", "year": "year"}[unit]


def _ago_resolver(m: re.Match, anchor: datetime) -> TimeSpan | None:
    return _via_dp(normalize=_ago_text, period=_unit_period(m))(m, anchor)


def _in_resolver(m: re.Match, anchor: datetime) -> TimeSpan | None:
    return _via_dp(normalize=_in_text, period=_unit_period(m))(m, anchor)


_DAY_WORDS = {
    "tonight": "today", "this morning": "today", "this afternoon": "today", "this evening": "today",
    "last night": "yesterday",
}  # fmt: skip


def _day_word(m: re.Match) -> str:
    text = re.sub(r"\s+", " ", m.group("t").lower())
    return _DAY_WORDS.get(text, text)


def _rel_period(m: re.Match) -> str:
    which = m.group("w").lower()
    which = {"past": "last", "previous": "last", "coming": "next"}.get(which, which)
    return f"{which} {m.group('u').lower()}"


def _week_monday(anchor: datetime, offset_weeks: int) -> date:
    today = anchor.date()
    return today - timedelta(days=today.weekday()) + timedelta(weeks=offset_weeks)


_WHICH_OFFSET = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}


def _weekend(m: re.Match, anchor: datetime) -> TimeSpan:
    monday = _week_monday(anchor, _WHICH_OFFSET[m.group("w").lower()])
    return range_span(monday + timedelta(days=5), monday + timedelta(days=6), anchor.tzinfo)


def _weekday(m: re.Match, anchor: datetime) -> TimeSpan | None:
    which = m.group("w").lower()
    if which in ("this", "coming"):  # the one in the current week
        day = _week_monday(anchor, 0) + timedelta(days=_WEEKDAYS.index(m.group("d").lower()))
        return day_span(day, anchor.tzinfo)
    which = "last" if which in ("past", "previous") else which
    return _via_dp(normalize=lambda mm: f"{which} {mm.group('d').lower()}", period="day")(m, anchor)


_PAST_MARK = re.compile(r"\b(?:did|was|were|went|had|ate|saw|met|got|came|\w+ed)\b", re.I)


def _bare_weekday(m: re.Match, anchor: datetime) -> TimeSpan | None:
    """"on Sunday" in a sentence about the past: the latest such day up to the anchor. Elsewhere
    it may be a habit ("no meetings on Friday") or a plan, so it stays unresolved."""
    if not _PAST_MARK.search(m.string):
        return None
    target = _WEEKDAYS.index(m.group("d").lower())
    today = anchor.date()
    return day_span(today - timedelta(days=(today.weekday() - target) % 7), anchor.tzinfo)


def _bare_year(m: re.Match, anchor: datetime) -> TimeSpan:
    return year_span(int(m.group("t")), anchor.tzinfo)


def _cn_full_date(m: re.Match, anchor: datetime) -> TimeSpan | None:
    year = _cn_int(m.group("y")) if m.group("y") else anchor.year
    month, day = _cn_int(m.group("m")), _cn_int(m.group("d"))
    try:
        return day_span(date(year, month, day), anchor.tzinfo)
    except ValueError:
        return None


def _cn_month(m: re.Match, anchor: datetime) -> TimeSpan | None:
    year, month = _cn_int(m.group("y")), _cn_int(m.group("m"))
    return month_span(year, month, anchor.tzinfo) if 1 <= month <= 12 else None


def _cn_year(m: re.Match, anchor: datetime) -> TimeSpan | None:
    year = _cn_int(m.group("y"))
    return year_span(year, anchor.tzinfo) if year >= 1 else None


_CN_DAY_WORDS = {"昨晚": "昨天", "今晚": "今天", "今早": "今天", "今天早上": "今天", "大前天": "3天前", "大后天": "3天后"}
_CN_YEAR_OFFSET = {"前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}
_CN_WHICH = {"上": -1, "这": 0, "本": 0, "下": 1}


def _cn_day_word(m: re.Match) -> str:
    return _CN_DAY_WORDS.get(m.group("t"), m.group("t"))


def _cn_year_word(m: re.Match, anchor: datetime) -> TimeSpan | None:
    word = m.group("t")
    if word in ("去年", "今年", "明年"):
        return _via_dp("zh")(m, anchor)
    return year_span(anchor.year + _CN_YEAR_OFFSET[word], anchor.tzinfo)


def _cn_week(m: re.Match, anchor: datetime) -> TimeSpan:
    monday = _week_monday(anchor, _CN_WHICH[m.group("w")])
    wd = m.group("d")
    if not wd:
        return range_span(monday, monday + timedelta(days=6), anchor.tzinfo)
    index = _CN_WEEKDAY[wd]
    if index < 0:  # 周末
        return range_span(monday + timedelta(days=5), monday + timedelta(days=6), anchor.tzinfo)
    return day_span(monday + timedelta(days=index), anchor.tzinfo)


def _cn_rel_month(m: re.Match, anchor: datetime) -> TimeSpan | None:
    offset = _CN_WHICH[m.group("w")]
    if offset == 0:
        return month_span(anchor.year, anchor.month, anchor.tzinfo)
    return _via_dp("zh", normalize=lambda mm: "上个月" if offset < 0 else "下个月", period="month")(m, anchor)


_CN_UNIT = {"天": "day", "日": "day", "周": "day", "星期": "day", "个星期": "day", "个月": "month", "月": "month", "年": "year"}


def _cn_ago(m: re.Match, anchor: datetime) -> TimeSpan | None:
    count = _cn_int(m.group("n"))
    unit = m.group("u")
    unit_zh = {"星期": "周", "个星期": "周", "月": "个月", "日": "天"}.get(unit, unit)
    text = f"{count}{unit_zh}{'前' if m.group('dir') in ('前', '以前', '之前') else '后'}"
    return _via_dp("zh", normalize=lambda _m: text, period=_CN_UNIT[unit])(m, anchor)


# Each entry: (pattern, resolver, relative). Patterns expose the surface as group "t".
_PATTERNS: list[tuple[re.Pattern, Resolver, bool]] = [
    (re.compile(r"(?P<t>\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b)"), _via_dp(period="day"), False),
    (re.compile(r"(?P<t>\b(?:19|20)\d{2}-(?:0[1-9]|1[0-2])\b)(?![-/.]\d)"), lambda m, a: parse_time_label(m.group("t"), a.tzinfo), False),
    (re.compile(rf"(?P<t>\b{_MONTHS}\s+\d{{1,2}}{_ORD},?\s+\d{{4}}\b)", re.I), _via_dp(period="day"), False),
    (re.compile(rf"(?P<t>\b\d{{1,2}}{_ORD}\s+(?:of\s+)?{_MONTHS},?\s+\d{{4}}\b)", re.I), _via_dp(period="day"), False),
    (re.compile(rf"(?P<t>\b{_MONTHS},?\s+\d{{4}}\b)", re.I), _via_dp(period="month"), False),
    # a day or month without a year gets its year from the anchor for the time dimension, but the
    # text keeps what was said: "my birthday is 14 August" recurs, it is not 2026-08-14
    (re.compile(rf"(?P<t>\b{_MONTHS_CAP}\s+\d{{1,2}}{_ORD}\b)(?!\s*:)"), _via_dp(period="day"), False),
    (re.compile(rf"(?P<t>\b\d{{1,2}}{_ORD}\s+(?:of\s+)?{_MONTHS_CAP}\b)"), _via_dp(period="day"), False),
    (re.compile(rf"\b{_PREP}\s+(?P<t>{_MONTHS_CAP})(?![\w])"), _via_dp(period="month"), False),
    (re.compile(rf"(?:\b{_PREP}\s+|^\s*)(?P<t>(?:19|20)\d{{2}})\b(?![-/.:]\d)", re.I), _bare_year, False),
    (re.compile(r"(?P<t>\bthe\s+day\s+(?:before\s+yesterday|after\s+tomorrow)\b)", re.I), _via_dp(normalize=_day_word, period="day"), True),
    (re.compile(r"(?P<t>\b(?:yesterday|today|tomorrow|tonight|last\s+night|this\s+(?:morning|afternoon|evening))\b)", re.I), _via_dp(normalize=_day_word, period="day"), True),
    (re.compile(r"(?P<t>\b(?P<w>last|next|this|past|coming|previous)\s+(?P<u>week|month|year)\b)", re.I), _via_dp(normalize=_rel_period), True),
    (re.compile(r"(?P<t>\b(?P<w>last|next|this|past|coming|previous)\s+weekend\b)", re.I), _weekend, True),
    (re.compile(rf"(?P<t>\b(?P<w>last|next|this|past|coming|previous)\s+(?P<d>{_WEEKDAY})\b)", re.I), _weekday, True),
    (re.compile(rf"(?P<t>\b(?P<n>{_NUM})\s+(?P<u>days?|weeks?|months?|years?)\s+ago\b)", re.I), _ago_resolver, True),
    (re.compile(rf"\bon\s+(?P<t>(?P<d>{_WEEKDAY}))\b", re.I), _bare_weekday, True),
    (re.compile(rf"(?P<t>\bin\s+(?P<n>{_NUM})\s+(?P<u>days?|weeks?|months?|years?)\b)(?!\s+ago)", re.I), _in_resolver, True),
    # Chinese
    (re.compile(rf"(?P<t>(?P<y>\d{{4}}|[零〇一二三四五六七八九]{{4}})年(?P<m>{_CN_NUM})月(?P<d>{_CN_NUM})[日号])"), _cn_full_date, False),
    (re.compile(rf"(?P<t>(?P<y>\d{{4}}|[零〇一二三四五六七八九]{{4}})年(?P<m>{_CN_NUM})月)"), _cn_month, False),
    (re.compile(r"(?P<t>(?P<y>\d{4}|[零〇一二三四五六七八九]{4})年)"), _cn_year, False),
    (re.compile(rf"(?P<t>(?P<y>)(?P<m>{_CN_NUM})月(?P<d>{_CN_NUM})[日号])"), _cn_full_date, True),
    (re.compile(r"(?P<t>大前天|前天|昨天|昨晚|今天早上|今天|今晚|今早|明天|大后天|后天)"), _via_dp("zh", normalize=_cn_day_word, period="day"), True),
    (re.compile(r"(?P<t>前年|去年|今年|明年|后年)"), _cn_year_word, True),
    (re.compile(r"(?P<t>(?P<w>[上这本下])(?:个)?(?:周|星期|礼拜)(?P<d>[一二三四五六日天末])?)"), _cn_week, True),
    (re.compile(r"(?P<t>(?P<w>[上这本下])个?月)"), _cn_rel_month, True),
    (re.compile(rf"(?P<t>(?P<n>{_CN_NUM})(?P<u>个星期|星期|个月|天|周|年)(?P<dir>以前|之前|前|以后|之后|后))"), _cn_ago, True),
]  # fmt: skip
#: The patterns that can match ASCII text: each of the others requires a CJK character (a
#: literal or a class of them), so on ASCII text it never matches and is not run.
_ASCII_PATTERNS = [entry for entry in _PATTERNS if not re.search("[\u4e00-\u9fff]", entry[0].pattern)]

_BEFORE_AFTER = re.compile(r"\bthe\s+(?P<u>day|week|weekend|month|year)\s+(?P<dir>before|after)\s+$", re.I)
_CN_BEFORE_AFTER = re.compile(r"^的?(?P<dir>前一|后一|前|后)(?P<u>天|周|个星期|个月|年)")


def _shift(span: TimeSpan, unit: str, direction: str, tz: tzinfo) -> TimeSpan:
    """The day/week/weekend/month/year immediately before or after a span."""
    sign = -1 if direction == "before" else 1
    edge = span.start.date() if sign < 0 else span.end.date()
    if unit == "day":
        return day_span(edge + timedelta(days=sign), tz)
    if unit == "week":
        if sign < 0:
            return range_span(edge - timedelta(days=7), edge - timedelta(days=1), tz)
        return range_span(edge + timedelta(days=1), edge + timedelta(days=7), tz)
    if unit == "weekend":
        probe = edge + timedelta(days=sign)
        while probe.weekday() != (6 if sign < 0 else 5):
            probe += timedelta(days=sign)
        first = probe - timedelta(days=1) if sign < 0 else probe
        return range_span(first, first + timedelta(days=1), tz)
    if unit == "month":
        probe = edge.replace(day=1) - timedelta(days=1) if sign < 0 else edge.replace(day=28) + timedelta(days=4)
        return month_span(probe.year, probe.month, tz)
    return year_span(edge.year + sign, tz)


def resolve_times(text: str, *, anchor: datetime) -> list[TimeMention]:
    """Every time expression in `text`, resolved against `anchor` (tz kept), in text order."""
    anchor = ensure_aware(anchor, what="resolve_times anchor")
    if not text:
        return []
    found: list[tuple[int, int, re.Match, Resolver, bool]] = []
    for pattern, resolver, relative in _ASCII_PATTERNS if text.isascii() else _PATTERNS:
        for m in pattern.finditer(text):
            found.append((m.start("t"), m.end("t"), m, resolver, relative))
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    mentions: list[TimeMention] = []
    taken_until = -1
    for start, end, m, resolver, relative in found:
        if start < taken_until or start == end:
            continue
        try:
            span = resolver(m, anchor)
        except (ValueError, OverflowError, KeyError):
            span = None
        if span is None:
            continue
        start, end, span, relative = _extend(text, start, end, span, relative, anchor.tzinfo)
        mentions.append(TimeMention(surface=text[start:end], start=start, end=end, span=span, relative=relative))
        taken_until = end
    return mentions


def _extend(text: str, start: int, end: int, span: TimeSpan, relative: bool, tz: tzinfo):
    """Fold "the week before <date>" / "<日期>的前一天" into one mention."""
    if m := _BEFORE_AFTER.search(text[max(0, start - 40) : start]):
        span = _shift(span, m.group("u").lower(), m.group("dir").lower(), tz)
        start = start - (len(text[max(0, start - 40) : start]) - m.start())
    elif m := _CN_BEFORE_AFTER.match(text[end:]):
        unit = {"天": "day", "周": "week", "个星期": "week", "个月": "month", "年": "year"}[m.group("u")]
        span = _shift(span, unit, "before" if m.group("dir").startswith("前") else "after", tz)
        end += m.end()
    return start, end, span, relative


# ---------------------------------------------------------------- rewriting

_EN_PREPS_BEFORE = re.compile(r"\b(?:on|in|since|until|till|by|before|after|from|to|during|of|around)\s+$", re.I)


def _zh_label(span: TimeSpan) -> str:
    s, e = span.start, span.end
    if span.granularity == "year":
        return f"{s.year}年"
    if span.granularity == "month":
        return f"{s.year}年{s.month}月"
    if span.granularity == "day":
        return f"{s.year}年{s.month}月{s.day}日"
    return f"{s.year}年{s.month}月{s.day}日至{e.year}年{e.month}月{e.day}日"


def absolutize(text: str, *, anchor: datetime) -> tuple[str, list[TimeMention]]:
    """Rewrite relative time expressions as absolute ones; return the new text and the mentions.

    "I went to a support group yesterday" said on 2023-05-08 → "... on 2023-05-07";
    "上周五" → "2023年5月5日". Expressions that already state their year are left as written.
    """
    mentions = resolve_times(text, anchor=anchor)
    out: list[str] = []
    pos = 0
    for mention in mentions:
        out.append(text[pos : mention.start])
        if not mention.relative:
            out.append(mention.surface)
        elif any("\u4e00" <= ch <= "\u9fff" for ch in mention.surface):
            out.append(_zh_label(mention.span))
        else:
            label = span_label(mention.span)
            if _EN_PREPS_BEFORE.search(text[: mention.start]):
                out.append(label)
            else:
                prep = {"day": "on", "range": "during"}.get(mention.span.granularity, "in")
                out.append(f"{prep} {label}")
        pos = mention.end
    out.append(text[pos:])
    return "".join(out), mentions



