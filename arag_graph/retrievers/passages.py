"""One-shot retrievers for the non-agentic graphs: dense, BM25 and their hybrid, plus windows.

Dense retrieval is the index's own semantic search (sentence embeddings aggregated to chunks by
max), so Naive RAG and A-RAG rank chunks the same way. BM25 uses ``rank-bm25`` over chunk texts;
the hybrid fuses both rankings with reciprocal rank fusion. Sentence-window retrieval (ARAGOG)
returns each matched sentence with its neighbours instead of the whole chunk.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from arag_graph.core.deadlines import one_operation
from arag_graph.core.documents import HEADER_MAX_CHARS, Chunk, SearchHit, chunk_header, window_text
from arag_graph.retrievers import techniques
from arag_graph.retrievers.automerge import MERGE_THRESHOLD, merge_leaves
from arag_graph.retrievers.techniques import RRF_K, rrf_scores

if TYPE_CHECKING:
    from arag_graph.index.hierarchical import HierarchicalIndex
    from arag_graph.retrievers.techniques import Rerank, Rewrite

Retriever = Literal["dense", "bm25", "hybrid", "amr", "dsi"]
DenseRanking = Literal["sentence", "chunk"]
"""How dense retrieval ranks chunks: by their best sentence, or by a vector of their whole text."""
_TOKENS = re.compile(r"\w+")
_bm25_cache: weakref.WeakKeyDictionary[HierarchicalIndex, Any] = weakref.WeakKeyDictionary()
_bm25_lock = threading.Lock()


class RetrievalSettings(Protocol):
    """What :func:`retrieve_passages` reads of a run's settings.

    The graphs' context schemas (``RetrievalContext``, a layer above) have these fields; naming them
    here keeps retrieval free of run configuration, and any object with them will do.
    """

    retriever: Retriever
    top_k: int
    dense_ranking: DenseRanking
    sentence_window: bool
    window: int
    merge_threshold: float
    summary_documents: int
    multi_query: int
    mmr: bool
    mmr_lambda: float
    rerank: bool
    candidates: int


@dataclass(frozen=True, slots=True)
class Passage:
    """A piece of corpus text handed to a model: a whole chunk, or a sentence window of it."""

    chunk_id: str
    title: str | None
    text: str
    score: float


def _tokenize(text: str) -> list[str]:
    return _TOKENS.findall(text.lower())


def bm25_text(index: HierarchicalIndex, chunk: Chunk) -> str:
    """What BM25 matches a chunk by: with contextual headers, the chunk's header (its title) before
    its text, as ARAGOG's headers are meant to be used by every retriever (bench/results/quality.md
    measures it on HotpotQA-100 and the 2Wiki lookup questions)."""
    if not index.manifest.contextual_headers:
        return chunk.text
    header = chunk_header(chunk, index.manifest.header_max_chars or HEADER_MAX_CHARS)
    return f"{header}\n{chunk.text}" if header else chunk.text


def bm25_for(index: HierarchicalIndex) -> Any:
    """The BM25 model of an index's chunks, built on first use and kept while the index lives.

    rank-bm25 scores every chunk per query; that is fine for a baseline on benchmark corpora, and
    A-RAG's own keyword tool uses the inverted index instead.
    """
    with _bm25_lock:
        model = _bm25_cache.get(index)
        if model is None:
            from rank_bm25 import BM25Okapi

            model = BM25Okapi([_tokenize(bm25_text(index, c)) or ["_"] for c in index.store.chunks])
            _bm25_cache[index] = model
    return model


def bm25_search(index: HierarchicalIndex, query: str, top_k: int) -> list[SearchHit]:
    tokens = _tokenize(query)
    if not tokens or len(index) == 0:
        return []
    scores = np.asarray(bm25_for(index).get_scores(tokens))
    k = min(top_k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    ranked = sorted(top, key=lambda i: (-scores[i], i))
    hits = []
    for i in ranked:
        if scores[i] <= 0:
            continue
        chunk = index.store.chunks[int(i)]
        hits.append(SearchHit(chunk.id, float(scores[i]), (), chunk.title))
    return hits


def reciprocal_rank_fusion(rankings: Sequence[Sequence[SearchHit]], top_k: int, k: int = RRF_K) -> list[SearchHit]:
    """Fuse hit rankings with :func:`rrf_scores`; a hit keeps the snippets of its first appearance."""
    first: dict[str, SearchHit] = {}
    for ranking in rankings:
        for hit in ranking:
            first.setdefault(hit.chunk_id, hit)
    fused = rrf_scores(([hit.chunk_id for hit in ranking] for ranking in rankings), k)
    order = sorted(fused, key=lambda cid: -fused[cid])[:top_k]
    return [SearchHit(cid, fused[cid], first[cid].snippets, first[cid].title, first[cid].positions) for cid in order]


def dense_search(
    index: HierarchicalIndex,
    query: str,
    top_k: int,
    ranking: DenseRanking = "sentence",
    *,
    query_vector: Sequence[float] | None = None,
) -> list[SearchHit]:
    """Dense retrieval: chunks by their best sentence (the A-RAG index's), or by a vector of their whole
    text (``chunk``: the A-RAG paper's Naive RAG, :mod:`arag_graph.retrievers.chunk_vectors`)."""
    if ranking == "chunk":
        from arag_graph.retrievers.chunk_vectors import chunk_vector_search  # made on first use only

        return chunk_vector_search(index, query, top_k, query_vector=list(query_vector) if query_vector else None)
    return index.semantic_search(query, top_k, query_vector=query_vector)


def retrieve(
    index: HierarchicalIndex,
    query: str,
    top_k: int,
    retriever: Retriever = "dense",
    *,
    query_vector: Sequence[float] | None = None,
    dense_ranking: DenseRanking = "sentence",
) -> list[SearchHit]:
    """Top-k chunks for ``query`` with the chosen retriever (``query_vector`` feeds dense search)."""
    if retriever == "dense":
        return dense_search(index, query, top_k, dense_ranking, query_vector=query_vector)
    if retriever == "bm25":
        return bm25_search(index, query, top_k)
    if retriever == "hybrid":
        depth = max(top_k * 4, 20)
        dense = dense_search(index, query, depth, dense_ranking, query_vector=query_vector)
        return reciprocal_rank_fusion([dense, bm25_search(index, query, depth)], top_k)
    raise ValueError(f"unknown chunk retriever {retriever!r}; use dense, bm25 or hybrid (amr, dsi: retrieve_passages)")


def passages(index: HierarchicalIndex, hits: Sequence[SearchHit], window: int | None = None) -> list[Passage]:
    """Whole chunks, or with ``window`` each hit's matched sentences inside windows of ``window`` sentences.

    Sentence windows need sentence positions, which dense hits carry; a hit without them (BM25)
    falls back to its whole chunk. For ARAGOG's method proper (the top-k *sentences*, each in its
    window) see :func:`sentence_windows`; this form serves hits that come ranked as chunks (hybrid).
    """
    out: list[Passage] = []
    for hit in hits:
        chunk = index.get_chunk(hit.chunk_id)
        if chunk is None:
            continue
        if window is None or not hit.positions or not chunk.sentences:
            out.append(Passage(chunk.id, chunk.title, chunk.text, hit.score))
            continue
        out.append(Passage(chunk.id, chunk.title, window_text(chunk, hit.positions, window), hit.score))
    return out


def sentence_windows(
    index: HierarchicalIndex,
    query: str,
    top_k: int,
    window: int,
    *,
    query_vector: Sequence[float] | None = None,
) -> list[Passage]:
    """ARAGOG's sentence-window retrieval: the ``top_k`` sentences nearest the query, each with its window.

    Windows in one chunk are merged into one passage (overlapping windows joined), and passages come
    in the order of their best sentence. Retrieving sentences rather than chunks is the point: the
    model reads a few precise windows, not the chunks they happen to sit in.
    """
    positions: dict[str, list[int]] = {}
    best: dict[str, float] = {}
    for chunk_id, position, similarity in index.top_sentences(query, top_k, query_vector=query_vector):
        positions.setdefault(chunk_id, []).append(position)
        best.setdefault(chunk_id, similarity)
    out: list[Passage] = []
    for chunk_id, found in positions.items():
        chunk = index.get_chunk(chunk_id)
        if chunk is None:
            continue
        valid = [p for p in found if p < len(chunk.sentences)]
        text = window_text(chunk, valid, window) if valid else chunk.text
        out.append(Passage(chunk.id, chunk.title, text, best[chunk_id]))
    return out


def auto_merge(
    index: HierarchicalIndex,
    query: str,
    top_k: int,
    threshold: float = MERGE_THRESHOLD,
    window: int = 1,
    *,
    query_vector: Sequence[float] | None = None,
) -> list[Passage]:
    """ARAGOG's auto-merging retrieval (:mod:`arag_graph.retrievers.automerge`): the ``top_k`` nearest sentences,
    merged up into whole chunks and documents; the sentences that did not merge in windows of ``window``."""
    leaves = index.top_sentences(query, top_k, query_vector=query_vector)
    out: list[Passage] = []
    for node in merge_leaves(index, leaves, threshold):
        for chunk_id in node.chunk_ids:
            chunk = index.get_chunk(chunk_id)
            if chunk is None:
                continue
            text = window_text(chunk, node.positions, window) if node.level == "sentences" else chunk.text
            out.append(Passage(chunk.id, chunk.title, text, node.score))
    return out


def _retrieved(
    index: HierarchicalIndex,
    query: str,
    settings: RetrievalSettings,
    top_k: int,
    query_vector: Sequence[float] | None,
) -> list[Passage]:
    """``top_k`` passages for one query with the run's retriever, windows, merging or summaries."""
    s = settings
    window = s.window if s.sentence_window else None
    if s.retriever == "amr":
        return auto_merge(index, query, top_k, s.merge_threshold, window or 1, query_vector=query_vector)
    if s.retriever == "dsi":
        from arag_graph.retrievers.summaries import summary_search  # numpy-only reading; loaded when asked for

        hits = summary_search(index, query, top_k, s.summary_documents, query_vector=query_vector)
        return passages(index, hits, window)
    if window is not None and s.retriever == "dense":
        return sentence_windows(index, query, top_k, window, query_vector=query_vector)
    ranking = getattr(s, "dense_ranking", "sentence")
    return passages(
        index, retrieve(index, query, top_k, s.retriever, query_vector=query_vector, dense_ranking=ranking), window
    )


def auto_merge_documents(index: HierarchicalIndex, query: str, k: int) -> list[Passage]:
    """Auto-merging retrieval that hands over ``k`` passages (fewer only when the index holds fewer).

    :func:`auto_merge` searches ``top_k`` sentences (ARAGOG's leaves), and sentences that merge, or
    share a chunk, become one passage, so it may hand over fewer than ``top_k``. A LangChain
    retriever promises ``k`` documents: the leaves double until the merged passages reach ``k``.
    """
    sentences = sum(len(chunk.sentences) for chunk in index.store.chunks)
    leaves = k
    while True:
        found = auto_merge(index, query, leaves)
        if len(found) >= k or leaves >= sentences:  # every sentence searched: the index has no more
            return found[:k]
        leaves = min(2 * leaves, sentences)


@one_operation()  # a multi-query retrieval embeds each rewrite: one bound for the endpoint, not one each
def retrieve_passages(
    index: HierarchicalIndex,
    query: str,
    settings: RetrievalSettings,
    *,
    query_vector: Sequence[float] | None = None,
    rewrite: Rewrite | None = None,
    rerank: Rerank | None = None,
) -> list[Passage]:
    """What a graph hands its model for ``query``: the one place the retrieval settings are applied.

    Naive RAG, every CoRAG step and every SRAG sub-question call this, so a retriever or an ARAGOG
    technique is the same thing in each graph: ``retriever`` (dense, bm25, hybrid, amr, dsi),
    ``sentence_window`` with ``window``, ``merge_threshold`` (amr) and ``summary_documents`` (dsi).
    With sentence windows, dense retrieval is ARAGOG's method proper (the ``top_k`` sentences, each
    in its window); chunk retrievers cut each chunk to windows around its matched sentences (BM25
    hits have none and stay whole); amr shows its unmerged sentences in their windows.

    Then ARAGOG's selection techniques (:mod:`arag_graph.retrievers.techniques`), in this order:
    ``multi_query`` > 0 retrieves for the query and ``rewrite``'s rewrites of it and fuses the
    rankings; ``mmr`` or ``rerank`` first take ``candidates`` passages instead of ``top_k``; ``mmr``
    picks ``top_k`` of them by maximal marginal relevance (``mmr_lambda``); ``rerank`` keeps the
    ``top_k`` that ``rerank`` rates best (with ``mmr`` too: it orders MMR's picks). ``query_vector``
    (HyDE) serves the query itself, not its rewrites.
    """
    s = settings
    selecting = bool(getattr(s, "mmr", False) or getattr(s, "rerank", False))
    depth = max(s.top_k, int(getattr(s, "candidates", s.top_k))) if selecting else s.top_k
    found = _retrieved(index, query, s, depth, query_vector)
    n = int(getattr(s, "multi_query", 0))
    if n > 0:
        if rewrite is None:
            raise ValueError("multi_query needs a rewrite function (the graph's model writes the rewrites)")
        others = [q for q in dict.fromkeys(" ".join(r.split()) for r in rewrite(query, n)) if q and q != query][:n]
        rankings = [found, *(_retrieved(index, q, s, depth, None) for q in others)]
        found = techniques.fuse_passages(rankings, depth)
    if getattr(s, "mmr", False):
        found = techniques.mmr_select(index, query, found, s.top_k, s.mmr_lambda, query_vector=query_vector)
    if getattr(s, "rerank", False):
        if rerank is None:
            raise ValueError("rerank needs a rating function (the graph's model rates the passages)")
        found = techniques.rerank_by_scores(found, rerank(query, found), s.top_k) if found else found
    return found[: s.top_k]


def retrieval_args(index: HierarchicalIndex, settings: RetrievalSettings) -> dict[str, Any]:
    """The retrieval settings a trajectory step records (only those that changed what was retrieved).

    DSI's steps name how the summaries were written, so that extractive stand-ins are never taken
    for model-written summaries.
    """
    s = settings
    args: dict[str, Any] = {"retriever": s.retriever, "top_k": s.top_k}
    if getattr(s, "dense_ranking", "sentence") == "chunk" and s.retriever in ("dense", "hybrid"):
        args["dense_ranking"] = "chunk"
    if s.sentence_window:
        args["window"] = s.window
    if s.retriever == "amr":
        args["merge_threshold"] = s.merge_threshold
    if s.retriever == "dsi":
        from arag_graph.retrievers.summaries import summary_index

        args["summary_documents"] = s.summary_documents
        args["summaries"] = summary_index(index).label
    if getattr(s, "multi_query", 0):
        args["multi_query"] = s.multi_query
    if getattr(s, "mmr", False):
        args["mmr_lambda"] = s.mmr_lambda
    if getattr(s, "rerank", False):
        args["rerank"] = True
    if getattr(s, "mmr", False) or getattr(s, "rerank", False):
        args["candidates"] = s.candidates
    return args
