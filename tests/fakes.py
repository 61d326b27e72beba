"""Fast stand-in embedding models for index and tool tests that do not need real semantics.

Building with the real encoder costs seconds per few hundred sentences; these cost microseconds,
so tests that are about the index's plumbing (manifests, rebuilds, headers, errors) stay fast. Both
are ordinary LangChain ``Embeddings``, which is itself part of what those tests check.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.embeddings.fake import DeterministicFakeEmbedding


class NamedFakeEmbeddings(DeterministicFakeEmbedding):
    """langchain-core's hash-seeded fake with a model id, so the index can tell two apart.

    Equal texts get equal vectors and different texts unrelated ones: querying with a stored
    text finds exactly that text with cosine 1.
    """

    model_id: str = "test/fake-hash-32"
    size: int = 32


class WordHashEmbeddings(Embeddings):
    """A bag of hashed lower-cased words, L2-normalised: texts sharing words are close.

    Enough semantics to steer ``semantic_search`` in a test without loading a model.
    """

    model_id = "test/word-hash-64"

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim

    def _vector(self, text: str) -> list[float]:
        vector = np.zeros(self.dim, dtype=np.float64)
        for word in re.findall(r"\w+", text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=4).digest()
            vector[int.from_bytes(digest, "little") % self.dim] += 1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            vector[0] = 1.0
            norm = 1.0
        return (vector / norm).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def sentinel_key(label: str) -> str:
    """A fake API key shaped like a real one (``sk-...``), so redaction treats it as a key.

    Assembled at run time so that secret scanners do not take the test sources for leaked keys.
    """
    return "-".join(("sk", label, "SENTINEL", "0123456789abcdef"))


def sentinel_langsmith_key(label: str) -> str:
    """A fake LangSmith key shaped like a real one (``lsv2_...``), assembled like :func:`sentinel_key`."""
    return "_".join(("lsv2", label, "SENTINEL", "0123456789abcdef"))
