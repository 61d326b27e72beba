"""Scoring one prediction: each evaluator runs once, its results kept as LangSmith feedback.

A resumed evaluation never re-scores a stored prediction, and LangSmith receives the stored scores
as feedback (:mod:`arag_graph.evaluators.upload`), so this is the one place evaluators run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger(__name__)


def _takes_inputs(evaluator: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(evaluator).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "inputs" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def evaluator_name(evaluator: Callable[..., Any]) -> str:
    """An evaluator's name as LangSmith shows it: its ``__name__`` (:func:`named`), a caller's own
    evaluator's without an ``_evaluator`` suffix (``my_metric`` for ``my_metric_evaluator``)."""
    return getattr(evaluator, "__name__", "metric").removesuffix("_evaluator")


_F = TypeVar("_F", bound=Callable[..., Any])


def named(name: str) -> Callable[[_F], _F]:
    """Give an evaluator its one name, everywhere: ``langsmith.evaluate`` names the evaluator's runs
    (and the feedback of a result without a key) after its ``__name__``, the CLI after
    :func:`evaluator_name`, and a one-key evaluator's feedback key is the same word. The Python
    names keep their ``_evaluator`` suffix (``contain_acc_evaluator``: the public names), and
    ``contain_acc`` is what every run, column and feedback is called; the library's evaluators were
    called ``contain_acc_evaluator`` in LangSmith and ``contain_acc`` by the CLI."""

    def give(evaluator: _F) -> _F:
        evaluator.__name__ = name
        return evaluator

    return give


@dataclass
class Scores:
    """What the evaluators made of one prediction."""

    metrics: dict[str, Any] = field(default_factory=dict)
    """Every key's score (None: unavailable, never guessed), for the summary."""
    feedback: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per evaluator, its results as it returned them (key, score, comment): LangSmith's feedback."""
    errors: dict[str, str] = field(default_factory=dict)
    """Per evaluator that raised, the error in one line."""


def score(
    prediction: dict[str, Any],
    reference: dict[str, Any],
    evaluators: Sequence[Callable[..., Any]],
    inputs: dict[str, Any] | None = None,
) -> Scores:
    """Run each evaluator once; a key whose evaluator fails is recorded as None, never guessed.

    ``inputs`` (the example's ``{"question": ...}``) goes to the evaluators that take it, as
    ``langsmith.evaluate`` would pass it: the LLM judge grades against the question it was asked.
    An evaluator that raises is logged and named in ``errors``, so the summary counts the runs it
    left unscored instead of their metric silently missing.
    """
    from arag_graph.core.safety import redact

    scores = Scores()
    for evaluator in evaluators:
        name = evaluator_name(evaluator)
        try:
            if inputs is not None and _takes_inputs(evaluator):
                result = evaluator(outputs=prediction, reference_outputs=reference, inputs=inputs)
            else:
                result = evaluator(outputs=prediction, reference_outputs=reference)
        except Exception as exc:
            scores.errors[name] = redact(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
            scores.metrics.setdefault(name, None)
            log.warning("evaluator %s failed, its metric is missing for this run: %s", name, scores.errors[name])
            continue
        items = result.get("results", [result]) if isinstance(result, dict) else list(result)
        scores.feedback[name] = [
            {"key": item["key"], "score": item.get("score"), "comment": item.get("comment")} for item in items
        ]
        for item in items:
            scores.metrics[item["key"]] = item.get("score")
    return scores
