"""CoRAG's context schema (with its ``TypedDict``) and the rows of the paper profile only CoRAG has."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from arag_graph.core.profiles import CORAG_PAPER, DEVIATIONS, Deviation
from arag_graph.run.configuration import RetrievalContext, RetrievalContextDict

Decoding = Literal["greedy", "best_of_n", "tree"]
PenaltySetting = Literal["auto", "confidence"]


class CoragContext(RetrievalContext):
    """CoRAG: chain of retrieval with query reformulation, a sub-answer and a sufficiency check per step,
    decoded greedily, best-of-N or by tree search (the paper's test-time scaling knobs: ``max_steps``,
    ``n``, ``beam``)."""

    max_steps: int = Field(
        default=3,
        ge=1,
        le=50,
        description="Step cap S: retrievals before answering (S=1 is one-shot RAG; the paper finds S=3 gives most "
        "of the gain).",
    )
    hyde: bool = Field(
        default=False,
        description="Embed a model-written hypothetical answer passage for each query (dense and hybrid).",
    )
    loop_similarity: float = Field(
        default=0.9,
        gt=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="A reformulated query this similar (token Jaccard) to an earlier one counts as a loop and stops "
        "the chain.",
    )
    max_context_tokens: int = Field(
        default=0,
        ge=0,
        le=10_000_000,
        description="Cap on passage tokens the check, reformulation and answer see (best first); 0: the whole "
        "union, as in CoRAG.",
    )
    fixed_length: bool = Field(
        default=False,
        description="Fixed-length chains, as in the paper's chain-length scaling: no sufficiency check, and only "
        "the step cap ends a chain (not a repeated query, nor a retrieval without new chunks), so max_steps is the "
        "chain's length.",
    )
    penalty: PenaltySetting = Field(
        default="auto",
        description="How best_of_n and tree score a chain step: auto uses the paper's penalty (the probability of "
        "the sub-answer 'No relevant information found', one extra request per step) where the endpoint returns "
        "log-probabilities, else the sub-answer's confidence; confidence always uses the stand-in.",
    )
    decoding: Decoding = Field(
        default="greedy",
        description="CoRAG's decoding strategy: greedy (one chain), best_of_n (n chains, the one with the lowest "
        "penalty answers) or tree (a beam search over sampled reformulations).",
    )
    n: int = Field(
        default=4,
        ge=1,
        le=16,
        description="best_of_n: chains sampled per question (the first at the run's temperature, the others at "
        "sample_temperature). Each costs a whole chain of retrievals and model calls.",
    )
    beam: int = Field(
        default=1, ge=1, le=4, description="tree: paths kept at each step (the beam's width; the paper uses 1)."
    )
    expand: int = Field(
        default=4,
        ge=1,
        le=8,
        description="tree: candidate next queries sampled for each kept path at each step (the paper uses 4).",
    )
    rollouts: int = Field(
        default=2,
        ge=0,
        le=4,
        description="tree: chains rolled out (at most 2 more steps) from each candidate to score it by their "
        "average penalty (the paper uses 2); 0 scores a candidate by its own penalty, much cheaper.",
    )
    sample_temperature: float = Field(
        default=0.7,
        gt=0.0,
        le=2.0,
        allow_inf_nan=False,
        description="Temperature of the sampled reformulations of best_of_n and tree (the paper uses 0.7).",
    )

    @classmethod
    def paper_profile(cls) -> tuple[Deviation, ...]:
        return (*DEVIATIONS, *PAPER_PROFILE)


class CoragContextDict(RetrievalContextDict, total=False):
    """:class:`CoragContext` as a mapping, for type checkers."""

    max_steps: int
    hyde: bool
    loop_similarity: float
    max_context_tokens: int
    fixed_length: bool
    penalty: PenaltySetting
    decoding: Decoding
    n: int
    beam: int
    expand: int
    rollouts: int
    sample_temperature: float


PAPER_PROFILE: tuple[Deviation, ...] = (
    Deviation(
        setting="loop_similarity",
        scope="run",
        package=0.9,
        paper=1.0,
        paper_source=f"{CORAG_PAPER}, practical requirements: stop when the same query comes again",
        reason="a near-repeat (token Jaccard >= 0.9) retrieves nearly the same passages and costs a whole step; "
        "a judgement, not a measurement",
        switch="--set loop_similarity=1.0",
        contexts=(CoragContext,),
    ),
    Deviation(
        setting="fixed_length",
        scope="run",
        package=False,
        paper=True,
        paper_source=f"{CORAG_PAPER}, decoding: chains of a fixed length L are the test-time knob",
        reason="stopping when the sufficiency check is satisfied saves retrievals and model calls on easy "
        "questions (the method notes' stop rule)",
        switch="--set fixed_length=true",
        contexts=(CoragContext,),
    ),
)
"""The paper profile's rows that only CoRAG has (the docs' table lists them with the rest)."""
