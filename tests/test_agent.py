"""The A-RAG agent graph: control flow with scripted models, state, async, streaming, checkpoints."""

from __future__ import annotations

import asyncio
import operator
import os
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from arag_graph.arag.graph import build_arag_graph, build_arag_naive_graph
from arag_graph.arag.prompts import SYNTHESIS_INSTRUCTION, agent_system_prompt
from arag_graph.core.errors import AragError
from arag_graph.core.tokens import count_tokens
from tests.scripted import FailingChatModel, ScriptedChatModel, calls, forever, scripted, tool_call
from tests.stubs.openai_server import OpenAIStubServer, text
from tests.stubs.openai_server import tool_call as stub_tool_call

pytestmark = pytest.mark.integration


def first_chunk_id(index: Any) -> str:
    return index.store.chunks[0].id


@pytest.mark.parametrize("cap", [1, 2, 7, 40])
def test_model_calling_tools_forever_ends_by_synthesis_with_exactly_cap_steps(sample_index: Any, cap: int) -> None:
    model = ScriptedChatModel(messages=forever(lambda: calls(tool_call("semantic_search", query="film director"))))
    model.reply = None
    graph = build_arag_graph(sample_index, model)
    out = graph.invoke({"question": "Who directed the film?"}, context={"max_steps": cap})
    assert out["steps"] == cap
    assert len(out["trajectory"]) == cap
    # The last request is the synthesis: no tools bound, instruction appended.
    last = model.log[-1]
    assert "tools" not in last["kwargs"]
    assert last["messages"][-1].content == SYNTHESIS_INSTRUCTION
    # Every tool call in the history got an answer (providers reject dangling calls).
    answered = {m.tool_call_id for m in out["messages"] if isinstance(m, ToolMessage)}
    asked = {c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls}
    assert asked <= answered


def test_low_recursion_limit_never_raises_and_caps_steps(sample_index: Any) -> None:
    model = ScriptedChatModel(messages=forever(lambda: calls(tool_call("keyword_search", keywords=["film"]))))
    graph = build_arag_graph(sample_index, model)
    out = graph.invoke({"question": "Q?"}, {"recursion_limit": 12}, context={"max_steps": 50})
    assert 0 < out["steps"] < 50
    assert model.log[-1]["messages"][-1].content == SYNTHESIS_INSTRUCTION


def test_tools_are_bound_one_call_per_turn(sample_index: Any) -> None:
    model = scripted(calls(tool_call("keyword_search", keywords=["Leland"])), "Answer: Leland [5]")
    build_arag_graph(sample_index, model).invoke({"question": "Where?"})
    first = model.log[0]["kwargs"]
    assert first["tools"] == ["keyword_search", "semantic_search", "chunk_read"]
    assert first["parallel_tool_calls"] is False


def test_configured_top_k_is_the_searches_default_and_a_model_may_override_it(sample_index: Any) -> None:
    turn = calls(
        tool_call("semantic_search", query="Leland North Carolina"),  # no top_k: the configured one
        tool_call("keyword_search", keywords=["Leland"], top_k=3),  # the model's own choice stands
    )
    model = scripted(turn, "Answer: done")
    out = build_arag_graph(sample_index, model).invoke({"question": "Q?"}, context={"top_k": 2, "max_steps": 5})
    semantic, keyword = out["trajectory"]
    assert semantic["args"]["top_k"] == 2 and len(semantic["chunk_ids"]) == 2
    assert keyword["args"]["top_k"] == 3 and 2 < len(keyword["chunk_ids"]) <= 3


@pytest.mark.parametrize("top_k", [2, 7])
def test_offline_policy_searches_with_the_configured_top_k(sample_index: Any, top_k: int) -> None:
    out = build_arag_graph(sample_index, "offline").invoke(
        {"question": "Where was Maximum Overdrive filmed?"}, context={"top_k": top_k}
    )
    searches = [s for s in out["trajectory"] if s["tool"] in ("keyword_search", "semantic_search")]
    assert searches and all(s["args"]["top_k"] == top_k for s in searches)
    assert max(len(s["chunk_ids"]) for s in searches) == top_k


def test_several_calls_in_one_turn_run_in_order_and_count_each(sample_index: Any) -> None:
    cid = first_chunk_id(sample_index)
    turn = calls(
        tool_call("chunk_read", chunk_ids=[cid]),
        tool_call("chunk_read", chunk_ids=[cid]),  # same chunk again: must see the first read
        tool_call("semantic_search", query="Leland"),
    )
    model = scripted(turn, f"Answer: done [{cid}]")
    out = build_arag_graph(sample_index, model).invoke({"question": "Q?"}, context={"max_steps": 10})
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert out["steps"] == 3
    assert [s["tool"] for s in out["trajectory"]] == ["chunk_read", "chunk_read", "semantic_search"]
    assert "already read" in tool_messages[1].content
    assert out["trajectory"][1]["tokens"] == 0
    assert out["read_chunks"] == [cid]
    assert out["citations"] == [cid]


def test_extra_calls_beyond_the_cap_are_answered_but_not_run(sample_index: Any) -> None:
    turn = calls(*(tool_call("semantic_search", query=f"q{i}") for i in range(3)))
    model = scripted(turn, "Answer: x")
    out = build_arag_graph(sample_index, model).invoke({"question": "Q?"}, context={"max_steps": 2})
    assert out["steps"] == 2
    notes = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(notes) == 3 and notes[2].startswith("Not run")


def test_unknown_tool_and_malformed_arguments_come_back_as_tool_errors(sample_index: Any) -> None:
    bad_json = AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "name": "keyword_search",
                "args": '{"keywords": ["Lel',
                "id": "bad-1",
                "error": "json",
                "type": "invalid_tool_call",
            }
        ],
    )
    model = scripted(
        calls(tool_call("web_search", query="x")),
        bad_json,
        calls(tool_call("keyword_search", keywords={"not": "a list"})),
        "Answer: fine",
    )
    out = build_arag_graph(sample_index, model).invoke({"question": "Q?"})
    errors = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "no tool named 'web_search'" in errors[0].content and "keyword_search" in errors[0].content
    assert "not valid JSON" in errors[1].content
    assert "Invalid arguments for keyword_search" in errors[2].content
    assert all(m.status == "error" for m in errors)
    assert out["steps"] == 3 and out["answer"] == "fine" and out["error"] is None


def test_state_fields_and_citations(sample_index: Any) -> None:
    cid = first_chunk_id(sample_index)
    model = scripted(
        calls(tool_call("keyword_search", keywords=["Leland"])),
        calls(tool_call("chunk_read", chunk_ids=[cid])),
        f"It is in the chunk.\nAnswer: Somewhere [{cid}, not-a-chunk]",
    )
    out = build_arag_graph(sample_index, model).invoke({"question": "Where?"})
    assert out["answer"] == "Somewhere"
    assert out["citations"] == [cid]
    assert out["read_chunks"] == [cid]
    assert out["steps"] == 2
    chunk_tokens = count_tokens(sample_index.get_chunk(cid).text)
    assert out["trajectory"][1]["tokens"] == chunk_tokens
    assert out["retrieved_tokens"] == out["trajectory"][0]["tokens"] + chunk_tokens
    assert set(out) >= {"answer", "citations", "read_chunks", "retrieved_tokens", "steps", "trajectory", "messages"}


def test_messages_input_and_empty_question(sample_index: Any) -> None:
    model = scripted("Answer: 42")
    graph = build_arag_graph(sample_index, model)
    out = graph.invoke({"messages": [HumanMessage("What is the answer?")]})
    assert out["answer"] == "42"
    empty = build_arag_graph(sample_index, scripted("Answer: never")).invoke({"question": "  "})
    assert "empty question" in empty["error"] and not empty.get("answer")


def test_model_that_keeps_failing_ends_with_clear_error(sample_index: Any) -> None:
    out = build_arag_graph(sample_index, FailingChatModel(messages=iter([]))).invoke({"question": "Q?"})
    assert out["error"].startswith("model call failed")
    assert "upstream unavailable" in out["error"]
    assert "\n" not in out["error"]


def test_token_budget_forces_synthesis(sample_index: Any) -> None:
    ids = [c.id for c in sample_index.store.chunks[:6]]
    replies = iter([calls(tool_call("chunk_read", chunk_ids=[i])) for i in ids] + [AIMessage("Answer: ok")])
    model = ScriptedChatModel(messages=replies)
    out = build_arag_graph(sample_index, model).invoke(
        {"question": "Q?"}, context={"max_steps": 15, "message_token_budget": 300}
    )
    assert out["steps"] < len(ids)
    assert model.log[-1]["messages"][-1].content == SYNTHESIS_INSTRUCTION


def test_async_invoke_and_streaming_modes(sample_index: Any) -> None:
    def model() -> ScriptedChatModel:
        return scripted(calls(tool_call("semantic_search", query="Leland")), "Answer: Leland")

    out = asyncio.run(build_arag_graph(sample_index, model()).ainvoke({"question": "Where?"}))
    assert out["answer"] == "Leland" and out["steps"] == 1

    nodes = [
        next(iter(u)) for u in build_arag_graph(sample_index, model()).stream({"question": "Q"}, stream_mode="updates")
    ]
    assert nodes == ["start", "agent", "tools", "agent", "finish"]

    streamed = list(build_arag_graph(sample_index, model()).stream({"question": "Q"}, stream_mode="messages"))
    kinds = {type(chunk).__name__ for chunk, _meta in streamed}
    assert {"ToolMessage"} <= kinds and any("AIMessage" in k for k in kinds)
    assert all(meta.get("langgraph_node") for _chunk, meta in streamed)

    async def collect() -> list[str]:
        graph = build_arag_graph(sample_index, model())
        return [next(iter(u)) async for u in graph.astream({"question": "Q"}, stream_mode="updates")]

    assert asyncio.run(collect()) == nodes


def test_checkpointer_follow_up_on_same_thread(sample_index: Any) -> None:
    cid = first_chunk_id(sample_index)
    model = scripted(
        calls(tool_call("chunk_read", chunk_ids=[cid])),
        f"Answer: first [{cid}]",
        calls(tool_call("chunk_read", chunk_ids=[cid])),
        "Answer: second",
        calls(tool_call("chunk_read", chunk_ids=[cid])),  # the other thread reads the same chunk
        f"Answer: other [{cid}]",
    )
    graph = build_arag_graph(sample_index, model, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t1"}}
    first = graph.invoke({"question": "First question?"}, thread)
    second = graph.invoke({"messages": [HumanMessage("And a follow-up?")]}, thread)
    assert first["answer"] == "first" and second["answer"] == "second"
    assert second["steps"] == 1  # per-question counters restart
    follow_up_read = [m for m in second["messages"] if isinstance(m, ToolMessage)][-1]
    assert "already read" in follow_up_read.content  # the read set survived the checkpoint
    humans = [m.content for m in second["messages"] if isinstance(m, HumanMessage)]
    assert humans == ["First question?", "And a follow-up?"]
    other = graph.invoke({"question": "Other thread"}, {"configurable": {"thread_id": "t2"}})
    assert other["answer"] == "other"  # the run reached its answer (not a failed model call)
    other_read = [m for m in other["messages"] if isinstance(m, ToolMessage)][-1]
    assert "already read" not in other_read.content  # t1's read set did not leak into t2
    assert other["read_chunks"] == [cid]


def test_runs_as_a_subgraph_of_a_parent_graph(sample_index: Any) -> None:
    class Parent(TypedDict, total=False):
        messages: Annotated[list, add_messages]
        answer: str
        citations: list[str]
        visits: Annotated[int, operator.add]

    cid = first_chunk_id(sample_index)
    agent = build_arag_graph(
        sample_index, scripted(calls(tool_call("chunk_read", chunk_ids=[cid])), f"Answer: yes [{cid}]")
    )
    parent = StateGraph(Parent)
    parent.add_node("rag", agent)
    parent.add_node("after", lambda s: {"visits": 1})
    parent.add_edge(START, "rag")
    parent.add_edge("rag", "after")
    out = parent.compile().invoke({"messages": [HumanMessage("Is it?")]})
    assert out["answer"] == "yes" and out["citations"] == [cid] and out["visits"] == 1


def test_offline_policy_answers_with_citations_that_exist(sample_index: Any) -> None:
    graph = build_arag_graph(sample_index, "offline")
    out = graph.invoke({"question": "Who directed the film that was shot in or around Leland, North Carolina in 1986?"})
    assert out["answer"] and out["error"] is None
    assert out["citations"] and all(sample_index.get_chunk(c) for c in out["citations"])
    assert out["read_chunks"] and 0 < out["steps"] <= 15
    assert out["retrieved_tokens"] == sum(s["tokens"] for s in out["trajectory"])


def test_arag_naive_binds_one_search_that_returns_whole_chunks(sample_index: Any) -> None:
    model = scripted(calls(tool_call("semantic_search", query="Leland")), "Answer: Leland")
    out = build_arag_naive_graph(sample_index, model).invoke({"question": "Where?"})
    assert model.log[0]["kwargs"]["tools"] == ["semantic_search"]
    top = out["trajectory"][0]["chunk_ids"][0]
    assert sample_index.get_chunk(top).text in out["messages"][2].content
    assert top in out["read_chunks"]


@pytest.mark.parametrize(
    ("tools", "bound"),
    [
        ("no_keyword_search", ["semantic_search", "chunk_read"]),
        ("no_semantic_search", ["keyword_search", "chunk_read"]),
        ("no_chunk_read", ["keyword_search", "semantic_search"]),
    ],
)
def test_tool_ablations_bind_the_right_tools(sample_index: Any, tools: str, bound: list[str]) -> None:
    model = scripted("Answer: x")
    build_arag_graph(sample_index, model).invoke({"question": "Q?"}, context={"tools": tools})
    assert model.log[0]["kwargs"]["tools"] == bound
    system = model.log[0]["messages"][0].content
    assert ("chunk_read" in system) == ("chunk_read" in bound)


def test_hyde_embeds_a_hypothetical_passage_for_semantic_search(sample_index: Any) -> None:
    passage = "Maximum Overdrive is a 1986 film written and directed by Stephen King, shot in Leland."

    def reply(messages: Any, kwargs: dict[str, Any]) -> AIMessage:
        if "encyclopedia-style" in messages[-1].content:
            return AIMessage(passage)
        if any(m.type == "tool" for m in messages):
            return AIMessage("Answer: done")
        return calls(tool_call("semantic_search", query="who directed the film shot in Leland"))

    plain = ScriptedChatModel(messages=iter([]), reply=reply)
    hyde = ScriptedChatModel(messages=iter([]), reply=reply)
    without = build_arag_graph(sample_index, plain).invoke({"question": "Who directed it?"})
    with_hyde = build_arag_graph(sample_index, hyde).invoke({"question": "Who directed it?"}, context={"hyde": True})
    expected = [h.chunk_id for h in sample_index.semantic_search(passage, 5)]
    assert with_hyde["trajectory"][0]["chunk_ids"] == expected
    assert without["trajectory"][0]["chunk_ids"] != expected
    assert "query_vector" not in with_hyde["trajectory"][0]["args"]
    assert len(hyde.log) == len(plain.log) + 1  # one extra call wrote the passage


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_hyde_call_is_logged_and_counted_in_the_runs_warnings(
    sample_index: Any, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """HyDE refines the search, so its failure does not stop the run; it must not pass unseen either."""

    def reply(messages: Any, kwargs: dict[str, Any]) -> AIMessage:
        if "encyclopedia-style" in messages[-1].content:
            raise RuntimeError("hyde backend down")
        if any(m.type == "tool" for m in messages):
            return AIMessage("Answer: done")
        return calls(tool_call("semantic_search", query="who directed the film shot in Leland"))

    graph = build_arag_graph(sample_index, ScriptedChatModel(messages=iter([]), reply=reply))
    inputs, context = {"question": "Who directed it?"}, {"hyde": True}
    with caplog.at_level("WARNING", logger="arag_graph"):
        out = (
            graph.invoke(inputs, context=context)
            if mode == "sync"
            else asyncio.run(graph.ainvoke(inputs, context=context))
        )
    expected = [h.chunk_id for h in sample_index.semantic_search("who directed the film shot in Leland", 5)]
    assert out["trajectory"][0]["chunk_ids"] == expected and out["error"] is None  # searched with the query
    assert len(out["warnings"]) == 1 and "HyDE failed" in out["warnings"][0] and "step 1" in out["warnings"][0]
    assert any("HyDE failed" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
    # A run without the failure reports none.
    clean = build_arag_graph(sample_index, scripted(calls(tool_call("semantic_search", query="x")), "Answer: y"))
    assert clean.invoke(inputs, context=context | {"hyde": False})["warnings"] == []


# ---------------------------------------------------------------------------------------------
# Configuration reaching the model and the index


def test_system_prompt_override_replaces_the_built_in_one_in_every_request(sample_index: Any) -> None:
    """Agent and forced-synthesis requests alike start with the configured prompt, and only it."""
    override = "You are a terse test assistant. Cite chunk IDs in square brackets."

    def run(context: dict[str, Any]) -> ScriptedChatModel:
        model = scripted(calls(tool_call("keyword_search", keywords=["Leland"])), "Answer: Leland")
        build_arag_graph(sample_index, model).invoke({"question": "Where?"}, context={"max_steps": 1, **context})
        return model

    overridden, default = run({"system_prompt": override}), run({})
    assert len(overridden.log) == 2  # one agent request, then the synthesis forced at the cap
    assert overridden.log[1]["messages"][-1].content == SYNTHESIS_INSTRUCTION
    for request in overridden.log:
        systems = [m for m in request["messages"] if isinstance(m, SystemMessage)]
        assert [m.content for m in systems] == [override]
        assert request["messages"][0] is systems[0]
    built_in = agent_system_prompt(["keyword_search", "semantic_search", "chunk_read"])
    assert built_in != override
    assert [r["messages"][0].content for r in default.log] == [built_in, built_in]


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A one-passage index (real encoder) with a word the sample does not have."""
    from arag_graph.core.documents import SourceDocument
    from arag_graph.index.build import build_index

    passage = SourceDocument(
        "The Quillfeather Lighthouse stands on the island of Varnholm. It was built in 1871 by Edda Morrow.",
        id="quill",
        title="Quillfeather Lighthouse",
    )
    return build_index([passage], tmp_path_factory.mktemp("tiny") / "index", progress=False)


def _search_both_indexes() -> ScriptedChatModel:
    """A model that searches a word of each index once, then answers: the hits tell which index ran."""

    def reply(messages: Any, kwargs: dict[str, Any]) -> AIMessage:
        if any(isinstance(m, ToolMessage) for m in messages):
            return AIMessage("Answer: found")
        return calls(tool_call("keyword_search", keywords=["Quillfeather", "Leland"]))

    return ScriptedChatModel(messages=iter([]), reply=reply)


def test_index_path_comes_from_the_environment_unless_the_configuration_gives_one(
    sample_index: Any, tiny_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As arag_graph/served/arag.py serves it: built without an index, the run reads ``$ARAG_INDEX`` (at run
    time, not when the graph was built); ``index_path`` in the configuration wins over it."""
    from arag_graph.registry import build_graph

    graph = build_graph("arag", model=_search_both_indexes())  # no index, like arag_graph/served/arag.py
    monkeypatch.setenv("ARAG_INDEX", str(tiny_index.path))
    # Runs may name an index under the operator's root: here, the directory both test indexes are in.
    monkeypatch.setenv("ARAG_INDEX_ROOT", os.path.commonpath([tiny_index.path.resolve(), sample_index.path.resolve()]))

    from_env = graph.invoke({"question": "Which lighthouse?"})
    assert from_env["error"] is None
    assert from_env["trajectory"][0]["chunk_ids"] == ["quill"]
    assert "Quillfeather" in next(m for m in from_env["messages"] if isinstance(m, ToolMessage)).content

    configured = graph.invoke({"question": "Which town?"}, context={"index_path": str(sample_index.path)})
    assert configured["error"] is None
    hits = configured["trajectory"][0]["chunk_ids"]
    assert hits and "quill" not in hits
    assert all(sample_index.get_chunk(c) for c in hits)
    assert "Leland" in next(m for m in configured["messages"] if isinstance(m, ToolMessage)).content


@pytest.mark.parametrize("effort", ["low", "high"])
def test_reasoning_effort_reaches_agent_and_synthesis_requests(
    effort: str, sample_index: Any, openai_server: OpenAIStubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model spec string resolved by the graph itself (ChatOpenAI over HTTP): the configured effort
    is in the body of the tool-calling request and of the forced synthesis; without it, neither has one."""
    from arag_graph.llm import models

    monkeypatch.setenv("ARAG_MODEL_RETRIES", "0")
    graph = build_arag_graph(sample_index, "gpt-4o-mini")

    def run(context: dict[str, Any]) -> list[dict[str, Any]]:
        models._chat_openai.cache_clear()
        openai_server.script([stub_tool_call("keyword_search", {"keywords": ["Leland"]}), text("Answer: Leland")])
        start = len(openai_server.completions)
        out = graph.invoke({"question": "Where?"}, context={"base_url": openai_server.url, "max_steps": 1, **context})
        models._chat_openai.cache_clear()
        assert out["error"] is None and out["steps"] == 1 and out["answer"] == "Leland"
        bodies = [c.body for c in openai_server.completions[start:]]
        assert len(bodies) == 2
        assert bodies[0]["tools"] and "tools" not in bodies[1]  # agent request, then forced synthesis
        assert bodies[1]["messages"][-1]["content"] == SYNTHESIS_INSTRUCTION
        return bodies

    for body in run({"reasoning_effort": effort}):
        assert body["reasoning_effort"] == effort
        assert "temperature" not in body  # reasoning models take an effort instead
    for body in run({}):
        assert "reasoning_effort" not in body


def test_snippet_window_widens_each_matched_sentence(sample_index: Any) -> None:
    """ARAGOG's sentence window on A-RAG's snippets: each matched sentence with its neighbours."""

    def run(context: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        model = scripted(calls(tool_call("semantic_search", query="Leland North Carolina films")), "Answer: x")
        out = build_arag_graph(sample_index, model).invoke({"question": "Q?"}, context={"max_steps": 1, **context})
        message = next(m for m in out["messages"] if isinstance(m, ToolMessage))
        return message.content, out["trajectory"][0]

    plain, plain_step = run({})
    wide, wide_step = run({"snippet_window": 3})
    # A matched sentence whose neighbour did not match itself (with contextual headers, every
    # sentence of a chunk may match): the window shows that neighbour, A-RAG's own snippets do not.
    neighbours = []
    for hit in sample_index.semantic_search("Leland North Carolina films", 5):
        chunk = sample_index.get_chunk(hit.chunk_id)
        for position in hit.positions:
            near = [i for i in (position - 1, position + 1) if 0 <= i < len(chunk.sentences) and i not in hit.positions]
            neighbours += [chunk.sentence_texts()[i] for i in near]
    assert neighbours and all(n in wide for n in neighbours)
    assert not all(n in plain for n in neighbours)  # A-RAG's own snippets: the matched sentence alone
    assert wide_step["chunk_ids"] == plain_step["chunk_ids"]  # the same hits, wider snippets
    assert wide_step["tokens"] > plain_step["tokens"]
    with pytest.raises(AragError):
        run({"snippet_window": 0})
