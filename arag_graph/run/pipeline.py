"""Steps every graph shares: starting a question, finishing with an answer and citations, and
keeping the message history valid for providers.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any, TypeGuard

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.config import get_config

from arag_graph.core.artifacts import artifact_of, read_in
from arag_graph.core.citations import copied_answer_format, parse_final_answer, written_tool_call
from arag_graph.core.tokens import count_tokens
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.run.budgets import question_problem, run_budget
from arag_graph.run.events import emit
from arag_graph.run.runtime import Bound, run_index
from arag_graph.run.state import RunState, question_of


def start_update(state: RunState) -> dict[str, Any]:
    """Reset per-question fields and turn a plain ``question`` input into a human message.

    The ``question`` field is consumed (set to empty) so that a follow-up question given as
    ``messages`` on the same thread is not confused with the previous one. An input the operator's
    caps refuse (checked whole where the run entered: :func:`arag_graph.run.budgets.input_problem`),
    or a question over the size cap (``ARAG_MAX_QUESTION_CHARS``), ends the run with that one line.
    """
    given = state.get("question")
    question = given.strip() if isinstance(given, str) else ""
    update: dict[str, Any] = {
        "question": "",
        "steps": 0,
        "retrieved_tokens": 0,
        "trajectory": [],
        "answer": "",
        "citations": [],
        "error": None,
        "warnings": [],  # a graph with no warnings channel ignores the key
    }
    refused, sent = _input_refusal()
    if refused:
        # The caller's whole input was refused where the run entered (arag_graph.run.budgets.input_problem):
        # no model call, and its messages are taken back out of the thread.
        update["error"] = refused
        messages = list(state.get("messages") or [])[-sent:] if sent else []
        update["messages"] = [RemoveMessage(id=m.id) for m in messages if m.id]
    elif given is not None and not isinstance(given, str):
        update["error"] = f"`question` must be text, not {type(given).__name__}; send the question as a string"
    elif too_long := question_problem(question or question_of(state)):
        update["error"] = too_long  # refused before any model call, and kept out of the thread
    elif question:
        update["messages"] = [HumanMessage(question)]
    elif not question_of(state):
        update["error"] = "empty question: give a non-empty `question` or a human message in `messages`"
    return update


def _input_refusal() -> tuple[str | None, int]:
    """Why the run's input was refused at the door, and how many messages the caller sent."""
    try:
        budget = run_budget(get_config())
    except RuntimeError:  # called outside a run (a unit test of a node)
        return None, 0
    return (budget.input_problem, budget.input_messages) if budget is not None else (None, 0)


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
    written = written_tool_call(text)
    if written:  # a call in words is no answer (a small model copying the format of its earlier calls)
        update.update({"answer": "", "citations": []})
        update["error"] = f"the model wrote a tool call as text ({written}) where it had to answer"
        return update
    answer, citations = parse_final_answer(text, lambda cid: index.get_chunk(cid) is not None)
    if copied_answer_format(answer):  # the format line copied, placeholder and all
        update.update({"answer": "", "citations": []})
        update["error"] = "the model copied the answer format (<the shortest complete answer ...>) instead of answering"
        return update
    update.update({"answer": answer, "citations": citations})
    if answer:  # every graph's last progress event (the run's error, if any, is its output's)
        emit("answered", f"answer: {answer}", answer=answer, citations=citations)
    if not answer:
        update["error"] = (
            "the model gave no answer: it asked for tool calls where it had to answer (after the step cap, "
            "or in a graph that offers no tools)"
            if closing
            else "the model returned an empty answer"
        )
    return update


def finish(state: RunState, runtime: Any, *, bound: Bound) -> dict[str, Any]:
    """The last node of the retrieve-then-answer graphs (Naive RAG, Direct, CoRAG, SRAG):
    :func:`finish_update` with the run's index; bind ``bound`` with ``functools.partial``."""
    return finish_update(state, run_index(runtime, bound))


def _text(message: AnyMessage) -> str:
    """What of ``message`` goes to the model: its text and, for a model's turn, the tool calls it wrote."""
    if not isinstance(message, AIMessage):
        return message.text  # langchain-core holds content as a string or a list of parts
    calls = [json.dumps({"name": c["name"], "arguments": c["args"]}, ensure_ascii=False) for c in message.tool_calls]
    calls += [f"{c.get('name') or ''} {c.get('args') or ''}" for c in message.invalid_tool_calls]
    return "\n".join([message.text, *calls])


def message_tokens(messages: Sequence[AnyMessage]) -> int:
    """o200k tokens of the conversation, the tool calls' arguments included (each message's count is cached).

    The arguments count: a server renders them into the prompt like any text, and a model may write
    hundreds of characters into each call (the tools' schemas allow a 500-character query, 16 keywords of
    100); a budget that saw only the turns' text would let such a conversation outgrow the context."""
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


NOT_RUN = {"not_run": True}
"""The artifact of a tool message that answers a call without running it (not a step)."""


def not_run_message(call: dict[str, Any], reason: str) -> ToolMessage:
    """Answer a tool call without running it (providers require an answer to every call)."""
    return ToolMessage(
        f"Not run: {reason}",
        tool_call_id=call.get("id") or "",
        name=call.get("name") or "unknown",
        status="error",
        artifact=dict(NOT_RUN),
    )


def not_run_messages(message: AnyMessage | None, reason: str) -> list[ToolMessage]:
    """Answer every tool call of ``message`` without running it."""
    return [not_run_message(c, reason) for c in pending_tool_calls(message)]


def current_turn(messages: Sequence[AnyMessage]) -> Sequence[AnyMessage]:
    """The messages since the question of this turn (the last human message)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return messages[i + 1 :]
    return messages


def _is_step(message: AnyMessage) -> TypeGuard[ToolMessage]:
    """A tool message that answers a call that ran (or was refused as malformed): one step."""
    if not isinstance(message, ToolMessage):
        return False
    return not artifact_of(message)["not_run"]


def turn_steps(messages: Sequence[AnyMessage]) -> int:
    """The steps of this turn, as :func:`turn_progress` counts them, without building the rest.

    The step cap is checked before every tool call and after every tool turn; counting alone keeps
    that check from rebuilding the whole trajectory each time.
    """
    return sum(1 for message in current_turn(messages) if _is_step(message))


def turn_progress(messages: Sequence[AnyMessage], index: HierarchicalIndex | None = None) -> dict[str, Any]:
    """Steps, retrieved tokens, trajectory, chunks and warnings of this turn, read off its tool messages.

    Every tool call that ran (or was refused as malformed) is a step; a call answered "not run"
    (beyond the step cap, or left when the run ended) is not. Each tool message's artifact holds
    what the call returned, so these figures are derived from the conversation rather than kept
    beside it, and stay right whoever executed the tools. Artifacts are read through
    :func:`~arag_graph.core.artifacts.artifact_of` (a caller may send tool messages of its own),
    and with ``index`` a chunk counts as read only when the message holds its text
    (:func:`~arag_graph.core.artifacts.read_in`).
    """

    calls: dict[str, dict[str, Any]] = {}
    trajectory: list[dict[str, Any]] = []
    read: list[str] = []
    shown: list[str] = []
    warnings: list[str] = []
    for message in current_turn(messages):
        if isinstance(message, AIMessage):
            calls.update({c.get("id") or "": c for c in pending_tool_calls(message)})
            continue
        if not _is_step(message):
            continue
        artifact = artifact_of(message)
        call = calls.get(message.tool_call_id, {})
        chunk_ids = artifact["chunk_ids"]
        trajectory.append(
            {
                "tool": message.name or call.get("name") or "",
                "args": artifact["args"] or call.get("args") or {},
                "tokens": artifact["tokens"],
                "chunk_ids": chunk_ids,
                "error": artifact["error"] or message.status == "error",
            }
        )
        read.extend(read_in([message], index) if index is not None else artifact["read"])
        shown.extend(chunk_ids)
        if artifact.get("warning"):
            warnings.append(f"step {len(trajectory)}: {artifact['warning']}")
    return {
        "steps": len(trajectory),
        "retrieved_tokens": sum(step["tokens"] for step in trajectory),
        "trajectory": trajectory,
        "read_chunks": list(dict.fromkeys(read)),
        "retrieved_chunks": list(dict.fromkeys(shown)),
        "warnings": warnings,
    }


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
    emit(
        "retrieved", f"{tool}: {len(ids)} chunk(s), {tokens} tokens", tool=tool, args=args, chunk_ids=ids, tokens=tokens
    )
    return {
        "steps": state.get("steps", 0) + 1,
        "retrieved_tokens": state.get("retrieved_tokens", 0) + tokens,
        "trajectory": [*(state.get("trajectory") or []), step],
        "read_chunks": ids,
        "retrieved_chunks": ids,
    }
