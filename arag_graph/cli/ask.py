"""``arag ask``: one question through a graph, its tool calls and results shown as they happen.

:func:`run_question` and :func:`result_record` are shared with ``arag demo``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arag_graph.cli import args as cliargs
from arag_graph.cli.output import print_json
from arag_graph.cli.resolve import announce, check_model_spec, choose_model_spec, open_index
from arag_graph.cli.threads import thread_name, thread_store
from arag_graph.core.errors import AragError
from arag_graph.core.profiles import check_profile

if TYPE_CHECKING:
    from arag_graph.run.configuration import GraphContext


def describe_step(update: dict[str, Any]) -> list[str]:
    """Human-readable lines for one streamed node update (tool calls as they happen)."""
    lines: list[str] = []
    for message in update.get("messages") or []:
        for call in getattr(message, "tool_calls", None) or []:
            args = json.dumps(call.get("args"), ensure_ascii=False)
            lines.append(f"-> {call.get('name')}({args})")
    return lines


def tool_result(message: Any) -> dict[str, Any] | None:
    """A tool message as a trajectory step (None for a call answered without running).

    The artifact is read the one checked way (:func:`arag_graph.core.artifacts.artifact_of`):
    the messages a run streams can hold a caller's own tool messages, whose artifacts say anything.
    """
    from arag_graph.core.artifacts import artifact_of

    artifact = artifact_of(message)
    if artifact["not_run"]:
        return None
    return {"tool": message.name, **artifact, "error": artifact["error"] or message.status == "error"}


def run_question(
    graph_name: str,
    question: str,
    *,
    index: Any,
    model: Any,
    context: GraphContext,
    echo: bool,
    checkpointer: Any = None,
    thread: str | None = None,
) -> dict[str, Any]:
    """Run one question through a graph, printing tool calls and results as they happen.

    ``context`` is the run's context as :func:`arag_graph.registry.config_for` checked it, once: the
    graph runs with that object. With ``checkpointer`` and ``thread``, the question continues that
    thread's conversation.
    """
    from langchain_core.messages import ToolMessage

    from arag_graph.registry import build_graph

    graph = build_graph(graph_name, index=index, model=model, checkpointer=checkpointer)
    final: dict[str, Any] = {}
    seen_steps = 0
    # Root-run trace metadata: which index, model and limits produced this answer.
    metadata = {
        "index": str(index.path),
        "model": context.model or None,
        "max_steps": getattr(context, "max_steps", None),
    }
    run_config: dict[str, Any] = {"metadata": {k: v for k, v in metadata.items() if v is not None}}
    if thread is not None:
        run_config["configurable"] = {"thread_id": thread}
    stream = graph.stream({"question": question}, run_config, context=context, stream_mode=["updates", "values"])
    for mode, chunk in stream:
        if mode == "values":
            final = chunk
            continue
        if not echo:
            continue
        for update in chunk.values():
            for line in describe_step(update or {}):
                print(f"  {line}")
            # Tool results as they arrive (the agent's tool node), else a graph's own retrieval steps.
            results = [tool_result(m) for m in (update or {}).get("messages") or [] if isinstance(m, ToolMessage)]
            steps = [r for r in results if r is not None] or ((update or {}).get("trajectory") or [])[seen_steps:]
            for step in steps:
                ids = ", ".join(step.get("chunk_ids") or []) or "-"
                status = " (error)" if step.get("error") else ""
                print(f"  <- {step.get('tool')}: {step.get('tokens', 0)} tokens, chunks {ids}{status}")
            seen_steps += len(steps)
    return final


def result_record(state: dict[str, Any], graph: str, model: str) -> dict[str, Any]:
    return {
        "graph": graph,
        "model": model,
        "answer": state.get("answer", ""),
        "citations": state.get("citations", []),
        "steps": state.get("steps", 0),
        "retrieved_tokens": state.get("retrieved_tokens", 0),
        "read_chunks": state.get("read_chunks", []),
        "retrieved_chunks": state.get("retrieved_chunks", []),
        "trajectory": [
            {
                "tool": s.get("tool"),
                "args": s.get("args"),
                "tokens": s.get("tokens", 0),
                "chunk_ids": s.get("chunk_ids", []),
                "error": bool(s.get("error", False)),  # the step answered the model with an error message
            }
            for s in state.get("trajectory", [])
        ],
        "error": state.get("error"),
        # Parts of the run that failed without failing it (a HyDE call, a structured step's fallback).
        "warnings": [str(w) for w in state.get("warnings") or []],
    }


def cmd_ask(args: argparse.Namespace) -> int:
    """``arag ask QUESTION``: every check first (one error line for bad input), then the run."""
    from arag_graph.core.jsonl import finite, scrub
    from arag_graph.llm.models import resolve_chat_model
    from arag_graph.run.runtime import model_settings

    question, thread = _checked_question(args)
    spec, notice, limits, ctx = _checked_context(args)
    # Created with the run's sampling settings (the 16,384-token output limit too), as arag eval does.
    model = check_model_spec(spec, args.base_url, {**limits, **model_settings(ctx)})
    index = open_index(args.index, args.quiet)
    if model is None:
        model = resolve_chat_model(spec, base_url=args.base_url, index=index, **model_settings(ctx))
    announce(notice)
    if not args.json:
        print(f"graph {args.graph}, model {spec}, index {index.path}" + (f", thread {thread}" if thread else ""))
    with thread_store(thread) as checkpointer:
        state = run_question(
            args.graph,
            question,
            index=index,
            model=model,
            context=ctx,
            echo=not args.json,
            checkpointer=checkpointer,
            thread=f"{args.graph}:{thread}" if thread else None,  # a thread belongs to one graph (its state's shape)
        )
    record = scrub(finite(result_record(state, args.graph, spec)))  # no key a model echoed is printed
    if thread:
        record["thread"] = thread
    if args.html:
        _write_html(args, question, spec, state, index)
    _show_answer(record, args.json)
    return 1 if record["error"] else 0


def _checked_question(args: argparse.Namespace) -> tuple[str, str | None]:
    """The question and the thread name, after the checks that need neither a model nor an index."""
    from arag_graph.registry import get_graph_spec

    # Every check comes before the first line of output: bad input prints its one error line only.
    settings = [("--set", pair) for pair in args.settings]
    texts = cliargs.flags(args, "index", "graph", "model", "base_url", "html", "thread")
    cliargs.require_utf8([("the question", args.question), *texts, *settings])
    question = (args.question or "").strip()
    if not question:
        raise AragError('the question is empty; ask something, e.g. arag ask "Who directed Alien?" --index DIR')
    get_graph_spec(args.graph)
    cliargs.check_run_limits(args.max_steps, args.top_k)
    thread = thread_name(args.thread)
    if args.html is not None:
        cliargs.html_file(Path(args.html), "--html")
    return question, thread


def _checked_context(args: argparse.Namespace) -> tuple[str, str | None, dict[str, Any], GraphContext]:
    """The model spec, its notice, the request limits and the run's context, checked once.

    The context is the graph's own configuration class (one-line AragError for a bad value); the
    run gets this object, so nothing checks it again.
    """
    from arag_graph.registry import config_for

    extra = _one_run_settings(cliargs.set_values(args.settings), args.graph)
    spec, notice = choose_model_spec(args.model, args.base_url)
    limits = cliargs.model_limits(args)
    context = {"max_steps": args.max_steps, "top_k": args.top_k, "model": spec, "base_url": args.base_url, **limits}
    context |= extra | {"profile": check_profile(args.profile)}
    return spec, notice, limits, config_for(args.graph, **context)


def _write_html(args: argparse.Namespace, question: str, spec: str, state: dict[str, Any], index: Any) -> None:
    """``--html FILE``: the run as the evaluation report's trajectory view."""
    from arag_graph.core.jsonl import finite, scrub
    from arag_graph.evaluators.html_report import question_report
    from arag_graph.evaluators.runner import prediction_of

    # The evaluation's record of a run, so the page is the report's trajectory view as it is.
    prediction = scrub(finite(prediction_of(state)))
    path = question_report(question, args.graph, spec, prediction, index, Path(args.html))
    if not args.json:
        print(f"trajectory view: {path}")


def _show_answer(record: dict[str, Any], as_json: bool) -> None:
    """The answer: one JSON object with ``--json``, else its lines (an error on stderr)."""
    if as_json:
        print_json(record)
        return
    print(f"\nanswer: {record['answer']}")
    print(f"citations: {', '.join(record['citations']) or 'none'}")
    print(f"steps: {record['steps']}, retrieved tokens: {record['retrieved_tokens']}")
    if record["error"]:
        print(f"error: {record['error']}", file=sys.stderr)


def _one_run_settings(values: dict[str, str], graph: str) -> dict[str, str]:
    """``arag ask --set``: settings of the chosen graph, one value each (a comma list is a sweep, which
    only ``arag eval`` runs); the graph's configuration class checks the values."""
    from arag_graph.evaluators.sweeps import split_settings
    from arag_graph.registry import check_setting_names

    check_setting_names(values, [graph])
    fixed, sweeps = split_settings(values, [graph])
    if sweeps:
        key = next(iter(sweeps))
        raise AragError(
            f"--set {key}={values[key]}: arag ask runs one setting; give one value, "
            f"or sweep them with arag eval --set {key}={values[key]}"
        )
    return fixed


def add_commands(sub: Any, common: dict[str, Any]) -> None:
    """``arag ask``: its arguments."""
    p = sub.add_parser("ask", help="answer a question with a graph (A-RAG by default)", **common)
    cliargs.add_device(p)
    p.add_argument("question")
    p.add_argument("--index", default=None, help="index directory (default: the bundled sample index)")
    cliargs.listed(
        p.add_argument("--graph", default="arag", help="which graph to run (default arag)"), cliargs.graph_names
    )
    cliargs.add_model_choice(
        p,
        "offline, or an OpenAI-compatible model name (default: see README)",
        "OpenAI-compatible server URL (vLLM, Ollama, llama.cpp, LM Studio)",
    )
    p.add_argument("--max-steps", type=int, default=None, help="step cap (default 15)")
    p.add_argument("--top-k", type=int, default=None, help="chunks per search, 1 to 20 (default 5)")
    cliargs.add_model_limits(p)
    cliargs.add_profile(p, "defaults of the run: package, or paper (the papers' step cap, loop rule, ...; --set wins)")
    cliargs.add_settings(
        p, "graph setting, repeatable: tools=no_chunk_read, retriever=amr (naive_rag), decoding=best_of_n (corag)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object with the answer and trajectory")
    p.add_argument(
        "--html", default=None, metavar="FILE", help="also write the trajectory as a self-contained HTML page"
    )
    p.add_argument(
        "--thread",
        default=None,
        metavar="NAME",
        help="keep the conversation as thread NAME (in the cache directory): a later --thread NAME is a follow-up",
    )
    p.set_defaults(func=cmd_ask)
