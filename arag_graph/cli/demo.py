"""``arag demo``: sample questions answered on the bundled sample with the offline policy, and the
HTML report of those runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arag_graph.cli import args as cliargs
from arag_graph.cli.ask import result_record, run_question
from arag_graph.cli.output import print_json
from arag_graph.core.errors import AragError


def cmd_demo(args: argparse.Namespace) -> int:
    """Build the sample index if needed, then answer sample questions with the offline policy."""
    from arag_graph.core.cache import cache_dir
    from arag_graph.evaluators.html_report import REPORT_FILE, questions_report
    from arag_graph.index.sample import default_sample_index_path, ensure_sample_index, sample_questions_path
    from arag_graph.llm.models import resolve_chat_model
    from arag_graph.qa.datasets import load_questions
    from arag_graph.registry import config_for, get_graph_spec

    if args.questions < 1:
        raise AragError(f"--questions {args.questions}: give 1 or more sample questions, e.g. --questions 3")
    get_graph_spec(args.graph)
    if args.html is not None:
        cliargs.html_file(Path(args.html), "--html")
    path = Path(args.index) if args.index else default_sample_index_path()
    show = print if not args.json else lambda *_args, **_kwargs: None  # --json: one object, nothing else
    show(f"sample index: {path} (100 HotpotQA passages; built on first run)")
    index = ensure_sample_index(path if args.index else None, progress=not args.quiet and sys.stderr.isatty())
    model = resolve_chat_model("offline", index=index)
    show("model: offline, a deterministic no-LLM policy (not a language model): its answers are spans")
    show("that fixed rules extract from the passages it read (arag_graph/offline/answer_span.py); with an API key,")
    show("`arag ask --model gpt-4o-mini` runs a real agent.")
    questions = load_questions(sample_questions_path())[: args.questions]
    html = Path(args.html) if args.html else cache_dir() / "demo" / REPORT_FILE
    answered: list[dict[str, Any]] = []
    shown_runs: list[dict[str, Any]] = []  # the report's records: the evaluation's, scored the same way
    context = config_for(args.graph)  # the graph's defaults, checked once for every question
    for i, q in enumerate(questions, 1):
        show(f"\n[{i}/{len(questions)}] {q.question}")
        state = run_question(args.graph, q.question, index=index, model=model, context=context, echo=not args.json)
        record = result_record(state, args.graph, "offline")
        evidence = gold_evidence(index, q, record)
        answered.append({"question": q.question, "gold_answers": list(q.answers), "gold_passages": evidence, **record})
        shown_runs.append(demo_record(q, state, evidence))
        show(f"  answer: {record['answer']}   (gold answer: {q.answers[0]})")
        show(f"  citations: {', '.join(record['citations']) or 'none'}")
        for line in evidence_lines(evidence):
            show(f"  {line}")
        show(f"  steps: {record['steps']}, retrieved tokens: {record['retrieved_tokens']}")
        if record["error"]:
            show(f"  error: {record['error']}")
    title = f"arag demo: {len(questions)} sample question(s), {args.graph}, offline policy"
    if not args.html:  # the cache's own folder; a user's --html names a file in a folder they have
        with cliargs.file_errors_as_one_line(str(html.parent)):
            html.parent.mkdir(parents=True, exist_ok=True)
    path = questions_report(shown_runs, args.graph, "offline", index, html, title=title)
    if args.json:
        report = {"index": str(index.path), "model": "offline", "graph": args.graph, "report": str(path)}
        print_json(report | {"questions": answered})
    else:
        show(f"\nreport (open in a browser): {path}")
    return 0


def demo_record(question: Any, state: dict[str, Any], evidence: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One demo question as the evaluation records it (prediction, gold, metrics), for the report.

    The metrics are the evaluation's own (Contain-Acc, EM, F1, evidence recall), so the page says
    exactly what ``arag eval`` would of the same run.
    """
    from arag_graph.core.jsonl import finite, scrub
    from arag_graph.evaluators.answers import answer_scores_of
    from arag_graph.evaluators.retrieval import evidence_scores
    from arag_graph.evaluators.runner import prediction_of

    prediction = scrub(finite(prediction_of(state)))
    gold = [cid for e in evidence for cid in e["chunk_ids"]]
    metrics: dict[str, Any] = answer_scores_of(prediction, list(question.answers))
    metrics |= evidence_scores(gold, prediction.get("read_chunks") or (), prediction.get("retrieved_chunks") or ())
    return {
        "question_id": question.id,
        "question": question.question,
        "question_type": question.type,
        "answers": list(question.answers),
        "gold_chunk_ids": gold,
        "prediction": prediction,
        "metrics": metrics,
    }


def gold_evidence(index: Any, question: Any, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Per gold passage of ``question``: its chunk IDs, whether a search returned it (``found``: in
    the run's retrieved or read chunks) and whether the run read it in full (``read``)."""
    retrieved, read = set(record["retrieved_chunks"]), set(record["read_chunks"])
    out = []
    for title in dict.fromkeys(question.supporting_titles):
        ids = list(index.ids_for_title(title))
        found, in_full = bool((retrieved | read) & set(ids)), bool(read & set(ids))
        out.append({"title": title, "chunk_ids": ids, "found": found, "read": in_full})
    return out


def evidence_lines(evidence: Sequence[dict[str, Any]]) -> list[str]:
    """``gold passage "T" (chunk 5): found, read`` lines, one per gold passage."""
    lines = []
    for e in evidence:
        where = f"chunk {', '.join(e['chunk_ids'])}" if e["chunk_ids"] else "not in the index"
        state = ("found" if e["found"] else "never found") + (", read" if e["read"] else ", not read")
        lines.append(f'gold passage "{e["title"]}" ({where}): {state}')
    return lines


def add_commands(sub: Any, common: dict[str, Any]) -> None:
    """``arag demo``: its arguments."""
    p = sub.add_parser("demo", help="answer sample questions on the bundled sample with the offline policy", **common)
    p.add_argument("--index", default=None, help="where the sample index lives (default: user cache)")
    p.add_argument("--questions", type=int, default=3, help="how many sample questions (default 3)")
    cliargs.listed(
        p.add_argument("--graph", default="arag", help="which graph answers them (default arag)"), cliargs.graph_names
    )
    p.add_argument(
        "--html",
        default=None,
        metavar="FILE",
        help="where the HTML report goes (default: user cache, demo/report.html)",
    )
    p.add_argument("--json", action="store_true", help="print the answers and trajectories as one JSON object")
    p.set_defaults(func=cmd_demo)
