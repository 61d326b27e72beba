"""The first real-model table (issue 34): HotpotQA-100 questions through arag, naive_rag, corag and srag
with SmolLM2-135M-Instruct (Q4_1 GGUF) served on this machine's CPU, beside the offline policy on the
same questions and settings.

Per graph: Contain-Acc, EM, F1, evidence recall, steps, retrieved tokens, model tokens (the server's
usage fields), seconds per question and the share of the model's replies that were malformed
(classified by :func:`tests.localmodel.classify`: unknown tool, bad arguments, text instead of a
call, missing answer line, repetition, context overflow, HTML character references). The model is
135M parameters: the table measures how the graphs behave with a real, weak model, not what the
papers' models reach.

    python bench/bench_local_model.py --questions 30     # writes bench/results/local_model.{md,json}

Needs ``scripts/setup`` (the server and the model file). Each question's record is appended to
``--work``/records.jsonl as soon as it is done, so a rerun with the same ``--work`` resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchenv import DATA, RESULTS, machine

from arag_graph.llm.models import TOOL_RESULTS_AS_USER_ENV
from tests.localmodel import CLASSES, MODEL_NAME, THREADS, LocalModelMissing, ReplyLog, classify, running_local_model

GRAPHS = ("arag", "naive_rag", "corag", "srag")
TOOL_GRAPHS = ("arag", "arag_naive")
"""The graphs whose model reads tool results (the others put passages in a user message)."""
AS_USER = f"{MODEL_NAME}, tool results as user turns"
"""The local model's runs with ``$ARAG_TOOL_RESULTS_AS_USER=1`` (``--tool-results-as-user``)."""
METRICS = (("contain_acc", "Contain-Acc (%)"), ("exact_match", "EM (%)"), ("f1", "F1 (%)"),
           ("evidence_recall", "evidence recall (%)"))  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, Any]:

    from arag_graph.evaluators import default_evaluators
    from arag_graph.evaluators.eval_index import prepare_index
    from arag_graph.evaluators.plan import EvalPlan, check_plan

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    plan = EvalPlan(
        dataset=DATA / "hotpotqa-100" / "questions.json",
        graphs=list(args.graphs),
        out=work / "plan",
        limit=args.questions,
    )
    questions = check_plan(plan)
    index, gold = prepare_index(plan, questions, progress=True)
    evaluators = default_evaluators()
    records_path = work / "records.jsonl"
    done = {}
    if records_path.exists():
        for line in records_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                done[(record["model"], record["graph"], record["question_id"])] = record
    started = time.perf_counter()
    if not args.report_only:
        _run_all(args, work, questions, index, gold, evaluators, records_path, done)
    rows = summarize(list(done.values()), args.graphs, [q.id for q in questions])
    return {
        # The command whose records these are (--report-only rewrites the table from them, running nothing).
        "command": " ".join(
            ["python", "bench/bench_local_model.py", *(a for a in sys.argv[1:] if a != "--report-only")]
        ),
        "questions": rows[0]["n"] if rows else 0,
        "questions_asked": len(questions),
        "model": MODEL_NAME,
        "threads": _threads_used(list(done.values()), args.threads),
        "top_k": args.top_k,
        "n_ctx": args.n_ctx,
        "max_tokens": args.max_tokens,
        "wall_seconds_this_run": round(time.perf_counter() - started, 1),
        "machine": machine(),
        "rows": rows,
    }


def _run_all(
    args: argparse.Namespace,
    work: Path,
    questions: list[Any],
    index: Any,
    gold: dict[str, list[str]],
    evaluators: list[Any],
    records_path: Path,
    done: dict[tuple[str, str, str], dict[str, Any]],
) -> None:
    """Every (model, question, graph) not yet in ``records_path``, each appended as soon as it is done."""
    from langchain_core.callbacks import UsageMetadataCallbackHandler

    from arag_graph.evaluators.runner import prediction_of
    from arag_graph.evaluators.scoring import score
    from arag_graph.registry import build_graph

    with running_local_model(work / "server", n_ctx=args.n_ctx, threads=args.threads) as server:
        os.environ["ARAG_ALLOWED_MODELS"] = f"offline,{server.name}"
        os.environ["ARAG_ALLOWED_BASE_URLS"] = server.base_url
        # Both models search with the same top_k (the package default unless --top-k says otherwise).
        retrieval = {"top_k": args.top_k} if args.top_k else {}
        local = {k: v for k, v in server.context(max_tokens=args.max_tokens).items() if k != "top_k"} | retrieval
        graphs = {name: build_graph(name, index=index) for name in args.graphs}
        runs = [("offline", {"model": "offline", **retrieval}), (server.name, local)]
        if args.tool_results_as_user:
            # Tool results in the prompt fill the server's context within a few steps (the 128k budget of the
            # paper's code is for 128k models): the agent is asked to answer once its conversation passes
            # a quarter of the context in o200k tokens. The server counts the HTML-escaped prompt in more of
            # its own tokens (passages about 1.2 times, tool-call JSON about 2.5 times), and the system
            # prompt, the tools' schemas and the search that crosses the budget come on top.
            runs.append((AS_USER, {**local, "message_token_budget": as_user_budget(args.n_ctx)}))
        # Question by question, every graph: a run stopped early still compares the graphs on the same questions.
        for model, context in runs:
            for question in questions:
                for graph_name, graph in graphs.items():
                    key = (model, graph_name, question.id)
                    if key in done or (model == AS_USER and graph_name not in TOOL_GRAPHS):
                        continue
                    # The client reads the setting when the run builds its model from the context's name.
                    os.environ[TOOL_RESULTS_AS_USER_ENV] = "1" if model == AS_USER else "0"
                    log, usage = ReplyLog(), UsageMetadataCallbackHandler()
                    began = time.perf_counter()
                    try:
                        state = graph.invoke(
                            {"question": question.question}, {"callbacks": [log, usage]}, context=context
                        )
                    except Exception as exc:  # recorded, never hidden: the table counts it
                        state = {"error": f"graph failed: {type(exc).__name__}: {exc}"[:300]}
                    seconds = time.perf_counter() - began
                    prediction = prediction_of(state, usage)
                    reference = {"answers": list(question.answers), "gold_chunk_ids": gold.get(question.id, [])}
                    metrics = score(prediction, reference, evaluators, {"question": question.question}).metrics
                    classes = Counter(c for e in log.exchanges for c in classify(e))
                    record = {
                        "model": model,
                        "graph": graph_name,
                        "question_id": question.id,
                        "answer": prediction["answer"],
                        "gold": list(question.answers),
                        "error": prediction["error"],
                        "metrics": {k: metrics.get(k) for k, _ in METRICS},
                        "steps": prediction["steps"],
                        "retrieved_tokens": prediction["retrieved_tokens"],
                        "usage": prediction["usage"],
                        "seconds": round(seconds, 2),
                        "threads": args.threads if model != "offline" else None,
                        "replies": len(log.exchanges),
                        "malformed": sum(1 for e in log.exchanges if classify(e)),
                        "classes": dict(classes),
                    }
                    done[key] = record
                    with records_path.open("a", encoding="utf-8") as out:
                        out.write(json.dumps(record, ensure_ascii=False) + "\n")
                    print(
                        f"{model} {graph_name} {question.id}: {seconds:.1f} s, answer {record['answer'][:60]!r}, "
                        f"malformed {record['malformed']}/{record['replies']}",
                        flush=True,
                    )


def as_user_budget(n_ctx: int) -> int:
    """The ``message_token_budget`` of the runs with tool results as user turns: a quarter of the context."""
    return n_ctx // 4


def _threads_used(records: list[dict[str, Any]], current: int) -> dict[int, int]:
    """Questions the local model answered at each server thread count (a resumed run may have changed it;
    records written before the count was recorded ran at the default, one)."""
    counts: Counter[int] = Counter()
    for question in {r["question_id"] for r in records if r["model"] != "offline"}:
        mine = [r for r in records if r["model"] != "offline" and r["question_id"] == question]
        counts[int(mine[0].get("threads") or THREADS)] += 1
    return dict(sorted(counts.items())) or {current: 0}


def summarize(records: list[dict[str, Any]], graphs: list[str], ids: list[str]) -> list[dict[str, Any]]:
    """Rows per (model, graph) over the questions every graph of every model answered (with tool results as
    user turns: the tool-using graphs only)."""
    done = {(r["model"], r["graph"], r["question_id"]) for r in records}
    runs = [(m, g) for m in ("offline", MODEL_NAME) for g in graphs]
    if any(r["model"] == AS_USER for r in records):
        runs += [(AS_USER, g) for g in graphs if g in TOOL_GRAPHS]
    ids = [q for q in ids if all((m, g, q) in done for m, g in runs)]
    rows = []
    for model, graph in runs:
        mine = [r for r in records if r["model"] == model and r["graph"] == graph and r["question_id"] in ids]
        if not mine:
            continue
        row: dict[str, Any] = {"model": model, "graph": graph, "n": len(mine)}
        for key, _ in METRICS:
            values = [r["metrics"][key] for r in mine if r["metrics"].get(key) is not None]
            row[key] = round(100 * statistics.fmean(values), 1) if values else None
        row["steps"] = round(statistics.fmean(r["steps"] for r in mine), 2)
        row["retrieved_tokens"] = round(statistics.fmean(r["retrieved_tokens"] for r in mine))
        usages = [r["usage"] for r in mine if r.get("usage")]
        row["model_tokens"] = (
            round(statistics.fmean(u["input_tokens"] + u["output_tokens"] for u in usages)) if usages else None
        )
        row["seconds"] = round(statistics.fmean(r["seconds"] for r in mine), 1)
        replies = sum(r["replies"] for r in mine)
        row["malformed_share"] = round(sum(r["malformed"] for r in mine) / replies, 3) if replies else None
        row["errors"] = sum(1 for r in mine if r["error"])
        classes: Counter[str] = Counter()
        for r in mine:
            classes.update(r["classes"])
        row["classes"] = {c: classes[c] for c in CLASSES if classes[c]}
        rows.append(row)
    return rows


def _threads_of(result: dict[str, Any]) -> dict[int, int]:
    threads = result.get("threads", 1)
    return {int(k): v for k, v in threads.items()} if isinstance(threads, dict) else {int(threads): result["questions"]}


def markdown(result: dict[str, Any]) -> str:
    head = ["model", "graph", "n", *[label for _, label in METRICS], "steps", "retrieved tokens", "model tokens",
            "s / question", "malformed replies", "errors"]  # fmt: skip
    served = f"python -m llama_cpp.server --chat_format chatml-function-calling --n_ctx {result['n_ctx']} --n_threads N"
    lines = [
        "# A real language model: SmolLM2-135M on this machine's CPU (issue 34)",
        "",
        f"Command: `{result['command']}`",
        "",
        f"The first {result['questions']} questions of HotpotQA-100 (of {result['questions_asked']} asked: "
        "those every graph finished with both models), each graph with its package defaults"
        + (f" except top_k {result['top_k']}" if result.get("top_k") else "")
        + f"; the local model is {result['model']} (SmolLM2-135M-Instruct, Q4_1 GGUF) behind `{served}`, "
        f"`max_tokens` {result['max_tokens']}, server threads N: "
        + ", ".join(f"{t} for {q} question(s)" for t, q in _threads_of(result).items())
        + "; the offline policy (no language model) on the same questions, index "
        f"and settings. Machine: {result['machine'].get('cpu', '')}, {result['machine'].get('cores', '')} cores "
        "(other work may have shared it, so the seconds are an upper bound). Model tokens are the server's own "
        "usage fields (none for the offline policy); malformed replies are the share of the model's replies in "
        "one of the classes of docs/guide/local-models.md.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|",
    ]
    for row in result["rows"]:
        cells = [row["model"], row["graph"], str(row["n"])]
        cells += ["n/a" if row[k] is None else f"{row[k]:.1f}" for k, _ in METRICS]
        cells += [f"{row['steps']:.2f}", f"{row['retrieved_tokens']:,}"]
        cells += ["-" if row["model_tokens"] is None else f"{row['model_tokens']:,}", f"{row['seconds']:.1f}"]
        share = row["malformed_share"]
        cells += ["-" if share is None else f"{100 * share:.0f}%", str(row["errors"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Malformed replies by class (count over all questions):", ""]
    for row in result["rows"]:
        if row["classes"]:
            shown = ", ".join(f"{k} {v}" for k, v in row["classes"].items())
            lines.append(f"- {row['model']} {row['graph']}: {shown}")
    if any(row["model"] == AS_USER for row in result["rows"]):
        lines += [
            "",
            f"The rows of `{AS_USER}` ran the tool-using graphs with `$ARAG_TOOL_RESULTS_AS_USER=1` "
            "(`--tool-results-as-user`): each run of tool results goes to the server as one user turn, which "
            "its chat format renders, where a `tool` turn shows none of its content. With the results in the "
            f"prompt the conversation outgrows the {result['n_ctx']}-token context within a few steps, so "
            f"these rows also set `message_token_budget` to {as_user_budget(result['n_ctx'])} (a quarter of the "
            "context, counted in o200k tokens; the package default is the paper's 128,000), after which the "
            "agent answers from what it read.",
        ]
    lines += [
        "",
        "What this does and does not show: the graphs run to an answer or a one-line reason with a real model's "
        "output; a 135M model answers few multi-hop questions, and llama-cpp-python's chat format drops tool "
        "results from the prompt (docs/guide/local-models.md), so without the setting above A-RAG's agent "
        "searches without seeing what it found. No paper figure is claimed from these numbers.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=30, help="the first N questions of HotpotQA-100")
    parser.add_argument("--graphs", type=lambda s: s.split(","), default=list(GRAPHS))
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument(
        "--threads", type=int, default=THREADS, help="the server's threads (one: the machine is shared with other work)"
    )
    parser.add_argument("--top-k", type=int, default=0, help="chunks per search for both models (0: the default)")
    parser.add_argument(
        "--tool-results-as-user",
        action="store_true",
        help="also run the tool-using graphs on the local model with $ARAG_TOOL_RESULTS_AS_USER=1",
    )
    parser.add_argument("--report-only", action="store_true", help="write the table from the records so far")
    parser.add_argument("--work", default=None, help="resumable records (default: the cache directory)")
    args = parser.parse_args()
    # A SIGTERM (a `timeout`, a job scheduler) would end Python without unwinding, leaving the llama server,
    # which runs in its own session, behind; as an exit instead, running_local_model stops it.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    if args.work is None:
        from arag_graph.core.cache import cache_dir

        args.work = str(cache_dir() / "bench-local-model")
    try:
        result = run(args)
    except LocalModelMissing as exc:
        print(f"bench_local_model: {exc}", file=sys.stderr)
        return 2
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "local_model.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (RESULTS / "local_model.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
