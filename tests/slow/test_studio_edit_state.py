"""Studio's edit-state and fork through ``langgraph dev``: the SDK's ``threads.update_state``.

Studio's edit button posts the new values to ``/threads/{id}/state`` with ``as_node``; the server runs
the edges leaving that node without a runtime, so an edge that read the run's context answered
HTTP 400 (``Missing required config key 'N/A'``). Checked: editing a pending tool call at an
interrupt, resuming so that the edited call runs, editing a finished thread, and forking from an
earlier checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.slow.devserver import DevServer

# One worker runs every module that uses the session's server (tests/slow/conftest.py), which starts once.
pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.xdist_group("langgraph-dev")]

REPO = Path(__file__).resolve().parents[2]
QUESTION = json.loads((REPO / "arag_graph" / "data" / "sample" / "questions.json").read_text(encoding="utf-8"))[0][
    "question"
]
EDITED_QUERY = "Maximum Overdrive director"


def _tool_results(values: dict[str, Any], call_id: str) -> list[dict[str, Any]]:
    return [m for m in values["messages"] if m["type"] == "tool" and m["tool_call_id"] == call_id]


@pytest.mark.parametrize("graph_id", ["arag", "arag_naive"])
def test_edit_a_pending_tool_call_then_resume(dev_server: DevServer, graph_id: str) -> None:
    client = dev_server.client()
    with dev_server.log_on_failure():
        thread = client.threads.create()["thread_id"]
        client.runs.wait(
            thread, graph_id, input={"question": QUESTION}, context={"max_steps": 2}, interrupt_before=["tools"]
        )
        state = client.threads.get_state(thread)
        assert state["next"] == ["tools"]
        reply = state["values"]["messages"][-1]
        call = reply["tool_calls"][0]
        edited = {**reply, "tool_calls": [{**call, "args": {**call["args"], "query": EDITED_QUERY}}]}
        client.threads.update_state(thread, {"messages": [edited]}, as_node="agent")
        assert client.threads.get_state(thread)["next"] == ["tools"]

        out: dict[str, Any] = client.runs.wait(thread, graph_id, input=None, context={"max_steps": 2})  # type: ignore[assignment]
        assert out.get("error") is None and out["answer"].strip()
        values = client.threads.get_state(thread)["values"]
        ran = _tool_results(values, call["id"])
        assert len(ran) == 1 and ran[0]["artifact"]["args"]["query"] == EDITED_QUERY

        # A finished thread can be edited too (Studio's state editor on the last checkpoint).
        client.threads.update_state(thread, {"answer": "edited"}, as_node="finish")
        assert client.threads.get_state(thread)["values"]["answer"] == "edited"


def test_fork_from_an_earlier_checkpoint(dev_server: DevServer) -> None:
    client = dev_server.client()
    with dev_server.log_on_failure():
        thread = client.threads.create()["thread_id"]
        first: dict[str, Any] = client.runs.wait(  # type: ignore[assignment]
            thread, "arag", input={"question": QUESTION}, context={"max_steps": 2}
        )
        assert first["steps"] == 2
        history = client.threads.get_history(thread, limit=50)
        before_tools = [s for s in history if s["next"] == ["tools"]][-1]  # the first pending call
        reply = before_tools["values"]["messages"][-1]
        call = reply["tool_calls"][0]
        fork = {**reply, "tool_calls": [{**call, "name": "keyword_search", "args": {"keywords": ["Leland"]}}]}
        forked = client.threads.update_state(
            thread, {"messages": [fork]}, as_node="agent", checkpoint=before_tools["checkpoint"]
        )
        out: dict[str, Any] = client.runs.wait(  # type: ignore[assignment]
            thread, "arag", input=None, context={"max_steps": 2}, checkpoint=forked["checkpoint"]
        )
        assert out.get("error") is None and out["answer"].strip()
        ran = _tool_results(client.threads.get_state(thread)["values"], call["id"])
        assert [m["name"] for m in ran] == ["keyword_search"]


def test_edit_a_corag_thread_as_every_node(dev_server: DevServer) -> None:
    """Studio offers every node of the graph's drawing; a greedy CoRAG thread edited as ``collect``
    answered HTTP 500 (``KeyError: 'retrieve'`` in the edge's path map). Each edit forks the finished
    thread's last checkpoint and the run goes on from there to an answer."""
    client = dev_server.client()
    with dev_server.log_on_failure():
        nodes = [n["id"] for n in client.assistants.get_graph("corag")["nodes"]]
        nodes = [n for n in nodes if not n.startswith("__")]
        assert {"start", "retrieve", "collect", "chain", "finish"} <= set(nodes)
        thread = client.threads.create()["thread_id"]
        first: dict[str, Any] = client.runs.wait(  # type: ignore[assignment]
            thread, "corag", input={"question": QUESTION}, context={"max_steps": 2}
        )
        assert first.get("error") is None and first["answer"].strip()
        finished = client.threads.get_state(thread)["checkpoint"]
        for node in nodes:
            edited = client.threads.update_state(
                thread, {"answer": f"edited as {node}"}, as_node=node, checkpoint=finished
            )
            out: dict[str, Any] = client.runs.wait(  # type: ignore[assignment]
                thread, "corag", input=None, context={"max_steps": 2}, checkpoint=edited["checkpoint"]
            )
            assert out.get("error") is None and out["answer"].strip(), (node, out)
            assert not client.threads.get_state(thread)["next"], node
