"""The one checked reader of a tool message's artifact, and the read set it gives (core/artifacts).

A served run's caller can send tool messages of its own, artifacts included, so every field is read
as a known type within bounds, and a chunk counts as read only when the message holds its text. The
tests use hand-made messages and a small index (a cheap encoder), so that the mutation run
(bench/mutation.py) can run them for every mutant.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from arag_graph.core.artifacts import artifact_of, read_in
from arag_graph.core.documents import SourceDocument
from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from tests.fakes import NamedFakeEmbeddings

EMPTY = {"tokens": 0, "chunk_ids": [], "read": [], "args": {}, "error": False, "not_run": False}


def tool(artifact: Any, content: str = "nothing here", name: str = "chunk_read") -> ToolMessage:
    return ToolMessage(content, tool_call_id="t1", name=name, artifact=artifact)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> HierarchicalIndex:
    documents = [
        SourceDocument("Marie Curie won the Nobel Prize in Physics in 1903.", id="curie"),
        SourceDocument("The Eiffel Tower stands in Paris.", id="eiffel"),
        SourceDocument("The Nile flows into the Mediterranean Sea.", id="nile"),
    ]
    out = tmp_path_factory.mktemp("artifacts") / "index"
    return build_index(documents, out, embeddings=NamedFakeEmbeddings(), progress=False)


def test_an_artifact_a_tool_wrote_reads_back_as_written() -> None:
    written = {
        "tokens": 42,
        "chunk_ids": ["a", "b"],
        "read": ["b"],
        "args": {"chunk_ids": ["a", "b"]},
        "error": True,
        "not_run": True,
        "warning": "two keywords were dropped",
    }
    assert artifact_of(tool(written)) == written
    assert artifact_of(tool({**written, "error": False, "not_run": False})) == {
        **written,
        "error": False,
        "not_run": False,
    }
    args = {"query": "x"}
    read = artifact_of(tool({"args": args}))["args"]
    assert read == args and read is not args  # a copy: the reader never hands out the caller's dict


@pytest.mark.parametrize(
    "message",
    [
        AIMessage("no tool message"),
        HumanMessage("nor this"),
        tool(["not", "a", "dict"]),
        tool("text"),
        tool(None),
        "a plain string",
        None,
    ],
    ids=["ai", "human", "list", "str", "none", "plain-str", "plain-none"],
)
def test_an_artifact_of_anything_but_a_tool_messages_dict_reads_as_empty(message: Any) -> None:
    assert artifact_of(message) == EMPTY


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (0, 0),
        (1, 1),
        (12.9, 12),
        (91, 91),  # not capped at 10 * 9
        (10**9, 10**9),
        (10**9 + 1, 10**9),
        (10**30, 10**9),
        (-5, 0),
        (True, 0),
        (False, 0),
        ("lots", 0),
        ("12", 0),
        (None, 0),
        ([3], 0),
        (math.nan, 0),
        (math.inf, 0),
        (-math.inf, 0),
    ],
)
def test_an_artifacts_token_count_is_a_whole_number_from_0_to_a_billion(tokens: Any, expected: int) -> None:
    counted = artifact_of(tool({"tokens": tokens}))["tokens"]
    assert counted == expected and type(counted) is int


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (["a", 7, "b"], ["a", "7", "b"]),
        (("a", "b"), ["a", "b"]),
        ([True, None, 1.5, {"a": 1}, ["x"], b"raw", "ok", False, 0], ["ok", "0"]),
        ("abc", []),  # one string is no list of IDs (not its letters)
        (b"abc", []),
        (5, []),
        ({"a": 1}, []),
        (None, []),
        ([f"c{i}" for i in range(1500)], [f"c{i}" for i in range(1000)]),  # at most 1,000
    ],
    ids=["mixed", "tuple", "junk", "str", "bytes", "int", "dict", "none", "too-many"],
)
def test_an_artifacts_chunk_ids_and_read_are_lists_of_id_strings(ids: Any, expected: list[str]) -> None:
    read = artifact_of(tool({"chunk_ids": ids, "read": ids}))
    assert read["chunk_ids"] == expected and read["read"] == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"args": "x"}, {}),
        ({"args": ["x"]}, {}),
        ({"error": "yes", "not_run": 1}, {"error": False, "not_run": False}),
        ({"error": 1, "not_run": "true"}, {"error": False, "not_run": False}),
        ({"error": True}, {"error": True, "not_run": False}),
        ({"not_run": True}, {"error": False, "not_run": True}),
        ({"warning": ""}, {}),
        ({"warning": ["w"]}, {}),
        ({"warning": 5}, {}),
        ({"warning": "w" * 600}, {"warning": "w" * 500}),
        ({"warning": "w" * 500}, {"warning": "w" * 500}),
    ],
)
def test_an_artifacts_other_fields_are_of_their_type_or_dropped(raw: dict[str, Any], expected: dict[str, Any]) -> None:
    assert artifact_of(tool(raw)) == {**EMPTY, **expected}


def test_the_read_set_without_an_index_is_every_read_a_tool_message_claims_in_order() -> None:
    messages = [
        HumanMessage("Q?"),  # messages other than tool messages are passed over, not an end
        AIMessage("", tool_calls=[{"type": "tool_call", "id": "t1", "name": "chunk_read", "args": {}}]),
        tool({"read": ["b", "a"], "chunk_ids": ["z"]}),
        AIMessage("thinking"),
        tool({"read": ["a", "c"]}),
        tool("not an artifact"),
        tool({"read": "d"}),
    ]
    assert read_in(messages) == ["b", "a", "c"]  # once each, in the order first read; chunk_ids are not read
    assert read_in([]) == [] and read_in(None) == []
    assert read_in([HumanMessage("Q?")]) == []


def test_the_read_set_with_the_runs_index_holds_only_chunks_whose_text_the_message_returned(
    index: HierarchicalIndex,
) -> None:
    curie, eiffel, nile = (index.get_chunk(i) for i in ("curie", "eiffel", "nile"))
    assert curie is not None and eiffel is not None and nile is not None
    messages = [
        HumanMessage("Q?"),
        tool({"read": ["curie", "eiffel"]}, content=f"[chunk curie] {curie.text}\n[chunk eiffel] not its text"),
        tool({"read": ["nile", "unknown"]}, content=f"{nile.text} and an unknown chunk"),  # unknown: not a chunk
        tool({"read": ["eiffel"]}, content="nothing here"),  # a forged claim: the text is not there
        tool({"read": ["curie"]}, content=curie.text),
    ]
    assert read_in(messages, index) == ["curie", "nile"]
    assert read_in(messages) == ["curie", "eiffel", "nile", "unknown"]  # what the claims alone would give
    assert read_in([HumanMessage("Q?")], index) == [] and read_in(None, index) == []
