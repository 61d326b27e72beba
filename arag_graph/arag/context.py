"""A-RAG's context schemas: the settings of ``arag`` and ``arag_naive``, their Studio forms, and
the rows of the paper profile that only these two graphs have.

Each schema has its ``TypedDict`` beside it (``<Schema>Dict``: the type of ``context={...}``), and
the shared fields come from :class:`~arag_graph.run.configuration.GraphContext`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from arag_graph.core.profiles import ARAG_PAPER, DEVIATIONS, Deviation
from arag_graph.run.configuration import GraphContext, GraphContextDict

ToolSet = Literal["full", "no_keyword_search", "no_semantic_search", "no_chunk_read"]


class AragContext(GraphContext):
    """A-RAG: the agent with keyword_search, semantic_search and chunk_read (and the paper's ablations).

    :class:`AragNaiveContext` has the same agent settings but fixes ``tools`` and ``snippet_window``
    (as properties, so they are typed attributes of every agent context without being form fields).
    """

    max_steps: int = Field(
        default=15,
        ge=1,
        le=500,
        description="Step cap L: tool calls allowed before the agent must answer from what it has gathered.",
    )
    message_token_budget: int = Field(
        default=128_000,
        ge=1,
        le=10_000_000,
        description="Force the final answer once the conversation is longer than this many o200k tokens "
        "(the paper's released code: 128k).",
    )
    tools: ToolSet = Field(
        default="full",
        description="Tool set: all three tools, or one of the paper's ablations (without chunk_read, searches "
        "return whole chunks).",
    )
    system_prompt: str = Field(
        default="", max_length=20_000, description="Replaces the built-in system prompt when not empty."
    )
    hyde: bool = Field(
        default=False,
        description="semantic_search embeds a model-written hypothetical answer passage instead of the query (HyDE).",
    )
    dedupe_search_chunks: bool = Field(
        default=False,
        description="When searches return whole chunks (without chunk_read), show a chunk already returned as a "
        "one-line notice instead of its text again. Off, as in the paper, whose Naive variant pays for repeats.",
    )
    snippet_window: int = Field(
        default=1,
        ge=1,
        le=41,
        description="Sentences in each search snippet, centred on a matched sentence (ARAGOG's sentence window); "
        "1 shows the matched sentence alone, as A-RAG does.",
    )

    @classmethod
    def paper_profile(cls) -> tuple[Deviation, ...]:
        return (*DEVIATIONS, *PAPER_PROFILE)


class AragNaiveContext(GraphContext):
    """A-RAG (Naive): the agent loop with a single embedding search that returns whole chunks."""

    max_steps: int = Field(default=15, ge=1, le=500, description="Step cap L: searches allowed before answering.")
    message_token_budget: int = Field(
        default=128_000,
        ge=1,
        le=10_000_000,
        description="Force the final answer once the conversation is longer than this many o200k tokens.",
    )
    system_prompt: str = Field(
        default="", max_length=20_000, description="Replaces the built-in system prompt when not empty."
    )
    hyde: bool = Field(
        default=False,
        description="The search embeds a model-written hypothetical answer passage instead of the query (HyDE).",
    )
    dedupe_search_chunks: bool = Field(
        default=False,
        description="Show a chunk already returned as a one-line notice instead of its text again (off, as in "
        "the paper).",
    )

    @classmethod
    def paper_profile(cls) -> tuple[Deviation, ...]:
        return (*DEVIATIONS, *PAPER_PROFILE)

    @property
    def tools(self) -> Literal["naive"]:
        """A-RAG (Naive) has one tool, the embedding search that returns whole chunks."""
        return "naive"

    @property
    def snippet_window(self) -> int:
        """Its search returns whole chunks: there are no snippets to widen."""
        return 1


class AragNaiveContextDict(GraphContextDict, total=False):
    """:class:`AragNaiveContext` as a mapping, for type checkers."""

    max_steps: int
    message_token_budget: int
    system_prompt: str
    hyde: bool
    dedupe_search_chunks: bool


class AragContextDict(AragNaiveContextDict, total=False):
    """:class:`AragContext` as a mapping, for type checkers: A-RAG (Naive)'s settings and its own two."""

    tools: ToolSet
    snippet_window: int


AgentContext = AragContext | AragNaiveContext
"""The context of either agent graph: both have every setting the agent reads."""


PAPER_PROFILE: tuple[Deviation, ...] = (
    Deviation(
        setting="max_steps",
        scope="run",
        package=15,
        paper=20,
        paper_source=f"{ARAG_PAPER}, test-time scaling: step caps 5 to 20 (our notes on it give no other cap; "
        "we take its largest, where its accuracy was highest)",
        reason="a cheaper cap for interactive use (a judgement, not a measurement)",
        switch="--max-steps 20",
        contexts=(AragContext, AragNaiveContext),
    ),
    Deviation(
        setting="message_token_budget",
        scope="run",
        package=128_000,
        paper=128_000,
        paper_source=f"{ARAG_PAPER}, released code: a final answer is forced past a 128k-token history",
        reason="same as the paper; pinned so that a later package default cannot move paper runs",
        switch="--set message_token_budget=128000",
        contexts=(AragContext, AragNaiveContext),
    ),
)
"""The paper profile's rows that only the agent graphs have (the docs' table lists them with the rest)."""
