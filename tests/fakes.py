"""Fast stand-in embedding models for index and tool tests that do not need real semantics.

Building with the real encoder costs seconds per few hundred sentences; these cost microseconds,
so tests that are about the index's plumbing (manifests, rebuilds, headers, errors) stay fast. Both
are ordinary LangChain ``Embeddings``, which is itself part of what those tests check.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.embeddings.fake import DeterministicFakeEmbedding

from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST


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


@contextlib.contextmanager
def encodings_remembered() -> Iterator[list[int]]:
    """While open, the real encoder computes each batch of texts once and hands the same vectors back.

    For tests that build the same corpus several times to test something else (the room left on a
    disk, the backend that stores the vectors): the vectors are still the real encoder's. Yields the
    list of batch sizes the real encoder computed, so a test can check that its builds did share.
    Hold the context manager (``with``, or a name) while it is open: one dropped at once is closed
    by the garbage collector, which undoes it.
    """
    from arag_graph.index.encoders import SentenceEncoder

    encode = SentenceEncoder.encode
    seen: dict[tuple[str, str, tuple[str, ...]], np.ndarray] = {}
    computed: list[int] = []

    def remembered(
        self: SentenceEncoder, texts: Sequence[str], on_batch: Callable[[int], None] | None = None
    ) -> np.ndarray:
        key = (type(self).__name__, self.model_id, tuple(texts))
        if key not in seen:
            seen[key] = encode(self, texts)
            computed.append(len(texts))
        if on_batch is not None:
            on_batch(len(texts))
        return seen[key].copy()

    SentenceEncoder.encode = remembered  # type: ignore[method-assign]
    try:
        yield computed
    finally:
        SentenceEncoder.encode = encode  # type: ignore[method-assign]


def seed_encoder(cache: Path, exported: Path) -> None:
    """Put an exported encoder file (``OnnxSentenceEncoder.onnx_path``) into the cache directory
    ``cache``, where a process with that cache finds it instead of exporting the model again (about
    30 s of CPU, the same result every time)."""
    folder = cache / "encoders"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        os.link(exported, folder / exported.name)  # 60 MB: a link when both are on one file system
    except OSError:
        shutil.copy2(exported, folder / exported.name)


def current_manifest(root: Path) -> dict[str, Any]:
    """The manifest of the index's current build as the JSON on disk says (not through the loader's checks)."""
    build = (root / CURRENT).read_text(encoding="utf-8").strip()
    return json.loads((root / BUILDS / build / MANIFEST).read_text(encoding="utf-8"))
