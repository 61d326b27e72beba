"""CoRAG as the full paper has it: sub-answers feed the chain, fixed-length chains, the logprob penalty.

Over the wire, against the OpenAI-compatible stand-in (tests/stubs/openai_server.py): one that sends
token log-probabilities, as vLLM and OpenAI do when asked, and one that sends none (the fallback).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from arag_graph.corag.graph import build_corag_graph
from arag_graph.corag.likelihood import target_logprob
from arag_graph.corag.schemas import NO_RELEVANT_INFORMATION
from arag_graph.registry import build_graph
from tests import test_model_faults as faults
from tests.fakes import sentinel_key
from tests.stubs._http import RecordedRequest
from tests.stubs.openai_server import OpenAIStubServer, Reply, TokenLogprob, text, with_logprobs
from tests.test_corag import QUESTION, TOPICS

pytestmark = pytest.mark.integration


def _prompt(request: RecordedRequest) -> str:
    body = request.json() or {}
    return "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])


def _model(server: OpenAIStubServer) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=server.url, api_key=sentinel_key("corag"), max_retries=0)


def _requests(server: OpenAIStubServer, schema: str | None) -> list[str]:
    return [_prompt(c.recorded) for c in server.completions if faults._structured_schema(c.recorded) == schema]


# ---------------------------------------------------------------------------------------------
# The likelihood of a fixed reply, from token logprobs


def _tokens(*pairs: tuple[str, float, tuple[tuple[str, float], ...]]) -> list[dict[str, Any]]:
    return [TokenLogprob(t, lp, top).wire() for t, lp, top in pairs]


def test_the_target_likelihood_is_exact_when_the_model_wrote_it_and_bounded_when_it_did_not() -> None:
    wrote = _tokens(("No", -0.1, ()), (" relevant", -0.2, ()), (" information", -0.05, ()), (" found", -0.01, ()))
    assert target_logprob(wrote, NO_RELEVANT_INFORMATION) == pytest.approx(-0.36)
    # The model answered "Edward" and ranked "No" second at -4: the target's first token, then nothing more
    # is known (an upper bound, since the rest of the target has probability at most 1).
    left = _tokens(("Edward", -0.02, (("Edward", -0.02), ("No", -4.0))), (" Wood", -0.1, ()))
    assert target_logprob(left, NO_RELEVANT_INFORMATION) == pytest.approx(-4.0)
    # Not among the runners-up: bounded by the least likely of them.
    absent = _tokens(
        ("Edward", -0.02, (("Edward", -0.02), ("Ed", -6.5))),
    )
    assert target_logprob(absent, NO_RELEVANT_INFORMATION) == pytest.approx(-6.5)
    # Diverging after a shared first token: "No" then the runner-up " relevant".
    late = _tokens(("No", -1.0, ()), (",", -0.3, ((",", -0.3), (" relevant", -2.0))))
    assert target_logprob(late, NO_RELEVANT_INFORMATION) == pytest.approx(-3.0)
    assert target_logprob([], NO_RELEVANT_INFORMATION) is None


# ---------------------------------------------------------------------------------------------
# Sub-answers feed the next query and the final answer


def _chain_responder(*, sufficient: bool = False) -> Any:
    count = {"reformulations": 0}

    def reply(request: RecordedRequest) -> Reply:
        schema = faults._structured_schema(request)
        prompt = _prompt(request)
        if schema == "SubAnswer":
            query = prompt.split('A search for "', 1)[1].split('"', 1)[0]
            return text(json.dumps({"answer": f"SUB[{query}]", "confidence": 0.6}))
        if schema == "Sufficiency":
            check = {"reasoning": "r", "is_sufficient": sufficient, "missing_info": "more", "confidence": 0.4}
            return text(json.dumps(check))
        if schema == "Reformulation":
            count["reformulations"] += 1
            return text(json.dumps({"query": TOPICS[count["reformulations"] % len(TOPICS)]}))
        return text("Answer: Stephen King [1]")

    return reply


def test_sub_answers_feed_the_next_query_and_the_final_answer(
    sample_index: Any, openai_server: OpenAIStubServer
) -> None:
    openai_server.script(_chain_responder())
    graph = build_corag_graph(sample_index, _model(openai_server))
    out = graph.invoke({"question": QUESTION}, context={"max_steps": 2})
    assert out["error"] is None and [link["sub_answer"] for link in out["chain"]] == [
        f"SUB[{QUESTION}]",
        f"SUB[{TOPICS[1]}]",
    ]
    (reformulation,) = _requests(openai_server, "Reformulation")
    assert f"sub-answer: SUB[{QUESTION}]" in reformulation  # the pair (query, sub-answer) of step 1
    answer = _requests(openai_server, None)[-1]
    assert f"{QUESTION} -> SUB[{QUESTION}]" in answer and f"{TOPICS[1]} -> SUB[{TOPICS[1]}]" in answer


# ---------------------------------------------------------------------------------------------
# Fixed-length chains


@pytest.mark.parametrize("decoding", ["greedy", "best_of_n"])
def test_a_fixed_length_chain_asks_no_check_and_runs_max_steps(
    sample_index: Any, openai_server: OpenAIStubServer, decoding: str
) -> None:
    """Every check would say "sufficient" after step 1; a fixed-length chain asks none and runs 3 steps."""
    openai_server.script(_chain_responder(sufficient=True))
    graph = build_corag_graph(sample_index, _model(openai_server))
    context = {"max_steps": 3, "decoding": decoding, "n": 2, "penalty": "confidence"}
    early = graph.invoke({"question": QUESTION}, context=context)
    assert early["stop_reason"] == "sufficient" and len(early["chain"]) == 1

    before = len(openai_server.completions)
    out = graph.invoke({"question": QUESTION}, context={**context, "fixed_length": True})
    assert out["error"] is None and out["stop_reason"] == "step_cap" and len(out["chain"]) == 3
    assert all(link["is_sufficient"] is None for link in out["chain"])
    asked = [faults._structured_schema(c.recorded) for c in openai_server.completions[before:]]
    assert "Sufficiency" not in asked


def test_fixed_length_is_a_cli_switch(sample_index: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from arag_graph.cli.main import main

    index = str(sample_index.path)
    argv = ["ask", QUESTION, "--index", index, "--graph", "corag", "--set", "fixed_length=true", "--max-steps", "2"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == 2


# ---------------------------------------------------------------------------------------------
# The paper's penalty where the endpoint sends logprobs; the confidence stand-in where it does not


def _scoring_responder(*, logprobs: bool) -> Any:
    """Chain 1 (greedy reformulations) finds documents its sub-answer is confident about, but the model
    would readily say "No relevant information found" of them; chain 2 (sampled) the other way round.
    So the confidence stand-in prefers chain 1 and the paper's likelihood chain 2."""

    def reply(request: RecordedRequest) -> Reply:
        body = request.json() or {}
        schema = faults._structured_schema(request)
        prompt = _prompt(request)
        sampled = TOPICS[3] in prompt
        if schema == "Reformulation":
            return text(json.dumps({"query": TOPICS[3] if body.get("temperature") == 0.7 else TOPICS[0]}))
        if schema == "Sufficiency":
            return text(json.dumps({"reasoning": "r", "is_sufficient": False, "missing_info": "m", "confidence": 0}))
        if schema == "SubAnswer":
            return text(json.dumps({"answer": "something", "confidence": 0.1 if sampled else 0.9}))
        if "reply exactly: No relevant information found" in prompt:
            assert body.get("logprobs") is True and body.get("top_logprobs") == 20
            if not logprobs:
                return text("something")
            if QUESTION in prompt:  # step 1, the same in both chains
                return with_logprobs("Edward", [TokenLogprob("Edward", -0.1, (("Edward", -0.1), ("No", -2.0)))])
            if sampled:
                return with_logprobs("Hamid", [TokenLogprob("Hamid", -0.01, (("Hamid", -0.01), ("No", -6.0)))])
            words = [("No", -0.05), (" relevant", -0.05), (" information", -0.05), (" found", -0.05)]
            return with_logprobs(NO_RELEVANT_INFORMATION, [TokenLogprob(t, lp) for t, lp in words])
        return text("Answer: Stephen King [1]")

    return reply


@pytest.mark.parametrize("logprobs", [True, False])
def test_best_of_n_scores_chains_by_the_no_information_likelihood_where_logprobs_come(
    sample_index: Any, openai_server: OpenAIStubServer, logprobs: bool
) -> None:
    openai_server.script(_scoring_responder(logprobs=logprobs))
    graph = build_graph("corag", index=sample_index, model=_model(openai_server))
    out = graph.invoke({"question": QUESTION}, context={"decoding": "best_of_n", "n": 2, "max_steps": 2})
    assert out["error"] is None
    runs = {r["id"]: r for r in out["sampled_chains"]}
    if logprobs:
        assert out["selected_chain"] == "2" and out["penalty_scorer"] == "logprob"
        assert runs["1"]["penalty_scorer"] == runs["2"]["penalty_scorer"] == "logprob"
        steps = out["chain"]
        assert [s["no_info_logprob"] for s in steps] == [pytest.approx(-2.0), pytest.approx(-6.0)]
        assert steps[1]["penalty"] == pytest.approx(round(math.exp(-6.0), 4))
        assert runs["1"]["penalty"] == pytest.approx(round((math.exp(-2.0) + math.exp(-0.2)) / 2, 4), abs=1e-3)
    else:
        assert out["selected_chain"] == "1" and out["penalty_scorer"] == "confidence"
        assert all(s["no_info_logprob"] is None and s["scorer"] == "confidence" for s in out["chain"])


def test_penalty_confidence_asks_for_no_logprobs(sample_index: Any, openai_server: OpenAIStubServer) -> None:
    openai_server.script(_scoring_responder(logprobs=True))
    graph = build_graph("corag", index=sample_index, model=_model(openai_server))
    context = {"decoding": "best_of_n", "n": 2, "max_steps": 2, "penalty": "confidence"}
    out = graph.invoke({"question": QUESTION}, context=context)
    assert out["selected_chain"] == "1" and out["penalty_scorer"] == "confidence"
    assert not any((c.body or {}).get("logprobs") for c in openai_server.completions)


def test_the_offline_policy_scores_by_confidence_and_the_record_says_so(sample_index: Any) -> None:
    from arag_graph.evaluators.runner import structure_of

    graph = build_graph("corag", index=sample_index, model="offline")
    out = graph.invoke({"question": QUESTION}, context={"decoding": "best_of_n", "n": 2})
    assert out["penalty_scorer"] == "confidence"
    record = structure_of(out)
    assert record["penalty_scorer"] == "confidence"
    assert {r["penalty_scorer"] for r in record["sampled_chains"]} == {"confidence"}
