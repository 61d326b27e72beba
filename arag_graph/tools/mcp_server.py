"""The retrieval tools served over MCP (Model Context Protocol), for agents outside LangChain.

``arag mcp --index DIR`` serves ``keyword_search``, ``semantic_search`` and ``chunk_read`` with the
official ``mcp`` SDK (the ``mcp`` extra), over stdio (a client starts the server as a subprocess) or
streamable HTTP. It is a transport of the LangChain tools in :mod:`arag_graph.tools.toolkit`, not a
second implementation: each call goes through the same tool, so its arguments are coerced and
clamped, and its mistakes answered, exactly as a model's are in our graphs.

A-RAG's read set (C_read) is the one thing that differs. In a graph the tools derive it from the
run's conversation; an MCP server never sees the client's conversation, so each MCP session keeps
the set of chunks whose text it was sent and passes it to the tool as chunks read earlier
(:attr:`~arag_graph.tools.toolkit.ToolSettings.also_read`). Two sessions never share it; a new
session starts with nothing read.

The operator's rules for served runs hold (:mod:`arag_graph.run.policy`): the index is the
operator's (given on the command line, never chosen by a client, whose only inputs are the tool
arguments), a call's arguments are refused when longer than a question may be
(``ARAG_MAX_QUESTION_CHARS``, :func:`arag_graph.core.limits.max_question_chars`), and the HTTP server
binds to 127.0.0.1 unless told otherwise, with the SDK's DNS-rebinding protection (Host and Origin
checked) on a loopback address.

HTTP sessions are bounded (:class:`SessionLimits`): at most ``max_sessions`` open at once (a client
that would open one more is answered 503 until one ends), and a session with no request in flight
for ``idle_seconds`` is closed, its read set with it (its ID then answers 404 and the client opens a
new one). Clients that initialise and leave without ``DELETE`` would otherwise hold their sessions,
and the memory behind them, for the server's lifetime (issue 38). Once sessions have ended, the
memory they held is handed back to the operating system where the C library keeps it
(:class:`MemoryReturn`, glibc's ``malloc_trim``), so the server's resident size falls back towards
its start instead of staying at the peak of the busiest moment.

Each tool declares what it returns (``outputSchema``: the call's ``structuredContent``, the same
facts the tool's artifact gives a graph) and how it behaves (``annotations``: it reads the index and
changes nothing, so a client may call it without asking and retry it). ``tool_prefix`` names the
tools ``<prefix>keyword_search`` and so on, so that a client connected to two servers (two indexes)
sees distinct names; their descriptions and the server's instructions name them so too.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import json
import logging
import platform
import re
import socket
import sys
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from arag_graph.core.errors import AragError
from arag_graph.core.limits import max_question_chars
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.tools.toolkit import ALL_TOOLS, ToolSettings, retrieval_tool

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from starlette.applications import Starlette


@dataclass(frozen=True)
class SessionLimits:
    """Bounds on the streamable HTTP sessions of ``arag mcp --transport http`` (the SDK enforces them)."""

    max_sessions: int = 100
    """Sessions open at once; one more is refused (503) until another ends or expires."""
    idle_seconds: float = 300.0
    """A session with no request in flight (no call served, no open stream) for this long is closed."""


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
MCP_PATH = "/mcp"
"""Where the streamable HTTP endpoint lives (the SDK's and most clients' default)."""


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise AragError('serving over MCP needs the mcp package; pip install "arag-graph[mcp]"') from None


@dataclass
class SessionReads:
    """One MCP session's read set, and the lock that keeps its calls from racing on it."""

    read: set[str] = field(default_factory=set)
    lock: anyio.Lock = field(default_factory=anyio.Lock)


class ToolResult(BaseModel):
    """What every tool call returns as ``structuredContent`` (its ``outputSchema``): the facts of the
    tool's artifact, so a client can count and follow what was returned without parsing the text."""

    tokens: int = Field(description="Corpus tokens the call returned (A-RAG's retrieved-tokens measure).", ge=0)
    chunk_ids: list[str] = Field(description="The chunks the call showed, in rank order (searches) or as read.")
    read: list[str] = Field(
        description="The chunks whose full text the call returned (this session's read set grows by them)."
    )
    error: bool = Field(description="True when the call could not do what was asked (the text says why).")


OUTPUT_SCHEMA = ToolResult.model_json_schema()
PREFIX_PATTERN = re.compile(r"[A-Za-z0-9_.-]{0,64}")
"""What a tool-name prefix may hold: MCP tool names are letters, digits, ``_``, ``-`` and ``.``."""


def check_tool_prefix(prefix: str, what: str = "tool prefix") -> str:
    """``prefix`` if tool names may start with it, else the one-line error with an example; ``what``
    names it as the caller gave it (``--tool-prefix`` on the command line)."""
    if not PREFIX_PATTERN.fullmatch(prefix):
        raise AragError(f"{what} {prefix[:80]!r} must be at most 64 letters, digits, '_', '-' or '.' (e.g. 'papers_')")
    return prefix


class RetrievalToolServer:
    """The tools over one index, with a read set per MCP session (see the module docstring)."""

    def __init__(self, index: HierarchicalIndex, *, tools: tuple[str, ...] = ALL_TOOLS, prefix: str = "") -> None:
        unknown = [t for t in tools if t not in ALL_TOOLS]
        if unknown:
            raise AragError(f"unknown tool(s) {unknown}; choose from {list(ALL_TOOLS)}")
        self.index = index
        self.prefix = check_tool_prefix(prefix)
        self.settings = ToolSettings(full_text="chunk_read" not in tools)
        self.tools: dict[str, BaseTool] = {name: retrieval_tool(index, name, self.settings) for name in tools}
        self.names: dict[str, str] = {prefix + name: name for name in tools}
        """The name a client calls -> the tool's own name."""
        self._sessions: weakref.WeakKeyDictionary[Any, SessionReads] = weakref.WeakKeyDictionary()

    def renamed(self, text: str) -> str:
        """``text`` with the tools' names as this server lists them (with its prefix)."""
        if not self.prefix:
            return text
        return re.sub(r"\b(" + "|".join(ALL_TOOLS) + r")\b", lambda m: self.prefix + m.group(1), text)

    def session(self, key: Any) -> SessionReads:
        """The read set of the session ``key`` (the SDK's session object), made on first use."""
        if key not in self._sessions:
            self._sessions[key] = SessionReads()
        return self._sessions[key]

    def call(self, name: str, arguments: Any, read: set[str]) -> ToolMessage:
        """Run tool ``name`` (as listed, prefix included) as a model's call would run, its earlier reads
        given; ``read`` is updated."""
        own = self.names.get(name) if isinstance(name, str) else None
        if own is None:
            return ToolMessage(
                f"unknown tool {str(name)[:100]!r}; the tools are {', '.join(self.names)}",
                tool_call_id="mcp",
                status="error",
            )
        name, tool = own, self.tools[own]
        if not isinstance(arguments, dict):
            arguments = {}
        size = len(json.dumps(arguments, ensure_ascii=False, default=str))
        limit = max_question_chars()
        if limit is not None and size > limit:
            return ToolMessage(
                f"{name}: the arguments are {size:,} characters, over this server's limit of {limit:,} "
                "(ARAG_MAX_QUESTION_CHARS); send shorter ones",
                tool_call_id="mcp",
                status="error",
            )
        if read:
            # The one tool, told what this session has already been sent (as a graph's turn tells it).
            tool = retrieval_tool(self.index, name, dataclasses.replace(self.settings, also_read=frozenset(read)))
        message = tool.invoke({"type": "tool_call", "name": name, "args": arguments, "id": "mcp"})
        assert isinstance(message, ToolMessage)
        artifact = message.artifact if isinstance(message.artifact, dict) else {}
        read.update(str(i) for i in artifact.get("read") or [])
        return message

    def listed(self) -> list[Any]:
        """The tools as MCP lists them: the LangChain tool's name (with the prefix), description and
        argument schema, what a call returns and how the tool behaves."""
        from mcp import types

        # Read-only: a call changes no index or file; the session's read set only spares a client the
        # text of a chunk it was already sent. Idempotent: a repeated call adds nothing to that set.
        behaviour = types.ToolAnnotations(
            readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
        )
        return [
            types.Tool(
                name=self.prefix + tool.name,
                title=tool.name.replace("_", " ").capitalize(),
                description=self.renamed(tool.description),
                inputSchema=_input_schema(tool),
                outputSchema=OUTPUT_SCHEMA,
                annotations=behaviour,
            )
            for tool in self.tools.values()
        ]

    def mcp_server(self, name: str = "arag") -> Server:
        """An MCP server (the SDK's low-level ``Server``) answering with these tools."""
        _require_mcp()
        from mcp import types
        from mcp.server.lowlevel import Server

        server: Server = Server(name, instructions=self.renamed(_INSTRUCTIONS))

        @server.list_tools()
        async def list_tools() -> list[types.Tool]:
            return self.listed()

        # The SDK's JSON-schema check is off: arguments are the tool's to coerce (a string for a list,
        # a float top_k), as they are for a model in our graphs.
        @server.call_tool(validate_input=False)
        async def call_tool(tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
            reads = self.session(server.request_context.session)
            async with reads.lock:
                message = await anyio.to_thread.run_sync(self.call, tool, arguments, reads.read)
            result = structured(message)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=message.text)],
                structuredContent=result.model_dump(),
                isError=message.status == "error" or result.error,
            )

        return server


_INSTRUCTIONS = (
    "Retrieval over one document index: find chunks with keyword_search (exact words) or semantic_search "
    "(meaning), then read the relevant ones in full with chunk_read. A chunk already sent in this session "
    "is not sent again."
)


def structured(message: ToolMessage) -> ToolResult:
    """A tool message's artifact as :class:`ToolResult` (a call refused before the tool ran, for bad
    arguments, has none: an error that returned nothing)."""
    raw = message.artifact if isinstance(message.artifact, dict) else {}
    return ToolResult(
        tokens=int(raw.get("tokens") or 0),
        chunk_ids=[str(i) for i in raw.get("chunk_ids") or []],
        read=[str(i) for i in raw.get("read") or []],
        error=bool(raw.get("error")) or message.status == "error",
    )


def _input_schema(tool: BaseTool) -> dict[str, Any]:
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        return schema
    return schema.model_json_schema()


# ---------------------------------------------------------------------------------------------
# Transports


class _NormalDisconnect(logging.Filter):
    """The SDK logs a client's normal end of session at error level, with a traceback: its standalone
    SSE writer finds its stream closed (``anyio.ClosedResourceError``) when the client disconnects.
    That record is lowered to debug; any other error stays an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.exc_info[0] if record.exc_info else None
        if kind is not None and issubclass(kind, (anyio.ClosedResourceError, anyio.BrokenResourceError)):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            record.exc_info = record.exc_text = None
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def quiet_normal_disconnects() -> None:
    """Install :class:`_NormalDisconnect` on the SDK's streamable HTTP logger (once)."""
    logger = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(f, _NormalDisconnect) for f in logger.filters):
        logger.addFilter(_NormalDisconnect())


async def serve_stdio(server: Server) -> None:
    """Answer one client on stdin/stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)`` as a call, or None where the C library is not glibc.

    Why: glibc's allocator keeps the memory that freed objects leave in its arenas (heap tops that
    other blocks pin, and the per-thread arenas of the SDK's worker threads) for later use, so a
    server whose 1,500 idle sessions have expired keeps its peak resident size (issue 38's probe: 287
    MB grown to 499 MB, unchanged afterwards). ``malloc_trim`` gives the free pages of every arena
    back to the OS. It exists only in glibc: musl, macOS and Windows have no such function (and
    return memory on their own terms), so there nothing is called and nothing changes."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the running process's C library
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


def release_memory() -> None:
    """Collect what ended sessions left in reference cycles, then give free memory back to the OS
    (where :func:`malloc_trim` can; elsewhere only the collection runs)."""
    gc.collect()
    trim = malloc_trim()
    if trim is not None:
        trim()


class MemoryReturn:
    """Calls ``release`` once sessions have ended and the ending has settled.

    Polled with the number of open sessions (:meth:`observe`): a fall marks memory to return; the
    first later poll with no further fall calls ``release`` once (the sessions' tasks have wound down
    by then, and a wave of 1,500 expiring sessions costs one call, not 1,500). Counting sessions
    rather than hooking the SDK's private discard method works whatever ended them: ``DELETE``, idle
    expiry or a crash."""

    def __init__(self, release: Callable[[], object] = release_memory) -> None:
        self.release = release
        self._last: int | None = None
        self._pending = False
        self.released = 0
        """How many times ``release`` was called."""

    def observe(self, open_now: int) -> bool:
        """Note ``open_now`` sessions; True when this poll released memory."""
        fell = self._last is not None and open_now < self._last
        self._last = open_now
        if fell:
            self._pending = True
            return False
        if not self._pending:
            return False
        self._pending = False
        self.release()
        self.released += 1
        return True


RELEASE_POLL_SECONDS = 1.0
"""How often :func:`http_app` counts its open sessions for :class:`MemoryReturn`."""


def http_app(
    server: Server,
    host: str = "127.0.0.1",
    sessions: SessionLimits | None = None,
    *,
    memory: MemoryReturn | None = None,
    poll_seconds: float = RELEASE_POLL_SECONDS,
) -> Starlette:
    """The streamable HTTP endpoint (``/mcp``) as an ASGI app, one MCP session per client session,
    within ``sessions`` (default :class:`SessionLimits`); ``memory`` (default :class:`MemoryReturn`)
    is polled every ``poll_seconds`` with the open sessions while the app runs."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    quiet_normal_disconnects()
    security = None
    if host in LOOPBACK_HOSTS:  # a web page must not reach a local server through a rebound DNS name
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    limits = sessions or SessionLimits()
    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=security,
        max_sessions=limits.max_sessions,
        session_idle_timeout=limits.idle_seconds,
    )

    class Endpoint:
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await manager.handle_request(scope, receive, send)

    watcher = memory or MemoryReturn()

    async def watch_sessions() -> None:
        while True:
            await anyio.sleep(poll_seconds)
            # In a worker thread: a collection and a trim of a large heap take a moment (the trim lets go of
            # the GIL), and answering clients meanwhile is the loop's job.
            await anyio.to_thread.run_sync(watcher.observe, len(manager._server_instances))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run(), anyio.create_task_group() as group:
            group.start_soon(watch_sessions)
            yield
            group.cancel_scope.cancel()

    app = Starlette(routes=[Route(MCP_PATH, endpoint=Endpoint())], lifespan=lifespan)
    app.state.session_manager = manager
    app.state.memory_return = watcher
    return app


def open_sessions(app: Starlette) -> int:
    """How many MCP sessions ``app`` (made by :func:`http_app`) holds open now, expired ones gone.

    Read from the SDK's session table (it offers no public count): for tests and benchmarks that
    show the bounds of :class:`SessionLimits` holding."""
    return len(app.state.session_manager._server_instances)


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (port 0: a free one), so the address is known before serving.

    It listens before it is announced: a client that reads the announcement and connects at once
    waits in the backlog until uvicorn accepts, where a bound socket not yet listening would refuse.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise AragError(f"cannot listen on {host}:{port} ({exc.strerror}); choose another --port or --host") from None
    return sock


def serve_http(
    server: Server,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    announce: bool = True,
    sessions: SessionLimits | None = None,
) -> None:
    """Serve streamable HTTP on ``host:port`` until interrupted; the URL goes to stderr once listening."""
    import uvicorn

    sock = listening_socket(host, port)
    bound_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    if announce:
        print(f"arag mcp: serving on http://{shown}:{bound_port}{MCP_PATH}", file=sys.stderr, flush=True)
    config = uvicorn.Config(http_app(server, host, sessions), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def run_mcp(
    index: HierarchicalIndex,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    tool_prefix: str = "",
    sessions: SessionLimits | None = None,
) -> None:
    """Serve the tools over ``index`` by ``transport`` (``stdio``, ``http``) until the client or a signal
    ends it; ``tool_prefix`` starts every tool's name (``papers_`` -> ``papers_keyword_search``),
    ``sessions`` bounds the HTTP sessions (stdio has one, the client's)."""
    _require_mcp()
    server = RetrievalToolServer(index, prefix=tool_prefix).mcp_server()
    if transport == "stdio":
        anyio.run(serve_stdio, server)
    elif transport == "http":
        serve_http(server, host, port, sessions=sessions)
    else:
        raise AragError(f"unknown transport {transport!r}; choose stdio or http")
