"""Tokeniser, keywords, sentence splitting and safe FTS queries (English, Chinese, mixed)."""

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.text import (
    content_token_set,
    content_tokens,
    fts_query,
    index_text,
    jaccard,
    keywords,
    split_clauses,
    split_sentences,
    tokenize,
)


def test_english_tokens_lowercased_with_apostrophes():
    assert tokenize("Caroline's dog, Max, is 3!") == ["caroline's", "dog", "max", "is", "3"]
    assert content_tokens("Caroline's dog is called Max") == ["caroline", "dog", "called", "max"]


def test_chinese_is_segmented_so_beijing_matches():
    tokens = tokenize("我住在北京朝阳区")
    assert "北京" in tokens
    assert set(tokenize("北京")) <= set(tokens)
    assert "我" not in content_tokens("我住在北京朝阳区")


def test_mixed_text():
    tokens = tokenize("我的订单号是 A1234，在 Shanghai 下单")
    assert "a1234" in tokens and "shanghai" in tokens and "订单号" in tokens


def test_index_text_is_space_separated_tokens():
    assert index_text("我住在北京") == " ".join(tokenize("我住在北京"))


@pytest.mark.parametrize(
    "hostile",
    ['NEAR(a b)', 'x" OR 1=1 --', "col:value *", '"unbalanced', "(a AND -b)", "^start", 'a"b"c'],
)
def test_fts_query_quotes_hostile_input(hostile):
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    conn.execute("INSERT INTO t(body) VALUES (?)", (index_text("a b value start near or " + hostile),))
    query = fts_query(hostile)
    assert query is not None
    assert all(part.startswith('"') and part.endswith('"') for part in query.split(" OR "))
    conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,)).fetchall()  # must not raise
    conn.close()


def test_fts_query_empty_and_stopword_only():
    assert fts_query("") is None
    assert fts_query("!!! ???") is None
    assert fts_query("the of and") == '"the" OR "of" OR "and"'


def test_jaccard():
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3)
    assert jaccard([], []) == 0.0
    assert jaccard(["Beijing"], ["beijing"]) == 1.0


def test_split_sentences_keeps_decimals_and_titles():
    text = "Hi! I paid 3.5 dollars. Dr. Smith agreed. 我住在北京。你呢？"
    assert split_sentences(text) == ["Hi!", "I paid 3.5 dollars.", "Dr. Smith agreed.", "我住在北京。", "你呢？"]


def test_split_clauses_drops_conjunctions():
    assert split_clauses("I love painting, and my dog is called Max") == ["I love painting", "my dog is called Max"]
    assert split_clauses("我喜欢火锅，但是我对花生过敏") == ["我喜欢火锅", "我对花生过敏"]


def test_keywords_put_names_and_numbers_first():
    kws = keywords("my order number is 77812 and Caroline lives in Boston near the order desk")
    assert kws[:3] == ["77812", "caroline", "boston"]
    assert len(keywords(" ".join(f"word{i}" for i in range(20)))) == 8


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_fts_query_never_breaks_fts5(text):
    query = fts_query(text)
    if query is None:
        return
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,)).fetchall()
    conn.close()


def test_fts_query_prefix_stems_and_opens_plain_words():
    assert fts_query("What did Caroline research?") == '"caroline" OR "research"'
    assert fts_query("Caroline researching paintings", prefix=4) == '"caroline" * OR "research" * OR "painting" *'
    # short words stay exact, a cut that leaves too little is not made, non-ASCII tokens stay exact
    assert fts_query("red cats", prefix=4) == '"red" OR "cats" *'
    assert fts_query("绿茶 tea", prefix=2) == '"绿茶" OR "tea" *'
    assert fts_query("Caroline research", key="k", prefix=4) == '"kcaroline" * OR "kresearch" *'


def test_fts_query_prefix_finds_the_longer_words_only_when_asked():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    conn.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)",
                     [(1, "Researching adoption agencies"), (2, "painted a sunset"), (3, "owns a bicycle")])

    def hits(q, **kw):
        return {r for (r,) in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (fts_query(q, **kw),))}

    assert hits("research paintings") == set()
    assert hits("research paintings", prefix=4) == {1}  # "painting*" does not reach "painted"
    assert hits("researched paint", prefix=4) == {1, 2}
    conn.close()


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_fts_query_with_prefix_never_breaks_fts5(text):
    query = fts_query(text, prefix=3)
    if query is None:
        return
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,)).fetchall()
    conn.close()


@settings(max_examples=300)
@given(st.text(max_size=80) | st.lists(st.sampled_from(["John's", "the", "Ｊｏｈｎ＇ｓ", "don’t", "北京的", "café's", "s", "'s",
                                                        "it's", "x's's", " ", "IS", "a1'b2"]), max_size=8).map(" ".join))
def test_content_token_set_is_the_set_of_content_tokens(text):
    assert content_token_set(text) == frozenset(content_tokens(text))
