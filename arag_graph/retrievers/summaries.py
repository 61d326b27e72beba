"""ARAGOG's document summary index (DSI): a summary per document, then chunks inside the best documents.

At index time (``arag index --summaries MODEL``) every document (:mod:`arag_graph.index.document_groups`) gets
a summary, embedded with the index's own encoder and stored in the build: ``summaries.jsonl`` (one
record per document: its key, chunk ids, title, summary) and ``summaries.npy`` (their vectors),
both covered by the manifest's checksums like every other file of the build. The manifest's
``extra["summaries"]`` says who wrote them and what they cost.

``MODEL`` is any chat model spec of :mod:`arag_graph.llm.models` (same resolution, timeouts and
retries as ``arag ask``), or ``offline``: an *extractive* summary, the document's lead sentences,
which needs no model and is labelled as such (``kind: "extractive"``) in the manifest and in every
retrieval that uses it. It is a stand-in that keeps DSI runnable offline, not what ARAGOG measured.

At query time, two stages: the ``documents`` summaries nearest the query (more, in order, until
the chosen documents hold ``top_k`` chunks), then the ``top_k`` chunks of those documents nearest
it (best sentence per chunk, as ``semantic_search`` ranks). The document count never caps the
passages: on a corpus of one chunk per document (HotpotQA) DSI still hands over ``top_k``, as every
other retriever it is compared with does.

Writing them (resumable, counted in the manifest) is :mod:`arag_graph.llm.summarize`'s part.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from arag_graph.core.documents import SearchHit
from arag_graph.core.errors import AragError

if TYPE_CHECKING:
    from arag_graph.index.hierarchical import HierarchicalIndex

__all__ = [
    "EXTRACTIVE",
    "SUMMARIES",
    "SUMMARY_DOCUMENTS",
    "SUMMARY_VECTORS",
    "SummaryIndex",
    "has_summaries",
    "missing_summaries_error",
    "summary_index",
    "summary_search",
]

SUMMARIES = "summaries.jsonl"
SUMMARY_VECTORS = "summaries.npy"
EXTRACTIVE = "offline"
"""The ``--summaries`` value that writes extractive summaries (no model)."""
LEAD_SENTENCES = 3
SUMMARY_DOCUMENTS = 3
"""Documents the first stage keeps at least, unless a run says otherwise (``summary_documents``)."""
SUMMARY_MAX_TOKENS = 256


def describe(info: dict[str, Any]) -> str:
    """How summaries were written, for hits and messages: "extractive (lead sentences, no model)"."""
    if info.get("kind") == "extractive":
        return f"extractive (the first {LEAD_SENTENCES} sentences of each document, no model)"
    return f"written by {info.get('model')}"


def kind_of(model: str) -> str:
    return "extractive" if model == EXTRACTIVE else "model"


# ---------------------------------------------------------------------------------------------
# Reading and searching
def read_build_summaries(build_dir: Path) -> list[dict[str, Any]]:
    """The summary records of a build (none when it has none, or they cannot be read as the file rule allows)."""
    from arag_graph.index.layout import read_index_bytes

    try:
        text = read_index_bytes(build_dir, build_dir / SUMMARIES).decode("utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, ValueError, AragError):
        return []  # a damaged earlier build: its summaries are simply written again


@dataclass(frozen=True)
class SummaryIndex:
    """The summaries of a loaded index: one record and one unit vector per document."""

    records: list[dict[str, Any]]
    vectors: np.ndarray
    info: dict[str, Any]

    @property
    def label(self) -> str:
        return describe(self.info)


_loaded: weakref.WeakKeyDictionary[HierarchicalIndex, SummaryIndex] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def missing_summaries_error(index: HierarchicalIndex) -> AragError:
    where = index.path if index.path is not None else "DIR"
    return AragError(
        f"{where}: this index has no document summaries, which retriever=dsi needs; rebuild it with "
        f"`arag index CORPUS --out {where} --summaries offline` (extractive) or `--summaries MODEL`"
    )


def has_summaries(index: HierarchicalIndex) -> bool:
    return bool((index.manifest.extra or {}).get("summaries"))


def summary_index(index: HierarchicalIndex) -> SummaryIndex:
    """The summaries of ``index``, read (and checked against the manifest's checksums) on first use."""
    from arag_graph.core.errors import IndexDamagedError
    from arag_graph.index import integrity
    from arag_graph.index.layout import load_index_array

    with _lock:
        loaded = _loaded.get(index)
        if loaded is not None:
            return loaded
        info = (index.manifest.extra or {}).get("summaries")
        build_dir = getattr(index, "build_dir", None)
        if not info or build_dir is None:
            raise missing_summaries_error(index)
        root = Path(index.path) if index.path is not None else Path(build_dir)
        for name in (SUMMARIES, SUMMARY_VECTORS):
            expected = index.manifest.checksums.get(name)
            if expected is None:
                raise IndexDamagedError(root, f"the manifest records summaries but no checksum of {name}")
            integrity.check_file(root, Path(build_dir), name, expected)
        records = read_build_summaries(Path(build_dir))
        vectors = load_index_array(root, Path(build_dir) / SUMMARY_VECTORS, mmap=False)
        if len(records) != len(vectors):
            raise IndexDamagedError(root, f"{len(records)} summaries but {len(vectors)} summary vectors")
        loaded = SummaryIndex(records, vectors, dict(info))
        _loaded[index] = loaded
    return loaded


def summary_search(
    index: HierarchicalIndex,
    query: str,
    top_k: int,
    documents: int = SUMMARY_DOCUMENTS,
    *,
    query_vector: Sequence[float] | None = None,
) -> list[SearchHit]:
    """DSI's two stages: the ``documents`` best summaries, then the ``top_k`` best chunks inside them.

    Documents beyond ``documents`` are added in summary order while the chosen ones hold fewer
    than ``top_k`` chunks, so the passages handed over are ``top_k`` whenever the index has them.

    Chunks are ranked by their best sentence among the query's nearest sentences, fetched deeper
    until enough chunks of the chosen documents turn up; chunks of those documents that never do
    follow in document order (a summary can pick a document none of whose sentences is near).
    """
    summaries = summary_index(index)
    if top_k <= 0 or not summaries.records:
        return []
    vector = index.query_vector(query, query_vector)
    q = np.asarray(vector, dtype=np.float32)
    q /= float(np.linalg.norm(q)) or 1.0
    similarity = summaries.vectors @ q
    allowed: list[str] = []
    for rank, i in enumerate(np.argsort(-similarity, kind="stable")):
        if rank >= max(1, documents) and len(allowed) >= top_k:
            break
        allowed.extend(summaries.records[int(i)]["chunk_ids"])
    allowed_set = set(allowed)
    wanted = min(top_k, len(allowed))
    total = index.manifest.sentences
    n = min(total, max(50 * top_k, 200))
    best: dict[str, float] = {}
    positions: dict[str, list[int]] = {}
    while True:
        best.clear()
        positions.clear()
        for chunk_id, position, score in index.top_sentences(query, n, query_vector=vector):
            if chunk_id in allowed_set:
                best.setdefault(chunk_id, score)
                positions.setdefault(chunk_id, []).append(position)
        if len(best) >= wanted or n >= total:
            break
        n = min(total, n * 4)
    ranked = sorted(best, key=lambda cid: -best[cid])
    ranked += [cid for cid in allowed if cid not in best]
    hits = []
    for chunk_id in ranked[:top_k]:
        chunk = index.get_chunk(chunk_id)
        if chunk is None:
            continue
        matched = tuple(p for p in sorted(set(positions.get(chunk_id, ()))) if p < len(chunk.sentences))
        snippets = tuple(chunk.text[slice(*chunk.sentences[p])] for p in matched)
        hits.append(SearchHit(chunk_id, float(best.get(chunk_id, 0.0)), snippets, chunk.title, matched))
    return hits
