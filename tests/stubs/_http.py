"""The plumbing both stand-in servers share: a threaded HTTP server on localhost that records requests.

The standard library's ``ThreadingHTTPServer`` is enough here and adds no test dependency: the
stand-ins answer a handful of requests per test, and a thread per connection lets a stalled reply
(fault injection) hold one client without blocking the others.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from typing_extensions import Self

LOCALHOST = "127.0.0.1"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it (header names lower-cased, body as raw bytes)."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    raw: bytes
    received_at: float
    """``time.monotonic()`` when the request was read, to check waits between retries."""

    def json(self) -> Any:
        """The body parsed as JSON, or None when it is empty or not JSON."""
        if not self.raw:
            return None
        try:
            return json.loads(self.raw)
        except ValueError:
            return None

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", errors="replace")


class Exchange:
    """One request being answered: what came in, and the ways a stand-in may answer it."""

    def __init__(self, handler: BaseHTTPRequestHandler, request: RecordedRequest) -> None:
        self._handler = handler
        self.request = request
        self.answered = False

    def send(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """A complete response whose ``Content-Length`` is the length of ``body``."""
        self._head(status, content_type, {**(headers or {}), "Content-Length": str(len(body))})
        self.write(body)

    def send_json(self, status: int, payload: Any, *, headers: Mapping[str, str] | None = None) -> None:
        self.send(status, json.dumps(payload).encode("utf-8"), headers=headers)

    def start_stream(
        self, *, content_type: str = "text/event-stream", headers: Mapping[str, str] | None = None
    ) -> None:
        """Response headers without a length: the body ends when the connection closes."""
        self._handler.close_connection = True
        self._head(200, content_type, {**(headers or {}), "Cache-Control": "no-cache", "Connection": "close"})

    def write(self, data: bytes) -> None:
        self._handler.wfile.write(data)
        self._handler.wfile.flush()

    def drop(self) -> None:
        """Close the connection without answering, like a server that crashes mid-request."""
        self.answered = True
        self._handler.close_connection = True

    def _head(self, status: int, content_type: str, headers: Mapping[str, str]) -> None:
        self.answered = True
        self._handler.send_response(status)
        self._handler.send_header("Content-Type", content_type)
        for name, value in headers.items():
            self._handler.send_header(name, value)
        self._handler.end_headers()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real APIs; streamed replies close instead
    server: _Server

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output clean; tests read ``requests`` instead of an access log."""

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()  # the blank line after the last chunk
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        stub = self.server.stub
        url = urlsplit(self.path)
        request = RecordedRequest(
            method=self.command,
            path=url.path,
            query=url.query,
            headers={name.lower(): value for name, value in self.headers.items()},
            raw=self._read_body(),
            received_at=time.monotonic(),
        )
        stub._record(request)
        exchange = Exchange(self, request)
        try:
            stub.handle(exchange)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (its timeout); nothing to answer
        except Exception:
            stub._stub_error(traceback.format_exc())
            if not exchange.answered:
                exchange.send_json(500, {"error": {"message": "stand-in server bug; see its errors"}})
            else:
                self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled reply must not keep the test process alive
    block_on_close = False
    request_queue_size = 128  # concurrency tests open dozens of connections at once
    stub: StubServer


class StubServer:
    """A recording HTTP server on localhost, serving in a background thread.

    Subclasses answer requests in :meth:`handle`. Use as a context manager, or call
    :meth:`start` and :meth:`stop`. The port is chosen by the OS, so parallel tests never clash.
    """

    def __init__(self, host: str = LOCALHOST, port: int = 0) -> None:
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []
        """Tracebacks of exceptions raised by :meth:`handle` (bugs of the stand-in, not faults)."""
        self.stopping = threading.Event()
        """Set by :meth:`stop`; stalled replies wait on it so stopping never hangs."""

    # -- life cycle ------------------------------------------------------------------------------
    def start(self) -> Self:
        if self._server is not None:
            return self
        server = _Server((self._host, self._port), _Handler)
        server.stub = self
        self._server = server
        self.stopping.clear()
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- addresses and records -------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not running; call start() first")
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://{self._host}:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self.errors.clear()

    def wait_for(self, predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.05) -> bool:
        """Poll ``predicate()`` until it is true or ``timeout`` seconds pass; returns its last value."""
        deadline = time.monotonic() + timeout
        while True:
            if predicate():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)

    # -- for subclasses --------------------------------------------------------------------------
    def handle(self, exchange: Exchange) -> None:
        exchange.send_json(404, {"error": {"message": f"no route for {exchange.request.path}"}})

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _stub_error(self, text: str) -> None:
        with self._lock:
            self.errors.append(text)
        print(f"{type(self).__name__} error:\n{text}", file=sys.stderr)
