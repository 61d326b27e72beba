"""The baselines' context schemas: Direct answer and Naive RAG (each with its ``TypedDict``)."""

from __future__ import annotations

from pydantic import Field

from arag_graph.core.profiles import ARAG_PAPER, DEVIATIONS, Deviation
from arag_graph.run.configuration import (
    HYDE_STYLE_DESCRIPTION,
    GraphContext,
    GraphContextDict,
    HydeStyle,
    RetrievalContext,
    RetrievalContextDict,
)


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
    hyde_style: HydeStyle = Field(default="package", description=HYDE_STYLE_DESCRIPTION)

    @classmethod
    def paper_profile(cls) -> tuple[Deviation, ...]:
        return (*DEVIATIONS, *PAPER_PROFILE)


class NaiveRagContextDict(RetrievalContextDict, total=False):
    """:class:`NaiveRagContext` as a mapping, for type checkers."""

    hyde: bool
    hyde_style: HydeStyle


PAPER_PROFILE: tuple[Deviation, ...] = (
    Deviation(
        setting="dense_ranking",
        scope="run",
        package="sentence",
        paper="chunk",
        paper_source=f"{ARAG_PAPER}, baselines: Naive RAG is one dense retrieval of the top 5 chunks (a vector per "
        "chunk), with the same encoder as the other methods",
        reason="the index holds sentence vectors only, so a chunk ranks by its best sentence and nothing more is "
        "embedded; chunk vectors cost a pass over every chunk on first use (131 to 170 s for HotpotQA-100's 994 "
        "passages on two busy cores). On HotpotQA-100 recall@5 0.765 (sentence) vs 0.78 (chunk), 602.5 vs 536 "
        "tokens handed over (bench/results/fidelity.md)",
        switch="--set dense_ranking=chunk",
        contexts=(NaiveRagContext,),
    ),
)
"""The paper profile's rows that only Naive RAG has: the A-RAG paper's baseline retriever."""
