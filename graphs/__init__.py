"""Entry modules for ``langgraph.json``: one compiled graph per module, configured at run time.

Each graph reads its index from the run configuration (``index_path``) or ``$ARAG_INDEX``, and
falls back to the bundled sample index; the model comes from the configuration (``model``) or
``$ARAG_MODEL``, defaulting to the offline no-LLM policy.
"""
