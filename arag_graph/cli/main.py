"""The ``arag`` command line: build an index, look at retrieval, ask questions, run the demo.

Every user error ends in one line on stderr (``arag: error: ...``) and exit status 2; results go to
stdout, and every command's ``--json`` output is exactly one JSON object. Log records go to stderr
as ``arag: warning: ...`` lines, at the level ``-v``/``-q`` or ``$ARAG_LOG_LEVEL`` chooses
(:mod:`arag_graph.cli.logs`); ``-q`` also turns progress bars off.

Each command group is a module of its own that adds its subcommands (``add_commands``) and runs
them (``cmd_*``): :mod:`~arag_graph.cli.index_cmd` (index, search, read, verify),
:mod:`~arag_graph.cli.ask`, :mod:`~arag_graph.cli.eval_cmd` (eval, reproduce, report),
:mod:`~arag_graph.cli.sample_chains`, :mod:`~arag_graph.cli.serve` (mcp) and
:mod:`~arag_graph.cli.demo`. Flags that several commands share are in :mod:`~arag_graph.cli.args`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from arag_graph.cli import args as cliargs
from arag_graph.cli import ask, demo, eval_cmd, index_cmd, logs, sample_chains, serve
from arag_graph.core.errors import AragError

EXIT_USAGE = 2

COMMAND_GROUPS = (index_cmd, ask, eval_cmd, sample_chains, serve, demo)
"""The command modules, in the order ``arag --help`` lists their commands."""


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line too (exit status 2, as argparse does)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def _add_version(parser: argparse.ArgumentParser) -> None:
    """``arag --version``: the package's one version string (``arag_graph.__version__``, which the
    wheel's metadata is also built from), so a bug report names the code that ran."""
    from arag_graph import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")


def build_parser() -> argparse.ArgumentParser:
    """The ``arag`` command line: each module of :data:`COMMAND_GROUPS` adds its subcommands."""
    parser = _Parser(
        prog="arag",
        description="Agentic RAG with hierarchical retrieval tools (A-RAG).",
        formatter_class=cliargs.HelpFormatter,
    )
    _add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    common = {"parents": [cliargs.output_flags()], "formatter_class": cliargs.HelpFormatter}
    for group in COMMAND_GROUPS:
        group.add_commands(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.command_line = list(sys.argv[1:] if argv is None else argv)
    try:
        level = logs.level_of(args.verbose, args.quiet, logs.env_level())
        with logs.cli_logging(level, args.verbose):
            cliargs.apply_device(args)
            return int(args.func(args) or 0)
    except AragError as exc:
        print(f"arag: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("arag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
