"""Direct answer and Naive RAG: control flow with scripted models, retrievers, offline runs."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from arag_graph.baselines.graph import build_direct_graph, build_naive_rag_graph
from arag_graph.core.tokens import count_tokens
from arag_graph.retrievers.passages import bm25_search, passages, reciprocal_rank_fusion, retrieve
from tests.scripted import FailingChatModel, ScriptedChatModel, scripted

pytestmark = pytest.mark.integration

QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"


def test_direct_answers_without_retrieval(sample_index: Any) -> None:
    model = scripted("I believe it was Stephen King.\nAnswer: Stephen King")
    out = build_direct_graph(sample_index, model).invoke({"question": QUESTION})
    assert out["answer"] == "Stephen King"
    assert out["steps"] == 0 and out["retrieved_tokens"] == 0 and out["citations"] == []
    prompt = model.log[0]["messages"][-1].content
    assert QUESTION in prompt and "[chunk" not in prompt


@pytest.mark.parametrize("retriever", ["dense", "bm25", "hybrid"])
def test_naive_rag_retrieves_once_then_answers(sample_index: Any, retriever: str) -> None:
    expected = retrieve(sample_index, QUESTION, 5, retriever)  # type: ignore[arg-type]
    cited = expected[0].chunk_id
    model = scripted(f"Answer: Stephen King [{cited}]")
    out = build_naive_rag_graph(sample_index, model).invoke({"question": QUESTION}, context={"retriever": retriever})
    assert out["steps"] == 1 and len(model.log) == 1
    assert out["trajectory"][0]["chunk_ids"] == [h.chunk_id for h in expected]
    assert out["citations"] == [cited] and out["answer"] == "Stephen King"
    prompt = model.log[0]["messages"][-1].content
    for hit in expected:
        assert f"[chunk {hit.chunk_id}]" in prompt
    texts = [sample_index.get_chunk(h.chunk_id).text for h in expected]
    assert out["retrieved_tokens"] == sum(count_tokens(t) for t in texts)
    assert out["read_chunks"] == [h.chunk_id for h in expected]


def test_bm25_and_hybrid_rankings(sample_index: Any) -> None:
    bm25 = bm25_search(sample_index, "Leland North Carolina movies", 5)
    assert bm25 and all(a.score >= b.score for a, b in itertools.pairwise(bm25))
    assert sample_index.get_chunk(bm25[0].chunk_id).title == "Leland, North Carolina"
    dense = sample_index.semantic_search("Leland North Carolina movies", 5)
    fused = reciprocal_rank_fusion([dense, bm25], 5)
    # A chunk ranked first by both lists must come first after fusion.
    if dense[0].chunk_id == bm25[0].chunk_id:
        assert fused[0].chunk_id == dense[0].chunk_id
    assert {h.chunk_id for h in fused} <= {h.chunk_id for h in dense} | {h.chunk_id for h in bm25}


def test_sentence_window_returns_matched_sentences_with_neighbours(sample_index: Any) -> None:
    hits = sample_index.semantic_search(QUESTION, 3)
    whole = passages(sample_index, hits)
    windowed = passages(sample_index, hits, window=1)  # each matched sentence alone
    for hit, full, part in zip(hits, whole, windowed, strict=True):
        chunk = sample_index.get_chunk(hit.chunk_id)
        assert full.text == chunk.text
        assert part.text == " ... ".join(part.text.split(" ... "))  # well-formed
        for snippet in hit.snippets:
            assert snippet in part.text
        assert len(part.text) <= len(full.text)
    model = scripted("Answer: x")
    out = build_naive_rag_graph(sample_index, model).invoke(
        {"question": QUESTION}, context={"sentence_window": True, "window": 1}
    )
    top5 = passages(sample_index, sample_index.semantic_search(QUESTION, 5))
    assert out["retrieved_tokens"] < sum(count_tokens(p.text) for p in top5)


def test_naive_rag_hyde_uses_the_models_passage(sample_index: Any) -> None:
    passage = "Maximum Overdrive is a 1986 film written and directed by Stephen King."

    def reply(messages: Any, kwargs: dict[str, Any]) -> AIMessage:
        return AIMessage(passage if "encyclopedia-style" in messages[-1].content else "Answer: King")

    model = ScriptedChatModel(messages=iter([]), reply=reply)
    out = build_naive_rag_graph(sample_index, model).invoke({"question": QUESTION}, context={"hyde": True})
    assert out["trajectory"][0]["chunk_ids"] == [h.chunk_id for h in sample_index.semantic_search(passage, 5)]
    assert len(model.log) == 2


def test_failures_and_empty_question(sample_index: Any) -> None:
    out = build_naive_rag_graph(sample_index, FailingChatModel(messages=iter([]))).invoke({"question": QUESTION})
    assert out["error"].startswith("model call failed") and out["steps"] == 1
    empty = build_direct_graph(sample_index, scripted("Answer: x")).invoke({"question": ""})
    assert "empty question" in empty["error"]


def test_offline_policy_runs_both_baselines(hotpot_index: Any, hotpot_slice: Any) -> None:
    import json

    question = json.loads(hotpot_slice[1].read_text())[3]["question"]
    rag = build_naive_rag_graph(hotpot_index, "offline").invoke({"question": question})
    assert rag["answer"] and rag["citations"] and all(hotpot_index.get_chunk(c) for c in rag["citations"])
    direct = asyncio.run(build_direct_graph(hotpot_index, "offline").ainvoke({"question": question}))
    assert direct["answer"] and direct["citations"] == [] and direct["error"] is None
