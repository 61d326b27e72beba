"""The arag_naive graph, for langgraph.json (configured at run time; see graphs/__init__.py)."""

from arag_graph.registry import build_graph

graph = build_graph("arag_naive")
