"""The offline policy's answers before and after it read like a reader (issue 26 item 4).

Every question runs through each graph twice with the offline no-LLM policy: once with
``answer_style="sentence"`` (the answer before: the best-scoring sentence of what was read) and once
with ``"span"`` (the answer now: :mod:`arag_graph.offline.answer_span`'s short span). Retrieval does not
depend on the answer style, so both runs must retrieve and read the same chunks: the script checks
that for every question ("same trajectories"), so evidence recall is unchanged by construction and
the answer columns compare the two answerers on identical evidence.

Data sets: HotpotQA-100 (``data/hotpotqa-100``) and the 2Wiki lookup questions
(``bench/data/2wiki-lookup.json`` on ``data/2wiki-corpus``; its questions with an empty
gold answer, a sentence cut at its end, are left out and counted). The indexes and gold chunk IDs
are the ones ``arag eval`` uses (cached, built on first use).

    python bench/bench_offline_answers.py    # writes bench/results/offline_answers.{json,md}

A run of some data sets (``--datasets``) keeps the other data sets' results already in the output,
each with the command and seconds that measured it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchenv import DATA, RESULTS, ROOT, machine

from arag_graph.evaluators.eval_index import prepare_index
from arag_graph.evaluators.plan import EvalPlan
from arag_graph.evaluators.retrieval import evidence_scores
from arag_graph.offline.policy import OfflinePolicy
from arag_graph.qa.datasets import Question, load_questions
from arag_graph.qa.matching import answer_scores
from arag_graph.registry import build_graph, config_for

STYLES = ("sentence", "span")
METRICS = ("contain_acc", "exact_match", "f1", "evidence_recall")


def hotpotqa() -> tuple[Path, Path | None, list[Question], int]:
    path = DATA / "hotpotqa-100" / "questions.json"
    return path, None, list(load_questions(path)), 0


def lookup_2wiki() -> tuple[Path, Path | None, list[Question], int]:
    path = ROOT / "bench" / "data" / "2wiki-lookup.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    questions = [
        Question(
            id=r["_id"],
            question=r["question"],
            answers=(r["answer"],),
            supporting_titles=tuple(title for title, _ in r["supporting_facts"]),
            type=r["type"],
        )
        for r in raw
        if r["answer"].strip()
    ]
    return path, DATA / "2wiki-corpus" / "corpus.json", questions, len(raw) - len(questions)


DATASETS = {"hotpotqa-100": hotpotqa, "2wiki-lookup": lookup_2wiki}


def run(graph: Any, name: str, question: Question) -> dict[str, Any]:
    state = graph.invoke({"question": question.question}, context=config_for(name))
    return {
        "answer": state.get("answer") or "",
        "retrieved": list(state.get("retrieved_chunks") or []),
        "read": list(state.get("read_chunks") or []),
    }


def measure(name: str, index: Any, gold: dict[str, list[str]], questions: Sequence[Question]) -> dict[str, Any]:
    graphs = {
        style: build_graph(name, index=index, model=OfflinePolicy(index=index, answer_style=style)) for style in STYLES
    }
    rows = []
    for q in questions:
        out = {style: run(graphs[style], name, q) for style in STYLES}
        row: dict[str, Any] = {"id": q.id, "type": q.type, "gold": q.answers[0]}
        for style in STYLES:
            o = out[style]
            scores = answer_scores(o["answer"], q.answers)
            evidence = evidence_scores(gold.get(q.id, []), o["read"], o["retrieved"])
            scores["evidence_recall"] = evidence["evidence_recall"]
            row[style] = {"answer": o["answer"], **scores}
        first, second = (out[s] for s in STYLES)
        row["same_trajectory"] = first["retrieved"] == second["retrieved"] and first["read"] == second["read"]
        rows.append(row)
    return {"rows": rows, **summarise(rows)}


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def mean(style: str, metric: str, subset: Sequence[dict[str, Any]]) -> float | None:
        values = [r[style][metric] for r in subset if r[style][metric] is not None]
        return round(100 * statistics.mean(values), 1) if values else None

    types = sorted({r["type"] for r in rows if r["type"]})
    groups = {"all": list(rows), **{t: [r for r in rows if r["type"] == t] for t in types}}
    return {
        "same_trajectories": sum(r["same_trajectory"] for r in rows),
        "groups": {
            g: {"n": len(sub), **{s: {m: mean(s, m, sub) for m in METRICS} for s in STYLES}}
            for g, sub in groups.items()
        },
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Offline answers: best sentence (before) against the answer span (after)",
        "",
        "The offline policy is a deterministic no-LLM baseline: these numbers measure its retrieval and",
        "answer-extraction rules, not a language model. Each question ran through each graph twice,",
        "once per answer style; retrieval does not depend on the style, and *same trajectories* counts",
        "the questions whose two runs retrieved and read exactly the same chunks.",
        "",
        *[f"    {command}" for command in report["commands"].values()],
        "",
        "| data set | graph | questions | n | Contain-Acc before | after | EM before | after | F1 before | after "
        "| evidence recall before | after | same trajectories |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for dataset, graphs in report["results"].items():
        for graph, result in graphs.items():
            for group, g in result["groups"].items():
                cells = []
                for metric in METRICS:
                    cells += [_fmt(g["sentence"][metric]), _fmt(g["span"][metric])]
                same = f"{result['same_trajectories']}/{len(result['rows'])}" if group == "all" else ""
                lines.append(f"| {dataset} | {graph} | {group} | {g['n']} | {' | '.join(cells)} | {same} |")
    lines += [
        "",
        "Metrics in %: Contain-Acc (normalised gold inside the normalised answer, the A-RAG paper's rule), EM",
        "and token F1 against the gold answer; evidence recall: share of gold passages among the chunks",
        "retrieved or read. 2Wiki lookup: the first part of a passage's sentence (with its title, or alone),",
        "the rest of that sentence as gold;"
        f" {report['skipped'].get('2wiki-lookup', 0)} of its questions have an empty gold and are left out.",
        "Its gain comes from the fragment rule (the words after the fragment's end in the sentence read):",
        "it measures that the reader finds the right sentence and cuts it right, not question answering.",
        "",
        f"Machine: {report['machine']['cpu']}, {report['machine']['cores']} cores, "
        f"Python {report['machine']['python']}; "
        + ", ".join(f"{dataset} {seconds:.0f} s" for dataset, seconds in report["seconds"].items())
        + ".",
        "",
        "## Changed answers (first 40 per data set and graph)",
        "",
    ]
    for dataset, graphs in report["results"].items():
        for graph, result in graphs.items():
            changed = [r for r in result["rows"] if r["sentence"]["contain_acc"] != r["span"]["contain_acc"]]
            lines += [f"### {dataset}, {graph}: {len(changed)} questions change Contain-Acc", ""]
            lines += ["| question | gold | before | after |", "|---|---|---|---|"]
            for r in changed[:40]:
                before, after = (_cell(r[s]["answer"], r[s]["contain_acc"]) for s in STYLES)
                lines.append(f"| {r['id']} | {_escape(r['gold'])} | {before} | {after} |")
            lines.append("")
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _escape(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _cell(answer: str, correct: float) -> str:
    text = _escape(answer)
    text = text if len(text) <= 90 else text[:87] + "..."
    return f"{'✓' if correct else '✗'} {text}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", default="arag,naive_rag", help="comma-separated graphs (default arag,naive_rag)")
    parser.add_argument("--datasets", default=",".join(DATASETS), help=f"comma-separated, of {', '.join(DATASETS)}")
    parser.add_argument("--limit", type=int, default=None, help="first N questions of each data set")
    parser.add_argument("--out", type=Path, default=RESULTS / "offline_answers")
    args = parser.parse_args()
    given = (("graphs", args.graphs), ("datasets", args.datasets), ("limit", args.limit))
    command = " ".join(["python bench/bench_offline_answers.py", *(f"--{k} {v}" for k, v in given if v)])
    out = args.out.with_suffix(".json")
    report: dict[str, Any] = {"results": {}, "skipped": {}, "commands": {}, "seconds": {}}
    if out.exists():  # keep the data sets this run does not measure
        report = {**report, **json.loads(out.read_text(encoding="utf-8"))}
    for dataset in args.datasets.split(","):
        started = time.perf_counter()
        path, corpus, questions, skipped = DATASETS[dataset]()
        questions = questions[: args.limit] if args.limit else questions
        report["skipped"][dataset] = skipped
        plan = EvalPlan(dataset=path, graphs=[], out=Path("unused"), corpus=corpus)
        index, gold = prepare_index(plan, questions, progress=False)
        report["results"][dataset] = {}
        for graph in args.graphs.split(","):
            print(f"{dataset} / {graph}: {len(questions)} questions x {len(STYLES)} answer styles", flush=True)
            report["results"][dataset][graph] = measure(graph, index, gold, questions)
        report["commands"][dataset] = command
        report["seconds"][dataset] = round(time.perf_counter() - started, 1)
    report["machine"] = machine()
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(markdown(report) + "\n", encoding="utf-8")
    print(markdown(report).split("\n## ")[0])


if __name__ == "__main__":
    main()
