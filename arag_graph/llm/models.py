"""Chat models: a spec string or an instance in, a LangChain ``BaseChatModel`` out.

Three ways to give a model, in every graph, the CLI and the evaluation runner:

- any ``BaseChatModel`` instance;
- ``"offline"``: :class:`arag_graph.offline.policy.OfflinePolicy`, a deterministic no-LLM policy;
- an OpenAI-compatible model name (``gpt-4o-mini``, ``openai:gpt-5-mini``), served by OpenAI or, with a
  base URL, by vLLM, Ollama, llama.cpp or LM Studio. Transient errors (429 with Retry-After, 5xx,
  timeouts) are retried with backoff by the OpenAI client underneath ``ChatOpenAI``;
- ``provider:name`` for another provider LangChain's ``init_chat_model`` knows
  (``anthropic:claude-sonnet-4-5``), with that provider's package installed and its key and
  endpoint in the environment (a base URL is never handed to another provider).

Provider prefixes are read in one spelling (:func:`arag_graph.core.endpoints.canonical_model`:
``OpenAI:x`` is ``openai:x``, the OpenAI-compatible path with the base URL), and every client built
here has its endpoint checked against the serving policy (:func:`arag_graph.core.endpoints.check_endpoint`,
a no-op outside a served run), read from the built client itself
(:func:`arag_graph.core.endpoints.client_endpoint`), so a routing slip cannot send the key to a host
the operator did not allow. Replies of every model built here are redacted before anyone sees them
(:mod:`arag_graph.llm.openai_chat`).

Every model request is bounded: ``timeout`` seconds in total per attempt (connect, send and every
read of the reply: :mod:`arag_graph.core.deadlines`) and ``max_retries`` retries, from the arguments,
else ``$ARAG_MODEL_TIMEOUT`` / ``$ARAG_MODEL_RETRIES``, else 30 s and 2 retries, so a server that
never answers, or answers one byte at a time, ends a run in about 90 s. (A ``provider:name`` model
of another provider uses that provider's client and its own timeout semantics.)

``$ARAG_TOOL_RESULTS_AS_USER=1`` makes OpenAI-compatible models built from a name send tool results as
user turns, for a server whose chat format leaves ``tool`` messages out of the prompt
(:attr:`~arag_graph.llm.openai_chat.CompleteReplyChatOpenAI.tool_results_as_user`).
"""

from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel

from arag_graph.core.endpoints import canonical_model, check_endpoint, client_endpoint
from arag_graph.core.errors import ModelSpecError
from arag_graph.core.limits import (
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    RETRIES_RANGE,
    TIMEOUT_RANGE,
    api_key_from_env,
    flag_from_env,
    number_from_env,
)
from arag_graph.offline.policy import OfflinePolicy

if TYPE_CHECKING:
    from arag_graph.index.hierarchical import HierarchicalIndex

OFFLINE = "offline"
TIMEOUT_ENV, RETRIES_ENV = "ARAG_MODEL_TIMEOUT", "ARAG_MODEL_RETRIES"
TOOL_RESULTS_AS_USER_ENV = "ARAG_TOOL_RESULTS_AS_USER"
"""Set to 1 for a server whose chat format drops tool results (llama-cpp-python's chatml-function-calling):
OpenAI-compatible models built from a name then send them as user turns (docs/guide/local-models.md)."""
_SPEC = re.compile(r"^(?:(?P<provider>openai):)?(?P<name>[A-Za-z0-9][\w.:/@+-]*)$")


def request_limits(timeout: float | None = None, max_retries: int | None = None) -> tuple[float, int]:
    """Seconds per attempt and retries of a model request: given, else from the environment, else defaults.

    ``timeout`` 0 or None and ``max_retries`` None or negative mean "the default", which is what the
    graphs' configuration fields hold unless a run sets them. Values out of range are refused with a
    one-line :class:`ModelSpecError` (an infinite or NaN timeout would be no bound at all).
    """
    if timeout is None or timeout == 0:
        timeout = number_from_env(TIMEOUT_ENV, DEFAULT_TIMEOUT, *TIMEOUT_RANGE)
    elif not TIMEOUT_RANGE[0] <= timeout <= TIMEOUT_RANGE[1]:
        raise ModelSpecError(
            f"model timeout {timeout!r} s is not usable; give {TIMEOUT_RANGE[0]:g} to {TIMEOUT_RANGE[1]:g} seconds"
        )
    if max_retries is None or max_retries < 0:
        max_retries = int(number_from_env(RETRIES_ENV, DEFAULT_RETRIES, *RETRIES_RANGE))
    elif max_retries > RETRIES_RANGE[1]:
        raise ModelSpecError(f"model retries {max_retries} is too many; give 0 to {RETRIES_RANGE[1]}")
    return float(timeout), int(max_retries)


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
        return OfflinePolicy(index=index)
    limits = request_limits(timeout, max_retries)
    provider, sep, name = canonical_model(spec).partition(":")
    if sep and name:
        other = _other_provider(spec, provider, name, temperature, max_tokens, limits)
        if other is not None:
            check_endpoint("model", client_endpoint(other), f"model {spec!r}")
            return redacting(other)
    spec = canonical_model(spec) if provider == "openai" or not sep else spec
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
    as_user = flag_from_env(TOOL_RESULTS_AS_USER_ENV)
    model = _chat_openai(
        match.group("name"), base_url, key, temperature, max_tokens, reasoning_effort or None, limits, as_user
    )
    check_endpoint("model", client_endpoint(model), f"model {spec!r}")
    return model


def _other_provider(
    spec: str,
    provider: str,
    name: str,
    temperature: float | None,
    max_tokens: int | None,
    limits: tuple[float, int],
) -> BaseChatModel | None:
    """``provider:name`` through LangChain's ``init_chat_model``; None when it knows no such provider.

    A prefix it does not know is part of an OpenAI-compatible model name (Ollama's ``llama3:8b``).
    ``provider`` is already in its canonical spelling, and never ``openai`` (that is our own path).
    """
    from langchain.chat_models import init_chat_model

    kwargs: dict[str, Any] = {"timeout": limits[0], "max_retries": limits[1]}
    if temperature is not None:
        kwargs["temperature"] = temperature
    if max_tokens:
        kwargs["max_tokens"] = max_tokens
    try:
        return init_chat_model(name, model_provider=provider, **kwargs)
    except ImportError as exc:
        package = f"langchain-{provider.replace('_', '-')}"
        found = re.search(r"pip install ([\w.-]+)", str(exc))
        raise ModelSpecError(
            f"model {spec!r} needs the {found.group(1) if found else package} package; install it with "
            f"`pip install {found.group(1) if found else package}`, or choose another model"
        ) from None
    except ValueError as exc:
        if "Unsupported" in str(exc):
            return None
        raise ModelSpecError(f"model {spec!r} cannot be set up: {' '.join(str(exc).split())[:200]}") from None
    except Exception as exc:  # a provider's own checks (a missing key, say), as one line
        detail = " ".join(str(exc).split())[:200]
        raise ModelSpecError(f"model {spec!r} cannot be set up ({type(exc).__name__}: {detail})") from None


@functools.lru_cache(maxsize=32)
def _chat_openai(
    name: str,
    base_url: str | None,
    api_key: str,
    temperature: float | None,
    max_tokens: int | None,
    reasoning_effort: str | None,
    limits: tuple[float, int],
    tool_results_as_user: bool = False,
) -> BaseChatModel:
    """One client per distinct setting, so concurrent runs share connection pools.

    Streamed replies that are cut off raise instead of passing as complete (see
    :mod:`arag_graph.llm.openai_chat`).
    """
    from arag_graph.core.deadlines import openai_http_clients
    from arag_graph.llm.openai_chat import RedactedChatOpenAI

    kwargs: dict[str, Any] = {
        "model": name,
        "api_key": api_key,
        "timeout": limits[0],
        "max_retries": limits[1],
        "stream_usage": True,
        "tool_results_as_user": tool_results_as_user,
        **openai_http_clients(),  # the timeout is total per attempt, not per read
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
    return RedactedChatOpenAI(**kwargs)


def redacting(model: BaseChatModel) -> BaseChatModel:
    """``model`` with its replies redacted (:class:`arag_graph.llm.openai_chat.RedactedReplies`): the
    same object, its class swapped for a subclass that adds only the redaction."""
    from arag_graph.llm.openai_chat import redacting_class

    model.__class__ = redacting_class(type(model))
    return model


def with_settings(
    model: BaseChatModel,
    *,
    temperature: float | None = None,
    reasoning_effort: str | None = None,
    max_tokens: int | None = None,
) -> BaseChatModel:
    """``model`` with a run's settings on the fields it has: a copy when one changes, else itself.

    A model instance passed to a graph builder is not resolved from the run's context, so without
    this a run's ``reasoning_effort`` (or the temperature CoRAG samples its chains at) would never
    reach it. LangChain chat models keep these as pydantic fields read at request time
    (``ChatOpenAI``'s ``temperature``, ``reasoning_effort`` and ``max_tokens``, ``ChatAnthropic``'s
    ``temperature``), so a shallow copy with the field set sends them and shares the caller's client;
    the caller's own object is never changed. A model without such a field (the offline policy,
    scripted test models) is returned as it is: it decides for itself. As for models resolved from a
    name, a reasoning model (``reasoning_effort`` set, given or its own) takes no temperature.
    """
    fields = type(model).model_fields
    wanted: dict[str, Any] = {"reasoning_effort": reasoning_effort or None, "max_tokens": max_tokens}
    if not (reasoning_effort or getattr(model, "reasoning_effort", None)):
        wanted["temperature"] = temperature
    update = {
        name: value
        for name, value in wanted.items()
        if value is not None and name in fields and getattr(model, name, None) != value
    }
    return model.model_copy(update=update) if update else model


def supports_setting(model: BaseChatModel, name: str) -> bool:
    """Whether :func:`with_settings` can set ``name`` (``temperature``, ...) on ``model``."""
    return name in type(model).model_fields
