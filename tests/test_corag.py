"""CoRAG: control flow with scripted models, loop detection, the context, offline runs, rejection sampling."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import Field

from arag_graph.corag.graph import (
    build_corag_graph,
    context_passages,
    query_similarity,
    rank_passages,
    repeated_query,
)
from arag_graph.corag.model import ChatCorag, OfflineCorag
from arag_graph.corag.rejection_sampling import progress_path, rejection_sample
from arag_graph.core.errors import AragError
from arag_graph.core.tokens import count_tokens
from arag_graph.qa.datasets import Question
from arag_graph.retrievers.passages import Passage, retrieve
from tests.scripted import (
    FailingChatModel,
    ScriptedChatModel,
    invalid_structured_reply,
    requested_schema,
    structured_reply,
)

QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
# Queries about unrelated passages found in both the bundled sample and the HotpotQA slice, so
# each retrieves chunks not seen before.
TOPICS = [
    "Christopher Nolan film director",
    "Grace Krilanovich novelist",
    "Jagdish Mali fashion photographer",
    "Shabana Azmi actress",
    "Two Dollar Radio publishing house",
    "Sathish Kalathil Malayalam film",
]
STOP_REASONS = {"sufficient", "step_cap", "no_new_passages", "loop", "recursion_limit"}


class CountingModel(ScriptedChatModel):
    counts: Any = None
    """Requests served, by kind (shared with the reply function, hence not a validated dict)."""
    temperature: float = 0.0
    """Set on copies by CoRAG's sampled chains (a field, as chat models have); seen by ``reply``."""

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs, temperature=self.temperature)


@pytest.fixture(scope="module")
def index(hotpot_index: Any) -> Any:
    """The HotpotQA slice's index, which the offline tests need anyway (one index build, not two).

    Its data is committed (data/), so it cannot be missing; a skip here would be a real fault and is
    not caught (under ``CI=true`` it fails the test, tests/conftest.py).
    """
    return hotpot_index


_SEARCH = re.compile(r'A search for "(.*)" returned')


def searched(prompt: str) -> str:
    """The query a sub-answer request is about."""
    found = _SEARCH.search(prompt)
    assert found, prompt[:200]
    return found.group(1)


def chain_model(
    *,
    sufficient: Sequence[bool] = (),
    queries: Sequence[str] | Callable[[int, float, str], str] = TOPICS,
    answers: Sequence[str] = ("Answer: Stephen King",),
    hyde: Callable[[str], str] | None = None,
    sub_answers: Callable[[str], tuple[str, float]] = lambda query: (f"what the documents say about {query}", 0.5),
) -> CountingModel:
    """A model playing CoRAG's roles, by request: sub-answer, check, reformulate, answer (and HyDE).

    Verdicts and queries are taken in order (not sufficient and the last query once they run out);
    a callable ``queries(i, temperature, prompt)`` gives the i-th query, asked at that temperature
    with that prompt. ``sub_answers(query)`` is the sub-answer and its confidence. ``model.counts``
    says how many requests of each kind it served (chains may ask concurrently, hence the lock).
    """
    counts = {"SubAnswer": 0, "Sufficiency": 0, "Reformulation": 0, "answer": 0, "hyde": 0}
    lock = threading.Lock()

    def take(kind: str) -> int:
        with lock:
            counts[kind] += 1
            return counts[kind] - 1

    def reply(messages: Sequence[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        schema = requested_schema(kwargs)
        if schema == "SubAnswer":
            take("SubAnswer")
            text, confidence = sub_answers(searched(messages[-1].text))
            return structured_reply(schema, answer=text, confidence=confidence)
        if schema == "Sufficiency":
            i = take("Sufficiency")
            ok = sufficient[i] if i < len(sufficient) else False
            return structured_reply(
                schema,
                reasoning=f"reasoning {i + 1}",
                is_sufficient=ok,
                missing_info="" if ok else f"missing {i + 1}",
                confidence=0.9 if ok else 0.2,
            )
        if schema == "Reformulation":
            i = take("Reformulation")
            if callable(queries):
                return structured_reply(schema, query=queries(i, kwargs["temperature"], messages[-1].text))
            return structured_reply(schema, query=queries[min(i, len(queries) - 1)])
        text = messages[-1].text
        if "encyclopedia-style" in text:
            take("hyde")
            assert hyde is not None
            return AIMessage(hyde(text))
        i = take("answer")
        return AIMessage(answers[min(i, len(answers) - 1)])

    return CountingModel(messages=iter([]), reply=reply, counts=counts)


def answer_prompt(model: ScriptedChatModel) -> str:
    return next(
        e["messages"][-1].text
        for e in reversed(model.log)
        if "Answer the question using only" in e["messages"][-1].text
    )


# ---------------------------------------------------------------------------------------------
# Pure functions: loop detection, ranking, the context cap, prompt fields


def test_query_similarity_and_repeats() -> None:
    assert query_similarity("Who directed Jaws?", "who DIRECTED jaws") == 1.0
    assert query_similarity("a b c d", "a b c e") == pytest.approx(3 / 5)
    assert query_similarity("", "") == 1.0 and query_similarity("a", "") == 0.0
    earlier = ["Who directed the film shot in Leland in 1986?", "Maximum Overdrive director"]
    assert repeated_query("director, Maximum Overdrive", earlier, 0.9) == (2, 1.0)
    assert repeated_query("Stephen King novels", earlier, 0.9) is None
    # Same words always repeat, whatever the threshold; others need the threshold.
    assert repeated_query("maximum overdrive director", earlier, 2.0) == (2, 1.0)
    long = "Who directed the film that was shot in or around Leland North Carolina in 1986"
    near = long + " exactly"
    assert 0.9 <= query_similarity(long, near) < 1.0
    assert repeated_query(near, [long], 0.9) is not None
    assert repeated_query(near, [long], 0.99) is None


def _found(cid: str, text: str, step: int = 1) -> dict[str, Any]:
    return {"chunk_id": cid, "title": f"T{cid}", "text": text, "score": 0.5, "tokens": count_tokens(text), "step": step}


def test_rank_passages_fuses_the_steps_rankings() -> None:
    found = [_found("a", "x"), _found("b", "x"), _found("c", "x", 2)]
    chain = [{"chunk_ids": ["a", "b"]}, {"chunk_ids": ["c", "b"]}]
    # b was found by both queries (ranks 2 and 2) and beats the first-ranked a and c.
    assert [p["chunk_id"] for p in rank_passages(chain, found)] == ["b", "a", "c"]  # type: ignore[arg-type]


def test_context_cap_keeps_the_best_that_fit() -> None:
    long, short = "word " * 300, "tiny passage"
    found = [_found("big", long), _found("small", short), _found("mid", "word " * 50)]
    chain = [{"chunk_ids": ["big", "small", "mid"]}]
    everything = context_passages(chain, found, 0)  # type: ignore[arg-type]
    assert [p.chunk_id for p in everything] == ["big", "small", "mid"]
    capped = context_passages(chain, found, 100)  # type: ignore[arg-type]
    assert [p.chunk_id for p in capped] == ["small", "mid"]  # big does not fit, the next ones do
    tiny = context_passages(chain, [found[0]], 10)  # type: ignore[arg-type]
    assert [p.chunk_id for p in tiny] == ["big"] and count_tokens(tiny[0].text) <= 10


def test_by_default_the_answer_sees_the_whole_union() -> None:
    """CoRAG answers from the union of the chain's chunks: no cap unless one is configured."""
    from arag_graph.corag.context import CoragContext

    found = [_found(str(i), "word " * 1000) for i in range(15)]  # S=3 x top_k=5 chunks of 1,000 tokens
    chain = [{"chunk_ids": [str(i) for i in range(15)]}]
    default_cap = CoragContext().max_context_tokens
    assert len(context_passages(chain, found, default_cap)) == 15  # type: ignore[arg-type]


def test_prompts_are_free_text_written_for_a_model() -> None:
    """The prompts carry the passages as they are (paragraphs kept), the chain and what is missing."""
    found = [Passage(str(i), f"Title {i}", f"First part {i}.\n\nSecond part {i}.", 1.0) for i in range(3)]
    backbone = ChatCorag(ScriptedChatModel(messages=iter([])))
    check = backbone.sufficiency("Who is X?", found).input[0].text
    assert "Who is X?" in check and all(f"[chunk {i}]" in check and f"{i}.\n\nSecond part" in check for i in range(3))
    chain = [{"step": 1, "query": "Who is X?", "chunk_ids": ["0"], "new_chunk_ids": ["0"], "is_sufficient": False}]
    ref = backbone.reformulation("Who is X?", found, chain, "the birth\nyear").input[0].text
    assert "1. Who is X? -> 1 chunks, 1 new; not sufficient" in ref and "Still missing: the birth year" in ref
    assert "missing was not stated" in backbone.reformulation("Who is X?", found, chain, "").input[0].text


def test_the_offline_policy_answers_typed_requests_never_prompts() -> None:
    from arag_graph.corag.schemas import Sufficiency
    from arag_graph.offline.policy import OfflinePolicy

    question = "Were Scott Derrickson and Ed Wood of the same nationality?"
    found = [Passage("1", "Ed Wood", "Ed Wood was an American filmmaker.\n\nHe was born in 1924.", 1.0)]
    policy = OfflinePolicy()
    backbone = OfflineCorag(policy)
    verdict, problem = backbone.sufficiency(question, found).invoke()
    assert problem is None and not verdict.is_sufficient and verdict.missing_info.startswith("Scott Derrickson")
    assert "Ed Wood" in verdict.reasoning
    chain = [{"step": 1, "query": question, "chunk_ids": ["1"], "new_chunk_ids": ["1"]}]
    query = backbone.reformulation(question, found, chain, verdict.missing_info).invoke()[0].query
    # The gap first, anchored by the question's other names; not a near-repeat of the question.
    assert query.startswith(verdict.missing_info) and "Ed Wood" in query
    assert repeated_query(query, [question], 0.9) is None
    # Without a check's verdict (a fixed-length chain asks none), the gap is what the check would have said;
    # with nothing missing, the question itself.
    assert backbone.reformulation(question, found, chain, "").invoke()[0].query == query
    full = [Passage("2", "Both", "Scott Derrickson and Ed Wood were of the same American nationality.", 1.0)]
    assert backbone.reformulation(question, full, chain, "").invoke()[0].query == question
    with pytest.raises(NotImplementedError, match="typed questions"):
        policy.with_structured_output(Sufficiency)  # there is no prompt for it to read


# ---------------------------------------------------------------------------------------------
# Control flow with scripted models (a real index)


@pytest.mark.integration
@pytest.mark.parametrize("cap", [1, 3, 5])
def test_never_sufficient_stops_at_the_step_cap(index: Any, cap: int) -> None:
    model = chain_model()
    out = build_corag_graph(index, model).invoke({"question": QUESTION}, context={"max_steps": cap})
    assert out["steps"] == cap and len(out["chain"]) == cap and len(out["trajectory"]) == cap
    assert out["stop_reason"] == "step_cap" and out["error"] is None
    # The last retrieval is not checked: S=1 is one-shot RAG with its sub-answer and the answer.
    assert model.counts == {"SubAnswer": cap, "Sufficiency": cap - 1, "Reformulation": cap - 1, "answer": 1, "hyde": 0}
    assert out["chain"][-1]["is_sufficient"] is None
    assert [link["query"] for link in out["chain"]] == [QUESTION, *TOPICS[: cap - 1]]
    assert out["answer"] == "Stephen King"
    ids = [cid for link in out["chain"] for cid in link["new_chunk_ids"]]
    assert len(ids) == len(set(ids)) and set(out["context_chunks"]) == set(ids)


CHAIN_LENGTHS = {
    "greedy": {"max_steps": 3},
    "greedy-fixed": {"max_steps": 3, "fixed_length": True},
    "best_of_n": {"decoding": "best_of_n", "n": 2, "max_steps": 3},
    "tree": {"decoding": "tree", "beam": 1, "expand": 2, "rollouts": 1, "max_steps": 3},
    "tree-fixed": {"decoding": "tree", "beam": 1, "expand": 2, "rollouts": 0, "max_steps": 3, "fixed_length": True},
}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(CHAIN_LENGTHS))
def test_a_chain_that_is_never_sufficient_is_exactly_max_steps_long(index: Any, name: str) -> None:
    """The step cap is the chain's length, whatever the decoding: a run's own cap (a tree candidate at
    depth d has d steps, a rollout goes 2 steps further, within ``max_steps``), checked last steps or not,
    and fixed-length chains, which a repeated query does not stop."""
    context = CHAIN_LENGTHS[name]
    fixed = bool(context.get("fixed_length"))
    # Every reformulation a new topic (fixed-length: always the question again, which does not stop it).
    queries: Any = [QUESTION] if fixed else (lambda i, temperature, prompt: TOPICS[i % len(TOPICS)])
    model = chain_model(queries=queries)
    out = build_corag_graph(index, model).invoke({"question": QUESTION}, context=context)
    assert out["error"] is None and out["answer"] == "Stephen King"
    assert len(out["chain"]) == 3 and out["stop_reason"] == "step_cap", (out["stop_reason"], out["stop_detail"])
    assert [link["step"] for link in out["chain"]] == [1, 2, 3]
    assert model.counts["SubAnswer"] == out["steps"] and model.counts["Sufficiency"] <= out["steps"]
    if fixed:
        assert model.counts["Sufficiency"] == 0
    runs = out["sampled_chains"]
    if context.get("decoding") == "best_of_n":
        assert [len(r["chain"]) for r in runs] == [3, 3] and out["steps"] == 6
        assert model.counts["Sufficiency"] == model.counts["Reformulation"] == 2 * 2  # the last step unchecked
    by_id = {run["id"]: run for run in runs}
    for run in runs if context.get("decoding") == "tree" else []:
        depth = run["id"].count(".") + 1
        wanted = 3 if run["role"] == "rollout" else depth  # a rollout: min(max_steps, its candidate's + 2)
        assert len(run["chain"]) == wanted <= 3, (run["id"], run["role"], len(run["chain"]))
        if run["role"] == "rollout":  # only a candidate short of max_steps has somewhere to lead
            assert len(by_id[run["parent"]]["chain"]) < 3, run["id"]
    if context.get("decoding") == "tree":
        assert max(r["id"].count(".") + 1 for r in runs if r["role"] == "candidate") == 3
        # A candidate below max_steps checks its last step (the next reformulation reads the verdict);
        # one at max_steps does not, nor do the rollouts here (from depth 2: only the unchecked last step).
        below = [r for r in runs if r["role"] == "candidate" and len(r["chain"]) < 3]
        assert model.counts["Sufficiency"] == (0 if fixed else len(below))
    # The last retrieval of a chain at the cap is never checked: no verdict could change what happens next.
    for chain in [out["chain"], *(r["chain"] for r in runs if len(r["chain"]) == 3)]:
        assert chain[-1]["is_sufficient"] is None
    if not runs:
        assert out["steps"] == 3 and model.counts["Reformulation"] == 2


@pytest.mark.integration
def test_stops_early_when_sufficient(index: Any) -> None:
    model = chain_model(sufficient=[False, True])
    out = build_corag_graph(index, model).invoke({"question": QUESTION})
    assert out["steps"] == 2 and out["stop_reason"] == "sufficient"
    assert model.counts == {"SubAnswer": 2, "Sufficiency": 2, "Reformulation": 1, "answer": 1, "hyde": 0}
    first, second = out["chain"]
    assert (first["is_sufficient"], first["missing_info"], first["confidence"]) == (False, "missing 1", 0.2)
    assert (second["is_sufficient"], second["reasoning"], second["confidence"]) == (True, "reasoning 2", 0.9)
    assert out["trajectory"][1]["reasoning"] == "sufficient (confidence 0.90)"
    # The reformulation saw what the check said was missing, and the chain so far.
    reformulation = next(e["messages"][-1].text for e in model.log if requested_schema(e["kwargs"]) == "Reformulation")
    assert "Still missing: missing 1" in reformulation and f"1. {QUESTION}" in reformulation


@pytest.mark.integration
@pytest.mark.parametrize(
    "repeat",
    [
        QUESTION.upper(),  # the same query again
        QUESTION.replace("?", " please?"),  # nearly the same: Jaccard 14/15 >= 0.9
    ],
)
def test_stops_on_a_repeated_query(index: Any, repeat: str) -> None:
    model = chain_model(queries=[TOPICS[0], repeat])
    out = build_corag_graph(index, model).invoke({"question": QUESTION}, context={"max_steps": 5})
    assert out["stop_reason"] == "loop" and out["steps"] == 2 < 5
    assert "repeats the query of step 1" in out["stop_detail"]
    assert model.counts["Reformulation"] == 2 and model.counts["answer"] == 1
    assert out["answer"] == "Stephen King"


@pytest.mark.integration
def test_loop_similarity_is_configurable(index: Any) -> None:
    near = QUESTION.replace("?", " please?")
    model = chain_model(queries=[near])
    out = build_corag_graph(index, model).invoke(
        {"question": QUESTION}, context={"max_steps": 2, "loop_similarity": 0.99}
    )
    assert out["steps"] == 2 and out["stop_reason"] in {"step_cap", "no_new_passages"}


@pytest.mark.integration
def test_deduplicates_chunks_across_steps(index: Any) -> None:
    second = "Maximum Overdrive 1986 film shot in Leland North Carolina, directed by Stephen King"
    first_ids = [h.chunk_id for h in retrieve(index, QUESTION, 5)]
    second_ids = [h.chunk_id for h in retrieve(index, second, 5)]
    repeated = [c for c in second_ids if c in first_ids]
    assert repeated and len(repeated) < 5  # the test needs partly overlapping retrievals

    model = chain_model(queries=[second])
    out = build_corag_graph(index, model).invoke({"question": QUESTION}, context={"max_steps": 2})
    one, two = out["chain"]
    assert one["chunk_ids"] == first_ids and two["chunk_ids"] == second_ids
    assert two["new_chunk_ids"] == [c for c in second_ids if c not in first_ids]
    assert out["trajectory"][1]["chunk_ids"] == two["new_chunk_ids"]
    assert out["trajectory"][1]["note"] == f"{len(repeated)} of 5 chunks were already in context"
    union = list(dict.fromkeys(first_ids + second_ids))
    assert out["retrieved_tokens"] == sum(count_tokens(index.get_chunk(c).text) for c in union)
    assert sorted(out["context_chunks"]) == sorted(union)
    prompt = answer_prompt(model)
    assert all(prompt.count(f"[chunk {c}]") == 1 for c in union)
    # A chunk found by both queries comes first in the answer's context.
    assert out["context_chunks"][0] in repeated


@pytest.mark.integration
def test_stops_when_a_retrieval_brings_nothing_new(index: Any) -> None:
    model = chain_model(queries=["zzqx vvqy"])  # no BM25 match at all
    out = build_corag_graph(index, model).invoke({"question": QUESTION}, context={"retriever": "bm25", "max_steps": 4})
    assert out["stop_reason"] == "no_new_passages" and out["steps"] == 2
    assert out["chain"][1]["chunk_ids"] == [] and out["trajectory"][1]["tokens"] == 0


@pytest.mark.integration
def test_context_cap_limits_the_answer_prompt(index: Any) -> None:
    model = chain_model()
    out = build_corag_graph(index, model).invoke(
        {"question": QUESTION}, context={"max_steps": 3, "max_context_tokens": 400}
    )
    retrieved = {c for link in out["chain"] for c in link["new_chunk_ids"]}
    assert out["context_chunks"] and set(out["context_chunks"]) < retrieved
    assert sum(count_tokens(index.get_chunk(c).text) for c in out["context_chunks"]) <= 400
    prompt = answer_prompt(model)
    assert all((f"[chunk {c}]" in prompt) == (c in out["context_chunks"]) for c in retrieved)


@pytest.mark.integration
def test_bad_structured_output_is_retried_once_then_not_sufficient(index: Any) -> None:
    attempts = itertools.count()

    def reply(messages: Sequence[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        schema = requested_schema(kwargs)
        if schema == "Sufficiency":
            n = next(attempts)
            if n == 0:
                return invalid_structured_reply(schema)  # invalid JSON
            if n == 1:
                return structured_reply(schema, missing_info="no verdict")  # is_sufficient missing
            return structured_reply(schema, is_sufficient=True, confidence=0.8)
        if schema == "Reformulation":
            return structured_reply(schema, query=TOPICS[0])
        if schema == "SubAnswer":
            return structured_reply(schema, answer="Stephen King", confidence=0.9)
        return AIMessage("Answer: Stephen King")

    model = ScriptedChatModel(messages=iter([]), reply=reply)
    out = build_corag_graph(index, model).invoke({"question": QUESTION})
    assert next(attempts) == 3  # two attempts for step 1, one for step 2
    first, second = out["chain"]
    assert (first["is_sufficient"], first["confidence"]) == (False, 0.0)
    assert second["is_sufficient"] is True and out["stop_reason"] == "sufficient" and out["steps"] == 2
    assert len(out["warnings"]) == 1 and "step 1: the sufficiency check fell back" in out["warnings"][0]
    assert out["error"] is None and out["answer"] == "Stephen King"


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_model_failure_is_a_one_line_error(index: Any, mode: str) -> None:
    graph = build_corag_graph(index, FailingChatModel(messages=iter([])))
    inputs = {"question": QUESTION}
    out = graph.invoke(inputs) if mode == "sync" else asyncio.run(graph.ainvoke(inputs))
    assert out["error"].startswith("model call failed") and "\n" not in out["error"]
    assert "upstream unavailable" in out["error"]
    # The sub-answer fell back to "no relevant information", the check to "not sufficient", the
    # reformulation to the question: a loop.
    assert out["steps"] == 1 and out["stop_reason"] == "loop" and len(out["warnings"]) == 3
    assert out["chain"][0]["sub_answer"] == "No relevant information found" and out["chain"][0]["penalty"] == 1.0
    assert out["answer"] == ""


@pytest.mark.integration
def test_sync_and_async_runs_agree(index: Any) -> None:
    outputs = []
    for mode in ("sync", "async"):
        graph = build_corag_graph(index, chain_model(sufficient=[False, False, True]))
        inputs = {"question": QUESTION}
        config = {"max_steps": 4}
        out = (
            graph.invoke(inputs, context=config)
            if mode == "sync"
            else asyncio.run(graph.ainvoke(inputs, context=config))
        )
        outputs.append({k: v for k, v in out.items() if k != "messages"})
    assert outputs[0] == outputs[1] and outputs[0]["steps"] == 3


@pytest.mark.integration
def test_hyde_embeds_the_models_passage_for_each_query(index: Any) -> None:
    passage = "Shabana Azmi is an Indian actress of film, television and theatre."
    model = chain_model(hyde=lambda prompt: passage)
    out = build_corag_graph(index, model).invoke({"question": QUESTION}, context={"hyde": True, "max_steps": 2})
    assert model.counts["hyde"] == 2
    expected = [h.chunk_id for h in index.semantic_search(passage, 5)]
    assert out["chain"][0]["chunk_ids"] == expected
    assert out["trajectory"][0]["args"]["hyde"] is True


@pytest.mark.integration
def test_a_failing_hyde_call_falls_back_to_the_query(index: Any) -> None:
    def broken(prompt: str) -> str:
        raise RuntimeError("hyde backend down")

    out = build_corag_graph(index, chain_model(hyde=broken)).invoke(
        {"question": QUESTION}, context={"hyde": True, "max_steps": 1}
    )
    assert out["chain"][0]["chunk_ids"] == [h.chunk_id for h in retrieve(index, QUESTION, 5)]
    assert "HyDE failed" in out["warnings"][0] and out["error"] is None


@pytest.mark.integration
def test_a_low_recursion_limit_stops_the_chain_instead_of_failing(index: Any) -> None:
    out = build_corag_graph(index, chain_model()).invoke(
        {"question": QUESTION}, {"recursion_limit": 8}, context={"max_steps": 5}
    )
    assert out["stop_reason"] == "recursion_limit" and out["steps"] == 2 and out["answer"] == "Stephen King"


@pytest.mark.integration
def test_a_follow_up_question_on_the_same_thread_starts_a_new_chain(index: Any) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_corag_graph(index, chain_model(sufficient=[True]), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"question": QUESTION}, config)
    out = graph.invoke({"question": "Who founded Two Dollar Radio?"}, config, context={"max_steps": 1})
    assert [link["query"] for link in out["chain"]] == ["Who founded Two Dollar Radio?"]
    assert out["steps"] == 1 and out["stop_reason"] == "step_cap"


def test_empty_question_ends_with_an_error() -> None:
    out = build_corag_graph(None, chain_model()).invoke({"question": "  "})
    assert "empty question" in out["error"] and out.get("chain") == []


# ---------------------------------------------------------------------------------------------
# The offline policy on a HotpotQA slice


@pytest.mark.integration
def test_offline_policy_runs_chains_on_the_hotpot_slice(hotpot_index: Any, hotpot_slice: Any) -> None:
    questions = json.loads(hotpot_slice[1].read_text(encoding="utf-8"))
    graph = build_corag_graph(hotpot_index, "offline")
    multi_step = 0
    for record in (questions[3], questions[5], questions[7]):
        out = graph.invoke({"question": record["question"]})
        assert out["error"] is None and out["answer"]
        assert out["citations"] and all(hotpot_index.get_chunk(c) is not None for c in out["citations"])
        assert 1 <= out["steps"] <= 3 and len(out["chain"]) == out["steps"]
        assert out["stop_reason"] in STOP_REASONS
        assert set(out["citations"]) <= set(out["context_chunks"])
        for before, after in itertools.pairwise(out["chain"]):
            # The offline reformulation leads with what the check found missing.
            assert after["query"].startswith(before["missing_info"])
        multi_step += out["steps"] > 1
    assert multi_step  # at least one chain went past its first retrieval


@pytest.mark.integration
def test_offline_policy_async_and_hyde(hotpot_index: Any, hotpot_slice: Any) -> None:
    question = json.loads(hotpot_slice[1].read_text(encoding="utf-8"))[5]["question"]
    graph = build_corag_graph(hotpot_index, "offline")
    plain = graph.invoke({"question": question})
    out = asyncio.run(graph.ainvoke({"question": question}, context={"hyde": True}))
    assert out["answer"] and out["citations"] and out["steps"] <= 3 and out["chain"]
    # The offline policy writes no hypothetical passage: HyDE searches with the query itself.
    assert [link["chunk_ids"] for link in out["chain"]] == [link["chunk_ids"] for link in plain["chain"]]
    assert out["answer"] == plain["answer"]


# ---------------------------------------------------------------------------------------------
# Rejection sampling


class TemperatureModel(ScriptedChatModel):
    """A scripted model with a ``temperature`` field, recording the temperature of each request."""

    temperature: float = 0.0
    seen: list[float] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.seen.append(self.temperature)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _sampler(answers: Sequence[str], cls: type[ScriptedChatModel] = ScriptedChatModel) -> ScriptedChatModel:
    """Always sufficient at once; each chain's answer is the next of ``answers`` (cycling)."""
    replies = itertools.cycle(answers)

    def reply(messages: Sequence[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        if requested_schema(kwargs) == "Sufficiency":
            return structured_reply("Sufficiency", reasoning="found it", is_sufficient=True, confidence=0.9)
        if requested_schema(kwargs) == "SubAnswer":
            return structured_reply("SubAnswer", answer="a film director", confidence=0.8)
        return AIMessage(next(replies))

    return cls(messages=iter([]), reply=reply)


@pytest.mark.integration
def test_rejection_sampling_keeps_only_matching_chains(index: Any, tmp_path: Path) -> None:
    questions = [
        Question(id="q1", question=QUESTION, answers=("Stephen King", "King")),
        Question(id="q2", question="Who wrote Come Closer?", answers=("Grace Krilanovich",)),
    ]
    model = _sampler(
        ["Answer: Stephen King", "Answer: John Carpenter", "Answer: It was Stephen King.", "Answer: nobody"]
    )
    out = tmp_path / "chains.jsonl"
    seen: list[tuple[str, int]] = []
    stats = rejection_sample(
        questions, index=index, model=model, out=out, n=4, on_question=lambda q, k, s: seen.append((q.id, k))
    )
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["sample"], r["final_answer"]) for r in records] == [
        ("q1", 0, "Stephen King"),
        ("q1", 2, "It was Stephen King."),
    ]
    assert seen == [("q1", 2), ("q2", 0)]
    assert (stats.chains, stats.kept, stats.questions_with_kept, stats.failed) == (8, 2, 1, 0)
    assert stats.temperature_applied is False and records[0]["temperature"] is None
    first = records[0]
    assert first["answers"] == ["Stephen King", "King"] and first["queries"] == [QUESTION]
    # The step's sub-answer is the chain's own (the SubAnswer reply) with its penalty, 1 - confidence;
    # the sufficiency check's reasoning is kept beside it, not in its place.
    step = first["chain"][0]
    assert (step["sub_answer"], step["penalty"], step["reasoning"]) == ("a film director", 0.2, "found it")
    assert step["is_sufficient"] is True
    assert first["retrieved_chunk_ids"] == [h.chunk_id for h in retrieve(index, QUESTION, 5)]
    assert first["stop_reason"] == "sufficient" and first["match"] == "contain"

    # Resuming skips both questions (q2 had no correct chain but is in the progress file).
    calls_before = len(model.log)
    again = rejection_sample(questions, index=index, model=model, out=out, n=4)
    assert (again.skipped, again.chains) == (2, 0) and len(model.log) == calls_before
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2
    progress = [json.loads(line) for line in progress_path(out).read_text(encoding="utf-8").splitlines()]
    assert progress == [
        {"id": "q1", "sampled": 4, "kept": 2, "failed": 0},
        {"id": "q2", "sampled": 4, "kept": 0, "failed": 0},
    ]


@pytest.mark.integration
def test_rejection_sampling_exact_match_and_temperature(index: Any, tmp_path: Path) -> None:
    question = Question(id="7", question=QUESTION, answers=("Stephen King",))
    model = _sampler(["Answer: Stephen King", "Answer: It was Stephen King."], cls=TemperatureModel)
    out = tmp_path / "em.jsonl"
    out.write_text('{"id": "other", "question": "cut sh', encoding="utf-8")  # an interrupted earlier run
    stats = rejection_sample([question], index=index, model=model, out=out, n=2, temperature=0.9, match="em")
    lines = out.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])  # the line cut short is dropped, as the evaluation's writer does
    assert stats.kept == 1 and len(lines) == 1 and record["final_answer"] == "Stephen King"
    assert stats.temperature_applied and record["temperature"] == 0.9
    assert model.seen and set(model.seen) == {0.9} and model.temperature == 0.0  # the caller's model is untouched


@pytest.mark.integration
def test_rejection_sampling_counts_failed_chains(index: Any, tmp_path: Path) -> None:
    question = Question(id="1", question=QUESTION, answers=("Stephen King",))
    model = FailingChatModel(messages=iter([]))
    stats = rejection_sample([question], index=index, model=model, out=tmp_path / "x.jsonl", n=2)
    assert (stats.failed, stats.kept) == (2, 0) and not (tmp_path / "x.jsonl").exists()


def test_rejection_sampling_rejects_settings_that_cannot_work(tmp_path: Path) -> None:
    question = [Question(id="1", question="q", answers=("a",))]
    for kwargs, message in [
        ({"n": 0}, "n >= 1"),
        ({"temperature": 0.0}, "temperature above zero"),
        ({"match": "fuzzy"}, "unknown match rule"),
        ({"context": {"max_step": 2}}, "unknown configuration field"),
    ]:
        with pytest.raises(AragError, match=message):
            rejection_sample(question, index=None, model="offline", out=tmp_path / "o.jsonl", **kwargs)
