"""Run configuration: the base of every graph's pydantic context schema, which LangGraph Studio renders as a form.

Each graph family keeps its own schema in its folder (``arag/context.py``, ``corag/context.py``, ...),
built on :class:`GraphContext` (the settings every graph has) or :class:`RetrievalContext` (the
retriever and ARAGOG's techniques, shared by the one-shot graphs).

Graphs read it as LangGraph *context* (``graph.invoke(inputs, context={...})``). LangGraph turns a
mapping into the graph's schema before the first node runs, so a bad value fails there, once, with
a one-line :class:`~arag_graph.core.errors.ContextError` naming the field and what it accepts. Every field carries its
description and bounds, which is what ``langgraph dev`` serves to Studio.

Fields that choose a model, an endpoint or an index are the caller's wishes, checked against what
the operator allows (:mod:`arag_graph.run.policy`). Code that is itself the operator (the CLI, the
evaluation runner, a Python program building its own context) builds the context with
:meth:`GraphContext.trusted`, which skips that check.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from arag_graph.core.errors import AragError, ContextError
from arag_graph.core.limits import TOP_K_MAX, TOP_K_MIN
from arag_graph.core.profiles import DEFAULT_PROFILE, DEVIATIONS, Deviation, Profile, run_values
from arag_graph.retrievers.passages import Retriever
from arag_graph.run.policy import RunChoice, ServingPolicy

__all__ = [
    "TOP_K_MAX",
    "TOP_K_MIN",
    "ContextError",
    "GraphContext",
    "GraphContextDict",
    "ReasoningEffort",
    "RetrievalContext",
    "RetrievalContextDict",
    "UnknownContextKeyWarning",
]

ReasoningEffort = Literal["", "minimal", "low", "medium", "high"]


def _one_line(error: ValidationError, schema: str) -> str:
    problems = []
    for item in error.errors()[:3]:
        where = ".".join(str(p) for p in item.get("loc", ())) or "context"
        given = item.get("input")
        shown = f"={given!r}" if not isinstance(given, dict) else ""
        problems.append(f"{where}{shown}: {item.get('msg', 'invalid')}")
    return f"configuration for {schema} is not valid: {'; '.join(problems)}"


_TRUSTING: contextvars.ContextVar[bool] = contextvars.ContextVar("arag_trusting_context", default=False)
"""Set while :meth:`GraphContext.trusted` builds a context: the operator's own, not policed."""


class UnknownContextKeyWarning(UserWarning):
    """A library run's context named a setting its graph does not have; the setting had no effect."""


def _unknown_keys(cls: type[BaseModel], data: Mapping[str, Any]) -> str:
    """The one line naming ``data``'s keys that ``cls`` has no field for, and the fields it has ("" if none)."""
    unknown = sorted(set(data) - set(cls.model_fields))
    if not unknown:
        return ""
    valid = ", ".join(sorted(cls.model_fields))
    return f"{cls.__name__} has no setting {', '.join(map(repr, unknown))}; its settings are: {valid}"


class GraphContext(BaseModel):
    """Settings every graph understands."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: str = Field(
        default="",
        description="Chat model for this run, among those the server allows. Empty: the server's default "
        "($ARAG_MODEL, else `offline`, the deterministic no-LLM policy). `provider:name` uses that "
        "provider's LangChain package (for example `anthropic:claude-sonnet-4-5`).",
        max_length=200,
    )
    base_url: str = Field(
        default="",
        description="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, LM Studio), among those the server "
        "allows. Empty: the server's default endpoint.",
        max_length=2000,
    )
    temperature: float = Field(
        default=0.0, ge=0.0, le=2.0, allow_inf_nan=False, description="Sampling temperature of the chat model."
    )
    max_tokens: int = Field(
        default=16384,
        ge=1,
        le=1_000_000,
        description="Upper bound on tokens the model may write per call (the A-RAG paper uses at least 16,384).",
    )
    reasoning_effort: ReasoningEffort = Field(
        default="",
        description="Reasoning effort for reasoning models (for example GPT-5); empty leaves the provider default.",
    )
    timeout: float = Field(
        default=0.0,
        ge=0.0,
        le=3600.0,
        allow_inf_nan=False,
        description="Total seconds per attempt of a model request (connect, send and the whole reply) "
        "before giving up; 0: the server's default ($ARAG_MODEL_TIMEOUT, else 30).",
    )
    max_retries: int = Field(
        default=-1,
        ge=-1,
        le=10,
        description="Retries of a model request that failed or timed out; -1: the server's default "
        "($ARAG_MODEL_RETRIES, else 2).",
    )
    index_path: str = Field(
        default="",
        description="Index directory, under the index root the server allows ($ARAG_INDEX_ROOT; a relative "
        "path is taken from there). Empty: the server's index ($ARAG_INDEX, else the bundled sample).",
        max_length=4000,
    )
    top_k: int = Field(default=5, ge=TOP_K_MIN, le=TOP_K_MAX, description="Chunks per search (the A-RAG paper uses 5).")
    profile: Profile = Field(
        default=DEFAULT_PROFILE,
        description="package: the package's defaults; paper: the papers' values for every setting this run "
        "leaves unset (the A-RAG step cap, CoRAG's loop rule, ...; docs/guide/reproducing.md lists them).",
    )

    _trusted: bool = PrivateAttr(default=False)

    def __init__(self, **data: Any) -> None:
        """A caller's context (what LangGraph builds from a run's mapping): checked, then policed.

        Raises one line naming the field instead of pydantic's multi-line report, and refuses a
        model, endpoint or index the operator does not allow, before any node runs. Both errors
        are :class:`~arag_graph.core.errors.ContextError`, a ``ValueError``, so a LangGraph server
        returns the line to its client.
        """
        if unknown := _unknown_keys(type(self), data):
            # A key the graph does not have is never dropped in silence (a typo, ``max_step``, would
            # run with the default). A warning, not an error: code may pass one mapping to several
            # graphs, a parent graph its own keys. Served runs are refused before they get here
            # (:meth:`refuse_unknown_keys`), because the server drops such keys on the way.
            warnings.warn(f"{unknown} (ignored)", UnknownContextKeyWarning, stacklevel=2)
        if data.get("profile") not in (None, DEFAULT_PROFILE):
            # The profile fills what the run leaves unset; a value given explicitly wins. An unknown
            # profile is left to the schema, which refuses it in one line.
            with contextlib.suppress(AragError):
                data = {**run_values(data["profile"], type(self), type(self).paper_profile()), **data}
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ContextError(_one_line(exc, type(self).__name__)) from None
        self._trusted = _TRUSTING.get()
        self.choice()

    @classmethod
    def paper_profile(cls) -> tuple[Deviation, ...]:
        """The rows of the paper profile this schema reads: the shared ones, and a family's own.

        A family's schema adds the rows only it has (A-RAG's step cap, CoRAG's loop rule), each
        naming the schemas it applies to by class (:attr:`~arag_graph.core.profiles.Deviation.contexts`);
        :func:`arag_graph.registry.deviations` gathers every graph's rows for the docs' table.
        """
        return DEVIATIONS

    @classmethod
    def trusted(cls, **values: Any) -> Any:
        """The context as the operator sets it (CLI, evaluation runner, your own program): not policed.

        ``None`` values are left out, so callers can pass optional flags straight through. Unlike a
        caller's context, a field this graph does not have is an error: an operator's typo.
        """
        unknown = sorted(set(values) - set(cls.model_fields))
        if unknown:
            raise ContextError(
                f"unknown configuration field(s) {unknown} for {cls.__name__}; valid: {sorted(cls.model_fields)}"
            )
        token = _TRUSTING.set(True)
        try:
            return cls(**{k: v for k, v in values.items() if v is not None})
        finally:
            _TRUSTING.reset(token)

    @classmethod
    def refuse_unknown_keys(cls, context: Mapping[str, Any]) -> None:
        """A served run's context must name only this graph's settings: one-line ContextError otherwise.

        LangGraph's server drops context keys its context schema does not list before the graph
        sees them, so ``{"max_stpes": 3}`` would run with the default cap and no word to the caller.
        The graph factory of ``langgraph.json`` (:func:`arag_graph.registry.served_graph`) sees the
        run's context before that filter and calls this.
        """
        if unknown := _unknown_keys(cls, context):
            raise ContextError(unknown)

    @classmethod
    def of_run(cls, context: Any) -> Any:
        """This graph's context from whatever the run carries.

        A context of another type (a parent graph's own schema, reaching a subgraph) is not ours:
        the defaults apply. A mapping is validated as a caller's request.
        """
        if isinstance(context, cls):
            return context
        if isinstance(context, GraphContext):  # another graph's settings: keep what both share
            shared = {name: getattr(context, name) for name in GraphContext.model_fields}
            return cls.trusted(**shared) if context._trusted else cls(**shared)
        if isinstance(context, dict):
            return cls(**context)
        return cls()

    @property
    def is_trusted(self) -> bool:
        """Whether the operator made this context (CLI, Python) rather than a served run's caller."""
        return self._trusted

    def choice(self) -> RunChoice:
        """Model, endpoint and index of this run: checked against the operator's policy unless trusted."""
        policy = ServingPolicy.from_env()
        if self._trusted:
            return RunChoice(
                self.model.strip() or policy.default_model,
                self.base_url.strip() or policy.default_base_url,
                self.index_path.strip() or policy.default_index,
            )
        return policy.resolve(self.model, self.base_url, self.index_path)

    def settings(self) -> dict[str, Any]:
        """The graph's own settings, for trace metadata and records (no endpoint, no prompt text)."""
        skip = {"base_url", "system_prompt"}
        return {k: v for k, v in self.model_dump().items() if k not in skip}


class GraphContextDict(TypedDict, total=False):
    """:class:`GraphContext` as a mapping, for type checkers: the type of ``context={...}`` in a
    builder's ``invoke``/``stream``, so mypy or pyright flags a misspelt setting or a wrong type.
    Each schema has one (``<Schema>Dict``); tests/test_configuration.py checks they agree field by field."""

    model: str
    base_url: str
    temperature: float
    max_tokens: int
    reasoning_effort: ReasoningEffort
    timeout: float
    max_retries: int
    index_path: str
    top_k: int
    profile: Profile


class RetrievalContext(GraphContext):
    """How the one-shot graphs (Naive RAG, CoRAG, SRAG) retrieve: the retriever and ARAGOG's techniques.

    One set of fields for every graph that retrieves through :func:`arag_graph.retrievers.passages.retrieve_passages`,
    so a technique is switched the same way everywhere (``--set retriever=amr``, ``--grid aragog``).
    """

    retriever: Retriever = Field(
        default="dense",
        description="dense (sentence embeddings, best sentence per chunk), bm25 (rank-bm25), hybrid (reciprocal "
        "rank fusion of both), amr (ARAGOG's auto-merging: top_k sentences merged into their chunk or document) or "
        "dsi (ARAGOG's document summary index: the best documents by summary, then the top_k chunks inside them; "
        "needs an index built with --summaries).",
    )
    sentence_window: bool = Field(
        default=False,
        description="ARAGOG's sentence-window retrieval: the top_k sentences, each inside its window, instead of "
        "whole chunks (with amr: the sentences that did not merge).",
    )
    window: int = Field(
        default=3,
        ge=1,
        le=41,
        description="Sentences in each window, centred on the matched sentence (ARAGOG's window: 3, the best in "
        "its comparison, is the sentence with one neighbour on each side; 7 is three on each side).",
    )
    merge_threshold: float = Field(
        default=0.5,
        ge=0.3,
        le=0.7,
        allow_inf_nan=False,
        description="amr: a chunk (document) replaces its retrieved sentences (chunks) when more than this share "
        "of its children were retrieved (ARAGOG tunes it in 0.3-0.7).",
    )
    summary_documents: int = Field(
        default=3,
        ge=1,
        le=20,
        description="dsi: documents kept by their summary's similarity before the top_k chunks are picked inside "
        "them (at least this many; more while they hold fewer than top_k chunks).",
    )
    multi_query: int = Field(
        default=0,
        ge=0,
        le=5,
        description="ARAGOG's multi-query retrieval: the model writes this many rewrites of each query, each is "
        "retrieved too and the rankings are fused (reciprocal rank); 0: off. Offline, rule-based rewrites.",
    )
    mmr: bool = Field(
        default=False,
        description="ARAGOG's maximal marginal relevance: pick the top_k of `candidates` passages trading relevance "
        "to the query against similarity to the passages already picked (mmr_lambda).",
    )
    mmr_lambda: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="mmr: 1 ranks by relevance alone, 0 by diversity alone (LangChain's default: 0.5).",
    )
    rerank: bool = Field(
        default=False,
        description="ARAGOG's LLM reranking: the model rates the relevance of `candidates` passages and the top_k "
        "best rated are kept, best first. Offline: a documented word-overlap rule.",
    )
    candidates: int = Field(
        default=20,
        ge=1,
        le=50,
        description="mmr and rerank: passages retrieved before top_k are picked among them (at least top_k).",
    )


class RetrievalContextDict(GraphContextDict, total=False):
    """:class:`RetrievalContext` as a mapping, for type checkers."""

    retriever: Retriever
    sentence_window: bool
    window: int
    merge_threshold: float
    summary_documents: int
    multi_query: int
    mmr: bool
    mmr_lambda: float
    rerank: bool
    candidates: int
