"""The structured outputs of ARAGOG's retrieval techniques, shared by every graph that retrieves
through :func:`~arag_graph.retrievers.passages.retrieve_passages`: multi-query rewrites and LLM
reranking, each with its fallback (no rewrites; the retriever's order)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from arag_graph.llm.structured import ModelFacing


class QueryRewrites(ModelFacing):
    """ARAGOG's multi-query retrieval: other phrasings of a search query."""

    instructions: ClassVar[str] = "Other ways to phrase a search query, to retrieve with each of them."

    queries: list[str] = Field(description="Rewrites of the query: each a short search query for the same need.")

    @classmethod
    def fallback(cls, question: str) -> QueryRewrites:
        """No rewrites: the query alone is searched."""
        return cls(queries=[])


class PassageRating(ModelFacing):
    """One passage's relevance, by its position in the list the model was shown."""

    passage: int = Field(description="The passage's number in the list, from 1.")
    relevance: float = Field(ge=0.0, le=1.0, description="How relevant the passage is to the query, 0 to 1.")


class PassageRatings(ModelFacing):
    """ARAGOG's LLM reranking: the model's relevance rating of each retrieved passage."""

    instructions: ClassVar[str] = "The relevance of each numbered passage to the query."

    ratings: list[PassageRating] = Field(description="One rating per passage.")

    @classmethod
    def fallback(cls, question: str) -> PassageRatings:
        """No ratings: the retriever's order stands."""
        return cls(ratings=[])
