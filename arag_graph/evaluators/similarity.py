"""ARAGOG's Answer Similarity: cosine of the embeddings of the prediction and the gold answer.

Contain-Acc and EM are all-or-nothing on surface form; answer similarity gives graded credit to a
paraphrase ("the French capital" for "Paris") and is what ARAGOG reports next to Context
Precision. It works with any LangChain ``Embeddings``; the runner passes the index's own encoder
so the metric needs no extra model and no network.

Decisions:

* Texts are embedded as they are (not normalised like Contain-Acc): embedding models are trained on
  natural text, and casing or punctuation carries little weight in them anyway.
* With several gold aliases the best cosine counts, as for the other answer metrics.
* ``embed_query`` is used rather than ``embed_documents``: the same gold answers come back once per
  graph and setting, and :class:`arag_graph.index.encoders.SentenceEncoder` caches query embeddings.
* An empty prediction scores 0.0 without being embedded (an empty string still has an embedding,
  often close to short answers). A zero vector also scores 0.0 instead of dividing by zero.
* The raw cosine is reported, in [-1, 1]; normalised sentence encoders rarely go below 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from arag_graph.evaluators.fields import golds_of, prediction_of
from arag_graph.evaluators.scoring import named

__all__ = ["answer_similarity", "cosine", "make_answer_similarity_evaluator"]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors; 0.0 when either is all zeros."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    norm = float(np.linalg.norm(x) * np.linalg.norm(y))
    if norm == 0.0:
        return 0.0
    return float(np.clip(np.dot(x, y) / norm, -1.0, 1.0))


def answer_similarity(prediction: str, golds: str | Sequence[str], embeddings: Embeddings) -> float:
    """Best cosine between the embedding of ``prediction`` and that of any gold alias.

    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> round(answer_similarity("Paris", ["Lyon", "Paris"], DeterministicFakeEmbedding(size=8)), 6)
    1.0
    """
    prediction = (prediction or "").strip()
    aliases = [gold.strip() for gold in ((golds,) if isinstance(golds, str) else golds) if gold and gold.strip()]
    if not prediction or not aliases:
        return 0.0
    vector = embeddings.embed_query(prediction)
    return max(cosine(vector, embeddings.embed_query(alias)) for alias in dict.fromkeys(aliases))


def make_answer_similarity_evaluator(embeddings: Embeddings) -> Callable[..., dict[str, Any]]:
    """A LangSmith evaluator for :func:`answer_similarity`, feedback key ``answer_similarity``."""

    @named("answer_similarity")
    def answer_similarity_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
        prediction, comment = prediction_of(outputs)
        score = answer_similarity(prediction, golds_of(reference_outputs), embeddings)
        return {"key": "answer_similarity", "score": score, "comment": comment}

    return answer_similarity_evaluator
