"""Names that moved or went, kept working for one release with a ``DeprecationWarning`` (CHANGELOG.md).

A breaking change bumps the version; where an old name can keep working cheaply it does, for one
release, and says where the new one is. Old module paths are small alias modules (``arag_graph.agent``,
``arag_graph.retrieval``) whose names forward to the module that holds them now
(:func:`forward_module`), so ``from arag_graph.agent.graph import build_arag_graph`` gets the same
object as the new path, with a warning that names the new path and the release that drops the old.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

REMOVED_IN = "0.3.0"
"""The release that drops the names deprecated in this one."""


def warn_moved(old: str, new: str, *, depth: int = 3) -> None:
    """The one warning of a deprecated name: where it went and when the old one goes. ``depth``: the
    ``stacklevel`` of the code that used the old name, the caller's caller by default (``warnings``
    itself skips importlib's frames, so an alias module's warning names the line that imported it,
    which is also what Python's default filters need to show it in ``__main__``)."""
    warnings.warn(
        f"{old} is deprecated: use {new} (the old name goes in {REMOVED_IN})", DeprecationWarning, stacklevel=depth
    )


def forward_module(old: str, new: ModuleType) -> Callable[[str], Any]:
    """Warn that module ``old`` moved to ``new`` and return the old module's ``__getattr__``: every
    name of ``new``, the very same objects (classes stay ``isinstance``-compatible)."""
    warn_moved(old, new.__name__, depth=4)  # warn_moved < this < the alias module < (importlib) < its importer

    def __getattr__(name: str) -> Any:
        try:
            return getattr(new, name)
        except AttributeError:
            raise AttributeError(f"module {old!r} (now {new.__name__!r}) has no attribute {name!r}") from None

    return __getattr__
