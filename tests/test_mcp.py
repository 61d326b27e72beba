"""The retrieval tools over MCP (``arag mcp``) and as a LangChain toolkit (issue 25, item 7).

The server runs as the user would start it (``arag mcp`` in a subprocess: stdio, and streamable
HTTP on 127.0.0.1) and is driven by the official SDK's client and by ``langchain-mcp-adapters``
inside ``langchain.agents.create_agent`` with a scripted chat model. Each MCP session has its own
read set: a chunk sent once in a session is a one-line notice the second time, and a new session
starts with nothing read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters  # the dev extra holds mcp and langchain-mcp-adapters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.tools.toolkit import ALL_TOOLS, AragToolkit, create_retrieval_tools
from tests.cli_run import assert_one_error_line, run_cli
from tests.scripted import ScriptedChatModel, calls, tool_call

REPO = Path(__file__).resolve().parents[1]
ALREADY_READ = "already read"
STARTUP_SECONDS = 240  # a loaded 2-core machine imports the package and loads the index slowly


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _mcp_argv(index: HierarchicalIndex, *extra: str) -> list[str]:
    return [sys.executable, "-m", "arag_graph.cli.main", "mcp", "--index", str(index.path), *extra]


# ---------------------------------------------------------------------------------------------
# stdio: the client starts the server


def test_stdio_serves_the_three_tools_with_the_tools_own_coercion(sample_index: HierarchicalIndex) -> None:
    argv = _mcp_argv(sample_index)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ), cwd=str(REPO))

    async def session() -> dict[str, Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            listed = await client.list_tools()
            return {
                "tools": {t.name: t.inputSchema for t in listed.tools},
                # A plain string for the keyword list and top_k far out of range, as models write them.
                "search": await client.call_tool("keyword_search", {"keywords": "Maximum Overdrive", "top_k": 0}),
                "first": await client.call_tool("chunk_read", {"chunk_ids": 0}),
                "again": await client.call_tool("chunk_read", {"chunk_ids": ["0"]}),
                "bad": await client.call_tool("chunk_read", {"ids": ["0"]}),
            }

    got = asyncio.run(asyncio.wait_for(session(), STARTUP_SECONDS))
    assert list(got["tools"]) == list(ALL_TOOLS)
    assert "runtime" not in str(got["tools"])  # the injected argument stays hidden, as from models
    assert got["tools"]["keyword_search"]["properties"]["keywords"]["type"] == "array"
    search = got["search"]
    assert not search.isError
    assert _text(search).startswith("keyword_search(['Maximum Overdrive']) found 1 chunk(s)")  # top_k 0 -> 1
    assert search.structuredContent["chunk_ids"] == ["0"]
    chunk = sample_index.get_chunk("0")
    assert chunk is not None and chunk.text in _text(got["first"])
    assert got["first"].structuredContent["read"] == ["0"]
    assert ALREADY_READ in _text(got["again"]) and chunk.text not in _text(got["again"])
    assert got["bad"].isError and "Call it like chunk_read(chunk_ids=" in _text(got["bad"])


# ---------------------------------------------------------------------------------------------
# Streamable HTTP on 127.0.0.1


@pytest.fixture(scope="module")
def http_server(sample_index: HierarchicalIndex) -> Iterator[str]:
    """``arag mcp --transport http --port 0`` as a subprocess; yields the URL it announces."""
    proc = subprocess.Popen(
        _mcp_argv(sample_index, "--transport", "http", "--port", "0"),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # blocks until the server listens (or exits)
        match = re.search(r"serving on (http://\S+)", line)
        assert match, f"no URL announced: {line!r}"
        yield match.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_http_binds_loopback_and_keeps_one_read_set_per_session(
    http_server: str, sample_index: HierarchicalIndex
) -> None:
    assert http_server.startswith("http://127.0.0.1:") and http_server.endswith("/mcp")
    chunk = sample_index.get_chunk("0")
    assert chunk is not None

    async def read_twice() -> tuple[str, str]:
        async with streamable_http_client(http_server) as (read, write, _), ClientSession(read, write) as client:
            await client.initialize()
            first = await client.call_tool("chunk_read", {"chunk_ids": ["0"]})
            again = await client.call_tool("chunk_read", {"chunk_ids": "0", "adjacent": "false"})
            return _text(first), _text(again)

    async def two_sessions() -> list[tuple[str, str]]:
        return [await read_twice(), await read_twice()]

    for first, again in asyncio.run(asyncio.wait_for(two_sessions(), 120)):
        assert chunk.text in first  # a new session has read nothing, whatever another session read
        assert ALREADY_READ in again and chunk.text not in again


_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_http_sessions_are_capped_and_expire_when_idle(sample_index: HierarchicalIndex) -> None:
    """Clients that initialise and leave without DELETE (the probe's 1,500) cannot hold sessions forever:
    past ``--max-sessions`` a new one is refused (503), and after ``--session-idle`` seconds without a
    request the idle ones are closed (their IDs answer 404) and new clients are admitted again.
    ``bench/bench_mcp_sessions.py`` measures the memory of 1,500 such clients."""
    import time

    import httpx

    argv = _mcp_argv(sample_index, "--transport", "http", "--port", "0", "--max-sessions", "3", "--session-idle", "2")
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"serving on (http://\S+)", line)
        assert match, f"no URL announced: {line!r}"
        url = match.group(1)
        with httpx.Client(timeout=60) as client:
            opened = [client.post(url, json=_INITIALIZE, headers=_HEADERS) for _ in range(3)]
            assert [r.status_code for r in opened] == [200, 200, 200], [r.text for r in opened]
            ids = [r.headers["mcp-session-id"] for r in opened]
            full = client.post(url, json=_INITIALIZE, headers=_HEADERS)
            assert full.status_code == 503 and "Too many open sessions" in full.text, full.text
            time.sleep(4)  # past the idle time: nothing was in flight
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            gone = client.post(url, json=ping, headers={**_HEADERS, "mcp-session-id": ids[0]})
            assert gone.status_code == 404, gone.text
            again = [client.post(url, json=_INITIALIZE, headers=_HEADERS) for _ in range(3)]
            assert [r.status_code for r in again] == [200, 200, 200], [r.text for r in again]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _serving(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port in a thread; yields its ``/mcp`` URL."""
    import threading

    import uvicorn

    from arag_graph.tools.mcp_server import listening_socket

    sock = listening_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        thread.join(30)


def test_by_default_a_hundred_http_sessions_are_open_at_most(sample_index: HierarchicalIndex) -> None:
    """The SDK's own bound (10,000 sessions, 30 minutes idle) let the probe's 1,500 clients that never
    sent DELETE hold 200 MB for good: by default 100 sessions are open at once, the 101st client is
    answered 503, and one that ends its session makes room for the next."""
    import httpx

    from arag_graph.tools.mcp_server import RetrievalToolServer, http_app, open_sessions

    app = http_app(RetrievalToolServer(sample_index).mcp_server())
    with _serving(app) as url, httpx.Client(timeout=60) as client:
        opened = [client.post(url, json=_INITIALIZE, headers=_HEADERS) for _ in range(100)]
        assert {r.status_code for r in opened} == {200}
        assert open_sessions(app) == 100
        full = client.post(url, json=_INITIALIZE, headers=_HEADERS)
        assert full.status_code == 503 and "Too many open sessions" in full.text, full.text
        assert open_sessions(app) == 100
        ended = client.delete(url, headers={**_HEADERS, "mcp-session-id": opened[0].headers["mcp-session-id"]})
        assert ended.status_code == 200, ended.text
        assert client.post(url, json=_INITIALIZE, headers=_HEADERS).status_code == 200
        assert open_sessions(app) == 100


def test_two_hundred_idle_http_sessions_are_closed_with_their_read_sets(sample_index: HierarchicalIndex) -> None:
    """200 clients each initialise, read a chunk and leave without DELETE: once idle for
    ``idle_seconds`` every session is closed (none is counted open, an old ID answers 404) and the
    read sets the server kept for them are released too."""
    import gc
    import time

    import httpx

    from arag_graph.tools.mcp_server import RetrievalToolServer, SessionLimits, http_app, open_sessions

    tools = RetrievalToolServer(sample_index)
    app = http_app(tools.mcp_server(), sessions=SessionLimits(max_sessions=1000, idle_seconds=2))
    read = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    read["params"] = {"name": "chunk_read", "arguments": {"chunk_ids": ["0"]}}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    with _serving(app) as url, httpx.Client(timeout=60) as client:
        ids = []
        for _ in range(200):
            opened = client.post(url, json=_INITIALIZE, headers=_HEADERS)
            assert opened.status_code == 200, opened.text
            session = {**_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
            assert client.post(url, json=initialized, headers=session).status_code == 202
            answer = client.post(url, json=read, headers=session)
            assert answer.status_code == 200 and '"isError":false' in answer.text, answer.text
            ids.append(session["mcp-session-id"])
        assert tools._sessions, "no read set was kept: the test would show nothing"
        deadline = time.monotonic() + 90  # a generous bound on a loaded machine, not a timing claim
        while open_sessions(app) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert open_sessions(app) == 0
        gone = client.post(
            url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers={**_HEADERS, "mcp-session-id": ids[-1]}
        )
        assert gone.status_code == 404, gone.text
        gc.collect()
        assert len(tools._sessions) == 0


def test_the_http_app_guards_against_rebinding_on_loopback_only(sample_index: HierarchicalIndex) -> None:
    """In process, so that mutation testing sees it (the test above starts a server process): on a
    loopback address a foreign Host or Origin is refused, every loopback spelling is accepted; on
    another address (behind the operator's proxy) there is no such check."""
    import httpx

    from arag_graph.tools.mcp_server import RetrievalToolServer, http_app

    server = RetrievalToolServer(sample_index).mcp_server()
    loopback, wide = http_app(server), http_app(server, host="0.0.0.0")
    with _serving(loopback) as url, httpx.Client(timeout=60) as client:
        port = url.split(":")[2].split("/")[0]
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            for origin in ("http://127.0.0.1:1", "http://localhost:2", "http://[::1]:3"):
                answer = client.post(url, json=_INITIALIZE, headers={**_HEADERS, "Host": host, "Origin": origin})
                assert answer.status_code == 200, (host, origin, answer.text)
        foreign_host = client.post(url, json=_INITIALIZE, headers={**_HEADERS, "Host": "attacker.example"})
        assert foreign_host.status_code in (400, 421), foreign_host.text
        foreign_origin = client.post(url, json=_INITIALIZE, headers={**_HEADERS, "Origin": "http://attacker.example"})
        assert foreign_origin.status_code in (400, 403), foreign_origin.text
    with _serving(wide) as url, httpx.Client(timeout=60) as client:
        headers = {**_HEADERS, "Host": "attacker.example", "Origin": "http://attacker.example"}
        assert client.post(url, json=_INITIALIZE, headers=headers).status_code == 200


def test_memory_is_released_once_after_sessions_end_and_only_then() -> None:
    """Issue 38: after 1,500 idle sessions expired the server kept its peak memory. The watcher gives
    memory back once the open sessions fell and the fall settled: not while sessions only open or
    stay, once per wave of endings (not once per session), and again after a later wave."""
    from arag_graph.tools.mcp_server import MemoryReturn

    calls: list[int] = []
    memory = MemoryReturn(release=lambda: calls.append(1))
    polls = [0, 3, 5, 5, 4, 2, 0, 0, 0, 6, 6, 1, 1, 1]
    released = [memory.observe(n) for n in polls]
    #         0      3      5      5      4      2      0      0     0      6      6      1      1     1
    assert released == [False, False, False, False, False, False, False, True, False, False, False, False, True, False]
    assert len(calls) == memory.released == 2


def test_malloc_trim_is_glibcs_and_nothing_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trim is glibc's function, called with 0; on another C library (musl) or system there is
    nothing to call, and releasing memory there only collects garbage."""
    import platform

    from arag_graph.tools import mcp_server

    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        trim = mcp_server.malloc_trim()
        assert trim is not None and trim() in (0, 1)  # 1: memory was given back, 0: there was none to give
    monkeypatch.setattr(platform, "libc_ver", lambda *a, **k: ("musl", "1.2"))
    assert mcp_server.malloc_trim() is None
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(platform, "libc_ver", lambda *a, **k: ("glibc", "2.36"))
    assert mcp_server.malloc_trim() is None
    collected: list[int] = []
    monkeypatch.setattr(mcp_server.gc, "collect", lambda *a: collected.append(1) or 0)
    mcp_server.release_memory()  # no trim here: only the collection, no error
    assert collected == [1]
    trims: list[int] = []
    monkeypatch.setattr(mcp_server, "malloc_trim", lambda: lambda: trims.append(1))
    mcp_server.release_memory()  # where there is a trim, the release calls it after the collection
    assert collected == [1, 1] and trims == [1]


def test_expired_http_sessions_release_memory(sample_index: HierarchicalIndex) -> None:
    """Sessions that expire when idle make the served app release memory (the hook that gives glibc's
    free arenas back to the OS); opening them did not."""
    import time

    import httpx

    from arag_graph.tools.mcp_server import MemoryReturn, RetrievalToolServer, SessionLimits, http_app, open_sessions

    calls: list[int] = []
    memory = MemoryReturn(release=lambda: calls.append(1))
    limits = SessionLimits(max_sessions=10, idle_seconds=1)
    app = http_app(RetrievalToolServer(sample_index).mcp_server(), sessions=limits, memory=memory, poll_seconds=0.1)
    with _serving(app) as url, httpx.Client(timeout=60) as client:
        opened = [client.post(url, json=_INITIALIZE, headers=_HEADERS) for _ in range(3)]
        assert {r.status_code for r in opened} == {200}
        assert calls == []  # sessions opening release nothing
        deadline = time.monotonic() + 90  # a generous bound on a loaded machine, not a timing claim
        while (open_sessions(app) or not calls) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert open_sessions(app) == 0
        assert calls, "the sessions expired but no memory was released"


def test_the_announced_socket_already_accepts_connections() -> None:
    """The URL is printed before uvicorn starts; a client connecting at once must queue, not be refused.

    (CI saw "All connection attempts failed" when the socket was only bound when announced.)
    """
    import socket

    from arag_graph.tools.mcp_server import listening_socket

    server = listening_socket("127.0.0.1", 0)
    try:
        with socket.create_connection(server.getsockname(), timeout=5):
            pass  # refused (ConnectionRefusedError) when the socket is bound but not listening
    finally:
        server.close()


def test_http_refuses_a_foreign_host_header(http_server: str) -> None:
    """DNS rebinding: a web page's request to a loopback server under another name is refused."""
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Host": "attacker.example", "Accept": "application/json, text/event-stream"}
    response = httpx.post(http_server, json=body, headers=headers, timeout=30)
    assert response.status_code in (400, 421), response.text


def test_langchain_mcp_adapters_load_the_tools_into_create_agent(
    http_server: str, sample_index: HierarchicalIndex
) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import ToolMessage
    from langchain_mcp_adapters.tools import load_mcp_tools

    model = ScriptedChatModel(
        messages=iter(
            [
                calls(tool_call("semantic_search", query="who directed Maximum Overdrive", top_k=2)),
                calls(tool_call("chunk_read", chunk_ids=["0"])),
                calls(tool_call("chunk_read", chunk_ids=["0"])),
                calls(content="Stephen King [0]"),
            ]
        )
    )

    async def run() -> dict[str, Any]:
        async with streamable_http_client(http_server) as (read, write, _), ClientSession(read, write) as client:
            await client.initialize()
            tools = await load_mcp_tools(client)  # one session: the agent's run shares its read set
            agent = create_agent(model, tools)
            return await agent.ainvoke({"messages": [("user", "Who directed Maximum Overdrive?")]})

    out = asyncio.run(asyncio.wait_for(run(), 120))
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.name for m in results] == ["semantic_search", "chunk_read", "chunk_read"]
    assert "found 2 chunk(s)" in results[0].text
    chunk = sample_index.get_chunk("0")
    assert chunk is not None and chunk.text in results[1].text
    assert ALREADY_READ in results[2].text and chunk.text not in results[2].text
    assert out["messages"][-1].text == "Stephen King [0]"


# ---------------------------------------------------------------------------------------------
# In process: the operator's caps and the command's own errors


def test_arguments_over_the_operators_cap_are_refused(
    sample_index: HierarchicalIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arag_graph.tools.mcp_server import RetrievalToolServer

    monkeypatch.setenv("ARAG_MAX_QUESTION_CHARS", "50")
    server = RetrievalToolServer(sample_index)
    read: set[str] = set()
    refused = server.call("semantic_search", {"query": "x" * 200}, read)
    assert refused.status == "error" and "ARAG_MAX_QUESTION_CHARS" in refused.text
    unknown = server.call("delete_everything", {}, read)
    assert unknown.status == "error" and "keyword_search, semantic_search, chunk_read" in unknown.text
    assert read == set()
    server.call("chunk_read", {"chunk_ids": ["0", "1"]}, read)
    assert read == {"0", "1"}


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["mcp", "--port", "70000"], "--port 70000 is out of range"),
        (["mcp", "--host", " "], "--host is empty"),
        (["mcp", "--tool-prefix", "a b"], "--tool-prefix 'a b' must be at most 64 letters, digits"),
        (["mcp", "--max-sessions", "0"], "--max-sessions 0 is out of range"),
        (["mcp", "--session-idle", "0"], "--session-idle 0 is out of range"),
        (["mcp", "--session-idle", "nan"], "--session-idle nan is not a finite number"),
    ],
)
def test_bad_mcp_flags_are_one_line(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_error_line(*run_cli(argv, capsys))
    assert needle in line


# ---------------------------------------------------------------------------------------------
# The toolkit


def test_the_toolkit_gives_the_tools_of_an_index(sample_index: HierarchicalIndex) -> None:
    from langchain_core.tools import BaseToolkit

    toolkit = AragToolkit(index=sample_index)
    assert isinstance(toolkit, BaseToolkit)
    tools = toolkit.get_tools()
    assert [t.name for t in tools] == list(ALL_TOOLS)
    assert [t.description for t in tools] == [t.description for t in create_retrieval_tools(sample_index)]
    by_path = AragToolkit(index=str(sample_index.path), tools=("keyword_search", "semantic_search")).get_tools()
    assert [t.name for t in by_path] == ["keyword_search", "semantic_search"]
    found = by_path[0].invoke({"keywords": ["Maximum Overdrive"], "top_k": 1})
    chunk = sample_index.get_chunk("0")
    assert chunk is not None and chunk.text in found  # whole chunks when chunk_read is left out


# ---------------------------------------------------------------------------------------------
# What each tool declares, the tool prefix, and a quiet normal disconnect (issue 37)


def _in_memory(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    """List the tools and make ``calls`` with the SDK's client over in-memory streams."""
    from mcp.shared.memory import create_connected_server_and_client_session

    async def run() -> tuple[Any, list[Any]]:
        async with create_connected_server_and_client_session(server) as client:
            listed = await client.list_tools()
            return listed, [await client.call_tool(name, args) for name, args in calls]

    return asyncio.run(asyncio.wait_for(run(), 120))


def test_each_tool_declares_its_output_schema_and_annotations(sample_index: HierarchicalIndex) -> None:
    import jsonschema

    from arag_graph.tools.mcp_server import RetrievalToolServer

    server = RetrievalToolServer(sample_index).mcp_server()
    calls = [
        ("keyword_search", {"keywords": "Maximum Overdrive"}),
        ("semantic_search", {"query": "who directed Maximum Overdrive", "top_k": 2}),
        ("chunk_read", {"chunk_ids": ["0"]}),
        ("chunk_read", {"ids": ["0"]}),  # refused before the tool runs: still structured
    ]
    listed, results = _in_memory(server, calls)
    assert [t.name for t in listed.tools] == list(ALL_TOOLS)
    for tool in listed.tools:
        assert tool.outputSchema is not None
        assert set(tool.outputSchema["required"]) == {"tokens", "chunk_ids", "read", "error"}
        assert tool.annotations is not None
        assert tool.annotations.readOnlyHint is True and tool.annotations.idempotentHint is True
        assert tool.annotations.destructiveHint is False and tool.annotations.openWorldHint is False
    schema = listed.tools[0].outputSchema
    for result in results:  # the client checks non-error results itself; errors are checked here
        jsonschema.validate(result.structuredContent, schema)
    search, semantic, read, refused = results
    assert not search.isError and search.structuredContent["chunk_ids"][0] == "0"
    assert len(semantic.structuredContent["chunk_ids"]) == 2 and semantic.structuredContent["tokens"] > 0
    assert read.structuredContent["read"] == ["0"]
    assert refused.isError and refused.structuredContent["error"] is True


def test_a_tool_prefix_names_every_tool(sample_index: HierarchicalIndex) -> None:
    from arag_graph.core.errors import AragError
    from arag_graph.tools.mcp_server import RetrievalToolServer

    server = RetrievalToolServer(sample_index, prefix="papers_")
    calls = [("papers_chunk_read", {"chunk_ids": ["0"]}), ("chunk_read", {"chunk_ids": ["0"]})]
    listed, (read, unprefixed) = _in_memory(server.mcp_server(), calls)
    assert [t.name for t in listed.tools] == [f"papers_{name}" for name in ALL_TOOLS]
    descriptions = " ".join(t.description or "" for t in listed.tools)
    assert "papers_chunk_read" in descriptions and not re.search(r"(?<!papers_)\bchunk_read\b", descriptions)
    chunk = sample_index.get_chunk("0")
    assert chunk is not None and not read.isError and chunk.text in _text(read)
    assert unprefixed.isError and "the tools are papers_keyword_search, papers_semantic_search" in _text(unprefixed)
    with pytest.raises(AragError, match=r"tool prefix 'a b' must be at most 64 letters") as caught:
        RetrievalToolServer(sample_index, prefix="a b")
    assert "\n" not in str(caught.value)


def test_a_normal_disconnect_logs_no_error(sample_index: HierarchicalIndex, caplog: pytest.LogCaptureFixture) -> None:
    """The SDK logged ``Error in standalone SSE writer`` (``arag: error: ...`` on the server's stderr)
    each time an HTTP client ended its session normally."""
    import logging
    import threading
    import time

    import uvicorn

    from arag_graph.tools.mcp_server import RetrievalToolServer, http_app, listening_socket

    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    app = http_app(RetrievalToolServer(sample_index).mcp_server())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()

    async def session() -> bool:
        url = f"http://127.0.0.1:{port}/mcp"
        async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as client:
            await client.initialize()
            return (await client.call_tool("keyword_search", {"keywords": ["Maximum Overdrive"]})).isError

    try:
        with caplog.at_level(logging.WARNING):
            assert asyncio.run(asyncio.wait_for(session(), 120)) is False
            time.sleep(1.0)  # the server closes the session's streams after the client has gone
    finally:
        server.should_exit = True
        thread.join(30)
    errors = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors


def test_arag_mcp_passes_its_tool_prefix(
    sample_index: HierarchicalIndex, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``arag mcp --tool-prefix papers_`` serves the prefixed tools (the server itself is tested above)."""
    import arag_graph.tools.mcp_server as mcp_server

    served: dict[str, Any] = {}
    monkeypatch.setattr(mcp_server, "run_mcp", lambda index, **how: served.update(how, index=index))
    code, _, err = run_cli(["mcp", "--index", str(sample_index.path), "--tool-prefix", "papers_"], capsys)
    assert code == 0, err
    assert served["tool_prefix"] == "papers_" and served["transport"] == "stdio"
