"""What ``arag eval`` hands LangSmith: one evaluator per metric evaluator, replaying the stored scores.

End to end (a recording LangSmith stand-in) in ``tests/test_eval_runner.py``; here the rules for
records of every age: with each evaluator's results, with only metrics (written before records
kept them), and with an evaluator that raised.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from arag_graph.evaluators.answers import contain_acc_evaluator, f1_evaluator
from arag_graph.evaluators.retrieval import make_usage_evaluator
from arag_graph.evaluators.scoring import score
from arag_graph.evaluators.upload import feedback_evaluators

PREDICTION = {"answer": "It is Paris.", "usage": {"input_tokens": 100, "output_tokens": 10}}
REFERENCE = {"answers": ["Paris"], "gold_chunk_ids": []}


def broken_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    raise ValueError("no idea")


EVALUATORS = [contain_acc_evaluator, f1_evaluator, make_usage_evaluator("gpt-4o-mini"), broken_evaluator]


def fake_run(record: dict[str, Any]) -> Any:
    return SimpleNamespace(evaluators=EVALUATORS, recorded=lambda qid: record if qid == "q1" else None)


def handed_over(record: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    evaluators = feedback_evaluators(fake_run(record))
    return {e.__name__: e({"question_id": "q1", "question": "?"})["results"] for e in evaluators}


def test_each_evaluator_hands_over_its_own_results_with_comments() -> None:
    scores = score(PREDICTION, REFERENCE, EVALUATORS)
    record = {"metrics": scores.metrics, "feedback": scores.feedback, "evaluator_errors": scores.errors}
    given = handed_over(record)
    assert list(given) == ["contain_acc", "f1", "usage", "broken"]
    assert [(r["key"], r["score"]) for r in given["contain_acc"]] == [("contain_acc", 1.0)]
    assert [r["key"] for r in given["usage"]] == ["input_tokens", "output_tokens", "cost_usd"]
    # The evaluator that raised: feedback under its name marked an error, as LangSmith records one.
    (failed,) = given["broken"]
    assert failed["key"] == "broken" and failed["score"] is None and failed["extra"] == {"error": True}
    assert failed["comment"] == "evaluator failed: ValueError: no idea"


def test_a_record_with_metrics_only_still_hands_over_every_key_once() -> None:
    scores = score(PREDICTION, REFERENCE, EVALUATORS)
    given = handed_over({"metrics": {k: v for k, v in scores.metrics.items() if k != "broken"}})
    keys = [r["key"] for results in given.values() for r in results]
    assert sorted(keys) == sorted(["contain_acc", "f1", "input_tokens", "output_tokens", "cost_usd"])
    assert [r["key"] for r in given["f1"]] == ["f1"]


def test_unavailable_scores_are_left_out_and_an_unknown_question_gets_nothing() -> None:
    record = {"metrics": {"f1": None}, "feedback": {"f1": [{"key": "f1", "score": None, "comment": "n/a"}]}}
    assert handed_over(record)["f1"] == []
    (contain,) = [e for e in feedback_evaluators(fake_run(record)) if e.__name__ == "contain_acc"]
    assert contain({"question_id": "other"}) == {"results": []}
