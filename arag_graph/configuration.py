"""Typed run configuration, one dataclass per graph, shown as a form in LangGraph Studio.

Graphs read it as LangGraph *context* (``graph.invoke(inputs, context={...})``); every field has a
default so a bare invocation works. Fields shared by all graphs live in :class:`GraphConfig`.
"""

from __future__ import annotations

import functools
import os
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args, get_origin

from arag_graph.errors import AragError

ToolSet = Literal["full", "no_keyword_search", "no_semantic_search", "no_chunk_read"]
ReasoningEffort = Literal["", "minimal", "low", "medium", "high"]


def _env(name: str, default: str) -> Any:
    return field(default_factory=lambda: os.environ.get(name, default))


_RANGES: tuple[tuple[str, float, float | None], ...] = (
    ("temperature", 0.0, 2.0),
    ("max_tokens", 1, None),
    ("timeout", 0.0, 3600.0),
    ("max_retries", -1, 10),
    ("max_steps", 0, None),
    ("message_token_budget", 1, None),
    ("window", 0, None),
    ("loop_similarity", 0.0, 1.0),
    ("max_context_tokens", 0, None),
    ("relevance_threshold", 0.0, 1.0),
    ("max_sub_questions", 1, None),
)
_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off", ""}


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """``value`` as the field's declared type (bool, int, float, str or a Literal of strings)."""
    if get_origin(hint) is Literal:
        choices = get_args(hint)
        if value not in choices:
            raise AragError(f"configuration {name}={value!r} is not valid; choose one of {list(choices)}")
        return value
    try:
        if hint is bool:
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                return value.strip().lower() in _TRUE
            if isinstance(value, (bool, int)) and value in (0, 1):
                return bool(value)
            raise ValueError
        if hint is int:
            if isinstance(value, bool) or float(value) != int(float(value)):
                raise ValueError
            return int(float(value))
        if hint is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if hint is str:
            return "" if value is None else str(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(float("inf"))
        kind = {bool: "true or false", int: "a whole number", float: "a number"}.get(hint, str(hint))
        raise AragError(f"configuration {name}={value!r} is not valid; give {kind}") from None
    return value


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    """Resolved field annotations per configuration class (resolving them is slow, and a run
    builds its configuration in every node and edge)."""
    return typing.get_type_hints(cls)


@dataclass(kw_only=True)
class GraphConfig:
    """Settings every graph understands."""

    model: str = _env("ARAG_MODEL", "offline")
    """Chat model: ``offline`` (the no-LLM policy) or an OpenAI-compatible model name such as
    ``gpt-4o-mini`` / ``openai:gpt-5-mini``; key and URL come from the environment."""
    base_url: str = _env("ARAG_BASE_URL", "")
    """Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio); empty for OpenAI."""
    temperature: float = 0.0
    max_tokens: int = 16384
    """Upper bound on tokens the model may write per call (the paper uses at least 16,384)."""
    reasoning_effort: ReasoningEffort = ""
    """Passed through to reasoning models (for example GPT-5); empty leaves the provider default."""
    timeout: float = 0.0
    """Seconds to wait for one model reply before giving up; 0: ``$ARAG_MODEL_TIMEOUT``, else 30."""
    max_retries: int = -1
    """Retries of a model request that failed or timed out; -1: ``$ARAG_MODEL_RETRIES``, else 2."""
    index_path: str = _env("ARAG_INDEX", "")
    """Index directory; empty means the bundled sample index (built on first use)."""
    top_k: int = 5
    """Chunks per search (the paper uses 5)."""

    def __post_init__(self) -> None:
        """Coerce values that arrive as text (forms, environment, JSON) and reject impossible ones.

        A bad value fails here, at the start of a run, with one line naming the field and what it
        accepts, instead of as a type error deep inside a node.
        """
        hints = _field_types(type(self))
        for f in fields(self):
            setattr(self, f.name, _coerce(f.name, getattr(self, f.name), hints[f.name]))
        self.top_k = max(1, min(20, self.top_k))  # same clamp as the tools' top_k
        for name, low, high in _RANGES:
            value = getattr(self, name, None)
            # Written so that NaN, which compares false with everything, is out of range too.
            if value is not None and not (low <= value and (high is None or value <= high)):
                bound = f"between {low} and {high}" if high is not None else f"at least {low}"
                raise AragError(f"configuration {name}={value!r} is out of range; give a value {bound}")

    @classmethod
    def from_context(cls, context: Any) -> Any:
        """Accept the dataclass itself, a mapping (from Studio or the SDK), or None."""
        if isinstance(context, cls):
            return context
        if context is None:
            return cls()
        if isinstance(context, GraphConfig):
            context = {f.name: getattr(context, f.name) for f in fields(context)}
        if not isinstance(context, dict):
            raise AragError(f"configuration must be a mapping or {cls.__name__}, got {type(context).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(context) - names)
        if unknown:
            raise AragError(f"unknown configuration field(s) {unknown} for {cls.__name__}; valid: {sorted(names)}")
        return cls(**context)


@dataclass(kw_only=True)
class AragConfig(GraphConfig):
    """The A-RAG agent (and its ablations)."""

    max_steps: int = 15
    """Step cap L: tool calls allowed before the agent is made to answer from what it has."""
    message_token_budget: int = 128_000
    """Force the final answer once the conversation is longer than this many o200k tokens."""
    tools: ToolSet = "full"
    """Tool set: all three tools, or one of the paper's ablations."""
    system_prompt: str = ""
    """Replaces the built-in system prompt when non-empty."""
    hyde: bool = False
    """semantic_search embeds a model-written hypothetical answer passage instead of the query (HyDE)."""


@dataclass(kw_only=True)
class AragNaiveConfig(GraphConfig):
    """A-RAG (Naive): the same loop with a single embedding search that returns whole chunks."""

    max_steps: int = 15
    """Step cap L (searches allowed before the agent must answer)."""
    message_token_budget: int = 128_000
    """Force the final answer once the conversation is longer than this many o200k tokens."""
    system_prompt: str = ""
    """Replaces the built-in system prompt when non-empty."""
    hyde: bool = False
    """The search embeds a model-written hypothetical answer passage instead of the query (HyDE)."""


Retriever = Literal["dense", "bm25", "hybrid"]


@dataclass(kw_only=True)
class DirectConfig(GraphConfig):
    """Direct answer: the model answers from its own knowledge, no retrieval."""


@dataclass(kw_only=True)
class NaiveRagConfig(GraphConfig):
    """Naive RAG: one retrieval of ``top_k`` chunks, then one answer."""

    retriever: Retriever = "dense"
    """dense (sentence embeddings aggregated to chunks), bm25 (rank-bm25) or hybrid (reciprocal rank fusion)."""
    hyde: bool = False
    """Embed a model-written hypothetical answer passage instead of the question (dense and hybrid)."""
    sentence_window: bool = False
    """ARAGOG's sentence windows: the top_k sentences, each with ``window`` neighbours each side, instead of chunks."""
    window: int = 3
    """Neighbouring sentences kept on each side in sentence-window mode (ARAGOG found 3 best)."""


@dataclass(kw_only=True)
class CoragConfig(GraphConfig):
    """CoRAG: chain of retrieval with query reformulation and a sufficiency check per step."""

    max_steps: int = 3
    """Step cap S: retrievals before answering (S=1 is one-shot RAG; the paper finds S=3 gives most of the gain)."""
    retriever: Retriever = "dense"
    """Retriever for each step: dense, bm25 or hybrid."""
    hyde: bool = False
    """Embed a model-written hypothetical answer passage for each query (dense and hybrid)."""
    loop_similarity: float = 0.9
    """A reformulated query this similar (token Jaccard) to an earlier one counts as a loop and stops the chain."""
    max_context_tokens: int = 0
    """Cap on passage tokens the check, reformulation and answer see (best first); 0: the whole union, as in CoRAG.

    With S=3 and top_k=5 the union stays near 15 chunks; set a cap for corpora of long chunks or small-context models.
    """


@dataclass(kw_only=True)
class SragConfig(GraphConfig):
    """SRAG: decomposition into dependent sub-questions, triplet extraction, a fact table, an answer."""

    decompose: bool = True
    """Split the question into sub-questions (off: the question is its only sub-question; paper ablation)."""
    structured_extraction: bool = True
    """Extract (subject, predicate, object) triplets (off: answer from raw passages; paper ablation)."""
    table_aggregation: bool = True
    """Aggregate triplets into one Subject | Predicate | Object | Source table (off: per-passage fact lists)."""
    relevance_threshold: float = 0.3
    """Triplets less relevant than this to their sub-question are dropped."""
    route: bool = False
    """Send questions the router judges single-hop to naive_rag instead."""
    max_sub_questions: int = 5
    """Upper bound on sub-questions kept from the decomposition."""
