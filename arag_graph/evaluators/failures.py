"""Failure analysis: where a run lost its answer, told from its prediction record alone.

The A-RAG paper explains its comparison by failure modes: Naive RAG mostly never finds the
evidence, A-RAG mostly finds it and then reasons wrongly. Those modes that a trajectory can show are
classified here for every (question, graph, setting) record, so a summary says where each graph
loses and a per-question table shows, question by question, which graph lost where.

Each record gets exactly one mode, the first that applies in this order:

``correct``
    the answer is right: LLM-Acc when the judge scored this item, else Contain-Acc.
``error``
    the run failed (``prediction.error``); the evaluation scores it as a wrong answer.
``cap_reached``
    the run used its whole step budget (``steps`` reached the step cap) and was made to answer;
    first among the wrong answers because it is the one a larger budget can fix, whatever the
    evidence looked like at that point (the per-question table still shows the evidence).
``not_retrieved``
    some gold chunk never surfaced in any tool result (neither as a snippet nor read).
``not_read``
    every gold chunk surfaced, but some never reached the model in full (seen as a snippet only).
``read_wrong``
    every gold chunk was read in full and the answer is still wrong: a reasoning or answer error.
``no_gold``
    a wrong answer to a question without gold chunk IDs, so the evidence cannot be told.
``unscored``
    neither LLM-Acc nor Contain-Acc was computed for the item.

Multi-hop questions need all their gold passages, so one missing gold chunk is enough for
``not_retrieved``. The step cap is the record's ``step_cap`` (written by the runner from the
graph's configuration), else the swept ``max_steps`` of its setting; graphs without a cap (Direct,
Naive RAG) never reach one. The cap bounds one chain: CoRAG's best-of-N and tree search run
several chains, whose steps (``args.chain`` in the trajectory) are counted per chain, so a run
reaches the cap when its longest chain does, not when all chains together pass it. The
message-token budget that can also end an A-RAG run is not recorded, so it is not a mode.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from arag_graph.evaluators.fields import chunk_ids

__all__ = [
    "FAILURE_MODES",
    "failure_counts",
    "failure_details",
    "failure_mode",
    "failures_csv",
    "failures_markdown",
]

FAILURE_MODES: dict[str, str] = {
    "correct": "correct",
    "error": "error",
    "cap_reached": "cap reached",
    "not_retrieved": "gold never retrieved",
    "not_read": "retrieved, never read",
    "read_wrong": "read, answer wrong",
    "no_gold": "wrong, no gold ids",
    "unscored": "unscored",
}
"""Mode keys in classification order, with the label tables use."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, (int, float)) else None


def _step_cap(record: Mapping[str, Any]) -> int | None:
    cap = _number(record.get("step_cap"))
    if cap is None:
        cap = _number((record.get("setting") or {}).get("max_steps"))
    return int(cap) if cap is not None and cap > 0 else None


def failure_details(record: Mapping[str, Any]) -> dict[str, Any]:
    """The facts behind a record's mode, plus the mode itself (one row of the per-question table)."""
    prediction = record.get("prediction") or {}
    metrics = record.get("metrics") or {}
    judged = _number(metrics.get("llm_acc"))
    contained = _number(metrics.get("contain_acc"))
    correct, scored_by = (judged, "llm_acc") if judged is not None else (contained, "contain_acc")
    if correct is None:
        scored_by = None
    gold = set(chunk_ids(record.get("gold_chunk_ids")))
    read = set(chunk_ids(prediction.get("read_chunks")))
    surfaced = read | set(chunk_ids(prediction.get("retrieved_chunks")))
    for step in prediction.get("trajectory") or []:
        if isinstance(step, Mapping):
            surfaced |= set(chunk_ids(step.get("chunk_ids")))
    steps = int(_number(prediction.get("steps")) or 0)
    cap = _step_cap(record)
    chain_steps = _longest_chain(prediction.get("trajectory") or [], steps)
    details: dict[str, Any] = {
        "question_id": record.get("question_id"),
        "question_type": record.get("question_type"),
        "graph": record.get("graph"),
        "setting": record.get("setting_key") or "default",
        "correct": None if correct is None else correct >= 0.5,
        "scored_by": scored_by,
        "gold": len(gold),
        "gold_retrieved": len(gold & surfaced),
        "gold_read": len(gold & read),
        "steps": steps,
        "chain_steps": chain_steps,
        "step_cap": cap,
        "error": prediction.get("error") or None,
    }
    details["mode"] = _mode(details)
    return details


def _longest_chain(trajectory: Sequence[Any], steps: int) -> int:
    """Steps of the run's longest chain: the steps of each ``args.chain``, or all steps when there is one chain."""
    per_chain: dict[str, int] = {}
    for step in trajectory:
        args = step.get("args") if isinstance(step, Mapping) else None
        chain = args.get("chain") if isinstance(args, Mapping) else None
        if chain is None:
            return steps
        per_chain[str(chain)] = per_chain.get(str(chain), 0) + 1
    return max(per_chain.values(), default=steps)


def _mode(d: Mapping[str, Any]) -> str:
    if d["correct"] is None:
        return "unscored"
    if d["correct"]:
        return "correct"
    if d["error"]:
        return "error"
    if d["step_cap"] is not None and d.get("chain_steps", d["steps"]) >= d["step_cap"]:
        return "cap_reached"
    if not d["gold"]:
        return "no_gold"
    if d["gold_retrieved"] < d["gold"]:
        return "not_retrieved"
    if d["gold_read"] < d["gold"]:
        return "not_read"
    return "read_wrong"


def failure_mode(record: Mapping[str, Any]) -> str:
    """The record's mode, one of :data:`FAILURE_MODES` (see the module docstring for the order)."""
    return failure_details(record)["mode"]


def failure_counts(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many records fall in each mode; every mode is present, so the counts sum to n."""
    counts = dict.fromkeys(FAILURE_MODES, 0)
    for record in records:
        counts[failure_mode(record)] += 1
    return counts


# --- the per-question table ----------------------------------------------------------------------

_CSV_FIELDS = (
    "question_id",
    "question_type",
    "graph",
    "setting",
    "mode",
    "correct",
    "scored_by",
    "gold",
    "gold_retrieved",
    "gold_read",
    "steps",
    "step_cap",
    "error",
)


def _column(record: Mapping[str, Any]) -> str:
    key = record.get("setting_key") or ""
    return f"{record.get('graph')} ({key})" if key and key != "default" else str(record.get("graph"))


def _escape_md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def failures_markdown(records: Sequence[Mapping[str, Any]]) -> str:
    """One row per question, one column per graph and setting: each cell is that run's mode.

    Questions and columns keep their first-seen order; a question one run did not answer shows "".
    """
    columns: dict[str, None] = {}
    questions: dict[str, dict[str, Any]] = {}
    for record in records:
        column = _column(record)
        columns.setdefault(column, None)
        qid = str(record.get("question_id"))
        row = questions.setdefault(qid, {"type": record.get("question_type"), "question": record.get("question")})
        row[column] = failure_details(record)
    with_type = any(row["type"] for row in questions.values())
    header = ["question", *(["type"] if with_type else []), *columns]
    lines = [
        "# Failure analysis",
        "",
        "Where each run lost its answer (modes in `summary.md`; the details per run are in `failures.csv`).",
        "",
        "| " + " | ".join(_escape_md(h) for h in header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    for qid, row in questions.items():
        text = " ".join(str(row.get("question") or "").split())
        label = f"{qid}: {text[:70]}{'...' if len(text) > 70 else ''}" if text else qid
        cells = [label, *([str(row["type"] or "")] if with_type else [])]
        for column in columns:
            details = row.get(column)
            if details is None:
                cells.append("")
                continue
            cell = FAILURE_MODES[details["mode"]]
            if details["mode"] not in ("correct", "error", "unscored") and details["gold"]:
                cell += f" ({details['gold_retrieved']}/{details['gold']} retrieved, {details['gold_read']} read)"
            cells.append(cell)
        lines.append("| " + " | ".join(_escape_md(cell) for cell in cells) + " |")
    lines.append("")
    return "\n".join(lines)


def failures_csv(records: Iterable[Mapping[str, Any]]) -> str:
    """The per-run table as CSV text: one line per record, the facts behind its mode."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=_CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for record in records:
        details = failure_details(record)
        writer.writerow({name: "" if details[name] is None else details[name] for name in _CSV_FIELDS})
    return buffer.getvalue()
