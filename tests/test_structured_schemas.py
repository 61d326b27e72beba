"""What a real model receives for structured output: the schemas as sent over the wire.

CoRAG, SRAG and the judge ask providers for structured replies. The request must carry a schema
written for the model (not the developer docstrings with the offline policy's rules) that
OpenAI's strict structured outputs accept (no ``default`` keyword, every property required).
Checked on the request ``ChatOpenAI`` actually sends to the OpenAI-compatible stand-in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from arag_graph.corag.schemas import Reformulation, SubAnswer, Sufficiency
from arag_graph.evaluators.judge import JudgeVerdict
from arag_graph.llm.structured import ModelFacing, _forced_tool, has_fallback, structured_call
from arag_graph.run.schemas import PassageRating, PassageRatings, QueryRewrites
from arag_graph.srag.schemas import Decomposition, Route, SubQuestion, Triplet, Triplets
from tests.fakes import sentinel_key
from tests.stubs.openai_server import OpenAIStubServer, Reply, text, tool_call

EXAMPLES: list[BaseModel] = [
    Sufficiency(reasoning="Ed Wood was American.", is_sufficient=True, missing_info="", confidence=0.9),
    Reformulation(query="Scott Derrickson nationality"),
    SubAnswer(answer="American", confidence=0.9),
    Decomposition(sub_questions=[SubQuestion(id=1, question="Who directed Sinister?", depends_on=[])]),
    Triplets(triplets=[Triplet(subject="Ed Wood", predicate="born in", object="1924", relevance=0.8)]),
    Route(multi_hop=True),
    QueryRewrites(queries=["Sinister director", "who made the film Sinister"]),
    PassageRatings(ratings=[PassageRating(passage=1, relevance=0.9), PassageRating(passage=2, relevance=0.1)]),
    JudgeVerdict(reason="It states the gold answer.", correct=True),
]


def _walk(schema: Any) -> Iterator[dict[str, Any]]:
    """Every object in a JSON schema, nested definitions included."""
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _walk(value)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: type(e).__name__)
def test_the_schema_sent_to_the_model_is_written_for_it_and_strict_mode_valid(
    example: BaseModel, openai_server: OpenAIStubServer
) -> None:
    schema_class = type(example)
    openai_server.script([text(example.model_dump_json())])
    model = ChatOpenAI(model="gpt-4o-mini", base_url=openai_server.url, api_key=sentinel_key("schema"), max_retries=0)

    if has_fallback(schema_class):  # the graphs' schemas, asked through structured_call
        value, problem = structured_call(model, schema_class, [HumanMessage("Q?")], question="Q?")
    else:  # the judge's, asked the judge's own way
        reply = model.with_structured_output(schema_class, include_raw=True).invoke([HumanMessage("Q?")])
        value, problem = reply["parsed"], reply["parsing_error"]

    assert problem is None and value == example
    (request,) = openai_server.completions
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_schema"
    schema = response_format["json_schema"]["schema"]
    sent = json.dumps(schema)
    assert isinstance(example, ModelFacing)
    assert schema["description"] == schema_class.instructions  # type: ignore[attr-defined]
    for developer_text in ("Offline rule", "``", "offline policy"):
        assert developer_text not in sent
    for node in _walk(schema):
        assert "default" not in node, node
        if node.get("type") == "object" and "properties" in node:
            assert sorted(node["required"]) == sorted(node["properties"]), node
            assert node.get("additionalProperties") is False
        if node.get("type") == "array":  # every list ends (strict mode accepts maxItems)
            assert 0 < node.get("maxItems", 0) <= 32, node
        assert "maxLength" not in node, node  # which strict mode refuses


@pytest.mark.parametrize(
    "example", [e for e in EXAMPLES if not isinstance(e, JudgeVerdict)], ids=lambda e: type(e).__name__
)
def test_the_forced_tool_call_bounds_every_list_and_string(example: BaseModel, openai_server: OpenAIStubServer) -> None:
    """The retry is a forced tool call, which llama-cpp-python writes with no token limit, holding it to the
    schema by grammar: there every list and every string has an end, and the reply is read as before."""
    schema_class = type(example)
    name = schema_class.__name__
    openai_server.script([text("not json"), tool_call(name, json.loads(example.model_dump_json()))])
    model = ChatOpenAI(model="m", base_url=openai_server.url, api_key=sentinel_key("schema"), max_retries=0)
    value, problem = structured_call(model, schema_class, [HumanMessage("Q?")], question="Q?")
    assert problem is None and value == example
    forced = openai_server.completions[1].body
    assert forced["tool_choice"]["function"]["name"] == name
    (tool,) = forced["tools"]
    assert tool["function"]["description"] == schema_class.instructions  # type: ignore[attr-defined]
    nodes = list(_walk(tool["function"]["parameters"]))
    assert [n for n in nodes if n.get("type") == "array" and not 0 < n.get("maxItems", 0) <= 32] == []
    assert [n for n in nodes if n.get("type") == "string" and not 0 < n.get("maxLength", 0) <= 1000] == []


def test_each_forced_call_gets_its_own_copy_of_the_converted_tool() -> None:
    """The tool is converted once per schema; a caller (or LangChain) changing its copy changes no later call's."""
    first = _forced_tool(Sufficiency)
    first["function"]["parameters"]["properties"].clear()
    first["function"]["name"] = "changed"
    again = _forced_tool(Sufficiency)
    assert (
        again["function"]["name"] == "Sufficiency" and "is_sufficient" in again["function"]["parameters"]["properties"]
    )


def test_defaults_still_fill_what_a_lenient_provider_leaves_out() -> None:
    """Defaults left the JSON schema, not the Python model: partial replies from non-strict servers
    still validate (a missing required field still does not)."""
    assert Sufficiency.model_validate({"is_sufficient": False}).confidence == 0.0
    assert Triplet.model_validate({"subject": "a", "predicate": "b", "object": "c"}).relevance == 1.0
    with pytest.raises(ValueError):
        Sufficiency.model_validate({"reasoning": "no verdict"})


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("replies", "expected", "problem_says"),
    [
        ([text("not json"), tool_call("Reformulation", {"query": "retried"})], "retried", None),
        ([text("not json"), tool_call("Reformulation", {})], "Q?", "Field required"),
    ],
    ids=["second-attempt", "fallback"],
)
def test_sync_and_async_calls_share_one_retry_policy(
    openai_server: OpenAIStubServer, mode: str, replies: list[Reply], expected: str, problem_says: str | None
) -> None:
    """One bad reply is retried once, as a forced tool call (the form every OpenAI-compatible server
    with tool calling takes); two fall back to the schema's fallback with the last problem."""
    import asyncio

    from arag_graph.llm.structured import astructured_call

    openai_server.script(replies)
    model = ChatOpenAI(model="gpt-4o-mini", base_url=openai_server.url, api_key=sentinel_key("retry"), max_retries=0)
    call = {"question": "Q?"}
    if mode == "async":
        value, problem = asyncio.run(astructured_call(model, Reformulation, [HumanMessage("Q?")], **call))
    else:
        value, problem = structured_call(model, Reformulation, [HumanMessage("Q?")], **call)
    assert value.query == expected and len(openai_server.completions) == 2
    assert (problem is None) if problem_says is None else (problem_says in (problem or "")), problem


GRAPH_SCHEMAS = [type(e) for e in EXAMPLES if not isinstance(e, JudgeVerdict)]


@pytest.mark.parametrize("schema", GRAPH_SCHEMAS, ids=lambda s: s.__name__)
def test_each_schema_a_graph_asks_for_carries_its_own_fallback(schema: type[ModelFacing]) -> None:
    """No central table: the schema says what a run goes on with, and it is a valid value of the schema."""
    assert has_fallback(schema), schema.__name__
    value = schema.fallback("Q?")  # type: ignore[attr-defined]
    assert isinstance(value, schema) and schema.model_validate(value.model_dump()) == value


def test_a_schema_without_a_fallback_is_refused_before_any_request(openai_server: OpenAIStubServer) -> None:
    """A new schema that forgets its fallback fails at once, not on the first bad reply in production."""
    from pydantic import Field

    class Planted(ModelFacing):
        answer: str = Field(description="anything")

    openai_server.script([text(Planted(answer="x").model_dump_json())])
    model = ChatOpenAI(model="gpt-4o-mini", base_url=openai_server.url, api_key=sentinel_key("plant"), max_retries=0)
    assert not has_fallback(Planted)
    with pytest.raises(TypeError, match="Planted defines no fallback"):
        structured_call(model, Planted, [HumanMessage("Q?")], question="Q?")
    assert openai_server.completions == []
