"""The A-RAG agent graph: control flow with scripted models, state, async, streaming, checkpoints."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from arag_graph.agent import build_arag_graph, build_arag_naive_graph
from arag_graph.prompts import SYNTHESIS_INSTRUCTION
from arag_graph.tokens import count_tokens
from tests.scripted import FailingChatModel, ScriptedChatModel, calls, forever, scripted, tool_call

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
    assert other["read_chunks"] == [cid] or other["read_chunks"] == []


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
