"""LangSmith's local mode (``evaluate(..., upload_results=False)``) without a tracer that posts anyway.

``langsmith.evaluate`` with ``upload_results=False`` runs the target and the evaluators under
``tracing_context(enabled="local")``: runs are to be kept in memory, never sent. langchain-core only
checks that tracing is truthy, though, and gives every LangChain run inside (each node, model and
tool of a graph, each call of a judge) a ``LangChainTracer`` that posts it to the client's URL.
Offline there is nothing behind that URL, and each post waits through the client's connection
retries: one question of the offline policy took 280 s instead of a second.

:func:`local_tracing_guard` turns tracing off for what runs inside it, in that mode only. The
graphs apply it in ``invoke``/``ainvoke`` (:class:`arag_graph.run.runtime.TracedGraph`) and the judged
evaluators around each judge call, so a plain ``langsmith.evaluate(graph, data=..., evaluators=...,
upload_results=False)`` works offline. LangSmith's own root run of each example (the one evaluators
read) is not a LangChain run and stays as LangSmith records it. Under a real upload (``enabled=True``)
or with tracing off, the guard does nothing: uploaded runs keep their full trace.
"""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["local_tracing_guard"]


def local_tracing_guard() -> contextlib.AbstractContextManager[Any]:
    """A context in which LangChain runs are not traced when LangSmith traces only locally.

    Use it around your own calls of a graph or model inside an ``evaluate(upload_results=False)``
    target (``graph.stream(...)``, say; ``invoke`` and ``ainvoke`` of this package's graphs already
    apply it). Elsewhere it changes nothing.
    """
    from langsmith import run_helpers

    if run_helpers.get_tracing_context().get("enabled") == "local":
        return run_helpers.tracing_context(enabled=False)
    return contextlib.nullcontext()
