"""Short-answer evaluators for ``langsmith.evaluate``: Contain-Acc, exact match and token F1.

The metrics themselves (normalisation, matching, the decisions a reader of the scores should know)
live in the library, :mod:`arag_graph.qa.answers`, because rejection sampling needs them too; they are
re-exported here, where evaluation code has always found them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from arag_graph.core.errors import DatasetError
from arag_graph.qa.answers import answer_scores, contain_match, exact_match, normalize_answer, token_f1

__all__ = [
    "ANSWER_EVALUATORS",
    "answer_scores",
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


def _prediction(outputs: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """The predicted answer, plus a comment when the run produced none (scored as wrong)."""
    value = (outputs or {}).get("answer")
    if value is None:
        keys = ", ".join(sorted(outputs or {})) or "none"
        return "", f"the run returned no 'answer' (output keys: {keys}); scored as wrong"
    return (value if isinstance(value, str) else str(value)), None


def _golds(reference_outputs: Mapping[str, Any] | None) -> list[str]:
    reference = reference_outputs or {}
    golds: list[str] = []
    for key in ("answer", "answers"):
        value = reference.get(key)
        if isinstance(value, str):
            golds.append(value)
        elif isinstance(value, Sequence):
            golds.extend(str(alias) for alias in value if alias is not None)
        elif value is not None:
            golds.append(str(value))
    if not any(gold.strip() for gold in golds):
        keys = ", ".join(sorted(reference)) or "none"
        raise DatasetError(
            f"the example's reference outputs have no gold answer (keys: {keys}); "
            "put the gold answer in 'answers' (list of aliases) or 'answer' (string)"
        )
    return list(dict.fromkeys(golds))


def contain_acc_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    """LangSmith evaluator for :func:`contain_match`, feedback key ``contain_acc``."""
    prediction, comment = _prediction(outputs)
    score = float(contain_match(prediction, _golds(reference_outputs)))
    return {"key": "contain_acc", "score": score, "comment": comment}


def exact_match_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    """LangSmith evaluator for :func:`exact_match`, feedback key ``exact_match``."""
    prediction, comment = _prediction(outputs)
    score = float(exact_match(prediction, _golds(reference_outputs)))
    return {"key": "exact_match", "score": score, "comment": comment}


def f1_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    """LangSmith evaluator for :func:`token_f1`, feedback key ``f1``."""
    prediction, comment = _prediction(outputs)
    score = token_f1(prediction, _golds(reference_outputs))
    return {"key": "f1", "score": score, "comment": comment}


ANSWER_EVALUATORS = (contain_acc_evaluator, exact_match_evaluator, f1_evaluator)
"""The three short-answer evaluators, ready for ``langsmith.evaluate(..., evaluators=...)``."""
