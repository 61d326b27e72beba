"""The context a run retrieved, as ARAGOG's metrics see it: chunk IDs in rank order, and their texts.

Context Precision needs the retrieved chunks *in order*, and the judged metrics need their *text*.
A prediction record keeps neither list as such: ``retrieved_chunks`` and ``read_chunks`` are sets
in effect, while each trajectory step keeps the chunk IDs its tool showed, in rank order. So the
ranking is the trajectory's steps one after the other, each chunk at its first appearance (a
pipeline's single retrieval is its top-k as ranked; an agent's context grows search by search),
with any recorded chunk the trajectory lacks appended. Texts come from the index (the record keeps
IDs only); a snippet the model saw is not recorded, so a chunk's whole text stands for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from arag_graph.evaluators.fields import chunk_ids
from arag_graph.evaluators.judge import data_block

__all__ = ["ChunkSource", "passages_block", "ranked_chunks"]

MAX_PASSAGE_CHARS = 4_000
"""A passage longer than this is cut for the judge (QA passages are far shorter; corpus chunks ~1k tokens)."""


class ChunkSource(Protocol):
    """Where chunk texts come from: a :class:`~arag_graph.index.hierarchical.HierarchicalIndex` has this method."""

    def get_chunk(self, chunk_id: str) -> Any: ...


def ranked_chunks(outputs: Mapping[str, Any] | None) -> list[str]:
    """The run's retrieved chunk IDs in rank order, each once (see the module docstring)."""
    outputs = outputs or {}
    ranked: dict[str, None] = {}
    for step in outputs.get("trajectory") or []:
        if isinstance(step, Mapping) and not step.get("error"):
            ranked.update(dict.fromkeys(chunk_ids(step.get("chunk_ids"))))
    ranked.update(dict.fromkeys(chunk_ids(outputs.get("retrieved_chunks"))))
    ranked.update(dict.fromkeys(chunk_ids(outputs.get("read_chunks"))))
    return list(ranked)


def _text(chunks: ChunkSource, chunk_id: str) -> str | None:
    chunk = chunks.get_chunk(chunk_id)
    if chunk is None:
        return None
    title = getattr(chunk, "title", None)
    text = str(getattr(chunk, "text", chunk))
    if len(text) > MAX_PASSAGE_CHARS:
        text = text[:MAX_PASSAGE_CHARS] + " [... cut]"
    return f"{title}\n{text}" if title else text


def passages_block(chunk_ids: Sequence[str], chunks: ChunkSource) -> tuple[str, list[str]]:
    """The chunks' texts as numbered, escaped data elements, and the IDs shown (unknown IDs skipped).

    Passages are numbered 1, 2, ... in the order given, so a judge refers to them by number and
    never has to copy an ID.
    """
    shown: list[str] = []
    parts: list[str] = []
    for chunk_id in chunk_ids:
        text = _text(chunks, chunk_id)
        if text is None:
            continue
        shown.append(chunk_id)
        parts.append(data_block(f"passage_{len(shown)}", text))
    return "<passages>\n" + "\n".join(parts) + "\n</passages>", shown
