"""Evaluation for arag-graph: metrics as pure functions and LangSmith-compatible evaluators.

Answer metrics live in :mod:`evaluators.answers`; they are re-exported here so that
``from evaluators import ANSWER_EVALUATORS`` is all a runner needs.
"""

from evaluators.answers import (
    ANSWER_EVALUATORS,
    answer_scores,
    contain_acc_evaluator,
    contain_match,
    exact_match,
    exact_match_evaluator,
    f1_evaluator,
    normalize_answer,
    token_f1,
)

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
