"""Deprecated alias: ``arag_graph.retrieval.techniques`` moved to :mod:`arag_graph.retrievers.techniques` in 0.2.0.

This old path warns and forwards every name; it goes in 0.3.0 (CHANGELOG.md).
"""

from arag_graph.core.deprecation import forward_module
from arag_graph.retrievers import techniques as _new

__getattr__ = forward_module(__name__, _new)
