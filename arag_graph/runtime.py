"""Per-run resources: the configuration, the index and the chat model a node works with.

Graph builders take an optional index and model; what they leave open comes from the run's
configuration (LangGraph context), so one compiled graph can serve Studio users who pick another
index or model in the form. Indexes are loaded once per process and shared by concurrent runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import get_runtime

from arag_graph.configuration import GraphConfig
from arag_graph.index import HierarchicalIndex, load_index
from arag_graph.models import resolve_chat_model

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
        meta: dict[str, Any] = {"graph": self.graph, "index": str(self.index.path), "top_k": self.cfg.top_k}
        if hasattr(self.cfg, "max_steps"):
            meta["max_steps"] = self.cfg.max_steps
        return meta

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
            index=idx,
        )
        return RunResources(graph, cfg, idx, chat)

    return resolve
