"""The document level above chunks: which chunks were cut from the same document.

An index keeps chunks, not documents, but ARAGOG's auto-merging retrieval (sentence -> chunk ->
document) and document summary index need the document a chunk belongs to. The chunker names the
pieces of a document cut in several chunks ``"<id>#0"``, ``"<id>#1"``, ... in corpus order
(:mod:`arag_graph.core.chunking`), so the documents are read back from the ids rather than stored: a
chunk joins the previous chunk's document when both carry the same ``<id>`` and title and its piece
number follows the previous one's. Every other chunk is a document of its own (a document that
fitted in one chunk). Indexes built from ready-made chunks with other ids simply have one
document per chunk, for which merging to documents changes nothing.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arag_graph.core.documents import Chunk

if TYPE_CHECKING:
    from arag_graph.index.hierarchical import HierarchicalIndex

__all__ = ["DocumentGroups", "document_groups", "documents_of"]

_PIECE = re.compile(r"^(?P<base>.+)#(?P<n>\d+)$")


@dataclass(frozen=True)
class DocumentGroups:
    """Documents as runs of chunk ids in corpus order, and the document of each chunk."""

    keys: tuple[str, ...]
    """A key per document: the chunker's document id (``<id>`` of ``<id>#n``, or the chunk id)."""
    chunks: tuple[tuple[str, ...], ...]
    """The chunk ids of each document, in order."""
    of_chunk: dict[str, int]
    """Chunk id -> position of its document in ``keys``."""

    def __len__(self) -> int:
        return len(self.keys)

    def siblings(self, chunk_id: str) -> tuple[str, ...]:
        """The chunk ids of the document ``chunk_id`` belongs to (itself alone when unknown)."""
        position = self.of_chunk.get(chunk_id)
        return (chunk_id,) if position is None else self.chunks[position]


def document_groups(chunks: Sequence[Chunk]) -> DocumentGroups:
    """Group ``chunks`` (in corpus order) into the documents they were cut from (see the module doc)."""
    keys: list[str] = []
    groups: list[list[str]] = []
    previous: tuple[str, int, str | None] | None = None  # base, piece number, title of the last chunk
    for chunk in chunks:
        match = _PIECE.match(chunk.id)
        piece = (match["base"], int(match["n"]), chunk.title) if match else None
        follows = (
            piece is not None
            and previous is not None
            and piece[1] > 0
            and (piece[0], piece[1] - 1, piece[2]) == previous
        )
        if follows:
            groups[-1].append(chunk.id)
        else:
            keys.append(piece[0] if piece is not None and piece[1] == 0 else chunk.id)
            groups.append([chunk.id])
        previous = piece
    of_chunk = {cid: n for n, group in enumerate(groups) for cid in group}
    return DocumentGroups(tuple(keys), tuple(tuple(g) for g in groups), of_chunk)


_cache: weakref.WeakKeyDictionary[HierarchicalIndex, DocumentGroups] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def documents_of(index: HierarchicalIndex) -> DocumentGroups:
    """The documents of an index's chunks, computed on first use and kept while the index lives."""
    with _lock:
        groups = _cache.get(index)
        if groups is None:
            groups = document_groups(index.store.chunks)
            _cache[index] = groups
    return groups
