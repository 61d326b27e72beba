"""Keeping secrets out of outputs and turning model failures into one readable line.

Errors from model providers can quote request details; predictions, trajectories, logs and traces
must never carry an API key, so every error text that leaves a graph passes through
:func:`redact`.
"""

from __future__ import annotations

import os
import re

_SECRET_ENV = (
    "OPENAI_API_KEY",
    "ARAG_API_KEY",
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "ARAG_JUDGE_API_KEY",
)
_KEY_SHAPES = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{8,}|lsv2_[A-Za-z0-9_]{8,})")


def secrets_in_env() -> list[str]:
    return [v for v in (os.environ.get(name, "") for name in _SECRET_ENV) if len(v) >= 6]


def redact(text: str, extra: tuple[str, ...] = ()) -> str:
    """Replace known secret values and anything shaped like an API key with ``***``."""
    for secret in (*secrets_in_env(), *extra):
        if secret and secret in text:
            text = text.replace(secret, "***")
    return _KEY_SHAPES.sub("***", text)


def describe_model_error(exc: BaseException) -> str:
    """One line saying that the model failed, why, and what to check (no traceback, no secrets)."""
    kind = type(exc).__name__
    status = getattr(exc, "status_code", None)
    detail = " ".join(str(exc).split())[:300]
    hint = "check the model name, base URL and API key, or retry later"
    if status == 401 or "api key" in detail.lower() or "authentication" in detail.lower():
        hint = "check the API key"
    elif status == 429:
        hint = "the provider is rate-limiting; retry later or lower --workers"
    elif kind in ("APIConnectionError", "ConnectError", "APITimeoutError", "ReadTimeout", "TimeoutError"):
        hint = "the model server could not be reached in time; check --base-url and that the server is up"
    elif kind in ("JSONDecodeError", "CutOffReplyError"):
        # Not retried by the client: the server answered, but the reply was incomplete or not JSON.
        hint = "the model server sent an incomplete or malformed reply; retry, and check any proxy in between"
    code = f" (HTTP {status})" if status else ""
    return redact(f"model call failed: {kind}{code}: {detail}; {hint}")
