"""The stand-ins: the OpenAI stand-in's faults look to a real client the way real faults do, and a
silent server stops when its block ends.

Fault-injection tests (issue 7) rely on each scripted fault reaching ``ChatOpenAI`` as the error a
real endpoint would cause; these checks pin that down without an index or a graph.
"""

from __future__ import annotations

import itertools
import socket
import time

import openai
import pytest
from langchain_core.messages import AIMessageChunk
from langchain_openai import ChatOpenAI

from tests.fakes import sentinel_key
from tests.stubs.openai_server import (
    OpenAIStubServer,
    Reply,
    disconnect,
    empty,
    http_error,
    invalid_arguments,
    stall,
    text,
    tool_call,
    truncated,
)
from tests.stubs.silent_server import SilentServer


def chat(server: OpenAIStubServer, *, retries: int = 0, timeout: float = 10.0) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.url, api_key=sentinel_key("stub"), max_retries=retries, timeout=timeout
    )


def test_replies_follow_the_script_then_the_fallback(openai_server: OpenAIStubServer) -> None:
    openai_server.script([text("one"), empty()], then=text("again"))
    model = chat(openai_server)
    assert [model.invoke("q").content for _ in range(4)] == ["one", "", "again", "again"]
    assert openai_server.served == 4 and openai_server.unscripted == 0


def test_running_out_of_script_is_a_client_error_not_a_hang(openai_server: OpenAIStubServer) -> None:
    openai_server.script([])
    with pytest.raises(openai.BadRequestError, match="script exhausted"):
        chat(openai_server, retries=3).invoke("q")
    assert openai_server.unscripted == 1  # 400 is not retried


def test_responder_and_endless_scripts(openai_server: OpenAIStubServer) -> None:
    openai_server.script(lambda request: text(f"you said {request.json()['messages'][-1]['content']}"))
    assert chat(openai_server).invoke("hello").content == "you said hello"
    openai_server.script(itertools.repeat(tool_call("chunk_read", {"chunk_ids": ["1"]})))
    ids = {chat(openai_server).invoke("q").tool_calls[0]["id"] for _ in range(3)}
    assert len(ids) == 3  # each served call gets its own ID


def test_streamed_reply_reassembles_text_and_tool_calls(openai_server: OpenAIStubServer) -> None:
    openai_server.script([tool_call("semantic_search", {"query": "a fairly long query text"}, id="c1")])
    merged: AIMessageChunk | None = None
    for chunk in chat(openai_server).stream("q"):
        merged = chunk if merged is None else merged + chunk
    assert merged is not None
    assert merged.tool_calls == [
        {"name": "semantic_search", "args": {"query": "a fairly long query text"}, "id": "c1", "type": "tool_call"}
    ]
    assert openai_server.completions[0].stream


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (http_error(500, "boom"), openai.InternalServerError),
        (http_error(401, "bad key"), openai.AuthenticationError),
        (disconnect(), openai.APIConnectionError),
        (stall(3.0), openai.APITimeoutError),
    ],
    ids=["500", "401", "disconnect", "stall"],
)
def test_faults_raise_what_real_endpoints_cause(
    openai_server: OpenAIStubServer, fault: Reply, error: type[Exception]
) -> None:
    openai_server.script([fault])
    with pytest.raises(error):
        chat(openai_server, timeout=0.5).invoke("q")


def test_truncated_body_fails_to_parse(openai_server: OpenAIStubServer) -> None:
    openai_server.script([truncated()])
    with pytest.raises(ValueError):  # json.JSONDecodeError
        chat(openai_server).invoke("q")


def test_invalid_arguments_become_an_invalid_tool_call(openai_server: OpenAIStubServer) -> None:
    openai_server.script([invalid_arguments("semantic_search", '{"query": ')])
    reply = chat(openai_server).invoke("q")
    assert reply.tool_calls == []
    assert reply.invalid_tool_calls[0]["name"] == "semantic_search"


def test_retry_after_is_sent_and_honoured(openai_server: OpenAIStubServer) -> None:
    openai_server.script([http_error(429, retry_after=1), text("ok")])
    assert chat(openai_server, retries=1).invoke("q").content == "ok"
    limited, retried = openai_server.requests
    assert retried.received_at - limited.received_at >= 0.9


@pytest.mark.timeout(60)
def test_stopping_does_not_wait_for_a_stalled_reply() -> None:
    """The reply stalls for an hour: a stop() that waited for it fails this test by its timeout
    (no timed assertion, so a loaded machine cannot fail it)."""
    server = OpenAIStubServer().start()
    port = server.port
    server.script([stall(3600.0)])
    model = chat(server, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        model.invoke("q")
    server.stop()
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


@pytest.mark.parametrize("drip", [False, True], ids=["silent", "dripping"])
def test_a_silent_server_is_stopped_when_its_block_ends(drip: bool) -> None:
    """Leaving the ``with`` block ends the accepting thread, not merely a wait for it (an accept()
    that nothing woke made every test using the server wait out the join's 5 s, then leave the
    thread behind)."""
    with SilentServer(drip=drip) as server, socket.create_connection(("127.0.0.1", server.port), timeout=5):
        port = server.port
        while server.accepted == 0:  # the accepting thread has taken one connection and waits for the next
            time.sleep(0.01)
    assert not server._thread.is_alive()
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
