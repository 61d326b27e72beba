"""Dense retrieval by chunk vectors: each chunk's whole text embedded once, ranked by cosine to the query.

The A-RAG index embeds sentences (its tools rank a chunk by its best sentence), and so does our
Naive RAG by default. The A-RAG paper's Naive RAG baseline is a plain dense retriever instead: one
vector per chunk. ``dense_ranking="chunk"`` asks for that ranking (the paper profile's choice for
``naive_rag``). Measured on HotpotQA-100 with the packaged encoder: recall@5 0.78 by chunk vectors
against 0.765 by best sentence, with 536 against 602.5 tokens handed over per question
(``bench/bench_fidelity.py``, ``bench/results/fidelity.md``).

The index stores no chunk vectors (its build stays the paper's two stages), so they are made on
first use: every chunk's text through the index's encoder (a small encoder reads only the first few
hundred tokens of a long chunk, as any chunk-vector retriever with it would), L2-normalised, and kept
in the cache directory under the corpus hash and the encoder, where later runs and processes find
them. On HotpotQA-100 (994 passages) that first pass took 131 to 170 s on two busy cores; an index
of 200,000 passages would take hours, so it is an option for evaluation-sized corpora.
"""

from __future__ import annotations

import hashlib
import io
import threading
from pathlib import Path

import numpy as np

from arag_graph.core.documents import SearchHit
from arag_graph.index.hierarchical import HierarchicalIndex

__all__ = ["chunk_vector_search", "chunk_vectors", "chunk_vectors_path"]

_MEMO: dict[tuple[str, str], np.ndarray] = {}
_LOCK = threading.Lock()
_BATCH = 256


def chunk_vectors_path(index: HierarchicalIndex) -> Path:
    """Where the chunk vectors of ``index`` are cached: by corpus hash and encoder, not by index path,
    so two indexes of the same chunks with the same encoder share them."""
    from arag_graph.core.cache import cache_dir

    manifest = index.manifest
    encoder = hashlib.sha256(str(manifest.embedding_model).encode("utf-8")).hexdigest()[:16]
    return cache_dir() / "chunk-vectors" / f"{manifest.corpus_hash[:24]}-{encoder}.npy"


def _embedded(index: HierarchicalIndex) -> np.ndarray:
    chunks = index.store.chunks
    parts = [
        np.asarray(index.embeddings.embed_documents([c.text for c in chunks[start : start + _BATCH]]), np.float32)
        for start in range(0, len(chunks), _BATCH)
    ]
    vectors = np.concatenate(parts) if parts else np.zeros((0, index.manifest.embedding_dim), np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def chunk_vectors(index: HierarchicalIndex) -> np.ndarray:
    """One unit vector per chunk of ``index``, in chunk-store order: from memory, the cache, or made now."""
    from arag_graph.core.jsonl import replace_file

    key = (index.manifest.corpus_hash, str(index.manifest.embedding_model))
    with _LOCK:
        if key in _MEMO:
            return _MEMO[key]
        path = chunk_vectors_path(index)
        shape = (len(index.store.chunks), index.manifest.embedding_dim)
        vectors = None
        if path.is_file():
            try:
                loaded = np.load(path, allow_pickle=False)
            except (OSError, ValueError):  # a damaged cache file is made again, never trusted
                loaded = None
            if loaded is not None and loaded.shape == shape and np.isfinite(loaded).all():
                vectors = loaded.astype(np.float32, copy=False)
        if vectors is None:
            vectors = _embedded(index)
            buffer = io.BytesIO()
            np.save(buffer, vectors, allow_pickle=False)
            path.parent.mkdir(parents=True, exist_ok=True)
            replace_file(path, buffer.getvalue())
        _MEMO[key] = vectors
        return vectors


def chunk_vector_search(
    index: HierarchicalIndex, query: str, top_k: int = 5, *, query_vector: list[float] | None = None
) -> list[SearchHit]:
    """The ``top_k`` chunks whose vectors are nearest ``query`` (or ``query_vector``: HyDE), best first.

    A hit's snippet is the chunk's first sentence, for trajectories; the graphs hand over whole chunks.
    """
    if top_k <= 0 or len(index.store) == 0:
        return []
    vectors = chunk_vectors(index)
    query_unit = np.asarray(index.query_vector(query, query_vector), dtype=np.float32)
    query_unit /= max(float(np.linalg.norm(query_unit)), 1e-12)
    similarity = vectors @ query_unit
    count = min(top_k, len(similarity))
    best = np.argpartition(-similarity, count - 1)[:count]
    order = sorted(best.tolist(), key=lambda i: (-float(similarity[i]), i))
    hits = []
    for i in order:
        chunk = index.store.chunks[i]
        first = chunk.sentence_texts()[:1] if chunk.sentences else [chunk.text]
        hits.append(SearchHit(chunk.id, float(similarity[i]), tuple(first), chunk.title, metadata=chunk.metadata))
    return hits
