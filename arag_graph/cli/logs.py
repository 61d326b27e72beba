"""How the ``arag`` command shows log records: one level chosen by flags or the environment.

The library only logs (``logging.getLogger(__name__)`` in each module) and never configures
logging: an application embedding it decides. The command line is such an application, and picks
the level of the ``arag_graph`` loggers as pip does, from ``-q``/``-v`` or ``$ARAG_LOG_LEVEL``:

- default ``info``: warnings (a HyDE call that failed, an evaluator that raised) and the few facts
  worth a line (the LangSmith experiment an evaluation uploaded to);
- ``-v``: ``debug`` as well (what each phase does); ``-vv`` also other libraries' ``info``;
- ``-q``/``--quiet``: errors only, and no progress bars.

Other libraries' records (langsmith, httpx, chromadb, ...) show from ``warning`` up, ``error`` with
``--quiet``. Python warnings go through the same handler, so ``--quiet`` silences them too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from arag_graph.core.errors import AragError

ENV = "ARAG_LOG_LEVEL"
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
DEFAULT = logging.INFO


def level_of(verbose: int = 0, quiet: bool = False, env: str | None = None) -> int:
    """The ``arag_graph`` log level: ``--quiet``, else ``-v``, else ``env`` (``$ARAG_LOG_LEVEL``), else info."""
    if quiet:
        return logging.ERROR
    if verbose:
        return logging.DEBUG
    if env is None or not env.strip():
        return DEFAULT
    try:
        return LEVELS[env.strip().lower()]
    except KeyError:
        raise AragError(f"{ENV}={env!r} is not a log level; use one of {', '.join(LEVELS)}") from None


class _Formatter(logging.Formatter):
    """``arag: warning: ...`` like the command's own error lines; debug lines name their logger."""

    def format(self, record: logging.LogRecord) -> str:
        text = " ".join(record.getMessage().split()) if record.levelno >= logging.WARNING else record.getMessage()
        if record.exc_info and record.levelno < logging.WARNING:
            text += "\n" + self.formatException(record.exc_info)
        where = f" [{record.name}]" if record.levelno <= logging.DEBUG else ""
        return f"arag: {record.levelname.lower()}{where}: {text}"


@contextlib.contextmanager
def cli_logging(level: int, verbose: int = 0, stream: TextIO | None = None) -> Iterator[None]:
    """Show log records on ``stream`` (stderr) for one command, then restore logging as it was.

    Restoring matters where ``arag_graph.cli.main`` runs in-process (tests, notebooks): a
    ``--quiet`` command must not silence the next caller's warnings.
    """
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(_Formatter())
    root, package = logging.getLogger(), logging.getLogger("arag_graph")
    others = logging.ERROR if level >= logging.ERROR else (logging.INFO if verbose > 1 else logging.WARNING)
    saved = (root.level, package.level)
    # The package's records reach the root's handler at the package's own level, whatever the
    # root's; the root's level (and the filter, for a library that sets its own) holds the rest.
    root.addHandler(handler)
    root.setLevel(others)
    package.setLevel(level)
    handler.addFilter(lambda record: record.name.startswith("arag_graph") or record.levelno >= others)
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        root.removeHandler(handler)
        root.setLevel(saved[0])
        package.setLevel(saved[1])


def env_level() -> str | None:
    """``$ARAG_LOG_LEVEL`` as set (None when it is not)."""
    return os.environ.get(ENV)
