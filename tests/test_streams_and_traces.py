"""What a UI and a trace viewer see of a run: named runs, ``custom`` progress events, quiet library calls.

A recording tracer (langchain-core's ``BaseTracer``) collects every run of every registered graph:
none may carry a generic name (an unnamed edge traced as ``RunnableCallable`` was 39 of 222 runs in
a three-question evaluation). ``stream_mode="custom"`` carries the events of
:mod:`arag_graph.run.events`.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run

from arag_graph.registry import GRAPHS, build_graph

pytestmark = pytest.mark.integration

QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
GENERIC = {"Unnamed", "RunnableCallable", "RunnableLambda", "RunnableSequence", "LangGraph", "Target", "partial"}


class RecordingTracer(BaseTracer):
    def __init__(self) -> None:
        super().__init__()
        self.runs: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        pass

    def _start_trace(self, run: Run) -> None:
        super()._start_trace(run)
        self.runs.append(run)


@pytest.mark.parametrize("name", list(GRAPHS))
def test_every_node_and_edge_run_has_a_name(name: str, sample_index: Any) -> None:
    tracer = RecordingTracer()
    graph = build_graph(name, index=sample_index, model="offline")
    graph.invoke({"question": QUESTION}, {"callbacks": [tracer]})
    names = [run.name for run in tracer.runs]
    assert names[0] == name  # the root run is the graph's
    assert not GENERIC & set(names), sorted(set(names))
    edges = {n for n in names if n.startswith(("after_", "to_")) or n in ("dispatch", "send_tasks")}
    assert edges, "no edge was traced by name"


def test_agent_streams_each_tool_call_started_and_finished(sample_index: Any) -> None:
    graph = build_graph("arag", index=sample_index, model="offline")
    events: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream({"question": QUESTION}, stream_mode=["custom", "values"], context={"max_steps": 3}):
        if mode == "custom" and chunk["event"].startswith("tool_"):
            events.append(chunk)
        elif mode == "values":
            final = chunk
    ran = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert [e["event"] for e in events] == ["tool_started", "tool_finished"] * len(ran)
    assert len(ran) == 3
    for (started, finished), message in zip(zip(events[::2], events[1::2], strict=True), ran, strict=True):
        assert started["id"] == finished["id"] == message.tool_call_id
        assert started["tool"] == finished["tool"] == message.name
        assert started["summary"].startswith(f"{message.name}(") and "\n" not in started["summary"]
        assert finished["chunk_ids"] == message.artifact["chunk_ids"]
        shown = f"{len(finished['chunk_ids'])} chunk(s), {finished['tokens']} tokens"
        assert finished["summary"] == f"{message.name}: {shown}"


def test_corag_streams_each_chain_step(sample_index: Any) -> None:
    graph = build_graph("corag", index=sample_index, model="offline")
    events = [e for e in graph.stream({"question": QUESTION}, stream_mode="custom", context={"max_steps": 2})]
    out = graph.invoke({"question": QUESTION}, context={"max_steps": 2})
    steps = [e for e in events if e["event"] == "chain_step"]
    assert [e["step"] for e in steps] == list(range(1, len(out["trajectory"]) + 1))
    assert [e["query"] for e in steps] == [t["args"]["query"] for t in out["trajectory"]]
    assert all(e["sub_answer"] and "\n" not in e["summary"] for e in steps)


def test_srag_streams_its_sub_questions_and_each_one_solved(sample_index: Any) -> None:
    graph = build_graph("srag", index=sample_index, model="offline")
    events = list(graph.stream({"question": QUESTION}, stream_mode="custom"))
    out = graph.invoke({"question": QUESTION})
    assert events[0]["event"] == "sub_questions"
    planned = [s["id"] for s in events[0]["sub_questions"]]
    assert planned == [s["id"] for s in out["sub_questions"]]
    done = [e for e in events if e["event"] == "sub_question_done"]
    assert sorted(e["id"] for e in done) == sorted(planned)
    assert {e["id"]: e["chunk_ids"] for e in done} == {s["id"]: s["chunk_ids"] for s in out["sub_questions"]}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_every_graph_streams_progress_and_ends_with_its_answer(name: str, sample_index: Any) -> None:
    """Naive RAG and Direct sent no ``custom`` event at all: a UI showed nothing until the end. Every
    graph now ends with ``answered``, and every retrieve-then-answer step says what it retrieved."""
    graph = build_graph(name, index=sample_index, model="offline")
    events: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream({"question": QUESTION}, stream_mode=["custom", "values"], context={}):
        if mode == "custom":
            events.append(chunk)
        else:
            final = chunk
    assert events and all(e["summary"] and "\n" not in e["summary"] for e in events)
    assert events[-1]["event"] == "answered"
    assert events[-1]["answer"] == final["answer"] and events[-1]["citations"] == final["citations"]
    retrieved = [e for e in events if e["event"] == "retrieved"]
    if name == "naive_rag":
        assert [e["chunk_ids"] for e in retrieved] == [t["chunk_ids"] for t in final["trajectory"]]
        assert (
            retrieved[0]["summary"]
            == f"retrieve: {len(retrieved[0]['chunk_ids'])} chunk(s), {retrieved[0]['tokens']} tokens"
        )
    if name == "direct":
        assert [e["event"] for e in events] == ["answered"]


def test_library_calls_draw_no_progress_bars(
    sample_index: Any, tmp_path: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """``build_index`` called from code is quiet (it drew three bars); the CLI asks for them at a terminal."""
    from arag_graph.index.build import build_index

    capfd.readouterr()
    build_index(sample_index.store.chunks[:8], tmp_path / "quiet")
    err = capfd.readouterr().err
    assert "splitting documents" not in err and "keyword index" not in err and "it/s" not in err, err[-500:]
