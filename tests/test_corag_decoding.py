"""CoRAG's decoding strategies: best-of-N and tree search over sampled chains, scored by sub-answers.

Scripted models play every role (sub-answer, check, reformulation, answer) and record the
temperature each request was made at; the offline policy runs each strategy on the HotpotQA slice;
the OpenAI-compatible stand-in shows what goes over the wire (temperatures, reasoning effort) and
that every chain's model calls reach the run's callbacks.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler, UsageMetadataCallbackHandler
from langchain_openai import ChatOpenAI

from arag_graph.corag.context import CoragContext
from arag_graph.corag.graph import build_corag_graph, chain_penalty, step_penalty
from arag_graph.corag.model import offline_reformulation, offline_sub_answer
from arag_graph.corag.schemas import NO_RELEVANT_INFORMATION, SubAnswer
from arag_graph.core.sentences import split_sentences
from arag_graph.offline.rules import bridge_names
from arag_graph.registry import build_graph, config_for
from arag_graph.retrievers.passages import Passage
from arag_graph.run.configuration import ContextError
from tests import test_model_faults as faults
from tests.fakes import sentinel_key
from tests.scripted import ScriptedChatModel, requested_schema
from tests.stubs._http import RecordedRequest
from tests.stubs.openai_server import OpenAIStubServer, Reply, text
from tests.test_corag import QUESTION, TOPICS, CountingModel, chain_model
from tests.test_model_faults import fault_env  # noqa: F401  (a fixture these tests use)

STOP_REASONS = {"sufficient", "step_cap", "no_new_passages", "loop", "recursion_limit"}


@pytest.fixture(scope="module")
def index(hotpot_index: Any) -> Any:
    """The HotpotQA slice's index (built once per session; its data is committed, so a skip is a fault)."""
    return hotpot_index


def without_messages(out: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in out.items() if k != "messages"}


def runs_of(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["id"]: run for run in out["sampled_chains"]}


def reformulation_temperatures(model: CountingModel) -> list[float]:
    return sorted(e["kwargs"]["temperature"] for e in model.log if requested_schema(e["kwargs"]) == "Reformulation")


def check_counting(out: dict[str, Any]) -> None:
    """Every chain run counts: steps, trajectory and retrieved tokens are those of all runs."""
    runs = out["sampled_chains"]
    assert out["steps"] == len(out["trajectory"]) == sum(r["steps"] for r in runs)
    assert out["retrieved_tokens"] == sum(r["retrieved_tokens"] for r in runs)
    assert out["retrieved_tokens"] == sum(s["tokens"] for s in out["trajectory"])
    assert Counter(s["args"]["chain"] for s in out["trajectory"]) == {r["id"]: r["steps"] for r in runs if r["steps"]}
    assert [r["selected"] for r in runs].count(True) == 1
    assert runs_of(out)[out["selected_chain"]]["chain"] == out["chain"]


# ---------------------------------------------------------------------------------------------
# Penalties, the offline rules, the settings


def test_the_penalty_stands_in_for_the_papers() -> None:
    assert step_penalty(SubAnswer(answer="American", confidence=0.9)) == pytest.approx(0.1)
    assert step_penalty(SubAnswer(answer="No relevant information found.", confidence=0.8)) == 1.0
    assert step_penalty(SubAnswer(answer="  ", confidence=0.8)) == 1.0
    assert chain_penalty([{"penalty": 0.2}, {"penalty": None}]) == pytest.approx(0.6)
    assert chain_penalty([]) == 1.0


def test_offline_sub_answers_and_sampled_reformulations_are_fixed_rules() -> None:
    found = [
        Passage("7", "Ed Wood", "Edward Davis Wood Jr. was an American filmmaker. He made Glen or Glenda.", 1.0),
        Passage("9", "Doctor Strange", "Doctor Strange is a 2016 film directed by Scott Derrickson.", 0.5),
    ]
    sub = offline_sub_answer("Who directed Doctor Strange?", found)
    assert sub.answer == "Doctor Strange is a 2016 film directed by Scott Derrickson. [9]" and sub.confidence == 1.0
    assert offline_sub_answer("zebra migration routes", found) == SubAnswer(
        answer=NO_RELEVANT_INFORMATION, confidence=0.0
    )

    question = "Were Scott Derrickson and Ed Wood of the same nationality?"
    missing = "Scott Derrickson, nationality"
    greedy = offline_reformulation(question, missing, found).query
    assert greedy == "Scott Derrickson, nationality Ed Wood"  # the rule greedy has always used
    names = bridge_names(question, [(p.title or "", split_sentences(p.text)) for p in found], limit=8)
    assert len(names) >= 2
    sampled = [offline_reformulation(question, missing, found, sample=k).query for k in range(1, len(names) + 2)]
    assert sampled[:2] == [f"{names[0]} {missing}", f"{names[1]} {missing}"]
    assert sampled[len(names)] == sampled[0]  # the k-th name, cyclically
    again = [offline_reformulation(question, missing, found, sample=k).query for k in range(1, len(names) + 2)]
    assert sampled == again
    # Without passages naming anything new: the k-th missing term with the anchors.
    assert offline_reformulation(question, missing, [], sample=1).query == "Scott Derrickson Ed Wood"
    assert offline_reformulation(question, missing, [], sample=2).query == "nationality Ed Wood"


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({"decoding": "beam"}, "'greedy', 'best_of_n' or 'tree'"),
        ({"n": 0}, "n=0"),
        ({"n": 99}, "less than or equal to 16"),
        ({"beam": 0}, "beam=0"),
        ({"rollouts": -1}, "rollouts=-1"),
        ({"sample_temperature": 0}, "greater than 0"),
    ],
)
def test_decoding_settings_are_bounded(values: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ContextError) as err:
        CoragContext(**values)
    assert fragment in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------
# Best-of-N with a scripted model


@pytest.mark.integration
def test_best_of_n_samples_n_chains_and_keeps_the_least_penalised(index: Any) -> None:
    good = TOPICS[2]  # the one query whose documents answer it well
    model = chain_model(
        queries=lambda i, temperature, prompt: TOPICS[i],
        sub_answers=lambda query: (f"about {query}", 0.95 if query == good else 0.3),
    )
    out = build_corag_graph(index, model).invoke(
        {"question": QUESTION}, context={"decoding": "best_of_n", "n": 4, "max_steps": 2}
    )
    assert out["error"] is None and out["answer"] == "Stephen King"
    runs = runs_of(out)
    assert sorted(runs) == ["1", "2", "3", "4"] and all(r["role"] == "chain" for r in runs.values())
    # Chain 1 reformulates at the run's temperature, the others are sampled at 0.7.
    assert [runs[i]["temperature"] for i in "1234"] == [None, 0.7, 0.7, 0.7]
    assert reformulation_temperatures(model) == [0.0, 0.7, 0.7, 0.7]
    # The scorer's choice is kept: the chain whose second query found its answer.
    chosen = next(r for r in runs.values() if r["chain"][1]["query"] == good)
    assert out["selected_chain"] == chosen["id"] and runs[chosen["id"]]["selected"]
    assert chosen["penalty"] == pytest.approx((0.7 + 0.05) / 2)
    assert all(r["penalty"] == pytest.approx(0.7) for r in runs.values() if r is not chosen)
    assert out["chain"][1]["sub_answer"] == f"about {good}" and out["chain"][1]["penalty"] == pytest.approx(0.05)
    # The answer reads the chosen chain's passages only.
    assert set(out["context_chunks"]) == {c for link in chosen["chain"] for c in link["new_chunk_ids"]}
    # Every chain's retrievals and model calls count.
    check_counting(out)
    assert out["steps"] == 8
    assert model.counts == {"SubAnswer": 8, "Sufficiency": 4, "Reformulation": 4, "answer": 1, "hyde": 0}
    assert set(out["read_chunks"]) == {c for r in runs.values() for link in r["chain"] for c in link["chunk_ids"]}
    assert "passages" not in chosen  # the summary leaves the passage text out


@pytest.mark.integration
def test_best_of_n_keeps_the_first_chain_on_a_tie_and_best_of_one_is_greedy(index: Any) -> None:
    tie = build_corag_graph(index, chain_model(queries=lambda i, t, p: TOPICS[i])).invoke(
        {"question": QUESTION}, context={"decoding": "best_of_n", "n": 3, "max_steps": 2}
    )
    assert tie["selected_chain"] == "1"

    greedy = build_corag_graph(index, chain_model()).invoke({"question": QUESTION}, context={"max_steps": 3})
    one = build_corag_graph(index, chain_model()).invoke(
        {"question": QUESTION}, context={"decoding": "best_of_n", "n": 1, "max_steps": 3}
    )
    assert one["chain"] == greedy["chain"] and one["answer"] == greedy["answer"]
    assert one["steps"] == greedy["steps"] == 3 and one["retrieved_tokens"] == greedy["retrieved_tokens"]
    assert one["context_chunks"] == greedy["context_chunks"] and one["stop_reason"] == greedy["stop_reason"]
    assert greedy["sampled_chains"] == [] and greedy["selected_chain"] == ""


@pytest.mark.integration
def test_a_model_without_a_temperature_is_used_as_it_is_and_the_run_says_so(index: Any) -> None:
    plain = ScriptedChatModel(messages=iter([]), reply=chain_model().reply)  # no temperature field
    out = build_corag_graph(index, plain).invoke(
        {"question": QUESTION}, context={"decoding": "best_of_n", "n": 2, "max_steps": 2}
    )
    assert out["error"] is None and len(out["sampled_chains"]) == 2
    assert any("has no temperature setting" in w for w in out["warnings"]) and out["notes"] == []


# ---------------------------------------------------------------------------------------------
# Tree search with a scripted model

_SEARCHES = re.compile(r"^\d+\. (.*?) -> ", re.MULTILINE)


def searches_in(prompt: str) -> list[str]:
    """The queries of the chain so far, as the reformulation prompt lists them."""
    return _SEARCHES.findall(prompt)


@pytest.mark.integration
def test_tree_expands_each_kept_path_and_keeps_a_beam_of_the_best(index: Any) -> None:
    confidence = dict(zip(TOPICS, [0.9, 0.2, 0.6, 0.8, 0.5, 0.4], strict=True))
    lock = threading.Lock()
    used: Counter[tuple[str, ...]] = Counter()

    def queries(i: int, temperature: float, prompt: str) -> str:
        """A topic the chain has not searched yet: each candidate of a path gets another one."""
        done = tuple(searches_in(prompt))
        with lock:
            k = used[done]
            used[done] += 1
        return [t for t in TOPICS if t not in done][k]

    model = chain_model(queries=queries, sub_answers=lambda q: ("found", confidence.get(q, 0.3)))
    out = build_corag_graph(index, model).invoke(
        {"question": QUESTION},
        context={"decoding": "tree", "beam": 2, "expand": 3, "rollouts": 0, "max_steps": 3},
    )
    assert out["error"] is None and out["answer"] == "Stephen King"
    runs = runs_of(out)
    assert runs["1"]["chain"][0]["query"] == QUESTION and runs["1"]["parent"] == ""
    second = [r for r in runs.values() if r["parent"] == "1"]
    third = [r for r in runs.values() if r["parent"] not in ("", "1")]
    assert sorted(r["id"] for r in second) == ["1.1", "1.2", "1.3"]
    # The beam: the two least penalised second steps are expanded, three candidates each; the third is not.
    kept = sorted(second, key=lambda r: r["penalty"])[:2]
    assert {r["parent"] for r in third} == {r["id"] for r in kept}
    assert len(third) == 2 * 3 and all(len(r["chain"]) == 3 for r in third)
    # Each path's first candidate reformulates at the run's temperature, the others are sampled.
    assert reformulation_temperatures(model) == [0.0] * 3 + [0.7] * 6
    # Steps below the last are checked (the next reformulation needs the verdict); the last are not.
    assert model.counts["Sufficiency"] == 1 + 3
    best = min(third, key=lambda r: (r["penalty"], r["seq"]))
    assert out["selected_chain"] == best["id"] and out["chain"] == best["chain"]
    assert out["stop_reason"] == "step_cap" and len(out["chain"]) == 3
    check_counting(out)
    assert out["steps"] == 1 + 3 + 6


def rollout_model(*, own: dict[str, float], follow_up: dict[str, float]) -> CountingModel:
    """Two candidate second steps; a third step, a rollout's or a candidate's, is ``<second> more <n>``.

    ``own`` is the confidence of each second step's documents, ``follow_up`` that of the steps after it.
    """
    seconds = itertools.cycle(own)
    numbers = itertools.count(1)
    lock = threading.Lock()

    def queries(i: int, temperature: float, prompt: str) -> str:
        done = searches_in(prompt)
        with lock:
            return next(seconds) if len(done) == 1 else f"{done[1]} more {next(numbers)}"

    def sub_answers(query: str) -> tuple[str, float]:
        base = query.split(" more ")[0]
        if query == QUESTION:
            return "not yet", 0.3
        return "found", (follow_up if " more " in query else own)[base]

    return chain_model(queries=queries, sub_answers=sub_answers)


@pytest.mark.integration
@pytest.mark.parametrize("rollouts", [0, 2])
def test_tree_rollouts_score_a_candidate_by_where_it_leads(index: Any, rollouts: int) -> None:
    """Candidate A's own documents are better, B's lead to better ones: rollouts pick B, their absence A."""
    a, b = TOPICS[0], TOPICS[3]
    model = rollout_model(own={a: 0.9, b: 0.6}, follow_up={a: 0.1, b: 0.95})
    out = build_corag_graph(index, model).invoke(
        {"question": QUESTION},
        context={"decoding": "tree", "beam": 1, "expand": 2, "rollouts": rollouts, "max_steps": 3},
    )
    assert out["error"] is None
    runs = runs_of(out)
    candidates = {r["chain"][1]["query"]: r for r in runs.values() if r["role"] == "candidate" and r["parent"] == "1"}
    assert set(candidates) == {a, b}
    rollout_runs = [r for r in runs.values() if r["role"] == "rollout"]
    if rollouts:
        assert sorted(r["id"] for r in rollout_runs) == sorted(
            f"{c['id']}.r{k}" for c in candidates.values() for k in (1, 2)
        )
        assert all(len(r["chain"]) == 3 and r["temperature"] == 0.7 for r in rollout_runs)
        for c in candidates.values():  # a candidate's score is its rollouts' mean penalty
            mine = [r["penalty"] for r in rollout_runs if r["parent"] == c["id"]]
            assert c["score"] == pytest.approx(sum(mine) / 2)
    else:
        assert rollout_runs == []
        assert all(c["score"] == c["penalty"] for c in candidates.values())
    winner = b if rollouts else a
    assert out["chain"][1]["query"] == winner and len(out["chain"]) == 3
    assert {r["parent"] for r in runs.values() if r["role"] == "candidate" and len(r["chain"]) == 3} == {
        candidates[winner]["id"]
    }
    check_counting(out)
    assert out["steps"] == 1 + 2 + 2 * rollouts + 2


@pytest.mark.integration
def test_scripted_strategies_run_async(index: Any) -> None:
    for context in (
        {"decoding": "best_of_n", "n": 3, "max_steps": 2},
        {"decoding": "tree", "beam": 1, "expand": 2, "rollouts": 1, "max_steps": 3},
    ):
        model = chain_model(queries=lambda i, t, p: TOPICS[i % len(TOPICS)])
        graph = build_corag_graph(index, model)
        out = asyncio.run(graph.ainvoke({"question": QUESTION}, context=context))
        assert out["error"] is None and out["answer"] == "Stephen King" and out["selected_chain"]
        check_counting(out)
        assert model.counts["SubAnswer"] == out["steps"]


@pytest.mark.integration
def test_a_low_recursion_limit_ends_the_tree_with_an_answer(index: Any) -> None:
    model = chain_model(queries=lambda i, t, p: TOPICS[i % len(TOPICS)])
    out = build_corag_graph(index, model).invoke(
        {"question": QUESTION},
        {"recursion_limit": 9},
        context={"decoding": "tree", "beam": 1, "expand": 2, "rollouts": 0, "max_steps": 6},
    )
    assert out["stop_reason"] == "recursion_limit" and out["answer"] == "Stephen King"
    assert any("recursion_limit" in w for w in out["warnings"])


# ---------------------------------------------------------------------------------------------
# The offline policy: each strategy, deterministically, on the HotpotQA slice

STRATEGIES = [
    {"decoding": "greedy"},
    {"decoding": "best_of_n", "n": 3},
    {"decoding": "tree", "beam": 2, "expand": 3, "rollouts": 1, "max_steps": 4},
]


@pytest.mark.integration
@pytest.mark.parametrize("context", STRATEGIES, ids=[c["decoding"] for c in STRATEGIES])
def test_offline_policy_runs_each_strategy_deterministically(
    hotpot_index: Any, hotpot_slice: Any, context: dict[str, Any]
) -> None:
    questions = json.loads(hotpot_slice[1].read_text(encoding="utf-8"))
    graph = build_corag_graph(hotpot_index, "offline")
    varied = rolled_out = False
    for record in questions[3:9]:  # two of them (6 and 7) need several steps offline
        first = graph.invoke({"question": record["question"]}, context=context)
        again = graph.invoke({"question": record["question"]}, context=context)
        assert without_messages(first) == without_messages(again)
        assert first["error"] is None and first["answer"] and first["stop_reason"] in STOP_REASONS
        assert first["citations"] and set(first["citations"]) <= set(first["context_chunks"])
        assert all(link["sub_answer"] and link["penalty"] is not None for link in first["chain"])
        if context["decoding"] == "greedy":
            assert first["sampled_chains"] == [] and first["notes"] == []
            continue
        assert any("offline policy" in n and "deterministic" in n for n in first["notes"])
        assert first["warnings"] == []  # nothing went wrong: the policy's variants are no fault
        check_counting(first)
        runs = list(first["sampled_chains"])
        queries = {tuple(link["query"] for link in r["chain"]) for r in runs}
        varied |= len(queries) > 1
        if context["decoding"] == "best_of_n":
            assert len(runs) == 3
        else:  # never more than `beam` paths are extended at a step
            by_id = {r["id"]: r for r in runs}
            extended = {r["parent"] for r in runs if r["role"] == "candidate" and r["parent"]}
            per_length = Counter(len(by_id[p]["chain"]) for p in extended)
            assert max(per_length.values(), default=0) <= context["beam"], per_length
            rolled_out |= any(r["role"] == "rollout" for r in runs)
    if context["decoding"] != "greedy":
        assert varied  # sampled chains search something else than the greedy one
    if context["decoding"] == "tree":
        assert rolled_out


@pytest.mark.integration
def test_offline_strategies_give_the_same_runs_async(hotpot_index: Any, hotpot_slice: Any) -> None:
    question = json.loads(hotpot_slice[1].read_text(encoding="utf-8"))[5]["question"]
    graph = build_corag_graph(hotpot_index, "offline")
    for context in STRATEGIES[1:]:
        sync = graph.invoke({"question": question}, context=context)
        out = asyncio.run(graph.ainvoke({"question": question}, context=context))
        assert without_messages(sync) == without_messages(out)


# ---------------------------------------------------------------------------------------------
# Over the wire: the OpenAI-compatible stand-in


def corag_responder(request: RecordedRequest) -> Reply:
    """Sub-answers, never-sufficient checks, a fresh query per reformulation, then the answer."""
    schema = faults._structured_schema(request)
    if schema == "SubAnswer":
        return text(json.dumps({"answer": "a director", "confidence": 0.5}))
    if schema == "Sufficiency":
        return text(json.dumps({"reasoning": "r", "is_sufficient": False, "missing_info": "more", "confidence": 0.1}))
    if schema == "Reformulation":
        return text(json.dumps({"query": TOPICS[len(request.raw) % len(TOPICS)]}))
    return text("Answer: Stephen King [1]")


class CallCounter(BaseCallbackHandler):
    """Counts the chat-model calls the run's callbacks see."""

    def __init__(self) -> None:
        self.started = 0
        self.lock = threading.Lock()

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        with self.lock:
            self.started += 1


def _bodies(server: OpenAIStubServer, schema: str | None = None) -> list[dict[str, Any]]:
    return [c.body for c in server.completions if schema is None or faults._structured_schema(c.recorded) == schema]


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_every_chains_model_calls_reach_the_runs_callbacks(
    index: Any, openai_server: OpenAIStubServer, mode: str
) -> None:
    openai_server.script(corag_responder)
    model = ChatOpenAI(model="gpt-4o-mini", base_url=openai_server.url, api_key=sentinel_key("corag"), max_retries=0)
    graph = build_corag_graph(index, model)
    calls, usage = CallCounter(), UsageMetadataCallbackHandler()
    config = {"callbacks": [calls, usage]}
    context = {"decoding": "best_of_n", "n": 3, "max_steps": 2}
    inputs = {"question": QUESTION}
    out = graph.invoke(inputs, config, context=context) if mode == "sync" else asyncio.run(
        graph.ainvoke(inputs, config, context=context)
    )  # fmt: skip
    assert out["error"] is None and out["answer"] == "Stephen King" and out["steps"] == 6
    # One logprob probe (the stand-in sends none, so no chain asks again: issue 35), 3 chains x (2 sub-answers,
    # 1 check, 1 reformulation), and the answer.
    assert len(openai_server.completions) == 1 + 3 * 4 + 1 == calls.started
    assert out["penalty_scorer"] == "confidence"  # the stand-in sends no logprobs: the fallback scored
    assert usage.usage_metadata["gpt-4o-mini"]["input_tokens"] > 0
    # The instance reformulates at its own temperature in chain 1 and at 0.7 in the sampled chains.
    assert sorted(b.get("temperature") or 0.0 for b in _bodies(openai_server, "Reformulation")) == [0.0, 0.7, 0.7]
    assert model.temperature is None  # the caller's object is untouched


@pytest.mark.integration
@pytest.mark.parametrize("graph_name", ["corag", "naive_rag", "arag"])
def test_run_settings_reach_a_model_instance(index: Any, openai_server: OpenAIStubServer, graph_name: str) -> None:
    """A model object given to a builder gets the run's reasoning effort and temperature on the wire."""
    openai_server.script(corag_responder)
    model = ChatOpenAI(model="gpt-5-mini", base_url=openai_server.url, api_key=sentinel_key("corag"), max_retries=0)
    graph = build_graph(graph_name, index=index, model=model)
    out = graph.invoke({"question": QUESTION}, context={"reasoning_effort": "high", "max_steps": 1})
    assert out["error"] is None
    bodies = _bodies(openai_server)
    assert bodies and all(b.get("reasoning_effort") == "high" for b in bodies)
    assert all("temperature" not in b for b in bodies)  # a reasoning model takes none

    openai_server.script(corag_responder)
    before = len(openai_server.completions)
    graph.invoke({"question": QUESTION}, context={"temperature": 0.3, "max_steps": 1})
    later = _bodies(openai_server)[before:]
    assert later and all(b.get("temperature") == 0.3 and "reasoning_effort" not in b for b in later)

    before = len(openai_server.completions)
    graph.invoke({"question": QUESTION}, context={"max_steps": 1})  # settings the run leaves alone stay the model's
    assert all("temperature" not in b and "reasoning_effort" not in b for b in _bodies(openai_server)[before:])
    assert model.reasoning_effort is None and model.temperature is None


@pytest.mark.integration
def test_sampled_chains_of_a_reasoning_model_say_they_were_not_sampled(
    index: Any, openai_server: OpenAIStubServer
) -> None:
    openai_server.script(corag_responder)
    model = ChatOpenAI(model="gpt-5-mini", base_url=openai_server.url, api_key=sentinel_key("corag"), max_retries=0)
    out = build_corag_graph(index, model).invoke(
        {"question": QUESTION}, context={"decoding": "best_of_n", "n": 2, "max_steps": 2, "reasoning_effort": "low"}
    )
    assert all("temperature" not in b for b in _bodies(openai_server))
    assert any("reasoning model" in w for w in out["warnings"])


# ---------------------------------------------------------------------------------------------
# The evaluation runner: --set decoding=... through `arag eval`


@pytest.mark.integration
def test_arag_eval_runs_a_decoding_strategy_offline(
    hotpot_index: Any, hotpot_slice: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from arag_graph.cli.main import main

    out_dir = tmp_path / "run"
    argv = [
        "eval", "--dataset", str(hotpot_slice[1]), "--index", str(hotpot_index.path), "--graphs", "corag",
        "--model", "offline", "--limit", "3", "--no-upload", "--quiet", "--out", str(out_dir),
        "--set", "decoding=best_of_n", "--set", "n=2",
    ]  # fmt: skip
    assert main(argv) == 0
    (predictions,) = (out_dir / "predictions").glob("*.jsonl")
    records = [json.loads(line) for line in predictions.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 3
    for record in records:
        assert record["setting"]["decoding"] == "best_of_n"
        prediction = record["prediction"]
        assert prediction["error"] is None and prediction["steps"] == len(prediction["trajectory"])
        assert {s["args"]["chain"] for s in prediction["trajectory"]} <= {"1", "2"}
        assert prediction["warnings"] == []  # the offline policy's note is not a warning


# ---------------------------------------------------------------------------------------------
# Model faults under the sampling strategies (the fault matrix of tests/test_model_faults.py runs greedy)

DECODING_FAULTS = ["429_then_ok", "500_always", "timeout", "truncated_json", "never_stops_calling_tools"]


@pytest.mark.integration
@pytest.mark.usefixtures("fault_env")  # the matrix's sentinel key and short timeouts
@pytest.mark.parametrize("fault_name", DECODING_FAULTS)
@pytest.mark.parametrize("decoding", ["best_of_n", "tree"])
def test_sampling_strategies_survive_model_faults(
    decoding: str,
    fault_name: str,
    openai_server: OpenAIStubServer,
    sample_index: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fault = faults.FAULTS[fault_name]
    faults._arm(openai_server, fault, monkeypatch)
    graph = build_graph("corag", index=sample_index, model="gpt-4o-mini")
    settings = {"n": 2, "beam": 1, "expand": 2, "rollouts": 1}
    context = config_for("corag", base_url=openai_server.url, max_steps=2, top_k=3, decoding=decoding, **settings)
    out = graph.invoke({"question": faults.QUESTION}, context=context)
    error = out.get("error")
    assert faults.KEY not in json.dumps(out, default=str)
    assert out["steps"] == len(out["trajectory"]) == sum(r["steps"] for r in out["sampled_chains"])
    # best-of-2: two chains of at most 2 steps; the tree: the first step, 2 candidates, 2 rollouts.
    assert out["steps"] <= 4 if decoding == "best_of_n" else out["steps"] <= 1 + 2 + 2
    if fault.answers:
        assert error is None and out["answer"] == faults.ANSWER
    else:
        assert isinstance(error, str) and "\n" not in error and fault.needle in error, error
