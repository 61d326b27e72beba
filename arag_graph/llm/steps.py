"""A model request as a value: what a graph's node runs, sync or async.

A graph never writes a prompt itself. Each family's model (``arag/model.py``, ``corag/model.py``,
...) turns a typed request ("is this evidence sufficient?") into a :class:`Step`: for a chat model
the prompt and the model, for the offline policy a rule computed when the step runs
(:func:`rule_step`). The node then runs it (:func:`arag_graph.run.nodes.model_node`), sync under
``invoke`` and async under ``ainvoke``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

T = TypeVar("T")

Structured = tuple[T, str | None]
"""A structured answer and, when the model's reply could not be used, why (the value is then the
schema's safe fallback)."""


@dataclass(frozen=True)
class Step(Generic[T]):
    """One request to the model: a runnable and its input, run by the graph sync or async."""

    runnable: Runnable[Any, T]
    input: Any = None

    def invoke(self, config: RunnableConfig | None = None) -> T:
        return self.runnable.invoke(self.input, config)

    async def ainvoke(self, config: RunnableConfig | None = None) -> T:
        return await self.runnable.ainvoke(self.input, config)


def rule_step(name: str, compute: Callable[[], Any]) -> Step[Any]:
    """A step the offline policy answers by a rule, computed when the graph runs it (never at request
    time); traced as ``offline_<name>``."""
    return Step(RunnableLambda(lambda _: compute(), name=f"offline_{name}"))
