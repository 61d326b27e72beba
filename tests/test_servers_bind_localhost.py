"""Servers bind to localhost unless told otherwise.

The package itself starts no server but ``arag mcp --transport http`` (127.0.0.1 by default, tested in
tests/test_mcp.py): Studio is ``langgraph dev`` (checked in
tests/slow/test_langgraph_dev.py::test_server_binds_to_localhost_only, started as the README says,
without ``--host``), and Chroma servers are the user's own. These tests keep it that way: a source
scan fails when code that listens on a socket appears in the package (then it needs a bind test of
its own), the documented commands never pass a public address, and running every graph and the CLI
leaves this process with no socket listening beyond loopback.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any

import pytest

from arag_graph.cli.main import main as cli_main
from arag_graph.registry import build_graph, graph_names
from tests.reliability import record
from tests.slow.devserver import LOOPBACK, listening_addresses

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("arag_graph", "graphs", "evaluators")
# Calls and names that start a listening server.
LISTENING = {
    "bind",
    "listen",
    "serve_forever",
    "start_server",
    "create_server",
    "HTTPServer",
    "ThreadingHTTPServer",
    "TCPServer",
    "make_server",
    "run_simple",
}
_PUBLIC = re.compile(r"0\.0\.0\.0|--host[ =](?!127\.0\.0\.1|localhost)\S+|\[::\]")


SERVER_MODULES = {"http.server", "socketserver", "uvicorn", "hypercorn", "aiohttp.web", "wsgiref.simple_server"}


def _listening_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if any(m in SERVER_MODULES for m in modules):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)[:80]}")
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            # .bind(...) on a chat model binds tools, not sockets: only socket-like receivers count.
            if name == "bind" and isinstance(func, ast.Attribute) and "sock" not in ast.unparse(func.value).lower():
                continue
            if name in LISTENING or (name == "run" and "uvicorn" in ast.unparse(func)):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)[:80]}")
    return found


# The package's own servers: each module, and the test that shows it binds to loopback by default.
SERVERS = {
    "arag_graph/tools/mcp_server.py": "tests/test_mcp.py::test_http_binds_loopback_and_keeps_one_read_set_per_session"
}


def test_the_package_starts_no_server() -> None:
    files = [p for package in PACKAGES for p in (REPO / package).rglob("*.py")]
    assert len(files) > 20
    found = [hit for path in files if str(path.relative_to(REPO)) not in SERVERS for hit in _listening_calls(path)]
    assert not found, f"code that listens on a socket (give it a localhost default and a bind test): {found}"
    for module, bind_test in SERVERS.items():
        assert _listening_calls(REPO / module), f"{module} no longer listens: take it off SERVERS"
        test_file, test_name = bind_test.split("::")
        assert f"def {test_name}(" in (REPO / test_file).read_text(encoding="utf-8"), f"{bind_test} is missing"
    record("servers", "source scan", inputs=len(files))


def test_documented_commands_use_no_public_address() -> None:
    documents = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "langgraph.json", *(REPO / "scripts").iterdir()]
    hits = [
        f"{path.name}: {line.strip()}"
        for path in documents
        if path.is_file()
        for line in path.read_text(encoding="utf-8").splitlines()
        if _PUBLIC.search(line)
    ]
    assert not hits, hits


def _own_listening_addresses() -> set[str]:
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return listening_addresses(inodes=inodes)


def test_running_every_graph_and_the_cli_opens_no_public_socket(
    sample_index: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    if not Path("/proc/self/fd").is_dir() or not Path("/proc/net/tcp").exists():
        pytest.skip("needs Linux /proc to list this process's sockets")
    for graph in graph_names():
        out = build_graph(graph, index=sample_index, model="offline").invoke({"question": "Who directed Sinister?"})
        assert out.get("error") is None
    code = cli_main(["ask", "Who directed Sinister?", "--index", str(sample_index.path), "--model", "offline"])
    capsys.readouterr()
    assert code == 0
    addresses = _own_listening_addresses()
    assert addresses <= LOOPBACK, f"listening beyond loopback: {addresses}"
    record("servers", "runtime sockets after every graph and arag ask", trials=len(graph_names()) + 1)
