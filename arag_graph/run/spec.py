"""A graph as the registry lists it: its name, builder, context schema and description.

Each graph family's ``graph.py`` declares its graphs (``GRAPHS = (GraphSpec(...),)``) beside their
builders, and :mod:`arag_graph.registry` gathers them from its list of families: adding a graph is
its folder and one line there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arag_graph.run.configuration import GraphContext

__all__ = ["GraphSpec"]


@dataclass(frozen=True)
class GraphSpec:
    name: str
    builder: Callable[..., Any]
    """The graph's builder; it takes ``index``, ``model`` and ``checkpointer``."""
    config: type[GraphContext]
    """The graph's context schema (its Studio form)."""
    description: str

    def build(self, **kwargs: Any) -> Any:
        return self.builder(**kwargs)
