"""Deprecated alias: ``arag_graph.agent.mcp_server`` moved to :mod:`arag_graph.tools.mcp_server` in 0.2.0.

This old path warns and forwards every name; it goes in 0.3.0 (CHANGELOG.md).
"""

from arag_graph.core.deprecation import forward_module
from arag_graph.tools import mcp_server as _new

__getattr__ = forward_module(__name__, _new)
