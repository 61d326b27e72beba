"""The Studio path: ``langgraph dev`` serves the graphs of langgraph.json; ``langgraph_sdk`` drives them.

The server (tests/slow/devserver.py, one per session from tests/slow/conftest.py) is started as the
README says, with the offline policy, no API keys, tracing off and a fresh cache directory, so its
first run builds the bundled sample index the way a new user's first Studio run does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.slow.devserver import CONFIG, LOOPBACK, DevServer, listening_addresses

# One worker runs every module that uses the session's server (tests/slow/conftest.py), which starts once.
pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.xdist_group("langgraph-dev")]

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = json.loads((REPO / "arag_graph" / "data" / "sample" / "questions.json").read_text(encoding="utf-8"))
QUESTION = QUESTIONS[0]["question"]
CAP = 3  # below the offline policy's plan for this question, so the cap decides the step count


# -----------------------------------------------------------------------------------------------


def test_server_binds_to_localhost_only(dev_server: DevServer) -> None:
    """Started without ``--host`` (as the README says), the server listens on loopback only."""
    addresses = listening_addresses(dev_server.port)
    if not addresses:
        pytest.skip("cannot read listening sockets from /proc on this system")
    assert addresses <= LOOPBACK, addresses  # never 0.0.0.0 or another interface


def test_both_graphs_are_served_with_their_configuration_forms(dev_server: DevServer) -> None:
    client = dev_server.client()
    with dev_server.log_on_failure():
        assistants = client.assistants.search(limit=20)
        by_graph = {a["graph_id"]: a for a in assistants}
        assert {"arag", "arag_naive"} <= set(by_graph)
        listed = json.loads(CONFIG.read_text(encoding="utf-8"))["graphs"]
        assert set(listed) == set(by_graph)  # every graph of langgraph.json, and nothing else

        for graph_id in ("arag", "arag_naive"):
            schemas = client.assistants.get_schemas(by_graph[graph_id]["assistant_id"])
            form = schemas["context_schema"]  # what Studio renders as the configuration form
            assert form is not None, f"{graph_id} exposes no context schema"
            properties = form["properties"]
            assert properties["max_steps"]["default"] == 15
            assert properties["top_k"]["default"] == 5
            assert {"model", "temperature", "system_prompt", "message_token_budget"} <= set(properties)
            assert {"question", "messages"} <= set(schemas["input_schema"]["properties"])
            outputs = set(schemas["output_schema"]["properties"])
            assert {"answer", "citations", "read_chunks", "retrieved_tokens", "steps", "trajectory"} <= outputs

        arag_form = client.assistants.get_schemas(by_graph["arag"]["assistant_id"])["context_schema"]
        assert set(arag_form["properties"]["tools"]["enum"]) >= {"full", "no_chunk_read"}

        # Studio renders a described, bounded form for every graph: no bare field.
        for graph_id, assistant in by_graph.items():
            form = client.assistants.get_schemas(assistant["assistant_id"])["context_schema"]
            for name, prop in form["properties"].items():
                assert prop.get("description"), f"{graph_id}.{name} has no description"
                if prop.get("type") in ("integer", "number"):
                    assert {"minimum", "exclusiveMinimum"} & set(prop), f"{graph_id}.{name} has no lower bound"
                    assert {"maximum", "exclusiveMaximum"} & set(prop), f"{graph_id}.{name} has no upper bound"


def test_run_through_the_sdk_returns_answer_and_state_fields(dev_server: DevServer) -> None:
    client = dev_server.client()
    with dev_server.log_on_failure():
        thread = client.threads.create()
        out: dict[str, Any] = client.runs.wait(  # type: ignore[assignment]
            thread["thread_id"], "arag", input={"question": QUESTION}, context={"max_steps": CAP}
        )
        assert out.get("error") is None, out.get("error")
        assert out["answer"].strip()
        assert out["read_chunks"], "the run read no chunk"
        assert out["steps"] == CAP  # the context reached the graph: the offline plan is longer
        assert len(out["trajectory"]) == out["steps"]
        assert out["retrieved_tokens"] > 0
        assert out["retrieved_tokens"] == sum(s["tokens"] for s in out["trajectory"])
        assert out["citations"] and set(out["citations"]) <= set(out["read_chunks"])

        # The same values are the thread's checkpointed state, which Studio shows.
        state = client.threads.get_state(thread["thread_id"])["values"]
        assert state["read_chunks"] == out["read_chunks"]
        assert state["steps"] == out["steps"]


def test_streamed_follow_up_on_the_same_thread(dev_server: DevServer) -> None:
    """Studio streams node updates; a second question on the thread starts its own step count."""
    client = dev_server.client()
    with dev_server.log_on_failure():
        thread = client.threads.create()
        first = client.runs.wait(thread["thread_id"], "arag", input={"question": QUESTION}, context={"max_steps": 2})
        assert first["steps"] == 2  # type: ignore[index]

        follow_up = QUESTIONS[1]["question"]
        nodes: list[str] = []
        for part in client.runs.stream(
            thread["thread_id"],
            "arag",
            input={"messages": [{"role": "user", "content": follow_up}]},
            context={"max_steps": CAP},
            stream_mode="updates",
        ):
            if part.event == "updates" and isinstance(part.data, dict):
                nodes.extend(part.data)
            assert part.event != "error", part.data
        assert nodes[0] == "start" and nodes[-1] == "finish"
        assert {"agent", "tools", "synthesize"} <= set(nodes)

        state = client.threads.get_state(thread["thread_id"])["values"]
        assert state["steps"] == CAP
        assert state["answer"].strip()
        asked = [m["content"] for m in state["messages"] if m["type"] == "human"]
        assert asked.index(QUESTION) < asked.index(follow_up)  # one history, in order


GRAPH_IDS = list(json.loads(CONFIG.read_text(encoding="utf-8"))["graphs"])
RETRIEVES = {g for g in GRAPH_IDS if g != "direct"}  # direct answers without retrieval


@pytest.mark.parametrize("graph_id", GRAPH_IDS)
def test_every_graph_of_langgraph_json_runs_through_the_server(dev_server: DevServer, graph_id: str) -> None:
    """Each graph answers with the shared output fields, and cites only chunks it retrieved."""
    client = dev_server.client()
    with dev_server.log_on_failure():
        thread = client.threads.create()
        out: dict[str, Any] = client.runs.wait(  # type: ignore[assignment]
            thread["thread_id"], graph_id, input={"question": QUESTION}, context={"top_k": 3}
        )
        assert out.get("error") is None, out.get("error")
        assert out["answer"].strip()
        assert {"answer", "citations", "retrieved_tokens", "steps", "trajectory", "read_chunks"} <= set(out)
        assert out["retrieved_tokens"] == sum(s["tokens"] for s in out["trajectory"])
        if graph_id in RETRIEVES:
            assert out["steps"] >= 1 and out["retrieved_tokens"] > 0
            assert out["citations"], f"{graph_id} cited nothing"
            shown = {cid for step in out["trajectory"] for cid in step["chunk_ids"]}
            assert set(out["citations"]) <= shown  # cited chunks were returned by its own retrieval
        else:
            assert out["steps"] == 0 and out["retrieved_tokens"] == 0 and out["citations"] == []
