"""Entry modules for ``langgraph.json``: one compiled graph per module, configured at run time.

Each run's context (the Studio form, or ``context`` of an SDK call) picks its settings; the model,
endpoint and index it may pick are those the operator allows in the server's environment
(``ARAG_MODEL``/``ARAG_ALLOWED_MODELS``, ``ARAG_BASE_URL``/``ARAG_ALLOWED_BASE_URLS``,
``ARAG_INDEX``/``ARAG_INDEX_ROOT``; see :mod:`arag_graph.run.policy`). Left empty, a run uses the
server's default model (else the offline no-LLM policy) and index (else the bundled sample).

Each ``graph`` is a LangGraph graph factory (:func:`arag_graph.registry.served_graph`) around one
compiled graph: the server drops context keys a graph does not have before the graph sees them,
and the factory, which sees them first, refuses such a run in one line instead.
"""
