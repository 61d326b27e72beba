"""Answer evaluators for ``langsmith.evaluate``: Contain-Acc, exact match and token F1.

Contain-Acc grades the run's whole final reply, as the A-RAG paper's released evaluator does; EM
and F1 grade the short answer parsed from its ``Answer:`` line (:data:`~arag_graph.evaluators.fields.GRADED_TEXT`).

The metrics themselves (normalisation, matching, the decisions a reader of the scores should know)
live in the library, :mod:`arag_graph.qa.matching`, because rejection sampling needs them too; they are
re-exported here, where evaluation code has always found them.
"""

from __future__ import annotations

from typing import Any

from arag_graph.evaluators.fields import golds_of, prediction_of, reply_of
from arag_graph.evaluators.scoring import named
from arag_graph.qa.matching import answer_scores, contain_match, exact_match, normalize_answer, token_f1

__all__ = [
    "ANSWER_EVALUATORS",
    "answer_scores",
    "answer_scores_of",
    "contain_acc_evaluator",
    "contain_match",
    "exact_match",
    "exact_match_evaluator",
    "f1_evaluator",
    "normalize_answer",
    "token_f1",
]


# --- LangSmith evaluators --------------------------------------------------------------------------
#
# langsmith.evaluate binds evaluator parameters by name; ``outputs`` and ``reference_outputs`` are
# the target's output dict and the example's outputs dict. That form keeps the evaluators plain
# functions of two dicts (no Run/Example objects to build in tests) and works with evaluate,
# aevaluate and the pytest plugin alike. Each returns a literal ``{"key": ..., "score": ...}`` so
# LangSmith can also read the feedback key from the source before running anything.


@named("contain_acc")
def contain_acc_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    """LangSmith evaluator for :func:`contain_match`, feedback key ``contain_acc``.

    It reads the whole final reply (:func:`~arag_graph.evaluators.fields.reply_of`), as the A-RAG
    paper's evaluator does; EM and F1 read the short answer.
    """
    prediction, comment = reply_of(outputs)
    score = float(contain_match(prediction, golds_of(reference_outputs)))
    return {"key": "contain_acc", "score": score, "comment": comment}


@named("exact_match")
def exact_match_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    """LangSmith evaluator for :func:`exact_match`, feedback key ``exact_match``, on the short answer."""
    prediction, comment = prediction_of(outputs)
    score = float(exact_match(prediction, golds_of(reference_outputs)))
    return {"key": "exact_match", "score": score, "comment": comment}


@named("f1")
def f1_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    """LangSmith evaluator for :func:`token_f1`, feedback key ``f1``, on the short answer."""
    prediction, comment = prediction_of(outputs)
    score = token_f1(prediction, golds_of(reference_outputs))
    return {"key": "f1", "score": score, "comment": comment}


ANSWER_EVALUATORS = (contain_acc_evaluator, exact_match_evaluator, f1_evaluator)
"""The three answer evaluators, ready for ``langsmith.evaluate(..., evaluators=...)``."""


def answer_scores_of(prediction: dict[str, Any], golds: list[str]) -> dict[str, float]:
    """The three metrics of a run's prediction record, each on the text its evaluator reads."""
    reference = {"answers": golds}
    return {
        result["key"]: result["score"]
        for result in (evaluator(prediction, reference) for evaluator in ANSWER_EVALUATORS)
    }
