"""The OpenAI-compatible model path end to end: ``ChatOpenAI`` against a local stand-in server.

What is checked is what a real provider would receive and return: the tool schemas, the
one-call-per-turn request, tool results as ``role: tool`` messages answering their calls, the
forced-synthesis request without tools, server-sent events, retries, and the one-line errors
when the model keeps failing or cannot be set up. The stand-in lives in tests/stubs/openai_server.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk

from arag_graph.arag.context import AragContext
from arag_graph.arag.graph import build_arag_graph
from arag_graph.arag.prompts import SYNTHESIS_INSTRUCTION
from arag_graph.cli.main import main as cli_main
from arag_graph.core.errors import ModelSpecError
from arag_graph.llm import models
from arag_graph.llm.models import resolve_chat_model
from tests.fakes import sentinel_key
from tests.stubs.openai_server import (
    ChatRequest,
    OpenAIStubServer,
    ToolCallSpec,
    call,
    http_error,
    rate_limited,
    text,
    tool_call,
    tool_calls,
)

pytestmark = pytest.mark.integration

KEY = sentinel_key("arag")
QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
TOOLS = ["keyword_search", "semantic_search", "chunk_read"]


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An API key in the environment, no stray base URL, few retries and short timeouts.

    ``models._chat_openai`` caches clients per setting, so it is cleared around each test that
    changes the retry count.
    """
    for name in ("OPENAI_BASE_URL", "ARAG_BASE_URL", "ARAG_API_KEY", "ARAG_MODEL", "ARAG_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ARAG_MODEL_RETRIES", "2")
    monkeypatch.setenv("ARAG_MODEL_TIMEOUT", "20.0")
    models._chat_openai.cache_clear()
    yield KEY
    models._chat_openai.cache_clear()


@pytest.fixture
def leland(sample_index: Any) -> str:
    """The sample chunk about Leland, North Carolina (it names the 1986 film)."""
    found = [c.id for c in sample_index.store.chunks if "Leland" in c.text and "Maximum Overdrive" in c.text]
    assert found, "the sample corpus should have the chunk about Leland, North Carolina"
    return str(found[0])


def two_steps_then_answer(chunk_id: str) -> list[Any]:
    """A model that searches, reads, and (asked to, at a cap of 2) answers with a citation."""
    return [
        tool_call("keyword_search", {"keywords": ["Leland, North Carolina"], "top_k": 3}, id="call_kw"),
        tool_call("chunk_read", {"chunk_ids": [chunk_id]}, id="call_read"),
        text(f"The film shot near Leland in 1986 is Maximum Overdrive.\nAnswer: Stephen King [{chunk_id}]"),
    ]


def assert_valid_tool_history(messages: list[dict[str, Any]]) -> None:
    """OpenAI's rule: every assistant tool call is answered by a ``tool`` message right after it,
    and every ``tool`` message answers a call of the assistant message before it."""
    pending: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, f"tool message answers no open call: {message}"
            pending.remove(message["tool_call_id"])
            continue
        assert not pending, f"tool calls {pending} unanswered before a {message['role']} message"
        if message["role"] == "assistant":
            pending = [c["id"] for c in message.get("tool_calls") or []]
    assert not pending, f"tool calls {pending} left unanswered"


def tool_message(request: ChatRequest, call_id: str) -> dict[str, Any]:
    return next(m for m in request.messages if m["role"] == "tool" and m["tool_call_id"] == call_id)


# -----------------------------------------------------------------------------------------------
# Wire format


def test_tools_tool_results_and_forced_synthesis_on_the_wire(
    openai_server: OpenAIStubServer, openai_env: str, sample_index: Any, leland: str
) -> None:
    openai_server.script(two_steps_then_answer(leland))
    graph = build_arag_graph(sample_index, model="gpt-4o-mini")
    out = graph.invoke({"question": QUESTION}, context={"base_url": openai_server.url, "max_steps": 2})

    first, second, synthesis = openai_server.completions
    # The agent's request: the three tools as function schemas, one call per turn, no streaming.
    assert first.body["model"] == "gpt-4o-mini"
    assert first.body["parallel_tool_calls"] is False
    assert not first.stream
    assert first.tool_names == TOOLS
    assert all(t["type"] == "function" and t["function"]["description"] for t in first.tools)
    keyword = first.tool_schema("keyword_search")["parameters"]
    assert keyword["type"] == "object"
    assert set(keyword["properties"]) == {"keywords", "top_k"}
    assert keyword["required"] == ["keywords"]
    assert keyword["properties"]["keywords"]["type"] == "array"
    semantic = first.tool_schema("semantic_search")["parameters"]
    assert set(semantic["properties"]) == {"query", "top_k"} and semantic["required"] == ["query"]
    read = first.tool_schema("chunk_read")["parameters"]
    assert "chunk_ids" in read["properties"] and read["required"] == ["chunk_ids"]
    assert "tracker" not in json.dumps(first.tools), "the injected context tracker leaked into a schema"
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert first.messages[1]["content"] == QUESTION
    assert first.headers["authorization"] == f"Bearer {KEY}"

    # The tool result goes back as a `tool` message answering the call, after the call itself.
    asked = second.messages[-2]
    assert asked["role"] == "assistant"
    assert asked["tool_calls"][0]["id"] == "call_kw"
    assert asked["tool_calls"][0]["function"]["name"] == "keyword_search"
    assert json.loads(asked["tool_calls"][0]["function"]["arguments"]) == {
        "keywords": ["Leland, North Carolina"],
        "top_k": 3,
    }
    assert second.messages[-1]["role"] == "tool"
    assert second.messages[-1]["tool_call_id"] == "call_kw"
    assert "keyword_search" in second.messages[-1]["content"]
    assert second.tool_names == TOOLS and second.body["parallel_tool_calls"] is False

    # At the cap the synthesis request offers no tools and ends with our instruction.
    assert "tools" not in synthesis.body
    assert "parallel_tool_calls" not in synthesis.body
    assert "tool_choice" not in synthesis.body
    assert synthesis.messages[-1] == {"role": "user", "content": SYNTHESIS_INSTRUCTION}
    assert f"[chunk {leland}]" in tool_message(synthesis, "call_read")["content"]
    for request in openai_server.completions:
        assert_valid_tool_history(request.messages)

    assert out["error"] is None
    assert out["answer"] == "Stephen King"
    assert out["citations"] == [leland]
    assert out["steps"] == 2
    assert [s["tool"] for s in out["trajectory"]] == ["keyword_search", "chunk_read"]
    assert leland in out["read_chunks"]
    assert out["retrieved_tokens"] > 0
    assert openai_server.unscripted == 0


def test_streaming_uses_server_sent_events_and_reassembles_tool_calls(
    openai_server: OpenAIStubServer, openai_env: str, sample_index: Any, leland: str
) -> None:
    """In ``messages`` stream mode ChatOpenAI streams; calls arrive split across many chunks."""
    openai_server.script(two_steps_then_answer(leland))
    graph = build_arag_graph(sample_index, model="gpt-4o-mini")
    tokens: list[str] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream(
        {"question": QUESTION},
        context={"base_url": openai_server.url, "max_steps": 2},
        stream_mode=["messages", "values"],
    ):
        if mode == "messages" and isinstance(chunk[0], AIMessageChunk):
            tokens.append(chunk[0].text)
        elif mode == "values":
            final = chunk

    assert len(openai_server.completions) == 3
    assert all(r.stream for r in openai_server.completions)
    assert all(r.body["stream_options"] == {"include_usage": True} for r in openai_server.completions)
    assert final["trajectory"][0]["args"] == {"keywords": ["Leland, North Carolina"], "top_k": 3}
    assert final["trajectory"][1]["args"] == {"chunk_ids": [leland]}
    assert final["answer"] == "Stephen King" and final["citations"] == [leland]
    assert "Answer: Stephen King" in "".join(tokens)
    assert_valid_tool_history(openai_server.completions[-1].messages)


def test_async_run_goes_through_the_async_client(
    openai_server: OpenAIStubServer, openai_env: str, sample_index: Any, leland: str
) -> None:
    openai_server.script(two_steps_then_answer(leland))
    graph = build_arag_graph(sample_index, model="gpt-4o-mini")
    out = asyncio.run(graph.ainvoke({"question": QUESTION}, context={"base_url": openai_server.url, "max_steps": 2}))
    assert out["answer"] == "Stephen King" and out["steps"] == 2
    assert "tools" not in openai_server.completions[-1].body


def test_bad_tool_calls_come_back_to_the_model_as_tool_errors(
    openai_server: OpenAIStubServer, openai_env: str, sample_index: Any, leland: str
) -> None:
    """An unknown tool and invalid JSON arguments, in one turn with a good call (a provider that
    ignores ``parallel_tool_calls``): all three are answered in order, the good one is run."""
    openai_server.script(
        [
            tool_calls(
                call("delete_index", {"confirm": True}, id="call_unknown"),
                ToolCallSpec("semantic_search", '{"query": "Leland', id="call_broken"),
                call("chunk_read", {"chunk_ids": [leland]}, id="call_ok"),
            ),
            text(f"Answer: Stephen King [{leland}]"),
        ]
    )
    graph = build_arag_graph(sample_index, model="gpt-4o-mini")
    out = graph.invoke({"question": QUESTION}, context={"base_url": openai_server.url})

    follow_up = openai_server.completions[1]
    assert_valid_tool_history(follow_up.messages)
    # langchain-core keeps calls with unparsable arguments apart (``invalid_tool_calls``), so
    # they are answered after the parsed ones; every call is still answered exactly once.
    answers = {m["tool_call_id"]: m["content"] for m in follow_up.messages if m["role"] == "tool"}
    assert set(answers) == {"call_unknown", "call_broken", "call_ok"}
    assert "no tool named 'delete_index'" in answers["call_unknown"]
    assert "keyword_search, semantic_search, chunk_read" in answers["call_unknown"]
    assert "not valid JSON" in answers["call_broken"]
    assert f"[chunk {leland}]" in answers["call_ok"]
    assert out["steps"] == 3
    assert out["read_chunks"] == [leland]
    assert out["answer"] == "Stephen King" and out["error"] is None


# -----------------------------------------------------------------------------------------------
# Transient and lasting failures


def test_rate_limit_with_retry_after_is_retried_transparently(
    openai_server: OpenAIStubServer, openai_env: str, sample_index: Any, leland: str
) -> None:
    openai_server.script([rate_limited(retry_after=1), text(f"Answer: Stephen King [{leland}]")])
    graph = build_arag_graph(sample_index, model="gpt-4o-mini")
    out = graph.invoke({"question": QUESTION}, context={"base_url": openai_server.url})

    assert out["error"] is None
    assert out["answer"] == "Stephen King"
    limited, retried = openai_server.completions
    assert retried.body == limited.body
    # The client waited as told (its own first backoff would be under 0.5 s).
    assert retried.recorded.received_at - limited.recorded.received_at >= 0.9


def test_model_that_keeps_failing_ends_the_run_with_a_one_line_error(
    openai_server: OpenAIStubServer, openai_env: str, sample_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARAG_MODEL_RETRIES", "1")
    models._chat_openai.cache_clear()
    openai_server.script([], then=http_error(500, "upstream exploded"))
    graph = build_arag_graph(sample_index, model="gpt-4o-mini")
    out = graph.invoke({"question": QUESTION}, context={"base_url": openai_server.url})

    assert len(openai_server.completions) == 1 + 1  # the first attempt and the one retry ARAG_MODEL_RETRIES allows
    error = out["error"]
    assert isinstance(error, str) and "\n" not in error
    assert "HTTP 500" in error and "upstream exploded" in error
    assert "Traceback" not in error and KEY not in error
    assert out["answer"] == "" and out["steps"] == 0


@pytest.mark.parametrize(
    ("spec", "needle"),
    [("gpt-4o-mini", "OPENAI_API_KEY"), ("not a model name!", "cannot read model spec")],
)
def test_unusable_model_spec_is_a_one_line_error(
    spec: str, needle: str, openai_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ModelSpecError) as info:
        resolve_chat_model(spec)
    message = str(info.value)
    assert needle in message and "\n" not in message


def test_cli_without_key_or_base_url_exits_with_one_line(
    openai_env: str, sample_index: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    code = cli_main(["ask", QUESTION, "--index", str(sample_index.path), "--model", "gpt-4o-mini"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arag: error: ") and "--base-url" in lines[0]


def test_cli_ask_json_against_a_local_server(
    openai_server: OpenAIStubServer,
    openai_env: str,
    sample_index: Any,
    leland: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A local server (vLLM, Ollama, ...) needs no key: only ``--base-url``."""
    monkeypatch.delenv("OPENAI_API_KEY")
    openai_server.script(two_steps_then_answer(leland))
    argv = ["ask", QUESTION, "--index", str(sample_index.path), "--model", "gpt-4o-mini"]
    code = cli_main([*argv, "--base-url", openai_server.url, "--max-steps", "2", "--json"])
    captured = capsys.readouterr()

    assert code == 0, captured.err
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1, captured.out
    record = json.loads(lines[0])
    assert record["answer"] == "Stephen King"
    assert record["citations"] == [leland]
    assert record["steps"] == 2 and record["retrieved_tokens"] > 0
    assert leland in record["read_chunks"]
    assert [(s["tool"], s["args"]) for s in record["trajectory"]] == [
        ("keyword_search", {"keywords": ["Leland, North Carolina"], "top_k": 3}),
        ("chunk_read", {"chunk_ids": [leland]}),
    ]
    assert all(isinstance(s["tokens"], int) and s["tokens"] > 0 for s in record["trajectory"])
    assert len(openai_server.completions) == 3
    assert openai_server.completions[0].tool_names == TOOLS
    assert "tools" not in openai_server.completions[-1].body
    # One output-token limit for arag ask and arag eval: the configuration's default, the paper's >= 16384.
    limits = [c.body.get("max_completion_tokens", c.body.get("max_tokens")) for c in openai_server.completions]
    assert limits == [AragContext().max_tokens] * 3 and AragContext().max_tokens == 16384
