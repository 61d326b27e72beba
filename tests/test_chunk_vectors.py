"""Chunk-vector ranking (issue 35, defect 9): the A-RAG paper's Naive RAG ranks whole-chunk vectors, ours
ranked chunks by their best sentence. The chunk vectors are made once and kept in the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arag_graph.core.documents import SourceDocument
from arag_graph.index.build import build_index
from arag_graph.retrievers import chunk_vectors as cv
from tests.fakes import WordHashEmbeddings

DOCS = [
    # The query's words are spread over the whole chunk: no single sentence holds more than one.
    SourceDocument("Reefs grow slowly. Lighthouses warn ships. Granite lasts long.", id="spread", title="A"),
    # One sentence holds two of them, the others are unrelated: its best sentence wins, its whole text does not.
    SourceDocument(
        "Reefs and lighthouses appear here. Bread rises overnight. Cheese ages in caves. Wine rests in oak. "
        "Apples ripen in autumn.",
        id="one_sentence",
        title="B",
    ),
    SourceDocument("Bread rises overnight. Cheese ages in caves.", id="food", title="C"),
]
QUERY = "reefs lighthouses granite"


class CountingEmbeddings(WordHashEmbeddings):
    """Counts the texts embedded as documents (the chunk vectors are made once)."""

    def __init__(self) -> None:
        super().__init__()
        self.documents = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents += len(texts)
        return super().embed_documents(texts)


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ARAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cv, "_MEMO", {})
    return build_index(DOCS, tmp_path / "index", embeddings=CountingEmbeddings(), contextual_headers=False)


def test_chunks_rank_by_their_whole_text_not_their_best_sentence(index: Any) -> None:
    by_chunk = [h.chunk_id for h in cv.chunk_vector_search(index, QUERY, 3)]
    by_sentence = [h.chunk_id for h in index.semantic_search(QUERY, 3)]
    assert by_sentence[0] == "one_sentence"  # the best single sentence
    assert by_chunk[0] == "spread"  # the whole text nearest the query
    # The ranking is the cosine of the query with each chunk's embedded text.
    embedder = WordHashEmbeddings()
    query = np.asarray(embedder.embed_query(QUERY))
    cosine = {d.id: float(np.asarray(embedder.embed_documents([d.text])[0]) @ query) for d in DOCS}
    assert by_chunk == sorted(cosine, key=lambda cid: -cosine[cid])
    assert cv.chunk_vector_search(index, QUERY, 0) == []
    assert len(cv.chunk_vector_search(index, QUERY, 10)) == 3


def test_chunk_vectors_are_made_once_and_kept_in_the_cache(index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    embeddings = index.embeddings
    start = embeddings.documents
    first = cv.chunk_vectors(index)
    assert embeddings.documents - start == len(DOCS)
    assert cv.chunk_vectors_path(index).is_file()
    monkeypatch.setattr(cv, "_MEMO", {})  # a new process: read back from the cache, not embedded again
    again = cv.chunk_vectors(index)
    assert embeddings.documents - start == len(DOCS)
    assert np.array_equal(first, again)


def test_a_damaged_cache_file_is_made_again(index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = cv.chunk_vectors_path(index)
    cv.chunk_vectors(index)
    path.write_bytes(b"not an array")
    monkeypatch.setattr(cv, "_MEMO", {})
    start = index.embeddings.documents
    vectors = cv.chunk_vectors(index)
    assert vectors.shape == (len(DOCS), index.manifest.embedding_dim)
    assert index.embeddings.documents - start == len(DOCS)
