"""Deprecated alias: ``arag_graph.agent.graph`` moved to :mod:`arag_graph.arag.graph` in 0.2.0.

This old path warns and forwards every name; it goes in 0.3.0 (CHANGELOG.md).
"""

from arag_graph.arag import graph as _new
from arag_graph.core.deprecation import forward_module

__getattr__ = forward_module(__name__, _new)
