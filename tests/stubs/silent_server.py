"""A model endpoint that hangs: silent (never a byte back), or dripping (a byte at a time, never done).

The OpenAI stand-in (:mod:`tests.stubs.openai_server`) answers late at most. This server accepts
every connection on 127.0.0.1 and then, by default, reads nothing and sends nothing, which is what
a wedged vLLM or a dead proxy looks like to a client: the connection opens, then no byte ever comes
back. Only the client's own timeout ends the wait, so a test sees whether it has one, and counts
the connections (:attr:`SilentServer.accepted`) to see how often it retried.

With ``drip=True`` it plays the slow-drip attack instead: response headers promising a long body,
then one byte every ``every`` seconds, less than any read timeout the tests set. A client whose
timeouts bound each read, not the request, waits until the server stops; so only a total deadline
ends the call, and the test sees it ended because the server saw the client close the connection
(:meth:`SilentServer.outcomes`), with no timed assertion. Requests ``answer`` returns a complete
reply for are answered normally (a Chroma server's start-up requests, say), on the same keep-alive
connection. Each drip ends after ``limit`` seconds (an outcome of ``"server gave up"``, which a test
reads as a client that never left).

Either way the server stops itself: everything closes when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType

from typing_extensions import Self

from tests.stubs._http import LOCALHOST

CLIENT_LEFT, SERVER_GAVE_UP = "client left", "server gave up"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\nConnection: keep-alive\r\n\r\n"


def complete(status: int, body: bytes, content_type: str = "application/json") -> bytes:
    """A whole reply, for requests a dripping server answers normally."""
    head = f"HTTP/1.1 {status} OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode("ascii") + body


class SilentServer:
    """Listens on 127.0.0.1 (a free port) and accepts every connection: held silent, or (``drip``)
    served by dripping every request ``answer`` leaves unanswered."""

    def __init__(
        self,
        *,
        drip: bool = False,
        every: float = 0.4,
        limit: float = 40.0,
        answer: Callable[[str, str], bytes | None] | None = None,
    ) -> None:
        if answer is not None and not drip:
            raise ValueError("answer= is for a dripping server (drip=True); a silent one never answers")
        self.drip, self.every, self.limit, self.answer = drip, every, limit, answer
        self._socket = socket.create_server((LOCALHOST, 0), backlog=64)
        self._held: list[socket.socket] = []
        self._lock = threading.Condition()
        self._closed = threading.Event()
        self._started = 0
        self._outcomes: list[str] = []
        self.paths: list[str] = []
        """Paths of the requests a dripping server received, in order."""
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    @property
    def root_url(self) -> str:
        return f"http://{LOCALHOST}:{self.port}"

    @property
    def url(self) -> str:
        """An OpenAI-style base URL pointing here."""
        return f"{self.root_url}/v1"

    @property
    def accepted(self) -> int:
        """Connections accepted so far (one per request attempt: a timed-out connection is not reused)."""
        with self._lock:
            return len(self._held)

    def outcomes(self) -> list[str]:
        """How each drip ended, once every one has (the server's ``limit`` bounds the wait)."""
        with self._lock:
            self._lock.wait_for(lambda: len(self._outcomes) == self._started)
            return list(self._outcomes)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            with self._lock:
                self._held.append(connection)
            if self.drip:
                threading.Thread(target=self._serve, args=(connection,), name="drip", daemon=True).start()

    def _read_request(self, connection: socket.socket, pending: bytes) -> tuple[str, str, bytes] | None:
        """(method, path, what is left after this request), or None when the client closed."""
        while b"\r\n\r\n" not in pending:
            data = connection.recv(65536)
            if not data:
                return None
            pending += data
        head, _, rest = pending.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path = [*lines[0].split(" "), "", ""][:2]
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip() or 0)
        while len(rest) < length:
            data = connection.recv(65536)
            if not data:
                return None
            rest += data
        return method, path, rest[length:]

    def _serve(self, connection: socket.socket) -> None:
        pending = b""
        with connection:
            while not self._closed.is_set():
                try:
                    request = self._read_request(connection, pending)
                except OSError:
                    return
                if request is None:
                    return
                method, path, pending = request
                with self._lock:
                    self.paths.append(path)
                reply = self.answer(method, path) if self.answer else None
                if reply is None:
                    with self._lock:
                        self._started += 1
                    outcome = self._drip(connection)
                    with self._lock:
                        self._outcomes.append(outcome)
                        self._lock.notify_all()
                    return
                connection.sendall(reply)

    def _drip(self, connection: socket.socket) -> str:
        """Headers, then a space every ``every`` seconds until the client leaves or ``limit`` passes."""
        ends = time.monotonic() + self.limit
        try:
            connection.sendall(HEAD)
            connection.settimeout(self.every)
            while time.monotonic() < ends and not self._closed.is_set():
                try:
                    if not connection.recv(4096):
                        return CLIENT_LEFT  # the client closed its end
                except TimeoutError:
                    connection.sendall(b" ")
        except OSError:  # reset or broken pipe: the client closed
            return CLIENT_LEFT
        return SERVER_GAVE_UP

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._closed.set()
        # close() alone does not wake a thread blocked in accept() on Linux, so the join below waited
        # out its 5 s after every test; shutdown() makes that accept() fail at once.
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
        if not self.drip:  # a drip's own thread closes its connection once it sees the server closed
            with self._lock:
                for connection in self._held:
                    connection.close()
        self._thread.join(timeout=5)
