"""How fast ``report.html`` opens for a large run: 1,000 questions x 6 graphs, target under 3 s (issue 26).

A synthetic evaluation directory is written in the runner's own format (prediction records with
trajectories of 1 to 8 tool calls, CoRAG chains, SRAG sub-questions and fact tables, a snippet for
every chunk they name, summary rows and plots from the real code), the report is built with
``arag report``'s code, and headless Chromium (the system's, driven by Playwright) opens it from
disk several times. Measured per load:

* ``ready``: from navigation start to the end of the page's script (the summary, the plots and the
  first page of questions drawn: what a person sees), read from ``performance.now()`` in the page;
* ``load``: the navigation timing's ``loadEventEnd`` (every inline plot decoded);
* ``filter``: choosing a failure mode in the filter until the list is redrawn;
* ``expand``: opening the first question's detail (every graph's trajectory drawn).

The verdict reads the slowest ``load`` of all runs (a person waits for the slowest).

    .venv/bin/python bench/bench_report.py [--questions 1000] [--graphs 6] [--loads 5]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchenv import RESULTS, ROOT, machine

TARGET_SECONDS = 3.0
GRAPHS = ("arag", "arag_naive", "naive_rag", "corag", "srag", "direct", "arag_v2", "naive_rag_v2")
TOOLS = ("keyword_search", "semantic_search", "chunk_read")
WORDS = ("river", "album", "born", "director", "city", "founded", "novel", "film", "band", "county", "actor", "war")


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def synthetic_record(rng: random.Random, qid: int, graph: str, corpus: int) -> dict[str, Any]:
    """One prediction record as the runner writes it, with the structure each kind of graph adds."""
    gold = [str(rng.randrange(corpus)) for _ in range(2)]
    steps = rng.randint(1, 8)
    trajectory, read, seen = [], [], []
    for k in range(steps):
        tool = TOOLS[k % 3] if graph.startswith("arag") else "retrieve"
        ids = [str(rng.randrange(corpus)) for _ in range(1 if tool == "chunk_read" else 5)]
        if rng.random() < 0.3:
            ids[0] = gold[k % 2]
        seen += ids
        read += ids if tool in ("chunk_read", "retrieve") else []
        args = (
            {"keywords": [rng.choice(WORDS), rng.choice(WORDS)]}
            if tool == "keyword_search"
            else {"query": sentence(rng, 8)}
        )
        step: dict[str, Any] = {
            "tool": tool,
            "args": args,
            "tokens": rng.randint(100, 1200),
            "chunk_ids": ids,
            "error": False,
        }
        if graph == "corag":
            step["sub_answer"] = sentence(rng, 6)
        trajectory.append(step)
    correct = rng.random() < 0.45
    prediction: dict[str, Any] = {
        "answer": sentence(rng, rng.randint(2, 12)),
        "citations": read[:2],
        "read_chunks": sorted(set(read)),
        "retrieved_chunks": sorted(set(seen)),
        "retrieved_tokens": sum(s["tokens"] for s in trajectory),
        "steps": steps,
        "trajectory": trajectory,
        "error": None if rng.random() > 0.02 else "graph failed: TimeoutError: synthetic",
        "warnings": [],
        "usage": None,
    }
    if graph == "corag":
        prediction["chain"] = [
            {
                "step": k + 1,
                "query": s["args"].get("query", ""),
                "chunk_ids": s["chunk_ids"],
                "sub_answer": s["sub_answer"],
                "penalty": round(rng.random(), 2),
                "is_sufficient": k == steps - 1,
            }
            for k, s in enumerate(trajectory)
        ]
    if graph == "srag":
        prediction["sub_questions"] = [
            {"id": i + 1, "question": sentence(rng, 7), "depends_on": [i] if i else [], "status": "done", "answer": ""}
            for i in range(2)
        ]
        prediction["table"] = [
            {"subject": sentence(rng, 2), "predicate": "states", "object": sentence(rng, 10), "sources": [seen[i]]}
            for i in range(min(6, len(seen)))
        ]
    return {
        "question_id": f"q{qid:05d}",
        "question": sentence(rng, 14).rstrip(".") + "?",
        "question_type": rng.choice(("bridge", "comparison")),
        "answers": [sentence(rng, 2).rstrip(".")],
        "gold_chunk_ids": gold,
        "graph": graph,
        "setting": {},
        "setting_key": "default",
        "model": "synthetic",
        "prediction": prediction,
        "metrics": {
            "contain_acc": float(correct),
            "exact_match": float(correct and rng.random() < 0.5),
            "f1": rng.random(),
            "evidence_recall": rng.choice((0.0, 0.5, 1.0)),
            "retrieved_tokens": prediction["retrieved_tokens"],
            "steps": steps,
        },
        "step_cap": 15 if graph.startswith("arag") or graph == "corag" else None,
        "seconds": round(rng.uniform(0.5, 20), 3),
    }


def write_run(out: Path, questions: int, graphs: int, seed: int) -> None:
    """A run directory as ``arag eval`` leaves it, report.html included."""
    from arag_graph.evaluators.html_report import SNIPPET_CHARS, SNIPPETS_FILE, build_report
    from arag_graph.evaluators.plots import write_plots
    from arag_graph.evaluators.predictions import PREDICTIONS
    from arag_graph.evaluators.report import summarize, write_failures, write_summary

    rng = random.Random(seed)
    corpus = 20_000
    (out / PREDICTIONS).mkdir(parents=True)
    records = []
    for graph in GRAPHS[:graphs]:
        mine = [synthetic_record(rng, q, graph, corpus) for q in range(questions)]
        lines = "".join(json.dumps(r) + "\n" for r in mine)
        (out / PREDICTIONS / f"{graph}__default.jsonl").write_text(lines, encoding="utf-8")
        records += mine
    named = {c for r in records for s in r["prediction"]["trajectory"] for c in s["chunk_ids"]}
    named |= {c for r in records for c in r["gold_chunk_ids"]}
    snippets = {c: {"title": sentence(rng, 3), "text": (sentence(rng, 12) * 6)[:SNIPPET_CHARS]} for c in sorted(named)}
    (out / SNIPPETS_FILE).write_text(json.dumps(snippets), encoding="utf-8")
    rows = summarize(records)
    write_summary(rows, out)
    write_failures(records, out)
    write_plots(rows, out)
    build_report([out], [records])


def measure(path: Path, loads: int) -> list[dict[str, float]]:
    from tests.browser import MISSING, find_chromium, launched_chromium

    executable = find_chromium()
    if executable is None:
        raise SystemExit(MISSING)
    results = []
    with launched_chromium(executable) as browser:
        for _ in range(loads):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.goto(path.as_uri(), wait_until="load", timeout=120_000)
            page.wait_for_selector("body[data-ready='1']")
            ready = page.evaluate("window.__readyAt") or 0.0
            load = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
            started = time.perf_counter()
            page.select_option("#filter-mode", "correct")
            page.wait_for_function("document.querySelector('#count').dataset.count !== undefined")
            filtered = time.perf_counter() - started
            started = time.perf_counter()
            page.locator(".q-head").first.click()
            page.locator(".question .run-card").first.wait_for()
            expanded = time.perf_counter() - started
            if errors:
                raise SystemExit(f"the page raised: {errors[0]}")
            results.append({"ready_s": ready / 1000, "load_s": load / 1000, "filter_s": filtered, "expand_s": expanded})
            page.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--graphs", type=int, default=6)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--seed", type=int, default=26)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        started = time.perf_counter()
        write_run(work / "run", args.questions, args.graphs, args.seed)
        built = time.perf_counter() - started
        page = work / "run" / "report.html"
        size = page.stat().st_size
        runs = measure(page, args.loads)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    slowest = max(r["load_s"] for r in runs)
    verdict = "MET" if slowest < TARGET_SECONDS else "NOT MET"
    import playwright

    result = {
        "questions": args.questions,
        "graphs": args.graphs,
        "loads": args.loads,
        "html_bytes": size,
        "write_run_and_report_s": round(built, 2),
        "runs": runs,
        "median_ready_s": round(statistics.median(r["ready_s"] for r in runs), 3),
        "median_load_s": round(statistics.median(r["load_s"] for r in runs), 3),
        "slowest_load_s": round(slowest, 3),
        "median_filter_s": round(statistics.median(r["filter_s"] for r in runs), 3),
        "median_expand_s": round(statistics.median(r["expand_s"] for r in runs), 3),
        "target_s": TARGET_SECONDS,
        "verdict": verdict,
        "machine": machine(playwright=getattr(playwright, "__version__", "?")),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "report.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    flags = f"--questions {args.questions} --graphs {args.graphs} --loads {args.loads}"
    command = f".venv/bin/python bench/bench_report.py {flags}"
    lines = [
        "# report.html load time",
        "",
        f"Command: `{command}` (from {ROOT.name}/).",
        "",
        f"A synthetic run of {args.questions:,} questions x {args.graphs} graphs in the runner's record format "
        f"(trajectories of 1 to 8 steps, CoRAG chains, SRAG fact tables, a snippet per named chunk, the real "
        f"plots): report.html is {size / 1e6:.1f} MB, one file. Headless Chromium (system package, Playwright) "
        f"opened it {args.loads} times from disk.",
        "",
        "| measure | median (s) | slowest (s) |",
        "|---|---:|---:|",
    ]
    for key, label in (("ready_s", "ready: page script done, first 50 questions drawn"),
                       ("load_s", "load event (navigation timing)"),
                       ("filter_s", "filter by a failure mode, list redrawn"),
                       ("expand_s", "expand a question: 6 trajectories drawn")):  # fmt: skip
        values = [r[key] for r in runs]
        lines.append(f"| {label} | {statistics.median(values):.3f} | {max(values):.3f} |")
    lines += [
        "",
        f"Target: opens in under {TARGET_SECONDS:g} s (slowest load event). **{verdict}** ({slowest:.2f} s).",
        "",
        f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores (shared with other work), "
        f"Python {result['machine']['python']}.",
        "",
    ]
    (RESULTS / "report.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
