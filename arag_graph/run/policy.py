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
    the default OpenAI-compatible endpoint (else ``OPENAI_BASE_URL``, else OpenAI's own API) and the
    comma-separated endpoints a run may pick (default: only the default). There is no wildcard. These
    are the only hosts a served run's chat model or embeddings endpoint may reach: another provider's
    API (``anthropic:...``) must be listed here too.
``ARAG_CHROMA_URL`` / ``ARAG_ALLOWED_CHROMA_URLS``
    the Chroma server that replaces the one an index records, and the comma-separated Chroma servers
    an index a run loads may name besides it (default: none). A list of its own: a Chroma server gets
    the Chroma credentials (``CHROMA_CLIENT_AUTH_CREDENTIALS``), never the model key, and a model
    endpoint never the Chroma credentials.
``ARAG_INDEX`` / ``ARAG_INDEX_ROOT``
    the default index (empty: the bundled sample) and the directory under which a run may name
    another index, reached from the root without any symbolic link (checked when the run loads it,
    off the server's event loop); without a root, runs cannot choose an index.
``ARAG_ALLOW_SYSTEM_MESSAGES``
    ``1`` (or ``true``/``yes``) lets callers send ``system`` messages in a run's input; by default
    they are refused (they would stand above the graph's own instructions). The operator's caps hold
    for the whole input a caller sends, every message of every role (:mod:`arag_graph.run.budgets`).
``ARAG_EMBEDDING_MODEL_ROOTS``
    directories (separated by ``os.pathsep``) from which an index a run chooses may load its
    embedding model, besides the index root. An index's manifest names its model; a model folder
    elsewhere on disk is refused, so that a manifest cannot make the server read any directory.
    Model names from the Hugging Face cache and the packaged model are the operator's already.
``ARAG_APPROVE_TOOLS``
    the agents' tools (comma-separated names, or ``all``) whose calls a person reviews before they
    run (:mod:`arag_graph.arag.review`); a run's ``approve_tools`` adds to these, never removes one.

Anything else is refused before the run starts, with a one-line reason. Keys never come from the
context. Whoever builds a graph in Python (or runs the CLI) is the operator: the index and model
given to a builder are not checked.

The endpoint rule is enforced where each client is built, on the endpoint the built client will
really call (:func:`arag_graph.core.endpoints.check_endpoint`): the chat model
(:func:`arag_graph.llm.models.resolve_chat_model`), the embeddings endpoint
(:class:`arag_graph.index.embedding_loader.EndpointEmbeddings`) and the Chroma server
(:mod:`arag_graph.index.chroma`), whatever named the URL (the run's context, the operator's
environment, an index's manifest, a provider's default). Those builders sit in lower layers, so they
call the hook in :mod:`arag_graph.core.endpoints`, and a served run installs this policy around them
(:func:`arag_graph.core.endpoints.serving`, :meth:`ServingPolicy.check_endpoint` deciding); the CLI,
evaluation, judge and summaries build theirs outside it (the operator's own choices), through the
same calls.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from arag_graph.core.endpoints import EndpointKind, canonical_model
from arag_graph.core.errors import AragError, ContextError
from arag_graph.core.limits import ON_VALUES

OFFLINE = "offline"
OPENAI_API = "https://api.openai.com/v1"
"""Where an OpenAI client without a base URL sends its requests: the default when none is configured."""
_DEFAULT_PORTS = {"http": 80, "https": 443}


class RunRefused(ContextError):
    """A run asked for a model, endpoint or index that the operator does not allow."""


@functools.cache
def _reported(kind: type[AragError]) -> type[AragError]:
    """``kind``, made a ``ValueError`` too when it is not one: what LangGraph's server reports to
    the caller with its message (any other type reaches the caller as "An internal error occurred")."""
    if issubclass(kind, ValueError):
        return kind
    return type(kind.__name__, (kind, ValueError), {"__module__": kind.__module__, "__doc__": kind.__doc__})


def served_error(exc: AragError, policy: ServingPolicy | None = None) -> AragError:
    """``exc`` as a served run's caller receives it: its one line, the operator's directories taken
    out (:meth:`ServingPolicy.private`), as an error of the same class that the server reports.

    The class is kept (``except IndexDamagedError`` still catches it), with ``ValueError`` added
    where it lacks it; the traceback and the chain stay in the operator's log, not the caller's reply.
    """
    policy = policy or ServingPolicy.from_env()
    kind = _reported(type(exc))
    made = kind.__new__(kind)
    Exception.__init__(made, " ".join(policy.private(str(exc)).split()))
    return made


def _switch(name: str) -> bool:
    """An operator's security switch: ``1``, ``true``, ``yes`` or ``on`` (any case) is on, anything else off
    (a misspelt value keeps the safe setting, where :func:`~arag_graph.core.limits.flag_from_env` refuses it)."""
    return os.environ.get(name, "").strip().lower() in ON_VALUES


def _listed(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def normalize_url(url: str, what: str = "base_url") -> str:
    """An endpoint in one spelling: scheme and host lower-cased, the port always written, no trailing
    slash. Two endpoints are the same when these spellings are equal: scheme, host, port and path.

    Refuses URLs that carry credentials (``http://user:pass@host``): a secret in a URL ends up in
    logs and run records, and an endpoint that needs one belongs in the server's environment.
    """
    parts = urlsplit(str(url).strip())
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname or port == -1:
        raise RunRefused(f"{what} {str(url)[:100]!r} is not an http(s) URL; give one such as http://localhost:8000/v1")
    if parts.username or parts.password:
        raise RunRefused(f"{what} must not contain credentials; the server's environment provides keys")
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    netloc = f"{host}:{port or _DEFAULT_PORTS[scheme]}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


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
    allowed_chroma_urls: frozenset[str] = frozenset()
    """Chroma servers a served run may reach (``ARAG_CHROMA_URL`` and ``ARAG_ALLOWED_CHROMA_URLS``)."""
    approve_tools: tuple[str, ...] = ()
    """Tools whose calls a person reviews in every served run (``ARAG_APPROVE_TOOLS``)."""
    allow_system_messages: bool = False
    """Whether a caller's input may hold ``system`` messages (``ARAG_ALLOW_SYSTEM_MESSAGES``)."""

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
        chroma = {chroma_endpoint(u) for u in (*_listed("ARAG_ALLOWED_CHROMA_URLS"), *_listed("ARAG_CHROMA_URL"))}
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
            allowed_chroma_urls=frozenset(chroma),
            approve_tools=tuple(_listed("ARAG_APPROVE_TOOLS")),
            allow_system_messages=_switch("ARAG_ALLOW_SYSTEM_MESSAGES"),
        )

    def model(self, requested: str) -> str:
        requested = (requested or "").strip()
        if not requested:
            return self.default_model
        allowed = None if self.allowed_models is None else {canonical_model(m) for m in self.allowed_models}
        if allowed is not None and canonical_model(requested) not in allowed:
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

    def endpoints(self, kind: EndpointKind) -> frozenset[str]:
        """The endpoints (normalised) a served run's clients of ``kind`` may call.

        Model and embeddings clients share the model key, so they share ``ARAG_ALLOWED_BASE_URLS``
        and the default endpoint; with no default configured, that is OpenAI's own API, where a
        client without a base URL goes. Chroma clients get the Chroma list only.
        """
        if kind == "chroma":
            return self.allowed_chroma_urls
        return self.allowed_base_urls if self.default_base_url else self.allowed_base_urls | {OPENAI_API_NORMAL}

    def allows(self, kind: EndpointKind, url: str) -> bool:
        """Whether a client of ``kind`` may call ``url``: scheme, host, port and path as allowed."""
        try:
            return normalize_url(url) in self.endpoints(kind)
        except RunRefused:  # not an http(s) URL, or one carrying credentials
            return False

    def check_endpoint(self, kind: EndpointKind, url: str | None, what: str) -> None:
        """Refuse ``what`` (a client about to be built) when its endpoint ``url`` is not allowed."""
        setting = "ARAG_ALLOWED_CHROMA_URLS" if kind == "chroma" else "ARAG_ALLOWED_BASE_URLS"
        if url is None:
            raise RunRefused(
                f"{what}: cannot tell which endpoint it would call, so this server does not build it; the operator "
                f"may choose another model"
            )
        if not self.allows(kind, url):
            raise RunRefused(
                f"{what} would send requests to {_shown_url(url)}, an endpoint this server does not allow; the "
                f"operator may add it to {setting}, or choose another"
            )

    def index_path(self, requested: str) -> str | None:
        """The index a run names, placed under the root by its spelling alone.

        No filesystem access: this runs when the context is built, which a server may do on its
        event loop. The directories on the way are checked when the run loads the index, off the
        loop (:meth:`open_index_dir`).
        """
        requested = (requested or "").strip()
        if not requested or requested == self.default_index:
            return self.default_index
        if self.index_root is None:
            raise RunRefused(
                "this server does not let runs choose an index (the operator sets ARAG_INDEX_ROOT to allow "
                "indexes under it); leave index_path empty"
            )
        root = os.path.normpath(self.index_root)
        candidate = os.path.normpath(os.path.join(root, requested))  # an absolute request replaces the root
        try:
            inside = os.path.commonpath([root, candidate]) == root
        except ValueError:  # one absolute, one relative
            inside = False
        if not inside or "\x00" in requested:
            raise RunRefused(
                f"index_path {requested[:200]!r} is outside the index root this server allows; give a path "
                "relative to that root"
            )
        return candidate

    def open_index_dir(self, path: str) -> None:
        """Check, off the event loop, that a chosen index is reached from the root through real
        directories only: no symbolic link below the root (the file rule,
        :func:`arag_graph.index.layout.open_inside`, then rules what lies inside the index).

        The operator's default index is theirs and is not checked. The refusal names the path as
        the caller gave it relative to the root, never the operator's directories.
        """
        from arag_graph.index.layout import LinkedPathError, open_inside

        if self.index_root is None or path == self.default_index:
            return
        root = Path(os.path.normpath(self.index_root))
        target = Path(path)
        shown = self.shown(path)
        try:
            os.close(open_inside(root, target, directory=True))
        except LinkedPathError as exc:
            where = self.shown(str(exc.path))
            problem = exc.problem.replace("inside an index", "under the index root")
            raise RunRefused(
                f"index_path {shown!r}: {where!r} {problem}; choose an index directory under the root"
            ) from None

    def private(self, message: str) -> str:
        """``message`` with the operator's directories (the index root, the default index) taken out."""
        if self.default_index:
            message = message.replace(os.path.normpath(self.default_index), "default")
        if self.index_root is not None:
            message = message.replace(os.path.normpath(self.index_root) + os.sep, "")
        return message

    def shown(self, path: str | os.PathLike[str] | None) -> str:
        """A path as a remote caller may see it: relative to the index root (the operator's own
        directories stay private), ``default`` for the operator's index."""
        if not path or str(path) == self.default_index:
            return "default"
        if self.index_root is not None:
            root = os.path.normpath(self.index_root)
            normal = os.path.normpath(path)
            try:
                if os.path.commonpath([root, normal]) == root:  # by spelling: no filesystem access
                    return normal[len(root) :].lstrip(os.sep) or "."
            except ValueError:
                pass
        return Path(path).name

    def check_index_endpoint(self, manifest: Any) -> None:
        """Refuse an index whose manifest names an embeddings endpoint the operator does not allow.

        Every query of such an index is embedded by that endpoint, with the server's key: a manifest
        written by someone else must not be able to send the key (or the questions) to its own host.
        An ``openai:`` model without a base URL uses the server's environment (``OPENAI_BASE_URL``) or
        OpenAI itself, the operator's own choices.
        """
        from arag_graph.index.embedding_spec import is_endpoint_spec

        model = str(getattr(manifest, "embedding_model", "") or "")
        url = getattr(manifest, "embedding_base_url", None)
        if not is_endpoint_spec(model) or not url:
            return
        if not self.allows("embeddings", str(url)):
            raise RunRefused(
                f"this index embeds queries at {_shown_url(str(url))}, an endpoint this server does not allow; the "
                "operator may add it to ARAG_ALLOWED_BASE_URLS, or choose another index"
            )

    def check_index_models(self, manifest: Any, index_path: str | os.PathLike[str]) -> None:
        """Refuse an index a run chose whose manifest loads what the operator does not allow: an
        embeddings endpoint (:meth:`check_index_endpoint`) or a model folder outside the index root
        and ``ARAG_EMBEDDING_MODEL_ROOTS``. The operator's default index (``ARAG_INDEX``) is theirs.
        """
        from arag_graph.index.embedding_spec import model_folder  # the rule that loads the model

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


OPENAI_API_NORMAL = normalize_url(OPENAI_API)


def chroma_endpoint(url: str) -> str:
    """A Chroma URL as the client will call it (normalised): ``HOST:PORT`` alone means http, and the
    port is 8000 by default, as in :func:`arag_graph.index.chroma.connect_sentence_store`."""
    text = url.strip() if "://" in url else f"http://{url.strip()}"
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:  # a port that is no number: refused as written, not taken for the default
        return normalize_url(text, "Chroma URL")
    if parts.hostname and port is None:
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        text = urlunsplit((parts.scheme, f"{host}:{8000 if parts.scheme != 'https' else 443}", parts.path, "", ""))
    return normalize_url(text, "Chroma URL")


def _shown_url(url: str) -> str:
    """``url`` for a message: credentials hidden, at most 100 characters."""
    from arag_graph.core.safety import url_without_credentials

    return repr(url_without_credentials(str(url))[:100])


def _same_path(a: str | os.PathLike[str] | None, b: str | os.PathLike[str] | None) -> bool:
    return a is not None and b is not None and os.path.realpath(a) == os.path.realpath(b)
