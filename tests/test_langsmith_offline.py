"""A plain ``langsmith.evaluate(graph, data=..., evaluators=..., upload_results=False)`` stays offline.

LangSmith's local mode runs the target under ``tracing_context(enabled="local")``, and langchain-core
gave every node, model and tool run of the graph a tracer posting to the client's URL: with nothing
behind it, each post waited through the client's retries (280 s for one question). The client here
retries nothing and every connection attempt is recorded and refused, so the test is bounded
however the code behaves, and fails on any attempt to reach the network.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any

import pytest
from urllib3.util.retry import Retry

from arag_graph.arag.graph import build_arag_graph
from arag_graph.evaluators import default_evaluators

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:'upload_(results|runs)' parameter is in beta"),
]

QUESTION = "Were Scott Derrickson and Ed Wood of the same nationality?"


@pytest.fixture
def refused_connections(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every outgoing TCP connection attempt, each refused at once."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def refuse(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(address)
            raise ConnectionRefusedError(f"network access refused in this test: {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", refuse)
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return attempts


def _client() -> Any:
    from langsmith import Client

    # No retries and no background batch thread: an attempt to post fails at once and is recorded.
    return Client(
        api_key="offline", api_url="http://127.0.0.1:9", auto_batch_tracing=False, info={}, retry_config=Retry(0)
    )


def _examples() -> list[Any]:
    from langsmith.schemas import Example

    return [
        Example(
            id=uuid.uuid4(),
            dataset_id=uuid.uuid4(),
            inputs={"question": QUESTION},
            outputs={"answers": ["yes"], "gold_chunk_ids": []},
        )
    ]


def _scores(results: Any) -> dict[str, Any]:
    (row,) = list(results)
    return {r.key: r.score for r in row["evaluation_results"]["results"]}


def test_plain_evaluate_of_a_graph_makes_no_connection(sample_index: Any, refused_connections: list[Any]) -> None:
    from langsmith import evaluate

    graph = build_arag_graph(sample_index, "offline")
    evaluators = default_evaluators(embeddings=sample_index.embeddings, chunks=sample_index)
    results = evaluate(graph, data=_examples(), evaluators=evaluators, client=_client(), upload_results=False)
    scores = _scores(results)
    assert refused_connections == []
    # The graph ran and was scored: the agent took its steps and Contain-Acc was computed.
    assert scores["steps"] > 0 and scores["contain_acc"] in (0.0, 1.0)


def test_plain_aevaluate_of_a_graph_makes_no_connection(sample_index: Any, refused_connections: list[Any]) -> None:
    from langsmith import aevaluate

    graph = build_arag_graph(sample_index, "offline")
    evaluators = default_evaluators(embeddings=sample_index.embeddings)

    async def run() -> Any:
        data, client = _examples(), _client()
        results = await aevaluate(graph, data=data, evaluators=evaluators, client=client, upload_results=False)
        return [row async for row in results]

    scores = _scores(asyncio.run(run()))
    assert refused_connections == []
    assert scores["steps"] > 0


@pytest.mark.parametrize("guarded", [True, False], ids=["guarded", "unguarded"])
def test_graph_stream_inside_local_tracing_guard_makes_no_connection(
    guarded: bool, sample_index: Any, refused_connections: list[Any]
) -> None:
    """The README's advice for a target that calls ``graph.stream(...)`` (which the graphs' own
    ``invoke`` guard does not cover): inside ``local_tracing_guard()`` it stays offline; without it
    the same target tries to post runs (what the guard is for, and what shows this test can fail)."""
    import contextlib

    from langsmith import evaluate

    from arag_graph.core.tracing import local_tracing_guard

    graph = build_arag_graph(sample_index, "offline")

    def target(inputs: dict[str, Any]) -> dict[str, Any]:
        with local_tracing_guard() if guarded else contextlib.nullcontext():
            updates = list(graph.stream(inputs, stream_mode="updates"))
        return updates[-1]["finish"]

    results = evaluate(target, data=_examples(), evaluators=[], client=_client(), upload_results=False)
    (row,) = list(results)
    assert row["run"].outputs["answer"]  # the streamed graph ran to its answer
    assert (refused_connections == []) is guarded, refused_connections
