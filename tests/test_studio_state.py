"""Studio's debugging moves from the library: edit a thread's state, edit a pending tool call, fork.

Studio's "edit state" and "fork" call ``update_state``, which runs the edges leaving ``as_node``
without a runtime (upstream langgraph issue 6340): an edge that reads the run's context fails there
with ``Missing required config key 'N/A'``. Every registered graph is driven through
``update_state`` at an interrupt and on a finished thread, as every node it has.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from arag_graph.registry import GRAPHS, build_graph

pytestmark = pytest.mark.integration

QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
AGENTS = ("arag", "arag_naive")


def _graph(name: str, sample_index: Any) -> Any:
    return build_graph(name, index=sample_index, model="offline", checkpointer=InMemorySaver())


def _ran(graph: Any, config: dict[str, Any]) -> list[str]:
    """The nodes that ran on the thread: those Studio offers to edit the state as."""
    ran = {n for s in graph.get_state_history(config) for n in s.next}
    return sorted(ran & set(graph.builder.nodes))


@pytest.mark.parametrize("name", list(GRAPHS))
def test_update_state_as_every_node_that_ran_on_a_finished_thread(name: str, sample_index: Any) -> None:
    graph = _graph(name, sample_index)
    config = {"configurable": {"thread_id": f"{name}-finished"}}
    out = graph.invoke({"question": QUESTION}, config)
    assert out.get("error") is None and out["answer"]
    nodes = _ran(graph, config)
    assert {"start", "finish"} <= set(nodes)
    for node in nodes:
        updated = graph.update_state(config, {"answer": f"edited as {node}"}, as_node=node)
        assert updated["configurable"]["checkpoint_id"], node
        assert graph.get_state(config).values["answer"] == f"edited as {node}"


@pytest.mark.parametrize("name", list(GRAPHS))
def test_update_state_at_an_interrupt_then_resume(name: str, sample_index: Any) -> None:
    """Interrupted before its first node after ``start`` (``tools`` for the agents), edited, resumed."""
    graph = _graph(name, sample_index)
    config = {"configurable": {"thread_id": f"{name}-interrupt"}}
    stop = "tools" if name in AGENTS else "finish"
    graph.invoke({"question": QUESTION}, config, interrupt_before=[stop])
    state = graph.get_state(config)
    assert state.next == (stop,)
    last_writer = "agent" if name in AGENTS else None  # None: LangGraph takes the node that wrote last
    graph.update_state(config, {"answer": ""}, as_node=last_writer)
    assert graph.get_state(config).next == (stop,)
    out = graph.invoke(None, config)
    assert out.get("error") is None and out["answer"].strip()


@pytest.mark.parametrize("name", ["srag", "arag", "corag"])
def test_update_state_as_start_on_a_new_thread(name: str, sample_index: Any) -> None:
    """Studio's state editor on a thread that has not run yet (srag's router decision came from context)."""
    graph = _graph(name, sample_index)
    config = {"configurable": {"thread_id": f"{name}-new"}}
    graph.update_state(config, {"question": QUESTION}, as_node="start")
    assert graph.get_state(config).next


@pytest.mark.parametrize("name", AGENTS)
def test_an_edited_pending_tool_call_runs_as_edited(name: str, sample_index: Any) -> None:
    graph = _graph(name, sample_index)
    config = {"configurable": {"thread_id": f"{name}-edit"}}
    graph.invoke({"question": QUESTION}, config, interrupt_before=["tools"], context={"max_steps": 2})
    reply = graph.get_state(config).values["messages"][-1]
    assert isinstance(reply, AIMessage) and reply.tool_calls
    call = reply.tool_calls[0]
    edited_query = "Blue Velvet film director"
    edited = reply.model_copy(update={"tool_calls": [{**call, "args": {**call["args"], "query": edited_query}}]})
    graph.update_state(config, {"messages": [edited]}, as_node="agent")
    assert graph.get_state(config).values["messages"][-1].tool_calls[0]["args"]["query"] == edited_query

    out = graph.invoke(None, config, context={"max_steps": 2})
    assert out.get("error") is None and out["answer"].strip()
    results = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == call["id"]]
    assert len(results) == 1
    assert results[0].artifact["args"]["query"] == edited_query  # the edited call is the one that ran
    assert out["steps"] == 2  # the run's own limit still holds after the edit


def test_forking_from_a_checkpoint_runs_a_new_branch(sample_index: Any) -> None:
    graph = _graph("arag", sample_index)
    config = {"configurable": {"thread_id": "arag-fork"}}
    first = graph.invoke({"question": QUESTION}, config, context={"max_steps": 3})
    assert first["steps"] == 3
    # The checkpoint where the first tool call was pending: fork there with another call.
    before_tools = [s for s in graph.get_state_history(config) if s.next == ("tools",)][-1]
    reply = before_tools.values["messages"][-1]
    call = reply.tool_calls[0]
    fork_call = {**call, "name": "keyword_search", "args": {"keywords": ["Leland"]}}
    forked = graph.update_state(
        before_tools.config, {"messages": [reply.model_copy(update={"tool_calls": [fork_call]})]}, as_node="agent"
    )
    assert forked["configurable"]["checkpoint_id"] != before_tools.config["configurable"]["checkpoint_id"]
    out = graph.invoke(None, forked, context={"max_steps": 3})
    assert out.get("error") is None and out["answer"].strip()
    ran = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == call["id"]]
    assert [m.name for m in ran] == ["keyword_search"]
    # The original branch is still there, unchanged.
    history = list(graph.get_state_history(config))
    assert any(s.values.get("answer") == first["answer"] for s in history)


# Every registered graph, and CoRAG in each decoding (their threads hold different state).
VARIANTS = [(name, {}) for name in GRAPHS] + [
    ("corag", {"decoding": "best_of_n", "n": 2}),
    ("corag", {"decoding": "tree"}),
]


@pytest.mark.parametrize(("name", "context"), VARIANTS, ids=[f"{n}-{c.get('decoding', '')}" for n, c in VARIANTS])
def test_update_state_as_every_node_then_continue(name: str, context: dict[str, Any], sample_index: Any) -> None:
    """Studio offers every node of the graph to edit as, whether it ran on the thread or not (a greedy
    CoRAG thread edited as ``collect`` was a KeyError in the edge's path map, HTTP 500 from the server).
    Each edit forks the finished thread's last checkpoint; the run then goes on from the edit to the end."""
    graph = _graph(name, sample_index)
    config = {"configurable": {"thread_id": f"{name}-every-node-{context.get('decoding', '')}"}}
    out = graph.invoke({"question": QUESTION}, config, context={"max_steps": 2, **context})
    assert out.get("error") is None and out["answer"]
    finished = graph.get_state(config).config
    nodes = list(graph.builder.nodes)
    assert len(nodes) >= 3
    for node in nodes:
        edited = graph.update_state(finished, {"answer": f"edited as {node}"}, as_node=node)
        resumed = graph.invoke(None, edited, context={"max_steps": 2, **context})
        assert resumed.get("error") is None, (node, resumed.get("error"))
        assert resumed["answer"].strip(), node
        assert not graph.get_state(config).next, node  # the continued run (the latest checkpoint) reached the end
