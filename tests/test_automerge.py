"""Auto-merging retrieval (ARAGOG's AMR) on a tiny hand-made index whose merges are known."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from arag_graph.core.documents import Chunk
from arag_graph.index.document_groups import document_groups
from arag_graph.retrievers.automerge import merge_leaves
from arag_graph.retrievers.passages import auto_merge


def _chunk(chunk_id: str, n: int, title: str) -> Chunk:
    sentences = [f"{chunk_id} sentence {i}." for i in range(n)]
    text = " ".join(sentences)
    spans, start = [], 0
    for s in sentences:
        spans.append((start, start + len(s)))
        start += len(s) + 1
    return Chunk(id=chunk_id, text=text, title=title, sentences=tuple(spans))


class TinyIndex:
    """What AMR needs of an index: chunks in order, and sentence hits the test chooses."""

    def __init__(self, chunks: Sequence[Chunk], leaves: Sequence[tuple[str, int, float]] = ()) -> None:
        self.store = type("Store", (), {"chunks": list(chunks)})()
        self._by_id = {c.id: c for c in chunks}
        self.leaves = list(leaves)

    def get_chunk(self, chunk_id: str) -> Chunk | None:
        return self._by_id.get(chunk_id)

    def top_sentences(self, query: str, n: int, *, query_vector: Any = None) -> list[tuple[str, int, float]]:
        return self.leaves[:n]


CHUNKS = [
    _chunk("a#0", 4, "A"),
    _chunk("a#1", 2, "A"),
    _chunk("a#2", 2, "A"),
    _chunk("b", 3, "B"),
    _chunk("c", 4, "C"),
    _chunk("x#1", 2, "X"),  # a piece 1 with no piece 0 before it: a document of its own
]
LEAVES = [
    ("a#0", 0, 0.9),
    ("c", 0, 0.85),
    ("a#0", 1, 0.8),
    ("a#1", 0, 0.7),
    ("b", 2, 0.65),
    ("a#0", 2, 0.6),
    ("a#1", 1, 0.5),
    ("c", 3, 0.4),
]


def test_documents_are_read_back_from_the_chunkers_ids() -> None:
    groups = document_groups(CHUNKS)
    assert groups.keys == ("a", "b", "c", "x#1")
    assert groups.chunks == (("a#0", "a#1", "a#2"), ("b",), ("c",), ("x#1",))
    assert groups.siblings("a#1") == ("a#0", "a#1", "a#2")
    # The same base with another title is another document.
    assert len(document_groups([_chunk("d#0", 1, "D"), _chunk("d#1", 1, "E")])) == 2


def test_sentences_merge_into_chunks_and_chunks_into_documents() -> None:
    nodes = merge_leaves(TinyIndex(CHUNKS), LEAVES, 0.5)
    as_tuples = [(n.level, n.chunk_ids, n.positions, n.score) for n in nodes]
    assert as_tuples == [
        # a#0: 3 of 4 sentences, a#1: 2 of 2 -> both merge; then 2 of 3 chunks of document a > 0.5.
        ("document", ("a#0", "a#1", "a#2"), (), 0.9),
        # c: 2 of 4 is not *more* than 0.5; b: 1 of 3.
        ("sentences", ("c",), (0, 3), 0.85),
        ("sentences", ("b",), (2,), 0.65),
    ]


def test_threshold_decides_what_merges() -> None:
    low = merge_leaves(TinyIndex(CHUNKS), LEAVES, 0.3)
    assert [(n.level, n.chunk_ids) for n in low] == [
        ("document", ("a#0", "a#1", "a#2")),
        ("chunk", ("c",)),  # 2 of 4 > 0.3
        ("chunk", ("b",)),  # 1 of 3 > 0.3
    ]
    high = merge_leaves(TinyIndex(CHUNKS), LEAVES, 0.7)
    # a#0: 3/4 = 0.75 > 0.7 and a#1: 2/2 merge, but 2 of 3 chunks is not more than 0.7: no document.
    assert [(n.level, n.chunk_ids) for n in high] == [
        ("chunk", ("a#0",)),
        ("sentences", ("c",)),
        ("chunk", ("a#1",)),
        ("sentences", ("b",)),
    ]


def test_leaves_out_of_step_with_the_chunks_are_skipped() -> None:
    nodes = merge_leaves(TinyIndex(CHUNKS), [("gone", 0, 0.9), ("b", 7, 0.8), ("b", 0, 0.7)], 0.5)
    assert [(n.level, n.chunk_ids, n.positions) for n in nodes] == [("sentences", ("b",), (0,))]


@pytest.mark.parametrize(("window", "expected"), [(1, "c sentence 0. ... c sentence 3."), (3, None)])
def test_auto_merge_hands_over_chunk_texts(window: int, expected: str | None) -> None:
    index = TinyIndex(CHUNKS, LEAVES)
    found = auto_merge(index, "q", top_k=8, threshold=0.5, window=window)  # type: ignore[arg-type]
    assert [p.chunk_id for p in found] == ["a#0", "a#1", "a#2", "c", "b"]
    assert [p.text for p in found[:3]] == [c.text for c in CHUNKS[:3]]  # the whole document, chunk by chunk
    c_text = found[3].text
    if expected is not None:
        assert c_text == expected
    else:  # window 3: sentences 0-1 and 2-3, which meet: the whole chunk in one run
        assert c_text == CHUNKS[4].text
    # Fewer leaves, fewer merges: the top 2 sentences merge nothing.
    assert [p.chunk_id for p in auto_merge(index, "q", top_k=2)] == ["a#0", "c"]  # type: ignore[arg-type]
