"""Failure analysis from hand-made prediction records: one mode per run, counted per row, tabled per question."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from arag_graph.evaluators.failures import (
    FAILURE_MODES,
    failure_counts,
    failure_details,
    failure_mode,
    failures_csv,
    failures_markdown,
)


def run(
    graph: str = "arag",
    qid: str = "q1",
    *,
    contain_acc: float | None = 0.0,
    llm_acc: float | None = None,
    gold: tuple[str, ...] = ("1", "2"),
    retrieved: tuple[str, ...] = (),
    read: tuple[str, ...] = (),
    trajectory: tuple[tuple[str, tuple[str, ...]], ...] = (),
    steps: int = 2,
    step_cap: int | None = 15,
    setting: dict[str, Any] | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    setting = setting or {}
    return {
        "question_id": qid,
        "question": f"question {qid}?",
        "question_type": "bridge",
        "gold_chunk_ids": list(gold),
        "graph": graph,
        "setting": setting,
        "setting_key": ",".join(f"{k}={v}" for k, v in setting.items()),
        "step_cap": step_cap,
        "prediction": {
            "answer": "x",
            "read_chunks": list(read),
            "retrieved_chunks": list(retrieved),
            "trajectory": [{"tool": tool, "chunk_ids": list(ids)} for tool, ids in trajectory],
            "steps": steps,
            "error": error,
        },
        "metrics": {"contain_acc": contain_acc, "llm_acc": llm_acc},
    }


@pytest.mark.parametrize(
    ("record", "mode"),
    [
        (run(contain_acc=1.0), "correct"),
        # The judge's verdict wins where it was given: contained but judged wrong is wrong, and back.
        (run(contain_acc=1.0, llm_acc=0.0, retrieved=("1", "2"), read=("1", "2")), "read_wrong"),
        (run(contain_acc=0.0, llm_acc=1.0), "correct"),
        (run(error="graph failed: RuntimeError: boom", retrieved=("1", "2")), "error"),
        # The whole budget used: the cap comes before what the evidence looked like.
        (run(steps=15, retrieved=("1",)), "cap_reached"),
        (run(steps=5, step_cap=None, setting={"max_steps": 5}), "cap_reached"),  # a record without step_cap
        (run(steps=1, step_cap=None), "not_retrieved"),  # no cap at all (naive_rag): never reached
        (run(retrieved=("1", "9")), "not_retrieved"),  # one gold chunk of two is not enough
        (run(retrieved=("1",), trajectory=(("keyword_search", ("2",)),)), "not_read"),  # gold 2 only in a step
        (run(retrieved=("1", "2"), read=("1",)), "not_read"),
        (run(retrieved=("1", "2"), read=("1", "2", "7")), "read_wrong"),
        (run(read=("1", "2")), "read_wrong"),  # read without a search (pipelines record both anyway)
        (run(gold=(), retrieved=("1",)), "no_gold"),
        (run(contain_acc=None, llm_acc=None), "unscored"),
    ],
)
def test_each_mode(record: dict[str, Any], mode: str) -> None:
    assert failure_mode(record) == mode


def test_details_say_what_the_mode_rests_on() -> None:
    details = failure_details(run(retrieved=("1", "2", "5"), read=("2",), steps=4))
    assert details == {
        "question_id": "q1",
        "question_type": "bridge",
        "graph": "arag",
        "setting": "default",
        "correct": False,
        "scored_by": "contain_acc",
        "gold": 2,
        "gold_retrieved": 2,
        "gold_read": 1,
        "steps": 4,
        "chain_steps": 4,
        "step_cap": 15,
        "error": None,
        "mode": "not_read",
    }
    assert failure_details(run(contain_acc=0.0, llm_acc=1.0))["scored_by"] == "llm_acc"


def test_counts_cover_every_mode_and_sum_to_n() -> None:
    records = [run(contain_acc=1.0), run(qid="q2"), run(qid="q3", retrieved=("1", "2")), run(qid="q4", error="x")]
    counts = failure_counts(records)
    assert list(counts) == list(FAILURE_MODES)
    assert counts["correct"] == 1 and counts["not_retrieved"] == 1 and counts["not_read"] == 1 and counts["error"] == 1
    assert sum(counts.values()) == len(records)


def test_per_question_tables() -> None:
    records = [
        run("arag", "q1", contain_acc=1.0, retrieved=("1", "2"), read=("1", "2")),
        run("naive_rag", "q1", retrieved=("7",), read=("7",), step_cap=None, steps=1),
        run("arag", "q2", retrieved=("1", "2"), read=("2",)),
        run("arag", "q2", setting={"max_steps": 3}, steps=3, step_cap=3),
    ]
    table = failures_markdown(records)
    lines = [line for line in table.splitlines() if line.startswith("|")]
    assert lines[0] == "| question | type | arag | naive_rag | arag (max_steps=3) |"
    assert lines[2] == "| q1: question q1? | bridge | correct | gold never retrieved (0/2 retrieved, 0 read) |  |"
    assert lines[3] == (
        "| q2: question q2? | bridge | retrieved, never read (2/2 retrieved, 1 read) |  "
        "| cap reached (0/2 retrieved, 0 read) |"
    )

    rows = list(csv.DictReader(io.StringIO(failures_csv(records))))
    assert [(r["question_id"], r["graph"], r["setting"], r["mode"]) for r in rows] == [
        ("q1", "arag", "default", "correct"),
        ("q1", "naive_rag", "default", "not_retrieved"),
        ("q2", "arag", "default", "not_read"),
        ("q2", "arag", "max_steps=3", "cap_reached"),
    ]
    assert rows[1]["step_cap"] == "" and rows[3]["step_cap"] == "3" and rows[2]["gold_read"] == "1"


def _chains(record: dict[str, Any], chains: list[int]) -> dict[str, Any]:
    """The record with one retrieval step per entry, each in the chain given (CoRAG's trajectory)."""
    trajectory = [{"tool": "retrieve", "chunk_ids": [], "args": {"chain": c, "step": i}} for i, c in enumerate(chains)]
    record["prediction"].update(trajectory=trajectory, steps=len(chains))
    return record


def test_the_cap_bounds_each_chain_not_all_chains_together() -> None:
    """Best-of-N: four chains of 2 steps under a cap of 3 did not reach it; one chain of 3 did."""
    many_short = _chains(run("corag", retrieved=("1", "2"), step_cap=3), [0, 0, 1, 1, 2, 2, 3, 3])
    assert failure_mode(many_short) != "cap_reached"
    one_long = _chains(run("corag", retrieved=("1", "2"), step_cap=3), [0, 0, 1, 1, 1])
    assert failure_mode(one_long) == "cap_reached"
    assert failure_details(many_short)["chain_steps"] == 2 and failure_details(one_long)["chain_steps"] == 3
