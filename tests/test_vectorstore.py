"""AragVectorStore beyond LangChain's standard suite (tests/test_vectorstore_standard.py): search by
vector, maximal marginal relevance (also as ``as_retriever(search_type="mmr")``), Chroma's filter
operators, native async, a default location for ``from_texts``, and one hit per document.

Each was missing: by-vector and MMR searches raised NotImplementedError, filters took plain
equality only, async searches ran the sync ones (query embedding included) in a worker thread,
``from_texts`` needed ``path=``, and a document cut into several chunks answered several times.
"""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from arag_graph.core.errors import AragError
from arag_graph.index.build import BuildOptions
from arag_graph.index.vectorstore import AragVectorStore
from tests.fakes import WordHashEmbeddings

DOCS = [
    Document("Red apples grow in the orchard.", id="a1", metadata={"year": 2001, "kind": "fruit"}),
    Document("Red apples grow in the orchard here.", id="a2", metadata={"year": 2002, "kind": "fruit"}),
    Document("Red apples are sold at the orchard market.", id="b", metadata={"year": 2003, "kind": "market"}),
    Document("Blue whales swim in the cold ocean.", id="c", metadata={"year": 2004, "kind": "animal"}),
    Document("Grey wolves hunt in the northern forest.", id="d", metadata={"year": 2005, "kind": "animal"}),
]
QUERY = "red apples orchard"


class AsyncOnlyEmbeddings(WordHashEmbeddings):
    """Embeds documents (the build) but refuses a synchronous query once ``queries_async_only`` is set."""

    queries_async_only = False

    def embed_query(self, text: str) -> list[float]:
        assert not self.queries_async_only, "a query was embedded synchronously"
        return super().embed_query(text)

    async def aembed_query(self, text: str) -> list[float]:
        return self._vector(text)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> AragVectorStore:
    root = tmp_path_factory.mktemp("vectorstore") / "index"
    store = AragVectorStore(path=root, embedding=WordHashEmbeddings(dim=512))
    store.add_documents(DOCS)
    return store


def ids(docs: list[Document]) -> list[str | None]:
    return [d.id for d in docs]


def test_search_by_vector_is_the_search_by_query(store: AragVectorStore) -> None:
    vector = store.embeddings.embed_query(QUERY)
    assert ids(store.similarity_search_by_vector(vector, k=3)) == ids(store.similarity_search(QUERY, k=3))
    by_vector = store.similarity_search_with_score_by_vector(vector, k=3)
    assert by_vector == store.similarity_search_with_score(QUERY, k=3)
    assert by_vector[0][1] >= by_vector[1][1] >= by_vector[2][1]


def test_mmr_trades_a_near_duplicate_for_a_different_document(store: AragVectorStore) -> None:
    assert ids(store.similarity_search(QUERY, k=2)) == ["a1", "a2"]  # a2 repeats a1
    assert ids(store.max_marginal_relevance_search(QUERY, k=2, fetch_k=5, lambda_mult=0.5)) == ["a1", "b"]
    # lambda_mult 1 is relevance alone; fetch_k bounds the candidates (here the two nearest only).
    assert ids(store.max_marginal_relevance_search(QUERY, k=2, fetch_k=5, lambda_mult=1.0)) == ["a1", "a2"]
    assert ids(store.max_marginal_relevance_search(QUERY, k=2, fetch_k=2, lambda_mult=0.5)) == ["a1", "a2"]
    vector = store.embeddings.embed_query(QUERY)
    assert ids(store.max_marginal_relevance_search_by_vector(vector, k=2, lambda_mult=0.5)) == ["a1", "b"]
    retriever = store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 5, "lambda_mult": 0.5})
    assert ids(retriever.invoke(QUERY)) == ["a1", "b"]
    with pytest.raises(AragError, match="lambda_mult must be between 0 and 1"):
        store.max_marginal_relevance_search(QUERY, k=2, lambda_mult=1.5)


def test_mmr_on_a_chroma_index_uses_its_stored_vectors(tmp_path: Path) -> None:
    chroma = AragVectorStore(
        path=tmp_path / "index", embedding=WordHashEmbeddings(dim=512), options=BuildOptions(backend="chroma")
    )
    chroma.add_documents(DOCS)
    assert chroma.index is not None and chroma.index.manifest.chroma.get("mode") != "matrix"
    assert ids(chroma.max_marginal_relevance_search(QUERY, k=2, fetch_k=5, lambda_mult=0.5)) == ["a1", "b"]


FILTERS: list[tuple[dict[str, Any], set[str]]] = [
    ({"kind": "fruit"}, {"a1", "a2"}),
    ({"kind": ["market", "animal"]}, {"b", "c", "d"}),
    ({"kind": {"$eq": "market"}}, {"b"}),
    ({"kind": {"$ne": "fruit"}}, {"b", "c", "d"}),
    ({"kind": {"$in": ["fruit", "market"]}}, {"a1", "a2", "b"}),
    ({"kind": {"$nin": ["fruit", "market"]}}, {"c", "d"}),
    ({"year": {"$gt": 2003}}, {"c", "d"}),
    ({"year": {"$gte": 2003}}, {"b", "c", "d"}),
    ({"year": {"$lt": 2002}}, {"a1"}),
    ({"year": {"$lte": 2002}}, {"a1", "a2"}),
    ({"year": {"$gt": 2001, "$lt": 2004}}, {"a2", "b"}),
    ({"$and": [{"kind": "animal"}, {"year": {"$gte": 2005}}]}, {"d"}),
    ({"$or": [{"kind": "market"}, {"year": {"$lt": 2002}}]}, {"a1", "b"}),
    ({"$or": [{"$and": [{"kind": "fruit"}, {"year": 2002}]}, {"kind": {"$eq": "animal"}}]}, {"a2", "c", "d"}),
    ({"missing": {"$ne": "x"}}, set()),  # as in Chroma: no key, no match
    ({"kind": {"$gt": 1}}, set()),  # a string compared with a number: no match
]


@pytest.mark.parametrize(("where", "expected"), FILTERS, ids=[str(f) for f, _ in FILTERS])
def test_chroma_filter_operators(store: AragVectorStore, where: dict[str, Any], expected: set[str]) -> None:
    assert set(ids(store.similarity_search(QUERY, k=10, filter=where))) == expected
    assert set(ids(store.max_marginal_relevance_search(QUERY, k=10, filter=where))) == expected
    assert store.index is not None  # the index's own searches take the same dialect
    assert {h.chunk_id for h in store.index.keyword_search("the", 10, metadata_filter=where)} == expected


MALFORMED: list[tuple[Any, str]] = [
    ({"year": {"$gt": "2003"}}, "$gt compares numbers"),
    ({"kind": {"$in": "fruit"}}, "$in takes a list of values"),
    ({"kind": {"$like": "f%"}}, "uses '$like'; the operators are"),
    ({"$not": {"kind": "fruit"}}, "$not is not a filter operator"),
    ({"$and": {"kind": "fruit"}}, "$and takes a non-empty list of filters"),
    ({"$or": [{"kind": "fruit"}, "market"]}, "$or[1] must map metadata keys to values"),
    (["kind", "fruit"], "must map metadata keys to values"),
    ({"kind": {}}, "empty operator expression"),
]


@pytest.mark.parametrize(("where", "problem"), MALFORMED, ids=[str(f) for f, _ in MALFORMED])
def test_a_malformed_filter_is_refused_in_one_line(store: AragVectorStore, where: Any, problem: str) -> None:
    for search in (store.similarity_search, store.max_marginal_relevance_search):
        with pytest.raises(AragError) as caught:
            search(QUERY, k=2, filter=where)
        message = str(caught.value)
        assert problem in message and "\n" not in message and "e.g. {'source': 'a.pdf'}" in message


def test_async_searches_await_the_query_embedding(tmp_path: Path) -> None:
    embeddings = AsyncOnlyEmbeddings(dim=512)
    store = AragVectorStore(path=tmp_path / "index", embedding=embeddings)
    store.add_documents(DOCS)
    expected = store.similarity_search_with_score(QUERY, k=3)
    expected_mmr = ids(store.max_marginal_relevance_search(QUERY, k=2, lambda_mult=0.5))
    embeddings.queries_async_only = True

    async def searches() -> tuple[Any, ...]:
        return (
            await store.asimilarity_search_with_score(QUERY, k=3),
            await store.asimilarity_search(QUERY, k=3),
            await store.amax_marginal_relevance_search(QUERY, k=2, lambda_mult=0.5),
            await store.asimilarity_search_by_vector(await embeddings.aembed_query(QUERY), k=3),
        )

    with_score, plain, mmr, by_vector = asyncio.run(searches())
    assert with_score == expected
    assert ids(plain) == ids(by_vector) == [d.id for d, _ in expected]
    assert ids(mmr) == expected_mmr


def test_from_texts_and_from_documents_need_no_path() -> None:
    store = AragVectorStore.from_texts(["Red apples grow.", "Blue whales swim."], WordHashEmbeddings(), ids=["x", "y"])
    assert store.index is not None and store.index.path is not None
    folder = store.index.path.parent
    assert folder.is_dir() and ids(store.similarity_search("whales", k=1)) == ["y"]
    del store
    gc.collect()
    assert not folder.exists()  # a temporary store, as Chroma's in-memory default
    documents = AragVectorStore.from_documents(DOCS[:2], WordHashEmbeddings())
    assert sorted(documents.index.document_ids()) == ["a1", "a2"]  # type: ignore[union-attr]


def test_a_document_of_several_chunks_answers_once(tmp_path: Path) -> None:
    long_text = " ".join(f"Orchard note {n}: red apples ripen on tree {n} of the orchard." for n in range(40))
    docs = [Document(long_text, id="long"), *DOCS]
    store = AragVectorStore(
        path=tmp_path / "index", embedding=WordHashEmbeddings(dim=512), options=BuildOptions(chunk_size=60)
    )
    store.add_documents(docs)
    assert store.index is not None and len(store.index) > len(docs)  # "long" was cut into several chunks
    found = ids(store.similarity_search(QUERY, k=4))
    assert len(found) == 4 and len(set(found)) == 4 and "long" in found
    assert len(set(ids(store.max_marginal_relevance_search(QUERY, k=4, lambda_mult=1.0)))) == 4
