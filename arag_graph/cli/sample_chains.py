"""``arag sample-chains``: CoRAG's rejection sampling, kept chains appended to a JSON Lines file."""

from __future__ import annotations

import argparse
from typing import Any

from arag_graph.cli import args as cliargs
from arag_graph.cli.output import print_json
from arag_graph.cli.resolve import announce, check_model_spec, choose_model_spec, open_index
from arag_graph.core.errors import AragError


def cmd_sample_chains(args: argparse.Namespace) -> int:
    """CoRAG's rejection sampling: N chains per question, keep those whose answer matches the gold."""
    from arag_graph.corag.rejection_sampling import check_settings, open_outputs, rejection_sample
    from arag_graph.qa.datasets import load_questions

    cliargs.require_utf8(cliargs.flags(args, "dataset", "format", "index", "out", "model", "base_url"))
    if args.limit is not None and args.limit < 1:
        raise AragError(f"--limit {args.limit} is not a positive number of questions")
    cliargs.whole_number(args.workers, "--workers", 1, example="--workers 4")
    questions = load_questions(args.dataset, args.format)[: args.limit]
    cliargs.check_run_limits(args.max_steps, args.top_k)
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
        print_json(summary)
    else:
        print(
            f"kept {stats.kept} of {stats.chains} chains ({stats.acceptance_rate:.0%}); "
            f"{stats.skipped} question(s) done earlier; {stats.failed} failed -> {args.out}"
        )
        if not stats.temperature_applied:
            print("note: this model samples deterministically (no temperature), so its chains repeat")
    return 0


def add_commands(sub: Any, common: dict[str, Any]) -> None:
    """``arag sample-chains``: its arguments."""
    p = sub.add_parser(
        "sample-chains", help="CoRAG rejection sampling: keep sampled chains whose answer is correct (JSONL)", **common
    )
    p.add_argument("--dataset", required=True, help="questions file (HotpotQA, 2Wiki, MuSiQue or A-RAG format)")
    cliargs.listed(
        p.add_argument("--format", default=None, help="question format (default: detect)"), cliargs.question_formats
    )
    p.add_argument("--index", default=None, help="index directory (default: the bundled sample index)")
    p.add_argument("--out", required=True, help="JSON Lines file the kept chains are appended to (resumable)")
    cliargs.add_model_choice(p, "an OpenAI-compatible model name, or offline", "OpenAI-compatible server URL")
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
