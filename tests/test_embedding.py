"""The tools and graphs embedded in other LangChain / LangGraph apps, through their real entry points.

- one set of tools, made once, inside ``create_agent`` (langchain 1.x), ``create_react_agent`` and a
  hand-built ``ToolNode`` graph, with a checkpointer and several threads: each thread has its own
  read-chunk set, and a chunk read earlier in a thread is "already read" later in that thread;
- the compiled ``arag`` graph inside a parent ``StateGraph`` that has its own state and its own
  context schema: added directly as a node, and through :func:`arag_graph.run.subgraph.as_node`, whose
  outputs never collide with the parent's keys and whose failures surface.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from arag_graph.arag.graph import build_arag_graph
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.run.subgraph import SubgraphRunError, as_node
from arag_graph.tools.toolkit import create_retrieval_tools
from tests.scripted import FailingChatModel, ScriptedChatModel, calls, tool_call

CHUNK = "46"


def reader(chunk: str = CHUNK) -> ScriptedChatModel:
    """A model that reads ``chunk`` once per question, then answers with what the tool said."""

    def reply(messages: Sequence[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(f"Answer: done [{chunk}]")
        return calls(tool_call("chunk_read", chunk_ids=[chunk]))

    return ScriptedChatModel(messages=iter([]), reply=reply)


def last_tool_text(messages: Sequence[AnyMessage]) -> str:
    return next(m for m in reversed(messages) if isinstance(m, ToolMessage)).text


def check_threads(agent: Any, index: HierarchicalIndex) -> None:
    """Two threads read the same chunk: both get its text; a second question on a thread does not."""
    text = index.get_chunk(CHUNK).text  # type: ignore[union-attr]
    first = agent.invoke({"messages": [HumanMessage("Q1?")]}, {"configurable": {"thread_id": "a"}})
    assert text in last_tool_text(first["messages"])
    other = agent.invoke({"messages": [HumanMessage("Q1?")]}, {"configurable": {"thread_id": "b"}})
    assert text in last_tool_text(other["messages"]), "a new thread must not inherit another thread's reads"
    again = agent.invoke({"messages": [HumanMessage("Q2?")]}, {"configurable": {"thread_id": "a"}})
    assert "already read" in last_tool_text(again["messages"]) and text not in last_tool_text(again["messages"])


TOOLS_MADE_ONCE: dict[str, Any] = {}


def tools_for(index: HierarchicalIndex) -> list[Any]:
    """The tools, made once (as an app would at import) and shared by every agent and thread below."""
    if "tools" not in TOOLS_MADE_ONCE:
        TOOLS_MADE_ONCE["tools"] = create_retrieval_tools(index)
    return TOOLS_MADE_ONCE["tools"]


def test_create_agent_keeps_each_threads_read_set(sample_index: HierarchicalIndex) -> None:
    from langchain.agents import create_agent

    agent = create_agent(reader(), tools_for(sample_index), checkpointer=InMemorySaver())
    check_threads(agent, sample_index)


def test_create_react_agent_keeps_each_threads_read_set(sample_index: HierarchicalIndex) -> None:
    import warnings

    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # superseded by create_agent, still widely used
        agent = create_react_agent(reader(), tools_for(sample_index), checkpointer=InMemorySaver())
    check_threads(agent, sample_index)


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def test_a_hand_built_tool_node_graph_keeps_each_threads_read_set(sample_index: HierarchicalIndex) -> None:
    model = reader()
    tools = tools_for(sample_index)

    def chat(state: ChatState) -> dict[str, Any]:
        return {"messages": [model.bind_tools(tools).invoke(state["messages"])]}

    builder = StateGraph(ChatState)
    builder.add_node("chat", chat)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "chat")
    builder.add_conditional_edges("chat", tools_condition)
    builder.add_edge("tools", "chat")
    check_threads(builder.compile(checkpointer=InMemorySaver()), sample_index)


def test_the_arag_graph_itself_keeps_each_threads_read_set(sample_index: HierarchicalIndex) -> None:
    check_threads(build_arag_graph(sample_index, reader(), checkpointer=InMemorySaver()), sample_index)


# ---------------------------------------------------------------------------------------------
# A parent app with its own state and context


class ParentCtx(BaseModel):
    """The parent's own context schema, nothing like arag's."""

    user_id: str = Field(default="u1", description="who asks")
    top_k: str = Field(default="lots", description="a parent field that shares a name, not a meaning")


class ParentState(TypedDict, total=False):
    question: str
    messages: Annotated[list[AnyMessage], add_messages]
    steps: list[str]
    rag: dict[str, Any]
    answer: str
    log: list[str]


def after(state: ParentState, runtime: Runtime[ParentCtx]) -> dict[str, Any]:
    """The parent's next node: it relies on its own ``steps`` being a list of strings."""
    return {
        "steps": [*state.get("steps", []), "rag done"],
        "log": [f"{runtime.context.user_id}: {state.get('answer')}"],
    }


def parent_with(node: Any) -> Any:
    builder = StateGraph(ParentState, context_schema=ParentCtx)
    builder.add_node("rag", node)
    builder.add_node("after", after)
    builder.add_edge(START, "rag")
    builder.add_edge("rag", "after")
    builder.add_edge("after", END)
    return builder.compile()


def answering(chunk: str = CHUNK) -> ScriptedChatModel:
    return ScriptedChatModel(
        messages=iter([calls(tool_call("chunk_read", chunk_ids=[chunk])), f"Answer: Bob [{chunk}]"])
    )


def test_the_graph_as_a_plain_node_ignores_the_parents_context(sample_index: HierarchicalIndex) -> None:
    """Added directly, the subgraph runs under the parent's context object: not its own, so ignored."""
    builder = StateGraph(ParentState, context_schema=ParentCtx)
    builder.add_node("rag", build_arag_graph(sample_index, answering()))
    builder.add_edge(START, "rag")
    builder.add_edge("rag", END)
    out = builder.compile().invoke({"question": "Who?"}, context=ParentCtx())
    assert out["answer"] == "Bob"


def test_as_node_maps_one_question_to_one_result_key(sample_index: HierarchicalIndex) -> None:
    node = as_node(build_arag_graph(sample_index, answering()), output="rag", answer="answer", context={"max_steps": 3})
    start = {"question": "Who?", "steps": ["asked"], "messages": [HumanMessage("hi")]}
    out = parent_with(node).invoke(start, context=ParentCtx(user_id="ann"))
    assert out["steps"] == ["asked", "rag done"]  # the parent's own steps, untouched by the subgraph's count
    assert out["messages"] == [HumanMessage("hi", id=out["messages"][0].id)]  # no tool transcript in the parent
    assert out["answer"] == "Bob" and out["log"] == ["ann: Bob"]
    assert out["rag"]["citations"] == [CHUNK] and out["rag"]["steps"] == 1 and out["rag"]["error"] is None
    assert out["rag"]["read_chunks"] == [CHUNK] and out["rag"]["retrieved_tokens"] > 0


def test_as_node_takes_settings_from_the_parents_runtime(sample_index: HierarchicalIndex) -> None:
    model = ScriptedChatModel(messages=iter([calls(tool_call("semantic_search", query="Leland")), "Answer: x"]))
    node = as_node(build_arag_graph(sample_index, model), context=lambda runtime: {"top_k": 2})
    out = parent_with(node).invoke({"question": "Where?"}, context=ParentCtx())
    assert out["rag"]["trajectory"][0]["args"]["top_k"] == 2


def test_a_failed_subgraph_run_fails_the_parent_visibly(sample_index: HierarchicalIndex) -> None:
    graph = build_arag_graph(sample_index, FailingChatModel(messages=iter([])))
    with pytest.raises(SubgraphRunError, match="model call failed"):
        parent_with(as_node(graph)).invoke({"question": "Who?"}, context=ParentCtx())
    recorded = parent_with(as_node(graph, on_error="record")).invoke({"question": "Who?"}, context=ParentCtx())
    assert "model call failed" in recorded["rag"]["error"] and recorded["steps"] == ["rag done"]
    with pytest.raises(SubgraphRunError, match="parent key 'question' gave no question text"):
        parent_with(as_node(graph)).invoke({"steps": []}, context=ParentCtx())


def test_as_node_runs_async_too(sample_index: HierarchicalIndex) -> None:
    node = as_node(build_arag_graph(sample_index, answering()), answer="answer")
    out = asyncio.run(parent_with(node).ainvoke({"question": "Who?"}, context=ParentCtx()))
    assert out["answer"] == "Bob" and out["rag"]["steps"] == 1
