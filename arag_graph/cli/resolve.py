"""What a command runs with, resolved from its flags: the model spec (``--model``, else
``$ARAG_MODEL``, else gpt-4o-mini with a key and the offline policy without) and the index
(``--index``, else the bundled sample). Shared by ``ask``, ``eval``, ``reproduce``,
``sample-chains``, ``mcp`` and ``demo``.
"""

from __future__ import annotations

import sys
from typing import Any

NO_KEY_NOTICE = "arag: no API key set (OPENAI_API_KEY): using the offline no-LLM policy"


def choose_model_spec(explicit: str | None, base_url: str | None) -> tuple[str, str | None]:
    """The model spec to run, and the notice to show once the run goes ahead (None: nothing to say).

    ``--model`` if given; else ``$ARAG_MODEL``; else gpt-4o-mini with a key, ``offline`` without,
    which the CLI says in one line. Nothing is printed here: a command first checks all of its input,
    so that bad input ends in its one error line only.
    """
    import os

    from arag_graph.llm.models import OFFLINE, has_credentials

    if explicit:
        return explicit, None
    if os.environ.get("ARAG_MODEL"):
        return os.environ["ARAG_MODEL"], None
    if has_credentials(base_url):
        return "gpt-4o-mini", None
    return OFFLINE, NO_KEY_NOTICE


def announce(notice: str | None) -> None:
    """Print ``choose_model_spec``'s notice (on stderr), once every check has passed."""
    if notice:
        print(notice, file=sys.stderr)


def check_model_spec(spec: str, base_url: str | None, limits: dict[str, Any] | None = None) -> Any:
    """The chat model of a spec that needs no index (None for ``offline``, which reads the index).

    Raises the one-line :class:`ModelSpecError` for a malformed spec or a missing key before any index
    is loaded or built. ``limits`` holds the ``timeout`` and ``max_retries`` given on the command line.
    """
    from arag_graph.core.safety import remember_url_credentials
    from arag_graph.llm.models import OFFLINE, resolve_chat_model

    remember_url_credentials(base_url)
    if spec.strip() == OFFLINE:
        return None
    return resolve_chat_model(spec, base_url=base_url, **(limits or {}))


def open_index(path: str | None, quiet: bool = False) -> Any:
    """The index at ``path``, or the bundled sample index (built on first use) when no path is given."""
    from arag_graph.index.load import load_index
    from arag_graph.index.sample import ensure_sample_index

    if path:
        return load_index(path, cache=True)
    return ensure_sample_index(progress=not quiet and sys.stderr.isatty())
