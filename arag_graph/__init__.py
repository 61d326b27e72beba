"""arag-graph: A-RAG's hierarchical retrieval tools and agent as LangGraph graphs.

Start with :func:`build_index` / :func:`load_index`, then :func:`create_retrieval_tools` for the
three tools, or :func:`build_arag_graph` for the agent (every graph's builder is here:
``build_arag_graph``, ``build_arag_naive_graph``, ``build_naive_rag_graph``, ``build_direct_graph``,
``build_corag_graph``, ``build_srag_graph``). Names are imported lazily so that ``import arag_graph``
stays cheap (LangGraph's graphs, Chroma and torch load only when a name that needs them is used).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see of the lazy names below (every name of _EXPORTS; `as`: re-exported)
    from arag_graph.arag.graph import build_arag_graph as build_arag_graph
    from arag_graph.arag.graph import build_arag_naive_graph as build_arag_naive_graph
    from arag_graph.baselines.graph import build_direct_graph as build_direct_graph
    from arag_graph.baselines.graph import build_naive_rag_graph as build_naive_rag_graph
    from arag_graph.corag.graph import build_corag_graph as build_corag_graph
    from arag_graph.core.documents import Chunk as Chunk
    from arag_graph.core.documents import SearchHit as SearchHit
    from arag_graph.core.documents import SourceDocument as SourceDocument
    from arag_graph.core.errors import AragError as AragError
    from arag_graph.index.build import BuildOptions as BuildOptions
    from arag_graph.index.build import build_index as build_index
    from arag_graph.index.hierarchical import HierarchicalIndex as HierarchicalIndex
    from arag_graph.index.load import load_index as load_index
    from arag_graph.index.vectorstore import AragVectorStore as AragVectorStore
    from arag_graph.retrievers.langchain_retriever import IndexRetriever as IndexRetriever
    from arag_graph.retrievers.langchain_retriever import make_retriever as make_retriever
    from arag_graph.srag.graph import build_srag_graph as build_srag_graph
    from arag_graph.tools.toolkit import AragToolkit as AragToolkit
    from arag_graph.tools.toolkit import create_retrieval_tools as create_retrieval_tools

_EXPORTS = {
    "AragError": "arag_graph.core.errors",
    "Chunk": "arag_graph.core.documents",
    "SourceDocument": "arag_graph.core.documents",
    "HierarchicalIndex": "arag_graph.index.hierarchical",
    "IndexRetriever": "arag_graph.retrievers.langchain_retriever",
    "make_retriever": "arag_graph.retrievers.langchain_retriever",
    "SearchHit": "arag_graph.core.documents",
    "BuildOptions": "arag_graph.index.build",
    "build_index": "arag_graph.index.build",
    "load_index": "arag_graph.index.load",
    "create_retrieval_tools": "arag_graph.tools.toolkit",
    "AragToolkit": "arag_graph.tools.toolkit",
    "AragVectorStore": "arag_graph.index.vectorstore",
    "build_arag_graph": "arag_graph.arag.graph",
    "build_arag_naive_graph": "arag_graph.arag.graph",
    "build_naive_rag_graph": "arag_graph.baselines.graph",
    "build_direct_graph": "arag_graph.baselines.graph",
    "build_corag_graph": "arag_graph.corag.graph",
    "build_srag_graph": "arag_graph.srag.graph",
}

__all__ = sorted(_EXPORTS)
# The one place the version is written: pyproject.toml reads it (setuptools' dynamic version), and
# `arag --version` prints it.
__version__ = "0.2.0"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'arag_graph' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
