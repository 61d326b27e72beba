"""``arag mcp``: the three retrieval tools served over MCP (stdio or streamable HTTP)."""

from __future__ import annotations

import argparse
from typing import Any

from arag_graph.cli import args as cliargs
from arag_graph.cli.resolve import open_index
from arag_graph.core.errors import AragError


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the retrieval tools over MCP until the client (stdio) or a signal (http) ends it."""
    from arag_graph.tools.mcp_server import SessionLimits, check_tool_prefix, run_mcp

    cliargs.require_utf8(cliargs.flags(args, "index", "host", "tool_prefix"))
    cliargs.whole_number(args.port, "--port", 0, 65535, example="--port 8765")
    cliargs.whole_number(args.max_sessions, "--max-sessions", 1, 100_000, example="--max-sessions 100")
    cliargs.number(args.session_idle, "--session-idle", 0, 86_400, above_low=True, example="--session-idle 300")
    host = (args.host or "").strip()
    if not host:
        raise AragError("--host is empty; give an address to listen on, e.g. --host 127.0.0.1")
    prefix = check_tool_prefix(args.tool_prefix, "--tool-prefix")  # before the index is loaded
    index = open_index(args.index, quiet=True)  # stdout is the protocol's under stdio: nothing else goes there
    given = {"max_sessions": args.max_sessions, "idle_seconds": args.session_idle}
    sessions = SessionLimits(**{k: v for k, v in given.items() if v is not None})  # the rest: its defaults
    run_mcp(index, transport=args.transport, host=host, port=args.port, tool_prefix=prefix, sessions=sessions)
    return 0


def add_commands(sub: Any, common: dict[str, Any]) -> None:
    """``arag mcp``: its arguments."""
    p = sub.add_parser("mcp", help="serve keyword_search, semantic_search and chunk_read over MCP", **common)
    cliargs.add_device(p)
    p.add_argument("--index", default=None, help="index directory (default: the bundled sample index)")
    p.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (the client starts this command) or http (streamable HTTP at /mcp; default stdio)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on with --transport http (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port for --transport http (default 8765; 0: any free)")
    p.add_argument(
        "--tool-prefix",
        default="",
        help="start every tool's name with this (papers_ -> papers_keyword_search), so that a client of two "
        "servers sees distinct names (default: none)",
    )
    p.add_argument(
        "--max-sessions",
        type=int,
        default=None,
        help="HTTP sessions open at once; one more is refused (503) until one ends (default 100)",
    )
    p.add_argument(
        "--session-idle",
        type=float,
        default=None,
        metavar="SECONDS",
        help="close an HTTP session with no request in flight for this long (default 300)",
    )
    p.set_defaults(func=cmd_mcp)
