"""The endpoint rule's hook, in the bottom layer: every place that builds a network client calls it.

Clients are built in several layers (Chroma and embeddings endpoints in :mod:`arag_graph.index.hierarchical`, chat
models in :mod:`arag_graph.llm`), but the rule that decides which endpoints a served run may reach
is the serving policy (:class:`arag_graph.run.policy.ServingPolicy`), a layer above them. So the
builders call :func:`check_endpoint` here, with the endpoint the built client will really call
(:func:`client_endpoint`), and a served run installs its policy around the code that builds its
clients (:func:`serving`). Outside :func:`serving` the check does nothing: the CLI's and a Python
program's endpoints are the operator's own.

Model specs are read in one spelling here too (:func:`canonical_model`), since both the routing of
:func:`arag_graph.llm.models.resolve_chat_model` and the policy's allowlist compare them.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, Literal, Protocol

EndpointKind = Literal["model", "embeddings", "chroma"]


class EndpointGuard(Protocol):
    """What decides whether a client may be built for an endpoint (the serving policy)."""

    def check_endpoint(self, kind: EndpointKind, url: str | None, what: str) -> None:
        """Raise (one line) when a client of ``kind`` calling ``url`` must not be built."""
        ...


_SERVING: contextvars.ContextVar[EndpointGuard | None] = contextvars.ContextVar("arag_serving", default=None)
"""The guard of the served run whose clients are being built (None: the operator's own code)."""


@contextlib.contextmanager
def serving(guard: EndpointGuard | None) -> Iterator[None]:
    """Build clients for a served run: every endpoint :func:`check_endpoint` sees must pass ``guard``.

    ``None`` leaves the current state (a trusted caller inside a served run stays checked).
    """
    if guard is None:
        yield
        return
    token = _SERVING.set(guard)
    try:
        yield
    finally:
        _SERVING.reset(token)


def check_endpoint(kind: EndpointKind, url: str | None, what: str) -> None:
    """The one endpoint rule: in a served run, refuse a client whose endpoint the operator did not allow.

    Called by every place that builds a client, with the endpoint the built client will really
    call (None: the builder cannot tell, which a served run refuses too). Outside :func:`serving`
    it does nothing.
    """
    guard = _SERVING.get()
    if guard is not None:
        guard.check_endpoint(kind, url, what)


def client_endpoint(client: Any) -> str | None:
    """The base URL a built LangChain client (chat model or embeddings) will send its requests to.

    Read from the SDK client underneath where there is one (``ChatOpenAI.root_client.base_url``,
    ``OpenAIEmbeddings.client._client.base_url``: what ``OPENAI_BASE_URL`` or a default resolved
    to), else from the fields providers keep it in. None when nothing names it.
    """
    holders = [client, getattr(client, "root_client", None), getattr(client, "_client", None)]
    inner = getattr(client, "client", None)
    holders += [inner, getattr(inner, "_client", None)]
    for holder in holders[1:] + holders[:1]:
        if holder is None:
            continue
        for field in ("base_url", "openai_api_base", "anthropic_api_url", "api_base", "endpoint", "azure_endpoint"):
            value = getattr(holder, field, None)
            if value and "://" in str(value):
                return str(value)
    return None


def canonical_model(spec: str) -> str:
    """A model spec in the spelling routing uses: the provider prefix lower-cased (``OpenAI:x`` is
    ``openai:x``, as LangChain reads it), and ``openai:NAME`` the same model as ``NAME``.

    The serving policy compares specs in this spelling and :func:`arag_graph.llm.models.resolve_chat_model`
    routes by it, so a prefix in another case can neither slip past the allowlist nor take another path.
    """
    spec = (spec or "").strip()
    provider, sep, name = spec.partition(":")
    if not sep:
        return spec
    provider = provider.strip().replace("-", "_").lower()
    return name.strip() if provider == "openai" else f"{provider}:{name.strip()}"
