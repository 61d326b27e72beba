"""Steps every graph shares: starting a question, finishing with an answer and citations, and
keeping the message history valid for providers.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from arag_graph.citations import parse_final_answer
from arag_graph.index import HierarchicalIndex
from arag_graph.state import RunState, question_of
from arag_graph.tokens import count_tokens


def start_update(state: RunState) -> dict[str, Any]:
    """Reset per-question fields and turn a plain ``question`` input into a human message.

    The ``question`` field is consumed (set to empty) so that a follow-up question given as
    ``messages`` on the same thread is not confused with the previous one.
    """
    question = (state.get("question") or "").strip()
    update: dict[str, Any] = {
        "question": "",
        "steps": 0,
        "retrieved_tokens": 0,
        "trajectory": [],
        "answer": "",
        "citations": [],
        "error": None,
    }
    if question:
        update["messages"] = [HumanMessage(question)]
    elif not question_of(state):
        update["error"] = "empty question: give a non-empty `question` or a human message in `messages`"
    return update


def finish_update(state: RunState, index: HierarchicalIndex) -> dict[str, Any]:
    """Read the answer and its citations from the last AI message.

    A reply that still asks for tools (a model ignoring the synthesis request) has its calls
    answered with "not run" notices, so the thread stays valid for a follow-up question.
    """
    messages = state.get("messages") or []
    closing = not_run_messages(messages[-1] if messages else None, "the run has ended.")
    update: dict[str, Any] = {"messages": closing} if closing else {}
    if state.get("error"):
        return update
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    text = last.text if last is not None else ""
    answer, citations = parse_final_answer(text, lambda cid: index.get_chunk(cid) is not None)
    update.update({"answer": answer, "citations": citations})
    if not answer:
        update["error"] = (
            "the model gave no answer: it asked for tool calls where it had to answer (after the step cap, "
            "or in a graph that offers no tools)"
            if closing
            else "the model returned an empty answer"
        )
    return update


def _text(message: AnyMessage) -> str:
    return message.text if isinstance(message.content, (str, list)) else str(message.content)


def message_tokens(messages: Sequence[AnyMessage]) -> int:
    """o200k tokens of the conversation (each message's count is cached)."""
    return sum(_cached_count(_text(m)) for m in messages)


def over_token_budget(messages: Sequence[AnyMessage], budget: int) -> bool:
    """Whether the conversation has reached ``budget`` tokens.

    A token is at least one character, so a conversation shorter than ``budget`` characters cannot
    have reached it: the common case costs one pass of ``len`` instead of tokenizing.
    """
    if sum(len(_text(m)) for m in messages) < budget:
        return False
    return message_tokens(messages) >= budget


@functools.lru_cache(maxsize=8192)
def _cached_count(text: str) -> int:
    return count_tokens(text)


def pending_tool_calls(message: AnyMessage | None) -> list[dict[str, Any]]:
    """Tool calls of an AI message, including those whose arguments were not valid JSON."""
    if not isinstance(message, AIMessage):
        return []
    calls = [dict(c) for c in message.tool_calls]
    for bad in message.invalid_tool_calls:
        calls.append(
            {
                "name": bad.get("name") or "",
                "args": None,
                "id": bad.get("id"),
                "raw": bad.get("args"),
                "invalid": True,
            }
        )
    return calls


def not_run_messages(message: AnyMessage | None, reason: str) -> list[ToolMessage]:
    """Answer every tool call of ``message`` without running it (providers require an answer)."""
    return [
        ToolMessage(
            f"Not run: {reason}",
            tool_call_id=c.get("id") or "",
            name=c.get("name") or "unknown",
            status="error",
        )
        for c in pending_tool_calls(message)
    ]


# ---------------------------------------------------------------------------------------------
# Retrieval steps and answering from passages (the non-agentic graphs)


def retrieval_update(
    state: RunState, tool: str, args: dict[str, Any], passages: Sequence[Any], *, note: str = ""
) -> dict[str, Any]:
    """Account for one retrieval step the way the agent's tool node does.

    Each passage's text counts as corpus tokens handed to the model; its chunk joins both the
    retrieved and the read sets (its text is given in full, as if read).
    """
    tokens = sum(count_tokens(p.text) for p in passages)
    ids = list(dict.fromkeys(p.chunk_id for p in passages))
    step: dict[str, Any] = {"tool": tool, "args": args, "tokens": tokens, "chunk_ids": ids, "error": False}
    if note:
        step["note"] = note
    return {
        "steps": state.get("steps", 0) + 1,
        "retrieved_tokens": state.get("retrieved_tokens", 0) + tokens,
        "trajectory": [*(state.get("trajectory") or []), step],
        "read_chunks": ids,
        "retrieved_chunks": ids,
    }


def passages_block(passages: Sequence[Any]) -> str:
    """The context section of an answer prompt, in the same chunk format the tools use."""
    from arag_graph.tools import chunk_block

    return "\n\n".join(chunk_block(p.chunk_id, p.title, p.text) for p in passages) or "(no passages found)"
