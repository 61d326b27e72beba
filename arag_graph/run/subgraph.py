"""Embedding a graph in a parent app: a node with explicit inputs and outputs.

A compiled graph added straight to a parent (``parent.add_node("rag", graph)``) works, but it
shares state keys with the parent by name: its ``messages`` (the whole tool transcript) join the
parent's, its ``steps`` (an int) lands on a parent key of that name whatever its type, and its
``error`` is lost when the parent does not declare one, so a failed run looks like an empty answer.
:func:`as_node` gives the embedding a fixed shape instead:

- the question comes from one parent key (or a function of the parent's state);
- the result lands under one parent key, as a dict (answer, citations, read and retrieved chunks,
  retrieved tokens, steps, trajectory, error), and the answer optionally under another;
- nothing else of the parent's state is touched;
- a failed run raises :class:`SubgraphRunError` (the parent run fails, visibly), or with
  ``on_error="record"`` the error is in the result for the parent to route on;
- the subgraph's settings are what you pass (a mapping, a context object, or a function of the
  parent's runtime); a parent's own context is never mistaken for the subgraph's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.runtime import get_runtime

from arag_graph.core.errors import AragError

RESULT_KEYS = (
    "answer",
    "citations",
    "read_chunks",
    "retrieved_chunks",
    "retrieved_tokens",
    "steps",
    "trajectory",
    "error",
)


class SubgraphRunError(AragError):
    """An embedded graph's run ended with an error (its message is the run's one-line error)."""


ContextSource = Mapping[str, Any] | Any | Callable[[Any], Any] | None


class _EmbeddedGraph(Runnable[Any, dict[str, Any]]):
    """The node :func:`as_node` returns: sync under ``invoke``, async under ``ainvoke``."""

    def __init__(
        self,
        graph: Any,
        question: str | Callable[[Any], str],
        output: str,
        answer: str | None,
        context: ContextSource,
        on_error: Literal["raise", "record"],
    ) -> None:
        self.graph = graph
        self.question = question
        self.output = output
        self.answer = answer
        self.context = context
        self.on_error = on_error
        self.name = getattr(graph, "name", None) or "subgraph"

    def _request(self, state: Any) -> tuple[dict[str, Any], Any]:
        question = self.question(state) if callable(self.question) else _get(state, self.question)
        if not isinstance(question, str) or not question.strip():
            where = "the question function" if callable(self.question) else f"parent key {self.question!r}"
            raise SubgraphRunError(f"{self.name}: {where} gave no question text; set it before this node runs")
        context = self.context
        if callable(context) and not isinstance(context, Mapping):
            context = context(get_runtime())
        return {"question": question}, dict(context) if isinstance(context, Mapping) else context

    def _result(self, out: dict[str, Any]) -> dict[str, Any]:
        result = {key: out.get(key) for key in RESULT_KEYS}
        if result["error"] and self.on_error == "raise":
            raise SubgraphRunError(f"{self.name}: {result['error']}")
        update: dict[str, Any] = {self.output: result}
        if self.answer:
            update[self.answer] = result["answer"] or ""
        return update

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        request, context = self._request(input)
        return self._result(self.graph.invoke(request, config, context=context))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        request, context = self._request(input)
        return self._result(await self.graph.ainvoke(request, config, context=context))


def _get(state: Any, key: str) -> Any:
    return state.get(key) if isinstance(state, Mapping) else getattr(state, key, None)


def as_node(
    graph: Any,
    *,
    question: str | Callable[[Any], str] = "question",
    output: str = "rag",
    answer: str | None = None,
    context: ContextSource = None,
    on_error: Literal["raise", "record"] = "raise",
) -> Runnable[Any, dict[str, Any]]:
    """A parent-graph node that runs ``graph`` on one question and writes its result under ``output``.

    ``context`` is the subgraph's own settings: a mapping or context object, or a function of the
    parent's ``Runtime`` returning one (to derive them from the parent's context). Left as None,
    the subgraph runs with its defaults.
    """
    if on_error not in ("raise", "record"):
        raise AragError(f"on_error={on_error!r}: use 'raise' or 'record'")
    return _EmbeddedGraph(graph, question, output, answer, context, on_error)
