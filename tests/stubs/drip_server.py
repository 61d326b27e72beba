"""A server that answers one byte at a time and never finishes: the slow-drip attack on a client.

The silent server (:mod:`tests.stubs.silent_server`) sends nothing, which any read timeout ends.
This one sends response headers promising a long body, then one byte every ``every`` seconds, less
than any read timeout the tests set: a client whose timeouts bound each read, not the request,
waits until the server stops. So only a total deadline ends the call, and the test sees it ended
because the server saw the client close the connection (:meth:`DripServer.outcomes`), with no timed
assertion. Requests ``answer`` returns a complete reply for are answered normally (a Chroma
server's start-up requests, say), on the same keep-alive connection.

The server stops itself: each drip ends after ``limit`` seconds (an outcome of ``"server gave
up"``, which a test reads as a client that never left) and everything closes when the ``with``
block ends.
"""

from __future__ import annotations

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
    """A whole reply, for requests the server answers normally."""
    head = f"HTTP/1.1 {status} OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode("ascii") + body


class DripServer:
    """Listens on 127.0.0.1 (a free port); drips every request ``answer`` leaves unanswered."""

    def __init__(
        self,
        *,
        every: float = 0.4,
        limit: float = 40.0,
        answer: Callable[[str, str], bytes | None] | None = None,
    ) -> None:
        self.every, self.limit, self.answer = every, limit, answer
        self._socket = socket.create_server((LOCALHOST, 0), backlog=64)
        self._lock = threading.Condition()
        self._closed = threading.Event()
        self._started = 0
        self._outcomes: list[str] = []
        self.paths: list[str] = []
        """Paths of the requests received, in order."""
        self._accepting = threading.Thread(target=self._accept, name="drip-server", daemon=True)

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
        self._accepting.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._closed.set()
        self._socket.close()
        self._accepting.join(timeout=5)
