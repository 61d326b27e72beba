"""Errors a user can fix.

Every error raised on purpose by this package is an :class:`AragError` whose message is one
line that names the problem and the fix. The CLI prints that line and exits non-zero; library
callers can catch the base class. Anything else that escapes is a bug.
"""

from __future__ import annotations


class AragError(Exception):
    """A problem with the user's input or set-up, explained in one line."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class CorpusError(AragError):
    """The corpus file or directory cannot be read as a corpus."""


class IndexNotFoundError(AragError):
    """No usable index at the given location."""


class IndexDamagedError(IndexNotFoundError):
    """An index file is missing, truncated or altered since arag wrote it.

    A subclass of :class:`IndexNotFoundError` because the fix is the same (build the index again),
    and callers that rebuild a missing index (the bundled sample, the evaluation cache) rebuild a
    damaged one too. Its message always reads ``index damaged: ...; rebuild with ...``.
    """

    def __init__(self, root: object, problem: str) -> None:
        super().__init__(f"index damaged: {problem}; rebuild with `arag index CORPUS --out {root}`")


class IndexMismatchError(AragError):
    """The index was built with settings (embedding model, format) that differ from the caller's."""


class ModelSpecError(AragError):
    """A chat-model spec cannot be turned into a model (unknown form, missing credentials)."""


class ContextError(AragError, ValueError):
    """A run's settings (its LangGraph context) cannot be used: a bad value, or one the operator does not allow.

    A ``ValueError`` as well, which is what servers such as LangGraph's report back to the client
    with its message (other exception types reach a remote caller as "An internal error occurred").
    """


class DatasetError(AragError):
    """A question file cannot be read or does not fit its corpus."""
