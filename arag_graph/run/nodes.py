"""The one node helper: a model step described once, run sync under ``invoke`` and async under ``ainvoke``.

LangGraph runs a plain function node in a worker thread under ``ainvoke``, which suits the graphs'
CPU-bound work (retrieval, accounting), so those nodes are plain functions. Model calls are
different: a served graph holds many runs waiting on model servers at once, and a thread blocked on
a socket per run would exhaust the worker pool, so model calls await under ``ainvoke``. A node
function therefore *prepares* a :class:`Call` (its family model's :class:`~arag_graph.llm.steps.Step` and
what to do with its result) and :func:`model_node` runs it both ways.

A failing model never raises out of a node: the run ends with a readable ``error`` in its output.
A run that reached an operator cap (:mod:`arag_graph.run.budgets`) ends the same way, whatever fallback
the node would take for a failed call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import get_executor_for_config, run_in_executor
from langgraph.runtime import get_runtime

from arag_graph.core.errors import BudgetExceeded
from arag_graph.core.safety import describe_model_error
from arag_graph.llm.steps import Step

Update = dict[str, Any]


@dataclass
class Call:
    """A model step of a node: what to run, and how its result (or failure) updates the state."""

    step: Step[Any]
    on_result: Callable[[Any], Update]
    name: str = ""
    """The traced run's name (``agent_model``, ``sufficiency_check``, ...)."""
    on_error: Callable[[str], Update] | None = None


def _failed(call: Call, exc: BaseException) -> Update:
    message = describe_model_error(exc)
    update = call.on_error(message) if call.on_error else {"error": message}
    if isinstance(exc, BudgetExceeded):
        # Not a failed call to fall back from: the run is out of budget and stops here, keeping what
        # it found (graphs without a stop reason ignore those keys).
        update = {**update, "error": message, "stop_reason": "budget", "stop_detail": message}
    return update


def _config(call: Call, config: RunnableConfig | None) -> RunnableConfig:
    return {**(config or {}), "run_name": call.name} if call.name else (config or {})


class ModelNode(Runnable[Any, Update]):
    """A graph node around ``prepare(state, runtime)``, which returns a :class:`Call` or an update.

    Not traced itself: LangGraph already traces the node, and the model call below it is named by
    the :class:`Call`.
    """

    def __init__(self, name: str, prepare: Callable[[Any, Any], Call | Update]) -> None:
        self.name = name
        self.prepare = prepare

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Update:
        call = self.prepare(input, get_runtime())
        if not isinstance(call, Call):
            return call
        try:
            result = call.step.invoke(_config(call, config))
        except Exception as exc:
            return _failed(call, exc)
        return call.on_result(result)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Update:
        # Preparing may load the index (file, Chroma and model I/O on first use) and counts tokens:
        # blocking work that must stay off the event loop, which async hosts such as the LangGraph
        # server rely on. The executor copies the context, so ``get_runtime()`` still sees this run.
        call = await run_in_executor(config, lambda: self.prepare(input, get_runtime()))
        if not isinstance(call, Call):
            return call
        try:
            result = await call.step.ainvoke(_config(call, config))
        except Exception as exc:
            return _failed(call, exc)
        return call.on_result(result)


def model_node(name: str, prepare: Callable[[Any, Any], Call | Update]) -> ModelNode:
    return ModelNode(name, prepare)


def gather(steps: Sequence[Step[Any]], name: str) -> Step[list[Any]]:
    """Several steps as one, run concurrently (threads under ``invoke``, tasks under ``ainvoke``).

    Concurrency is bounded by the run's ``max_concurrency``, as LangGraph bounds its own branches.
    """

    def run(_: Any, config: RunnableConfig) -> list[Any]:
        with get_executor_for_config(config) as executor:
            return list(executor.map(lambda step: step.invoke(config), steps))

    async def arun(_: Any, config: RunnableConfig) -> list[Any]:
        limit = asyncio.Semaphore((config or {}).get("max_concurrency") or len(steps) or 1)

        async def one(step: Step[Any]) -> Any:
            async with limit:
                return await step.ainvoke(config)

        return list(await asyncio.gather(*(one(step) for step in steps)))

    return Step(RunnableLambda(run, afunc=arun, name=name))
