"""SRAG: dependency waves, parallel branches, triplet filtering, the fact table, ablations, the router,
bad structured output, model failures, and offline runs on the HotpotQA slice.

Control-flow tests use a scripted model on a five-passage index with word-hash embeddings (fast, no
encoder); each retrieval asks for all five chunks, so which chunks a branch sees never depends on
ranking. The integration tests run the offline policy on a real index of the HotpotQA slice.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from arag_graph.core.documents import SourceDocument
from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.srag.graph import build_srag_graph, plan_sub_questions, resolve_question, table_rows
from arag_graph.srag.schemas import Decomposition, SubQuestion
from tests.fakes import WordHashEmbeddings
from tests.scripted import (
    FailingChatModel,
    ScriptedChatModel,
    invalid_structured_reply,
    requested_schema,
    structured_reply,
)

DOCS = [
    SourceDocument(
        "Doctor Strange is a 2016 American superhero film directed by Scott Derrickson. "
        "It stars Benedict Cumberbatch as Stephen Strange.",
        id="ds",
        title="Doctor Strange (2016 film)",
    ),
    SourceDocument(
        "Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer. "
        "He lives in Los Angeles, California.",
        id="sd",
        title="Scott Derrickson",
    ),
    SourceDocument(
        "Edward Davis Wood Jr. (1924 – 1978) was an American filmmaker, actor, and author.", id="ew", title="Ed Wood"
    ),
    SourceDocument("The Eiffel Tower is a wrought-iron lattice tower in Paris, France.", id="et", title="Eiffel Tower"),
    SourceDocument("Marie Curie won the Nobel Prize in Physics in 1903.", id="mc", title="Marie Curie"),
]
ALL = {"top_k": len(DOCS)}

TRIPLETS = {
    "Doctor Strange (2016 film)": [
        {"subject": "Doctor Strange", "predicate": "directed by", "object": "Scott Derrickson", "relevance": 0.9},
        {"subject": "Doctor Strange", "predicate": "stars", "object": "Benedict Cumberbatch", "relevance": 0.1},
    ],
    "Scott Derrickson": [
        {"subject": "Scott Derrickson", "predicate": "nationality", "object": "American", "relevance": 0.95},
        {"subject": "Scott Derrickson", "predicate": "lives in", "object": "Los Angeles", "relevance": 0.2},
    ],
    "Ed Wood": [{"subject": "Ed Wood", "predicate": "nationality", "object": "American", "relevance": 0.9}],
}

BRIDGE = "What nationality is the director of Doctor Strange?"
BRIDGE_PLAN = [
    {"id": 1, "question": "Who directed Doctor Strange?", "depends_on": []},
    {"id": 2, "question": "What nationality is [answer 1]?", "depends_on": [1]},
]
BRIDGE_ANSWERS = {
    "Who directed Doctor Strange?": "The film names its director.\nAnswer: Scott Derrickson [ds]",
    BRIDGE: "Answer: American [sd]",
}
COMPARISON = "Were Scott Derrickson and Ed Wood of the same nationality?"
COMPARISON_PLAN = [
    {"id": 1, "question": "What nationality is Scott Derrickson?", "depends_on": []},
    {"id": 2, "question": "What nationality is Ed Wood?", "depends_on": []},
]


def question_in(prompt: str) -> str:
    """The question a request is about, as a scripted model reads it from our prompts' wording."""
    for pattern in (r"^Question:\s*(.+)$", r'the question "(.+?)"', r"can be answered: (.+)$"):
        found = re.findall(pattern, prompt, re.MULTILINE)
        if found:
            return found[-1].strip()
    return ""


def title_in(prompt: str) -> str:
    found = re.findall(r'^Passage "(.+)":$', prompt, re.MULTILINE)
    return found[-1].strip() if found else ""


class Responder:
    """A scripted model's replies by kind of request: a structured schema, or a plain answer.

    Plain requests are answered by the first key of ``answers`` found in their ``Question:`` line.
    A value that is an exception is raised instead (a provider failing on that request).
    """

    def __init__(
        self,
        plan: list[dict[str, Any]] | AIMessage | None = None,
        triplets: dict[str, Any] | AIMessage | None = None,
        multi_hop: bool | AIMessage = True,
        answers: dict[str, str | Exception] | None = None,
    ) -> None:
        self.plan, self.triplets, self.multi_hop = plan, TRIPLETS if triplets is None else triplets, multi_hop
        self.answers = answers or {}

    def __call__(self, messages: Sequence[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        prompt = messages[-1].text
        schema = requested_schema(kwargs)
        if schema == "Decomposition":
            if isinstance(self.plan, AIMessage):
                return self.plan
            return structured_reply(schema, sub_questions=self.plan or [{"id": 1, "question": question_in(prompt)}])
        if schema == "Triplets":
            if isinstance(self.triplets, AIMessage):
                return self.triplets
            return structured_reply(schema, triplets=self.triplets.get(title_in(prompt), []))
        if schema == "Route":
            if isinstance(self.multi_hop, AIMessage):
                return self.multi_hop
            return structured_reply(schema, multi_hop=self.multi_hop)
        question = question_in(prompt)
        for key, reply in self.answers.items():
            if key in question:
                if isinstance(reply, Exception):
                    raise reply
                return AIMessage(reply)
        return AIMessage("Answer: unknown")


def model_for(responder: Responder) -> ScriptedChatModel:
    return ScriptedChatModel(messages=iter([]), reply=responder)


def requests(model: ScriptedChatModel, schema: str | None) -> list[str]:
    """Prompts of the logged requests for ``schema`` (None: plain answer requests), in order."""
    return [e["messages"][-1].text for e in model.log if requested_schema(e["kwargs"]) == schema]


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory: pytest.TempPathFactory) -> HierarchicalIndex:
    out = tmp_path_factory.mktemp("srag-index") / "index"
    return build_index(DOCS, out, embeddings=WordHashEmbeddings(), progress=False)


def rows_of(out: dict[str, Any]) -> dict[tuple[str, str, str], list[str]]:
    return {(r["subject"], r["predicate"], r["object"]): r["sources"] for r in out["table"]}


# ---------------------------------------------------------------------------------------------
# Control flow


def test_answer_one_is_substituted_into_sub_question_two(tiny_index: HierarchicalIndex) -> None:
    model = model_for(Responder(plan=BRIDGE_PLAN, answers=BRIDGE_ANSWERS))
    out = build_srag_graph(tiny_index, model).invoke({"question": BRIDGE}, context=ALL)

    first, second = out["sub_questions"]
    assert (first["wave"], second["wave"]) == (1, 2) and second["depends_on"] == [1]
    assert first["answer"] == "Scott Derrickson" and first["answer_chunks"] == ["ds"]
    assert second["question"] == "What nationality is [answer 1]?"
    assert second["resolved"] == "What nationality is Scott Derrickson?"
    assert [s["args"]["query"] for s in out["trajectory"]] == ["Who directed Doctor Strange?", second["resolved"]]
    # Branch 2 extracted for the substituted question, and only after sub-answer 1 was written.
    extractions = [question_in(p) for p in requests(model, "Triplets")]
    assert extractions.count(second["resolved"]) == len(DOCS)
    log = [(requested_schema(e["kwargs"]), question_in(e["messages"][-1].text)) for e in model.log]
    sub_answer = log.index((None, "Who directed Doctor Strange?"))
    assert all(i > sub_answer for i, (_, q) in enumerate(log) if q == second["resolved"])
    # Sub-question 2 has no dependants: no sub-answer is asked for; then the final answer.
    plain = requests(model, None)
    assert [question_in(p) for p in plain] == ["Who directed Doctor Strange?", BRIDGE]
    assert out["answer"] == "American" and out["citations"] == ["sd"] and out["error"] is None
    assert out["steps"] == 2 and out["retrieved_tokens"] == sum(s["tokens"] for s in out["trajectory"])
    assert set(out["retrieved_chunks"]) == {d.id for d in DOCS}


def test_final_answer_sees_only_the_table_and_the_question(tiny_index: HierarchicalIndex) -> None:
    model = model_for(Responder(plan=BRIDGE_PLAN, answers=BRIDGE_ANSWERS))
    out = build_srag_graph(tiny_index, model).invoke({"question": BRIDGE}, context=ALL)

    # Below-threshold triplets (stars 0.1, lives in 0.2) are dropped; both sub-questions found the
    # same facts, which the table holds once each, with their source chunks.
    assert rows_of(out) == {
        ("Doctor Strange", "directed by", "Scott Derrickson"): ["ds"],
        ("Scott Derrickson", "nationality", "American"): ["sd"],
        ("Ed Wood", "nationality", "American"): ["ew"],
    }
    assert all(r["sub_questions"] == [1, 2] for r in out["table"])
    assert [r["dropped"] for r in out["sub_questions"]] == [2, 2]
    kept = out["sub_questions"][0]["triplets"]
    assert {(t["object"], t["source"]) for t in kept} == {
        ("Scott Derrickson", "ds"),
        ("American", "sd"),
        ("American", "ew"),
    }

    final = requests(model, None)[-1]
    assert question_in(final) == BRIDGE
    assert "| Scott Derrickson | nationality | American | sd |" in final
    assert re.search(r"^\[chunk sd\] title=\"Scott Derrickson\"$", final, re.MULTILINE)
    for passage_only in ("Los Angeles", "Benedict Cumberbatch", "Who directed Doctor Strange?", "Scott Derrickson ["):
        assert passage_only not in final  # no passages, no dropped facts, no sub-questions or sub-answers


def _solve_steps(events: list[Any]) -> list[int]:
    return [
        e["step"] for mode, e in events if mode == "debug" and e["type"] == "task" and e["payload"]["name"] == "solve"
    ]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_independent_sub_questions_run_in_parallel(tiny_index: HierarchicalIndex, use_async: bool) -> None:
    model = model_for(Responder(plan=COMPARISON_PLAN, answers={COMPARISON: "Answer: yes [sd, ew]"}))
    graph = build_srag_graph(tiny_index, model)
    inputs, modes = {"question": COMPARISON}, ["debug", "values"]

    async def astream() -> list[Any]:
        return [e async for e in graph.astream(inputs, context=ALL, stream_mode=modes)]

    events = asyncio.run(astream()) if use_async else list(graph.stream(inputs, context=ALL, stream_mode=modes))
    steps = _solve_steps(events)
    assert len(steps) == 2 and steps[0] == steps[1], f"solve branches ran in supersteps {steps}"
    out = next(e for mode, e in reversed(events) if mode == "values")
    assert [r["wave"] for r in out["sub_questions"]] == [1, 1]
    assert [s["args"]["sub_question"] for s in out["trajectory"]] == [1, 2]
    assert len(requests(model, None)) == 1  # the final answer only: no sub-answers, nothing depends on them
    assert out["answer"] == "yes" and out["citations"] == ["sd", "ew"]
    assert ("Ed Wood", "nationality", "American") in rows_of(out)


def test_dependency_chain_runs_in_waves(tiny_index: HierarchicalIndex) -> None:
    plan = [
        {"id": 1, "question": "Who directed Doctor Strange?"},
        {"id": 2, "question": "Who wrote Ed Wood?"},
        {"id": 3, "question": "Where does [answer 1] live?"},
        {"id": 4, "question": "Compare [answer 3] and [answer 2]", "depends_on": [2, 3]},
    ]
    answers = {
        "Who directed": "Answer: Scott Derrickson [ds]",
        "Who wrote": "Answer: Ed Wood [ew]",
        "Where does": "Answer: Los Angeles [sd]",
    }
    model = model_for(Responder(plan=plan, answers=answers))
    events = list(
        build_srag_graph(tiny_index, model).stream({"question": "q"}, context=ALL, stream_mode=["debug", "values"])
    )
    out = next(e for mode, e in reversed(events) if mode == "values")
    assert [r["wave"] for r in out["sub_questions"]] == [1, 1, 2, 3]
    steps = _solve_steps(events)
    assert steps[0] == steps[1] < steps[2] < steps[3]
    assert out["sub_questions"][3]["resolved"] == "Compare Los Angeles and Ed Wood"
    assert [s["args"]["sub_question"] for s in out["trajectory"]] == [1, 2, 3, 4]


def test_a_low_recursion_limit_skips_later_waves_instead_of_crashing(tiny_index: HierarchicalIndex) -> None:
    chain = [{"id": 1, "question": "q1"}, *({"id": i, "question": f"q{i} [answer {i - 1}]"} for i in (2, 3, 4))]
    model = model_for(Responder(plan=chain, triplets={}))
    out = build_srag_graph(tiny_index, model).invoke({"question": "q"}, {"recursion_limit": 10}, context={"top_k": 1})
    assert [r["status"] for r in out["sub_questions"]] == ["done", "done", "skipped", "skipped"]
    assert any("recursion limit" in w for w in out["warnings"]) and out["error"] is None and out["answer"]


def test_a_follow_up_question_on_the_same_thread_starts_afresh(tiny_index: HierarchicalIndex) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    answers = {"Scott": "Answer: American [sd]", "Eiffel": "Answer: Paris [et]"}
    graph = build_srag_graph(
        tiny_index, model_for(Responder(plan=COMPARISON_PLAN, answers=answers)), checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "srag"}}
    first = graph.invoke({"question": COMPARISON}, thread, context=ALL)
    assert len(first["sub_questions"]) == 2 and first["table"]
    out = graph.invoke({"question": "Where is the Eiffel Tower?"}, thread, context={"decompose": False, "top_k": 1})
    assert [r["resolved"] for r in out["sub_questions"]] == ["Where is the Eiffel Tower?"]
    assert out["steps"] == 1 and out["table"] == [] and out["answer"] == "Paris"
    assert [m.type for m in out["messages"]] == ["human", "ai", "human", "ai"]


# ---------------------------------------------------------------------------------------------
# Triplet filtering and the ablation switches


@pytest.mark.parametrize(
    ("threshold", "facts"),
    [
        (0.0, {"directed by", "stars", "nationality", "lives in"}),
        (0.3, {"directed by", "nationality"}),
        (0.95, {"nationality"}),
    ],
)
def test_relevance_threshold_drops_triplets(tiny_index: HierarchicalIndex, threshold: float, facts: set[str]) -> None:
    model = model_for(Responder(answers={"Scott": "Answer: American [sd]"}))
    out = build_srag_graph(tiny_index, model).invoke(
        {"question": "What nationality is Scott Derrickson?"},
        context={**ALL, "decompose": False, "relevance_threshold": threshold},
    )
    kept = [t for t in out["sub_questions"][0]["triplets"] if t["title"] != "Ed Wood"]
    assert {t["predicate"] for t in kept} == facts
    assert all(t["relevance"] >= threshold for t in out["sub_questions"][0]["triplets"])
    assert out["sub_questions"][0]["dropped"] == 5 - len(out["sub_questions"][0]["triplets"])


def test_no_decomposition_makes_the_question_its_only_sub_question(tiny_index: HierarchicalIndex) -> None:
    model = model_for(Responder(plan=COMPARISON_PLAN, answers={COMPARISON: "Answer: yes [sd]"}))
    out = build_srag_graph(tiny_index, model).invoke({"question": COMPARISON}, context={**ALL, "decompose": False})
    assert requests(model, "Decomposition") == []
    assert [(r["id"], r["resolved"]) for r in out["sub_questions"]] == [(1, COMPARISON)]
    assert out["steps"] == 1 and len(requests(model, "Triplets")) == len(DOCS) and out["table"]


def test_no_structured_extraction_answers_from_passages(tiny_index: HierarchicalIndex) -> None:
    model = model_for(Responder(plan=BRIDGE_PLAN, answers=BRIDGE_ANSWERS))
    out = build_srag_graph(tiny_index, model).invoke(
        {"question": BRIDGE}, context={**ALL, "structured_extraction": False}
    )
    assert requests(model, "Triplets") == [] and out["table"] == []
    assert out["sub_questions"][1]["resolved"] == "What nationality is Scott Derrickson?"
    sub_answer, final = requests(model, None)
    for prompt in (sub_answer, final):
        assert '[chunk sd] title="Scott Derrickson"\n' in prompt and "He lives in Los Angeles" in prompt
        assert "Facts table" not in prompt
    assert out["answer"] == "American" and out["citations"] == ["sd"]


def test_no_table_aggregation_gives_per_passage_fact_lists(tiny_index: HierarchicalIndex) -> None:
    model = model_for(Responder(plan=BRIDGE_PLAN, answers=BRIDGE_ANSWERS))
    out = build_srag_graph(tiny_index, model).invoke({"question": BRIDGE}, context={**ALL, "table_aggregation": False})
    assert out["table"] == []
    final = requests(model, None)[-1]
    assert "| Subject |" not in final and "Facts, listed per source passage" in final
    block = final.split("[chunk sd]", 1)[1].split("\n\n", 1)[0]
    # Not deduplicated: both sub-questions' extractions of chunk sd are listed under it.
    assert block.count("- Scott Derrickson | nationality | American") == 2
    assert out["answer"] == "American" and out["citations"] == ["sd"]


def test_max_sub_questions_caps_the_decomposition(tiny_index: HierarchicalIndex) -> None:
    plan = [{"id": i, "question": f"Sub-question {i}?"} for i in (1, 2, 3)]
    model = model_for(Responder(plan=plan, triplets={}))
    out = build_srag_graph(tiny_index, model).invoke({"question": "q"}, context={**ALL, "max_sub_questions": 2})
    assert [r["id"] for r in out["sub_questions"]] == [1, 2] and out["steps"] == 2
    assert any("kept the first 2" in w for w in out["warnings"])
    assert "at most 2 sub-questions" in requests(model, "Decomposition")[0]


def test_router_sends_single_hop_questions_to_naive_rag(tiny_index: HierarchicalIndex) -> None:
    question = "Who directed Doctor Strange?"
    model = model_for(Responder(multi_hop=False, answers={question: "Answer: Scott Derrickson [ds]"}))
    out = build_srag_graph(tiny_index, model).invoke({"question": question}, context={"route": True, "top_k": 2})
    assert out["route"] == "naive_rag" and len(requests(model, "Route")) == 1
    assert requests(model, "Decomposition") == [] and requests(model, "Triplets") == []
    # naive_rag's own retrieval step (it records its retriever) with this run's top_k.
    assert out["steps"] == 1 and out["trajectory"][0]["args"]["retriever"] == "dense"
    assert len(out["trajectory"][0]["chunk_ids"]) == 2
    assert out["answer"] == "Scott Derrickson" and out["citations"] == ["ds"] and out["sub_questions"] == []
    assert [m.type for m in out["messages"]] == ["human", "ai"]


def test_router_keeps_multi_hop_questions_and_is_off_by_default(tiny_index: HierarchicalIndex) -> None:
    model = model_for(Responder(plan=COMPARISON_PLAN, multi_hop=True))
    out = build_srag_graph(tiny_index, model).invoke({"question": COMPARISON}, context={**ALL, "route": True})
    assert out["route"] == "srag" and len(requests(model, "Route")) == 1 and len(out["sub_questions"]) == 2
    model = model_for(Responder(plan=COMPARISON_PLAN))
    out = build_srag_graph(tiny_index, model).invoke({"question": COMPARISON}, context=ALL)
    assert out["route"] == "srag" and requests(model, "Route") == []


# ---------------------------------------------------------------------------------------------
# Bad structured output and failing models


def test_invalid_decomposition_is_retried_once_then_the_question_is_used(tiny_index: HierarchicalIndex) -> None:
    model = model_for(
        Responder(plan=invalid_structured_reply("Decomposition"), answers={COMPARISON: "Answer: yes [sd]"})
    )
    out = build_srag_graph(tiny_index, model).invoke({"question": COMPARISON}, context=ALL)
    assert len(requests(model, "Decomposition")) == 2
    assert [r["resolved"] for r in out["sub_questions"]] == [COMPARISON]
    assert any(w.startswith("the decomposition fell back") for w in out["warnings"])
    assert out["answer"] == "yes" and out["error"] is None


def test_triplets_with_missing_fields_are_retried_once_then_dropped(tiny_index: HierarchicalIndex) -> None:
    bad = structured_reply("Triplets", triplets=[{"subject": "Scott Derrickson"}])  # no predicate, object
    model = model_for(Responder(triplets=bad, answers={"Scott": "Answer: unknown"}))
    out = build_srag_graph(tiny_index, model).invoke(
        {"question": "What nationality is Scott Derrickson?"}, context={**ALL, "decompose": False}
    )
    assert len(requests(model, "Triplets")) == 2 * len(DOCS)
    assert out["table"] == [] and out["sub_questions"][0]["triplets"] == []
    assert sum("triplet extraction fell back" in w for w in out["warnings"]) == len(DOCS)
    assert "(no facts found)" in requests(model, None)[-1]
    assert out["answer"] == "unknown" and out["error"] is None


def test_invalid_route_falls_back_to_multi_hop(tiny_index: HierarchicalIndex) -> None:
    model = model_for(Responder(plan=COMPARISON_PLAN, multi_hop=invalid_structured_reply("Route")))
    out = build_srag_graph(tiny_index, model).invoke({"question": COMPARISON}, context={**ALL, "route": True})
    assert len(requests(model, "Route")) == 2 and out["route"] == "srag"
    assert any(w.startswith("the router fell back") for w in out["warnings"])


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_failing_model_ends_with_a_one_line_error(tiny_index: HierarchicalIndex, use_async: bool) -> None:
    graph = build_srag_graph(tiny_index, FailingChatModel(messages=iter([])))
    inputs = {"question": COMPARISON}
    out = asyncio.run(graph.ainvoke(inputs, context=ALL)) if use_async else graph.invoke(inputs, context=ALL)
    assert out["error"].startswith("model call failed") and "\n" not in out["error"]
    assert out["answer"] == "" and out["steps"] == 1  # structured steps fell back, the answer failed


def test_a_failing_sub_answer_stops_before_its_dependants(tiny_index: HierarchicalIndex) -> None:
    answers: dict[str, str | Exception] = {"Who directed": RuntimeError("upstream unavailable")}
    model = model_for(Responder(plan=BRIDGE_PLAN, answers=answers))
    out = build_srag_graph(tiny_index, model).invoke({"question": BRIDGE}, context=ALL)
    assert out["error"].startswith("sub-question 1: model call failed") and "\n" not in out["error"]
    assert [r["status"] for r in out["sub_questions"]] == ["failed", "pending"]
    assert out["steps"] == 1 and len(requests(model, None)) == 1 and out["answer"] == ""


def test_empty_question_is_an_error_not_a_crash(tiny_index: HierarchicalIndex) -> None:
    model = model_for(Responder())
    out = build_srag_graph(tiny_index, model).invoke({"question": "  "})
    assert out["error"].startswith("empty question") and model.log == []


# ---------------------------------------------------------------------------------------------
# Sub-question validation and substitution (pure functions)


def plan(*items: tuple[int, str, list[int]], limit: int = 5) -> tuple[dict[int, Any], list[str]]:
    decomposition = Decomposition(sub_questions=[SubQuestion(id=i, question=q, depends_on=d) for i, q, d in items])
    records, notes = plan_sub_questions(decomposition, "the question", limit)
    return {r["id"]: r for r in records}, notes


def test_placeholders_add_dependencies_and_unknown_or_self_references_are_dropped() -> None:
    records, notes = plan((1, "Who?", [1, 9]), (2, "Where is [answer 1] from?", []))
    assert records[1]["depends_on"] == [] and records[2]["depends_on"] == [1]
    assert [records[1]["wave"], records[2]["wave"]] == [1, 2]
    assert notes == ["sub-question 1: dropped dependencies on unknown ids or itself [1, 9]"]


def test_a_forward_reference_without_a_cycle_is_kept() -> None:
    records, notes = plan((1, "What is the capital of [answer 2]?", [2]), (2, "Where was Ada born?", []))
    assert records[1]["depends_on"] == [2] and (records[1]["wave"], records[2]["wave"]) == (2, 1) and notes == []


def test_a_cycle_is_broken_at_its_forward_reference() -> None:
    records, notes = plan((1, "a [answer 3]", []), (2, "b [answer 1]", []), (3, "c [answer 2]", []))
    assert [records[i]["depends_on"] for i in (1, 2, 3)] == [[], [1], [2]]
    assert [records[i]["wave"] for i in (1, 2, 3)] == [1, 2, 3]
    assert notes == ["sub-question 1: dropped its dependency on 3, which formed a cycle"]


def test_duplicate_ids_blank_questions_and_the_cap() -> None:
    records, _ = plan((1, "a", []), (1, "b", []), (0, "  ", []), (3, "c", []), (4, "d", []), limit=3)
    assert [(i, r["question"]) for i, r in records.items()] == [(1, "a"), (4, "b"), (3, "c")]
    records, _ = plan()
    assert [(i, r["question"], r["wave"]) for i, r in records.items()] == [(1, "the question", 1)]


def test_answers_are_substituted_in_any_placeholder_spelling() -> None:
    record: Any = {"id": 3, "question": "Is [Answer 1] older than {answer_2}?", "depends_on": [1, 2]}
    assert resolve_question(record, {1: "Ada", 2: "Bob"}) == "Is Ada older than Bob?"
    record = {"id": 2, "question": "Where was that person born?", "depends_on": [1]}
    assert resolve_question(record, {1: "Ada Lovelace"}) == "Where was that person born? (answer 1: Ada Lovelace)"


def test_table_rows_merge_sources_of_the_same_fact() -> None:
    def t(s: str, o: str, source: str, sq: int) -> Any:
        return {
            "subject": s,
            "predicate": "is",
            "object": o,
            "relevance": 1.0,
            "source": source,
            "title": "",
            "sub_question": sq,
        }

    rows = table_rows([t("Ada", "a poet", "1", 1), t("ada ", "A poet", "2", 2), t("Ada", "a mathematician", "1", 1)])
    assert [(r["object"], r["sources"], r["sub_questions"]) for r in rows] == [
        ("a poet", ["1", "2"], [1, 2]),
        ("a mathematician", ["1"], [1]),
    ]


def test_offline_rules_split_comparisons_and_score_triplets_with_their_subject() -> None:
    from arag_graph.srag.model import offline_decomposition, offline_route, offline_triplets
    from arag_graph.srag.schemas import Route

    split = offline_decomposition("Are Christopher Nolan and Sathish Kalathil both film directors?")
    assert [q.question for q in split.sub_questions] == [
        "Are Christopher Nolan film directors?",
        "Are Sathish Kalathil film directors?",
    ]
    assert all(q.depends_on == [] for q in split.sub_questions)
    # "or" between two prepositions, and names that are one place: not a comparison.
    bridge = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
    assert [q.question for q in offline_decomposition(bridge).sub_questions] == [bridge]

    facts = offline_triplets("Where was Ed Wood born?", "Ed Wood", ["He was born in Poughkeepsie.", "He died."])
    assert [(t.subject, t.object, t.relevance) for t in facts.triplets] == [
        ("Ed Wood", "He was born in Poughkeepsie.", 1.0),
        ("Ed Wood", "He died.", round(2 / 3, 3)),
    ]
    assert offline_route("Who is Christopher Nolan?") == Route(multi_hop=False)
    assert offline_route("Were Ed Wood and Scott Derrickson both American?") == Route(multi_hop=True)


# ---------------------------------------------------------------------------------------------
# The offline policy on the HotpotQA slice


@pytest.fixture(scope="module")
def slice_questions(hotpot_slice: tuple[Path, Path]) -> list[dict[str, Any]]:
    import json

    return json.loads(hotpot_slice[1].read_text(encoding="utf-8"))


def _check_offline(out: dict[str, Any], index: HierarchicalIndex) -> None:
    assert out["error"] is None and out["answer"]
    assert out["citations"] and all(index.get_chunk(c) is not None for c in out["citations"])
    assert out["table"] and all(index.get_chunk(s) is not None for r in out["table"] for s in r["sources"])
    assert out["steps"] == len(out["sub_questions"]) == len(out["trajectory"])


@pytest.mark.integration
def test_offline_policy_on_the_hotpot_slice(
    hotpot_index: HierarchicalIndex, slice_questions: list[dict[str, Any]]
) -> None:
    graph = build_srag_graph(hotpot_index, "offline")
    comparison = next(q for q in slice_questions if q["type"] == "comparison")
    bridge = next(q for q in slice_questions if q["type"] == "bridge")
    _check_offline(graph.invoke({"question": bridge["question"]}), hotpot_index)
    out = graph.invoke({"question": comparison["question"]})
    _check_offline(out, hotpot_index)
    assert len(out["sub_questions"]) == 2  # the offline rule splits a comparison per entity
    again = asyncio.run(graph.ainvoke({"question": comparison["question"]}))
    _check_offline(again, hotpot_index)
    assert (again["answer"], again["citations"], again["table"]) == (out["answer"], out["citations"], out["table"])


@pytest.mark.integration
def test_offline_policy_with_every_switch(
    hotpot_index: HierarchicalIndex, slice_questions: list[dict[str, Any]]
) -> None:
    graph = build_srag_graph(hotpot_index, "offline")
    question = next(q for q in slice_questions if q["type"] == "comparison")["question"]
    for switch in ("decompose", "structured_extraction", "table_aggregation"):
        out = graph.invoke({"question": question}, context={switch: False})
        assert out["error"] is None and out["answer"] and out["citations"], switch
    out = graph.invoke({"question": "Who is Christopher Nolan?"}, context={"route": True})
    assert out["route"] == "naive_rag" and out["answer"] and out["citations"]
