import numpy as np
import pytest

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
