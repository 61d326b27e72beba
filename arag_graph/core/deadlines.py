"""A total deadline on every HTTP request arag sends: connect, send and every read of the reply.

httpx's timeouts (and those of ``httpx2``, which the OpenAI SDK uses) bound each socket operation,
not the request: a read waits at most ``read`` seconds for the *next* bytes, so a server that sends
one byte every few seconds and never finishes holds the request forever, and with it a run. The
chat model, the embeddings endpoint and the Chroma server were all open to that.

Here the request's read timeout (the per-attempt bound users set: ``--model-timeout``,
``$ARAG_EMBEDDING_TIMEOUT``, ``--chroma-timeout``, a graph's ``timeout`` field) is also its total
deadline per attempt. One mechanism does it for both HTTP stacks, sync and async:

- the transport (:func:`_transport_class`) stamps each request with its deadline, in a context
  variable, while it connects, sends, reads the headers and each chunk of the body;
- the connection pool's network backend is wrapped (:class:`_Backend`) so every socket operation
  waits at most the time left until that deadline, and fails with the library's own timeout error
  once it has passed. The error then travels the usual way: the OpenAI client retries it
  (``max_retries``) and the callers turn it into their one-line "timed out" messages.

A connection whose read timed out is closed by the pool, so the server sees the client leave.
Retries still multiply: a model call waits at most ``timeout × (max_retries + 1)`` plus the
client's short back-off between attempts.

One operation that asks the same endpoint more than once (a search whose HyDE passage could not be
embedded and whose query is embedded next, a multi-query retrieval) would otherwise get a fresh
``timeout × attempts`` per request, so a dripping endpoint held it a multiple of the bound users
set. Inside :func:`one_operation` the requests of each endpoint that asks for it
(:func:`endpoint_deadline`) share one deadline, ``timeout × attempts`` from that endpoint's first
request in the operation; once it has passed, the endpoint's next request is not sent at all.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from types import ModuleType
from typing import Any

_DEADLINE: ContextVar[float | None] = ContextVar("arag_request_deadline", default=None)
_OPERATION: ContextVar[dict[object, float] | None] = ContextVar("arag_operation_deadlines", default=None)
"""The current operation's deadlines, one per endpoint that has sent a request in it."""
_CAP: ContextVar[float | None] = ContextVar("arag_endpoint_deadline", default=None)
"""The deadline of the endpoint sending now, within the current operation (no request ends later)."""


@contextlib.contextmanager
def one_operation() -> Iterator[None]:
    """Make what runs inside one operation: each endpoint's requests share one total deadline.

    Nested, the outer operation holds: its deadlines were set from its first requests."""
    token = _OPERATION.set(_OPERATION.get() if _OPERATION.get() is not None else {})
    try:
        yield
    finally:
        _OPERATION.reset(token)


@contextlib.contextmanager
def endpoint_deadline(endpoint: object, seconds: float) -> Iterator[float | None]:
    """While inside, ``endpoint``'s requests end by its deadline in the current operation: ``seconds``
    (its ``timeout × attempts``) from its first request there. Yields that deadline, for the caller to
    refuse a request once it has passed; None (no shared bound) outside :func:`one_operation`."""
    shared = _OPERATION.get()
    if shared is None:
        yield None
        return
    deadline = shared.setdefault(endpoint, time.monotonic() + seconds)
    token = _CAP.set(deadline)
    try:
        yield deadline
    finally:
        _CAP.reset(token)


def _deadline_of(request: Any) -> float | None:
    """When ``request`` must be done: now plus its read timeout (None: the caller set no bound), and
    no later than its endpoint's deadline in the current operation."""
    timeout = request.extensions.get("timeout")
    read = timeout.get("read") if isinstance(timeout, dict) else None
    cap = _CAP.get()
    if not isinstance(read, (int, float)) or read <= 0:
        return cap
    own = time.monotonic() + float(read)
    return own if cap is None else min(own, cap)


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to the time left before the current request's deadline; ``error`` once it passed."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the request's total deadline passed (connect, send and all reads of one attempt)")
    return left if timeout is None else min(timeout, left)


class _Stream:
    """A connection whose every read and write ends by the deadline of the request using it."""

    def __init__(self, inner: Any, core: ModuleType) -> None:
        self._inner, self._core = inner, core

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, self._core.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, self._core.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        wait = _left(timeout, self._core.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, wait), self._core)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _AsyncStream(_Stream):
    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # type: ignore[override]
        return await self._inner.read(max_bytes, _left(timeout, self._core.ReadTimeout))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # type: ignore[override]
        await self._inner.write(buffer, _left(timeout, self._core.WriteTimeout))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(  # type: ignore[override]
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> Any:
        wait = _left(timeout, self._core.ConnectTimeout)
        return _AsyncStream(await self._inner.start_tls(ssl_context, server_hostname, wait), self._core)


class _Backend:
    """The pool's network backend, handing out connections that keep the request's deadline."""

    def __init__(self, inner: Any, core: ModuleType) -> None:
        self._inner, self._core = inner, core

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, **kwargs: Any) -> Any:
        wait = _left(timeout, self._core.ConnectTimeout)
        return _Stream(self._inner.connect_tcp(host, port, timeout=wait, **kwargs), self._core)

    def connect_unix_socket(self, path: str, timeout: float | None = None, **kwargs: Any) -> Any:
        wait = _left(timeout, self._core.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, timeout=wait, **kwargs), self._core)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _AsyncBackend(_Backend):
    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        wait = _left(timeout, self._core.ConnectTimeout)
        return _AsyncStream(await self._inner.connect_tcp(host, port, timeout=wait, **kwargs), self._core)

    async def connect_unix_socket(self, path: str, timeout: float | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        wait = _left(timeout, self._core.ConnectTimeout)
        return _AsyncStream(await self._inner.connect_unix_socket(path, timeout=wait, **kwargs), self._core)

    async def sleep(self, seconds: float) -> None:  # type: ignore[override]
        await self._inner.sleep(seconds)


@functools.cache
def _body_class(http: ModuleType, asynchronous: bool) -> type:
    """``http``'s response body stream type, wrapped so that each chunk is read with the request's
    deadline set (the transport stamps only while it reads the headers)."""
    if asynchronous:

        class AsyncBody(http.AsyncByteStream):  # type: ignore[misc,name-defined]
            def __init__(self, inner: Any, deadline: float | None) -> None:
                self._inner, self._deadline = inner, deadline

            async def __aiter__(self) -> AsyncIterator[bytes]:
                chunks = self._inner.__aiter__()
                while True:
                    token = _DEADLINE.set(self._deadline)
                    try:
                        chunk = await chunks.__anext__()
                    except StopAsyncIteration:
                        return
                    finally:
                        _DEADLINE.reset(token)
                    yield chunk

            async def aclose(self) -> None:
                await self._inner.aclose()

        return AsyncBody

    class SyncBody(http.SyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any, deadline: float | None) -> None:
            self._inner, self._deadline = inner, deadline

        def __iter__(self) -> Iterator[bytes]:
            chunks = iter(self._inner)
            while True:
                token = _DEADLINE.set(self._deadline)
                try:
                    chunk = next(chunks)
                except StopIteration:
                    return
                finally:
                    _DEADLINE.reset(token)
                yield chunk

        def close(self) -> None:
            self._inner.close()

    return SyncBody


@functools.cache
def _transport_class(http: ModuleType, core: ModuleType, asynchronous: bool) -> type:
    """``http``'s (httpx or httpx2) HTTP transport, with the deadline of each request kept.

    The pool's backend is a private attribute of httpcore's pools (``_network_backend``, given to
    every connection it opens): the tests against drip servers fail if a release moves it.
    """
    base = http.AsyncHTTPTransport if asynchronous else http.HTTPTransport
    body = _body_class(http, asynchronous)

    def wrap_backend(transport: Any) -> None:
        pool = transport._pool
        kind = _AsyncBackend if asynchronous else _Backend
        pool._network_backend = kind(pool._network_backend, core)

    class Sync(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            wrap_backend(self)

        def handle_request(self, request: Any) -> Any:
            deadline = _deadline_of(request)
            token = _DEADLINE.set(deadline)
            try:
                response = super().handle_request(request)
            finally:
                _DEADLINE.reset(token)
            response.stream = body(response.stream, deadline)
            return response

    class Async(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            wrap_backend(self)

        async def handle_async_request(self, request: Any) -> Any:
            deadline = _deadline_of(request)
            token = _DEADLINE.set(deadline)
            try:
                response = await super().handle_async_request(request)
            finally:
                _DEADLINE.reset(token)
            response.stream = body(response.stream, deadline)
            return response

    made = Async if asynchronous else Sync
    made.__name__ = made.__qualname__ = f"Deadline{base.__name__}"
    return made


def httpx_transport(**kwargs: Any) -> Any:
    """An ``httpx.HTTPTransport`` (what Chroma's client uses) with total deadlines per request."""
    import httpcore
    import httpx

    return _transport_class(httpx, httpcore, False)(**kwargs)


def _openai_client_class(asynchronous: bool) -> type:
    """The OpenAI SDK's default HTTP client (its limits, redirects, proxies from the environment),
    whose transports, direct and proxied, keep total deadlines."""
    import httpcore2
    import httpx2
    import openai

    base = openai.DefaultAsyncHttpxClient if asynchronous else openai.DefaultHttpxClient
    made = _transport_class(httpx2, httpcore2, asynchronous)

    class Client(base):  # type: ignore[misc,valid-type]
        def _init_transport(self, *args: Any, transport: Any = None, **kwargs: Any) -> Any:
            return transport if transport is not None else made(*args, **kwargs)

        def _init_proxy_transport(self, proxy: Any, *args: Any, **kwargs: Any) -> Any:
            return made(*args, proxy=proxy, **kwargs)

    Client.__name__ = Client.__qualname__ = f"Deadline{base.__name__}"
    return Client


def openai_http_clients() -> dict[str, Any]:
    """New ``http_client`` and ``http_async_client`` for one ``ChatOpenAI`` / ``OpenAIEmbeddings``.

    The per-attempt bound travels with each request (the SDK sets it from the model's ``timeout``).
    Each model gets its own pair, as langchain-openai's defaults are per endpoint and timeout
    (``resolve_chat_model`` caches models per setting, so runs still share pools): an async pool
    shared by the whole process would keep connections of event loops that have closed.
    """
    return {
        "http_client": _openai_client_class(False)(),
        "http_async_client": _openai_client_class(True)(),
    }


def keep_deadlines(client: Any, **transport: Any) -> None:
    """Give an ``httpx.Client`` made elsewhere (Chroma's session) a transport with total deadlines.

    ``transport`` holds the settings of the new transport (``limits``, ``verify``). The client's
    transport is its private ``_transport``; the drip-server tests fail if httpx moves it.
    """
    old, client._transport = client._transport, httpx_transport(**transport)
    old.close()
