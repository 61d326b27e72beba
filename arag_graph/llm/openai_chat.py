"""``ChatOpenAI`` that refuses a reply stream cut off before its end.

A streamed chat completion ends with a chunk that carries ``finish_reason``; when the connection
drops or a proxy cuts the event stream before that, the OpenAI client simply stops iterating, and
``ChatOpenAI`` would return the half-received message as if it were complete: an answer cut off
mid-sentence, or a tool call whose arguments were never received (parsed as ``{}``). Streaming is
what LangGraph's ``messages`` stream mode (Studio, ``arag ask`` watchers) turns on, so such a reply
would silently become a prediction. Here a stream that ends without any end marker raises
:class:`CutOffReplyError`, which the graphs' model nodes turn into a one-line error in the run's
output (see :func:`arag_graph.core.safety.describe_model_error`).

The non-streaming path needs nothing: a cut-off JSON body already raises a decoding error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.outputs import ChatGenerationChunk
from langchain_openai import ChatOpenAI

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


class CompleteReplyChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` whose streamed replies either end properly or raise :class:`CutOffReplyError`."""

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
