"""The ``arag`` command line: build an index, look at retrieval, ask questions, run the demo.

Every user error ends in one line on stderr (``arag: error: ...``) and exit status 2; results go to
stdout, and every command's ``--json`` output is exactly one JSON object. Log records go to stderr
as ``arag: warning: ...`` lines, at the level ``-v``/``-q`` or ``$ARAG_LOG_LEVEL`` chooses
(:mod:`arag_graph.cli.logs`); ``-q`` also turns progress bars off.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from arag_graph.cli import args as cliargs
from arag_graph.cli import logs
from arag_graph.core.errors import AragError
from arag_graph.core.profiles import check_profile

EXIT_USAGE = 2


def _print_json(obj: Any) -> None:
    """Exactly one strict JSON object (no NaN or Infinity, secrets redacted).

    See :func:`arag_graph.core.jsonl.dumps`.
    """
    from arag_graph.core.jsonl import dumps

    sys.stdout.write(dumps(obj) + "\n")


# --------------------------------------------------------------------------------------------
# arag index


def _corpus_arg(args: argparse.Namespace) -> Any:
    """The corpus of ``arag index``: one path as it is, several files read and joined in order."""
    if len(args.corpus) == 1:
        return args.corpus[0]
    from arag_graph.index.corpus import load_corpus

    return [document for path in args.corpus for document in load_corpus(path, args.format)]


def _cmd_update(args: argparse.Namespace) -> int:
    """``arag index SOURCE --out DIR --update``: sync the source into the index, rebuilding nothing unchanged."""
    from arag_graph.core.documents import HEADER_MAX_CHARS
    from arag_graph.index.sync import sync_index

    defaults = {"chunk_size": 1000, "summaries": None, "chroma_url": None, "collection": None, "encoder": None}
    defaults |= {"embedding": None, "embedding_base_url": None}
    defaults |= {"backend": "auto", "header_max_chars": HEADER_MAX_CHARS}
    # None: the profile decides, so any value given is a build setting (the index's own profile holds).
    defaults |= {"keyword_match": None, "contextual_headers": None, "profile": None}
    given = [name for name, default in defaults.items() if getattr(args, name) != default]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise AragError(f"{flag}: --update keeps the settings the index was built with; drop {flag} (or rebuild)")
    started = time.perf_counter()
    index, report = sync_index(
        _corpus_arg(args), args.out, corpus_format=args.format, progress=not args.json and not args.quiet
    )
    summary = {
        "index": str(Path(args.out)),
        "added": len(report.added),
        "changed": len(report.changed),
        "removed": len(report.removed),
        "unchanged": report.unchanged,
        "sentences_encoded": report.sentences_encoded,
        "sentences_reused": report.sentences_reused,
        "chunks": index.manifest.chunks,
        "seconds": round(time.perf_counter() - started, 2),
    }
    if args.json:
        _print_json(summary)
    else:
        print(f"updated {args.out}: {report.summary()} in {summary['seconds']} s")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from arag_graph.index.build import BuildOptions, build_index

    cliargs.require_utf8(cliargs.flags(args, "out", "summaries", "base_url"))
    if args.update:
        return _cmd_update(args)
    started = time.perf_counter()
    options = BuildOptions.for_profile(
        args.profile,
        corpus_format=args.format,
        chunk_size=args.chunk_size,
        contextual_headers=args.contextual_headers,
        header_max_chars=args.header_max_chars,
        keyword_match=args.keyword_match,
        chroma_url=args.chroma_url,
        collection=args.collection,
        encoder=args.encoder,
        backend=args.backend,
        embedding_base_url=args.embedding_base_url,
        chroma_timeout=_chroma_wait(args),
    )
    index = build_index(
        _corpus_arg(args),
        args.out,
        options,
        embeddings=args.embedding,
        **_summary_flags(args),
        progress=not args.json and not args.quiet,
    )
    m = index.manifest
    summary = {
        "index": str(Path(args.out)),
        "documents": m.documents,
        "chunks": m.chunks,
        "sentences": m.sentences,
        "seconds": round(time.perf_counter() - started, 2),
        "embedding_model": m.embedding_model,
        "encoder": m.encoder,
        "contextual_headers": m.contextual_headers,
        "keyword_match": m.keyword_match,
        "profile": m.profile,
    }
    if m.extra.get("summaries"):
        summary["summaries"] = {k: v for k, v in m.extra["summaries"].items() if k != "described"}
    if args.json:
        _print_json(summary)
    else:
        print(f"indexed {m.chunks} chunks, {m.sentences} sentences in {summary['seconds']} s -> {args.out}")
        if m.extra.get("summaries"):
            done = m.extra["summaries"]
            print(
                f"document summaries: {done['documents']} {done['described']} ({done['reused']} reused; "
                f"{done['input_tokens']} input and {done['output_tokens']} output tokens)"
            )
    return 0


def _summary_flags(args: argparse.Namespace) -> dict[str, Any]:
    """``--summaries MODEL`` (with ``--base-url`` and the model limits) as ``build_index`` arguments."""
    if args.summaries is None:
        return {}
    from arag_graph.llm.summarize import summary_writer

    options: dict[str, Any] = {"base_url": args.base_url, **cliargs.model_limits(args)}
    return {"summaries": summary_writer(args.summaries, options)}


# --------------------------------------------------------------------------------------------
# arag search / arag read


def _chroma_wait(args: argparse.Namespace) -> float | None:
    """``--chroma-timeout`` checked up front, even for an index that turns out not to need a server."""
    from arag_graph.index.chroma import chroma_timeout

    return None if args.chroma_timeout is None else chroma_timeout(args.chroma_timeout)


def _load(args: argparse.Namespace) -> Any:
    from arag_graph.index.load import load_index

    cliargs.require_utf8(cliargs.flags(args, "index"))
    return load_index(args.index, chroma_timeout=_chroma_wait(args))


def cmd_search(args: argparse.Namespace) -> int:
    cliargs.top_k(args.top_k)
    flag = "--keywords" if args.keywords is not None else "--query"
    text = args.keywords if args.keywords is not None else args.query
    cliargs.require_utf8([(flag, text)])
    keywords = [k.strip() for k in text.split(",") if k.strip()]
    if flag == "--keywords" and not keywords:
        raise AragError('--keywords is empty; give comma-separated keywords, e.g. --keywords "Paris,Eiffel"')
    if flag == "--query" and not text.strip():
        raise AragError('--query is empty; give a question or description, e.g. --query "who built it"')
    index = _load(args)
    if flag == "--keywords":
        hits = index.keyword_search(keywords, args.top_k)
    else:
        hits = index.semantic_search(text, args.top_k)
    if args.json:
        _print_json({"hits": [h.to_dict() for h in hits]})
        return 0
    if not hits:
        print("no matches")
    for rank, hit in enumerate(hits, 1):
        title = f"  {hit.title}" if hit.title else ""
        print(f"{rank:>2}. [{hit.chunk_id}] score={hit.score:.4g}{title}")
        for snippet in hit.snippets:
            print(f"      {snippet}")
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    cliargs.require_utf8(("a chunk ID", chunk_id) for chunk_id in args.ids)
    index = _load(args)
    unknown = [i for i in args.ids if index.get_chunk(i) is None]
    if unknown:
        raise AragError(f"unknown chunk ID(s) {', '.join(unknown)} in {args.index}; use IDs that `arag search` shows")
    chunks = index.get_chunks(args.ids)
    if args.json:
        _print_json(
            {
                "chunks": [
                    {"id": c.id, "title": c.title, "text": c.text, "prev": c.prev_id, "next": c.next_id} for c in chunks
                ]
            }
        )
        return 0
    for c in chunks:
        title = f"  {c.title}" if c.title else ""
        print(f"[{c.id}]{title}  (previous: {c.prev_id or 'none'}, next: {c.next_id or 'none'})")
        print(c.text)
        print()
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Check an index completely: checksums, keyword arrays and every sentence record."""
    from arag_graph.index.load import verify_index

    started = time.perf_counter()
    report = verify_index(_load(args))
    report["seconds"] = round(time.perf_counter() - started, 2)
    if args.json:
        _print_json({"ok": True, **report})
    else:
        if report["checksums"]:
            what = f"{report['files_checked']} file checksums"
        else:
            what = "no checksums (built before they were recorded)"
        unit = "sentence vectors" if report["sentence_store"] == "matrix" else "sentence records"
        print(
            f"ok: {report['index']}: {report['chunks']} chunks, {report['sentences']} {unit} and "
            f"{what} checked in {report['seconds']} s"
        )
    return 0


# --------------------------------------------------------------------------------------------
# arag ask


NO_KEY_NOTICE = "arag: no API key set (OPENAI_API_KEY): using the offline no-LLM policy"


def choose_model_spec(explicit: str | None, base_url: str | None) -> tuple[str, str | None]:
    """The model spec to run, and the notice to show once the run goes ahead (None: nothing to say).

    ``--model`` if given; else ``$ARAG_MODEL``; else gpt-4o-mini with a key, ``offline`` without,
    which the CLI says in one line. Nothing is printed here: a command first checks all of its input,
    so that bad input ends in its one error line only.
    """
    import os

    from arag_graph.llm.models import OFFLINE, has_credentials

    if explicit:
        return explicit, None
    if os.environ.get("ARAG_MODEL"):
        return os.environ["ARAG_MODEL"], None
    if has_credentials(base_url):
        return "gpt-4o-mini", None
    return OFFLINE, NO_KEY_NOTICE


def announce(notice: str | None) -> None:
    """Print ``choose_model_spec``'s notice (on stderr), once every check has passed."""
    if notice:
        print(notice, file=sys.stderr)


def check_model_spec(spec: str, base_url: str | None, limits: dict[str, Any] | None = None) -> Any:
    """The chat model of a spec that needs no index (None for ``offline``, which reads the index).

    Raises the one-line :class:`ModelSpecError` for a malformed spec or a missing key before any index
    is loaded or built. ``limits`` holds the ``timeout`` and ``max_retries`` given on the command line.
    """
    from arag_graph.core.safety import remember_url_credentials
    from arag_graph.llm.models import OFFLINE, resolve_chat_model

    remember_url_credentials(base_url)
    if spec.strip() == OFFLINE:
        return None
    return resolve_chat_model(spec, base_url=base_url, **(limits or {}))


def open_index(path: str | None, quiet: bool = False) -> Any:
    """The index at ``path``, or the bundled sample index (built on first use) when no path is given."""
    from arag_graph.index.load import load_index
    from arag_graph.index.sample import ensure_sample_index

    if path:
        return load_index(path, cache=True)
    return ensure_sample_index(progress=not quiet and sys.stderr.isatty())


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

    The artifact is read the one checked way (:func:`arag_graph.llm.tool_artifacts.artifact_of`):
    the messages a run streams can hold a caller's own tool messages, whose artifacts say anything.
    """
    from arag_graph.llm.tool_artifacts import artifact_of

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
    context: dict[str, Any],
    echo: bool,
    checkpointer: Any = None,
    thread: str | None = None,
) -> dict[str, Any]:
    """Run one question through a graph, printing tool calls and results as they happen.

    With ``checkpointer`` and ``thread``, the question continues that thread's conversation.
    """
    from langchain_core.messages import ToolMessage

    from arag_graph.registry import build_graph, config_for

    graph = build_graph(graph_name, index=index, model=model, checkpointer=checkpointer)
    cfg = config_for(graph_name, **context)
    final: dict[str, Any] = {}
    seen_steps = 0
    # Root-run trace metadata: which index, model and limits produced this answer.
    metadata = {"index": str(index.path), "model": context.get("model"), "max_steps": getattr(cfg, "max_steps", None)}
    run_config: dict[str, Any] = {"metadata": {k: v for k, v in metadata.items() if v is not None}}
    if thread is not None:
        run_config["configurable"] = {"thread_id": thread}
    stream = graph.stream({"question": question}, run_config, context=cfg, stream_mode=["updates", "values"])
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


def check_run_limits(max_steps: int | None, top_k: int | None) -> None:
    """``--max-steps`` and ``--top-k`` as given on the command line (None: the graph's default).

    ``--top-k`` follows one rule in every command: refused outside the tools' range (the tools clamp
    only what a model asks for).
    """
    if max_steps is not None and max_steps < 0:
        raise AragError(f"--max-steps {max_steps} is not a step cap; give 0 or more tool steps, e.g. --max-steps 15")
    cliargs.top_k(top_k)


THREAD_STORE = "threads.sqlite"
"""The SQLite checkpointer of ``arag ask --thread``, in the cache directory."""


def thread_name(name: str | None) -> str | None:
    """``--thread NAME`` checked: non-empty, at most 200 characters, no control characters (None: no thread)."""
    if name is None:
        return None
    name = name.strip()
    if not name or len(name) > 200 or any(not ch.isprintable() for ch in name):
        raise AragError("--thread needs a name of 1 to 200 printable characters, e.g. --thread research")
    return name


@contextlib.contextmanager
def thread_store(thread: str | None) -> Iterator[Any]:
    """The checkpointer that keeps ``arag ask --thread`` conversations (None without a thread).

    LangGraph's SQLite checkpointer, one file in the cache directory (:func:`arag_graph.core.cache.cache_dir`):
    a later ``arag ask --thread NAME`` continues the conversation, so the agent's read set (derived
    from the thread's messages) still holds what the earlier questions read.
    """
    if thread is None:
        yield None
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    from arag_graph.core.cache import cache_dir

    path = cache_dir() / THREAD_STORE
    conn: sqlite3.Connection | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False)  # as SqliteSaver.from_conn_string does
        saver = SqliteSaver(conn)
        saver.setup()
    except (OSError, sqlite3.Error) as exc:
        if conn is not None:
            conn.close()
        raise AragError(
            f"the thread store {path} cannot be used ({exc}); set ARAG_CACHE_DIR to a writable directory"
        ) from None
    try:
        yield saver
    finally:
        conn.close()


def cmd_ask(args: argparse.Namespace) -> int:
    from arag_graph.core.jsonl import finite, scrub
    from arag_graph.llm.models import resolve_chat_model
    from arag_graph.registry import config_for, get_graph_spec
    from arag_graph.run.runtime import model_settings

    # Every check comes before the first line of output: bad input prints its one error line only.
    settings = [("--set", pair) for pair in args.settings]
    texts = cliargs.flags(args, "index", "graph", "model", "base_url", "html", "thread")
    cliargs.require_utf8([("the question", args.question), *texts, *settings])
    question = (args.question or "").strip()
    if not question:
        raise AragError('the question is empty; ask something, e.g. arag ask "Who directed Alien?" --index DIR')
    get_graph_spec(args.graph)
    check_run_limits(args.max_steps, args.top_k)
    thread = thread_name(args.thread)
    if args.html is not None:
        _check_html_file(Path(args.html), "--html")
    extra = _one_run_settings(_settings(args.settings), args.graph)
    spec, notice = choose_model_spec(args.model, args.base_url)
    limits = cliargs.model_limits(args)
    context = {"max_steps": args.max_steps, "top_k": args.top_k, "model": spec, "base_url": args.base_url, **limits}
    context |= extra | {"profile": check_profile(args.profile)}
    ctx = config_for(args.graph, **context)  # the graph's own configuration checks (one-line AragError)
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
            context=context,
            echo=not args.json,
            checkpointer=checkpointer,
            thread=f"{args.graph}:{thread}" if thread else None,  # a thread belongs to one graph (its state's shape)
        )
    record = scrub(finite(result_record(state, args.graph, spec)))  # no key a model echoed is printed
    if thread:
        record["thread"] = thread
    if args.html:
        from arag_graph.evaluators.html_report import question_report
        from arag_graph.evaluators.runner import prediction_of

        # The evaluation's record of a run, so the page is the report's trajectory view as it is.
        prediction = scrub(finite(prediction_of(state)))
        path = question_report(question, args.graph, spec, prediction, index, Path(args.html))
        if not args.json:
            print(f"trajectory view: {path}")
    if args.json:
        _print_json(record)
    else:
        print(f"\nanswer: {record['answer']}")
        print(f"citations: {', '.join(record['citations']) or 'none'}")
        print(f"steps: {record['steps']}, retrieved tokens: {record['retrieved_tokens']}")
        if record["error"]:
            print(f"error: {record['error']}", file=sys.stderr)
    return 1 if record["error"] else 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the retrieval tools over MCP until the client (stdio) or a signal (http) ends it."""
    from arag_graph.tools.mcp_server import run_mcp

    cliargs.require_utf8(cliargs.flags(args, "index", "host"))
    cliargs.whole_number(args.port, "--port", 0, 65535, example="--port 8765")
    host = (args.host or "").strip()
    if not host:
        raise AragError("--host is empty; give an address to listen on, e.g. --host 127.0.0.1")
    index = open_index(args.index, quiet=True)  # stdout is the protocol's under stdio: nothing else goes there
    run_mcp(index, transport=args.transport, host=host, port=args.port)
    return 0


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


# --------------------------------------------------------------------------------------------
# arag eval


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise AragError(f"{flag} {text!r}: give comma-separated integers, e.g. {flag} 5,10,15,20") from None
    if not values:
        raise AragError(f"{flag} is empty; give comma-separated integers, e.g. {flag} 5,10,15,20")
    return values


def _settings(pairs: Sequence[str]) -> dict[str, str]:
    """``--set KEY=VALUE`` pairs; the graphs' configuration classes coerce and check the values."""
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise AragError(f"--set {pair!r}: give KEY=VALUE, e.g. --set tools=no_chunk_read")
        values[key.strip()] = value.strip()
    return values


def _runner_args(args: argparse.Namespace) -> dict[str, Any]:
    """The evaluation runner's settings that ``arag eval`` and ``arag reproduce`` share, from their flags."""
    return {
        "corpus": Path(args.corpus) if args.corpus else None,
        "index": Path(args.index) if args.index else None,
        "judge": args.judge,
        "base_url": args.base_url,
        "limit": args.limit,
        "workers": args.workers,
        "dataset_format": args.format,
        "upload": False if args.no_upload else None,
        **cliargs.model_limits(args),
    }


def cmd_eval(args: argparse.Namespace) -> int:
    from arag_graph.evaluators.plan import EvalPlan
    from arag_graph.evaluators.runner import failed_everywhere, run_evaluation

    texts = ("dataset", "corpus", "index", "graphs", "model", "base_url", "judge", "max_steps", "out", "format")
    texts += ("grid", "cch_index", "summaries")
    cliargs.require_utf8([*cliargs.flags(args, *texts), *(("--set", pair) for pair in args.settings)])
    if args.graphs is None and args.grid is None:
        raise AragError("give --graphs (e.g. --graphs arag,naive_rag) or --grid aragog, or both")
    graphs = [g.strip() for g in (args.graphs or "").split(",") if g.strip()]
    dataset = Path(args.dataset)
    model, notice = choose_model_spec(args.model, args.base_url)
    out = (
        Path(args.out) if args.out else Path("runs") / f"{dataset.parent.name}-{dataset.stem}-{model.replace('/', '_')}"
    )
    plan = EvalPlan(
        dataset=dataset,
        graphs=graphs,
        out=out,
        model=model,
        max_steps=_int_list(args.max_steps, "--max-steps") if args.max_steps else None,
        top_k=args.top_k,
        extra_context=_settings(args.settings),
        embedding=args.embedding,
        embedding_base_url=args.embedding_base_url,
        grid=args.grid,
        cch_index=Path(args.cch_index) if args.cch_index else None,
        summaries=args.summaries,
        profile=check_profile(args.profile),
        **_runner_args(args),
    )
    with cliargs.file_errors_as_one_line(str(out)):
        rows = run_evaluation(
            plan, progress=not args.quiet and sys.stderr.isatty(), on_checked=lambda: announce(notice)
        )
    if args.json:  # the summary.json rows, with where everything was written
        files = sorted(p.name for p in out.iterdir() if p.suffix in (".md", ".json", ".csv", ".png", ".html"))
        _print_json({"out": str(out), "files": files, "summary": rows})
    else:
        print((out / "summary.md").read_text(encoding="utf-8"))
        if plan.grid:  # the comparison's own table, after the per-setting one
            print((out / f"{plan.grid.strip().lower()}.md").read_text(encoding="utf-8"))
        print(f"predictions, summary and plots: {out}")
        print(f"report (open in a browser): {out / 'report.html'}")
    failure = failed_everywhere(rows, out)
    if failure:
        print(f"arag: error: {failure}", file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------------------------
# arag reproduce


def cmd_reproduce(args: argparse.Namespace) -> int:
    """One paper table: its graphs and settings with the paper profile, written in the paper's layout."""
    import shlex

    from arag_graph.evaluators.reproduce import reproduce, reproduce_table

    texts = ("table", "dataset", "corpus", "index", "model", "base_url", "judge", "out", "format", "paper_dataset")
    texts += ("embedding", "embedding_base_url")
    cliargs.require_utf8(cliargs.flags(args, *texts))
    table = reproduce_table(args.table)
    model, notice = choose_model_spec(args.model, args.base_url)
    out = Path(args.out)
    command = "arag " + shlex.join(args.command_line)  # the table's header says how to make it again
    with cliargs.file_errors_as_one_line(str(out)):
        entries, files = reproduce(
            table.name,
            dataset=Path(args.dataset),
            out=out,
            model=model,
            command=command,
            paper_dataset=args.paper_dataset,
            progress=not args.quiet and sys.stderr.isatty(),
            on_checked=lambda: announce(notice),
            embedding=args.embedding,
            embedding_base_url=args.embedding_base_url,
            **_runner_args(args),
        )
    if args.json:
        _print_json({"out": str(out), "table": table.name, "files": [str(f) for f in files], "rows": entries})
    else:
        print(files[1].read_text(encoding="utf-8"))
        print(f"table: {files[1]}; every run's details: {out / 'summary.md'}, {out / 'report.html'}")
    return 0


# --------------------------------------------------------------------------------------------
# arag report


def _check_html_file(path: Path, flag: str) -> None:
    """An HTML file to write: refused before any work when it is a directory or its directory is missing."""
    if path.is_dir():
        raise AragError(f"{flag} {path} is a directory; give a file name, e.g. {flag} {path / 'report.html'}")
    if not path.parent.is_dir():
        raise AragError(f"{flag} {path}: directory {path.parent} does not exist; create it or give another file")


def cmd_report(args: argparse.Namespace) -> int:
    """``arag report RUN [RUN_B]``: the HTML report of an evaluation, or of two compared."""
    from arag_graph.evaluators.html_report import build_report
    from arag_graph.evaluators.predictions import load_records

    cliargs.require_utf8([("a run directory", run) for run in args.runs] + cliargs.flags(args, "out"))
    if len(args.runs) > 2:
        raise AragError("arag report takes one run directory, or two to compare: arag report RUN_A [RUN_B]")
    if args.out is not None:
        _check_html_file(Path(args.out), "--out")
    runs = [Path(run) for run in args.runs]
    for run in runs:
        if not run.is_dir():
            raise AragError(f"{run} is not a directory; give the --out directory of an arag eval run")
    path = build_report(runs, [load_records(run) for run in runs], Path(args.out) if args.out else None)
    if args.json:
        _print_json({"report": str(path)})
    else:
        print(f"report: {path}")
    return 0


# --------------------------------------------------------------------------------------------
# arag sample-chains


def cmd_sample_chains(args: argparse.Namespace) -> int:
    """CoRAG's rejection sampling: N chains per question, keep those whose answer matches the gold."""
    from arag_graph.corag.rejection_sampling import check_settings, open_outputs, rejection_sample
    from arag_graph.qa.datasets import load_questions

    cliargs.require_utf8(cliargs.flags(args, "dataset", "format", "index", "out", "model", "base_url"))
    if args.limit is not None and args.limit < 1:
        raise AragError(f"--limit {args.limit} is not a positive number of questions")
    cliargs.whole_number(args.workers, "--workers", 1, example="--workers 4")
    questions = load_questions(args.dataset, args.format)[: args.limit]
    check_run_limits(args.max_steps, args.top_k)
    spec, notice = choose_model_spec(args.model, args.base_url)
    limits = cliargs.model_limits(args)
    check_model_spec(spec, args.base_url, limits)  # chains resolve the spec themselves; a bad one would fail each
    with cliargs.file_errors_as_one_line(args.out):
        open_outputs(args.out)  # a directory or someone else's file is refused before the index loads
    index = open_index(args.index, args.quiet)
    context: dict[str, Any] = {"base_url": args.base_url} if args.base_url else {}
    context |= limits
    if args.top_k is not None:
        context["top_k"] = args.top_k
    settings: dict[str, Any] = {"n": args.n, "temperature": args.temperature, "max_steps": args.max_steps}
    settings |= {"match": args.match, "context": context}
    check_settings(**settings)
    announce(notice)

    def shown(question: Any, kept: int, stats: Any) -> None:
        if not args.json:
            print(f"[{stats.questions}/{len(questions)}] {question.id}: kept {kept} of {args.n}")

    with cliargs.file_errors_as_one_line(args.out):
        stats = rejection_sample(
            questions,
            index=index,
            model=spec,
            out=args.out,
            **settings,
            max_concurrency=args.workers,
            on_question=shown,
        )
    summary = {"model": spec, **stats.as_dict()}
    if args.json:
        _print_json(summary)
    else:
        print(
            f"kept {stats.kept} of {stats.chains} chains ({stats.acceptance_rate:.0%}); "
            f"{stats.skipped} question(s) done earlier; {stats.failed} failed -> {args.out}"
        )
        if not stats.temperature_applied:
            print("note: this model samples deterministically (no temperature), so its chains repeat")
    return 0


# --------------------------------------------------------------------------------------------
# arag demo


def cmd_demo(args: argparse.Namespace) -> int:
    """Build the sample index if needed, then answer sample questions with the offline policy."""
    from arag_graph.core.cache import cache_dir
    from arag_graph.evaluators.html_report import REPORT_FILE, questions_report
    from arag_graph.index.sample import default_sample_index_path, ensure_sample_index, sample_questions_path
    from arag_graph.llm.models import resolve_chat_model
    from arag_graph.qa.datasets import load_questions
    from arag_graph.registry import get_graph_spec

    if args.questions < 1:
        raise AragError(f"--questions {args.questions}: give 1 or more sample questions, e.g. --questions 3")
    get_graph_spec(args.graph)
    if args.html is not None:
        _check_html_file(Path(args.html), "--html")
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
    for i, q in enumerate(questions, 1):
        show(f"\n[{i}/{len(questions)}] {q.question}")
        state = run_question(args.graph, q.question, index=index, model=model, context={}, echo=not args.json)
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
        _print_json(report | {"questions": answered})
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


# --------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line too (exit status 2, as argparse does)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def _chroma_timeout_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--chroma-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="total time each Chroma server request may take, whole reply included "
        "(default $ARAG_CHROMA_TIMEOUT, else 60)",
    )


def _add_profile(p: argparse.ArgumentParser, text: str) -> None:
    """``--profile package|paper`` (:mod:`arag_graph.core.profiles`); checked by the command, one line."""
    p.add_argument("--profile", default=None, metavar="{package,paper}", help=text)


def _add_settings(p: argparse.ArgumentParser, text: str) -> None:
    """``--set KEY=VALUE`` (repeatable) into ``args.settings``; :func:`_settings` parses the pairs."""
    p.add_argument("--set", action="append", default=[], dest="settings", metavar="KEY=VALUE", help=text)


def _add_version(parser: argparse.ArgumentParser) -> None:
    """``arag --version``: the package's one version string (``arag_graph.__version__``, which the
    wheel's metadata is also built from), so a bug report names the code that ran."""
    from arag_graph import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")


def _add_embedding_arguments(p: argparse.ArgumentParser) -> None:
    """``--embedding`` and ``--embedding-base-url``: the model a new index embeds with (recorded in it)."""
    p.add_argument(
        "--embedding",
        default=None,
        metavar="SPEC",
        help="embedding model: a sentence-transformers folder or cached name, or openai:NAME for an "
        "OpenAI-compatible endpoint (key from OPENAI_API_KEY); default the packaged all-MiniLM-L6-v2. "
        "Recorded in the index, which then embeds queries with it; never downloaded",
    )
    p.add_argument(
        "--embedding-base-url",
        default=None,
        metavar="URL",
        help="base URL of the openai:NAME endpoint, e.g. http://localhost:8080/v1 (recorded; never a key)",
    )


class _HelpFormatter(argparse.HelpFormatter):
    """Help that lists the choices of the options whose choices the library defines (graphs, formats,
    encoders), read only when help is shown: ``arag`` starts without importing the graph registry
    or the encoders, and the command's own checks keep their one-line errors for a wrong value."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        listed = getattr(action, "listed_choices", None)
        return f"{text} (one of: {', '.join(listed())})" if listed is not None and text else text


def _lists(action: argparse.Action, choices: Callable[[], Sequence[str]]) -> None:
    action.listed_choices = choices  # type: ignore[attr-defined]


def _graph_names() -> list[str]:
    from arag_graph.registry import graph_names

    return graph_names()


def _table_names() -> Sequence[str]:
    from arag_graph.evaluators.reproduce import TABLES

    return list(TABLES)


def _corpus_formats() -> Sequence[str]:
    from arag_graph.index.corpus import CORPUS_FORMATS

    return CORPUS_FORMATS


def _question_formats() -> Sequence[str]:
    from arag_graph.qa.datasets import QUESTION_FORMATS

    return QUESTION_FORMATS


def _encoders() -> Sequence[str]:
    from arag_graph.index.encoders import ENCODERS

    return ENCODERS


def _output_flags() -> argparse.ArgumentParser:
    """``-v``/``-q``, on every command: how much goes to stderr (see :mod:`arag_graph.cli.logs`)."""
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_mutually_exclusive_group()
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help=f"more on stderr: -v arag's debug lines, -vv other libraries' info too (default: ${logs.ENV}, else info)",
    )
    group.add_argument("-q", "--quiet", action="store_true", help="errors only on stderr, and no progress bars")
    return flags


def _index_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag index``: its arguments."""
    from arag_graph.core.documents import DEFAULT_CONTEXTUAL_HEADERS, HEADER_MAX_CHARS
    from arag_graph.index.sentencematrix import MATRIX_MAX_SENTENCES

    p = sub.add_parser("index", help="build an index of a corpus", **common)
    p.add_argument(
        "corpus",
        nargs="+",
        help="corpus file or directory (.txt, .md, .html, .pdf, JSON, JSON Lines), or several files",
    )
    p.add_argument("--out", required=True, help="index directory (replaced only when the new build is complete)")
    p.add_argument(
        "--update",
        action="store_true",
        help="sync the corpus into the existing index at --out: only new and changed documents (by content "
        "hash per id) are chunked and encoded, removed ones dropped; the index keeps its own settings",
    )
    _lists(p.add_argument("--format", default=None, help="corpus format (default: detect)"), _corpus_formats)
    p.add_argument("--chunk-size", type=int, default=1000, help="chunk size in o200k tokens (default 1000)")
    _add_profile(
        p,
        "the index's defaults: package (word keyword rule, contextual headers) or paper (the A-RAG "
        "paper's substring rule on bare sentences); a flag given explicitly wins",
    )
    p.add_argument(
        "--contextual-headers",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="embed 'title > section: sentence' and match titles in keyword search and BM25 (ARAGOG's CCH; "
        f"default {'on' if DEFAULT_CONTEXTUAL_HEADERS else 'off'}, off with --profile paper; measured in "
        "bench/results/quality.md)",
    )
    p.add_argument(
        "--header-max-chars",
        type=int,
        default=HEADER_MAX_CHARS,
        help=f"longest contextual header, 'title > section' (default {HEADER_MAX_CHARS} characters)",
    )
    p.add_argument(
        "--keyword-match",
        choices=["word", "substring"],
        default=None,
        help="keyword rule: word-prefix matching (default, indexed) or plain substring (the paper's, scans; the "
        "default with --profile paper)",
    )
    p.add_argument(
        "--chroma-url",
        default=None,
        help="store sentence vectors in a Chroma server, e.g. http://localhost:8000",
    )
    p.add_argument("--collection", default=None, help="collection name prefix in the Chroma server")
    _chroma_timeout_flag(p)
    encoder = p.add_argument(
        "--encoder",
        default=None,
        help="backend that runs the embedding model, recorded in the index and used for its queries (default "
        "onnx-int8: int8 weights, about 2x less CPU time than torch at the same recall@5 on HotpotQA-100; onnx: "
        "float32, torch's vectors)",
    )
    _add_embedding_arguments(p)
    p.add_argument(
        "--backend",
        default="auto",
        help="where the sentence vectors go: auto (default: matrix up to "
        f"{MATRIX_MAX_SENTENCES:,} sentences, else chroma), matrix (exact search in NumPy) or chroma (HNSW)",
    )
    _lists(encoder, _encoders)
    p.add_argument(
        "--summaries",
        default=None,
        metavar="MODEL",
        help="add ARAGOG's document summary index (retriever=dsi): a summary per document written by MODEL, or "
        "'offline' for extractive lead sentences; resumable, its tokens recorded in the manifest",
    )
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server URL for the --summaries model")
    cliargs.add_model_limits(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_index)


def _search_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag search``: its arguments."""
    p = sub.add_parser("search", help="run keyword_search or semantic_search against an index", **common)
    p.add_argument("--index", required=True)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--keywords", help='comma-separated keywords, e.g. "Marie Curie,Nobel"')
    group.add_argument("--query", help="natural-language query for semantic search")
    p.add_argument("--top-k", type=int, default=5, help="chunks to return, 1 to 20 (default 5)")
    p.add_argument("--json", action="store_true", help="print the hits as one JSON object")
    _chroma_timeout_flag(p)
    p.set_defaults(func=cmd_search)


def _read_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag read``: its arguments."""
    p = sub.add_parser("read", help="print chunks by ID", **common)
    p.add_argument("--index", required=True)
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--json", action="store_true", help="print the chunks as one JSON object")
    _chroma_timeout_flag(p)
    p.set_defaults(func=cmd_read)


def _verify_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag verify``: its arguments."""
    p = sub.add_parser(
        "verify", help="check an index completely: checksums, keyword arrays, every sentence record", **common
    )
    p.add_argument("--index", required=True)
    p.add_argument("--json", action="store_true", help="print what was checked as one JSON object")
    _chroma_timeout_flag(p)
    p.set_defaults(func=cmd_verify)


def _ask_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag ask``: its arguments."""
    p = sub.add_parser("ask", help="answer a question with a graph (A-RAG by default)", **common)
    p.add_argument("question")
    p.add_argument("--index", default=None, help="index directory (default: the bundled sample index)")
    _lists(p.add_argument("--graph", default="arag", help="which graph to run (default arag)"), _graph_names)
    p.add_argument("--model", default=None, help="offline, or an OpenAI-compatible model name (default: see README)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server URL (vLLM, Ollama, llama.cpp, LM Studio)")
    p.add_argument("--max-steps", type=int, default=None, help="step cap (default 15)")
    p.add_argument("--top-k", type=int, default=None, help="chunks per search, 1 to 20 (default 5)")
    cliargs.add_model_limits(p)
    _add_profile(p, "defaults of the run: package, or paper (the papers' step cap, loop rule, ...; --set wins)")
    _add_settings(
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


def _eval_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag eval``: its arguments."""
    p = sub.add_parser(
        "eval", help="evaluate graphs on a QA dataset (resumable; LangSmith experiments with a key)", **common
    )
    p.add_argument("--dataset", required=True, help="questions file (HotpotQA, 2Wiki, MuSiQue or A-RAG format)")
    _lists(p.add_argument("--format", default=None, help="question format (default: detect)"), _question_formats)
    p.add_argument("--corpus", default=None, help="corpus file (default: corpus.json or <stem>_corpus.json beside it)")
    p.add_argument("--index", default=None, help="index directory to use or build (default: a cache per corpus)")
    _add_embedding_arguments(p)
    _lists(
        p.add_argument("--graphs", default=None, help="comma-separated graphs, e.g. arag,naive_rag,corag"),
        _graph_names,
    )
    p.add_argument(
        "--grid",
        default=None,
        help="run a named comparison besides --graphs: aragog (naive RAG, + SWR, + AMR, + DSI, + HyDE, + CCH, "
        "+ HyDE + CCH and the rest of ARAGOG's grid), written to <out>/aragog.md",
    )
    p.add_argument(
        "--cch-index",
        default=None,
        help="the grid's index with contextual chunk headers, built or to build (default: a cache per corpus)",
    )
    p.add_argument(
        "--summaries",
        default=None,
        metavar="MODEL",
        help="who writes document summaries when eval builds an index for DSI: a model, or offline (the default: "
        "extractive lead sentences)",
    )
    p.add_argument("--model", default=None, help="offline or an OpenAI-compatible model name")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server URL for the model and judge")
    p.add_argument("--judge", default=None, help="LLM judge model for LLM-Acc (without one it is reported unavailable)")
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument("--workers", type=int, default=1, help="questions run concurrently (default 1)")
    p.add_argument("--max-steps", default=None, help="step caps to sweep, e.g. 5,10,15,20 (graphs with a step cap)")
    p.add_argument("--top-k", type=int, default=5, help="chunks per search, 1 to 20 (default 5, as in the paper)")
    cliargs.add_model_limits(p, judge=True)
    p.add_argument("--out", default=None, help="output directory (default runs/<dataset>-<model>); rerun to resume")
    p.add_argument("--no-upload", action="store_true", help="stay local even when a LangSmith key is set")
    _add_profile(
        p,
        "defaults of the evaluation: package, or paper (the papers' index, step cap, loop rule and judge; "
        "docs/guide/reproducing.md lists them; a flag or --set wins)",
    )
    _add_settings(
        p,
        "graph setting for every run, repeatable: tools=no_chunk_read, reasoning_effort=high, max_tokens=16384; "
        "a comma list sweeps the setting in one run, as --max-steps does: reasoning_effort=minimal,low,medium,high",
    )
    p.add_argument("--json", action="store_true", help="print the summary (summary.json's rows) as one JSON object")
    p.set_defaults(func=cmd_eval)


def _reproduce_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag reproduce``: its arguments."""
    p = sub.add_parser(
        "reproduce",
        help="run one table of the papers with the paper profile and write it beside the paper's numbers",
        **common,
    )
    _lists(p.add_argument("table", help="which table"), _table_names)
    p.add_argument("--dataset", required=True, help="questions file (HotpotQA, 2Wiki, MuSiQue or A-RAG format)")
    p.add_argument("--out", required=True, help="output directory (an arag eval --out: rerun to resume)")
    _lists(p.add_argument("--format", default=None, help="question format (default: detect)"), _question_formats)
    p.add_argument("--corpus", default=None, help="corpus file (default: corpus.json or <stem>_corpus.json beside it)")
    p.add_argument("--index", default=None, help="index directory built with --profile paper, or where to build one")
    p.add_argument("--model", default=None, help="offline or an OpenAI-compatible model name")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server URL for the model and judge")
    p.add_argument(
        "--judge", default=None, help="LLM judge for LLM-Acc (default: the paper's, gpt-5-mini, unless --model offline)"
    )
    p.add_argument(
        "--paper-dataset",
        default=None,
        help="whose numbers to show beside ours: musique, hotpotqa or 2wiki (default: read from the file name)",
    )
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument("--workers", type=int, default=1, help="questions run concurrently (default 1)")
    _add_embedding_arguments(p)  # aragog-embeddings compares it with the packaged encoder
    cliargs.add_model_limits(p, judge=True)
    p.add_argument("--no-upload", action="store_true", help="stay local even when a LangSmith key is set")
    p.add_argument("--json", action="store_true", help="print the table's rows as one JSON object")
    p.set_defaults(func=cmd_reproduce)


def _report_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag report``: its arguments."""
    p = sub.add_parser(
        "report", help="write the HTML report of an eval run (report.html), or compare two runs", **common
    )
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="an arag eval --out directory; a second one to compare")
    p.add_argument(
        "--out", default=None, help="HTML file (default RUN_DIR/report.html; two runs: RUN_DIR/compare-<RUN_B>.html)"
    )
    p.add_argument("--json", action="store_true", help="print where the report went as one JSON object")
    p.set_defaults(func=cmd_report)


def _sample_chains_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag sample-chains``: its arguments."""
    p = sub.add_parser(
        "sample-chains", help="CoRAG rejection sampling: keep sampled chains whose answer is correct (JSONL)", **common
    )
    p.add_argument("--dataset", required=True, help="questions file (HotpotQA, 2Wiki, MuSiQue or A-RAG format)")
    _lists(p.add_argument("--format", default=None, help="question format (default: detect)"), _question_formats)
    p.add_argument("--index", default=None, help="index directory (default: the bundled sample index)")
    p.add_argument("--out", required=True, help="JSON Lines file the kept chains are appended to (resumable)")
    p.add_argument("--model", default=None, help="an OpenAI-compatible model name, or offline")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server URL")
    p.add_argument("--n", type=int, default=4, help="chains sampled per question (default 4)")
    p.add_argument(
        "--temperature", type=float, default=0.7, help="sampling temperature, above 0 and at most 2 (default 0.7)"
    )
    p.add_argument("--max-steps", type=int, default=3, help="CoRAG step cap S (default 3)")
    p.add_argument("--top-k", type=int, default=None, help="chunks per retrieval, 1 to 20 (default 5)")
    p.add_argument("--match", choices=["contain", "em"], default="contain", help="answer check (default contain)")
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument("--workers", type=int, default=1, help="chains of a question run at once (default 1)")
    cliargs.add_model_limits(p)
    p.add_argument("--json", action="store_true", help="print the run's counts as one JSON object")
    p.set_defaults(func=cmd_sample_chains)


def _mcp_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag mcp``: its arguments."""
    p = sub.add_parser("mcp", help="serve keyword_search, semantic_search and chunk_read over MCP", **common)
    p.add_argument("--index", default=None, help="index directory (default: the bundled sample index)")
    p.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (the client starts this command) or http (streamable HTTP at /mcp; default stdio)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on with --transport http (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port for --transport http (default 8765; 0: any free)")
    p.set_defaults(func=cmd_mcp)


def _demo_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag demo``: its arguments."""
    p = sub.add_parser("demo", help="answer sample questions on the bundled sample with the offline policy", **common)
    p.add_argument("--index", default=None, help="where the sample index lives (default: user cache)")
    p.add_argument("--questions", type=int, default=3, help="how many sample questions (default 3)")
    _lists(p.add_argument("--graph", default="arag", help="which graph answers them (default arag)"), _graph_names)
    p.add_argument(
        "--html",
        default=None,
        metavar="FILE",
        help="where the HTML report goes (default: user cache, demo/report.html)",
    )
    p.add_argument("--json", action="store_true", help="print the answers and trajectories as one JSON object")
    p.set_defaults(func=cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    """The ``arag`` command line: one ``_<command>_command`` function adds each subcommand's arguments."""
    parser = _Parser(
        prog="arag",
        description="Agentic RAG with hierarchical retrieval tools (A-RAG).",
        formatter_class=_HelpFormatter,
    )
    _add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    common = {"parents": [_output_flags()], "formatter_class": _HelpFormatter}
    for add in (
        _index_command,
        _search_command,
        _read_command,
        _verify_command,
        _ask_command,
        _eval_command,
        _reproduce_command,
        _report_command,
        _sample_chains_command,
        _mcp_command,
        _demo_command,
    ):
        add(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.command_line = list(sys.argv[1:] if argv is None else argv)
    try:
        level = logs.level_of(args.verbose, args.quiet, logs.env_level())
        with logs.cli_logging(level, args.verbose):
            return int(args.func(args) or 0)
    except AragError as exc:
        print(f"arag: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("arag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
