"""The evaluation commands: ``arag eval`` (graphs on a QA dataset), ``reproduce`` (a paper's table)
and ``report`` (an evaluation's HTML report, or two compared)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from arag_graph.cli import args as cliargs
from arag_graph.cli.output import print_json
from arag_graph.cli.resolve import announce, choose_model_spec
from arag_graph.core.errors import AragError
from arag_graph.core.profiles import check_profile

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
        extra_context=cliargs.set_values(args.settings),
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
        print_json({"out": str(out), "files": files, "summary": rows})
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
        print_json({"out": str(out), "table": table.name, "files": [str(f) for f in files], "rows": entries})
    else:
        print(files[1].read_text(encoding="utf-8"))
        print(f"table: {files[1]}; every run's details: {out / 'summary.md'}, {out / 'report.html'}")
    return 0


# --------------------------------------------------------------------------------------------
# arag report


def cmd_report(args: argparse.Namespace) -> int:
    """``arag report RUN [RUN_B]``: the HTML report of an evaluation, or of two compared."""
    from arag_graph.evaluators.html_report import build_report
    from arag_graph.evaluators.predictions import load_records

    cliargs.require_utf8([("a run directory", run) for run in args.runs] + cliargs.flags(args, "out"))
    if len(args.runs) > 2:
        raise AragError("arag report takes one run directory, or two to compare: arag report RUN_A [RUN_B]")
    if args.out is not None:
        cliargs.html_file(Path(args.out), "--out")
    runs = [Path(run) for run in args.runs]
    for run in runs:
        if not run.is_dir():
            raise AragError(f"{run} is not a directory; give the --out directory of an arag eval run")
    path = build_report(runs, [load_records(run) for run in runs], Path(args.out) if args.out else None)
    if args.json:
        print_json({"report": str(path)})
    else:
        print(f"report: {path}")
    return 0


# --------------------------------------------------------------------------------------------
# their arguments


def _eval_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag eval``: its arguments."""
    p = sub.add_parser(
        "eval", help="evaluate graphs on a QA dataset (resumable; LangSmith experiments with a key)", **common
    )
    cliargs.add_device(p)
    p.add_argument("--dataset", required=True, help="questions file (HotpotQA, 2Wiki, MuSiQue or A-RAG format)")
    cliargs.listed(
        p.add_argument("--format", default=None, help="question format (default: detect)"), cliargs.question_formats
    )
    p.add_argument("--corpus", default=None, help="corpus file (default: corpus.json or <stem>_corpus.json beside it)")
    p.add_argument("--index", default=None, help="index directory to use or build (default: a cache per corpus)")
    cliargs.add_embedding(p)
    cliargs.listed(
        p.add_argument("--graphs", default=None, help="comma-separated graphs, e.g. arag,naive_rag,corag"),
        cliargs.graph_names,
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
    cliargs.add_model_choice(
        p, "offline or an OpenAI-compatible model name", "OpenAI-compatible server URL for the model and judge"
    )
    p.add_argument("--judge", default=None, help="LLM judge model for LLM-Acc (without one it is reported unavailable)")
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument("--workers", type=int, default=1, help="questions run concurrently (default 1)")
    p.add_argument("--max-steps", default=None, help="step caps to sweep, e.g. 5,10,15,20 (graphs with a step cap)")
    p.add_argument("--top-k", type=int, default=5, help="chunks per search, 1 to 20 (default 5, as in the paper)")
    cliargs.add_model_limits(p, judge=True)
    p.add_argument("--out", default=None, help="output directory (default runs/<dataset>-<model>); rerun to resume")
    p.add_argument("--no-upload", action="store_true", help="stay local even when a LangSmith key is set")
    cliargs.add_profile(
        p,
        "defaults of the evaluation: package, or paper (the papers' index, step cap, loop rule and judge; "
        "docs/guide/reproducing.md lists them; a flag or --set wins)",
    )
    cliargs.add_settings(
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
    cliargs.listed(p.add_argument("table", help="which table"), cliargs.table_names)
    p.add_argument("--dataset", required=True, help="questions file (HotpotQA, 2Wiki, MuSiQue or A-RAG format)")
    p.add_argument("--out", required=True, help="output directory (an arag eval --out: rerun to resume)")
    cliargs.listed(
        p.add_argument("--format", default=None, help="question format (default: detect)"), cliargs.question_formats
    )
    p.add_argument("--corpus", default=None, help="corpus file (default: corpus.json or <stem>_corpus.json beside it)")
    p.add_argument("--index", default=None, help="index directory built with --profile paper, or where to build one")
    cliargs.add_model_choice(
        p, "offline or an OpenAI-compatible model name", "OpenAI-compatible server URL for the model and judge"
    )
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
    cliargs.add_embedding(p)  # aragog-embeddings compares it with the packaged encoder
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


def add_commands(sub: Any, common: dict[str, Any]) -> None:
    """``arag eval``, ``reproduce`` and ``report``: their arguments."""
    for add in (_eval_command, _reproduce_command, _report_command):
        add(sub, common)
