"""Retrieval steps the one-shot graphs share (Naive RAG, CoRAG, SRAG): HyDE's query vector, the model's
parts of ARAGOG's multi-query and rerank techniques, and a passage as the state keeps it.

The retrieval layer holds the rules (fusion, picking, windows); these helpers add what a model
writes (a hypothetical passage, rewrites, ratings), through the run's model. A technique that
fails refines nothing and says so in ``warnings``; it never ends a run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig

from arag_graph.core.errors import BudgetExceeded
from arag_graph.core.safety import describe_model_error
from arag_graph.retrievers.passages import Passage
from arag_graph.run.configuration import RetrievalContext
from arag_graph.run.model import retrieval_model
from arag_graph.run.runtime import Run

log = logging.getLogger(__name__)

__all__ = ["HydeSettings", "as_dict", "hyde_vector", "selection_functions"]


class HydeSettings(Protocol):
    """The settings :func:`hyde_vector` reads: a schema with a ``hyde`` switch and a retriever."""

    @property
    def hyde(self) -> bool: ...

    @property
    def retriever(self) -> str: ...


def hyde_vector(run: Run[Any], query: str, config: RunnableConfig | None) -> tuple[Sequence[float] | None, str | None]:
    """HyDE's query vector for ``query`` when the run asks for it, and a warning when the model failed.

    HyDE refines the search; on a model failure the query itself is searched and the run goes on.
    """
    ctx: HydeSettings = run.ctx
    if not ctx.hyde or ctx.retriever == "bm25":
        return None, None  # BM25 has no query vector to replace
    try:
        passage = retrieval_model(run.model).hyde(query).invoke({**(config or {}), "run_name": "hyde_model"})
    except Exception as exc:
        warning = f"HyDE failed, searched with the query itself ({describe_model_error(exc)})"
        log.warning(warning)
        return None, warning
    return run.index.embeddings.embed_query(passage), None


def selection_functions(
    run: Run[RetrievalContext], config: RunnableConfig | None, warnings: list[str]
) -> dict[str, Any]:
    """The model's parts of ARAGOG's multi-query and rerank techniques, for ``retrieve_passages``.

    The retrieval layer holds the rules (fusion, picking); the rewrites and ratings come from the
    run's model (the chat model, or the offline policy's rules). A request that fails or falls
    back leaves the query alone (no rewrites) or the retriever's order (no ratings), and says so in
    ``warnings``: like HyDE, the techniques refine a search and never end a run.
    """
    config = config or {}
    model = retrieval_model(run.model)

    def ask(call: Any, run_name: str, fallback: str) -> Any:
        """The structured reply of ``call``, or None with ``fallback`` and the reason in ``warnings``."""
        try:
            value, problem = call.invoke({**config, "run_name": run_name})
        except BudgetExceeded:
            raise
        except Exception as exc:
            value, problem = None, describe_model_error(exc)
        if problem or value is None:
            warnings.append(f"{fallback} ({problem})")
            return None
        return value

    def rewrite(query: str, n: int) -> list[str]:
        value = ask(
            model.query_rewrites(query, n),
            "multi_query",
            "multi-query rewrites failed, searched with the query alone",
        )
        return list(value.queries) if value is not None else []

    def rerank(query: str, found: Sequence[Passage]) -> list[float]:
        value = ask(model.passage_ratings(query, found), "rerank", "rerank ratings failed, kept the retriever's order")
        if value is None:
            return []
        scores = [0.0] * len(found)
        for rating in value.ratings:
            if 1 <= rating.passage <= len(found):
                scores[rating.passage - 1] = max(scores[rating.passage - 1], rating.relevance)
        return scores

    return {"rewrite": rewrite if run.ctx.multi_query else None, "rerank": rerank if run.ctx.rerank else None}


def as_dict(p: Passage) -> dict[str, Any]:
    """A passage as graph state keeps it (and Studio shows it)."""
    return {"chunk_id": p.chunk_id, "title": p.title, "text": p.text, "score": p.score}
