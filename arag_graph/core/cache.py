"""Where arag keeps files it derives (the sample index, exported encoders, evaluation indexes).

Its own module, with no package imports, so that any layer can ask without pulling in the index.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$ARAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/arag-graph``, else ``~/.cache/arag-graph``."""
    base = os.environ.get("ARAG_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "arag-graph"
