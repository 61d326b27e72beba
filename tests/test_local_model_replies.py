"""What a real small model served by llama-cpp-python sends, and the one place each kind is handled
(issue 34; the table is in docs/guide/local-models.md).

Each case reproduces, with the OpenAI stand-in (tests/stubs/openai_server.py), a reply or a refusal
logged from SmolLM2-135M behind ``python -m llama_cpp.server --chat_format chatml-function-calling``
in tests/slow/test_local_model.py. :func:`llama_cpp_like` makes the stand-in refuse what that server
refuses (HTTP 500 with a validation error): a ``json_schema`` response format, and an assistant turn
whose text is ``null``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage

from arag_graph.arag.graph import build_arag_graph
from arag_graph.baselines.graph import build_direct_graph
from arag_graph.llm import models
from arag_graph.llm.models import resolve_chat_model
from arag_graph.llm.structured import structured_call
from arag_graph.srag.schemas import Decomposition
from tests.localmodel import Exchange, classify, repeats
from tests.stubs._http import RecordedRequest
from tests.stubs.openai_server import OpenAIStubServer, Reply, http_error, text, tool_call

pytestmark = pytest.mark.integration

QUESTION = "Where is the publisher of Grace Krilanovich's first novel based?"
OVERFLOW = (
    "This model's maximum context length is 4096 tokens. However, you requested 4712 tokens "
    "(4584 in the messages, 128 in the completion). Please reduce the length of the messages or completion."
)


@pytest.fixture
def local_env(monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIStubServer) -> Iterator[str]:
    """A local server needs no key: only the base URL (and no retries, so a refusal is seen once)."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ARAG_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ARAG_MODEL_RETRIES", "0")
    models._chat_openai.cache_clear()
    yield openai_server.url
    models._chat_openai.cache_clear()


def llama_cpp_like(replies: list[Reply]) -> Callable[[RecordedRequest], Reply]:
    """Refuse what llama-cpp-python 0.3.36's server refuses; otherwise the next of ``replies``."""
    pending = iter(replies)

    def respond(request: RecordedRequest) -> Reply:
        body = request.json() or {}
        if (body.get("response_format") or {}).get("type") == "json_schema":
            return http_error(500, "1 validation error: response_format.type: Input should be 'text' or 'json_object'")
        if any(m.get("role") == "assistant" and m.get("content") is None for m in body.get("messages") or []):
            return http_error(500, "7 validation errors: messages.2.content: Input should be a valid string")
        return next(pending)

    return respond


# ---------------------------------------------------------------------------------------------
# The agent's tool calls


def test_the_agent_names_its_tool_choice_so_the_server_shows_the_tools(
    openai_server: OpenAIStubServer, local_env: str, sample_index: Any
) -> None:
    """Without a tool choice, chatml-function-calling leaves the tools out of the prompt and the
    model never calls one: the agent says ``auto`` (OpenAI's own default) explicitly."""
    openai_server.script([text("Answer: Columbus, Ohio")])
    build_arag_graph(sample_index, model="smollm2-135m").invoke(
        {"question": QUESTION}, context={"base_url": local_env, "max_steps": 2}
    )
    first = openai_server.completions[0]
    assert first.body.get("tool_choice") == "auto"
    assert first.tool_names == ["keyword_search", "semantic_search", "chunk_read"]


def test_the_second_agent_turn_is_accepted_by_a_server_that_refuses_null_text(
    openai_server: OpenAIStubServer, local_env: str, sample_index: Any
) -> None:
    """The model's first call comes back to it with the result; llama-cpp-python refuses the turn
    if the call's text is ``null``, which ended every agent run at its second model call."""
    openai_server.script(
        llama_cpp_like([tool_call("semantic_search", {"query": "where"}), text("Answer: Columbus, Ohio")])
    )
    out = build_arag_graph(sample_index, model="smollm2-135m").invoke(
        {"question": QUESTION}, context={"base_url": local_env, "max_steps": 3}
    )
    assert out.get("error") is None, out.get("error")
    assert out["answer"] == "Columbus, Ohio" and out["steps"] == 1
    turn = openai_server.completions[1].messages[-2]
    assert turn["role"] == "assistant" and turn["content"] == "" and turn["tool_calls"]


def test_an_empty_agent_turn_is_answered_by_synthesis(
    openai_server: OpenAIStubServer, local_env: str, sample_index: Any
) -> None:
    """When SmolLM2 chooses to answer, llama-cpp-python's grammar lets it write nothing: the agent
    then asks for the answer without tools instead of ending with "the model returned an empty answer"."""
    openai_server.script(
        [tool_call("semantic_search", {"query": "Two Dollar Radio"}), text(""), text("Answer: Columbus")]
    )
    out = build_arag_graph(sample_index, model="smollm2-135m").invoke(
        {"question": QUESTION}, context={"base_url": local_env, "max_steps": 5}
    )
    assert out.get("error") is None, out.get("error")
    assert out["answer"] == "Columbus" and out["steps"] == 1
    synthesis = openai_server.completions[2]
    assert "tools" not in synthesis.body


def test_a_tool_call_written_as_text_is_no_answer(
    openai_server: OpenAIStubServer, local_env: str, sample_index: Any
) -> None:
    """Logged from SmolLM2's synthesis: the format of its earlier calls, copied as the answer."""
    written = 'functions.keyword_search:\n{"query", the answer rests on the first 50 words of each chunk}'
    openai_server.script([text(written)])
    out = build_arag_graph(sample_index, model="smollm2-135m").invoke(
        {"question": QUESTION}, context={"base_url": local_env, "max_steps": 2}
    )
    assert out["answer"] == ""
    assert out["error"] == "the model wrote a tool call as text (functions.keyword_search: ...) where it had to answer"


# ---------------------------------------------------------------------------------------------
# Structured outputs (CoRAG, SRAG, the ARAGOG techniques, the judge)


def test_a_refused_json_schema_request_is_asked_again_as_a_forced_tool_call(
    openai_server: OpenAIStubServer, local_env: str
) -> None:
    decomposition = {"sub_questions": [{"id": 1, "question": "Who published Grace Krilanovich's first novel?"}]}
    openai_server.script(llama_cpp_like([tool_call("Decomposition", decomposition)]))
    model = resolve_chat_model("smollm2-135m", base_url=local_env)
    value, problem = structured_call(model, Decomposition, [HumanMessage(QUESTION)], question=QUESTION)
    assert problem is None
    assert value.sub_questions[0].question == decomposition["sub_questions"][0]["question"]
    refused, forced = openai_server.completions
    assert refused.body["response_format"]["type"] == "json_schema"
    assert "response_format" not in forced.body
    assert forced.body["tool_choice"]["function"]["name"] == "Decomposition"


# ---------------------------------------------------------------------------------------------
# HTML character references copied from the escaped prompt


def test_character_references_are_decoded_in_answers_and_tool_arguments(
    openai_server: OpenAIStubServer, local_env: str, sample_index: Any
) -> None:
    openai_server.script(
        [
            tool_call("keyword_search", {"keywords": ["Grace Krilanovich&#39;s"]}),
            text("Two Dollar Radio&#39;s home.\nAnswer: Columbus &amp; Ohio"),
        ]
    )
    out = build_arag_graph(sample_index, model="smollm2-135m").invoke(
        {"question": QUESTION}, context={"base_url": local_env, "max_steps": 2}
    )
    assert out["answer"] == "Columbus & Ohio"
    assert out["trajectory"][0]["args"]["keywords"] == ["Grace Krilanovich's"]


def test_character_references_split_across_streamed_pieces_are_decoded(
    openai_server: OpenAIStubServer, local_env: str, sample_index: Any
) -> None:
    # The stand-in streams 12 characters a piece, so this reference is split across two.
    reply = "Answer: The Krilanovich&#39;s publisher, Columbus &lt;Ohio&gt;"
    assert reply.index("&#39;") < 24 < reply.index("&#39;") + 5
    openai_server.script([text(reply)])
    graph = build_direct_graph(sample_index, model="smollm2-135m")
    pieces: list[str] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream(
        {"question": QUESTION}, context={"base_url": local_env}, stream_mode=["messages", "values"]
    ):
        if mode == "messages":
            if isinstance(chunk[0], AIMessageChunk):
                pieces.append(chunk[0].text)
        else:
            final = chunk
    assert openai_server.completions[0].stream
    assert "".join(pieces) == "Answer: The Krilanovich's publisher, Columbus <Ohio>"
    assert final["answer"] == "The Krilanovich's publisher, Columbus <Ohio>"


def test_a_json_reply_is_decoded_value_by_value(openai_server: OpenAIStubServer, local_env: str) -> None:
    """A decoded quote inside a JSON string must not end it early (structured outputs in JSON mode)."""
    openai_server.script([text(json.dumps({"sub_questions": [{"id": 1, "question": "Who wrote &#34;Hamlet&#34;?"}]}))])
    model = resolve_chat_model("smollm2-135m", base_url=local_env)
    value, problem = structured_call(model, Decomposition, [HumanMessage(QUESTION)], question=QUESTION)
    assert problem is None and value.sub_questions[0].question == 'Who wrote "Hamlet"?'


# ---------------------------------------------------------------------------------------------
# Context overflow


def test_a_request_longer_than_the_context_ends_the_run_with_the_fix_in_one_line(
    openai_server: OpenAIStubServer, local_env: str, sample_index: Any
) -> None:
    openai_server.script([http_error(400, OVERFLOW)])
    out = build_direct_graph(sample_index, model="smollm2-135m").invoke(
        {"question": QUESTION}, context={"base_url": local_env}
    )
    error = out["error"]
    assert "\n" not in error and "Traceback" not in error
    assert "does not fit the model's context window" in error and "--n_ctx" in error, error


# ---------------------------------------------------------------------------------------------
# The classifier the real-model tests use (tests/localmodel.py)


TOOLS = ["keyword_search"]


@pytest.mark.parametrize(
    ("exchange", "expected"),
    [
        (Exchange("agent_model", tools=TOOLS, tool_calls=[{"name": "search", "args": {}}]), ["unknown_tool"]),
        (Exchange("agent_model", tools=TOOLS, invalid_tool_calls=[{"name": "x", "args": "{"}]), ["bad_arguments"]),
        (Exchange("check", tools=["Sufficiency"], forced=True, text="It is sufficient."), ["text_instead_of_call"]),
        (Exchange("agent_model", tools=TOOLS, text="keyword_search(['Leland'])"),
         ["text_instead_of_call", "missing_answer_line"]),
        (Exchange("answer_model", text="Columbus, Ohio."), ["missing_answer_line"]),
        (Exchange("answer_model", text="Answer: " + "the house the house the house the house " * 3),
         ["repetition"]),
        (Exchange("answer_model", text="Answer: Columbus", finish_reason="length"), ["repetition"]),
        (Exchange("answer_model", error="BadRequestError: maximum context length is 4096"), ["context_overflow"]),
        (Exchange("answer_model", text="Answer: Krilanovich&#39;s"), ["html_entities"]),
        (Exchange("agent_model", tools=TOOLS, text=""), ["empty_reply"]),
        (Exchange("agent_model", tools=TOOLS, tool_calls=[{"name": "keyword_search", "args": {}}]), []),
    ],
)  # fmt: skip
def test_the_classifier_names_each_kind_of_malformed_reply(exchange: Exchange, expected: list[str]) -> None:
    assert classify(exchange) == expected


def test_repeats_needs_a_run_of_words_back_to_back() -> None:
    assert repeats("a b c d a b c d a b c d")
    assert not repeats("a b c d e f g h i j k l")
