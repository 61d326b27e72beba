"""The baselines' context schemas: Direct answer and Naive RAG (each with its ``TypedDict``)."""

from __future__ import annotations

from pydantic import Field

from arag_graph.run.configuration import GraphContext, GraphContextDict, RetrievalContext, RetrievalContextDict


class DirectContext(GraphContext):
    """Direct answer: the model answers from its own knowledge, no retrieval."""


class DirectContextDict(GraphContextDict, total=False):
    """:class:`DirectContext` as a mapping, for type checkers."""


class NaiveRagContext(RetrievalContext):
    """Naive RAG: one retrieval of ``top_k`` chunks, then one answer."""

    hyde: bool = Field(
        default=False,
        description="Embed a model-written hypothetical answer passage instead of the question (every retriever "
        "but bm25).",
    )


class NaiveRagContextDict(RetrievalContextDict, total=False):
    """:class:`NaiveRagContext` as a mapping, for type checkers."""

    hyde: bool
