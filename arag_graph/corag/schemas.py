"""CoRAG's structured outputs: the check, the next query and a step's sub-answer, each with its fallback.

What the model sees of a schema is its ``instructions`` and field descriptions
(:class:`~arag_graph.llm.structured.ModelFacing`); the docstrings are for developers. Each schema's
``fallback`` is what a chain goes on with when a model's reply cannot be used
(:func:`arag_graph.llm.structured.structured_call` asks twice first).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from arag_graph.llm.structured import ModelFacing

NO_RELEVANT_INFORMATION = "No relevant information found"
"""The sub-answer of a CoRAG step whose documents do not answer its query (the paper's wording)."""


class Sufficiency(ModelFacing):
    """CoRAG's intermediate check: is what was retrieved enough to answer?


    ``reasoning`` comes first so that a model writes what the passages establish before it judges
    (fields are generated in schema order); it is CoRAG's intermediate reasoning, which the next
    reformulation reads and rejection-sampled training chains keep as the step's sub-answer.
    """

    instructions: ClassVar[str] = "Whether the passages retrieved so far are enough to answer the question."

    reasoning: str = Field(
        default="",
        description="What the passages establish so far towards the answer, in one or two sentences "
        "(name the entities found, such as the person or work the question describes indirectly).",
    )
    is_sufficient: bool = Field(description="True if the retrieved passages contain enough to answer the question.")
    missing_info: str = Field(default="", description="What is still missing, if anything; empty when sufficient.")
    confidence: float = Field(default=0.0, ge=0.0, le=1.0, description="Confidence in the judgement, 0 to 1.")

    @classmethod
    def fallback(cls, question: str) -> Sufficiency:
        """Not sufficient, nothing said to be missing, no confidence: the chain goes on searching."""
        return cls(is_sufficient=False, missing_info="", confidence=0.0)


class Reformulation(ModelFacing):
    """CoRAG's next query, aimed at the missing information."""

    instructions: ClassVar[str] = "The next search query, aimed at the information that is still missing."

    query: str = Field(description="A search query for the missing information.")

    @classmethod
    def fallback(cls, question: str) -> Reformulation:
        """The question itself, which the loop rule then stops as a repeat of the first query."""
        return cls(query=question)


class SubAnswer(ModelFacing):
    """CoRAG's sub-answer: what one step's documents say about that step's query.

    ``confidence`` is this package's stand-in for the CoRAG paper's penalty. The paper scores how
    likely the model would write "No relevant information found"; chat APIs cannot score a
    given string, so the model states instead how sure it is that the documents answer the query,
    and a step's penalty is ``1 - confidence`` (see :func:`arag_graph.corag.graph.step_penalty`).
    """

    instructions: ClassVar[str] = "The answer to a search query from the documents it retrieved."

    answer: str = Field(
        description=f"A short answer to the query taken from the documents; exactly '{NO_RELEVANT_INFORMATION}' "
        "when they do not answer it."
    )
    confidence: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="How sure you are that the documents answer the query: 0 when they hold nothing relevant, "
        "1 when they state the answer plainly.",
    )

    @classmethod
    def fallback(cls, question: str) -> SubAnswer:
        """No relevant information found, confidence 0: the step's penalty is 1."""
        return cls(answer=NO_RELEVANT_INFORMATION, confidence=0.0)
