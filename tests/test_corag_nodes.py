"""CoRAG's chain nodes one at a time: what each asks the model, and how each reply, fallback or failure
updates the chain (issue 38: the graph-level tests check where chains stop, not these fields).

``retrieve_step``, ``check`` and ``reformulate`` each return a :class:`~arag_graph.run.nodes.Call` (the
model request and how its result updates the state); here the request is run against a scripted model
or its result handed in directly, on a chain state written by hand. No graph, no checkpointer.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.runnables import RunnableParallel
from langgraph.graph import START, StateGraph

from arag_graph.corag.chain import (
    ChainState,
    ChainStep,
    check,
    logprob_penalty,
    reformulate,
    retrieve_step,
    step_penalty,
)
from arag_graph.corag.context import CoragContext
from arag_graph.corag.schemas import NO_RELEVANT_INFORMATION, Reformulation, SubAnswer, Sufficiency
from arag_graph.run.nodes import Call
from arag_graph.run.runtime import Bound
from tests.test_corag import QUESTION, TOPICS, chain_model


def bound_to(index: Any, model: Any) -> Bound[CoragContext]:
    return Bound("corag", CoragContext, index=index, model=model)


def runtime(**settings: Any) -> Any:
    return SimpleNamespace(context=CoragContext(**settings))


def link(step: int, query: str, **fields: Any) -> dict[str, Any]:
    """A chain step as ``retrieve_step`` writes it, with its sub-answer in."""
    return {
        "step": step, "query": query, "chunk_ids": [], "new_chunk_ids": [], "tokens": 0, "sub_answer": "found",
        "penalty": None, "scorer": "confidence", "no_info_logprob": None, "is_sufficient": None,
        "missing_info": "", "confidence": None, "reasoning": "", **fields,
    }  # fmt: skip


def as_call(result: Any) -> Call:
    assert isinstance(result, Call), result
    return result


def step_call(state: dict[str, Any], rt: Any, bound: Bound[CoragContext]) -> Call:
    """``retrieve_step`` run as a node of a graph (it reads the run's config and writes stream events)."""
    calls: list[Any] = []

    def node(given: Any) -> dict[str, Any]:
        calls.append(retrieve_step(given, rt, bound=bound))
        return {}

    StateGraph(ChainState).add_node("step", node).add_edge(START, "step").compile().invoke(state)
    return as_call(calls[0])


# ---------------------------------------------------------------------------------------------
# retrieve_step: the step's link, scored by the sub-answer's confidence or its logprob


def test_a_sub_answer_fills_the_steps_link_and_trajectory(hotpot_index: Any) -> None:
    state = {"question": QUESTION, "query": TOPICS[0], "warnings": ["earlier"]}
    call = step_call(state, runtime(), bound_to(hotpot_index, chain_model()))
    assert call.name == "sub_answer"
    update = call.on_result((SubAnswer(answer="Nolan directs films\nand more", confidence=0.8), None))
    (step,) = update["chain"]
    assert step["step"] == 1 and step["query"] == TOPICS[0] and step["chunk_ids"]
    assert step["sub_answer"] == "Nolan directs films and more"  # one line
    assert (step["penalty"], step["scorer"]) == (step_penalty(SubAnswer(answer="x", confidence=0.8)), "confidence")
    assert step["no_info_logprob"] is None
    assert set(step) == set(ChainStep.__annotations__)  # the link's own fields, and no others
    assert update["trajectory"][-1]["sub_answer"] == "Nolan directs films and more"
    assert update["warnings"] == ["earlier"]  # no fallback: nothing added, nothing lost


def test_a_sub_answer_scored_by_logprob_records_the_papers_penalty(hotpot_index: Any) -> None:
    state = {"question": QUESTION, "query": TOPICS[1]}
    call = step_call(state, runtime(), bound_to(hotpot_index, chain_model()))
    update = call.on_result((SubAnswer(answer="a novelist", confidence=0.1), None), -0.123456)
    step = update["chain"][-1]
    assert step["scorer"] == "logprob" and step["no_info_logprob"] == -0.1235
    assert step["penalty"] == logprob_penalty(-0.123456)


def test_a_sub_answer_that_fell_back_says_so_and_keeps_the_earlier_warnings(hotpot_index: Any) -> None:
    state = {"question": QUESTION, "query": TOPICS[2], "warnings": ["earlier"]}
    call = step_call(state, runtime(), bound_to(hotpot_index, chain_model()))
    assert call.on_error is not None
    update = call.on_error("the model's reply was not JSON")
    assert update["chain"][-1]["sub_answer"] == NO_RELEVANT_INFORMATION
    assert update["warnings"] == [
        "earlier",
        "step 1: the sub-answer fell back to 'no relevant information' (the model's reply was not JSON)",
    ]
    empty = call.on_result((SubAnswer(answer="  ", confidence=0.5), None))
    assert empty["chain"][-1]["sub_answer"] == NO_RELEVANT_INFORMATION


def test_the_logprob_request_goes_with_the_sub_answer_only_where_chains_are_compared(hotpot_index: Any) -> None:
    """The paper's penalty needs a second request beside the sub-answer: for best_of_n and tree chains whose
    run found the endpoint gives logprobs (``score_logprobs``), never for greedy or the confidence penalty."""
    model = chain_model()
    state = {"question": QUESTION, "query": TOPICS[3]}

    def asks_logprob(**settings: Any) -> bool:
        given = {**state, **settings.pop("state", {})}
        call = step_call(given, runtime(**settings), bound_to(hotpot_index, model))
        return isinstance(call.step.runnable, RunnableParallel)

    assert asks_logprob(decoding="best_of_n", state={"score_logprobs": True})
    assert not asks_logprob(decoding="best_of_n")
    assert not asks_logprob(decoding="greedy", state={"score_logprobs": True})
    assert not asks_logprob(decoding="best_of_n", penalty="confidence", state={"score_logprobs": True})


def test_a_step_with_its_sub_answer_is_announced_with_its_new_chunks(hotpot_index: Any) -> None:
    """The ``chain_step`` event a watcher of the run's custom stream sees."""
    bound = bound_to(hotpot_index, chain_model())

    def node(given: Any) -> dict[str, Any]:
        as_call(retrieve_step(given, runtime(), bound=bound)).on_result((SubAnswer(answer="a film director"), None))
        return {}

    graph = StateGraph(ChainState).add_node("step", node).add_edge(START, "step").compile()
    events = list(graph.stream({"question": QUESTION, "query": TOPICS[4]}, stream_mode="custom"))
    (event,) = [e for e in events if e["event"] == "chain_step"]
    new = len(event["chunk_ids"])
    assert new > 0 and event["summary"] == f"step 1: {TOPICS[4]} -> a film director ({new} new chunk(s))"


def test_the_step_asks_about_its_query_else_the_question(hotpot_index: Any) -> None:
    model = chain_model()
    call = step_call({"question": QUESTION}, runtime(), bound_to(hotpot_index, model))
    call.step.invoke()
    assert f'A search for "{QUESTION}" returned' in model.log[-1]["messages"][-1].text


# ---------------------------------------------------------------------------------------------
# check: the verdict on the chain so far


def chain_state(steps: int, **extra: Any) -> dict[str, Any]:
    return {
        "question": QUESTION,
        "chain": [link(i + 1, TOPICS[i]) for i in range(steps)],
        "trajectory": [{"tool": "retrieve", "args": {}} for _ in range(steps)],
        "warnings": ["earlier"],
        **extra,
    }


def test_a_verdict_fills_the_last_link_in_one_line(hotpot_index: Any) -> None:
    call = as_call(check(chain_state(1), runtime(max_steps=3), bound=bound_to(hotpot_index, chain_model())))
    assert call.name == "sufficiency_check"
    verdict = Sufficiency(reasoning="Nolan\ndirects", is_sufficient=False, missing_info="the\nyear", confidence=0.3)
    update = call.on_result((verdict, None))
    last = update["chain"][-1]
    assert (last["is_sufficient"], last["missing_info"], last["confidence"], last["reasoning"]) == (
        False, "the year", 0.3, "Nolan directs",
    )  # fmt: skip
    assert "stop_reason" not in update and "warnings" not in update
    assert update["trajectory"][-1]["reasoning"]


def test_a_sufficient_verdict_stops_the_chain_with_its_step(hotpot_index: Any) -> None:
    call = as_call(check(chain_state(2), runtime(max_steps=3), bound=bound_to(hotpot_index, chain_model())))
    update = call.on_result((Sufficiency(reasoning="r", is_sufficient=True, missing_info="", confidence=0.9), None))
    assert update["stop_reason"] == "sufficient" and update["stop_detail"].startswith("the check after step 2 judged")


def test_a_checked_last_step_stops_at_the_cap(hotpot_index: Any) -> None:
    """A chain run that checks its last step (a tree candidate, ``check_last``) stops there when not sufficient."""
    call = as_call(check(chain_state(2, cap=2), runtime(max_steps=5), bound=bound_to(hotpot_index, chain_model())))
    update = call.on_result((Sufficiency(reasoning="r", is_sufficient=False, missing_info="m", confidence=0.1), None))
    assert (update["stop_reason"], update["stop_detail"]) == ("step_cap", "reached the step cap: 2 retrieval(s)")
    below = as_call(check(chain_state(1, cap=2), runtime(max_steps=5), bound=bound_to(hotpot_index, chain_model())))
    assert "stop_reason" not in below.on_result((Sufficiency.fallback(QUESTION), None))


def test_a_check_that_fell_back_is_not_sufficient_and_says_so(hotpot_index: Any) -> None:
    call = as_call(check(chain_state(1), runtime(max_steps=3), bound=bound_to(hotpot_index, chain_model())))
    assert call.on_error is not None
    update = call.on_error("timed out")
    assert update["chain"][-1]["is_sufficient"] is False
    assert update["warnings"] == ["earlier", "step 1: the sufficiency check fell back to 'not sufficient' (timed out)"]
    fell_back = call.on_result((Sufficiency.fallback(QUESTION), "bad JSON"))
    assert fell_back["warnings"][-1] == "step 1: the sufficiency check fell back to 'not sufficient' (bad JSON)"


def test_the_check_asks_about_the_question(hotpot_index: Any) -> None:
    model = chain_model()
    as_call(check(chain_state(1), runtime(), bound=bound_to(hotpot_index, model))).step.invoke()
    assert QUESTION in model.log[-1]["messages"][-1].text


def test_a_fixed_length_chain_is_not_checked_and_stops_only_at_its_cap(hotpot_index: Any) -> None:
    model = chain_model()
    assert check(chain_state(1), runtime(fixed_length=True, max_steps=2), bound=bound_to(hotpot_index, model)) == {}
    stopped = check(chain_state(2), runtime(fixed_length=True, max_steps=2), bound=bound_to(hotpot_index, model))
    assert stopped == {"stop_reason": "step_cap", "stop_detail": "reached the step cap: 2 retrieval(s)"}
    assert model.log == []


# ---------------------------------------------------------------------------------------------
# reformulate: the next query, at the chain's temperature


def test_a_reformulation_is_the_next_query_in_one_line(hotpot_index: Any) -> None:
    call = as_call(reformulate(chain_state(1), runtime(), bound=bound_to(hotpot_index, chain_model())))
    assert call.name == "reformulation"
    update = call.on_result((Reformulation(query="Nolan's\nbirth year"), None))
    assert update == {"query": "Nolan's birth year"}
    empty = call.on_result((Reformulation(query=" "), None))
    assert empty["query"] == QUESTION  # no query is the question again


def test_a_reformulation_that_fell_back_says_so(hotpot_index: Any) -> None:
    call = as_call(reformulate(chain_state(2), runtime(), bound=bound_to(hotpot_index, chain_model())))
    assert call.on_error is not None
    update = call.on_error("refused")
    assert update["query"] == QUESTION
    assert update["warnings"] == ["earlier", "step 3: the reformulation fell back to the question (refused)"]


def test_a_sampled_chain_reformulates_at_its_temperature_about_what_is_missing(hotpot_index: Any) -> None:
    seen: list[tuple[float, str]] = []

    def queries(i: int, temperature: float, prompt: str) -> str:
        seen.append((temperature, prompt))
        return f"query {i}"

    state = chain_state(1, temperature=0.7)
    state["chain"][-1]["missing_info"] = "the director's birth year"
    call = as_call(reformulate(state, runtime(), bound=bound_to(hotpot_index, chain_model(queries=queries))))
    value, problem = call.step.invoke()
    assert problem is None and value.query == "query 0"
    ((temperature, prompt),) = seen
    assert temperature == 0.7 and "the director's birth year" in prompt and QUESTION in prompt
    as_call(
        reformulate(chain_state(1), runtime(), bound=bound_to(hotpot_index, chain_model(queries=queries)))
    ).step.invoke()
    assert seen[-1][0] == 0.0  # unsampled: the model as it is


@pytest.mark.parametrize("sample", [0, 1])
def test_the_offline_policy_reformulates_each_sample_by_its_own_rule(hotpot_index: Any, sample: int) -> None:
    """The sample number reaches the policy (sampled chains of the offline policy differ by it)."""
    from arag_graph.corag import model as corag_model_module

    asked: list[int] = []
    real = corag_model_module.OfflineCorag.reformulation

    def spy(self: Any, *args: Any, sample: int = 0, **kwargs: Any) -> Any:
        asked.append(sample)
        return real(self, *args, sample=sample, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(corag_model_module.OfflineCorag, "reformulation", spy)
    try:
        state = chain_state(1, **({"sample": sample} if sample else {}))
        reformulate(state, runtime(model="offline"), bound=Bound("corag", CoragContext, index=hotpot_index))
    finally:
        mp.undo()
    assert asked == [sample]
