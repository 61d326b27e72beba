"""Human review of the agent's tool calls (issue 37): ``approve_tools`` pauses the A-RAG agent with
``interrupt()`` before the calls of those tools run, carrying each call's name and arguments in
LangChain's ``HumanInTheLoopMiddleware`` shape; ``Command(resume=...)`` approves a call, edits its
arguments (the edited call is the one that runs) or rejects it with a message the model reads.
Checked in-process with a checkpointer, inside a parent graph, and in ``arag ask`` (a prompt on a
terminal, refused in one line without one); tests/slow/test_studio_edit_state.py does it through the
SDK against ``langgraph dev``. No graph called ``interrupt()`` before: only static
``interrupt_before`` paused a run.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from arag_graph.arag.graph import build_arag_graph, build_arag_naive_graph
from arag_graph.core.errors import AragError
from arag_graph.index.hierarchical import HierarchicalIndex
from tests.cli_run import assert_one_error_line, run_cli

pytestmark = pytest.mark.integration

QUESTION = "Who directed Maximum Overdrive?"
EDITED = "Stephen King director films"


def _run(index: HierarchicalIndex, thread: str, **context: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    graph = build_arag_graph(index, "offline", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": thread}}
    context = {"max_steps": 3, **context}
    return graph, config, graph.invoke({"question": QUESTION}, config, context=context)


def _tool_messages(out: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


def test_the_pause_names_each_call_and_its_arguments(sample_index: HierarchicalIndex) -> None:
    graph, config, out = _run(sample_index, "shape", approve_tools="all")
    (paused,) = out["__interrupt__"]
    pending = graph.get_state(config)
    assert pending.next == ("approve",)
    reply = pending.values["messages"][-1]
    assert isinstance(reply, AIMessage) and reply.tool_calls
    request = paused.value
    assert [(a["name"], a["args"], a["id"]) for a in request["action_requests"]] == [
        (c["name"], c["args"], c["id"]) for c in reply.tool_calls
    ]
    assert request["review_configs"] == [
        {"action_name": c["name"], "allowed_decisions": ["approve", "edit", "reject"]} for c in reply.tool_calls
    ]
    assert not any(isinstance(m, ToolMessage) for m in pending.values["messages"])  # nothing ran yet


def test_approve_edit_and_reject(sample_index: HierarchicalIndex) -> None:
    graph, config, out = _run(sample_index, "decide", approve_tools="all")
    context = {"max_steps": 3, "approve_tools": "all"}
    first = out["__interrupt__"][0].value["action_requests"][0]
    out = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, context=context)
    second = out["__interrupt__"][0].value["action_requests"][0]
    assert second["name"] == "semantic_search"
    edit = {"type": "edit", "edited_action": {"name": "semantic_search", "args": {**second["args"], "query": EDITED}}}
    out = graph.invoke(Command(resume={"decisions": [edit]}), config, context=context)
    third = out["__interrupt__"][0].value["action_requests"][0]
    reason = "do not read chunks yet; search for the director first"
    out = graph.invoke(Command(resume=[{"type": "reject", "message": reason}]), config, context=context)
    while "__interrupt__" in out:
        out = graph.invoke(Command(resume="approve"), config, context=context)

    ran = _tool_messages(out)
    assert ran[first["id"]].artifact["args"]["keywords"] == first["args"]["keywords"]  # approved: ran as asked
    assert ran[second["id"]].artifact["args"]["query"] == EDITED  # edited: the edited call ran
    shown = next(
        m for m in out["messages"] if isinstance(m, AIMessage) and any(c["id"] == second["id"] for c in m.tool_calls)
    )
    assert (
        next(c for c in shown.tool_calls if c["id"] == second["id"])["args"]["query"] == EDITED
    )  # as the model sees it
    rejected = ran[third["id"]]
    assert rejected.status == "error" and reason in rejected.text and rejected.artifact.get("not_run")
    # The model read the rejection: the next model turn came after it, and the run still answered.
    after = out["messages"].index(rejected)
    assert any(isinstance(m, AIMessage) for m in out["messages"][after + 1 :])
    assert out.get("error") is None and out["answer"].strip()
    assert out["steps"] == len([m for m in ran.values() if not m.artifact.get("not_run")])  # a rejection is no step


def test_only_the_named_tools_pause(sample_index: HierarchicalIndex) -> None:
    graph, config, out = _run(sample_index, "named", approve_tools=["chunk_read"])
    (paused,) = out["__interrupt__"]
    assert [a["name"] for a in paused.value["action_requests"]] == ["chunk_read"]
    ran = [m.name for m in graph.get_state(config).values["messages"] if isinstance(m, ToolMessage)]
    assert ran and "chunk_read" not in ran  # the searches before it ran without a review


def test_a_malformed_answer_asks_again(sample_index: HierarchicalIndex) -> None:
    graph, config, out = _run(sample_index, "again", approve_tools="keyword_search")
    context = {"max_steps": 3, "approve_tools": "keyword_search"}
    out = graph.invoke(Command(resume={"decisions": [{"type": "maybe"}]}), config, context=context)
    (asked,) = out["__interrupt__"]
    assert asked.value["problem"] == "decision 1 is \"{'type': 'maybe'}\"; give {'type': 'approve' | 'edit' | 'reject'}"
    out = graph.invoke(Command(resume={"decisions": [{"type": "edit"}]}), config, context=context)
    assert "edits without arguments" in out["__interrupt__"][0].value["problem"]
    out = graph.invoke(Command(resume={"decisions": []}), config, context=context)
    assert "answers 1 call(s) with 0 decision(s)" in out["__interrupt__"][0].value["problem"]
    out = graph.invoke(Command(resume={"decisions": ["approve"]}), config, context=context)
    while "__interrupt__" in out:
        out = graph.invoke(Command(resume="approve"), config, context=context)
    assert out.get("error") is None and out["answer"]


def test_a_run_that_cannot_pause_is_refused_before_any_call(sample_index: HierarchicalIndex) -> None:
    plain = build_arag_graph(sample_index, "offline").invoke({"question": QUESTION}, context={"approve_tools": "all"})
    assert plain["error"].startswith("approve_tools pauses the run for a review, which needs a thread")
    assert "checkpointer=InMemorySaver()" in plain["error"] and not plain.get("steps")
    _, _, typo = _run(sample_index, "typo", approve_tools="chunk_reed")
    assert typo["error"] == (
        "approve_tools names 'chunk_reed', which is no tool of this run; "
        "choose from all, chunk_read, keyword_search, semantic_search"
    )
    naive = build_arag_naive_graph(sample_index, "offline", checkpointer=InMemorySaver())
    out = naive.invoke({"question": QUESTION}, {"configurable": {"thread_id": "n"}}, context={"approve_tools": "all"})
    assert [a["name"] for a in out["__interrupt__"][0].value["action_requests"]] == ["semantic_search"]


class Parent(TypedDict, total=False):
    question: str
    answer: str
    rag: dict[str, Any]


@pytest.mark.parametrize("embedding", ["subgraph", "as_node"])
def test_in_a_parent_graph(sample_index: HierarchicalIndex, embedding: str) -> None:
    """The agent in a parent graph (the parent's checkpointer), added as it is or through
    ``arag_graph.run.subgraph.as_node``: the pause reaches the parent's caller, the parent's resume
    reaches the agent, and the edited call is the one that ran."""
    from arag_graph.run.subgraph import as_node

    agent = build_arag_graph(sample_index, "offline")
    context = {"max_steps": 2, "approve_tools": "semantic_search"}
    parent = StateGraph(Parent)
    if embedding == "subgraph":
        parent.add_node("rag", agent)
    else:
        parent.add_node("rag", as_node(agent, question="question", output="rag", answer="answer", context=context))
    parent.add_edge(START, "rag")
    parent.add_edge("rag", END)
    app = parent.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"parent-{embedding}"}}
    run_context = context if embedding == "subgraph" else None
    out = app.invoke({"question": QUESTION}, config, context=run_context)
    (paused,) = out["__interrupt__"]
    (request,) = paused.value["action_requests"]
    edit = {"type": "edit", "edited_action": {"name": "semantic_search", "args": {**request["args"], "query": EDITED}}}
    out = app.invoke(Command(resume={"decisions": [edit]}), config, context=run_context)
    while "__interrupt__" in out:
        out = app.invoke(Command(resume="approve"), config, context=run_context)
    assert out["answer"].strip()
    if embedding == "as_node":
        ran = [s["args"].get("query") for s in out["rag"]["trajectory"] if s["tool"] == "semantic_search"]
        assert ran[0] == EDITED


# ---------------------------------------------------------------------------------------------
# arag ask --approve


class Terminal(io.StringIO):
    """Typed answers on a terminal's stdin."""

    def isatty(self) -> bool:
        return True


def _ask(sample_index: HierarchicalIndex, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    argv = ["ask", QUESTION, "--index", str(sample_index.path), "--model", "offline", "--max-steps", "3", *extra]
    return run_cli(argv, capsys)


def test_arag_ask_asks_on_the_terminal(
    sample_index: HierarchicalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # approve the search, edit the next one (a bad JSON first), reject the read with a message
    typed = ["a", "e", "{not json", json.dumps({"query": EDITED}), "r", "not this chunk", *["a"] * 10]
    monkeypatch.setattr("sys.stdin", Terminal("\n".join(typed) + "\n"))
    code, out, err = _ask(sample_index, capsys, "--approve", "all", "--json")
    assert code == 0, err
    record = json.loads(out)
    assert record["answer"] and err.count("review ") >= 3
    assert "not JSON" in err and "[a]pprove, [e]dit, [r]eject?" in err
    queries = [s["args"].get("query") for s in record["trajectory"] if s["tool"] == "semantic_search"]
    assert queries[0] == EDITED


def test_arag_ask_without_a_terminal_is_refused_in_one_line(
    sample_index: HierarchicalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("a\n"))
    line = assert_one_error_line(*_ask(sample_index, capsys, "--approve", "all"))
    assert "--approve asks you about each tool call on the terminal, and stdin is not one" in line
    line = assert_one_error_line(*_ask(sample_index, capsys, "--approve", "all", "--graph", "corag"))
    assert "the graph corag makes none" in line
    line = assert_one_error_line(*_ask(sample_index, capsys, "--set", "approve_tools=all"))
    assert "use --approve" in line


def test_arag_ask_refuses_tools_the_run_does_not_have(
    sample_index: HierarchicalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(""))
    line = assert_one_error_line(*_ask(sample_index, capsys, "--approve", "chunk_read,keyword_serch"))
    assert line == (
        "arag: error: --approve names 'keyword_serch', which is no tool of this run; "
        "choose from all, chunk_read, keyword_search, semantic_search"
    )
    line = assert_one_error_line(*_ask(sample_index, capsys, "--approve", "chunk_read", "--set", "tools=no_chunk_read"))
    assert "--approve names 'chunk_read', which is no tool of this run" in line
    line = assert_one_error_line(*_ask(sample_index, capsys, "--approve", "chunk_read", "--graph", "arag_naive"))
    assert line.endswith("choose from all, semantic_search")
    line = assert_one_error_line(*_ask(sample_index, capsys, "--approve", " , "))
    assert "--approve names no tool" in line


def test_arag_ask_stops_when_the_input_ends(
    sample_index: HierarchicalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal("a\n"))  # one answer, then the end of input
    code, out, err = _ask(sample_index, capsys, "--approve", "all", "--json")
    assert code != 0 and out == "" and "Traceback" not in err
    assert err.splitlines()[-1].startswith("arag: error: the review ended with the input (end of file)")


# ---------------------------------------------------------------------------------------------
# The operator's reviews, answers that are wrong, several threads


def _resume(graph: Any, config: dict[str, Any], answer: Any, **context: Any) -> dict[str, Any]:
    return graph.invoke(Command(resume=answer), config, context={"max_steps": 3, **context})


def _approve_to_the_end(graph: Any, config: dict[str, Any], out: dict[str, Any], **context: Any) -> dict[str, Any]:
    for _ in range(10):
        if "__interrupt__" not in out:
            return out
        out = _resume(graph, config, "approve", **context)
    raise AssertionError("still paused after ten approvals")


def test_the_operator_reviews_whatever_the_caller_asks(
    sample_index: HierarchicalIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The builder's ``approve_tools`` and, for a caller's context, ``ARAG_APPROVE_TOOLS``: a run's
    own ``approve_tools`` (empty here) adds to them and cannot lift them."""
    from arag_graph.arag.context import AragContext

    fixed = build_arag_graph(sample_index, "offline", checkpointer=InMemorySaver(), approve_tools=["chunk_read"])
    config = {"configurable": {"thread_id": "builder"}}
    out = fixed.invoke({"question": QUESTION}, config, context={"max_steps": 3, "approve_tools": []})
    assert [a["name"] for a in out["__interrupt__"][0].value["action_requests"]] == ["chunk_read"]

    monkeypatch.setenv("ARAG_APPROVE_TOOLS", "semantic_search")
    graph, config, out = _run(sample_index, "served", approve_tools=[])
    assert [a["name"] for a in out["__interrupt__"][0].value["action_requests"]] == ["semantic_search"]
    # The operator's own context (the CLI, AragContext.trusted) is not a served run's: no review.
    mine = AragContext.trusted(max_steps=3)
    out = graph.invoke({"question": QUESTION}, {"configurable": {"thread_id": "mine"}}, context=mine)
    assert "__interrupt__" not in out and out["answer"]

    # One server, several graphs: a tool only arag has is no review (and no error) in arag_naive.
    monkeypatch.setenv("ARAG_APPROVE_TOOLS", "chunk_read")
    naive = build_arag_naive_graph(sample_index, "offline").invoke({"question": QUESTION}, context={"max_steps": 2})
    assert naive.get("error") is None and naive["answer"]

    monkeypatch.setenv("ARAG_APPROVE_TOOLS", "chunk_reed")
    _, _, out = _run(sample_index, "served-typo")
    assert out["error"].startswith("ARAG_APPROVE_TOOLS (the server's environment) names 'chunk_reed', which is no")
    with pytest.raises(AragError, match=r"^approve_tools names 'chunk_reed', which is no tool of this run; choose"):
        build_arag_graph(sample_index, "offline", approve_tools=["chunk_reed"])


def test_a_call_that_skipped_its_review_is_not_run(sample_index: HierarchicalIndex) -> None:
    """The tool node checks too: a state edited so that the edge skips the review (Studio's
    ``update_state``) does not run the call; the model reads why."""
    graph = build_arag_graph(sample_index, "offline", checkpointer=InMemorySaver(), approve_tools=["chunk_read"])
    config = {"configurable": {"thread_id": "skip"}}
    out = graph.invoke({"question": QUESTION}, config, context={"max_steps": 3})
    (request,) = out["__interrupt__"][0].value["action_requests"]
    graph.update_state(config, {"approve": []})
    out = graph.invoke(None, config, context={"max_steps": 3})
    out = _approve_to_the_end(graph, config, out)
    skipped = _tool_messages(out)[request["id"]]
    assert skipped.status == "error" and "needs a person's review before it runs and had none" in skipped.text
    assert skipped.artifact.get("not_run") and out["answer"]


def test_wrong_answers_pause_again_saying_what_to_fix(sample_index: HierarchicalIndex) -> None:
    graph, config, out = _run(sample_index, "wrong", approve_tools="keyword_search")
    (call,) = out["__interrupt__"][0].value["action_requests"]
    problems = {
        "a int": 42,
        "decision 1 is 'yes'": {"decisions": "yes"},
        "keywords": {"type": "edit", "edited_action": {"name": "keyword_search", "args": {"top_k": 2}}},
        "an edit keeps the tool": {"type": "edit", "edited_action": {"name": "chunk_read", "args": {"chunk_ids": []}}},
        "decision 1 is '7'": [7],
    }
    for expected, answer in problems.items():
        out = _resume(graph, config, answer, approve_tools="keyword_search")
        (asked,) = out["__interrupt__"]
        assert expected in asked.value["problem"] and "\n" not in asked.value["problem"], (answer, asked.value)
        assert asked.value["action_requests"][0]["id"] == call["id"]  # the same call, asked again
    # Variants the tool itself accepts pass: a string top_k, a single keyword.
    edit = {
        "type": "edit",
        "edited_action": {"name": "keyword_search", "args": {"keywords": "Overdrive", "top_k": "2"}},
    }
    out = _approve_to_the_end(
        graph, config, _resume(graph, config, {"decisions": [edit]}), approve_tools="keyword_search"
    )
    ran = _tool_messages(out)[call["id"]]
    assert ran.artifact["args"] == {"keywords": "Overdrive", "top_k": "2"} and not ran.artifact["error"]
    assert len(ran.artifact["chunk_ids"]) == 2  # run as the model's call would be: top_k read as 2


def test_agent_inbox_answers(sample_index: HierarchicalIndex) -> None:
    """The older agent-inbox decisions: ``accept``, ``response`` (a message for the model), ``ignore``."""
    graph, config, out = _run(sample_index, "inbox", approve_tools="all")
    first = out["__interrupt__"][0].value["action_requests"][0]
    out = _resume(graph, config, [{"type": "accept", "args": None}], approve_tools="all")
    second = out["__interrupt__"][0].value["action_requests"][0]
    out = _resume(graph, config, [{"type": "response", "args": "search for the film instead"}], approve_tools="all")
    out = _approve_to_the_end(graph, config, out, approve_tools="all")
    ran = _tool_messages(out)
    assert not ran[first["id"]].artifact.get("not_run")
    assert "search for the film instead" in ran[second["id"]].text and ran[second["id"]].artifact.get("not_run")


def test_threads_pause_and_resume_apart(sample_index: HierarchicalIndex) -> None:
    """Two threads paused at once: each resume reaches its own thread only, also through another
    graph object on the same checkpointer (a restarted server)."""
    saver = InMemorySaver()
    context = {"max_steps": 3, "approve_tools": ["keyword_search"]}
    graph = build_arag_graph(sample_index, "offline", checkpointer=saver)
    one, two = ({"configurable": {"thread_id": name}} for name in ("one", "two"))
    calls = {}
    for config in (one, two):
        out = graph.invoke({"question": QUESTION}, config, context=context)
        calls[config["configurable"]["thread_id"]] = out["__interrupt__"][0].value["action_requests"][0]["id"]
    later = build_arag_graph(sample_index, "offline", checkpointer=saver)
    out_two = later.invoke(Command(resume=[{"type": "reject", "message": "not in thread two"}]), two, context=context)
    assert graph.get_state(one).next == ("approve",)  # thread one is still waiting
    out_one = graph.invoke(Command(resume="approve"), one, context=context)
    out_one = _approve_to_the_end(graph, one, out_one, approve_tools=["keyword_search"])
    out_two = _approve_to_the_end(later, two, out_two, approve_tools=["keyword_search"])
    assert not _tool_messages(out_one)[calls["one"]].artifact.get("not_run")
    assert "not in thread two" in _tool_messages(out_two)[calls["two"]].text
    assert out_one["answer"] and out_two["answer"]


async def test_the_async_path_a_server_takes(sample_index: HierarchicalIndex) -> None:
    """``ainvoke`` (how LangGraph's server runs a graph): the pause, an edit, the edited call run
    through the tool node's async guard."""
    graph = build_arag_graph(sample_index, "offline", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "async"}}
    context = {"max_steps": 3, "approve_tools": ["semantic_search"]}
    out = await graph.ainvoke({"question": QUESTION}, config, context=context)
    (request,) = out["__interrupt__"][0].value["action_requests"]
    edit = {"type": "edit", "edited_action": {"name": "semantic_search", "args": {**request["args"], "query": EDITED}}}
    out = await graph.ainvoke(Command(resume={"decisions": [edit]}), config, context=context)
    while "__interrupt__" in out:
        out = await graph.ainvoke(Command(resume="approve"), config, context=context)
    assert _tool_messages(out)[request["id"]].artifact["args"]["query"] == EDITED and out["answer"]
