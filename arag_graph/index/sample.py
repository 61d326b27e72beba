"""The bundled sample: ten HotpotQA questions and their 100 passages (CC BY-SA 4.0).

It lets the demo, LangGraph Studio and the tests run on a fresh machine with no data download.
The sample index is built on first use into the user cache directory.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from arag_graph.core.cache import cache_dir
from arag_graph.core.errors import IndexDamagedError, IndexNotFoundError
from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.load import load_index


def sample_dir() -> Path:
    return Path(str(resources.files("arag_graph") / "data" / "sample"))


def sample_corpus_path() -> Path:
    return sample_dir() / "corpus.json"


def sample_questions_path() -> Path:
    return sample_dir() / "questions.json"


def default_sample_index_path() -> Path:
    return cache_dir() / "sample-index"


def ensure_sample_index(path: str | os.PathLike[str] | None = None, *, progress: bool = False) -> HierarchicalIndex:
    """Load the sample index, building it first when there is none.

    A damaged index is rebuilt only in arag's own cache (the default place); one at a ``path`` the
    user named is theirs, so its damage is reported (the one-line error), never built over.
    """
    target = Path(path) if path is not None else default_sample_index_path()
    try:
        return load_index(target, cache=True)
    except IndexDamagedError:
        if path is not None and Path(path) != default_sample_index_path():
            raise
    except IndexNotFoundError:
        pass
    flag = "--index" if path is not None else "$ARAG_CACHE_DIR (the cache directory)"
    build_index(sample_corpus_path(), target, progress=progress, out_flag=flag)
    return load_index(target, cache=True)
