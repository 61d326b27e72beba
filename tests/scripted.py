"""Scripted chat models for tests: langchain-core's fake model plus tool binding and a call log."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import invalid_tool_call
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

_ids = itertools.count(1)


def tool_call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call-{next(_ids)}", "type": "tool_call"}


def calls(*tool_calls: dict[str, Any], content: str = "") -> AIMessage:
    """An AI message carrying the given tool calls."""
    return AIMessage(content=content, tool_calls=list(tool_calls))


def forever(make: Callable[[], AIMessage]) -> Iterator[AIMessage]:
    while True:
        yield make()


class ScriptedChatModel(GenericFakeChatModel):
    """Replies from a script (an iterator of messages) and records every request it receives.

    ``bind_tools`` records the tool names and any extra arguments (such as
    ``parallel_tool_calls``) so tests can check what a provider would have been asked for.
    ``reply`` may instead be a function of the request messages, for answers that depend on them.
    """

    log: list[dict[str, Any]] = Field(default_factory=list)
    reply: Callable[[Sequence[BaseMessage], dict[str, Any]], AIMessage] | None = None

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[getattr(t, "name", t) for t in tools], **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.log.append({"messages": list(messages), "kwargs": dict(kwargs)})
        if self.reply is not None:
            return ChatResult(generations=[ChatGeneration(message=self.reply(messages, kwargs))])
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        """Stream text word by word like the parent, but a tool-calling reply as one chunk.

        (The parent's streaming drops tool calls, which a real provider streams as chunks.)
        """
        message = self._generate(messages, stop=stop, run_manager=None, **kwargs).generations[0].message
        if not isinstance(message, AIMessage) or not message.tool_calls:
            words = str(message.content).split(" ")
            for i, word in enumerate(words):
                yield ChatGenerationChunk(message=AIMessageChunk(content=word if i == 0 else f" {word}"))
            return
        chunks = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i, "type": "tool_call_chunk"}
            for i, c in enumerate(message.tool_calls)
        ]
        yield ChatGenerationChunk(message=AIMessageChunk(content=message.content, tool_call_chunks=chunks))


def scripted(*replies: AIMessage | str) -> ScriptedChatModel:
    messages = [AIMessage(content=r) if isinstance(r, str) else r for r in replies]
    return ScriptedChatModel(messages=iter(messages))


class FailingChatModel(GenericFakeChatModel):
    """A model whose every call raises, as a provider that keeps failing would."""

    error: Exception = Field(default_factory=lambda: RuntimeError("upstream unavailable"))

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise self.error


# ---------------------------------------------------------------------------------------------
# Structured output. langchain-core's default ``with_structured_output`` binds the schema as a tool
# (``tools=[Schema]``, ``tool_choice="any"``) and parses the reply's tool call, so a scripted model
# answers a structured request with a tool call named after the schema.


def requested_schema(kwargs: dict[str, Any]) -> str | None:
    """The schema a request asks for (``"Decomposition"``, ...), or None for a plain request."""
    if kwargs.get("tool_choice") in (None, "auto"):  # "auto": the agent's turn, not a structured request
        return None
    for tool in kwargs.get("tools") or []:
        return getattr(tool, "__name__", None) or str(tool)
    return None


def structured_reply(schema: type | str, **fields: Any) -> AIMessage:
    """A reply that ``with_structured_output(schema)`` parses into ``schema(**fields)``."""
    name = schema if isinstance(schema, str) else schema.__name__
    return calls(tool_call(name, **fields))


def invalid_structured_reply(schema: type | str, raw: str = '{"not json') -> AIMessage:
    """A reply whose tool call arguments are not valid JSON, as a model sometimes sends."""
    name = schema if isinstance(schema, str) else schema.__name__
    bad = invalid_tool_call(name=name, args=raw, id=f"call-{next(_ids)}", error="invalid JSON")
    return AIMessage(content="", invalid_tool_calls=[bad])


def hyde_search_graph(index: Any, embeddings_url: str, timeout: float) -> Any:
    """A-RAG with HyDE over a copy of ``index`` whose query embeddings come from ``embeddings_url``
    (one retry): a scripted model writes the hypothetical passage, calls ``semantic_search`` once,
    then answers. The dripping-endpoint test and bench/bench_drip_bounds.py both run it."""
    import copy

    from arag_graph.arag.graph import build_arag_graph
    from arag_graph.index.embedding_loader import resolve_embeddings

    def reply(messages: Any, kwargs: dict[str, Any]) -> AIMessage:
        if "encyclopedia-style" in messages[-1].content:
            return AIMessage("Leland is a town in North Carolina where a 1986 film was shot.")
        if any(m.type == "tool" for m in messages):
            return AIMessage("Answer: done")
        return calls(tool_call("semantic_search", query="the film shot in Leland"))

    index = copy.copy(index)
    index.embeddings = resolve_embeddings("openai:embed", base_url=embeddings_url, timeout=timeout, max_retries=1)
    return build_arag_graph(index, ScriptedChatModel(messages=iter([]), reply=reply))
