"""Bounds several layers share: seconds per attempt, retries, the operator's API key, and ``top_k``.

Chat models (:mod:`arag_graph.llm.models`) and embedding endpoints
(:mod:`arag_graph.index.embedding_loader`) are bounded the same way and read the same key, but the
index layer sits below the model layer; these shared settings live here, in the bottom layer, so
both read one definition. The seconds are a total per attempt, every read of the reply included:
:mod:`arag_graph.core.deadlines` makes the clients keep them.
"""

from __future__ import annotations

import math
import os

from arag_graph.core.errors import ContextError, ModelSpecError

TOP_K_MIN, TOP_K_MAX = 1, 20
"""One rule for ``top_k`` everywhere: context schemas and the CLI refuse values outside it, tools called
by a model clamp them into it (here, in the bottom layer, so the tools need no graph layer to know it)."""

DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 2
TIMEOUT_RANGE = (0.1, 3600.0)
RETRIES_RANGE = (0, 10)


def number_from_env(name: str, default: float, low: float, high: float) -> float:
    """``$name`` as a number in ``[low, high]``, ``default`` when unset; one-line error otherwise."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not low <= value <= high:  # also refuses NaN
        raise ModelSpecError(f"${name}={text!r} is not usable; give a number from {low:g} to {high:g}")
    return value


def api_key_from_env() -> str | None:
    """The operator's key for OpenAI-compatible endpoints: ``$ARAG_API_KEY``, else ``$OPENAI_API_KEY``."""
    return os.environ.get("ARAG_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


DEFAULT_MAX_QUESTION_CHARS = 20_000
"""Characters of a run's question (and of an MCP tool call's arguments) unless the operator sets another cap."""


def cap_from_env(name: str, default: float | None, *, integer: bool) -> float | None:
    """An operator's cap ``$name``: ``default`` when unset, None (no cap) for 0; one-line error otherwise.

    The rule of every cap of :mod:`arag_graph.run.budgets`, here so that the MCP server, which needs
    only the question cap, reads it without the run layer.
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (integer and value != int(value)):
        kind = "a whole number" if integer else "a number"
        raise ContextError(f"${name}={text!r} is not usable; the operator sets {kind} >= 0 (0: no cap)")
    return value if value > 0 else None


def max_question_chars() -> int | None:
    """The operator's cap on a question's characters (``$ARAG_MAX_QUESTION_CHARS``; None: no cap)."""
    value = cap_from_env("ARAG_MAX_QUESTION_CHARS", DEFAULT_MAX_QUESTION_CHARS, integer=True)
    return None if value is None else int(value)
