"""Concurrent A-RAG runs on one loaded index: questions per second at 1, 2, 4 and 8 runs at a time.

Every run uses the same compiled ``arag`` graph with the ``offline`` policy (a deterministic no-LLM
policy, not a language model) and the same ``HierarchicalIndex`` object, the way a LangGraph Server
worker or ``arag eval --workers W`` shares them. Concurrency comes from threads calling
``graph.invoke`` and from ``asyncio.gather`` over ``graph.ainvoke`` (LangGraph runs our sync nodes
in its executor). Each pass answers all HotpotQA-100 questions and is checked:

- no run raises or ends with an error;
- each run's read-chunk set is a subset of the chunk IDs its own search calls returned (from its
  own trajectory): no run sees another run's reads;
- each run's read-chunk set, citations, answer and tool trajectory equal those of a sequential run
  of the same question (the offline policy is deterministic, so any difference is interference).

    python bench/bench_concurrency.py                 # embedded index in the user cache (built once)
    python bench/bench_concurrency.py --chroma-url http://127.0.0.1:8000   # vectors in a Chroma server
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchenv import DATA, RESULTS, ROOT, machine

from arag_graph.arag.graph import build_arag_graph
from arag_graph.core.cache import cache_dir
from arag_graph.core.chunking import chunk_documents
from arag_graph.core.errors import AragError
from arag_graph.index.build import build_index
from arag_graph.index.corpus import load_corpus
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.load import load_index
from arag_graph.index.manifest import corpus_hash
from arag_graph.qa.datasets import load_questions

HOTPOT = DATA / "hotpotqa-100"
SEARCH_TOOLS = ("keyword_search", "semantic_search")


def prepare_index(corpus: Path, chroma_url: str | None) -> tuple[HierarchicalIndex, dict[str, Any]]:
    """The index ``arag eval`` would use for this corpus (same cache path), built when missing."""
    chunks = chunk_documents(load_corpus(corpus))
    digest = corpus_hash(chunks)
    suffix = "-server" if chroma_url else ""
    target = cache_dir() / "indexes" / f"{corpus.parent.name}-{digest[:12]}{suffix}"
    info: dict[str, Any] = {"path": str(target), "built_now": False}
    try:
        index = load_index(target, cache=True)
        if index.manifest.corpus_hash != digest or (chroma_url and index.manifest.chroma.get("url") != chroma_url):
            raise AragError("stale")
    except AragError:
        started = time.perf_counter()
        build_index(chunks, target, chroma_url=chroma_url, progress=sys.stderr.isatty())
        info.update(built_now=True, build_s=round(time.perf_counter() - started, 1))
        index = load_index(target, cache=True)
    m = index.manifest
    info.update(chunks=m.chunks, sentences=m.sentences, chroma=m.chroma)
    return index, info


def digest_run(out: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on concurrency: the run's reads, answer and tool calls."""
    return {
        "read_chunks": sorted(out.get("read_chunks") or []),
        "citations": list(out.get("citations") or []),
        "answer": out.get("answer"),
        "error": out.get("error"),
        "trajectory": [(s["tool"], json.dumps(s["args"], sort_keys=True), s["chunk_ids"]) for s in out["trajectory"]],
    }


def own_read_set_ok(out: dict[str, Any]) -> bool:
    """Every chunk the run read came out of one of its own searches."""
    returned = {cid for s in out["trajectory"] if s["tool"] in SEARCH_TOOLS for cid in s["chunk_ids"]}
    read_steps = {cid for s in out["trajectory"] if s["tool"] == "chunk_read" for cid in s["chunk_ids"]}
    read = set(out.get("read_chunks") or [])
    return read <= returned and read <= read_steps


def check(
    results: dict[str, dict[str, Any] | BaseException], reference: dict[str, dict[str, Any]] | None
) -> dict[str, Any]:
    errors, foreign, mismatched = [], [], []
    for qid, out in results.items():
        if isinstance(out, BaseException):
            errors.append(f"{qid}: {type(out).__name__}: {out}")
            continue
        if out.get("error"):
            errors.append(f"{qid}: run error {out['error']}")
        if not own_read_set_ok(out):
            foreign.append(qid)
        if reference is not None and digest_run(out) != reference[qid]:
            mismatched.append(qid)
    return {
        "errors": len(errors),
        "error_examples": errors[:3],
        "read_set_not_own": len(foreign),
        "differs_from_sequential": len(mismatched),
        "differs_examples": mismatched[:5],
    }


def timed(call: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any] | BaseException, float]:
    started = time.perf_counter()
    try:
        out: dict[str, Any] | BaseException = call()
    except Exception as exc:  # counted as an error of this run
        out = exc
    return out, time.perf_counter() - started


def run_threads(graph: Any, questions: list[Any], workers: int) -> tuple[dict[str, Any], list[float], float]:
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {q.id: pool.submit(timed, lambda q=q: graph.invoke({"question": q.question})) for q in questions}
        done = {qid: f.result() for qid, f in futures.items()}
    wall = time.perf_counter() - started
    return {qid: out for qid, (out, _) in done.items()}, [s for _, s in done.values()], wall


def run_async(graph: Any, questions: list[Any], workers: int) -> tuple[dict[str, Any], list[float], float]:
    async def main() -> list[tuple[dict[str, Any] | BaseException, float]]:
        gate = asyncio.Semaphore(workers)

        async def one(question: str) -> tuple[dict[str, Any] | BaseException, float]:
            async with gate:
                started = time.perf_counter()
                try:
                    out: dict[str, Any] | BaseException = await graph.ainvoke({"question": question})
                except Exception as exc:
                    out = exc
                return out, time.perf_counter() - started

        return await asyncio.gather(*(one(q.question) for q in questions))

    started = time.perf_counter()
    done = asyncio.run(main())
    wall = time.perf_counter() - started
    return {q.id: out for q, (out, _) in zip(questions, done, strict=True)}, [s for _, s in done], wall


def markdown(report: dict[str, Any]) -> str:
    idx = report["index"]
    lines = [
        "# Concurrent graph runs on one loaded index",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Machine: {report['machine']['cpu']}, {report['machine']['cores']} cores, Python "
        f"{report['machine']['python']}. Load average (1/5/15 min) {report['load_average_at_start']} at "
        f"start, {report['load_average_at_end']} at end: other work shares the two cores, so read the "
        "speed-ups (same run, same process) rather than absolute rates.",
        "",
        f"Graph `arag`, model `offline` (deterministic no-LLM policy, not a language model), "
        f"{report['questions']} HotpotQA-100 questions per pass, {report['rounds']} rounds over all settings "
        "(fastest round per setting shown; errors and checks summed over all rounds). "
        f"Index: {idx['chunks']:,} chunks, "
        f"{idx['sentences']:,} sentences, sentence store `{idx['chroma']['mode']}`"
        + (f" at {idx['chroma']['url']}" if idx["chroma"].get("url") else "")
        + f" ({idx['path']}). Sequential reference pass (also the warm-up): {report['reference_s']} s.",
        "",
        "| mode | concurrent runs | wall s | questions/s | speed-up vs 1 | p50 s/question | p95 s/question "
        "| wall s, every round | errors | read set not its own | differs from sequential |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, rows in report["passes"].items():
        base = rows[0]["qps"]
        for r in rows:
            every = " / ".join(str(x["wall_s"]) for x in report["all_rounds"][f"{mode} x{r['workers']}"])
            lines.append(
                f"| {mode} | {r['workers']} | {r['wall_s']} | {r['qps']} | x{r['qps'] / base:.2f} "
                f"| {r['p50_s']} | {r['p95_s']} | {every} | {r['errors']} | {r['read_set_not_own']} "
                f"| {r['differs_from_sequential']} |"
            )
    ok = all(
        r["errors"] == 0 and r["read_set_not_own"] == 0 and r["differs_from_sequential"] == 0
        for rows in report["passes"].values()
        for r in rows
    )
    rows = [r for rs in report["passes"].values() for r in rs]
    single = max(r["qps"] for r in rows if r["workers"] == 1)
    best = max((r for r in rows if r["workers"] > 1), key=lambda r: r["qps"], default=None)
    lines += [
        "",
        f"Best single-run rate (either mode): {single} questions/s"
        + (
            f"; best concurrent rate: {best['qps']} questions/s with {best['workers']} runs, "
            f"x{best['qps'] / single:.2f} the best single-run rate."
            if best
            else "."
        ),
        "",
        f"All checks passed: {ok}. A run's read set must come from its own search results "
        "(its trajectory) and equal the sequential run of the same question (read chunks, citations, "
        "answer, every tool call with its arguments and returned chunk IDs).",
        "",
        "Each run is CPU-bound here (the offline policy embeds the sentences it answers from; keyword search "
        "and LangGraph run in the process), so on two cores concurrency mostly overlaps what does not hold the "
        "GIL and raises per-question latency"
        + (
            "; with the sentence store in a Chroma server, its work and the HTTP round trips overlap too."
            if idx["chroma"].get("mode") == "http"
            else "."
        )
        + " Single-run passes vary most between rounds because other processes' load comes and goes, and "
        "one `invoke` at a time in a thread was often slower than one `ainvoke` at a time: compare concurrent "
        "rates with the best single-run rate above.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path, default=HOTPOT / "questions.json")
    parser.add_argument("--corpus", type=Path, default=HOTPOT / "corpus.json")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--no-async", action="store_true", help="threads only")
    parser.add_argument("--rounds", type=int, default=2, help="passes per setting; the fastest is reported")
    parser.add_argument("--chroma-url", default=None, help="build/use an index whose vectors live in this server")
    parser.add_argument("--name", default="concurrency", help="results file stem")
    parser.add_argument("--markdown-only", action="store_true", help="rewrite NAME.md from NAME.json, run nothing")
    args = parser.parse_args()

    if args.markdown_only:
        saved = json.loads((RESULTS / f"{args.name}.json").read_text(encoding="utf-8"))
        (RESULTS / f"{args.name}.md").write_text(markdown(saved), encoding="utf-8")
        return
    report: dict[str, Any] = {
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT), *sys.argv[1:]]),
        "machine": machine(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    questions = load_questions(args.questions)[: args.limit]
    index, report["index"] = prepare_index(args.corpus, args.chroma_url)
    graph = build_arag_graph(index, "offline")
    report["questions"] = len(questions)

    # Sequential reference, which also warms every lazy part (encoder, tokenizer, Chroma, pages).
    print(f"reference pass over {len(questions)} questions", flush=True)
    results, _, wall = run_threads(graph, questions, 1)
    report["reference_s"] = round(wall, 1)
    failed = report["reference_check"] = check(results, None)
    if failed["errors"]:
        raise SystemExit(f"the sequential reference pass failed: {failed['error_examples']}")
    reference = {qid: digest_run(out) for qid, out in results.items()}  # type: ignore[arg-type]

    modes = {"threads (invoke)": run_threads}
    if not args.no_async:
        modes["asyncio.gather (ainvoke)"] = run_async
    # Rounds over every (mode, workers) pair, so that drifting background load hits all of them
    # alike; each pair reports its fastest round, and every round of every pair is checked.
    rounds: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in range(args.rounds):
        for mode, runner in modes.items():
            for workers in args.workers:
                results, seconds, wall = runner(graph, questions, workers)
                row = {
                    "workers": workers,
                    "round": r + 1,
                    "wall_s": round(wall, 2),
                    "qps": round(len(questions) / wall, 2),
                    "p50_s": round(statistics.median(seconds), 3),
                    "p95_s": round(sorted(seconds)[int(0.95 * (len(seconds) - 1))], 3),
                    **check(results, reference),
                }
                rounds.setdefault((mode, workers), []).append(row)
                print(mode, json.dumps(row), flush=True)
    report["rounds"] = args.rounds
    report["all_rounds"] = {f"{mode} x{w}": rows for (mode, w), rows in rounds.items()}
    report["passes"] = {}
    for (mode, _), rows in rounds.items():
        best = dict(min(rows, key=lambda row: row["wall_s"]))
        for key in ("errors", "read_set_not_own", "differs_from_sequential"):
            best[key] = sum(row[key] for row in rows)  # over all rounds, not just the fastest
        report["passes"].setdefault(mode, []).append(best)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (RESULTS / f"{args.name}.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))


if __name__ == "__main__":
    main()
