"""Calls mypy must REJECT (tests/test_typing.py): each line whose comment starts `rejected:` must be a mypy
error whose line contains the rest of that comment, and no other line may be one. Never run, only checked.

Each rejected call follows the same call with a right context, which mypy accepts: the context is
what makes the difference. Before the context TypedDicts, ``context=`` was ``Any`` to mypy and
every call here passed. (mypy names the key for a TypedDict, but a mistake inside the overloaded
``invoke`` is reported as its ``call-overload``.)
"""

from __future__ import annotations

from arag_graph import load_index
from arag_graph.arag.context import AragContextDict
from arag_graph.arag.graph import build_arag_graph, build_arag_naive_graph
from arag_graph.baselines.graph import build_naive_rag_graph
from arag_graph.corag.graph import build_corag_graph
from arag_graph.run.state import InputState
from arag_graph.srag.graph import build_srag_graph

index = load_index("indexes/sample")
question: InputState = {"question": "Who directed Maximum Overdrive?"}
arag = build_arag_graph(index, "offline")

arag.invoke(question, context={"max_steps": 10})  # the README's call
arag.invoke(question, context={"max_stpes": 10})  # rejected: [call-overload]
arag.invoke(question, context={"max_steps": "ten"})  # rejected: [call-overload]
arag.invoke(question, context={"tools": "no_chunk_read"})
arag.invoke(question, context={"tools": "everything"})  # rejected: [call-overload]
arag.stream(question, context={"top_k": 5})
arag.stream(question, context={"top_k": 5.5})  # rejected: Argument "context" to "stream"
naive = build_arag_naive_graph(index)
naive.invoke(question, context={"hyde": True})
naive.invoke(question, context={"tools": "full"})  # rejected: [call-overload]
corag = build_corag_graph(index)
corag.invoke(question, context={"decoding": "tree", "beam": 2})
corag.invoke(question, context={"decoding": "beam"})  # rejected: [call-overload]
corag.invoke(question, context={"snippet_window": 3})  # rejected: [call-overload]
naive_rag = build_naive_rag_graph(index)
naive_rag.invoke(question, context={"retriever": "bm25", "hyde": True})
naive_rag.invoke(question, context={"retriever": "bm25", "max_steps": 2})  # rejected: [call-overload]
srag = build_srag_graph(index)
srag.invoke(question, context={"decompose": False})
srag.invoke(question, context={"decompose": "yes"})  # rejected: [call-overload]
settings: AragContextDict = {"max_steps": 3}
mistyped: AragContextDict = {"max_step": 3}  # rejected: Extra key "max_step" for TypedDict "AragContextDict"
