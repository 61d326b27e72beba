"""ARAGOG's other techniques: multi-query retrieval, MMR and LLM reranking, in every one-shot graph.

Behaviour on a crafted corpus (three near-duplicate chunks about a lamp, one about a parrot, one
unrelated), with the hashed bag-of-words embeddings of tests/fakes.py; the model's parts (rewrites,
ratings) through the OpenAI-compatible stand-in and through the offline policy's rules.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from arag_graph.baselines.context import NaiveRagContext
from arag_graph.corag.context import CoragContext
from arag_graph.core.documents import SourceDocument
from arag_graph.index.build import build_index
from arag_graph.registry import build_graph, config_for
from arag_graph.retrievers.passages import Passage, retrieve_passages
from arag_graph.run.configuration import ContextError
from arag_graph.run.model import offline_ratings, offline_rewrites
from arag_graph.srag.context import SragContext
from tests import test_model_faults as faults
from tests.fakes import WordHashEmbeddings, sentinel_key
from tests.stubs._http import RecordedRequest
from tests.stubs.openai_server import OpenAIStubServer, Reply, text

DOCS = [
    SourceDocument("The lighthouse keeper lit the lamp.", id="lamp", title="Lamp one"),
    SourceDocument("The lighthouse keeper lit the lamp again.", id="again", title="Lamp two"),
    SourceDocument("The lighthouse keeper lit the lamp today.", id="today", title="Lamp three"),
    SourceDocument("The lighthouse keeper fed a parrot.", id="parrot", title="Parrot"),
    SourceDocument("Wheat grows in the valley below the hills.", id="wheat", title="Wheat"),
]
QUERY = "lighthouse keeper lamp"
DUPLICATES = {"lamp", "again", "today"}


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_index(
        DOCS, tmp_path_factory.mktemp("techniques") / "i", embeddings=WordHashEmbeddings(), progress=False
    )


def ids(found: list[Passage]) -> list[str]:
    return [p.chunk_id for p in found]


# ---------------------------------------------------------------------------------------------
# MMR


def test_mmr_picks_a_diverse_passage_over_a_near_duplicate(crafted: Any) -> None:
    plain = retrieve_passages(crafted, QUERY, NaiveRagContext.trusted(top_k=2))
    assert set(ids(plain)) <= DUPLICATES  # relevance alone: two near-duplicates
    diverse = retrieve_passages(
        crafted, QUERY, NaiveRagContext.trusted(top_k=2, mmr=True, mmr_lambda=0.3, candidates=5)
    )
    assert ids(diverse)[0] in DUPLICATES and ids(diverse)[1] == "parrot"
    # lambda 1 is relevance alone again: MMR then changes nothing.
    relevant = NaiveRagContext.trusted(top_k=2, mmr=True, mmr_lambda=1.0, candidates=5)
    assert ids(retrieve_passages(crafted, QUERY, relevant)) == ids(plain)


def test_technique_settings_are_bounded() -> None:
    with pytest.raises(ContextError, match="mmr_lambda"):
        NaiveRagContext(mmr_lambda=1.5)
    with pytest.raises(ContextError, match="multi_query"):
        CoragContext(multi_query=9)
    with pytest.raises(ContextError, match="candidates"):
        SragContext(candidates=0)


# ---------------------------------------------------------------------------------------------
# Multi-query retrieval


def test_multi_query_fuses_the_rankings_of_the_query_and_its_rewrites(crafted: Any) -> None:
    asked: list[tuple[str, int]] = []

    def rewrite(query: str, n: int) -> list[str]:
        asked.append((query, n))
        return ["keeper fed parrot", query]  # a repeat of the query is dropped

    alone = retrieve_passages(crafted, QUERY, NaiveRagContext.trusted(top_k=2))
    assert "parrot" not in ids(alone)
    fused = retrieve_passages(crafted, QUERY, NaiveRagContext.trusted(top_k=2, multi_query=2), rewrite=rewrite)
    assert asked == [(QUERY, 2)]
    # The chunk both queries rank first wins; the rewrite's own best comes next, ahead of the query's second.
    assert ids(fused) == [ids(alone)[0], "parrot"]
    assert fused[0].score > fused[1].score


def test_offline_rewrites_are_a_fixed_rule() -> None:
    question = "Which river flows through Paris and Rouen?"
    first = offline_rewrites(question, 3).queries
    assert first == offline_rewrites(question, 3).queries and 1 <= len(first) <= 3
    assert all(q != question for q in first) and "Paris Rouen" in first
    assert offline_rewrites(question, 0).queries == []


# ---------------------------------------------------------------------------------------------
# LLM reranking


def _rating_responder(ratings: dict[int, float]) -> Any:
    def reply(request: RecordedRequest) -> Reply:
        if faults._structured_schema(request) == "PassageRatings":
            rated = [{"passage": i, "relevance": r} for i, r in ratings.items()]
            return text(json.dumps({"ratings": rated}))
        return text("Answer: the keeper [1]")

    return reply


@pytest.mark.integration
def test_rerank_keeps_the_passages_the_model_rates_best(crafted: Any, openai_server: OpenAIStubServer) -> None:
    candidates = retrieve_passages(crafted, QUERY, NaiveRagContext.trusted(top_k=4))
    openai_server.script(_rating_responder({1: 0.1, 2: 0.2, 3: 0.3, 4: 0.9}))
    model = ChatOpenAI(model="gpt-4o-mini", base_url=openai_server.url, api_key=sentinel_key("rr"), max_retries=0)
    graph = build_graph("naive_rag", index=crafted, model=model)
    out = graph.invoke({"question": QUERY}, context={"top_k": 2, "rerank": True, "candidates": 4})
    assert out["error"] is None
    # The model's order: passage 4 then passage 3 of the four candidates, not the retriever's first two.
    assert out["trajectory"][0]["chunk_ids"] == [candidates[3].chunk_id, candidates[2].chunk_id]
    assert out["trajectory"][0]["args"]["rerank"] is True and out["trajectory"][0]["args"]["candidates"] == 4
    (rating_request,) = [
        c for c in openai_server.completions if faults._structured_schema(c.recorded) == "PassageRatings"
    ]
    prompt = rating_request.messages[-1]["content"]
    assert all(f"Passage {i}:" in prompt for i in range(1, 5)) and "Passage 5:" not in prompt


@pytest.mark.integration
def test_a_failed_rating_keeps_the_retrievers_order_and_says_so(crafted: Any, openai_server: OpenAIStubServer) -> None:
    openai_server.script(lambda r: text("not json") if faults._structured_schema(r) else text("Answer: x [1]"))
    model = ChatOpenAI(model="gpt-4o-mini", base_url=openai_server.url, api_key=sentinel_key("rr"), max_retries=0)
    graph = build_graph("naive_rag", index=crafted, model=model)
    out = graph.invoke({"question": QUERY}, context={"top_k": 2, "rerank": True, "candidates": 4})
    plain = retrieve_passages(crafted, QUERY, NaiveRagContext.trusted(top_k=2))
    assert out["error"] is None and out["trajectory"][0]["chunk_ids"] == ids(plain)
    assert any("rerank ratings failed" in w for w in out["warnings"])


def test_offline_rerank_rates_by_word_overlap() -> None:
    passages = [
        Passage("1", "Wheat", "Wheat grows in the valley.", 0.9),
        Passage("2", "Lamp", "The keeper lit the lamp.", 0.5),
        Passage("3", "Lamp again", "The keeper lit the lamp again.", 0.4),
    ]
    rated = offline_ratings("keeper lamp", passages).ratings
    assert [r.relevance for r in rated] == [0.0, 1.0, 1.0]


# ---------------------------------------------------------------------------------------------
# Every one-shot graph, offline


@pytest.mark.parametrize("graph_name", ["naive_rag", "corag", "srag"])
def test_every_one_shot_graph_runs_the_techniques_offline_deterministically(crafted: Any, graph_name: str) -> None:
    graph = build_graph(graph_name, index=crafted, model="offline")
    context = {"top_k": 2, "multi_query": 2, "mmr": True, "mmr_lambda": 0.3, "rerank": True, "candidates": 5}
    if graph_name == "corag":
        context["max_steps"] = 1
    first = graph.invoke({"question": "Who lit the lighthouse lamp?"}, config_for(graph_name), context=context)
    again = graph.invoke({"question": "Who lit the lighthouse lamp?"}, config_for(graph_name), context=context)
    assert first["error"] is None
    step = first["trajectory"][0]
    assert step["args"]["multi_query"] == 2 and step["args"]["mmr_lambda"] == 0.3 and step["args"]["rerank"] is True
    assert len(step["chunk_ids"]) <= 2
    assert [s["chunk_ids"] for s in first["trajectory"]] == [s["chunk_ids"] for s in again["trajectory"]]


def test_the_aragog_grid_has_a_row_for_each_technique() -> None:
    from arag_graph.evaluators.grid import grid_rows

    rows = {row.label: row.values for row in grid_rows("aragog")}
    assert rows["+ Multi-query"] == {"multi_query": 3}
    assert rows["+ MMR"] == {"mmr": True} and rows["+ LLM rerank"] == {"rerank": True}
    for values in rows.values():
        NaiveRagContext.trusted(**values)  # every row is a valid naive_rag setting


def test_a_retrieval_without_the_models_part_says_what_is_missing(crafted: Any) -> None:
    with pytest.raises(ValueError, match="multi_query needs a rewrite function"):
        retrieve_passages(crafted, QUERY, NaiveRagContext.trusted(multi_query=1))
    with pytest.raises(ValueError, match="rerank needs a rating function"):
        retrieve_passages(crafted, QUERY, NaiveRagContext.trusted(rerank=True))
