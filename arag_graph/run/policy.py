"""What a run may choose: models, endpoints and indexes the operator allows.

A served graph (``langgraph dev``, LangGraph Server) takes its run settings from the caller's
context, and every field a remote caller can set is untrusted. The server's API keys are sent
with every model request, so a caller who could name any ``base_url`` could collect the key (and
make the server reach hosts of the caller's choosing); a caller who could name any ``index_path``
could make the server open any directory. So the operator decides, in the server's environment:

``ARAG_MODEL`` / ``ARAG_ALLOWED_MODELS``
    the default chat model and the comma-separated models a run may pick (default: the default
    model and ``offline``; ``*`` allows any model name, still on the allowed endpoints only).
``ARAG_BASE_URL`` / ``ARAG_ALLOWED_BASE_URLS``
    the default OpenAI-compatible endpoint (else ``OPENAI_BASE_URL``, else the provider's own) and the comma-separated
    endpoints a run may pick (default: only the default). There is no wildcard.
``ARAG_INDEX`` / ``ARAG_INDEX_ROOT``
    the default index (empty: the bundled sample) and the directory under which a run may name
    another index; without a root, runs cannot choose an index.
``ARAG_EMBEDDING_MODEL_ROOTS``
    directories (separated by ``os.pathsep``) from which an index a run chooses may load its
    embedding model, besides the index root. An index's manifest names its model; a model folder
    elsewhere on disk is refused, so that a manifest cannot make the server read any directory.
    Model names from the Hugging Face cache and the packaged model are the operator's already.

Anything else is refused before the run starts, with a one-line reason. Keys never come from the
context. Whoever builds a graph in Python (or runs the CLI) is the operator: the index and model
given to a builder are not checked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from arag_graph.core.errors import ContextError

OFFLINE = "offline"


class RunRefused(ContextError):
    """A run asked for a model, endpoint or index that the operator does not allow."""


def _listed(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def normalize_url(url: str) -> str:
    """An endpoint in one spelling: scheme and host lower-cased, no trailing slash.

    Refuses URLs that carry credentials (``http://user:pass@host``): a secret in a URL ends up in
    logs and run records, and an endpoint that needs one belongs in the server's environment.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RunRefused(f"base_url {url!r} is not an http(s) URL; give one such as http://localhost:8000/v1")
    if parts.username or parts.password:
        raise RunRefused("base_url must not contain credentials; the server's environment provides keys")
    host = parts.hostname.lower() + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme.lower(), host, parts.path.rstrip("/"), parts.query, ""))


@dataclass(frozen=True)
class RunChoice:
    """What a run will use once its context has passed the policy."""

    model: str
    base_url: str | None
    index_path: str | None
    """None: the bundled sample index."""


@dataclass(frozen=True)
class ServingPolicy:
    """The operator's choices, read from the environment at the time a run starts."""

    default_model: str
    allowed_models: frozenset[str] | None
    """None: any model name (``ARAG_ALLOWED_MODELS=*``)."""
    default_base_url: str | None
    allowed_base_urls: frozenset[str]
    default_index: str | None
    index_root: Path | None
    model_roots: tuple[Path, ...] = ()
    """Where a chosen index's embedding-model folder may be (``ARAG_EMBEDDING_MODEL_ROOTS``)."""

    @classmethod
    def from_env(cls) -> ServingPolicy:
        default_model = os.environ.get("ARAG_MODEL", "").strip() or OFFLINE
        models = _listed("ARAG_ALLOWED_MODELS")
        allowed_models = None if "*" in models else frozenset({*models, default_model, OFFLINE})
        default_url = (os.environ.get("ARAG_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or "").strip() or None
        urls = {normalize_url(u) for u in _listed("ARAG_ALLOWED_BASE_URLS")}
        if default_url:
            urls.add(normalize_url(default_url))
        root = os.environ.get("ARAG_INDEX_ROOT", "").strip()
        return cls(
            default_model=default_model,
            allowed_models=allowed_models,
            default_base_url=default_url,
            allowed_base_urls=frozenset(urls),
            default_index=os.environ.get("ARAG_INDEX", "").strip() or None,
            index_root=Path(root) if root else None,
            model_roots=tuple(
                Path(p.strip()) for p in os.environ.get("ARAG_EMBEDDING_MODEL_ROOTS", "").split(os.pathsep) if p.strip()
            ),
        )

    def model(self, requested: str) -> str:
        requested = (requested or "").strip()
        if not requested:
            return self.default_model
        if self.allowed_models is not None and requested not in self.allowed_models:
            allowed = ", ".join(sorted(self.allowed_models))
            raise RunRefused(
                f"model {requested!r} is not allowed on this server; choose one of: {allowed} "
                "(the operator sets ARAG_ALLOWED_MODELS)"
            )
        return requested

    def base_url(self, requested: str) -> str | None:
        requested = (requested or "").strip()
        if not requested:
            return self.default_base_url
        if normalize_url(requested) not in self.allowed_base_urls:
            allowed = ", ".join(sorted(self.allowed_base_urls)) or "none besides the default"
            raise RunRefused(
                f"base_url {requested!r} is not allowed on this server; allowed: {allowed} "
                "(the operator sets ARAG_ALLOWED_BASE_URLS)"
            )
        return requested

    def index_path(self, requested: str) -> str | None:
        requested = (requested or "").strip()
        if not requested or requested == self.default_index:
            return self.default_index
        if self.index_root is None:
            raise RunRefused(
                "this server does not let runs choose an index (the operator sets ARAG_INDEX_ROOT to allow "
                "indexes under it); leave index_path empty"
            )
        root = Path(os.path.realpath(self.index_root))
        candidate = Path(requested)
        if not candidate.is_absolute():
            candidate = root / candidate
        resolved = Path(os.path.realpath(candidate))  # symlinks followed: a link out of the root is refused
        if not resolved.is_relative_to(root):
            raise RunRefused(
                f"index_path {requested!r} is outside the index root this server allows; give a directory under {root}"
            )
        return str(resolved)

    def check_index_endpoint(self, manifest: Any) -> None:
        """Refuse an index whose manifest names an embeddings endpoint the operator does not allow.

        Every query of such an index is embedded by that endpoint, with the server's key: a manifest
        written by someone else must not be able to send the key (or the questions) to its own host.
        An ``openai:`` model without a base URL uses the server's environment (``OPENAI_BASE_URL``) or
        OpenAI itself, the operator's own choices.
        """
        from arag_graph.index.embedding_specs import is_endpoint_spec

        model = str(getattr(manifest, "embedding_model", "") or "")
        url = getattr(manifest, "embedding_base_url", None)
        if not is_endpoint_spec(model) or not url:
            return
        try:
            allowed = normalize_url(str(url)) in self.allowed_base_urls
        except RunRefused:
            allowed = False
        if not allowed:
            raise RunRefused(
                f"this index embeds queries at {str(url)[:100]!r}, an endpoint this server does not allow; the "
                "operator may add it to ARAG_ALLOWED_BASE_URLS, or choose another index"
            )

    def check_index_models(self, manifest: Any, index_path: str | os.PathLike[str]) -> None:
        """Refuse an index a run chose whose manifest loads what the operator does not allow: an
        embeddings endpoint (:meth:`check_index_endpoint`) or a model folder outside the index root
        and ``ARAG_EMBEDDING_MODEL_ROOTS``. The operator's default index (``ARAG_INDEX``) is theirs.
        """
        from arag_graph.index.embedding_specs import model_folder  # the rule that loads the model

        self.check_index_endpoint(manifest)
        folder = model_folder(str(getattr(manifest, "embedding_model", "") or ""))
        if folder is None or _same_path(index_path, self.default_index):
            return
        roots = [Path(os.path.realpath(r)) for r in (*filter(None, [self.index_root]), *self.model_roots)]
        if not any(folder.is_relative_to(root) for root in roots):
            raise RunRefused(
                f"this index loads its embedding model from {str(folder)[:100]!r}, outside the folders this server "
                "allows; the operator may add that folder to ARAG_EMBEDDING_MODEL_ROOTS, or choose another index"
            )

    def resolve(self, model: str, base_url: str, index_path: str) -> RunChoice:
        """Check a run's choices; the defaults fill what it leaves empty."""
        return RunChoice(self.model(model), self.base_url(base_url), self.index_path(index_path))


def _same_path(a: str | os.PathLike[str] | None, b: str | os.PathLike[str] | None) -> bool:
    return a is not None and b is not None and os.path.realpath(a) == os.path.realpath(b)
