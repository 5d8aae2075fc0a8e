"""The question's vector without its names (engine.memory.querywide, `unnamed_query`)."""

from datetime import datetime, timezone

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine.core.clock import VirtualClock
from engine.core.config import MemoryConfig
from engine.core.errors import ConfigError
from engine.core.records import MemoryRecord
from engine.memory.engine import MemoryEngine
from engine.memory.querywide import strip_names, unnamed_vector
from engine.roles.embeddings import make_embedder
from engine.stores.sqlite import SQLiteStore

AT = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
U = "u1"


def test_strip_names_takes_out_names_and_possessives():
    assert strip_names("What activities has Melanie done with her family?") == "What activities has done with her family?"
    assert strip_names("What is Caroline's identity?") == "What is identity?"
    assert strip_names("When did Mel go to Paris?") == "When did go to ?"
    assert strip_names("What do I like?") == "What do I like?"  # "I" is no name
    assert strip_names("Caroline?") == "Caroline?"  # the first word stays: nothing would be left
    assert strip_names("how is Bob") == "how is"
    assert strip_names("Thanks. Where does Anna live now?") == "Thanks. Where does live now?"  # a sentence's start stays
    assert strip_names("What Did You Recommend For Dinner?") == "What Did You Recommend For Dinner?"  # Title Case
    assert strip_names("WHERE DOES ANNA LIVE") == "WHERE DOES ANNA LIVE"
    assert strip_names("安娜住在哪里？") == "安娜住在哪里？"


words = st.text(alphabet=st.characters(whitelist_categories=("Ll", "Lu")), min_size=1, max_size=8)


@given(st.lists(words, min_size=1, max_size=8))
def test_strip_names_keeps_lowercase_text_and_leaves_no_capital_past_the_first(tokens):
    text = " ".join(tokens)
    got = strip_names(text)
    if not any(ch.isupper() for ch in text):  # (not `text == text.lower()`: "𝑨" is upper case with no lower)
        assert got == text
    assert got.strip()
    if got != text:
        assert len(got.split()) < len(text.split())
        assert all(not t[0].isupper() or t == "I" for t in got.split()[1:] if t[0].isalpha())


class Recording:
    """The hash embedder, recording the texts embedded as queries."""

    def __init__(self):
        self.inner = make_embedder("hash")
        self.dim, self.name = self.inner.dim, self.inner.name
        self.queries: list[str] = []

    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        self.queries.append(text)
        return self.inner.embed_query(text)


def test_unnamed_vector_mixes_unit_vectors():
    emb = Recording()
    q = emb.embed_query("Where does Anna go hiking?")
    assert unnamed_vector(emb, "where does she go hiking?", q, 0.3) is q  # no name: the vector itself
    assert unnamed_vector(emb, "Where does Anna go hiking?", q, 0.0) is q
    full = np.asarray(unnamed_vector(emb, "Where does Anna go hiking?", q, 1.0))
    bare = np.asarray(emb.embed_query("Where does go hiking?"))
    assert np.allclose(full, bare / np.linalg.norm(bare), atol=1e-6)
    mid = np.asarray(unnamed_vector(emb, "Where does Anna go hiking?", q, 0.3))
    assert abs(float(np.linalg.norm(mid)) - 1.0) < 1e-5


def test_retrieve_embeds_the_unnamed_question_only_when_on():
    emb = Recording()
    store = SQLiteStore(":memory:", dim=emb.dim, embedder_name=emb.name)
    texts = ["Anna went hiking in the Alps with her kids.", "Anna said: hello there!", "Anna likes tea."]
    store.add_records([MemoryRecord(user_id=U, content=t, memory_type="episodic", created_at=AT, valid_from=AT)
                       for t in texts], emb.embed_documents(texts))
    base = dict(always_inject_types=(), safety_seats=0, min_relevance=0.0, min_score_ratio=0.0, top_k=3)
    assert MemoryConfig().unnamed_query == 0.0
    eng = MemoryEngine(MemoryConfig.from_preset("customer service", **base), store=store, clock=VirtualClock(AT),
                       embedder=emb)
    q = "What does Anna do with her family?"
    off = eng.retrieve(U, q, now=AT)
    assert emb.queries == [q]
    on = eng.retrieve(U, q, now=AT, config=MemoryConfig.from_preset("customer service", **base, unnamed_query=0.3))
    assert emb.queries == [q, q, "What does do with her family?"]
    assert set(on.picked) == set(off.picked)  # three records, three seats: the same set, perhaps reordered


def test_unnamed_query_is_bounded():
    for bad in (-0.1, 1.5):
        try:
            MemoryConfig.from_preset("customer service", unnamed_query=bad)
        except ConfigError:
            continue
        raise AssertionError(f"unnamed_query={bad} was accepted")
