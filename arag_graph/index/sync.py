"""Syncing a source into an existing index: ``arag index SOURCE --out DIR --update``.

Above both :mod:`arag_graph.index.load` (which opens the index) and :mod:`arag_graph.index.update`
(whose :func:`~arag_graph.index.update.update_index` changes it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from langchain_core.embeddings import Embeddings

from arag_graph.index.corpus import load_corpus
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.load import load_index
from arag_graph.index.update import UpdateReport, update_index


def sync_index(
    source: str | os.PathLike[str] | Iterable[Any],
    out: str | os.PathLike[str],
    *,
    embeddings: Embeddings | None = None,
    corpus_format: str | None = None,
    progress: bool = False,
    device: str | None = None,
) -> tuple[HierarchicalIndex, UpdateReport]:
    """Make the index at ``out`` hold exactly the documents of ``source`` (a corpus path, or
    documents), rebuilding nothing that did not change: ``arag index SOURCE --out DIR --update``.

    Documents are matched by id (a directory's: the file's path inside it) and compared by content
    hash; see :func:`update_index`. ``device`` is where new sentences are encoded (``load_index``'s).
    """
    index = load_index(out, embeddings=embeddings, sentences_at_first_use=True, device=device)
    documents = load_corpus(source, corpus_format) if isinstance(source, (str, os.PathLike)) else list(source)
    return update_index(index, sync=documents, progress=progress)
