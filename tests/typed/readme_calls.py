"""The README's and the library guide's calls, for mypy (tests/test_typing.py): never run, only checked.

``assert_type`` fails the check when a public name is seen as ``Any`` (the lazy exports of
``arag_graph/__init__.py``) or a builder's output type is lost.
"""

from __future__ import annotations

from typing import assert_type

from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool
from langgraph.types import GraphOutput

from arag_graph import HierarchicalIndex, build_index, create_retrieval_tools, load_index, make_retriever
from arag_graph.arag.context import AragContext, AragContextDict
from arag_graph.arag.graph import AragOutputState, build_arag_graph
from arag_graph.corag.graph import build_corag_graph
from arag_graph.run.runtime import RagGraph


def readme() -> None:
    index = load_index("indexes/sample")
    assert_type(index, HierarchicalIndex)
    index.keyword_search(["Two Dollar Radio"], top_k=3)
    index.keyword_search("Two Dollar Radio", top_k=3)  # a string is one keyword
    graph = build_arag_graph(index, model="offline")
    out = graph.invoke({"question": "Where is the publisher of Grace Krilanovich's first novel based?"})
    assert_type(graph, RagGraph[AragContext | AragContextDict, AragOutputState])
    assert_type(out, AragOutputState)  # typed by default (tests/typed_rejected/ has the misses it catches)
    assert_type(graph.invoke({"question": "q"}, version="v2"), GraphOutput[AragOutputState])
    print(out["answer"], out["citations"], out["read_chunks"], out["steps"])
    tools = create_retrieval_tools(index)
    assert_type(tools, list[BaseTool])
    create_retrieval_tools(index, tools=("keyword_search", "semantic_search"))


def library_guide() -> None:
    from arag_graph import build_arag_graph as from_root  # every builder is a (lazy) name of the package

    index = build_index("arag_graph/data/sample/corpus.json", "indexes/mine")
    assert_type(from_root(index).invoke({"question": "q"}), AragOutputState)
    assert_type(index, HierarchicalIndex)
    index.semantic_search("who directed Maximum Overdrive", top_k=5)
    graph = build_arag_graph(index, model="offline")
    graph.invoke({"question": "Who directed Maximum Overdrive?"}, context={"max_steps": 10})
    graph.invoke({"question": "Who directed Maximum Overdrive?"}, context=AragContext.trusted(max_steps=10))
    build_corag_graph(index, "offline").invoke({"question": "q"}, context={"decoding": "best_of_n", "n": 2})
    docs = make_retriever(index, k=5).invoke("who directed Maximum Overdrive")
    assert_type(docs, list[Document])
    settings: AragContextDict = {"max_steps": 3, "tools": "no_chunk_read"}  # a mapping kept aside is typed too
    graph.invoke({"messages": [HumanMessage("a follow-up")]}, {"configurable": {"thread_id": "t"}}, context=settings)
