"""Keeping secrets out of outputs and files, and turning model failures into one readable line.

Errors from model providers can quote request details, and a model (or a proxy in front of it) can
echo the request's key in its reply; predictions, trajectories, logs, traces and a served run's
answer, messages and stream must never carry it. So every error text that leaves a graph, every
reply of a model arag builds (:mod:`arag_graph.llm.openai_chat`, streamed chunks through
:class:`StreamRedactor`) and every record arag writes (:func:`arag_graph.core.jsonl.dumps`, the index
manifest, the log lines of the command) passes through :func:`redact`, and every URL arag records
through :func:`url_without_credentials` (user information and secret query parameters hidden).
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from arag_graph.core.errors import BudgetExceeded, ReplyTooLarge

_SECRET_ENV = (
    "OPENAI_API_KEY",
    "ARAG_API_KEY",
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "ARAG_JUDGE_API_KEY",
)
_KEY_SHAPES = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{8,}|lsv2_[A-Za-z0-9_]{8,})")
# The user-information part of a URL (``http://user:password@host``): credentials of a base URL.
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/?#@\s]+@")
# A URL's authority still arriving (no ``/``, ``@`` or space after ``://`` yet): it may turn out to
# hold ``user:password@``, so a stream holds it back whatever its length (:class:`StreamRedactor`).
_OPEN_AUTHORITY = re.compile(r"://[^/?#@\s]*\Z")
# Query parameters that carry a secret (``?api_key=...``, ``&token=...``, Azure's ``sig=``).
_SECRET_PARAMS = re.compile(
    r"(?i)(?<=[?&;])((?:[\w.-]*(?:key|token|secret|password|passwd|pwd|auth|credential|signature))|sig)=[^&#\s\"']+"
)
_MIN_SECRET = 6  # shorter values would blank ordinary words wherever they occur
_remembered: set[str] = set()


def secrets_in_env() -> list[str]:
    return [v for v in (os.environ.get(name, "") for name in _SECRET_ENV) if len(v) >= _MIN_SECRET]


def remember_url_credentials(url: str | None) -> None:
    """Treat the credentials inside ``url`` (``--base-url http://user:pass@host``) as secrets from now on.

    The URL form is always redacted (:data:`_URL_CREDENTIALS`); remembering the values also catches
    them alone, for example echoed back by a model. The password is remembered, and the user part when
    it stands alone (a token used as the user name).
    """
    if not url:
        return
    parts = urlsplit(url)
    for value, secret in ((parts.password, True), (parts.username, parts.password is None)):
        if secret and value and len(unquote(value)) >= _MIN_SECRET:
            _remembered.update({value, unquote(value)})


def url_without_credentials(url: str) -> str:
    """``url`` (or any text) with every ``user:password@`` replaced by ``***@`` and every secret query
    parameter's value by ``***``: the one rule for URLs in files and logs."""
    return _SECRET_PARAMS.sub(r"\1=***", _URL_CREDENTIALS.sub("***@", url))


def url_credentials(url: str) -> str | None:
    """What in ``url`` is a credential (user information, a secret query parameter), or None."""
    found = _URL_CREDENTIALS.search(url) or _SECRET_PARAMS.search(url)
    return found.group(0) if found else None


def redact(text: str, extra: tuple[str, ...] = ()) -> str:
    """Replace known secret values, URL credentials and anything shaped like an API key with ``***``."""
    for secret in (*secrets_in_env(), *_remembered, *extra):
        if secret and secret in text:
            text = text.replace(secret, "***")
    return _KEY_SHAPES.sub("***", url_without_credentials(text))


class StreamRedactor:
    """:func:`redact` over text that arrives in pieces (a streamed reply), each piece as soon as it is safe.

    A secret may be split across pieces, so the end of what has arrived is held back while it could
    still be the start of one: the longest known secret's length, and any key-shaped or URL-credential
    text that reaches the end, including a URL whose user information may still be arriving.
    :meth:`flush` gives the rest once the stream is over. No secret known when the stream starts, and
    no key-shaped text, is given out in clear, however it is split.
    """

    _SHAPES = (_KEY_SHAPES, _URL_CREDENTIALS, _SECRET_PARAMS, _OPEN_AUTHORITY)

    def __init__(self, extra: tuple[str, ...] = ()) -> None:
        self.secrets = [s for s in (*secrets_in_env(), *_remembered, *extra) if s]
        self.hold = max([len(s) for s in self.secrets] + [64]) - 1
        self.pending = ""

    def feed(self, piece: str) -> str:
        self.pending += piece
        cut = max(0, len(self.pending) - self.hold)
        for secret in self.secrets:  # a secret straddling the cut waits whole
            start = self.pending.find(secret, max(0, cut - len(secret) + 1))
            while start != -1 and start < cut:
                cut = start
                start = self.pending.find(secret, max(0, cut - len(secret) + 1))
        for shape in self._SHAPES:  # with the few characters before it that its pattern looks at
            for match in shape.finditer(self.pending):
                if match.start() - 3 < cut and (match.end() > cut or match.end() >= len(self.pending)):
                    cut = max(0, match.start() - 3)
        out, self.pending = self.pending[:cut], self.pending[cut:]
        return redact(out, tuple(self.secrets))

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return redact(out, tuple(self.secrets))


def _timed_out(exc: BaseException) -> bool:
    """Whether a model call failed because no reply came in time (the client's own error classes)."""
    try:
        import httpx
        import openai
    except ImportError:  # pragma: no cover - both come with langchain-openai
        return isinstance(exc, TimeoutError)
    return isinstance(exc, (TimeoutError, openai.APITimeoutError, httpx.TimeoutException))


def _unreachable(exc: BaseException) -> bool:
    try:
        import httpx
        import openai
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, (openai.APIConnectionError, httpx.TransportError))


def _seconds_waited(exc: BaseException) -> float | None:
    """The read timeout the request ran with, as httpx records it on the request."""
    try:  # httpx's ``request`` property itself raises when the exception has none
        request = getattr(exc, "request", None)
        timeout = request.extensions.get("timeout") if request is not None else None
    except RuntimeError:  # an httpx exception without its request
        return None
    read = timeout.get("read") if isinstance(timeout, dict) else None
    return float(read) if isinstance(read, (int, float)) else None


_CONTEXT_OVERFLOW = re.compile(
    r"maximum context length|context_length_exceeded|exceeds? (?:the )?(?:available )?context|context (?:window|size) "
    r"(?:of|exceeded)|prompt is too long|too many tokens",
    re.IGNORECASE,
)
"""How OpenAI, llama.cpp (both servers), vLLM and Ollama say that a request was longer than the context."""


def describe_model_error(exc: BaseException) -> str:
    """One line saying that the model failed, why, and what to check (no traceback, no secrets)."""
    if isinstance(exc, (BudgetExceeded, ReplyTooLarge)):  # the operator's caps say it in one line already
        return redact(str(exc))
    kind = type(exc).__name__
    status = getattr(exc, "status_code", None)
    detail = " ".join(str(exc).split())[:300]
    hint = "check the model name, base URL and API key, or retry later"
    if _timed_out(exc):
        waited = _seconds_waited(exc)
        within = f" within {waited:g} s per attempt" if waited else ""
        return redact(
            f"model call failed: timed out ({kind}: {detail}); the model server did not reply{within}: "
            "raise the limit with --model-timeout SECONDS (or $ARAG_MODEL_TIMEOUT, or the timeout setting) "
            "and --model-retries, or check that the server is up"
        )
    if _CONTEXT_OVERFLOW.search(detail):
        # The request itself was too long for the model: retrying, or another key, cannot help.
        return redact(
            f"model call failed: the request does not fit the model's context window ({kind}: {detail[:200]}); "
            "lower top_k, max_steps or message_token_budget, or serve the model with a larger context "
            "(llama.cpp: --n_ctx; Ollama: num_ctx; vLLM: --max-model-len)"
        )
    if status == 401 or "api key" in detail.lower() or "authentication" in detail.lower():
        hint = "check the API key"
    elif status == 429:
        hint = "the provider is rate-limiting; retry later or lower --workers"
    elif _unreachable(exc) or kind in ("APIConnectionError", "ConnectError"):
        hint = "the model server could not be reached; check --base-url and that the server is up"
    elif kind in ("JSONDecodeError", "CutOffReplyError"):
        # Not retried by the client: the server answered, but the reply was incomplete or not JSON.
        hint = "the model server sent an incomplete or malformed reply; retry, and check any proxy in between"
    code = f" (HTTP {status})" if status else ""
    return redact(f"model call failed: {kind}{code}: {detail}; {hint}")
