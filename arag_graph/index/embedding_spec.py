"""What an embedding spec names, decided without setting anything up.

:mod:`arag_graph.index.embedding_loader` loads the model a spec names; the serving policy
(:mod:`arag_graph.run.policy`) must decide where that model would come from before anything is loaded.
Both read a spec through the rules here, so what is checked is what is loaded. Kept apart from
``embedding_models`` because that module reaches the chat models, which reach the graphs'
configuration, which reaches the policy: the policy importing it would close a cycle.
"""

from __future__ import annotations

from pathlib import Path

from arag_graph.index.encoders import DEFAULT_MODEL_ID

ENDPOINT_PREFIX = "openai:"


def is_endpoint_spec(spec: str) -> bool:
    """``openai:NAME``: embedded by an OpenAI-compatible endpoint, not on this machine."""
    return spec.strip().lower().startswith(ENDPOINT_PREFIX)


def model_folder(spec: str) -> Path | None:
    """The directory a spec names as a model folder, symlinks resolved; None for the packaged model,
    a cached model name or an endpoint."""
    if not spec.strip() or spec.strip() == DEFAULT_MODEL_ID or is_endpoint_spec(spec):
        return None
    candidate = Path(spec).expanduser()
    return candidate.resolve() if candidate.is_dir() else None
