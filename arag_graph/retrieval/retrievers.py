"""Deprecated alias: ``arag_graph.retrieval.retrievers`` moved to :mod:`arag_graph.retrievers.passages` in 0.2.0.

This old path warns and forwards every name; it goes in 0.3.0 (CHANGELOG.md).
"""

from arag_graph.core.deprecation import forward_module
from arag_graph.retrievers import passages as _new

__getattr__ = forward_module(__name__, _new)
