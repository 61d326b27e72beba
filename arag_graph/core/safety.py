"""Keeping secrets out of outputs and turning model failures into one readable line.

Errors from model providers can quote request details; predictions, trajectories, logs and traces
must never carry an API key, so every error text that leaves a graph passes through
:func:`redact`.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

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
    """``url`` with any ``user:password@`` replaced by ``***@``, for files and logs."""
    return _URL_CREDENTIALS.sub("***@", url)


def redact(text: str, extra: tuple[str, ...] = ()) -> str:
    """Replace known secret values, URL credentials and anything shaped like an API key with ``***``."""
    for secret in (*secrets_in_env(), *_remembered, *extra):
        if secret and secret in text:
            text = text.replace(secret, "***")
    return _KEY_SHAPES.sub("***", url_without_credentials(text))


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
    request = getattr(exc, "request", None)
    try:
        timeout = request.extensions.get("timeout") if request is not None else None
    except RuntimeError:  # an httpx exception without its request
        return None
    read = timeout.get("read") if isinstance(timeout, dict) else None
    return float(read) if isinstance(read, (int, float)) else None


def describe_model_error(exc: BaseException) -> str:
    """One line saying that the model failed, why, and what to check (no traceback, no secrets)."""
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
