"""ARAGOG's other techniques, applied to any retriever: multi-query fusion, MMR and LLM reranking.

ARAGOG compares, beside the techniques of :mod:`arag_graph.retrievers.passages`, three ways of
choosing what a model reads:

multi-query retrieval
    the model writes ``n`` rewrites of the query; the query and each rewrite are retrieved with the
    run's retriever, and the rankings are fused by reciprocal rank (:func:`fuse_passages`), so a
    chunk found by several phrasings rises.
maximal marginal relevance (MMR)
    from a larger pool of candidates, ``top_k`` passages are picked one at a time by
    ``lambda * sim(query, p) - (1 - lambda) * max sim(p, already picked)``: with lambda 1 the most
    relevant, lower values trade relevance for diversity (near-duplicates stop crowding out other
    evidence). LangChain's :func:`~langchain_core.vectorstores.utils.maximal_marginal_relevance`
    does the picking over the index's own embeddings (:func:`mmr_select`).
LLM reranking
    the model rates how relevant each candidate passage is to the query; the ``top_k`` best rated
    are kept, best first (ties keep the retriever's order, :func:`rerank_by_scores`).

This layer holds the rules and no model: the rewrites and the relevance ratings come from the
graph's model (the chat model, or the offline policy's documented rules), handed in as
functions by :func:`arag_graph.retrievers.passages.retrieve_passages`' callers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
from langchain_core.vectorstores.utils import maximal_marginal_relevance

if TYPE_CHECKING:
    from arag_graph.index.hierarchical import HierarchicalIndex

__all__ = ["RRF_K", "Rerank", "Rewrite", "fuse_passages", "mmr_select", "rerank_by_scores", "rrf_scores"]

RRF_K = 60


class PassageLike(Protocol):
    """What the techniques read of a passage (:class:`arag_graph.retrievers.passages.Passage`, a
    dataclass, which they copy with a new score)."""

    chunk_id: str
    text: str
    score: float


P = TypeVar("P", bound=PassageLike)
Rewrite = Callable[[str, int], Sequence[str]]
"""``(query, n)`` -> up to ``n`` rewrites of the query (the model's, or the offline rule's)."""
Rerank = Callable[[str, Sequence[Any]], Sequence[float]]
"""``(query, passages)`` -> one relevance rating per passage, higher is more relevant."""


def rrf_scores(rankings: Iterable[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal rank fusion: each ID scores the sum over rankings of ``1 / (k + rank)``, rank from 1.

    The one fusion rule of the package (hybrid retrieval, CoRAG's context order, the offline
    policy's reading order): scores of different queries or retrievers are not comparable, ranks are.
    IDs keep first-seen order, so a stable sort on the scores breaks ties by first appearance.
    """
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, chunk_id in enumerate(ranking, 1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (k + rank)
    return fused


def fuse_passages(rankings: Sequence[Sequence[P]], top_k: int) -> list[P]:
    """Reciprocal-rank fusion of several queries' passages (by chunk); a chunk keeps its first passage.

    The score of a fused passage is its fusion score, since the queries' own scores are not comparable.
    """
    first: dict[str, P] = {}
    for ranking in rankings:
        for p in ranking:
            first.setdefault(p.chunk_id, p)
    fused = rrf_scores([p.chunk_id for p in ranking] for ranking in rankings)
    order = sorted(fused, key=lambda cid: -fused[cid])[:top_k]
    return [replace(first[cid], score=round(fused[cid], 6)) for cid in order]  # type: ignore[type-var]


def mmr_select(
    index: HierarchicalIndex,
    query: str,
    candidates: Sequence[P],
    top_k: int,
    lambda_mult: float,
    *,
    query_vector: Sequence[float] | None = None,
) -> list[P]:
    """The ``top_k`` candidates MMR picks, in the order picked (most relevant first).

    Passages are embedded as documents with the index's encoder (the same vectors space as its
    search); the query as a query, or ``query_vector`` (HyDE's) when given.
    """
    if not candidates:
        return []
    embeddings = index.embeddings
    q = np.asarray(query_vector if query_vector is not None else embeddings.embed_query(query), dtype=np.float32)
    vectors = np.asarray(embeddings.embed_documents([p.text for p in candidates]), dtype=np.float32)
    picked = maximal_marginal_relevance(q, vectors, lambda_mult=lambda_mult, k=min(top_k, len(candidates)))
    return [candidates[i] for i in picked]


def rerank_by_scores(candidates: Sequence[P], scores: Sequence[float], top_k: int) -> list[P]:
    """The ``top_k`` candidates best rated first (a missing rating counts as 0; ties keep the
    retriever's order); each passage's score becomes its rating."""
    rated = [float(scores[i]) if i < len(scores) else 0.0 for i in range(len(candidates))]
    order = sorted(range(len(candidates)), key=lambda i: (-rated[i], i))[:top_k]
    return [replace(candidates[i], score=rated[i]) for i in order]  # type: ignore[type-var]
