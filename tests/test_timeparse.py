"""Time expressions against a fixed anchor: Monday 2023-05-08 15:00 at UTC+8."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.errors import ClockError, ConfigError
from engine.core.records import TimeSpan
from engine.core.timeparse import absolutize, resolve_times
from engine.core.timequery import around_tolerance, parse_time_constraint, time_match
from engine.core.timespans import parse_time_label, span_label
from engine.roles.types import TimeConstraint

TZ = timezone(timedelta(hours=8))
ANCHOR = datetime(2023, 5, 8, 15, 0, tzinfo=TZ)  # a Monday


def one(text, anchor=ANCHOR):
    mentions = resolve_times(text, anchor=anchor)
    assert len(mentions) == 1, mentions
    return mentions[0]


@pytest.mark.parametrize(
    ("text", "label", "granularity"),
    [
        ("yesterday", "2023-05-07", "day"),
        ("today", "2023-05-08", "day"),
        ("tomorrow", "2023-05-09", "day"),
        ("the day before yesterday", "2023-05-06", "day"),
        ("last week", "2023-05-01..2023-05-07", "range"),
        ("next week", "2023-05-15..2023-05-21", "range"),
        ("last month", "2023-04", "month"),
        ("next month", "2023-06", "month"),
        ("last year", "2022", "year"),
        ("next year", "2024", "year"),
        ("last Friday", "2023-05-05", "day"),
        ("next Monday", "2023-05-15", "day"),
        ("this weekend", "2023-05-13..2023-05-14", "range"),
        ("last weekend", "2023-05-06..2023-05-07", "range"),
        ("3 days ago", "2023-05-05", "day"),
        ("two weeks ago", "2023-04-24", "day"),
        ("a few days ago", "2023-05-05", "day"),
        ("2 months ago", "2023-03", "month"),
        ("in 3 days", "2023-05-11", "day"),
        ("in May 2023", "2023-05", "month"),
        ("May 7, 2023", "2023-05-07", "day"),
        ("7 May 2023", "2023-05-07", "day"),
        ("2023-05-07", "2023-05-07", "day"),
        ("in 2021", "2021", "year"),
        ("the week before May 7, 2023", "2023-04-30..2023-05-06", "range"),
        ("the day after 2023-05-07", "2023-05-08", "day"),
        ("昨天", "2023-05-07", "day"),
        ("前天", "2023-05-06", "day"),
        ("明天", "2023-05-09", "day"),
        ("上周五", "2023-05-05", "day"),
        ("下周一", "2023-05-15", "day"),
        ("上周", "2023-05-01..2023-05-07", "range"),
        ("上周末", "2023-05-06..2023-05-07", "range"),
        ("下个月", "2023-06", "month"),
        ("去年", "2022", "year"),
        ("前年", "2021", "year"),
        ("三天前", "2023-05-05", "day"),
        ("2023年5月7日", "2023-05-07", "day"),
        ("2023年5月", "2023-05", "month"),
        ("5月1日", "2023-05-01", "day"),
        ("2023年5月7日的前一天", "2023-05-06", "day"),
    ],
)
def test_expression_families(text, label, granularity):
    mention = one(text)
    assert mention.span.text == label
    assert mention.span.granularity == granularity
    assert span_label(mention.span) == label


def test_day_span_bounds_and_timezone_kept():
    span = one("yesterday").span
    assert span.start == datetime(2023, 5, 7, 0, 0, tzinfo=TZ)
    assert span.end == datetime(2023, 5, 7, 23, 59, 59, 999999, tzinfo=TZ)
    assert span.start.utcoffset() == timedelta(hours=8)


def test_anchor_near_midnight_uses_anchor_local_date():
    late = datetime(2023, 5, 8, 23, 30, tzinfo=TZ)  # already 2023-05-08 15:30 UTC
    assert one("yesterday", late).span.text == "2023-05-07"
    early_utc = datetime(2023, 5, 8, 0, 30, tzinfo=UTC)
    assert one("yesterday", early_utc).span.text == "2023-05-07"


def test_month_and_year_spans_cover_whole_period():
    month = one("last month").span
    assert month.start == datetime(2023, 4, 1, tzinfo=TZ)
    assert month.end.date().isoformat() == "2023-04-30"
    year = one("in 2020").span
    assert (year.start.date().isoformat(), year.end.date().isoformat()) == ("2020-01-01", "2020-12-31")


def test_offsets_point_at_the_surface():
    text = "I went to a support group yesterday and met Anna on May 1, 2023."
    mentions = resolve_times(text, anchor=ANCHOR)
    assert [m.surface for m in mentions] == ["yesterday", "May 1, 2023"]
    for m in mentions:
        assert text[m.start : m.end] == m.surface


def test_modal_may_and_numbers_are_not_times():
    assert resolve_times("I may go, my order 20230507 and phone 138-1234-5678", anchor=ANCHOR) == []
    assert resolve_times("the card ends in 4821", anchor=ANCHOR) == []


def test_naive_anchor_is_refused():
    with pytest.raises(ClockError):
        resolve_times("yesterday", anchor=datetime(2023, 5, 8))


def test_absolutize_english():
    text, mentions = absolutize("I went to a support group yesterday", anchor=ANCHOR)
    assert text == "I went to a support group on 2023-05-07"
    assert len(mentions) == 1
    assert absolutize("I moved here last year", anchor=ANCHOR)[0] == "I moved here in 2022"
    assert absolutize("since last week", anchor=ANCHOR)[0] == "since 2023-05-01..2023-05-07"
    assert absolutize("We met on May 7, 2023.", anchor=ANCHOR)[0] == "We met on May 7, 2023."


def test_absolutize_chinese():
    assert absolutize("我上周五去了上海", anchor=ANCHOR)[0] == "我2023年5月5日去了上海"
    assert absolutize("下个月搬家", anchor=ANCHOR)[0] == "2023年6月搬家"


@pytest.mark.parametrize("label", ["2023-05-07", "2023-05", "2023", "2023-05-01..2023-05-07", "2023-04..2023-06"])
def test_label_round_trip(label):
    span = parse_time_label(label, TZ)
    assert span_label(span) == label
    assert span.start.tzinfo is TZ


@pytest.mark.parametrize("bad", ["", "yesterday", "2023-13-01", "2023-05-07..2023-05-01", "05/07/2023"])
def test_bad_label_names_the_fix(bad):
    with pytest.raises(ConfigError, match="YYYY|valid date"):
        parse_time_label(bad, TZ)


@pytest.mark.parametrize(
    ("question", "op", "label", "granularity"),
    [
        ("What did I do before June 2023?", "before", "2023-06", "month"),
        ("what happened after last Friday", "after", "2023-05-05", "day"),
        ("what did we do between May and July 2023?", "between", "2023-05..2023-07", "range"),
        ("what was I doing around 2022?", "around", "2022", "year"),
        ("what did I do last weekend?", "on", "2023-05-06..2023-05-07", "range"),
        ("Where was I in May 2023?", "on", "2023-05", "month"),
        ("去年之前我住在哪里？", "before", "2022", "year"),
        ("2023年5月之后发生了什么？", "after", "2023-05", "month"),
        ("我昨天左右去了哪里", "around", "2023-05-07", "day"),
    ],
)
def test_constraints(question, op, label, granularity):
    c = parse_time_constraint(question, now=ANCHOR)
    assert c is not None
    assert (c.op, c.text, c.granularity) == (op, label, granularity)
    assert c.start.tzinfo is not None


def test_between_bounds_and_no_constraint():
    c = parse_time_constraint("between May and July 2023", now=ANCHOR)
    assert c.start == datetime(2023, 5, 1, tzinfo=TZ)
    assert c.end.date().isoformat() == "2023-07-31"
    assert parse_time_constraint("What is my dog's name?", now=ANCHOR) is None


def test_around_tolerances():
    assert around_tolerance("day") == timedelta(days=3)
    assert around_tolerance("month") == timedelta(days=31)
    assert around_tolerance("year") == timedelta(days=366)


def _span(label):
    return parse_time_label(label, TZ)


def _c(op, label):
    span = _span(label)
    return TimeConstraint(op=op, start=span.start, end=span.end, granularity=span.granularity, text=label)


def test_time_match_on_and_between():
    assert time_match(_c("on", "2023-05"), _span("2023-05-07")) == 1.0
    assert time_match(_c("on", "2023-05-07"), _span("2023-05-07")) == 1.0
    near = time_match(_c("on", "2023-05-07"), _span("2023-05-08"))
    far = time_match(_c("on", "2023-05-07"), _span("2023-06-20"))
    assert 0.0 < near < 1.0
    assert far == 0.0
    assert time_match(_c("between", "2023-05..2023-07"), _span("2023-06-15")) == 1.0
    assert time_match(_c("on", "2023-05"), None) == 0.0


def test_time_match_around_uses_tolerance():
    assert time_match(_c("around", "2023-05-07"), _span("2023-05-10")) == 1.0  # within ±3 days
    assert time_match(_c("around", "2023-05-07"), _span("2023-05-11")) < 1.0
    assert time_match(_c("around", "2022"), _span("2023-06-01")) == 1.0  # within ±366 days
    assert time_match(_c("around", "2022"), _span("2025-06-01")) == 0.0


def test_time_match_before_after():
    assert time_match(_c("before", "2023-06"), _span("2023-05-20")) == 1.0
    assert time_match(_c("before", "2023-06"), _span("2023-06-20")) < 1.0
    assert time_match(_c("before", "2023-06"), _span("2024-01-01")) == 0.0
    assert time_match(_c("after", "2023-05-05"), _span("2023-05-06")) == 1.0
    assert time_match(_c("after", "2023-05-05"), _span("2023-05-05")) < 1.0
    assert time_match(_c("after", "2023-05-05"), _span("2022-01-01")) == 0.0


_WORDS = st.sampled_from(
    ["yesterday", "last", "next", "week", "May", "2023", "7", "ago", "3", "days", "in", "the", "before", "昨天",
     "上周五", "年", "月", "日", "weekend", "Friday", "-", ",", "前", "个", "the week before", "13", "99", "."]
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=80), st.lists(_WORDS, max_size=12).map(" ".join)))
def test_resolve_times_never_raises_and_spans_are_sane(text):
    for mention in resolve_times(text, anchor=ANCHOR):
        assert isinstance(mention.span, TimeSpan)
        assert mention.span.start.tzinfo is not None and mention.span.end.tzinfo is not None
        assert mention.span.start <= mention.span.end
        assert text[mention.start : mention.end] == mention.surface
    rewritten, _ = absolutize(text, anchor=ANCHOR)
    assert isinstance(rewritten, str)


_TIME_WORDS = ["last", "next", "this", "week", "weekend", "month", "year", "ago", "two", "3", "days", "on",
               "Saturday", "monday", "yesterday", "today", "tomorrow", "the", "day", "before", "after", "in",
               "May", "june", "14", "2023", "2024-05-01", "1st", "of", "since", "night", "morning", ",", "."]


@settings(max_examples=150, deadline=None)
@given(words=st.lists(st.sampled_from(_TIME_WORDS), min_size=1, max_size=12))
def test_ascii_text_is_resolved_alike_without_the_patterns_that_need_cjk(words):
    """On ASCII text the patterns that require a CJK character are not run: the mentions are
    exactly those of every pattern."""
    import engine.core.timeparse as tp

    text = " ".join(words)
    anchor = datetime(2026, 5, 6, 15, 0, tzinfo=UTC)
    fewer = resolve_times(text, anchor=anchor)
    kept = tp._ASCII_PATTERNS
    try:
        tp._ASCII_PATTERNS = tp._PATTERNS
        every = resolve_times(text, anchor=anchor)
    finally:
        tp._ASCII_PATTERNS = kept
    assert fewer == every
    assert len(tp._ASCII_PATTERNS) < len(tp._PATTERNS)
