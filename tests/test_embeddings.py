import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.errors import ConfigError
from engine.roles.embeddings import HashEmbeddings, MiniLMEmbeddings, make_embedder


def cos(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_hash_embeddings_are_deterministic_normalised_and_lexical():
    h = HashEmbeddings(64)
    a, b = h.embed_documents(["I live in Beijing", "I live in Beijing"])
    assert a == b and len(a) == 64
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    q = h.embed_query("where in Beijing do I live")
    assert cos(q, a) > cos(q, h.embed_query("my cat likes tuna"))
    assert np.linalg.norm(h.embed_query("")) == pytest.approx(1.0)  # empty text still a unit vector
    assert HashEmbeddings(64).embed_query("北京朝阳区") == h.embed_query("北京朝阳区")


@settings(max_examples=25, deadline=None)
@given(batches=st.lists(st.lists(st.text(alphabet="abcdefghij klmnop北京", max_size=60), max_size=30), min_size=1,
                        max_size=12),
       cache_tokens=st.sampled_from([5, 40, 100_000]))
def test_a_kept_vocabulary_embeds_exactly_as_a_fresh_one(batches, cache_tokens):
    """Texts embedded after any number of earlier batches (the token tables grown in place, or
    forgotten when full) get the vectors a fresh embedder gives them, to the last bit."""
    h = HashEmbeddings(48)
    h.cache_tokens = cache_tokens
    for texts in batches:
        got = h.embed_array(texts)
        for text, row in zip(texts, got, strict=True):
            assert np.array_equal(row, HashEmbeddings(48).embed_array([text])[0])


def test_new_words_are_appended_to_the_kept_tables_not_copied_with_them():
    """Hashing a question's one new word must not cost the whole kept vocabulary (an agent's grows
    with its history): the tables grow by doubling, so most new words are written in place."""
    h = HashEmbeddings(32)
    grown = 0
    for i in range(3000):
        before = h._word_b
        h.embed_query(f"word{i} and the same words again")
        grown += h._word_b is not before
    assert h._n_tokens == len(h._ids) == 3000 + 5
    assert grown <= 3  # 1024 -> 2048 -> 4096 rows: the tables were replaced twice, not 3000 times
    assert h.embed_query("word7 and") == HashEmbeddings(32).embed_query("word7 and")


def test_huge_input_is_truncated_not_hashed_whole():
    h = HashEmbeddings(32)
    big = "word " * 400_000
    assert h.embed_query(big) == h.embed_query(big[: HashEmbeddings.max_chars])


def test_make_embedder():
    assert isinstance(make_embedder("hash", dim=16), HashEmbeddings)
    with pytest.raises(ConfigError, match="choose one of"):
        make_embedder("word2vec")


@pytest.mark.minilm
def test_minilm_loads_offline_once_and_is_semantic(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    m = MiniLMEmbeddings()
    docs = m.embed_documents(["Caroline went to an LGBTQ support group.", "Melanie painted a lake sunrise."])
    q = m.embed_query("When did Caroline attend the support group?")
    assert len(q) == 384 and np.linalg.norm(q) == pytest.approx(1.0, abs=1e-4)
    assert cos(q, docs[0]) > cos(q, docs[1]) + 0.2
    assert MiniLMEmbeddings.load() is MiniLMEmbeddings.load()  # one model per process


def test_embed_texts_gives_the_array_where_the_embedder_has_one_else_embed_documents():
    from langchain_core.embeddings import Embeddings

    from engine.roles.embeddings import HashEmbeddings, embed_texts

    texts = ["green tea in Hangzhou", "", "我喜欢喝绿茶"]
    h = HashEmbeddings(16)
    arr = embed_texts(h, texts)
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float32 and arr.shape == (3, 16)
    assert arr.tolist() == HashEmbeddings(16).embed_documents(texts)

    class Plain(Embeddings):  # a LangChain embedder without embed_array
        def embed_documents(self, texts):
            return [[float(len(t)), 1.0] for t in texts]

        def embed_query(self, text):
            return [0.0, 1.0]

    assert embed_texts(Plain(), texts) == [[21.0, 1.0], [0.0, 1.0], [6.0, 1.0]]
