"""A server that accepts connections and never answers: a model endpoint that hangs.

The OpenAI stand-in (:mod:`tests.stubs.openai_server`) answers late at most; this one reads nothing
and sends nothing, which is what a wedged vLLM or a dead proxy looks like to a client: the
connection opens, then no byte ever comes back. Only the client's own timeout ends the wait, so a
test sees whether it has one, and counts the connections to see how often it retried.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType

from typing_extensions import Self

from tests.stubs._http import LOCALHOST


class SilentServer:
    """Listens on 127.0.0.1 (a free port), accepts every connection and keeps it open, silent."""

    def __init__(self) -> None:
        self._socket = socket.create_server((LOCALHOST, 0), backlog=64)
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        """An OpenAI-style base URL pointing here."""
        return f"http://{LOCALHOST}:{self.port}/v1"

    @property
    def accepted(self) -> int:
        """Connections accepted so far (one per request attempt: a timed-out connection is not reused)."""
        with self._lock:
            return len(self._held)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            with self._lock:
                self._held.append(connection)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._closed.set()
        self._socket.close()
        with self._lock:
            for connection in self._held:
                connection.close()
        self._thread.join(timeout=5)
