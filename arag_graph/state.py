"""Graph state shared by every graph in the package.

All graphs take the same input (``messages`` or a plain ``question``) and return the same output
fields, so they can be swapped in a parent graph, compared by the evaluators and inspected the same
way in Studio. The read-chunk set is part of the state (with a set-union reducer), which is how
A-RAG's context tracker survives checkpoints and stays private to one thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import AnyMessage, ToolMessage
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from typing_extensions import TypedDict


def union(left: Sequence[str] | None, right: Sequence[str] | None) -> list[str]:
    """Set union that keeps first-seen order (lists, not sets, so the state stays JSON)."""
    merged = list(left or [])
    seen = set(merged)
    for item in right or []:
        if item not in seen:
            seen.add(item)
            merged.append(item)
    return merged


class TrajectoryStep(TypedDict, total=False):
    """One retrieval step: the tool, its arguments and the corpus tokens it returned."""

    tool: str
    args: dict[str, Any]
    tokens: int
    chunk_ids: list[str]
    error: bool


class InputState(TypedDict, total=False):
    """What a caller gives: a chat history, or just a question (turned into a human message)."""

    messages: Annotated[list[AnyMessage], add_messages]
    question: str


class OutputState(TypedDict, total=False):
    """What every graph returns."""

    messages: Annotated[list[AnyMessage], add_messages]
    answer: str
    citations: list[str]
    read_chunks: Annotated[list[str], union]
    retrieved_chunks: Annotated[list[str], union]
    retrieved_tokens: int
    steps: int
    trajectory: list[TrajectoryStep]
    error: str | None


class RunState(InputState, OutputState, total=False):
    """Full state of a run; ``remaining_steps`` guards against a caller's low recursion limit."""

    remaining_steps: RemainingSteps


def question_of(state: InputState) -> str:
    """The question of this turn: the ``question`` input, else the last human message's text."""
    question = state.get("question")
    if isinstance(question, str) and question.strip():
        return question.strip()
    for message in reversed(state.get("messages") or []):
        if message.type == "human":
            return message.text.strip() if hasattr(message, "text") else str(message.content).strip()
    return ""


_MAX_ARTIFACT_IDS = 1000
"""More chunk IDs than any tool call returns (top_k is at most 20, chunk_read's neighbours triple it)."""


def _ids(value: Any) -> list[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        return []
    return [str(i) for i in value[:_MAX_ARTIFACT_IDS] if isinstance(i, (str, int)) and not isinstance(i, bool)]


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0
    return max(0, min(int(value), 10**9))


def artifact_of(message: Any) -> dict[str, Any]:
    """A tool message's artifact as the graphs read it: known keys of known types, anything else dropped.

    Artifacts record what a tool call returned (:mod:`arag_graph.tools`), but a served run's caller
    can send tool messages of its own in ``messages``, artifacts included, so no graph reads one
    unchecked: one reader, which never raises. Whether its ``read`` chunks were really returned is
    for :func:`arag_graph.tools.read_in` to check against the message's text.
    """
    raw = message.artifact if isinstance(message, ToolMessage) and isinstance(message.artifact, dict) else {}
    artifact: dict[str, Any] = {
        "tokens": _count(raw.get("tokens")),
        "chunk_ids": _ids(raw.get("chunk_ids")),
        "read": _ids(raw.get("read")),
        "args": dict(raw["args"]) if isinstance(raw.get("args"), dict) else {},
        "error": raw.get("error") is True,
        "not_run": raw.get("not_run") is True,
    }
    if isinstance(raw.get("warning"), str) and raw["warning"]:
        artifact["warning"] = raw["warning"][:500]
    return artifact
