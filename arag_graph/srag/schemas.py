"""SRAG's structured outputs: the decomposition, the router's verdict and a passage's triplets, each
with its fallback (what the run goes on with when a model's reply cannot be used)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from arag_graph.llm.structured import ModelFacing


class SubQuestion(ModelFacing):
    instructions: ClassVar[str] = "One step of the decomposition."

    id: int = Field(description="1-based number of the sub-question.")
    question: str = Field(description="The sub-question. Refer to the answer of an earlier sub-question as [answer N].")
    depends_on: list[int] = Field(default_factory=list, description="Numbers of earlier sub-questions it needs.")


class Decomposition(ModelFacing):
    """SRAG's decomposition of a multi-hop question into sub-questions with dependencies."""

    instructions: ClassVar[str] = (
        "The question broken into the sub-questions needed to answer it, each answerable from one "
        "passage, in an order in which each can be answered."
    )

    sub_questions: list[SubQuestion] = Field(description="Sub-questions in the order they can be answered.")

    @classmethod
    def fallback(cls, question: str) -> Decomposition:
        """The question as its only sub-question."""
        return cls(sub_questions=[SubQuestion(id=1, question=question)])


class Triplet(ModelFacing):
    instructions: ClassVar[str] = "One fact stated by the passage."

    subject: str
    predicate: str
    object: str
    relevance: float = Field(default=1.0, ge=0.0, le=1.0, description="Relevance to the sub-question, 0 to 1.")


class Triplets(ModelFacing):
    """SRAG's (subject, predicate, object) facts extracted from one passage."""

    instructions: ClassVar[str] = (
        "The facts stated by the passage that bear on the sub-question, as (subject, predicate, object) "
        "triplets; none if the passage says nothing relevant."
    )

    triplets: list[Triplet] = Field(default_factory=list)

    @classmethod
    def fallback(cls, question: str) -> Triplets:
        """No triplets: the passage adds nothing to the table."""
        return cls(triplets=[])


class Route(ModelFacing):
    """SRAG's optional router: does the question need several hops?"""

    instructions: ClassVar[str] = "Whether answering the question needs facts from more than one passage."

    multi_hop: bool = Field(description="True if answering needs facts from more than one passage.")

    @classmethod
    def fallback(cls, question: str) -> Route:
        """Multi-hop: SRAG's own path, never a shortcut the router could not justify."""
        return cls(multi_hop=True)
