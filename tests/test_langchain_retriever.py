"""The index as a LangChain retriever: LangChain's standard retriever tests, the rankings it shares
with the one-shot retrievers, its documents, bad input, and use inside an LCEL chain."""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_tests.integration_tests import RetrieversIntegrationTests

from arag_graph.core.errors import AragError
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.llm.summarize import summary_writer
from arag_graph.retrievers.langchain_retriever import IndexRetriever, make_retriever
from arag_graph.retrievers.passages import auto_merge, auto_merge_documents, retrieve

pytestmark = pytest.mark.integration

QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986"
GOLD_TITLES = {"Leland, North Carolina", "Maximum Overdrive"}


class _Standard(RetrieversIntegrationTests):
    """LangChain's standard retriever tests (``k`` in the constructor and per call, sync and async)
    against the real sample index; one subclass per search type."""

    search_type = "semantic"

    @pytest.fixture(autouse=True)
    def _use_sample_index(self, sample_index: HierarchicalIndex) -> None:
        self.index = sample_index

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return IndexRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"index": self.index, "search_type": self.search_type}

    @property
    def retriever_query_example(self) -> str:
        return QUESTION


class TestSemanticRetrieverStandard(_Standard):
    search_type = "semantic"


class TestKeywordRetrieverStandard(_Standard):
    search_type = "keyword"


class TestHybridRetrieverStandard(_Standard):
    search_type = "hybrid"


class TestAmrRetrieverStandard(_Standard):
    """Auto-merging hands over ``k`` documents too, although ``k`` sentences may merge into fewer."""

    search_type = "amr"


def test_search_kwargs_k_is_honoured(sample_index: HierarchicalIndex) -> None:
    """LangChain's vector-store spelling, ``search_kwargs={"k": 2}``, was dropped in silence (5 came back)."""
    retriever = make_retriever(sample_index, search_kwargs={"k": 2})
    assert retriever.k == 2 and len(retriever.invoke(QUESTION)) == 2
    direct = IndexRetriever(index=sample_index, search_type="keyword", search_kwargs={"k": 3})
    assert len(direct.invoke(QUESTION)) == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"search_kwargs": {"score_threshold": 0.5}}, "search_kwargs 'score_threshold' is not supported"),
        ({"search_kwargs": {"filter": {"a": 1}}, "metadata_filter": {"a": 2}}, "filter disagree; give the filter once"),
        ({"search_kwargs": {"k": 2}, "k": 3}, "k=3 and search_kwargs k=2 disagree; give k once"),
        ({"search_kwargs": ["k", 2]}, "search_kwargs must be a mapping such as {'k': 3}, not list"),
        ({"score_threshold": 0.5}, "the retriever has no setting 'score_threshold'"),
    ],
)
def test_settings_the_retriever_lacks_are_refused_in_one_line(
    sample_index: HierarchicalIndex, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(AragError, match=re.escape(message)) as caught:
        make_retriever(sample_index, **kwargs)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("search_type", "retriever"), [("semantic", "dense"), ("keyword", "bm25"), ("hybrid", "hybrid")]
)
def test_documents_are_the_ranked_chunks_with_id_title_and_score(
    sample_index: HierarchicalIndex, search_type: str, retriever: Any
) -> None:
    docs = make_retriever(sample_index, search_type=search_type, k=4).invoke(QUESTION)
    hits = retrieve(sample_index, QUESTION, 4, retriever)
    assert [d.id for d in docs] == [h.chunk_id for h in hits]  # the ranking naive_rag uses for this setting
    assert len(docs) == 4
    for doc, hit in zip(docs, hits, strict=True):
        chunk = sample_index.get_chunk(hit.chunk_id)
        assert chunk is not None
        assert doc.page_content == chunk.text  # whole chunks, not snippets
        assert doc.metadata == {
            "chunk_id": chunk.id,
            "title": chunk.title,
            "score": pytest.approx(hit.score),
            "search_type": search_type,
        }
    assert GOLD_TITLES & {d.metadata["title"] for d in docs}


def test_semantic_is_the_default_and_k_defaults_to_five(sample_index: HierarchicalIndex) -> None:
    import arag_graph

    retriever = make_retriever(sample_index)
    assert isinstance(retriever, arag_graph.IndexRetriever) and isinstance(retriever, BaseRetriever)
    assert make_retriever(sample_index, tags=["mine"]).tags == ["mine"]  # other settings reach the retriever
    docs = retriever.invoke(QUESTION)
    assert [d.id for d in docs] == [h.chunk_id for h in sample_index.semantic_search(QUESTION, 5)]


def test_search_types_rank_differently(sample_index: HierarchicalIndex) -> None:
    """The option reaches the ranking: BM25 and dense search do not agree on ten chunks of 100."""
    ranked = {
        t: [d.id for d in make_retriever(sample_index, search_type=t, k=10).invoke(QUESTION)]
        for t in ("semantic", "keyword")
    }
    assert ranked["semantic"] != ranked["keyword"]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"search_type": "mmr"}, "search_type='mmr' is unknown; use one of semantic, keyword, hybrid, amr, dsi"),
        ({"k": 0}, "k=0 is not a number of documents"),
        ({"k": -2}, "k=-2 is not a number of documents"),
        ({"k": 2.5}, "k=2.5 is not a number of documents"),
        ({"k": "many"}, "k='many' is not a number of documents"),
        ({"k": True}, "k=True is not a number of documents"),
    ],
)
def test_bad_settings_fail_in_one_line_naming_the_fix(
    sample_index: HierarchicalIndex, kwargs: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(AragError) as err:
        make_retriever(sample_index, **kwargs)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_k_given_as_text_or_whole_float_is_accepted(sample_index: HierarchicalIndex) -> None:
    assert len(make_retriever(sample_index, k="2").invoke(QUESTION)) == 2
    assert len(make_retriever(sample_index).invoke(QUESTION, k=3.0)) == 3


def test_bad_call_input_fails_in_one_line(sample_index: HierarchicalIndex) -> None:
    retriever = make_retriever(sample_index)
    with pytest.raises(AragError, match=r"k=0 is not a number of documents"):
        retriever.invoke(QUESTION, k=0)
    with pytest.raises(AragError, match=r"got a dict, not a query string.*itemgetter\('question'\)"):
        retriever.invoke({"question": QUESTION})  # type: ignore[arg-type]


@pytest.mark.parametrize("query", ["", "   \n"])
def test_empty_query_returns_no_documents(sample_index: HierarchicalIndex, query: str) -> None:
    for search_type in ("semantic", "keyword", "hybrid"):
        assert make_retriever(sample_index, search_type=search_type).invoke(query) == []


def test_more_than_the_index_holds_returns_every_chunk_once(sample_index: HierarchicalIndex) -> None:
    docs = make_retriever(sample_index, k=500).invoke(QUESTION)
    assert len({d.id for d in docs}) == len(docs) == len(sample_index)


def test_works_in_a_plain_lcel_chain(sample_index: HierarchicalIndex) -> None:
    """The usual RAG chain: question -> retriever -> formatted context -> prompt -> model.

    The "model" renders the prompt it is given, so the test sees exactly what a model would read.
    """

    def format_docs(docs: list[Document]) -> str:
        return "\n\n".join(f"[{d.metadata['chunk_id']}] {d.metadata['title']}: {d.page_content}" for d in docs)

    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the context.\n\n{context}"), ("human", "{question}")]
    )
    retriever = make_retriever(sample_index, search_type="hybrid", k=3)
    chain = (
        {"context": itemgetter("question") | retriever | format_docs, "question": itemgetter("question")}
        | prompt
        | RunnableLambda(lambda value: value.to_string())
    )
    rendered = chain.invoke({"question": QUESTION})
    expected = retriever.invoke(QUESTION)
    assert [d.id for d in expected]
    for doc in expected:
        assert f"[{doc.id}] {doc.metadata['title']}: {doc.page_content}" in rendered
    assert rendered.rstrip().endswith(QUESTION)
    # batch runs the retriever once per input, concurrently, with the same result
    batch = chain.batch([{"question": QUESTION}, {"question": "Who is Sid Haig?"}])
    assert batch[0] == rendered and "Sid Haig" in batch[1]


async def test_async_chain_gives_the_sync_result(sample_index: HierarchicalIndex) -> None:
    retriever = make_retriever(sample_index, search_type="keyword", k=3)
    chain = itemgetter("question") | retriever
    docs = await chain.ainvoke({"question": QUESTION})
    assert [d.id for d in docs] == [d.id for d in retriever.invoke(QUESTION)]


def test_amr_and_dsi_are_search_types_too(sample_index: HierarchicalIndex, tmp_path: Any) -> None:
    """The retriever hands over what naive_rag's amr and dsi hand its model (one helper, no copy)."""
    from arag_graph.index.build import build_index
    from arag_graph.registry import config_for
    from arag_graph.retrievers.passages import retrieve_passages

    query = "Who directed the film shot in Leland, North Carolina?"
    amr = make_retriever(sample_index, search_type="amr", k=5).invoke(query)
    # naive_rag's amr searches k sentences (ARAGOG's leaves); the retriever widens that same search
    # until it has k documents, so naive_rag's passages are what it hands over with k sentences.
    expected = retrieve_passages(sample_index, query, config_for("naive_rag", retriever="amr"))  # type: ignore[arg-type]
    assert [(p.chunk_id, p.text) for p in expected] == [
        (p.chunk_id, p.text) for p in auto_merge(sample_index, query, 5)
    ]
    widened = auto_merge_documents(sample_index, query, 5)
    assert [(d.id, d.page_content) for d in amr] == [(p.chunk_id, p.text) for p in widened]
    assert len(amr) == 5 and {d.metadata["search_type"] for d in amr} == {"amr"}
    with pytest.raises(AragError, match="--summaries"):
        make_retriever(sample_index, search_type="dsi").invoke(query)
    chunks = sample_index.store.chunks[:20]
    summarized = build_index(chunks, tmp_path / "dsi", summaries=summary_writer("offline"), progress=False)
    dsi = make_retriever(summarized, search_type="dsi", k=3).invoke(query)
    expected = retrieve_passages(summarized, query, config_for("naive_rag", retriever="dsi", top_k=3))  # type: ignore[arg-type]
    assert [d.id for d in dsi] == [p.chunk_id for p in expected] and len(dsi) == 3


def test_the_retriever_inside_an_ensemble_retriever(sample_index: HierarchicalIndex) -> None:
    """The README names LangChain's ``EnsembleRetriever``: two of our retrievers fused by it return
    whole chunks with our metadata, in the order of the fused ranks."""
    from langchain_classic.retrievers import EnsembleRetriever

    semantic = make_retriever(sample_index, k=4)
    keyword = make_retriever(sample_index, k=4, search_type="keyword")
    ensemble = EnsembleRetriever(retrievers=[semantic, keyword], weights=[0.5, 0.5])
    query = "Which films were shot in or around Leland, North Carolina?"
    fused = ensemble.invoke(query)
    each = [semantic.invoke(query), keyword.invoke(query)]
    rrf: dict[str, float] = {}  # weighted reciprocal rank fusion, as EnsembleRetriever documents it
    for docs in each:
        for rank, doc in enumerate(docs, 1):
            cid = doc.metadata["chunk_id"]
            rrf[cid] = rrf.get(cid, 0.0) + 0.5 / (rank + ensemble.c)
    assert [d.metadata["chunk_id"] for d in fused] == sorted(rrf, key=lambda cid: -rrf[cid])
    for doc in fused:
        chunk = sample_index.get_chunk(doc.metadata["chunk_id"])
        assert chunk is not None and doc.page_content == chunk.text
