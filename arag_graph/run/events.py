"""Progress events on LangGraph's ``custom`` stream, for a UI to show while a graph runs.

``graph.stream(..., stream_mode="custom")`` (and Studio, and ``langgraph_sdk`` runs streamed with
``stream_mode="custom"``) carries one dict per event. Every event has ``event`` (its kind), fields of its own, and
``summary``: one line a person can read without knowing the kind. The kinds:

* ``tool_started`` / ``tool_finished`` (A-RAG): ``tool``, ``args``; finished adds ``tokens``,
  ``chunk_ids`` and ``error``.
* ``chain_step`` (CoRAG): ``chain`` (the chain's id, empty for greedy), ``step``, ``query``,
  ``chunk_ids``, ``sub_answer``.
* ``sub_questions`` (SRAG): the decomposition, ``sub_questions`` as ``{id, question, depends_on}``;
  then ``sub_question_done`` per solved sub-question with ``id``, ``question``, ``answer``.
* ``retrieved`` (every retrieve-then-answer step: Naive RAG's retrieval, each CoRAG step, each SRAG
  sub-question's search): ``tool``, ``args``, ``chunk_ids``, ``tokens``.
* ``answered`` (every graph, Direct included, last): ``answer``, ``citations``; a run that ends in an
  error has none (the error is in its output).

Nodes emit them through :func:`emit`, which does nothing outside a run streamed with ``custom``.
"""

from __future__ import annotations

from typing import Any

from langgraph.config import get_stream_writer

SUMMARY_CHARS = 160
"""How long a summary may get before it is cut (one line in a UI)."""


def one_line(text: Any, limit: int = SUMMARY_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def emit(event: str, summary: str, **fields: Any) -> None:
    """Write one event to the run's ``custom`` stream (a no-op when nothing listens)."""
    try:
        writer = get_stream_writer()
    except RuntimeError:  # called outside a graph run (a node function driven by hand, in a test)
        return
    writer({"event": event, "summary": one_line(summary), **fields})
