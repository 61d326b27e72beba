"""What leaves a chat model: decoded (llama.cpp's HTML-escaped replies) and redacted, whole or streamed.

Unit tests of :mod:`arag_graph.llm.openai_chat` on hand-made replies, no server: every field a reply
carries (text, tool calls valid and invalid, extra fields, a structured reply's ``parsed``, the
result's ``llm_output``), and a stream cut anywhere. The end-to-end paths are in test_secrets.py,
test_endpoint_rule.py and test_local_model_replies.py; these are the tests the mutation harness maps
to the module (bench/mutation.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import BaseModel

from arag_graph.llm import openai_chat
from tests.fakes import sentinel_key

KEY = sentinel_key("chat")


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARAG_API_KEY", KEY)


class Found(BaseModel):
    answer: str
    sources: list[str]


def test_a_reply_is_decoded_then_redacted_in_its_text_tool_calls_and_extra_fields() -> None:
    message = AIMessage(
        content=f"It&#39;s {KEY}",
        additional_kwargs={"refusal": f"no &amp; {KEY}"},
        tool_calls=[{"name": "search", "args": {"q": f"O&#39;Neil {KEY}", "n": 3}, "id": "1"}],
        invalid_tool_calls=[{"name": "search", "args": f'{{"q": "{KEY}"}}', "id": "2", "error": "bad JSON"}],
    )
    out = openai_chat.redacted_message(message)
    assert out.content == "It's ***"
    assert out.additional_kwargs == {"refusal": "no &amp; ***"}  # extra fields: redacted, left encoded
    assert out.tool_calls == [{"name": "search", "args": {"q": "O'Neil ***", "n": 3}, "id": "1", "type": "tool_call"}]
    assert out.invalid_tool_calls[0]["args"] == '{"q": "***"}' and out.invalid_tool_calls[0]["error"] == "bad JSON"
    assert message.content == f"It&#39;s {KEY}"  # a copy: the model's own message is left as it was


def test_a_parsed_structured_reply_is_decoded_and_redacted_as_a_model_or_as_plain_json() -> None:
    """``parsed`` (a JSON-schema reply as the OpenAI client parsed it) was decoded but not redacted when
    it was a pydantic model: the field-by-field scrub does not look inside objects."""
    as_model = AIMessage(content="", additional_kwargs={"parsed": Found(answer=f"a &lt; b {KEY}", sources=[KEY])})
    parsed = openai_chat.redacted_message(as_model).additional_kwargs["parsed"]
    assert isinstance(parsed, Found) and parsed == Found(answer="a < b ***", sources=["***"])
    as_json = AIMessage(content="", additional_kwargs={"parsed": {"answer": f"&amp; {KEY}", "n": [1, "&#39;"]}})
    assert openai_chat.redacted_message(as_json).additional_kwargs["parsed"] == {"answer": "& ***", "n": [1, "'"]}


def test_a_json_text_reply_is_decoded_value_by_value_and_other_text_as_text() -> None:
    decoded = openai_chat.redacted_message(AIMessage(content='{"q": "say &#34;hi&#34;", "n": 1}')).content
    assert decoded == '{"q": "say \\"hi\\"", "n": 1}'
    assert openai_chat.redacted_message(AIMessage(content='"&#34;"')).content == '"&#34;"'  # a JSON string: as it is
    assert openai_chat.redacted_message(AIMessage(content="{not json &lt;")).content == "{not json <"


def test_a_whole_result_keeps_generation_info_and_scrubs_llm_output() -> None:
    result = ChatResult(
        generations=[ChatGeneration(message=AIMessage(content=KEY), generation_info={"finish_reason": "stop"})],
        llm_output={"token_usage": {"total_tokens": 3}, "system_fingerprint": KEY},
    )
    out = openai_chat._redacted_result(result)
    assert out.llm_output == {"token_usage": {"total_tokens": 3}, "system_fingerprint": "***"}
    assert out.generations[0].generation_info == {"finish_reason": "stop"}
    assert out.generations[0].message.content == "***"
    empty = ChatResult(generations=[ChatGeneration(message=AIMessage(content="x"))], llm_output=None)
    assert openai_chat._redacted_result(empty).llm_output is None


def stream(redactor: openai_chat._ChunkRedactor, chunks: list[AIMessageChunk]) -> list[ChatGenerationChunk]:
    out = [redactor.chunk(ChatGenerationChunk(message=c, generation_info={"seen": i})) for i, c in enumerate(chunks)]
    rest = redactor.rest()
    return out + ([rest] if rest is not None else [])


def test_streamed_text_decodes_references_split_across_pieces_and_keeps_generation_info() -> None:
    pieces = ["It&#3", "9;s ", f"{KEY[:9]}", f"{KEY[9:]} &am", "p; end"]
    out = stream(openai_chat._ChunkRedactor(), [AIMessageChunk(content=p) for p in pieces])
    assert "".join(str(c.message.content) for c in out) == "It's *** & end"
    assert [c.generation_info for c in out[: len(pieces)]] == [{"seen": i} for i in range(len(pieces))]


def test_streamed_tool_call_arguments_are_redacted_and_the_raw_calls_carry_the_same_pieces() -> None:
    first, second = '{"q": "' + KEY[:10], KEY[10:] + '"}'
    chunks = [
        AIMessageChunk(
            content="",
            tool_call_chunks=[{"index": 0, "args": first, "name": "search", "id": "c1"}],
            additional_kwargs={"tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": first, "name": "s"}}]},
        ),
        AIMessageChunk(
            content="",
            tool_call_chunks=[{"index": 0, "args": second, "name": None, "id": None}],
            additional_kwargs={"tool_calls": [{"index": 0, "function": {"arguments": second}}], "x": KEY},
        ),
    ]
    out = stream(openai_chat._ChunkRedactor(), chunks)
    args = "".join(c.message.tool_call_chunks[0]["args"] for c in out)
    assert args == '{"q": "***"}'
    raw = "".join(c.message.additional_kwargs["tool_calls"][0]["function"]["arguments"] for c in out)
    assert raw == args  # the raw calls say exactly what tool_call_chunks say
    assert out[0].message.tool_call_chunks[0]["name"] == "search" and out[0].message.tool_call_chunks[0]["id"] == "c1"
    assert out[0].message.additional_kwargs["tool_calls"][0]["function"]["name"] == "s"
    assert out[1].message.additional_kwargs["x"] == "***"
    assert out[-1].message.tool_call_chunks[0]["index"] == 0


def test_content_blocks_are_scrubbed_and_a_stream_that_held_nothing_ends_without_a_chunk() -> None:
    redactor = openai_chat._ChunkRedactor()
    chunk = redactor.chunk(ChatGenerationChunk(message=AIMessageChunk(content=[{"type": "text", "text": KEY}])))
    assert chunk.message.content == [{"type": "text", "text": "***"}]
    assert redactor.rest() is None


def test_a_chunk_message_given_whole_has_its_tool_call_chunks_redacted_too() -> None:
    message = AIMessageChunk(content="", tool_call_chunks=[{"index": 0, "args": f'{{"q": "{KEY}"}}', "name": "s"}])
    out = openai_chat.redacted_message(message)
    assert [c["args"] for c in out.tool_call_chunks] == ['{"q": "***"}']


def test_content_given_as_a_list_is_redacted_not_decoded_and_never_parsed() -> None:
    out = openai_chat.redacted_message(AIMessage(content=["&", "a &amp; b", {"type": "text", "text": KEY}]))
    assert out.content == ["&", "a &amp; b", {"type": "text", "text": "***"}]
    result = ChatResult(generations=[ChatGeneration(message=AIMessage(content="x"))], llm_output={})
    assert openai_chat._redacted_result(result).llm_output is None  # nothing to report: none, as for None


def test_raw_tool_calls_carry_the_redacted_piece_of_their_own_index_and_odd_entries_pass() -> None:
    long = '{"q": "' + "x" * 200 + KEY  # longer than what the redactor holds back, so pieces flow
    raw = [{"index": 0, "function": {"arguments": long}}, {"index": 1, "function": {"arguments": "{}"}}, "odd"]
    redactor = openai_chat._ChunkRedactor()
    message = AIMessageChunk(
        content="",
        tool_call_chunks=[{"index": 0, "args": long, "name": "s", "id": "c1"}],
        additional_kwargs={"tool_calls": raw},
    )
    out = redactor.chunk(ChatGenerationChunk(message=message))
    piece = out.message.tool_call_chunks[0]["args"]
    assert piece and piece.startswith('{"q": "xxx') and KEY not in piece
    calls = out.message.additional_kwargs["tool_calls"]
    assert calls[0]["function"]["arguments"] == piece
    assert calls[1]["function"]["arguments"] == ""  # no chunk of index 1 in this piece: nothing of it yet
    assert calls[2] == "odd"
    rest = redactor.rest()
    assert rest is not None and rest.message.tool_call_chunks[0]["type"] == "tool_call_chunk"
    assert piece + rest.message.tool_call_chunks[0]["args"] == '{"q": "' + "x" * 200 + "***"
    assert redactor.rest() is None  # what was held back goes out once


def test_a_chunk_of_another_message_type_and_a_text_only_rest() -> None:
    from langchain_core.messages import ChatMessageChunk

    redactor = openai_chat._ChunkRedactor()
    other = redactor.chunk(ChatGenerationChunk(message=ChatMessageChunk(content=f"a {KEY}", role="assistant")))
    rest = redactor.rest()
    assert rest is not None and other.message.content + rest.message.content == "a ***"
    assert rest.message.additional_kwargs == {} and rest.message.tool_call_chunks == []


# ---------------------------------------------------------------------------------------------
# The reply's length, under the name the server reads


@pytest.mark.parametrize(
    ("base_url", "env_base_url", "field"),
    [
        ("http://127.0.0.1:8080/v1", None, "max_tokens"),  # llama.cpp, vLLM, Ollama, any compatible server
        (None, "http://localhost:11434/v1", "max_tokens"),  # the server given only as $OPENAI_BASE_URL
        (None, None, "max_completion_tokens"),  # OpenAI itself: the name its reasoning models require
        ("https://API.openai.com/v1", None, "max_completion_tokens"),
        ("https://api.openai.com.example.net/v1", None, "max_tokens"),
    ],
)
def test_the_reply_limit_goes_under_the_name_the_endpoint_reads(
    monkeypatch: pytest.MonkeyPatch, base_url: str | None, env_base_url: str | None, field: str
) -> None:
    """llama-cpp-python's server reads only ``max_tokens``: under ``max_completion_tokens`` (what ChatOpenAI
    sends) a run's limit was ignored and replies ran on until the server's context was full."""
    from langchain_core.messages import HumanMessage

    if env_base_url:
        monkeypatch.setenv("OPENAI_BASE_URL", env_base_url)
    else:
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = openai_chat.CompleteReplyChatOpenAI(model="m", api_key="sk-unused", base_url=base_url, max_tokens=16)
    for streamed in (False, True):
        payload = model._get_request_payload([HumanMessage("hi")], stream=streamed)
        assert {k: v for k, v in payload.items() if k in ("max_tokens", "max_completion_tokens")} == {field: 16}
    unlimited = openai_chat.CompleteReplyChatOpenAI(model="m", api_key="sk-unused", base_url=base_url)
    assert not {"max_tokens", "max_completion_tokens"} & set(unlimited._get_request_payload([HumanMessage("hi")]))


# ---------------------------------------------------------------------------------------------
# Tool results as user turns, for servers whose chat format drops ``tool`` messages


def agent_turns() -> list[Any]:
    """A question, two searches in one turn, a read in the next, and the three results."""
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

    return [
        SystemMessage("Use the tools."),
        HumanMessage("Who directed Inception?"),
        AIMessage(
            content="",
            tool_calls=[
                {"name": "keyword_search", "args": {"keywords": ["Inception"]}, "id": "c1"},
                {"name": "semantic_search", "args": {"query": "director"}, "id": "c2"},
            ],
        ),
        ToolMessage("[Inception_0] Inception is a film.", tool_call_id="c1"),
        ToolMessage("[Nolan_0] Nolan directs.", tool_call_id="c2"),
        AIMessage(content="", tool_calls=[{"name": "read_chunk", "args": {"chunk_ids": ["Nolan_0"]}, "id": "c3"}]),
        ToolMessage(
            [{"type": "text", "text": "Nolan directed"}, {"type": "text", "text": "Inception."}], tool_call_id="c3"
        ),
    ]


@pytest.mark.parametrize("streamed", [False, True])
def test_tool_results_go_as_one_user_turn_per_run_naming_each_tool(streamed: bool) -> None:
    """llama-cpp-python's chatml-function-calling writes a ``tool`` turn's header and none of its content,
    so an agent served there never read its results; with the setting it reads them as user turns."""
    model = openai_chat.CompleteReplyChatOpenAI(model="m", api_key="sk-unused", tool_results_as_user=True)
    messages = model._get_request_payload(agent_turns(), stream=streamed)["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[3]["content"] == (
        "Result of keyword_search:\n[Inception_0] Inception is a film.\n\n"
        "Result of semantic_search:\n[Nolan_0] Nolan directs."
    )
    assert messages[5]["content"] == "Result of read_chunk:\nNolan directed\nInception."
    assert [c["function"]["name"] for c in messages[2]["tool_calls"]] == ["keyword_search", "semantic_search"]
    assert messages[2]["content"] == ""  # the calls stay, with text rather than null


def test_tool_results_stay_tool_messages_by_default() -> None:
    model = openai_chat.CompleteReplyChatOpenAI(model="m", api_key="sk-unused")
    messages = model._get_request_payload(agent_turns())["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "[Inception_0] Inception is a film."}


def test_a_result_without_its_call_is_still_shown() -> None:
    """A conversation cut before the call (a trimmed history) keeps the result, from an unnamed tool."""
    turns = openai_chat.tool_results_as_user_turns(
        [{"role": "tool", "tool_call_id": "gone", "content": "text"}, {"role": "user", "content": "next"}]
    )
    assert turns == [{"role": "user", "content": "Result of a tool:\ntext"}, {"role": "user", "content": "next"}]


@pytest.mark.parametrize(("value", "on"), [(None, False), ("0", False), ("1", True), ("true", True), (" ON ", True)])
def test_the_operator_turns_tool_results_as_user_on_for_models_built_from_a_name(
    monkeypatch: pytest.MonkeyPatch, value: str | None, on: bool
) -> None:
    from arag_graph.llm.models import TOOL_RESULTS_AS_USER_ENV, resolve_chat_model

    if value is None:
        monkeypatch.delenv(TOOL_RESULTS_AS_USER_ENV, raising=False)
    else:
        monkeypatch.setenv(TOOL_RESULTS_AS_USER_ENV, value)
    model = resolve_chat_model("local-model", base_url="http://127.0.0.1:9/v1")
    assert getattr(model, "tool_results_as_user", None) is on


def test_an_unreadable_tool_results_setting_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from arag_graph.core.errors import ModelSpecError
    from arag_graph.llm.models import TOOL_RESULTS_AS_USER_ENV, resolve_chat_model

    monkeypatch.setenv(TOOL_RESULTS_AS_USER_ENV, "sometimes")
    with pytest.raises(ModelSpecError) as caught:
        resolve_chat_model("local-model", base_url="http://127.0.0.1:9/v1")
    assert str(caught.value) == "$ARAG_TOOL_RESULTS_AS_USER='sometimes' is not usable; give 1 (on) or 0 (off)"


def test_results_in_any_content_shape_are_shown_as_text() -> None:
    """Content parts without text, plain parts and no content at all; a call without a name; entries that
    are not messages pass through as they were."""
    odd = object()
    turns = openai_chat.tool_results_as_user_turns(
        [
            odd,
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {}}, {"id": "c2"}]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "image_url"}, "plain", {"text": "t"}]},
            {"role": "tool", "tool_call_id": "c2", "content": None},
        ]
    )
    assert turns[:2] == [
        odd,
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {}}, {"id": "c2"}]},
    ]
    assert turns[2:] == [{"role": "user", "content": "Result of a tool:\n\nplain\nt\n\nResult of a tool:\n"}]


def test_an_assistant_turns_text_and_the_stop_words_are_sent_as_given() -> None:
    from langchain_core.messages import HumanMessage

    model = openai_chat.CompleteReplyChatOpenAI(model="m", api_key="sk-unused", tool_results_as_user=True)
    said = AIMessage("Let me search.", tool_calls=[{"name": "keyword_search", "args": {"keywords": ["x"]}, "id": "c1"}])
    payload = model._get_request_payload([HumanMessage("Q?"), said], stop=["\n\nQuestion:"])
    assert payload["messages"][1]["content"] == "Let me search." and payload["stop"] == ["\n\nQuestion:"]
