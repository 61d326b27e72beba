"""Evaluation for arag-graph: metrics as pure functions and LangSmith-compatible evaluators.

Every evaluator is a plain function of ``(outputs, reference_outputs)`` (LLM-Acc also takes the
example's ``inputs`` for the question) returning ``{"key", "score", "comment"}``, or
``{"results": [...]}`` for several keys, so it works unchanged in ``langsmith.evaluate``,
``aevaluate`` and the runner. ``outputs`` is a graph's prediction (``answer``, ``response``, ``read_chunks``,
``retrieved_chunks``, ``retrieved_tokens``, ``steps``, ``usage``); ``reference_outputs`` is
``{"answers": [...], "gold_chunk_ids": [...]}``. A score of ``None`` means unavailable (no judge,
no gold chunk ids, no usage metadata) and is never replaced by an estimate.

Contain-Acc and LLM-Acc grade the whole final reply (``response``), as the A-RAG paper's evaluator
does; EM and F1 the parsed short ``answer`` (:data:`arag_graph.evaluators.fields.GRADED_TEXT`).

Modules: :mod:`arag_graph.evaluators.answers` (Contain-Acc, EM, F1), :mod:`arag_graph.evaluators.judge` (LLM-Acc),
:mod:`arag_graph.evaluators.retrieval` (evidence recall/precision, tokens, steps, usage, cost),
:mod:`arag_graph.evaluators.similarity` (answer similarity), ARAGOG's
:mod:`arag_graph.evaluators.context_precision`, :mod:`arag_graph.evaluators.answer_relevance` and
:mod:`arag_graph.evaluators.faithfulness`, :mod:`arag_graph.evaluators.failures` (failure modes) and
:mod:`arag_graph.evaluators.report` (summary, breakdowns) with :mod:`arag_graph.evaluators.plots`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from arag_graph.evaluators.answer_relevance import make_answer_relevance_evaluator
from arag_graph.evaluators.answers import (
    ANSWER_EVALUATORS,
    answer_scores,
    answer_scores_of,
    contain_acc_evaluator,
    contain_match,
    exact_match,
    exact_match_evaluator,
    f1_evaluator,
    normalize_answer,
    token_f1,
)
from arag_graph.evaluators.context import ChunkSource
from arag_graph.evaluators.context_precision import (
    context_precision,
    context_precision_evaluator,
    context_precision_ragas,
    make_context_precision_evaluator,
)
from arag_graph.evaluators.faithfulness import make_faithfulness_evaluator
from arag_graph.evaluators.judge import JudgeVerdict, judge_prompt, make_llm_acc_evaluator, resolve_judge
from arag_graph.evaluators.retrieval import (
    cost_usd,
    evidence_precision_evaluator,
    evidence_recall_evaluator,
    evidence_scores,
    make_usage_evaluator,
    read_recall_evaluator,
    retrieved_tokens_evaluator,
    steps_evaluator,
    usage_from_messages,
)
from arag_graph.evaluators.similarity import answer_similarity, make_answer_similarity_evaluator

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "ANSWER_EVALUATORS",
    "EVIDENCE_EVALUATORS",
    "JudgeVerdict",
    "answer_scores",
    "answer_scores_of",
    "answer_similarity",
    "contain_acc_evaluator",
    "contain_match",
    "context_precision",
    "context_precision_evaluator",
    "context_precision_ragas",
    "cost_usd",
    "default_evaluators",
    "evidence_precision_evaluator",
    "evidence_recall_evaluator",
    "evidence_scores",
    "exact_match",
    "exact_match_evaluator",
    "f1_evaluator",
    "judge_prompt",
    "make_answer_relevance_evaluator",
    "make_answer_similarity_evaluator",
    "make_context_precision_evaluator",
    "make_faithfulness_evaluator",
    "make_llm_acc_evaluator",
    "make_usage_evaluator",
    "normalize_answer",
    "read_recall_evaluator",
    "resolve_judge",
    "retrieved_tokens_evaluator",
    "steps_evaluator",
    "token_f1",
    "usage_from_messages",
]

EVIDENCE_EVALUATORS = (evidence_recall_evaluator, read_recall_evaluator, evidence_precision_evaluator)
"""Evidence recall (retrieved or read), read recall and evidence precision (read)."""


def default_evaluators(
    embeddings: Embeddings | None = None,
    judge: BaseChatModel | None = None,
    *,
    model: str | None = None,
    prices: Mapping[str, Sequence[float]] | str | os.PathLike[str] | None = None,
    chunks: ChunkSource | None = None,
) -> list[Callable[..., dict[str, Any]]]:
    """Every evaluator the data supports, ready for ``langsmith.evaluate(..., evaluators=...)``.

    Always: Contain-Acc, EM, F1, evidence recall / read recall / precision, ARAGOG's Context
    Precision (from gold chunk IDs; with a ``judge`` and ``chunks``, the index, also for questions
    without them), retrieved tokens, steps and usage (input/output tokens, and cost when ``model``
    (the ``--model`` spec) has a price; ``prices`` overrides the table, see
    :data:`evaluators.retrieval.DEFAULT_PRICES`). Answer similarity only with ``embeddings``; LLM-Acc
    only with a ``judge``; Answer Relevance with a ``judge`` and ``embeddings``; Faithfulness with a
    ``judge`` and ``chunks``: a metric without its model is left out (and reported unavailable),
    never approximated.
    """
    evaluators: list[Callable[..., dict[str, Any]]] = [
        *ANSWER_EVALUATORS,
        *EVIDENCE_EVALUATORS,
        make_context_precision_evaluator(judge, chunks),
        retrieved_tokens_evaluator,
        steps_evaluator,
        make_usage_evaluator(model, prices),
    ]
    if embeddings is not None:
        evaluators.append(make_answer_similarity_evaluator(embeddings))
    if judge is not None:
        evaluators.append(make_llm_acc_evaluator(judge))
        if embeddings is not None:
            evaluators.append(make_answer_relevance_evaluator(judge, embeddings))
        if chunks is not None:
            evaluators.append(make_faithfulness_evaluator(judge, chunks))
    return evaluators
