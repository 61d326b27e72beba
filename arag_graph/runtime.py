"""Per-run resources: the configuration, the index and the chat model a node works with.

Graph builders take an optional index and model; what they leave open comes from the run's
configuration (LangGraph context), so one compiled graph can serve Studio users who pick another
index or model in the form. Indexes are loaded once per process and shared by concurrent runs.

Tracing: every run of a graph, the top-level one included, carries the same metadata (graph,
index, ``top_k``, step cap); see :class:`TracedGraph` for how the top-level run gets it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime

from arag_graph.configuration import GraphConfig
from arag_graph.errors import AragError
from arag_graph.index import HierarchicalIndex, load_index
from arag_graph.models import resolve_chat_model

try:  # where LangGraph keeps a run's Runtime in the config; a parent graph's reaches its subgraphs
    from langgraph._internal._constants import CONFIG_KEY_RUNTIME
except ImportError:  # pragma: no cover - depends on the installed LangGraph
    CONFIG_KEY_RUNTIME = "__pregel_runtime"

IndexLike = HierarchicalIndex | str | os.PathLike[str] | None


def resolve_index(index: IndexLike, cfg: GraphConfig) -> HierarchicalIndex:
    """The index given to the builder, else the configured path, else the bundled sample."""
    if isinstance(index, HierarchicalIndex):
        return index
    path = index or cfg.index_path
    if path:
        return load_index(path, cache=True)
    from arag_graph.sample import ensure_sample_index

    return ensure_sample_index(progress=False)


def index_label(index: IndexLike, cfg: GraphConfig) -> str:
    """The index :func:`resolve_index` picks, as trace metadata names it, without loading it.

    The same string as ``str(resolve_index(index, cfg).path)``: the top-level run is created before
    any node runs, and loading an index there would be blocking I/O on the caller's event loop.
    """
    if isinstance(index, HierarchicalIndex):
        return str(index.path)
    path = index or cfg.index_path
    if path:
        return str(Path(path))
    from arag_graph.sample import default_sample_index_path

    return str(default_sample_index_path())


def trace_metadata(graph: str, index: str, cfg: Any) -> dict[str, Any]:
    """Trace metadata: which graph, index and limits produced a run."""
    meta: dict[str, Any] = {"graph": graph, "index": index, "top_k": cfg.top_k}
    if hasattr(cfg, "max_steps"):
        meta["max_steps"] = cfg.max_steps
    return meta


@dataclass
class RunResources:
    """What a node needs for one run, resolved from the builder arguments and the configuration."""

    graph: str
    cfg: Any
    index: HierarchicalIndex
    model: BaseChatModel

    @property
    def metadata(self) -> dict[str, Any]:
        """Trace metadata: which graph, index and limits produced a run."""
        return trace_metadata(self.graph, str(self.index.path), self.cfg)

    def trace(self, config: RunnableConfig | None, run_name: str) -> RunnableConfig:
        """Config for a child run (a model or tool call): a clear name and the run's metadata."""
        return {
            "callbacks": (config or {}).get("callbacks"),
            "run_name": run_name,
            "metadata": self.metadata,
            "tags": [self.graph],
        }


def make_resolver(
    graph: str, index: IndexLike, model: BaseChatModel | str | None, config_cls: type[GraphConfig]
) -> Callable[[], RunResources]:
    """A function nodes call to get this run's configuration, index and model."""

    def resolve() -> RunResources:
        cfg = config_cls.from_context(get_runtime().context)
        idx = resolve_index(index, cfg)
        chat = resolve_chat_model(
            model if model is not None else cfg.model,
            base_url=cfg.base_url or None,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            reasoning_effort=cfg.reasoning_effort or None,
            timeout=cfg.timeout or None,
            max_retries=cfg.max_retries if cfg.max_retries >= 0 else None,
            index=idx,
        )
        return RunResources(graph, cfg, idx, chat)

    return resolve


# ---------------------------------------------------------------------------------------------
# The top-level run


class TracedGraph(CompiledStateGraph):
    """A compiled graph whose top-level run carries the run's trace metadata (graph, index, step cap).

    LangGraph creates the top-level run from the ``config`` of ``stream``/``astream`` before any
    node runs, and a node cannot change its parent run's metadata. The step cap and, for a graph
    built without an index, the index come from the run's context (LangGraph does not trace
    context by design), so they are unknown when the graph is compiled and ``with_config`` cannot
    carry them. This class therefore adds them to the config at the call: ``invoke``, ``ainvoke``,
    ``stream_events``/``astream_events`` and the LangGraph server all go through ``stream`` or
    ``astream``. Every run below (nodes, models, tools) inherits the same metadata.

    The values are this graph's own and win over metadata of the same keys from the caller or a
    parent graph. A context the graph would reject adds nothing here: the run then fails as it
    would without tracing.
    """

    def __init__(self, *, run_metadata: Callable[[Any], dict[str, Any]] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_metadata = run_metadata  # an attribute, so copy() and with_config() keep it

    def _traced(self, config: RunnableConfig | None, context: Any) -> RunnableConfig | None:
        if self.run_metadata is None:
            return config
        if context is None:  # a subgraph without context of its own runs with its parent's
            parent = ((config or {}).get("configurable") or {}).get(CONFIG_KEY_RUNTIME)
            context = getattr(parent, "context", None)
        try:
            metadata = self.run_metadata(context)
        except (AragError, TypeError, ValueError):
            return config
        return {**(config or {}), "metadata": {**((config or {}).get("metadata") or {}), **metadata}}

    # Plain methods returning LangGraph's own iterators (not generators wrapping them), so closing
    # or cancelling the stream reaches LangGraph directly.
    def stream(  # type: ignore[override]
        self, input: Any, config: RunnableConfig | None = None, *, context: Any = None, **kwargs: Any
    ) -> Iterator[Any]:
        return super().stream(input, self._traced(config, context), context=context, **kwargs)

    def astream(  # type: ignore[override]
        self, input: Any, config: RunnableConfig | None = None, *, context: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        return super().astream(input, self._traced(config, context), context=context, **kwargs)


def traced_graph(graph: CompiledStateGraph, name: str, index: IndexLike, config_cls: type[GraphConfig]) -> TracedGraph:
    """``graph`` (just compiled) named ``name`` in traces, its every run carrying the trace metadata."""

    def run_metadata(context: Any) -> dict[str, Any]:
        cfg = config_cls.from_context(context)
        return trace_metadata(name, index_label(index, cfg), cfg)

    attrs = {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}  # as Pregel.copy does
    traced = TracedGraph(**attrs, run_metadata=run_metadata)
    return traced.with_config(run_name=name, metadata={"graph": name})
