"""Chat models: a spec string or an instance in, a LangChain ``BaseChatModel`` out.

Three ways to give a model, in every graph, the CLI and the evaluation runner:

- any ``BaseChatModel`` instance;
- ``"offline"``: :class:`arag_graph.offline.OfflinePolicy`, a deterministic no-LLM policy;
- an OpenAI-compatible model name (``gpt-4o-mini``, ``openai:gpt-5-mini``), served by OpenAI or, with a
  base URL, by vLLM, Ollama, llama.cpp or LM Studio. Transient errors (429 with Retry-After, 5xx,
  timeouts) are retried with backoff by the OpenAI client underneath ``ChatOpenAI``.

Every model request is bounded: ``timeout`` seconds per attempt and ``max_retries`` retries, from
the arguments, else ``$ARAG_MODEL_TIMEOUT`` / ``$ARAG_MODEL_RETRIES``, else 30 s and 2 retries, so a
server that accepts and never answers ends a model call in about 90 s (3 attempts of 30 s and the
client's short backoff between them) instead of hanging a run.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from arag_graph.errors import ModelSpecError

if TYPE_CHECKING:
    from arag_graph.index import HierarchicalIndex

OFFLINE = "offline"
DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 2
TIMEOUT_RANGE = (0.1, 3600.0)
RETRIES_RANGE = (0, 10)
TIMEOUT_ENV, RETRIES_ENV = "ARAG_MODEL_TIMEOUT", "ARAG_MODEL_RETRIES"
_SPEC = re.compile(r"^(?:(?P<provider>openai):)?(?P<name>[A-Za-z0-9][\w.:/@+-]*)$")


def _number_from_env(name: str, default: float, low: float, high: float) -> float:
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


def request_limits(timeout: float | None = None, max_retries: int | None = None) -> tuple[float, int]:
    """Seconds per attempt and retries of a model request: given, else from the environment, else defaults.

    ``timeout`` 0 or None and ``max_retries`` None or negative mean "the default", which is what the
    graphs' configuration fields hold unless a run sets them. Values out of range are refused with a
    one-line :class:`ModelSpecError` (an infinite or NaN timeout would be no bound at all).
    """
    if timeout is None or timeout == 0:
        timeout = _number_from_env(TIMEOUT_ENV, DEFAULT_TIMEOUT, *TIMEOUT_RANGE)
    elif not TIMEOUT_RANGE[0] <= timeout <= TIMEOUT_RANGE[1]:
        raise ModelSpecError(
            f"model timeout {timeout!r} s is not usable; give {TIMEOUT_RANGE[0]:g} to {TIMEOUT_RANGE[1]:g} seconds"
        )
    if max_retries is None or max_retries < 0:
        max_retries = int(_number_from_env(RETRIES_ENV, DEFAULT_RETRIES, *RETRIES_RANGE))
    elif max_retries > RETRIES_RANGE[1]:
        raise ModelSpecError(f"model retries {max_retries} is too many; give 0 to {RETRIES_RANGE[1]}")
    return float(timeout), int(max_retries)


def api_key_from_env() -> str | None:
    return os.environ.get("ARAG_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


def has_credentials(base_url: str | None = None) -> bool:
    """Whether a spec model could be reached: a key, or a local server that needs none."""
    return bool(api_key_from_env() or base_url or os.environ.get("OPENAI_BASE_URL"))


def resolve_chat_model(
    spec: str | BaseChatModel,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    temperature: float | None = 0.0,
    max_tokens: int | None = None,
    reasoning_effort: str | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
    index: HierarchicalIndex | None = None,
) -> BaseChatModel:
    """Turn a model spec into a chat model (instances pass through unchanged).

    ``index`` is only used by the offline policy, which reads chunk text to answer extractively.
    ``timeout`` (seconds per attempt) and ``max_retries`` bound every request (see
    :func:`request_limits`). Raises :class:`ModelSpecError` with a one-line fix for an unknown spec,
    missing credentials or request limits out of range.
    """
    if isinstance(spec, BaseChatModel):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ModelSpecError(
            "no model given; use --model offline or an OpenAI-compatible model name such as gpt-4o-mini"
        )
    spec = spec.strip()
    if spec == OFFLINE:
        from arag_graph.offline import OfflinePolicy

        return OfflinePolicy(index=index)
    limits = request_limits(timeout, max_retries)
    match = _SPEC.match(spec)
    if match is None:
        raise ModelSpecError(
            f"cannot read model spec {spec!r}; use 'offline', a model name such as 'gpt-4o-mini', "
            "or 'openai:MODEL' (with --base-url for a local OpenAI-compatible server)"
        )
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    key = api_key or api_key_from_env()
    if key is None:
        if base_url is None:
            raise ModelSpecError(
                f"model {spec!r} needs an API key: set OPENAI_API_KEY, or give --base-url of a local "
                "OpenAI-compatible server, or use --model offline"
            )
        key = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) accept any key
    return _chat_openai(match.group("name"), base_url, key, temperature, max_tokens, reasoning_effort or None, limits)


@functools.lru_cache(maxsize=32)
def _chat_openai(
    name: str,
    base_url: str | None,
    api_key: str,
    temperature: float | None,
    max_tokens: int | None,
    reasoning_effort: str | None,
    limits: tuple[float, int],
) -> BaseChatModel:
    """One client per distinct setting, so concurrent runs share connection pools.

    Streamed replies that are cut off raise instead of passing as complete (see
    :mod:`arag_graph.openai_chat`).
    """
    from arag_graph.openai_chat import CompleteReplyChatOpenAI

    kwargs: dict[str, Any] = {
        "model": name,
        "api_key": api_key,
        "timeout": limits[0],
        "max_retries": limits[1],
        "stream_usage": True,
    }
    if base_url:
        kwargs["base_url"] = base_url
    if max_tokens:
        kwargs["max_tokens"] = max_tokens
    if reasoning_effort:
        # Reasoning models take an effort instead of a sampling temperature.
        kwargs["reasoning_effort"] = reasoning_effort
    elif temperature is not None:
        kwargs["temperature"] = temperature
    return CompleteReplyChatOpenAI(**kwargs)


def bind_one_tool_per_turn(model: BaseChatModel, tools: Sequence[BaseTool]) -> Runnable[Any, Any]:
    """Bind ``tools``, asking the provider for at most one tool call per turn where it can.

    A-RAG's loop is one action per iteration. Providers that do not know ``parallel_tool_calls``
    get the tools alone (the graph still runs extra calls in order and counts each); models that
    cannot bind tools at all (scripted test models) are used as they are.
    """
    try:
        return model.bind_tools(tools, parallel_tool_calls=False)
    except TypeError:
        pass
    except NotImplementedError:
        return model
    try:
        return model.bind_tools(tools)
    except NotImplementedError:
        return model
