"""Graph state shared by every graph in the package.

All graphs take the same input (``messages`` or a plain ``question``) and return the same output
fields, so they can be swapped in a parent graph, compared by the evaluators and inspected the same
way in Studio. ``read_chunks`` and ``retrieved_chunks`` are outputs for callers and evaluators; the
tools themselves derive A-RAG's read set from the run's own messages (see
:mod:`arag_graph.tools.toolkit`), so it survives checkpoints and stays private to one thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
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
