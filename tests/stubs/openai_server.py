"""An OpenAI-compatible chat-completions server for tests: scripted replies, injectable faults.

The package reaches OpenAI, vLLM, Ollama, llama.cpp and LM Studio through ``ChatOpenAI`` and a base
URL. Pointing that same client at this server shows what really goes over the wire (tool schemas,
``parallel_tool_calls``, tool results, the synthesis request without tools) and lets a test make
the "model" misbehave in every way a real endpoint can, with no LLM anywhere.

A test scripts the replies, runs the graph, then reads what was asked::

    server.script([tool_call("keyword_search", {"keywords": ["Leland"]}), text("Answer: X [5]")])
    graph.invoke({"question": "..."}, context={"base_url": server.url})
    assert server.completions[0].tool_names == ["keyword_search", "semantic_search", "chunk_read"]

Each chat-completions request takes the next reply of the script. A script is a list (or any
iterable, even an endless one such as ``itertools.repeat(...)``) of :class:`Reply`, or a
:data:`Responder` function that picks the reply from the request. When the script runs out, the
``then`` reply is used; without one the server answers HTTP 400 ("script exhausted", not retried
by clients) and counts the request in :attr:`OpenAIStubServer.unscripted`, so a test sees an
unexpected extra call instead of hanging.

Replies are built with the helpers below: :func:`text`, :func:`tool_call`, :func:`tool_calls`
(with :func:`call`), :func:`empty`; faults :func:`http_error`, :func:`rate_limited`, :func:`stall`,
:func:`truncated`, :func:`disconnect`, :func:`invalid_arguments`, :func:`unknown_tool`. Both
non-streaming and ``stream: true`` (server-sent events) requests are served from the same script.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tests.fakes import WordHashEmbeddings
from tests.stubs._http import LOCALHOST, Exchange, RecordedRequest, StubServer

JSONDict = dict[str, Any]

# -----------------------------------------------------------------------------------------------
# Reply specs


@dataclass(frozen=True)
class ToolCallSpec:
    """One tool call of a scripted reply; ``arguments`` is sent verbatim (it may be invalid JSON)."""

    name: str
    arguments: str = "{}"
    id: str | None = None
    """The call ID; None gets a fresh ``call_<n>`` when the reply is served."""


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token's log-probability and its runners-up (``top_logprobs``)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()

    def wire(self) -> JSONDict:
        return {
            "token": self.token,
            "logprob": self.logprob,
            "bytes": list(self.token.encode()),
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in self.top],
        }


def with_logprobs(content: str, tokens: Iterable[TokenLogprob]) -> Reply:
    """A plain assistant message carrying its token log-probabilities."""
    return Reply(content=content, logprobs=tuple(tokens))


@dataclass(frozen=True)
class Reply:
    """What the server does with one chat-completions request.

    The normal case is a 200 with ``content`` and/or ``tool_calls``. The other fields inject
    faults: ``status`` other than 200 sends an OpenAI-style error body (with ``headers`` such as
    ``Retry-After``); ``delay`` waits before answering (longer than the client's timeout, it is a
    timeout); ``truncate`` sends only that fraction of the body; ``disconnect`` closes the
    connection without any answer.
    """

    content: str | None = ""
    tool_calls: tuple[ToolCallSpec, ...] = ()
    status: int = 200
    error_message: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0
    truncate: float | None = None
    disconnect: bool = False
    finish_reason: str | None = None
    """Overrides the natural one (``tool_calls`` when there are calls, else ``stop``)."""
    logprobs: tuple[TokenLogprob, ...] | None = None
    """The reply's token log-probabilities, sent as ``choices[0].logprobs.content`` (as OpenAI and vLLM
    do when asked with ``logprobs: true``); None sends ``logprobs: null``, as a server without them."""

    def after(self, seconds: float) -> Reply:
        """The same reply, sent ``seconds`` late."""
        return replace(self, delay=seconds)


Responder = Callable[[RecordedRequest], Reply]
"""Picks a reply from the request, for replies that depend on it (such as concurrent runs)."""


def text(content: str) -> Reply:
    """A plain assistant message (a final answer, say)."""
    return Reply(content=content)


def call(name: str, args: Mapping[str, Any] | None = None, *, id: str | None = None) -> ToolCallSpec:
    """A tool call with JSON-encoded ``args``, for :func:`tool_calls`."""
    return ToolCallSpec(name, json.dumps(dict(args or {})), id)


def tool_calls(*calls: ToolCallSpec, content: str | None = None) -> Reply:
    """An assistant message carrying several tool calls (a provider ignoring parallel_tool_calls=False)."""
    return Reply(content=content, tool_calls=tuple(calls))


def tool_call(name: str, args: Mapping[str, Any] | None = None, *, id: str | None = None) -> Reply:
    """An assistant message carrying one tool call."""
    return tool_calls(call(name, args, id=id))


def invalid_arguments(name: str, raw: str = '{"query": "unterminated', *, id: str | None = None) -> Reply:
    """A tool call whose arguments are not valid JSON (a model cut off mid-call, or a sloppy one)."""
    return tool_calls(ToolCallSpec(name, raw, id))


def unknown_tool(name: str = "delete_index", args: Mapping[str, Any] | None = None) -> Reply:
    """A call of a tool that was never offered."""
    return tool_call(name, args)


def empty() -> Reply:
    """A 200 reply with no text and no tool calls."""
    return Reply(content="")


def http_error(status: int, message: str = "", *, retry_after: float | None = None) -> Reply:
    """An HTTP error with an OpenAI-style error body (and ``Retry-After`` seconds when given)."""
    headers = () if retry_after is None else (("Retry-After", _seconds(retry_after)),)
    return Reply(content=None, status=status, error_message=message, headers=headers)


def rate_limited(retry_after: float = 0) -> Reply:
    """HTTP 429 with ``Retry-After``; OpenAI clients wait that long and retry."""
    return http_error(429, "Rate limit reached for requests (stub)", retry_after=retry_after)


def stall(seconds: float, then: Reply | None = None) -> Reply:
    """Answer only after ``seconds``: a timeout for a client whose timeout is shorter."""
    return (then or text("late reply")).after(seconds)


def truncated(reply: Reply | None = None, keep: float = 0.5) -> Reply:
    """Send only the first ``keep`` fraction of the body.

    Non-streaming: a complete HTTP response whose JSON body is cut (``Content-Length`` matches what
    is sent, as from a broken proxy). Streaming: the event stream stops mid-event, without
    ``[DONE]``, and the connection closes.
    """
    return replace(reply or text("This reply is cut off in the middle of its JSON body."), truncate=keep)


def disconnect() -> Reply:
    """Close the connection without answering (OpenAI clients see a connection error and retry)."""
    return Reply(content=None, disconnect=True)


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# -----------------------------------------------------------------------------------------------
# Clients


def forget_pooled_openai_clients() -> None:
    """Drop langchain-openai's process-wide httpx clients (cached per base URL and timeout).

    Its async client stays bound to the event loop it first ran on (langchain-ai/langchain#35783,
    open upstream): when the OS hands a later test's stand-in the port of an earlier one, an
    ``asyncio.run`` there would get a client of a closed loop ("Event loop is closed"). Private
    names, so a release that renames them only brings back that rare collision.
    """
    from langchain_openai.chat_models import _client_utils

    for name in ("_cached_async_httpx_client", "_cached_sync_httpx_client"):
        clear = getattr(getattr(_client_utils, name, None), "cache_clear", None)
        if clear is not None:
            clear()


# -----------------------------------------------------------------------------------------------
# Request views


def tool_names(request: RecordedRequest) -> list[str]:
    """Names of the function tools a chat-completions request offers."""
    body = request.json() or {}
    return [t.get("function", {}).get("name", "") for t in body.get("tools") or []]


@dataclass(frozen=True)
class ChatRequest:
    """A recorded chat-completions request with its JSON body at hand."""

    recorded: RecordedRequest
    body: JSONDict = field(default_factory=dict)

    @property
    def messages(self) -> list[JSONDict]:
        return list(self.body.get("messages") or [])

    @property
    def tools(self) -> list[JSONDict]:
        return list(self.body.get("tools") or [])

    @property
    def tool_names(self) -> list[str]:
        return tool_names(self.recorded)

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def headers(self) -> Mapping[str, str]:
        return self.recorded.headers

    def tool_schema(self, name: str) -> JSONDict:
        """The ``function`` object of tool ``name`` (KeyError when it is not offered)."""
        for tool in self.tools:
            if tool.get("function", {}).get("name") == name:
                return dict(tool["function"])
        raise KeyError(f"tool {name!r} not offered; offered: {self.tool_names}")


# -----------------------------------------------------------------------------------------------
# The server


class OpenAIStubServer(StubServer):
    """Serves ``POST /v1/chat/completions`` from a script, ``POST /v1/embeddings`` and ``GET /v1/models``.

    ``url`` is the base URL to give ``ChatOpenAI`` (it ends in ``/v1``). Requests to
    ``/chat/completions`` without the ``/v1`` prefix are served too, as some clients drop it.
    """

    def __init__(self, host: str = LOCALHOST, port: int = 0, *, models: Iterable[str] = ("gpt-4o-mini",)) -> None:
        super().__init__(host, port)
        self.models = list(models)
        self._script_lock = threading.Lock()
        self._script: Iterator[Reply] | Responder = iter(())
        self._then: Reply | Responder | None = None
        self._served = 0
        self._unscripted = 0
        self._ids = itertools.count(1)
        self.embedder = WordHashEmbeddings()
        self.embedding_fault: Reply | None = None
        """A fault (status, delay, disconnect) every ``/embeddings`` request gets while set."""

    @property
    def url(self) -> str:
        """The OpenAI base URL of this server: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.root_url}/v1"

    # -- the script ------------------------------------------------------------------------------
    def script(self, replies: Iterable[Reply] | Responder, *, then: Reply | Responder | None = None) -> None:
        """Replace the script: replies in order, or a function of the request; ``then`` when done.

        Replies are picked one request at a time (under a lock), so a responder may keep state
        without locking of its own. It should return at once: slowness is ``Reply.delay``, which
        is waited out after the pick, so concurrent requests stall independently.
        """
        with self._script_lock:
            self._script = replies if callable(replies) else iter(replies)
            self._then = then
            self._served = 0
            self._unscripted = 0

    @property
    def served(self) -> int:
        """Chat-completions requests answered from the script (faults included)."""
        with self._script_lock:
            return self._served

    @property
    def unscripted(self) -> int:
        """Requests that came after the script ran out with no ``then`` (answered HTTP 400)."""
        with self._script_lock:
            return self._unscripted

    @property
    def completions(self) -> list[ChatRequest]:
        """The chat-completions requests received so far, in order."""
        return [ChatRequest(r, r.json() or {}) for r in self.requests if r.path.endswith("/chat/completions")]

    def _next_reply(self, request: RecordedRequest) -> Reply | None:
        with self._script_lock:
            source = self._script
            if callable(source):
                reply: Reply | None = source(request)
            else:
                reply = next(source, None)
            if reply is None and self._then is not None:
                reply = self._then(request) if callable(self._then) else self._then
            if reply is None:
                self._unscripted += 1
            else:
                self._served += 1
            return reply

    # -- HTTP ------------------------------------------------------------------------------------
    def handle(self, exchange: Exchange) -> None:
        request = exchange.request
        if request.method == "GET" and request.path.rstrip("/") in ("/v1/models", "/models"):
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "stub"} for m in self.models]
            exchange.send_json(200, {"object": "list", "data": data})
        elif request.method == "POST" and request.path.endswith("/chat/completions"):
            self._chat_completion(exchange)
        elif request.method == "POST" and request.path.endswith("/embeddings"):
            self._embeddings(exchange)
        else:
            super().handle(exchange)

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        """The ``/embeddings`` requests received so far, in order."""
        return [r for r in self.requests if r.path.endswith("/embeddings")]

    def _embeddings(self, exchange: Exchange) -> None:
        """Deterministic vectors (hashed bag of words, :class:`tests.fakes.WordHashEmbeddings`): texts
        sharing words are close, so retrieval through this endpoint finds lexically related passages.
        Faults come from :attr:`embedding_fault` when set (the chat script is left alone)."""
        body = exchange.request.json()
        texts = body.get("input") if isinstance(body, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            exchange.send_json(400, _error_body(400, "`input` must be a string or a list of strings"))
            return
        fault = self.embedding_fault
        if fault is not None:
            if fault.delay > 0 and self.stopping.wait(fault.delay):
                exchange.drop()
                return
            if fault.disconnect:
                exchange.drop()
                return
            if fault.status != 200:
                exchange.send_json(fault.status, _error_body(fault.status, fault.error_message))
                return
        vectors = self.embedder.embed_documents(texts)
        base64 = body.get("encoding_format") == "base64"
        data = [
            {"object": "embedding", "index": i, "embedding": _base64_floats(v) if base64 else v}
            for i, v in enumerate(vectors)
        ]
        tokens = sum(len(t.split()) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        exchange.send_json(200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage})

    def _chat_completion(self, exchange: Exchange) -> None:
        body = exchange.request.json()
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            exchange.send_json(400, _error_body(400, "the body must be a JSON object with `messages`"))
            return
        reply = self._next_reply(exchange.request)
        if reply is None:
            message = f"stub script exhausted: no reply left for request #{len(self.completions)}"
            exchange.send_json(400, _error_body(400, message))
            return
        if reply.delay > 0 and self.stopping.wait(reply.delay):
            exchange.drop()  # the server is stopping; do not answer late
            return
        if reply.disconnect:
            exchange.drop()
            return
        if reply.status != 200:
            exchange.send_json(
                reply.status, _error_body(reply.status, reply.error_message), headers=dict(reply.headers)
            )
            return
        calls = [(spec, spec.id or f"call_{next(self._ids)}") for spec in reply.tool_calls]
        model = str(body.get("model") or "stub-model")
        if body.get("stream"):
            self._send_stream(exchange, reply, calls, model, body)
        else:
            payload = json.dumps(_completion(reply, calls, model, body)).encode("utf-8")
            exchange.send(200, _cut(payload, reply.truncate), headers=dict(reply.headers))

    def _send_stream(
        self,
        exchange: Exchange,
        reply: Reply,
        calls: list[tuple[ToolCallSpec, str]],
        model: str,
        body: JSONDict,
    ) -> None:
        events = b"".join(
            f"data: {json.dumps(chunk)}\n\n".encode() for chunk in _stream_chunks(reply, calls, model, body)
        )
        events += b"data: [DONE]\n\n"
        exchange.start_stream(headers=dict(reply.headers))
        exchange.write(_cut(events, reply.truncate))


# -----------------------------------------------------------------------------------------------
# Wire format


def _base64_floats(vector: list[float]) -> str:
    """A vector as OpenAI sends it for ``encoding_format: base64``: little-endian float32 bytes."""
    import base64
    import struct

    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def _cut(payload: bytes, keep: float | None) -> bytes:
    if keep is None:
        return payload
    return payload[: max(1, min(len(payload) - 1, int(len(payload) * keep)))]


def _error_body(status: int, message: str) -> JSONDict:
    kinds = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error"}
    kind = "rate_limit_error" if status == 429 else kinds.get(status, "server_error")
    return {"error": {"message": message or f"stub error {status}", "type": kind, "param": None, "code": None}}


def _usage(reply: Reply, body: JSONDict) -> JSONDict:
    """Rough, deterministic token counts (about four characters a token); nothing tests rely on."""
    prompt = len(json.dumps(body.get("messages"))) // 4
    completion = (len(reply.content or "") + sum(len(s.name) + len(s.arguments) for s in reply.tool_calls)) // 4
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _finish_reason(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _completion(reply: Reply, calls: list[tuple[ToolCallSpec, str]], model: str, body: JSONDict) -> JSONDict:
    message: JSONDict = {"role": "assistant", "content": reply.content, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": spec.name, "arguments": spec.arguments}}
            for spec, cid in calls
        ]
    logprobs = None if reply.logprobs is None else {"content": [t.wire() for t in reply.logprobs]}
    return {
        "id": f"chatcmpl-stub-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(reply), "logprobs": logprobs}],
        "usage": _usage(reply, body),
    }


def _pieces(value: str, size: int) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


def _stream_chunks(
    reply: Reply, calls: list[tuple[ToolCallSpec, str]], model: str, body: JSONDict
) -> Iterator[JSONDict]:
    """The chunks a provider streams: role, text in pieces, each call's arguments in pieces, the end.

    Splitting text and arguments across chunks is the point: clients must reassemble them.
    """
    base = {
        "id": f"chatcmpl-stub-{time.monotonic_ns()}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: JSONDict, finish: str | None = None) -> JSONDict:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.content or "", 12) if reply.content else []:
        yield chunk({"content": piece})
    for index, (spec, cid) in enumerate(calls):
        head = {"index": index, "id": cid, "type": "function", "function": {"name": spec.name, "arguments": ""}}
        yield chunk({"tool_calls": [head]})
        for piece in _pieces(spec.arguments, 7):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(reply))
    if (body.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": _usage(reply, body)}
