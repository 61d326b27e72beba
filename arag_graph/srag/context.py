"""SRAG's context schema, with its ``TypedDict``."""

from __future__ import annotations

from pydantic import Field

from arag_graph.run.configuration import RetrievalContext, RetrievalContextDict


class SragContext(RetrievalContext):
    """SRAG: decomposition into dependent sub-questions, triplet extraction, a fact table, an answer."""

    decompose: bool = Field(
        default=True,
        description="Split the question into sub-questions (off: the question is its only sub-question; paper "
        "ablation).",
    )
    structured_extraction: bool = Field(
        default=True,
        description="Extract (subject, predicate, object) triplets (off: answer from the raw passages; paper "
        "ablation).",
    )
    table_aggregation: bool = Field(
        default=True,
        description="Aggregate triplets into one Subject | Predicate | Object | Source table (off: per-passage fact "
        "lists; paper ablation).",
    )
    relevance_threshold: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="Triplets less relevant than this to their sub-question are dropped.",
    )
    route: bool = Field(default=False, description="Send questions the router judges single-hop to naive_rag instead.")
    max_sub_questions: int = Field(
        default=5, ge=1, le=20, description="Upper bound on sub-questions kept from the decomposition."
    )


class SragContextDict(RetrievalContextDict, total=False):
    """:class:`SragContext` as a mapping, for type checkers."""

    decompose: bool
    structured_extraction: bool
    table_aggregation: bool
    relevance_threshold: float
    route: bool
    max_sub_questions: int
