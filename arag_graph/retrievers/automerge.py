"""ARAGOG's auto-merging retrieval (AMR): search sentences, hand over their parents when enough match.

The hierarchy is the index's own: sentence -> chunk -> document (:mod:`arag_graph.index.document_groups`).
The ``top_k`` sentences nearest the query are the leaves. A chunk more than ``threshold`` of whose
sentences are leaves replaces them (the whole chunk is handed over); a document more than
``threshold`` of whose chunks were so merged replaces those chunks (all its chunks are handed
over). The remaining leaves are handed over as the matched sentences of their chunk, each in its
sentence window when one is asked for (``window`` 1: the sentence alone).

Decisions:

* ``threshold`` is a strict "more than", as in ARAGOG (and LlamaIndex's auto-merging retriever):
  with the default 0.5, two of four sentences do not merge, three do.
* Only merged chunks count towards their document, one level at a time, as the method climbs the
  tree; a merged document covers its other chunks too, so leaves in them are not repeated.
* A merged node scores as its best leaf (the package's rule for chunks: the best sentence), and
  passages come best first. A document comes as one passage per chunk, in document order, so that
  citations and the retrieved-chunk counts stay in chunk ids like every other retriever's.
* The same ``top_k`` leaves as sentence-window retrieval, so the two compare on equal searches;
  merging only ever widens what the leaves hand over.

The passages are made by :func:`arag_graph.retrievers.passages.auto_merge`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arag_graph.index.document_groups import documents_of

if TYPE_CHECKING:
    from arag_graph.index.hierarchical import HierarchicalIndex

__all__ = ["MERGE_THRESHOLD", "MERGE_THRESHOLD_RANGE", "MergedNode", "merge_leaves"]

MERGE_THRESHOLD = 0.5
MERGE_THRESHOLD_RANGE = (0.3, 0.7)
"""ARAGOG tunes theta in 0.3-0.7; configuration bounds the setting to it."""


@dataclass(frozen=True)
class MergedNode:
    """One node handed over: ``level`` sentence(s) of a chunk, a whole chunk, or a whole document."""

    level: str  # "sentences", "chunk" or "document"
    chunk_ids: tuple[str, ...]
    positions: tuple[int, ...]  # the leaf sentences' positions for "sentences", else ()
    score: float


def merge_leaves(
    index: HierarchicalIndex, leaves: Sequence[tuple[str, int, float]], threshold: float = MERGE_THRESHOLD
) -> list[MergedNode]:
    """Merge ``(chunk_id, position, similarity)`` leaves up the hierarchy; nodes best first."""
    by_chunk: dict[str, dict[int, float]] = {}
    for chunk_id, position, similarity in leaves:
        chunk = index.get_chunk(chunk_id)
        if chunk is None or not 0 <= position < len(chunk.sentences):
            continue  # a record out of step with the chunk store: skip, never crash
        found = by_chunk.setdefault(chunk_id, {})
        found[position] = max(similarity, found.get(position, similarity))

    merged_chunks: dict[str, float] = {}
    for chunk_id, found in by_chunk.items():
        chunk = index.get_chunk(chunk_id)
        assert chunk is not None
        if len(found) / len(chunk.sentences) > threshold:
            merged_chunks[chunk_id] = max(found.values())

    groups = documents_of(index)
    merged_docs: dict[int, float] = {}
    for chunk_id in merged_chunks:
        doc = groups.of_chunk.get(chunk_id)
        if doc is None or len(groups.chunks[doc]) < 2 or doc in merged_docs:
            continue  # a one-chunk document is its chunk: nothing to widen
        members = groups.chunks[doc]
        hits = [merged_chunks[c] for c in members if c in merged_chunks]
        if len(hits) / len(members) > threshold:
            merged_docs[doc] = max(hits)

    covered = {c for doc in merged_docs for c in groups.chunks[doc]}
    nodes = [MergedNode("document", groups.chunks[doc], (), score) for doc, score in merged_docs.items()]
    nodes += [MergedNode("chunk", (c,), (), s) for c, s in merged_chunks.items() if c not in covered]
    for chunk_id, found in by_chunk.items():
        if chunk_id in merged_chunks or chunk_id in covered:
            continue
        nodes.append(MergedNode("sentences", (chunk_id,), tuple(sorted(found)), max(found.values())))
    nodes.sort(key=lambda n: -n.score)  # stable: ties keep the order above
    return nodes
