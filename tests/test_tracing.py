"""LangSmith tracing: what the real LangSmith client uploads for an A-RAG run.

The client is pointed at a local recorder (tests/stubs/langsmith_recorder.py), which decodes its
uploads in each format a server may ask for (zstd-compressed multipart, multipart, JSON batch).
Checked: a root run named after the graph, the root run and every run below it (nodes, models,
tools) with the graph / index / step-cap metadata, and that the API keys in the environment never
appear in an uploaded body. The root run's metadata comes from the run's context (step cap, and
the index of a graph built without one), which LangGraph never traces by itself: checked for a
library call with an index given to the builder, for one configured through the context alone
(sync, async and ``astream_events``, the way the LangGraph server drives a graph), and for
``arag ask``.

Two ways in: in-process with ``tracing_context(enabled=True, client=...)``, the SDK's public
switch; and ``arag ask`` in a subprocess configured by environment variables only, exactly as a
user sets up tracing. The environment path is not tested in-process on purpose: langsmith caches
the ``LANGSMITH_*`` variables (and its default client) for the life of the process, so setting
them in one test would leave later tests tracing to a recorder that is gone.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langsmith import Client, tracing_context

from arag_graph.arag.context import AragContext
from arag_graph.arag.graph import build_arag_graph
from arag_graph.run.policy import ServingPolicy
from tests.fakes import sentinel_key, sentinel_langsmith_key
from tests.stubs.langsmith_recorder import Ingest, LangSmithRecorder, RecordedRun

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
LANGSMITH_KEY = sentinel_langsmith_key("arag")
OPENAI_KEY = sentinel_key("arag")
PROJECT = "arag-tests"
QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
CAP = 3
TOOL_NAMES = {"keyword_search", "semantic_search", "chunk_read"}


def tracing_env(recorder: LangSmithRecorder) -> dict[str, str]:
    """The environment a user sets to trace to LangSmith (here: to the recorder)."""
    return {
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_ENDPOINT": recorder.url,
        "LANGSMITH_API_KEY": LANGSMITH_KEY,
        "LANGSMITH_PROJECT": PROJECT,
        "OPENAI_API_KEY": OPENAI_KEY,  # unused by the offline policy; must not leak either
    }


def in_start_order(runs: list[RecordedRun]) -> list[RecordedRun]:
    return sorted(runs, key=lambda r: str(r.data.get("dotted_order") or r.data.get("start_time")))


def root_ended(name: str) -> Callable[[list[RecordedRun]], bool]:
    return lambda runs: any(r.name == name and r.parent_run_id is None and r.ended for r in runs)


def check_run_metadata(run: RecordedRun, index_path: str, cap: int) -> None:
    assert run.metadata["graph"] == "arag", run
    assert run.metadata["index"] == index_path, run
    assert run.metadata["max_steps"] == cap, run
    # The model and every setting of the graph, as a comparison of runs in LangSmith needs them.
    assert run.metadata["model"] == "offline", run
    assert (run.metadata["tools"], run.metadata["hyde"], run.metadata["top_k"]) == ("full", False, 5), run
    assert "base_url" not in run.metadata and "system_prompt" not in run.metadata


def check_trace(recorder: LangSmithRecorder, out: dict[str, Any], index_path: str, cap: int = CAP) -> None:
    """The assertions every way of tracing shares."""
    roots = recorder.roots()
    assert [r.name for r in roots] == ["arag"], roots
    root = roots[0]
    assert root.run_type == "chain"
    assert "arag" in (root.data.get("tags") or root.data.get("extra", {}).get("tags") or []), root.data
    assert root.data.get("session_name") == PROJECT
    # The root run says which graph, index and step cap produced the answer, though the step cap
    # (and, for a graph built without an index, the index) only exist in the run's context.
    check_run_metadata(root, index_path, cap)
    trace = recorder.descendants(root)
    assert all(r.trace_id == root.id for r in trace)

    # Graph nodes are readable runs, and inherit the root's metadata (the first one included).
    # Synthesis is forced at the cap only; below it the policy answers by itself.
    at_cap = out["steps"] == cap
    nodes = {"start", "agent", "tools", "finish"} | ({"synthesize"} if at_cap else set())
    assert nodes <= {r.name for r in trace}
    for run in trace:
        if run.name in nodes:
            check_run_metadata(run, index_path, cap)

    # Model calls: named per role, as LLM runs, with the run's limits.
    agent_models = [r for r in trace if r.name == "agent_model"]
    synthesis = [r for r in trace if r.name == "synthesis_model"]
    assert agent_models and len(synthesis) == int(at_cap)
    for run in [*agent_models, *synthesis]:
        assert run.run_type == "llm"
        check_run_metadata(run, index_path, cap)

    # Tool runs: one per trajectory step, in order, named after the tool, with the same metadata,
    # and without the injected runtime (the run's state) among their inputs.
    tools = in_start_order([r for r in trace if r.run_type == "tool"])
    assert [r.name for r in tools] == [s["tool"] for s in out["trajectory"]]
    assert len(tools) == out["steps"] <= cap
    for run in tools:
        assert run.name in TOOL_NAMES
        check_run_metadata(run, index_path, cap)
        assert "runtime" not in (run.inputs or {}) and "state" not in (run.inputs or {})
        assert run.ended and not run.error

    # Secrets: the LangSmith key authenticates the upload and appears in no body.
    assert {r.headers.get("x-api-key") for r in recorder.requests if r.path.startswith("/runs")} == {LANGSMITH_KEY}
    for secret in (LANGSMITH_KEY, OPENAI_KEY):
        assert recorder.bodies_containing(secret) == []


@pytest.mark.parametrize("ingest", ["zstd", "multipart", "batch"])
def test_runs_and_tool_runs_carry_names_and_metadata(
    ingest: Ingest, langsmith_recorder: LangSmithRecorder, sample_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever upload format the server asks for (compressed multipart, multipart, JSON batch)."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)  # unused by the offline policy; must not leak
    langsmith_recorder.ingest = ingest
    client = Client(api_url=langsmith_recorder.url, api_key=LANGSMITH_KEY)
    graph = build_arag_graph(sample_index, "offline")
    with tracing_context(enabled=True, client=client, project_name=PROJECT):
        out = graph.invoke({"question": QUESTION}, context={"max_steps": CAP})
    client.flush()  # the client uploads from a background thread; flush waits for its queue

    assert langsmith_recorder.wait_for_runs(root_ended("arag"))
    assert out["error"] is None and out["answer"] and out["steps"] == CAP
    endpoint = "/runs/batch" if ingest == "batch" else "/runs/multipart"
    assert {r.path for r in langsmith_recorder.requests} == {"/info", endpoint}
    # The client may send a small payload uncompressed even when the server accepts zstd; what
    # matters is that the recorder decoded whichever format arrived.
    compressed = any(r.headers.get("content-encoding") == "zstd" for r in langsmith_recorder.requests[1:])
    assert compressed == (ingest == "zstd")
    # A caller's run: its metadata names the index as the caller may see it, never the operator's path.
    check_trace(langsmith_recorder, out, ServingPolicy.from_env().shown(sample_index.path))


def _run(graph: Any, how: str, context: dict[str, Any]) -> dict[str, Any]:
    question = {"question": QUESTION}
    if how == "invoke":
        return graph.invoke(question, context=context)
    if how == "ainvoke":
        return asyncio.run(graph.ainvoke(question, context=context))

    async def events() -> dict[str, Any]:  # how the LangGraph server (langgraph dev) runs a graph
        final: dict[str, Any] = {}
        modes = ["values", "updates", "debug"]
        stream = graph.astream_events(question, version="v2", context=context, stream_mode=modes)
        async for event in stream:
            if event["event"] == "on_chain_end" and event.get("parent_ids") == []:
                final = event["data"]["output"]
        return final

    return asyncio.run(events())


@pytest.mark.parametrize(
    ("how", "cap"),
    [("invoke", CAP), ("ainvoke", None), ("astream_events", CAP)],
)
def test_root_run_metadata_comes_from_the_run_context(
    how: str,
    cap: int | None,
    langsmith_recorder: LangSmithRecorder,
    sample_index: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A graph built without an index (as arag_graph/served/arag.py is): index and step cap from the context
    (the default cap of 15 when the context leaves it out), on the root run as on every run below it."""
    monkeypatch.setenv("ARAG_INDEX_ROOT", str(sample_index.path.parent))  # runs may name indexes there
    client = Client(api_url=langsmith_recorder.url, api_key=LANGSMITH_KEY)
    graph = build_arag_graph(None, "offline")
    context: dict[str, Any] = {"index_path": str(sample_index.path)}
    if cap is not None:
        context["max_steps"] = cap
    with tracing_context(enabled=True, client=client, project_name=PROJECT):
        out = _run(graph, how, context)
    client.flush()

    assert langsmith_recorder.wait_for_runs(root_ended("arag"))
    assert out["error"] is None and out["answer"]
    # Relative to the index root: the operator's directories stay out of what a caller can read back.
    check_trace(langsmith_recorder, out, sample_index.path.name, cap or AragContext().max_steps)


def test_cli_traces_from_environment_variables_alone(langsmith_recorder: LangSmithRecorder, sample_index: Any) -> None:
    """``LANGSMITH_TRACING=true arag ask ...``: no code, and the process uploads before exiting."""
    # Start from a clean slate: the test session turns tracing off with LANGCHAIN_TRACING_V2=false,
    # which langsmith reads before LANGSMITH_TRACING (set both and the LANGCHAIN_ one wins).
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env = {**inherited, **tracing_env(langsmith_recorder), "PYTHONPATH": str(REPO)}
    argv = ["ask", QUESTION, "--index", str(sample_index.path), "--model", "offline", "--max-steps", str(CAP)]
    done = subprocess.run(
        [sys.executable, "-m", "arag_graph.cli.main", *argv, "--json"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["steps"] == CAP
    # Everything was posted by the time the process exited: no waiting needed.
    assert root_ended("arag")(langsmith_recorder.runs), langsmith_recorder.runs
    check_trace(langsmith_recorder, out, str(sample_index.path))
    assert LANGSMITH_KEY not in done.stdout + done.stderr
