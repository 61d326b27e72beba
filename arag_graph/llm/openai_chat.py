"""``ChatOpenAI`` that refuses a reply stream cut off before its end, and replies with no secret in them.

A streamed chat completion ends with a chunk that carries ``finish_reason``; when the connection
drops or a proxy cuts the event stream before that, the OpenAI client simply stops iterating, and
``ChatOpenAI`` would return the half-received message as if it were complete: an answer cut off
mid-sentence, or a tool call whose arguments were never received (parsed as ``{}``). Streaming is
what LangGraph's ``messages`` stream mode (Studio, ``arag ask`` watchers) turns on, so such a reply
would silently become a prediction. Here a stream that ends without any end marker raises
:class:`CutOffReplyError`, which the graphs' model nodes turn into a one-line error in the run's
output (see :func:`arag_graph.core.safety.describe_model_error`).

The non-streaming path needs nothing: a cut-off JSON body already raises a decoding error.

Secrets: a model server, or a proxy in front of it, may echo the request's ``Authorization``
header (the operator's key) in its reply. Every model arag builds from a name redacts its replies
where they leave the model (:class:`RedactedReplies`: text, tool-call arguments, streamed chunks
through :class:`arag_graph.core.safety.StreamRedactor`), before LangChain's callbacks see them. So the
answer, the messages in a run's state and thread, the ``messages`` stream of a served run and the
structured outputs parsed from a reply all carry ``***`` instead: one place for all of them.
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from arag_graph.core.jsonl import scrub
from arag_graph.core.safety import StreamRedactor

# Where a last chunk says how the reply ended: ``finish_reason`` (Chat Completions), ``status``
# (Responses API).
_END_MARKERS = ("finish_reason", "status")


class CutOffReplyError(RuntimeError):
    """The model's reply stream ended before the model said it was finished."""


def _ends(chunk: ChatGenerationChunk) -> bool:
    info = chunk.generation_info or {}
    metadata = getattr(chunk.message, "response_metadata", None) or {}
    return any(info.get(k) or metadata.get(k) for k in _END_MARKERS)


def _cut_off(received: int) -> CutOffReplyError:
    return CutOffReplyError(
        f"the reply stream ended after {received} chunk(s) without a finish reason (connection dropped "
        "or cut by a proxy); the partial reply was discarded"
    )


def _openai_itself(model: ChatOpenAI) -> bool:
    """Whether ``model`` talks to OpenAI's own API: where its client sends requests (a base URL given, or
    ``$OPENAI_BASE_URL``, which the OpenAI client reads itself), else its ``base_url`` setting."""
    client = getattr(model, "root_client", None)
    base = str(getattr(client, "base_url", "") or model.openai_api_base or "https://api.openai.com/v1")
    return (urlsplit(base).hostname or "").lower() == "api.openai.com"


def _text_of(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in parts)


def tool_results_as_user_turns(messages: list[Any]) -> list[Any]:
    """Chat Completions ``messages`` with each run of consecutive ``tool`` messages as one user turn.

    Each result is headed by the tool that gave it (named from the assistant turn's call with the
    result's ``tool_call_id``), so the model reads which search found what. The assistant's tool calls
    stay as they are: the servers this is for render those.
    """
    names = {
        call.get("id"): (call.get("function") or {}).get("name") or "a tool"
        for message in messages
        if isinstance(message, dict) and message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
        if isinstance(call, dict)
    }
    turns: list[Any] = []
    results: list[str] = []
    for message in [*messages, None]:
        if isinstance(message, dict) and message.get("role") == "tool":
            name = names.get(message.get("tool_call_id"), "a tool")
            results.append(f"Result of {name}:\n{_text_of(message.get('content'))}")
            continue
        if results:
            turns.append({"role": "user", "content": "\n\n".join(results)})
            results = []
        if message is not None:
            turns.append(message)
    return turns


class CompleteReplyChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` whose streamed replies either end properly or raise :class:`CutOffReplyError`.

    It also sends an assistant turn that only called tools with empty text instead of ``null``: the
    OpenAI API takes both, but llama-cpp-python's server refuses ``null`` (HTTP 500, a validation
    error), which would end every agent run at its second turn.

    And it asks any other server than OpenAI's own for the reply's length under the name every
    OpenAI-compatible server reads, ``max_tokens``. ``ChatOpenAI`` sends ``max_completion_tokens``
    (OpenAI's newer name, required by its reasoning models); llama-cpp-python's server ignores that
    field and wrote each reply until its context was full, so a run's ``max_tokens`` bounded nothing
    there (docs/guide/local-models.md).

    With ``tool_results_as_user`` it sends tool results as user turns (:func:`tool_results_as_user_turns`),
    for servers whose chat format leaves ``tool`` messages out of the prompt.
    """

    tool_results_as_user: bool = False
    """Send each run of tool results as one user turn that names the tools, not as ``tool`` messages.

    For servers whose chat format drops ``tool`` messages: llama-cpp-python's ``chatml-function-calling``
    writes a ``tool`` turn's header and nothing of its content, so an agent there never reads what its
    searches found. Off by default: every server that renders tool results should get them as such."""

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        for message in payload.get("messages") or []:
            if isinstance(message, dict) and message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        if self.tool_results_as_user and payload.get("messages"):
            payload["messages"] = tool_results_as_user_turns(payload["messages"])
        if "max_completion_tokens" in payload and "max_tokens" not in payload and not _openai_itself(self):
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        return payload

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        ended, received = False, 0
        for chunk in super()._stream(*args, **kwargs):
            received += 1
            ended = ended or _ends(chunk)
            yield chunk
        if not ended:
            raise _cut_off(received)

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        ended, received = False, 0
        async for chunk in super()._astream(*args, **kwargs):
            received += 1
            ended = ended or _ends(chunk)
            yield chunk
        if not ended:
            raise _cut_off(received)


# HTML character references with their semicolon (``&#39;``, ``&lt;``, ``&amp;``), and a reference
# that may still be arriving at the end of a streamed piece.
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_ENTITY_START = re.compile(r"&(?:#[0-9]{0,7}|#[xX][0-9a-fA-F]{0,6}|[A-Za-z][A-Za-z0-9]{0,31})?$")


def unescaped(value: Any) -> Any:
    """``value`` with the HTML character references in its text decoded (``&#39;`` is ``'``).

    llama-cpp-python's ``chatml-function-calling`` format renders prompts through a Jinja template
    with HTML autoescaping, so the model reads ``Krilanovich&#39;s`` and ``&lt;`` and copies them
    into its answers, search queries and structured fields. Decoded here, where every reply of a
    model built from a name passes, the answer, the tools' arguments and the parsed outputs all
    get plain text. Strings inside lists and mappings (a tool call's arguments) are decoded one by
    one, never the JSON around them.
    """
    if isinstance(value, str):
        return _ENTITY.sub(lambda m: html.unescape(m.group(0)), value) if "&" in value else value
    if isinstance(value, list):
        return [unescaped(v) for v in value]
    if isinstance(value, dict):
        return {k: unescaped(v) for k, v in value.items()}
    return value


def _decoded_text(text: str) -> str:
    """A reply's text decoded; a JSON reply (structured output) value by value, so that a decoded
    quote cannot end a JSON string early."""
    if "&" not in text:
        return text
    try:
        parsed = json.loads(text)
    except ValueError:
        return unescaped(text)
    return json.dumps(unescaped(parsed), ensure_ascii=False) if isinstance(parsed, (dict, list)) else text


def redacted_message(message: BaseMessage) -> BaseMessage:
    """A copy of ``message`` with its text and tool-call arguments decoded (:func:`unescaped`), and
    secrets redacted from its text, tool calls and extra fields (after decoding, so no secret hides
    behind a character reference)."""
    content = _decoded_text(message.content) if isinstance(message.content, str) else message.content
    extra = dict(message.additional_kwargs)
    parsed = extra.get("parsed")  # a JSON-schema reply as the OpenAI client parsed it
    if isinstance(parsed, BaseModel):  # scrub() leaves objects alone: redact its fields as plain values
        extra["parsed"] = type(parsed).model_validate(scrub(unescaped(parsed.model_dump())))
    elif isinstance(parsed, (dict, list)):
        extra["parsed"] = unescaped(parsed)
    update: dict[str, Any] = {"content": scrub(content), "additional_kwargs": scrub(extra)}
    for name in ("tool_calls", "invalid_tool_calls", "tool_call_chunks"):
        if getattr(message, name, None):
            calls = getattr(message, name)
            if name == "tool_calls":
                calls = [{**c, "args": unescaped(c.get("args"))} for c in calls]
            update[name] = scrub(calls)
    return message.model_copy(update=update)


class _ChunkRedactor:
    """The redactors of one streamed reply: its text, and each tool call's arguments by index."""

    def __init__(self) -> None:
        self.text = StreamRedactor()
        self.args: dict[Any, StreamRedactor] = {}
        self.partial = ""
        """The end of the text so far when it may be a character reference still arriving."""

    def _decoded(self, piece: str) -> str:
        """``piece`` after what was held back, decoded (:func:`unescaped`), less a reference that may
        still be arriving. (Tool-call arguments stream as JSON text: they are decoded once parsed.)"""
        text = self.partial + piece
        found = _ENTITY_START.search(text)
        cut = found.start() if found else len(text)
        self.partial = text[cut:]
        return unescaped(text[:cut])

    def chunk(self, chunk: ChatGenerationChunk) -> ChatGenerationChunk:
        message = chunk.message
        update: dict[str, Any] = {}
        if isinstance(message.content, str):
            update["content"] = self.text.feed(self._decoded(message.content))
        else:  # content blocks (other providers): each block on its own
            update["content"] = scrub(message.content)
        sent: dict[Any, str] = {}
        if isinstance(message, AIMessageChunk) and message.tool_call_chunks:
            calls = []
            for call in message.tool_call_chunks:
                index = call.get("index")
                sent[index] = self.args.setdefault(index, StreamRedactor()).feed(call.get("args") or "")
                calls.append({**call, "args": sent[index]})
            update["tool_call_chunks"] = calls
        extra = dict(message.additional_kwargs)
        raw_calls = extra.pop("tool_calls", None)
        extra = scrub(extra)
        if isinstance(raw_calls, list):  # the same arguments as tool_call_chunks: the same redacted piece
            extra["tool_calls"] = [
                {**c, "function": {**(c.get("function") or {}), "arguments": sent.get(c.get("index"), "")}}
                if isinstance(c, dict)
                else c
                for c in raw_calls
            ]
        update["additional_kwargs"] = extra
        return ChatGenerationChunk(message=message.model_copy(update=update), generation_info=chunk.generation_info)

    def rest(self) -> ChatGenerationChunk | None:
        """What was held back, as one last chunk (None when nothing was)."""
        text = self.text.feed(unescaped(self.partial)) + self.text.flush()
        self.partial = ""
        args = {index: redactor.flush() for index, redactor in self.args.items()}
        args = {index: value for index, value in args.items() if value}
        if not text and not args:
            return None
        calls = [{"index": i, "args": a, "name": None, "id": None, "type": "tool_call_chunk"} for i, a in args.items()]
        extra = {"tool_calls": [{"index": i, "function": {"arguments": a}} for i, a in args.items()]} if args else {}
        message = AIMessageChunk(content=text, tool_call_chunks=calls, additional_kwargs=extra)  # type: ignore[arg-type]
        return ChatGenerationChunk(message=message)


class RedactedReplies:
    """A chat-model mixin: every reply, whole or streamed, leaves the model with its secrets redacted.

    LangChain calls ``_generate``/``_stream`` (and their async forms) for every request and reports
    each streamed chunk to its callbacks (LangGraph's ``messages`` stream) only after ``_stream``
    yields it, so redacting here reaches everything downstream.
    """

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        return _redacted_result(super()._generate(*args, **kwargs))  # type: ignore[misc]

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        return _redacted_result(await super()._agenerate(*args, **kwargs))  # type: ignore[misc]

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        redactor = _ChunkRedactor()
        for chunk in super()._stream(*args, **kwargs):  # type: ignore[misc]
            yield redactor.chunk(chunk)
        rest = redactor.rest()
        if rest is not None:
            yield rest

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        redactor = _ChunkRedactor()
        async for chunk in super()._astream(*args, **kwargs):  # type: ignore[misc]
            yield redactor.chunk(chunk)
        rest = redactor.rest()
        if rest is not None:
            yield rest


def _redacted_result(result: ChatResult) -> ChatResult:
    generations = [
        ChatGeneration(message=redacted_message(g.message), generation_info=g.generation_info)
        for g in result.generations
    ]
    return ChatResult(generations=generations, llm_output=scrub(result.llm_output) if result.llm_output else None)


class RedactedChatOpenAI(RedactedReplies, CompleteReplyChatOpenAI):
    """The OpenAI-compatible client of :func:`arag_graph.llm.models.resolve_chat_model`."""


@functools.cache
def redacting_class(cls: type[BaseChatModel]) -> type[BaseChatModel]:
    """``cls`` with :class:`RedactedReplies` in front (itself when it has it already)."""
    if issubclass(cls, RedactedReplies):
        return cls
    return type(f"Redacted{cls.__name__}", (RedactedReplies, cls), {"__module__": __name__})
