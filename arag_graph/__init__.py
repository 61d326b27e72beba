"""arag-graph: A-RAG's hierarchical retrieval tools and agent as LangGraph graphs.

Start with :func:`build_index` / :func:`load_index`, then :func:`create_retrieval_tools` for the
three tools, or :func:`build_arag_graph` for the agent. Names are imported lazily so that
``import arag_graph`` stays cheap (Chroma and torch load only when an index is used).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AragError": "arag_graph.core.errors",
    "Chunk": "arag_graph.core.documents",
    "SourceDocument": "arag_graph.core.documents",
    "HierarchicalIndex": "arag_graph.index.hierarchical",
    "IndexRetriever": "arag_graph.retrieval.langchain_retriever",
    "make_retriever": "arag_graph.retrieval.langchain_retriever",
    "SearchHit": "arag_graph.core.documents",
    "BuildOptions": "arag_graph.index.build",
    "build_index": "arag_graph.index.build",
    "load_index": "arag_graph.index.load",
    "create_retrieval_tools": "arag_graph.agent.tools",
}

__all__ = sorted(_EXPORTS)
# The one place the version is written: pyproject.toml reads it (setuptools' dynamic version), and
# `arag --version` prints it.
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'arag_graph' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
