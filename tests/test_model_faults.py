"""Model faults, systematically: every fault the OpenAI stand-in can inject, against every graph.

tests/test_openai_compatible.py checks the wire format and a few faults in detail (a 429 whose
Retry-After is honoured, bad tool calls answered in order, a model failing for good). This module
is the matrix: each graph of the registry × each fault, through the real ``ChatOpenAI`` client
against tests/stubs/openai_server.py, and the A-RAG agent also streamed (sync and async, where
``ChatOpenAI`` streams and a cut-off event stream is a different fault than a cut-off body) and
through ``arag ask``. What every cell must show:

- the run returns (no exception escapes the graph) with either an answer, or a one-line error in
  its ``error`` field that says what failed (no traceback, no API key);
- never more tool or retrieval steps than the graph's cap; a model that never stops calling tools
  ends at exactly the cap;
- transient faults (one 429 with Retry-After, one 500) are retried and the run answers.

Timeouts and retries are set small (``$ARAG_MODEL_TIMEOUT``, ``$ARAG_MODEL_RETRIES``) so the
matrix stays fast; the behaviour does not depend on their size.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from arag_graph.cli.main import main as cli_main
from arag_graph.llm import models
from arag_graph.registry import build_graph, config_for, graph_names
from tests.fakes import sentinel_key
from tests.reliability import record
from tests.stubs._http import RecordedRequest
from tests.stubs.openai_server import (
    OpenAIStubServer,
    Reply,
    disconnect,
    empty,
    http_error,
    invalid_arguments,
    rate_limited,
    stall,
    text,
    tool_call,
    truncated,
    unknown_tool,
)
from tests.test_openai_compatible import assert_valid_tool_history

pytestmark = pytest.mark.integration

KEY = sentinel_key("fault")
QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
ANSWER = "Stephen King"
TIMEOUT = 0.25  # seconds; a stalled reply waits 4x longer
MAX_STEPS = 3
MAX_SUB_QUESTIONS = 2
# Tool or retrieval steps a graph may take at most under the context below.
CAPS = {
    "arag": MAX_STEPS,
    "arag_naive": MAX_STEPS,
    "corag": MAX_STEPS,
    "srag": MAX_SUB_QUESTIONS,
    "naive_rag": 1,
    "direct": 0,
}
AGENTS = {"arag", "arag_naive"}  # graphs whose tool calls come from the model


# -----------------------------------------------------------------------------------------------
# Model behaviours, as responders of the stand-in (they read the request to answer in kind)


def _structured_schema(request: RecordedRequest) -> str | None:
    """The schema a structured-output request asks for (``with_structured_output``'s json_schema)."""
    body = request.json() or {}
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return str(response_format.get("json_schema", {}).get("name"))
    for tool in body.get("tools") or []:  # function-calling structured output
        name = tool.get("function", {}).get("name", "")
        if name[:1].isupper():
            return name
    return None


_COOPERATIVE = {
    "Sufficiency": {"reasoning": "The passages name the director.", "is_sufficient": True, "missing_info": ""},
    "Reformulation": {"query": "director of Maximum Overdrive"},
    "SubAnswer": {"answer": "Maximum Overdrive was shot in Leland", "confidence": 0.8},
    "Decomposition": {"sub_questions": [{"id": 1, "question": QUESTION, "depends_on": []}]},
    "Triplets": {"triplets": [{"subject": "Maximum Overdrive", "predicate": "directed by", "object": ANSWER}]},
    "Route": {"multi_hop": False},
}


def cooperative(request: RecordedRequest) -> Reply:
    """A well-behaved model: valid structured replies, and a final answer when asked anything else."""
    schema = _structured_schema(request)
    if schema is not None:
        return text(json.dumps(_COOPERATIVE.get(schema, {})))
    return text(f"The film is Maximum Overdrive.\nAnswer: {ANSWER}")


def greedy_factory() -> Callable[[RecordedRequest], Reply]:
    """A model that never stops: asks for another search at every turn, including when told to
    answer or offered no tools, never finds the passages sufficient, and decomposes every question
    into twenty sub-questions."""
    counter = iter(range(10**9))

    def reply(request: RecordedRequest) -> Reply:
        n = next(counter)
        schema = _structured_schema(request)
        if schema == "Sufficiency":
            return text(json.dumps({"reasoning": "never enough", "is_sufficient": False, "missing_info": "more"}))
        if schema == "Reformulation":
            return text(json.dumps({"query": f"yet another angle on the question, number {n}"}))
        if schema == "Decomposition":
            subs = [{"id": i, "question": f"Sub-question {i} about Leland?", "depends_on": []} for i in range(1, 21)]
            return text(json.dumps({"sub_questions": subs}))
        if schema is not None:
            return text(json.dumps(_COOPERATIVE.get(schema, {})))
        return tool_call("keyword_search", {"keywords": [f"Leland {n}"]})

    return reply


# -----------------------------------------------------------------------------------------------
# The faults


@dataclass(frozen=True)
class Fault:
    """A fault: the scripted replies, what follows them, the client's retries, and the outcome."""

    script: tuple[Reply, ...] = ()
    then: Callable[[], Reply | Callable[[RecordedRequest], Reply]] = lambda: cooperative
    retries: int = 0
    answers: bool = False
    """True: the run must recover and answer; False: it must end with an error naming ``needle``."""
    needle: str = ""
    streamed_only: bool = False
    """A fault that only exists when the reply is streamed (server-sent events)."""
    forever: bool = False
    """The model never stops asking for more: agents must end at exactly the cap."""


FAULTS: dict[str, Fault] = {
    "429_then_ok": Fault((rate_limited(retry_after=0.2),), retries=1, answers=True),
    "429_always": Fault(then=lambda: rate_limited(retry_after=0.05), needle="HTTP 429"),
    "500_then_ok": Fault((http_error(500, "upstream hiccup"),), retries=1, answers=True),
    "500_always": Fault(then=lambda: http_error(500, "upstream exploded"), needle="HTTP 500"),
    "503_always": Fault(then=lambda: http_error(503, "overloaded"), needle="HTTP 503"),
    "timeout": Fault(then=lambda: stall(4 * TIMEOUT), needle="Timeout"),
    "timeout_then_ok": Fault((stall(4 * TIMEOUT),), retries=1, answers=True),
    "disconnect": Fault(then=disconnect, needle="Connection"),
    "truncated_json": Fault(then=lambda: truncated(text(f"Answer: {ANSWER}")), needle="malformed reply"),
    "truncated_stream": Fault(
        then=lambda: truncated(text(f"Answer: {ANSWER}")), needle="CutOffReply", streamed_only=True
    ),
    "truncated_stream_tool_call": Fault(
        then=lambda: truncated(tool_call("keyword_search", {"keywords": ["Leland"]})),
        needle="CutOffReply",
        streamed_only=True,
    ),
    "invalid_tool_arguments": Fault(then=lambda: invalid_arguments("semantic_search"), needle="tool calls"),
    "unknown_tool": Fault(then=lambda: unknown_tool("delete_index", {"confirm": True}), needle="tool calls"),
    "empty_reply": Fault(then=empty, needle="empty answer"),
    "never_stops_calling_tools": Fault(then=greedy_factory, needle="tool calls", forever=True),
}


@pytest.fixture
def fault_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A sentinel API key, no stray model settings, and a short client timeout."""
    for name in ("OPENAI_BASE_URL", "ARAG_BASE_URL", "ARAG_API_KEY", "ARAG_MODEL", "ARAG_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ARAG_MODEL_TIMEOUT", str(TIMEOUT))
    models._chat_openai.cache_clear()
    yield
    models._chat_openai.cache_clear()


def _arm(server: OpenAIStubServer, fault: Fault, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARAG_MODEL_RETRIES", str(fault.retries))
    models._chat_openai.cache_clear()
    server.script(list(fault.script), then=fault.then())


def _context(graph: str, server: OpenAIStubServer) -> Any:
    return config_for(graph, base_url=server.url, max_steps=MAX_STEPS, max_sub_questions=MAX_SUB_QUESTIONS, top_k=3)


def _run(graph_name: str, index: Any, server: OpenAIStubServer, mode: str) -> dict[str, Any]:
    graph = build_graph(graph_name, index=index, model="gpt-4o-mini")
    context = _context(graph_name, server)
    if mode == "invoke":
        return graph.invoke({"question": QUESTION}, context=context)
    final: dict[str, Any] = {}
    if mode == "stream":
        for kind, chunk in graph.stream({"question": QUESTION}, context=context, stream_mode=["messages", "values"]):
            if kind == "values":
                final = chunk
        return final

    async def consume() -> dict[str, Any]:
        last: dict[str, Any] = {}
        async for kind, chunk in graph.astream(
            {"question": QUESTION}, context=context, stream_mode=["messages", "values"]
        ):
            if kind == "values":
                last = chunk
        return last

    return asyncio.run(consume())


def check_outcome(graph: str, fault_name: str, fault: Fault, out: dict[str, Any], server: OpenAIStubServer) -> None:
    """What every cell of the matrix must show (see the module docstring)."""
    where = f"{graph} / {fault_name}"
    error = out.get("error")
    cap = CAPS[graph]
    assert out.get("steps", 0) <= cap, f"{where}: {out.get('steps')} steps over the cap of {cap}"
    assert len(out.get("trajectory") or []) == out.get("steps", 0), where
    assert KEY not in json.dumps(out, default=str), f"{where}: the API key is in the output"
    if fault.answers:
        assert error is None, f"{where}: {error}"
        assert out["answer"] == ANSWER, f"{where}: {out.get('answer')!r}"
    else:
        assert isinstance(error, str) and error.strip(), f"{where}: no error for a run that could not answer"
        assert "\n" not in error and "Traceback" not in error, f"{where}: {error!r}"
        assert fault.needle in error, f"{where}: {error!r} does not say {fault.needle!r}"
        assert len(error) <= 600, f"{where}: error of {len(error)} characters"
    if fault.forever and graph in AGENTS | {"corag", "srag"}:
        assert out["steps"] == cap, f"{where}: a model that never stops ended after {out['steps']} of {cap} steps"
    if graph in AGENTS:
        for request in server.completions:
            assert_valid_tool_history(request.messages)


CELLS = [
    (graph, name, "invoke")
    for graph in graph_names()
    for name, fault in FAULTS.items()
    if not fault.streamed_only and not (name == "timeout_then_ok" and graph != "arag")
] + [("arag", name, mode) for name in FAULTS for mode in ("stream", "astream")]
CELLS += [
    (graph, name, "stream")
    for graph in graph_names()
    if graph != "arag"
    for name in ("truncated_stream", "truncated_stream_tool_call")
]


@pytest.mark.parametrize(("graph", "fault_name", "mode"), CELLS, ids=["-".join(c) for c in CELLS])
def test_every_graph_survives_every_model_fault(
    graph: str,
    fault_name: str,
    mode: str,
    openai_server: OpenAIStubServer,
    fault_env: None,
    sample_index: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fault = FAULTS[fault_name]
    _arm(openai_server, fault, monkeypatch)
    started = time.perf_counter()
    out = _run(graph, sample_index, openai_server, mode)
    check_outcome(graph, fault_name, fault, out, openai_server)
    if fault_name == "429_then_ok":
        limited, retried = openai_server.completions[:2]
        assert retried.recorded.received_at - limited.recorded.received_at >= 0.18  # Retry-After honoured
    record(
        "model_faults",
        f"{graph}/{fault_name}/{mode}",
        trials=1,
        faults=1,
        survived=1,
        requests=len(openai_server.completions),
        steps=out.get("steps", 0),
        seconds=round(time.perf_counter() - started, 3),
    )


def test_matrix_covers_every_graph_and_fault() -> None:
    """The matrix is generated, so check it really spans the registry and the fault list."""
    assert {g for g, _, _ in CELLS} == set(graph_names())
    assert {f for _, f, _ in CELLS} == set(FAULTS)
    assert {m for _, _, m in CELLS} == {"invoke", "stream", "astream"}


def test_a_fault_mid_run_keeps_the_steps_already_taken(
    openai_server: OpenAIStubServer, fault_env: None, sample_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two good tool steps, then the model fails for good: the run reports the steps it took."""
    _arm(openai_server, Fault(), monkeypatch)
    openai_server.script(
        [
            tool_call("keyword_search", {"keywords": ["Leland, North Carolina"]}),
            tool_call("semantic_search", {"query": "film shot near Leland in 1986"}),
        ],
        then=http_error(500, "gone"),
    )
    out = _run("arag", sample_index, openai_server, "invoke")
    assert out["steps"] == 2 and [s["tool"] for s in out["trajectory"]] == ["keyword_search", "semantic_search"]
    assert out["retrieved_tokens"] == sum(s["tokens"] for s in out["trajectory"]) > 0
    assert "HTTP 500" in out["error"] and out["answer"] == ""


def test_synthesis_failing_after_the_cap_is_an_error_not_an_exception(
    openai_server: OpenAIStubServer, fault_env: None, sample_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _arm(openai_server, Fault(), monkeypatch)
    calls = [tool_call("keyword_search", {"keywords": [f"Leland {i}"]}) for i in range(MAX_STEPS)]
    openai_server.script(calls, then=http_error(500, "synthesis broke"))
    out = _run("arag", sample_index, openai_server, "invoke")
    assert out["steps"] == MAX_STEPS
    assert "HTTP 500" in out["error"] and "synthesis broke" in out["error"]
    assert "tools" not in openai_server.completions[-1].body  # it was the synthesis request that failed


# -----------------------------------------------------------------------------------------------
# The CLI: one JSON object (or the human output), an exit status, nothing on stderr but one line


CLI_FAULTS = ["429_then_ok", "500_always", "timeout", "truncated_json", "empty_reply", "never_stops_calling_tools"]


@pytest.mark.parametrize("fault_name", CLI_FAULTS)
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_arag_ask_reports_model_faults_in_its_output(
    fault_name: str,
    as_json: bool,
    openai_server: OpenAIStubServer,
    fault_env: None,
    sample_index: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fault = FAULTS[fault_name]
    _arm(openai_server, fault, monkeypatch)
    argv = ["ask", QUESTION, "--index", str(sample_index.path), "--model", "gpt-4o-mini"]
    argv += ["--base-url", openai_server.url, "--max-steps", str(MAX_STEPS)]
    code = cli_main([*argv, "--json"] if as_json else argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert KEY not in captured.err + captured.out
    assert code == (0 if fault.answers else 1), captured.err
    if as_json:
        lines = captured.out.strip().splitlines()
        assert len(lines) == 1, captured.out
        result = json.loads(lines[0])
        assert result["steps"] <= MAX_STEPS
        if fault.answers:
            assert result["answer"] == ANSWER and result["error"] is None
        else:
            assert fault.needle in result["error"] and "\n" not in result["error"]
    else:
        errors = [line for line in captured.err.splitlines() if line.startswith("error: ")]
        if fault.answers:
            assert f"answer: {ANSWER}" in captured.out and not errors
        else:
            assert len(errors) == 1 and fault.needle in errors[0], captured.err
    record("model_faults", f"cli/{fault_name}/{'json' if as_json else 'text'}", trials=1, faults=1, survived=1)


# -----------------------------------------------------------------------------------------------
# The guard against cut-off streams itself


def test_a_cut_off_stream_raises_and_a_complete_one_does_not(openai_server: OpenAIStubServer) -> None:
    from arag_graph.llm.openai_chat import CompleteReplyChatOpenAI, CutOffReplyError

    model = CompleteReplyChatOpenAI(model="gpt-4o-mini", base_url=openai_server.url, api_key="sk-x", max_retries=0)
    openai_server.script([text("A complete reply."), truncated(text("A reply cut off in the middle of it."))])
    assert "".join(str(c.content) for c in model.stream("q")) == "A complete reply."
    with pytest.raises(CutOffReplyError, match="without a finish reason"):
        list(model.stream("q"))

    async def astream() -> None:
        async for _ in model.astream("q"):
            pass

    openai_server.script([truncated(tool_call("chunk_read", {"chunk_ids": ["1", "2"]}))])
    with pytest.raises(CutOffReplyError):
        asyncio.run(astream())
    openai_server.script([Reply(content="cut by max_tokens", finish_reason="length")])
    assert "".join(str(c.content) for c in model.stream("q")) == "cut by max_tokens"  # an end marker, not a cut
