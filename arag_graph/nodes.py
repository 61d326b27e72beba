"""Node factories shared by the graphs.

LangGraph runs a node's sync body under ``invoke``/``stream`` and its async body under
``ainvoke``/``astream``. Model calls are the only place the two differ, so a graph describes a
model step once (what to send, what to do with the reply) and :func:`model_node` makes both bodies.
A failing model never raises out of a node: the run ends with a readable ``error`` in its output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

try:  # the node wrapper LangGraph's own prebuilt ToolNode uses; fall back if it ever moves
    from langgraph._internal._runnable import RunnableCallable
except ImportError:  # pragma: no cover - depends on the installed LangGraph
    RunnableCallable = None  # type: ignore[assignment,misc]
from langchain_core.runnables.config import run_in_executor

from arag_graph.safety import describe_model_error


@dataclass
class ModelCall:
    """One request to a model: the runnable, its input, and how the reply updates the state.

    ``config`` names the child run and carries trace metadata (see ``RunResources.trace``).
    """

    runnable: Runnable[Any, Any]
    input: Any
    on_reply: Callable[[Any], dict[str, Any]]
    config: RunnableConfig = field(default_factory=dict)
    on_error: Callable[[str], dict[str, Any]] | None = None


def _failed(call: ModelCall, exc: BaseException) -> dict[str, Any]:
    message = describe_model_error(exc)
    return call.on_error(message) if call.on_error else {"error": message}


def model_node(name: str, prepare: Callable[[Any, RunnableConfig], ModelCall | dict[str, Any]]) -> Runnable[Any, Any]:
    """A node that builds a :class:`ModelCall` from the state (or returns an update directly)."""

    def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
        call = prepare(state, config)
        if not isinstance(call, ModelCall):
            return call
        try:
            reply = call.runnable.invoke(call.input, call.config)
        except Exception as exc:
            return _failed(call, exc)
        return call.on_reply(reply)

    async def arun(state: Any, config: RunnableConfig) -> dict[str, Any]:
        # Preparing a call may load the index (file, Chroma and model I/O on first use) and counts
        # tokens: blocking work that must stay off the event loop, which async hosts such as the
        # LangGraph server rely on (`langgraph dev` rejects blocking calls there). The executor
        # copies the context, so `get_runtime()` still sees this run.
        call = await run_in_executor(config, prepare, state, config)
        if not isinstance(call, ModelCall):
            return call
        try:
            reply = await call.runnable.ainvoke(call.input, call.config)
        except Exception as exc:
            return _failed(call, exc)
        return call.on_reply(reply)

    if RunnableCallable is not None:
        # LangGraph traces every node already; an untraced callable avoids a second, nested run of
        # the same name ("agent > agent > agent_model") in LangSmith.
        return RunnableCallable(run, arun, name=name, trace=False)
    return RunnableLambda(run, afunc=arun, name=name)
