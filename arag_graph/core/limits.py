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
from typing import Any

from arag_graph.core.errors import ContextError, ModelSpecError

TOP_K_MIN, TOP_K_MAX = 1, 20
"""One rule for ``top_k`` everywhere: context schemas and the CLI refuse values outside it, tools called
by a model clamp them into it (here, in the bottom layer, so the tools need no graph layer to know it)."""

MODEL_LIST_MAX = 32
"""Items of any list a model writes into a tool call or a structured reply, as its JSON schema says."""
MODEL_TEXT_MAX = 500
"""Characters of any text a model writes into a tool call's arguments, as its JSON schema says. Well
under 1,000: llama.cpp's grammar parser refuses a string bounded past about 1,100 characters (its
JSON-schema converter nests one rule per character), and llama-cpp-python's server then dies."""


def bounded_schema(schema: dict[str, Any], *, text: bool = True) -> dict[str, Any]:
    """Put a bound on every list (``maxItems``) and, with ``text``, every string (``maxLength``) of a JSON
    schema a model writes to, where the schema sets none; returns ``schema``, changed in place.

    Why: servers that hold a model's reply to its schema by grammar (llama.cpp, llama-cpp-python, vLLM,
    Ollama) end a list or a string only where the model does, and llama-cpp-python writes tool-call
    arguments with no token limit at all: SmolLM2 kept writing one search query for minutes, until the
    client gave up, while the server went on writing it (docs/guide/local-models.md). A bound in the
    schema ends it there, and tells every model the size expected. Replies are still read leniently: the
    bounds are what the model is shown, not what validation refuses. ``text=False`` leaves strings
    unbounded, for schemas that may go to OpenAI's strict structured outputs, which accept ``maxItems``
    but not ``maxLength``.
    """

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            kind = node.get("type")
            if kind == "array" and "maxItems" not in node:
                node["maxItems"] = MODEL_LIST_MAX
            if text and kind == "string" and not {"maxLength", "enum", "const"} & node.keys():
                node["maxLength"] = MODEL_TEXT_MAX
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    return schema


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


ON_VALUES = frozenset({"1", "true", "yes", "on"})
"""How an operator turns an environment switch on (any case): one spelling for every switch."""
_OFF_VALUES = frozenset({"", "0", "false", "no", "off"})


def flag_from_env(name: str) -> bool:
    """``$name`` as a yes/no setting, off when unset; one-line error for anything else."""
    text = os.environ.get(name, "").strip().lower()
    if text in ON_VALUES or text in _OFF_VALUES:
        return text in ON_VALUES
    raise ModelSpecError(f"${name}={text!r} is not usable; give 1 (on) or 0 (off)")


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
