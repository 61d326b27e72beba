"""The corag graph, for langgraph.json (configured at run time; see arag_graph/served/__init__.py)."""

from arag_graph.registry import served_graph

graph = served_graph("corag")
