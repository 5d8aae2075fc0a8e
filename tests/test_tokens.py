"""engine.core.tokens: the one token approximation (CJK aware) every offline count uses."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage, SystemMessage

from engine.core.tokens import (
    CJK_TOKEN_RANGES,
    ApproxTokenCounter,
    approx_tokens,
    content_text,
)


@pytest.mark.parametrize(
    ("text", "cjk"),
    [
        ("北京", 2),  # CJK Unified Ideographs
        ("㐀㐁", 2),  # Extension A
        ("𠀀𪜀", 2),  # Extensions B and C (outside the BMP)
        ("豈", 1),  # CJK Compatibility Ideographs
        ("こんにちは", 5),  # hiragana
        ("カタカナ", 4),  # katakana
        ("안녕하세요", 5),  # hangul syllables
        ("ㄅㄆ", 2),  # bopomofo
        ("。、「」", 4),  # CJK symbols and punctuation
        ("，！？：", 4),  # full-width punctuation
        ("ＡＢ", 2),  # full-width letters
    ],
)
def test_each_cjk_character_is_one_token(text, cjk):
    assert approx_tokens(text) == cjk


def test_latin_text_is_four_characters_a_token_and_mixed_text_adds_up():
    assert approx_tokens("") == 0
    assert approx_tokens("abcd") == 1 and approx_tokens("abcde") == 2
    assert approx_tokens("hello world") == math.ceil(11 / 4)
    assert approx_tokens("我住在Beijing。") == 4 + math.ceil(len("Beijing") / 4)
    assert approx_tokens("䷀") == 1  # a Yijing hexagram (U+4DC0) is not CJK text: a quarter token, rounded up


def test_ranges_are_ordered_and_disjoint():
    for (a, b), (c, _) in zip(CJK_TOKEN_RANGES, CJK_TOKEN_RANGES[1:], strict=False):
        assert a <= b < c


def test_counter_uses_the_same_approximation_and_counts_content_blocks_by_text():
    counter = ApproxTokenCounter()
    text = "我住在北京朝阳区, near the park."
    assert counter.count(text) == approx_tokens(text)
    blocks = [{"type": "text", "text": "你好"}, {"type": "image_url", "image_url": "x"}, "world"]
    assert content_text(blocks) == "你好\nworld"
    msgs = [SystemMessage("core"), HumanMessage(blocks)]
    expected = 2 * counter.per_message + approx_tokens("core") + approx_tokens("你好\nworld")
    assert counter.count_messages(msgs) == expected


def test_the_scripted_chat_model_reports_the_same_counts():
    from engine.roles.bundle import Models

    chat = Models.scripted().chat
    msgs = [SystemMessage("记忆：用户住在北京。"), HumanMessage("我住在哪里？")]
    reply = chat.invoke(msgs)
    usage = reply.usage_metadata
    assert usage["input_tokens"] == sum(approx_tokens(m.content) for m in msgs)
    assert usage["output_tokens"] == approx_tokens(reply.content)


@given(st.text(max_size=200))
def test_bounds(text):
    n = approx_tokens(text)
    assert 0 <= n <= len(text)
    assert n >= math.ceil(len(text) / 4)


@given(st.text(max_size=200) | st.text(st.characters(max_codepoint=127), max_size=200))
def test_count_is_one_per_cjk_character_and_a_quarter_per_other(text):
    cjk = sum(1 for ch in text if any(a <= ord(ch) <= b for a, b in CJK_TOKEN_RANGES))
    assert approx_tokens(text) == cjk + math.ceil((len(text) - cjk) / 4)
