"""The three A-RAG tools as a model meets them: argument variants, error messages, snippets, token
counts, the already-read notice, the "w/o chunk_read" setting and per-run read sets.

Most tests run against the session's real sample index (100 HotpotQA passages, real encoder, real
Chroma). Tools are created per test, so every test starts from an empty read set.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from arag_graph.core.documents import SourceDocument
from arag_graph.core.limits import TOP_K_MAX
from arag_graph.core.tokens import count_tokens
from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.tools.toolkit import (
    chunk_read,
    create_retrieval_tools,
    keyword_search,
    semantic_search,
)
from tests.fakes import NamedFakeEmbeddings

_call_ids = itertools.count(1)

# A keyword found in far more than TOP_K_MAX sample passages, to see how many hits come back.
COMMON = "the"
LELAND_QUERY = "Which films were shot in or around Leland, North Carolina?"


class Conversation:
    """One run's messages, with tools called as ``ToolNode`` calls them: the state injected as the runtime."""

    def __init__(self) -> None:
        self.messages: list[Any] = [HumanMessage("Q?")]

    def call(self, tool: BaseTool, **args: Any) -> ToolMessage:
        tool_call = {"type": "tool_call", "id": f"call-{next(_call_ids)}", "name": tool.name, "args": args}
        runtime = SimpleNamespace(state={"messages": list(self.messages)}, context=None)
        message = tool.invoke({**tool_call, "args": {**args, "runtime": runtime}})
        assert isinstance(message, ToolMessage), type(message)
        self.messages.extend([AIMessage("", tool_calls=[tool_call]), message])
        return message


_conversation = Conversation()


def call(tool: BaseTool, **args: Any) -> ToolMessage:
    """Invoke ``tool`` the way a tool node does, within one long conversation shared by a test module."""
    message = _conversation.call(tool, **args)
    assert message.tool_call_id and message.name == tool.name
    return message


def artifact(message: ToolMessage) -> dict[str, Any]:
    assert isinstance(message.artifact, dict), f"no artifact: {message!r}"
    return message.artifact


@pytest.fixture
def tools(sample_index: HierarchicalIndex) -> SimpleNamespace:
    global _conversation
    _conversation = Conversation()  # each test is a run of its own
    keyword, semantic, read = create_retrieval_tools(sample_index)
    return SimpleNamespace(keyword=keyword, semantic=semantic, read=read)


@pytest.fixture(scope="module")
def split_index(tmp_path_factory: pytest.TempPathFactory) -> HierarchicalIndex:
    """A small index (fake embeddings) in which one document is cut into chunks ``essay#0``..."""
    sentences = [
        f"Paragraph {n} of the essay discusses the history of the lighthouse keeper's family." for n in range(8)
    ]
    documents = [
        SourceDocument("Marie Curie won the Nobel Prize in Physics in 1903.", id="curie", title="Marie Curie"),
        SourceDocument(" ".join(sentences), id="essay", title="Essay"),
        SourceDocument("The Eiffel Tower stands in Paris.", id="eiffel", title="Eiffel Tower"),
    ]
    out = tmp_path_factory.mktemp("split-index") / "index"
    return build_index(documents, out, embeddings=NamedFakeEmbeddings(), chunk_size=40, progress=False)


def shown_ids(message: ToolMessage) -> list[str]:
    return re.findall(r"^\[\d+\] chunk (\S+)", message.content, flags=re.MULTILINE)


# --------------------------------------------------------------------------------------------
# The model-facing schema


def test_schemas_show_models_only_their_arguments(tools: SimpleNamespace) -> None:
    expected = {
        "keyword_search": {"keywords", "top_k"},
        "semantic_search": {"query", "top_k"},
        "chunk_read": {"chunk_ids", "adjacent"},
    }
    for tool in (tools.keyword, tools.semantic, tools.read):
        schema = tool.tool_call_schema.model_json_schema()
        assert set(schema["properties"]) == expected[tool.name]  # the run's state is injected, never shown
        assert tool.description and len(tool.description) > 60
    assert tools.keyword.tool_call_schema.model_json_schema()["properties"]["keywords"]["type"] == "array"


# --------------------------------------------------------------------------------------------
# keyword_search


@pytest.mark.parametrize(
    "keywords",
    [
        ["Leland", "Sanford"],
        "Leland, Sanford",
        "Leland; Sanford",
        "Leland\nSanford",
        '["Leland", "Sanford"]',
        ("Leland", "Sanford"),
        ["  Leland ", "Sanford", ""],
    ],
    ids=["list", "comma", "semicolon", "newline", "json", "tuple", "padded"],
)
def test_keyword_list_variants_search_the_same(
    tools: SimpleNamespace, sample_index: HierarchicalIndex, keywords: Any
) -> None:
    message = call(tools.keyword, keywords=keywords)
    assert message.status == "success"
    expected = [h.chunk_id for h in sample_index.keyword_search(["Leland", "Sanford"], 5)]
    assert len(expected) == 5
    assert artifact(message)["chunk_ids"] == expected
    assert shown_ids(message) == expected
    assert "keyword_search(['Leland', 'Sanford'])" in message.content


def test_one_keyword_as_a_bare_string_is_not_split_into_letters(tools: SimpleNamespace) -> None:
    message = call(tools.keyword, keywords="Leland")
    ids = artifact(message)["chunk_ids"]
    assert ids and ids[0] in ("2", "5")
    assert "keyword_search(['Leland'])" in message.content


@pytest.mark.parametrize(
    ("top_k", "expected"),
    [(0, 1), (-3, 1), (1, 1), (7, 7), ("7", 7), (2.0, 2), ("3.0", 3), (20, 20), (99, TOP_K_MAX), ("many", 5)],
)
def test_top_k_is_clamped_to_1_through_20(tools: SimpleNamespace, top_k: Any, expected: int) -> None:
    keyword = call(tools.keyword, keywords=[COMMON], top_k=top_k)
    semantic = call(tools.semantic, query="a film director", top_k=top_k)
    assert len(artifact(keyword)["chunk_ids"]) == expected
    assert len(artifact(semantic)["chunk_ids"]) == expected
    assert len(shown_ids(keyword)) == expected


def test_top_k_clamps_in_the_plain_functions_too(sample_index: HierarchicalIndex) -> None:
    assert len(keyword_search(sample_index, [COMMON], 500).chunk_ids) == TOP_K_MAX
    assert len(keyword_search(sample_index, [COMMON], -1).chunk_ids) == 1
    assert len(keyword_search(sample_index, [COMMON], float("inf")).chunk_ids) == TOP_K_MAX
    assert len(keyword_search(sample_index, [COMMON], float("nan")).chunk_ids) == 5
    assert len(semantic_search(sample_index, "a river", 0).chunk_ids) == 1


@pytest.mark.parametrize(
    "keywords",
    [[], "", "   ", ["", "  "], ["!!", "..."], "?!, --", '["", "  "]', "[]"],
    ids=[
        "empty-list",
        "empty-string",
        "blank",
        "blanks",
        "punctuation",
        "punct-string",
        "json-blanks",
        "json-empty",
    ],
)
def test_keywords_without_letters_get_a_usable_message(tools: SimpleNamespace, keywords: Any) -> None:
    message = call(tools.keyword, keywords=keywords)
    facts = artifact(message)
    assert facts["error"] is True and facts["tokens"] == 0 and facts["chunk_ids"] == []
    assert "at least one keyword" in message.content
    assert "keyword_search(keywords=[" in message.content  # shows how to call it


def test_punctuation_keywords_are_dropped_when_others_remain(
    tools: SimpleNamespace, sample_index: HierarchicalIndex
) -> None:
    message = call(tools.keyword, keywords=["!!", "Leland"])
    assert artifact(message)["chunk_ids"] == [h.chunk_id for h in sample_index.keyword_search(["Leland"], 5)]


def test_no_match_says_what_to_try(tools: SimpleNamespace) -> None:
    message = call(tools.keyword, keywords=["Zxqvbnmw"])
    facts = artifact(message)
    assert facts["chunk_ids"] == [] and facts["tokens"] == 0 and not facts["error"]
    assert "no chunk" in message.content and "semantic_search" in message.content


def test_keyword_snippets_are_the_sentences_that_contain_a_keyword(sample_index: HierarchicalIndex) -> None:
    from arag_graph.index.text import keyword_chunks

    keywords = ["Leland", "North Carolina", "Sanford"]
    patterns = [re.compile(r"(?<!\w)" + re.escape(k.lower())) for k in keywords]
    hits = sample_index.keyword_search(keywords, 10)
    assert len(hits) >= 4
    for hit in hits:
        chunk = sample_index.get_chunk(hit.chunk_id)
        assert chunk is not None
        expected = [s for s in chunk.sentence_texts() if any(p.search(s.lower()) for p in patterns)]
        # A chunk matched only through its title (contextual header) shows its first sentence; at most
        # five matching sentences per chunk, the first ones.
        assert list(hit.snippets) == (expected[:5] or chunk.sentence_texts()[:1]), hit.chunk_id
        # With contextual headers (the default) the title counts too; snippets stay the chunk's own sentences.
        text = keyword_chunks([chunk], sample_index.manifest.header_max_chars)[0].text.lower()
        assert hit.score == sum(len(p.findall(text)) * len(k) for p, k in zip(patterns, keywords, strict=True))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_keyword_snippets_keep_at_most_five_sentences_per_chunk(tmp_path: Any) -> None:
    # Issue 35, defect 5: the paper's released tool keeps at most five sentences per chunk; a common
    # keyword otherwise shows nearly every sentence of a long chunk as its "snippet".
    from arag_graph.index.hierarchical import KEYWORD_SNIPPET_SENTENCES

    long = " ".join(f"The film number {i} was shot in reel {i}." for i in range(1, 9))
    docs = [SourceDocument(long, id="reels", title="Reels"), SourceDocument("A film.", id="short", title="Short")]
    index = build_index(docs, tmp_path / "i", embeddings=NamedFakeEmbeddings(), contextual_headers=False)
    hit = next(h for h in index.keyword_search(["the", "film"], 5) if h.chunk_id == "reels")
    assert KEYWORD_SNIPPET_SENTENCES == 5
    assert list(hit.snippets) == [f"The film number {i} was shot in reel {i}." for i in range(1, 6)]
    keyword_tool = next(t for t in create_retrieval_tools(index) if t.name == "keyword_search")
    message = call(keyword_tool, keywords=["the", "film"])
    assert "reel 5." in message.content and "reel 6." not in message.content
    shown = [s for h in index.keyword_search(["the", "film"], 5) for s in h.snippets]
    assert artifact(message)["tokens"] == sum(count_tokens(s) for s in shown)  # what the model got, no more


def test_keyword_tokens_count_exactly_the_snippets_returned(
    tools: SimpleNamespace, sample_index: HierarchicalIndex
) -> None:
    message = call(tools.keyword, keywords=["Leland", "North Carolina"], top_k=4)
    hits = sample_index.keyword_search(["Leland", "North Carolina"], 4)
    snippets = [s for h in hits for s in h.snippets]
    assert snippets and all(f"- {s}" in message.content for s in snippets)
    assert artifact(message)["tokens"] == sum(count_tokens(s) for s in snippets)
    assert artifact(message)["read"] == []  # snippets are not a read
    assert "chunk_read" in message.content  # tells the model how to see more


# --------------------------------------------------------------------------------------------
# semantic_search


@pytest.mark.parametrize("query", ["", "   ", "\n"])
def test_empty_query_gets_a_usable_message(tools: SimpleNamespace, query: str) -> None:
    message = call(tools.semantic, query=query)
    facts = artifact(message)
    assert facts["error"] is True and facts["tokens"] == 0 and facts["chunk_ids"] == []
    assert "non-empty query" in message.content and "semantic_search(query=" in message.content


def test_query_given_as_a_list_is_joined(tools: SimpleNamespace, sample_index: HierarchicalIndex) -> None:
    message = call(tools.semantic, query=["Leland", "North Carolina", "films"], top_k=3)
    assert artifact(message)["chunk_ids"] == [
        h.chunk_id for h in sample_index.semantic_search("Leland North Carolina films", 3)
    ]


def test_semantic_snippets_are_matched_sentences_in_chunk_order(sample_index: HierarchicalIndex) -> None:
    """Each hit's snippets: its sentences nearest the query (by the stored vectors), in chunk order."""
    stored, rows = sample_index.sentences.all_vectors()
    vectors = {row: np.asarray(e, dtype=np.float64) for row, e in zip(rows, stored, strict=True)}
    query = np.asarray(sample_index.embeddings.embed_query(LELAND_QUERY), dtype=np.float64)
    hits = sample_index.semantic_search(LELAND_QUERY, 5)
    assert len(hits) == 5
    for hit in hits:
        chunk = sample_index.get_chunk(hit.chunk_id)
        assert chunk is not None
        sentences = chunk.sentence_texts()
        positions = [sentences.index(s) for s in hit.snippets]
        assert positions == sorted(set(positions)), "snippets not in chunk order"
        similarity = {p: float(vectors[(hit.chunk_id, p)] @ query) for p in range(len(sentences))}
        best = max(similarity, key=similarity.__getitem__)
        assert best in positions
        assert hit.score == pytest.approx(similarity[best], abs=1e-4)  # max aggregation
        others = [similarity[p] for p in similarity if p not in positions]
        if others:  # a sentence left out is never closer than one shown
            assert min(similarity[p] for p in positions) >= max(others) - 1e-5
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_semantic_tokens_count_exactly_the_snippets_returned(
    tools: SimpleNamespace, sample_index: HierarchicalIndex
) -> None:
    message = call(tools.semantic, query=LELAND_QUERY, top_k=3)
    hits = sample_index.semantic_search(LELAND_QUERY, 3)
    snippets = [s for h in hits for s in h.snippets]
    assert all(f"- {s}" in message.content for s in snippets)
    assert artifact(message)["tokens"] == sum(count_tokens(s) for s in snippets) > 0
    assert artifact(message)["chunk_ids"] == [h.chunk_id for h in hits]


# --------------------------------------------------------------------------------------------
# chunk_read


@pytest.mark.parametrize(
    "chunk_ids",
    [["5", "6"], [5, 6], [5.0, "6"], "5, 6", "5;6", '["5", "6"]', "[5, 6]", [" 5 ", "6", "5"]],
    ids=["strings", "ints", "floats", "comma", "semicolon", "json-strings", "json-ints", "padded-dupes"],
)
def test_chunk_id_variants_read_the_same_chunks(
    tools: SimpleNamespace, sample_index: HierarchicalIndex, chunk_ids: Any
) -> None:
    message = call(tools.read, chunk_ids=chunk_ids)
    facts = artifact(message)
    assert facts["read"] == ["5", "6"] and not facts["error"]
    texts = [sample_index.get_chunk(i).text for i in ("5", "6")]  # type: ignore[union-attr]
    assert all(t in message.content for t in texts)
    assert facts["tokens"] == sum(count_tokens(t) for t in texts)


def test_a_single_integer_id_is_read(tools: SimpleNamespace) -> None:
    assert artifact(call(tools.read, chunk_ids=5))["read"] == ["5"]


def test_second_read_of_a_chunk_is_a_short_notice_costing_nothing(tools: SimpleNamespace) -> None:
    first = call(tools.read, chunk_ids=["5"])
    assert artifact(first)["tokens"] > 0
    again = call(tools.read, chunk_ids=["5"])
    facts = artifact(again)
    assert facts == {"tokens": 0, "chunk_ids": ["5"], "read": [], "error": False}
    assert "already read" in again.content
    assert len(again.content) < 120 and "Leland" not in again.content  # no text repeated


def test_already_read_and_new_chunks_in_one_call(tools: SimpleNamespace, sample_index: HierarchicalIndex) -> None:
    call(tools.read, chunk_ids=["5"])
    message = call(tools.read, chunk_ids=["5", "7"])
    facts = artifact(message)
    assert facts["read"] == ["7"] and facts["chunk_ids"] == ["5", "7"]
    assert facts["tokens"] == count_tokens(sample_index.get_chunk("7").text)  # type: ignore[union-attr]
    assert "[chunk 5] already read" in message.content


def test_chunks_a_search_only_showed_are_not_read(tools: SimpleNamespace, sample_index: HierarchicalIndex) -> None:
    """C_read holds what a tool returned in full (the artifact's ``read``), never what a search showed
    as snippets (its ``chunk_ids``): reading a chunk after finding it returns its whole text."""
    from arag_graph.tools.toolkit import read_in

    found = call(tools.keyword, keywords=["Leland"], top_k=3)
    semantic = call(tools.semantic, query=LELAND_QUERY, top_k=3)
    shown = list(dict.fromkeys(artifact(found)["chunk_ids"] + artifact(semantic)["chunk_ids"]))
    assert shown and artifact(found)["read"] == [] and artifact(semantic)["read"] == []
    assert set(read_in(_conversation.messages)) == set()
    message = call(tools.read, chunk_ids=shown)
    facts = artifact(message)
    assert facts["read"] == shown and "already read" not in message.content
    texts = [sample_index.get_chunk(cid).text for cid in shown]  # type: ignore[union-attr]
    assert facts["tokens"] == sum(count_tokens(t) for t in texts)
    assert set(read_in(_conversation.messages)) == set(shown)


def test_unknown_ids_are_named_with_a_hint(tools: SimpleNamespace) -> None:
    message = call(tools.read, chunk_ids=["zz", "999"])
    facts = artifact(message)
    assert facts["error"] is True and facts["tokens"] == 0 and facts["read"] == []
    assert "zz" in message.content and "999" in message.content
    assert "exactly as search results show them" in message.content


def test_known_and_unknown_ids_mixed_reads_the_known(tools: SimpleNamespace, sample_index: HierarchicalIndex) -> None:
    message = call(tools.read, chunk_ids=["5", "nope"])
    facts = artifact(message)
    assert facts["read"] == ["5"] and facts["error"] is False
    assert sample_index.get_chunk("5").text in message.content  # type: ignore[union-attr]
    assert "Unknown chunk ID(s): nope" in message.content


@pytest.mark.parametrize("chunk_ids", [[], "", "  ", "[]", [" ", ""]])
def test_a_read_of_no_ids_gets_a_usable_message(tools: SimpleNamespace, chunk_ids: Any) -> None:
    message = call(tools.read, chunk_ids=chunk_ids)
    assert artifact(message) == {"tokens": 0, "chunk_ids": [], "read": [], "error": True}
    assert message.content == (
        'chunk_read needs chunk IDs from search results, e.g. chunk_read(chunk_ids=["12", "40"]).'
    )


def test_a_read_shows_each_chunk_under_its_header_and_links(
    tools: SimpleNamespace, sample_index: HierarchicalIndex
) -> None:
    """The exact text a model gets: each chunk's ``[chunk ID] title="..." (previous, next)`` header and
    text, blocks one blank line apart, then the unknown IDs, comma-separated."""
    five, seven = sample_index.get_chunk("5"), sample_index.get_chunk("7")
    assert five is not None and seven is not None and five.title and seven.title
    message = call(tools.read, chunk_ids=["5", "zz", "7", "999"])
    assert message.content == (
        f'[chunk 5] title="{five.title}" (previous: 4, next: 6)\n{five.text}\n\n'
        f'[chunk 7] title="{seven.title}" (previous: 6, next: 8)\n{seven.text}\n\n'
        "Unknown chunk ID(s): zz, 999. Use IDs exactly as search results show them."
    )


def test_the_plain_chunk_read_fills_the_callers_read_set(sample_index: HierarchicalIndex) -> None:
    """Without a graph, the caller's ``read`` set is C_read: what a call returned joins it, and the next
    call answers those chunks with the notice. Only the chunk asked for is read unless ``adjacent``."""
    seen: set[str] = set()
    first = chunk_read(sample_index, ["5"], seen)
    assert first.read == ["5"] and seen == {"5"}
    again = chunk_read(sample_index, ["5", "7"], seen)
    assert again.read == ["7"] and seen == {"5", "7"} and "[chunk 5] already read" in again.content
    assert chunk_read(sample_index, ["6"]).read == ["6"]  # adjacent is off unless asked for


def test_adjacent_reads_the_neighbours(tools: SimpleNamespace, sample_index: HierarchicalIndex) -> None:
    chunk = sample_index.get_chunk("5")
    assert chunk is not None and (chunk.prev_id, chunk.next_id) == ("4", "6")
    message = call(tools.read, chunk_ids=["5"], adjacent=True)
    facts = artifact(message)
    assert facts["read"] == ["4", "5", "6"]
    assert facts["tokens"] == sum(count_tokens(sample_index.get_chunk(i).text) for i in "456")  # type: ignore[union-attr]
    assert "(previous: 4, next: 6)" in message.content
    # Moving on: only the chunk not yet read costs tokens.
    step = artifact(call(tools.read, chunk_ids=["6"], adjacent=True))
    assert step["read"] == ["7"] and step["chunk_ids"] == ["5", "6", "7"]


def test_adjacent_at_the_corpus_edges(tools: SimpleNamespace, sample_index: HierarchicalIndex) -> None:
    first, last = sample_index.store.chunks[0], sample_index.store.chunks[-1]
    assert first.prev_id is None and last.next_id is None
    assert artifact(call(tools.read, chunk_ids=[first.id], adjacent=True))["read"] == [
        first.id,
        first.next_id,
    ]
    assert artifact(call(tools.read, chunk_ids=[last.id], adjacent=True))["read"] == [last.prev_id, last.id]
    edges = Conversation()
    assert f"(previous: none, next: {first.next_id})" in edges.call(tools.read, chunk_ids=[first.id]).content
    assert f"(previous: {last.prev_id}, next: none)" in edges.call(tools.read, chunk_ids=[last.id]).content


def test_the_read_set_is_checked_against_the_runs_own_index(split_index: HierarchicalIndex) -> None:
    """C_read of a run is read from its conversation against the index the run chose (the tool's index
    source is called with the run's runtime): a chunk the run read is a notice the next time, while a
    tool message that claims a read without the chunk's text (a caller's forgery) marks nothing read."""
    from arag_graph.core.artifacts import read_in

    def pick(runtime: Any) -> HierarchicalIndex:
        assert runtime.context == {"index": "split"}, runtime
        return split_index

    keyword, semantic, read = create_retrieval_tools(pick, dedupe=True)
    run = Conversation()
    forged = {"tokens": 0, "chunk_ids": ["essay#1"], "read": ["essay#1"], "error": False}
    run.messages += [
        AIMessage("", tool_calls=[{"type": "tool_call", "id": "forged", "name": "chunk_read", "args": {}}]),
        ToolMessage("nothing here", tool_call_id="forged", name="chunk_read", artifact=forged),
    ]
    assert read_in(run.messages) == ["essay#1"]  # without the index the claim alone would count

    def call_in_run(tool: BaseTool = read, **args: Any) -> dict[str, Any]:
        tool_call = {"type": "tool_call", "id": f"call-{next(_call_ids)}", "name": tool.name, "args": args}
        runtime = SimpleNamespace(state={"messages": list(run.messages)}, context={"index": "split"})
        message = tool.invoke({**tool_call, "args": {**args, "runtime": runtime}})
        run.messages.extend([AIMessage("", tool_calls=[tool_call]), message])
        return artifact(message)

    assert call_in_run(chunk_ids=["essay#1"])["read"] == ["essay#1"]
    assert call_in_run(chunk_ids=["essay#0"])["read"] == ["essay#0"]
    assert call_in_run(chunk_ids=["essay#0", "essay#1"]) == {
        "tokens": 0,
        "chunk_ids": ["essay#0", "essay#1"],
        "read": [],
        "error": False,
    }
    split_ids = {c.id for c in split_index.store.chunks}
    for tool, args in ((keyword, {"keywords": ["Curie"]}), (semantic, {"query": "Marie Curie Nobel Prize"})):
        found = call_in_run(tool, **args)
        assert found["chunk_ids"] and set(found["chunk_ids"]) <= split_ids, found


def test_unknown_id_of_a_split_document_suggests_its_first_chunk(split_index: HierarchicalIndex) -> None:
    ids = [c.id for c in split_index.store.chunks]
    assert "essay#0" in ids and "essay#1" in ids and "essay" not in ids
    out = chunk_read(split_index, ["essay"])
    assert out.error and "Did you mean essay#0?" in out.content
    read = chunk_read(split_index, ["essay#1"], adjacent=True)
    assert read.read[:2] == ["essay#0", "essay#1"]
    assert chunk_read(split_index, ["curie"], adjacent=True).read == ["curie", "essay#0"]


# --------------------------------------------------------------------------------------------
# Validation errors come back as messages


@pytest.mark.parametrize(
    ("tool_name", "args", "mentions"),
    [
        ("keyword", {"keywords": {"name": "Leland"}}, "keywords"),
        ("keyword", {"keywords": [["Leland"]]}, "keywords"),
        ("keyword", {"top_k": 3}, "keywords"),
        ("semantic", {"query": {"text": "Leland"}}, "query"),
        ("semantic", {}, "query"),
        ("read", {"chunk_ids": {"id": 5}}, "chunk_ids"),
        ("read", {"chunk_ids": ["5"], "adjacent": "sometimes"}, "adjacent"),
    ],
)
def test_invalid_arguments_become_an_error_tool_message(
    tools: SimpleNamespace, tool_name: str, args: dict[str, Any], mentions: str
) -> None:
    tool = getattr(tools, tool_name)
    message = call(tool, **args)
    assert message.status == "error"
    assert message.content.startswith(f"Invalid arguments for {tool.name} (")
    assert mentions in message.content
    assert message.content.endswith(f"). Call it like {USAGE[tool.name]}.")
    assert "Traceback" not in message.content and "\n" not in message.content


# How each tool's validation error shows a model a correct call.
USAGE = {
    "keyword_search": 'keyword_search(keywords=["Marie Curie", "Nobel Prize"], top_k=5)',
    "semantic_search": 'semantic_search(query="where was the author born", top_k=5)',
    "chunk_read": 'chunk_read(chunk_ids=["12", "40"])',
}


def test_an_unknown_tool_name_is_refused_with_the_choices(sample_index: HierarchicalIndex) -> None:
    from arag_graph.tools.toolkit import ToolSettings, retrieval_tool

    choices = "['keyword_search', 'semantic_search', 'chunk_read']"
    with pytest.raises(ValueError) as caught:
        retrieval_tool(sample_index, "web_search", ToolSettings.for_tools(["keyword_search"]))
    assert str(caught.value) == f"unknown tool 'web_search'; choose from {choices}"
    with pytest.raises(ValueError) as caught:
        create_retrieval_tools(sample_index, tools=["chunk_read", "web_search"])
    assert str(caught.value) == f"unknown tool(s) ['web_search']; choose from {choices}"


@pytest.mark.parametrize("chunk_ids", [{"5": "x"}, True], ids=["mapping", "bool"])
def test_a_plain_read_of_what_is_no_id_list_names_it_as_unknown(
    sample_index: HierarchicalIndex, chunk_ids: Any
) -> None:
    """The plain function takes what a model wrote: a value that is no list of IDs is one unknown ID,
    named as given (a mapping's keys are not read one by one)."""
    out = chunk_read(sample_index, chunk_ids)
    assert out.error and out.read == [] and out.chunk_ids == []
    assert out.content.startswith(f"Unknown chunk ID(s): {chunk_ids}. Use IDs exactly")


# --------------------------------------------------------------------------------------------
# "w/o chunk_read": searches return whole chunks


def test_without_chunk_read_searches_return_full_text_every_time(sample_index: HierarchicalIndex) -> None:
    """The paper's "w/o chunk_read" and A-RAG (Naive): whole chunks each time they are found, counted."""
    made = create_retrieval_tools(sample_index, tools=["keyword_search", "semantic_search"])
    assert [t.name for t in made] == ["keyword_search", "semantic_search"]
    keyword, semantic = made
    assert all("full text" in t.description and "chunk_read" not in t.description for t in made)

    run = Conversation()
    first = run.call(keyword, keywords=["Leland"], top_k=2)
    hits = sample_index.keyword_search(["Leland"], 2)
    chunks = [sample_index.get_chunk(h.chunk_id) for h in hits]
    facts = artifact(first)
    assert facts["read"] == facts["chunk_ids"] == [h.chunk_id for h in hits]
    assert all(c is not None and c.text in first.content for c in chunks)
    assert facts["tokens"] == sum(count_tokens(c.text) for c in chunks if c is not None)
    assert "chunk_read" not in first.content

    second = run.call(semantic, query=LELAND_QUERY, top_k=5)
    repeated = [i for i in artifact(second)["chunk_ids"] if i in facts["read"]]
    assert repeated, "expected the Leland chunks again"
    assert set(repeated) <= set(artifact(second)["read"])  # returned again, as the paper's agent sees them
    returned = [sample_index.get_chunk(i) for i in artifact(second)["read"]]
    assert artifact(second)["tokens"] == sum(count_tokens(c.text) for c in returned if c is not None)
    assert "already read" not in second.content


def test_deduplicated_full_text_shows_a_notice_for_chunks_already_returned(sample_index: HierarchicalIndex) -> None:
    keyword, semantic = create_retrieval_tools(sample_index, tools=["keyword_search", "semantic_search"], dedupe=True)
    run = Conversation()
    facts = artifact(run.call(keyword, keywords=["Leland"], top_k=2))
    second = run.call(semantic, query=LELAND_QUERY, top_k=5)
    repeated = [i for i in artifact(second)["chunk_ids"] if i in facts["read"]]
    assert repeated and not set(artifact(second)["read"]) & set(repeated)
    fresh = [sample_index.get_chunk(i) for i in artifact(second)["read"]]
    assert artifact(second)["tokens"] == sum(count_tokens(c.text) for c in fresh if c is not None)
    assert second.content.count("already read") == len(repeated)
    # a keyword search after them: every chunk it finds was returned before, so each is a notice
    third = run.call(keyword, keywords=["Leland"], top_k=2)
    assert artifact(third)["read"] == [] and artifact(third)["tokens"] == 0
    assert third.content.count("already read") == len(artifact(third)["chunk_ids"]) == 2


def test_full_text_flag_and_tool_subsets(sample_index: HierarchicalIndex) -> None:
    (semantic,) = create_retrieval_tools(sample_index, tools=["semantic_search"], full_text=False)
    message = call(semantic, query=LELAND_QUERY, top_k=2)
    assert artifact(message)["read"] == [] and "- " in message.content
    with pytest.raises(ValueError, match="unknown tool"):
        create_retrieval_tools(sample_index, tools=["web_search"])


# --------------------------------------------------------------------------------------------
# The read set belongs to one run: it is read off the run's own conversation


def test_a_call_outside_any_conversation_has_read_nothing(sample_index: HierarchicalIndex) -> None:
    read = create_retrieval_tools(sample_index)[2]
    first = read.invoke({"chunk_ids": ["5"]})
    again = read.invoke({"chunk_ids": ["5"]})
    assert "Leland" in first and "Leland" in again  # no run, no C_read: the tools keep no state


def test_one_set_of_tools_serves_many_conversations(sample_index: HierarchicalIndex) -> None:
    read = create_retrieval_tools(sample_index)[2]
    a, b = Conversation(), Conversation()
    assert artifact(a.call(read, chunk_ids=["5"]))["read"] == ["5"]
    assert artifact(b.call(read, chunk_ids=["5"]))["read"] == ["5"]  # another run: its text again
    assert artifact(a.call(read, chunk_ids=["5", "6"]))["read"] == ["6"]


def _read_everything(tool: BaseTool, ids: Sequence[str], seed: int) -> tuple[Conversation, list[dict[str, Any]]]:
    order = list(ids)
    random.Random(seed).shuffle(order)
    run = Conversation()
    results = [artifact(run.call(tool, chunk_ids=[cid])) for cid in order]
    results.append(artifact(run.call(tool, chunk_ids=list(ids))))
    return run, results


def test_concurrent_runs_never_see_each_others_reads(sample_index: HierarchicalIndex) -> None:
    read = create_retrieval_tools(sample_index)[2]  # one tool object shared by all runs
    ids = [c.id for c in sample_index.store.chunks[:25]]
    expected_tokens = sum(count_tokens(c.text) for c in sample_index.store.chunks[:25])
    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(_read_everything, [read] * 8, [ids] * 8, range(8)))
    for _run, results in outcomes:
        *singles, again = results
        assert all(len(r["read"]) == 1 and r["tokens"] > 0 for r in singles)
        assert again["read"] == [] and again["tokens"] == 0
        assert sorted(i for r in singles for i in r["read"]) == sorted(ids)
        assert sum(r["tokens"] for r in singles) == expected_tokens


def test_concurrent_runs_with_their_own_tool_sets(sample_index: HierarchicalIndex) -> None:
    ids = [c.id for c in sample_index.store.chunks[25:40]]
    runs = [create_retrieval_tools(sample_index)[2] for _ in range(6)]
    barrier = threading.Barrier(len(runs))

    def run(tool: BaseTool) -> list[str]:
        barrier.wait()
        conversation = Conversation()
        read: list[str] = []
        for cid in ids:
            read.extend(artifact(conversation.call(tool, chunk_ids=[cid]))["read"])
        return read

    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        assert all(r == ids for r in pool.map(run, runs))


def test_artifact_is_json_serialisable(tools: SimpleNamespace) -> None:
    """Graph state and LangSmith traces store artifacts as JSON."""
    for message in (call(tools.keyword, keywords="Leland"), call(tools.read, chunk_ids=["5", "x"])):
        assert json.loads(json.dumps(message.artifact)) == message.artifact


def test_a_plain_string_input_is_one_argument_not_its_characters(sample_index: HierarchicalIndex) -> None:
    """``tool.invoke("...")`` passes the string as the first argument, past the schema's coercion."""
    keyword, semantic, read = create_retrieval_tools(sample_index)
    found = keyword.invoke("Scott Derrickson")
    assert "keyword_search(['Scott Derrickson'])" in found
    chunk = read.invoke("12")
    assert chunk.startswith("[chunk 12]") and "[chunk 1]" not in chunk and "[chunk 2]" not in chunk
    assert "[chunk 13]" in read.invoke("12, 13")
    assert semantic.invoke("who directed Sinister").startswith("semantic_search('who directed Sinister')")


# ---------------------------------------------------------------------------------------------
# The tools stand alone


_STANDALONE_PROBE = """
import json, sys
from arag_graph.index.load import load_index
index = load_index(sys.argv[1])  # what an app that has an index has imported already
before = {m for m in sys.modules if m.startswith("arag_graph")}
from arag_graph import create_retrieval_tools
keyword, semantic, read = create_retrieval_tools(index)
keyword.invoke({"keywords": ["Leland"]})
semantic.invoke({"query": "films shot in Leland"})
read.invoke({"chunk_ids": ["5"]})
import arag_graph.tools.mcp_server
print(json.dumps(sorted({m for m in sys.modules if m.startswith("arag_graph")} - before)))
"""


def test_the_tools_and_the_mcp_server_load_no_graph_model_or_run_layer(sample_index: HierarchicalIndex) -> None:
    """An app that only wants the three tools (given its index) loads the tools, core and index: no run
    layer, no model layer, no offline policy, no graph, no CLI (it was 28 modules, the run and llm
    layers among them). Counted in a fresh interpreter, each tool called once, the MCP server imported."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _STANDALONE_PROBE, str(sample_index.path)], capture_output=True, text=True, check=True
    )
    added = json.loads(done.stdout.strip().splitlines()[-1])
    layers = {name.split(".")[1] for name in added if name.count(".") >= 1}
    assert layers <= {"core", "index", "tools"}, added
    assert len(added) <= 15, added


# ---------------------------------------------------------------------------------------------
# What the schemas tell a model about sizes (a server that holds calls to the schema by grammar ends
# lists and strings there: llama-cpp-python wrote one semantic_search query for minutes without them)


def _nodes(schema: object) -> list[dict]:
    if isinstance(schema, dict):
        return [schema, *(n for v in schema.values() for n in _nodes(v))]
    if isinstance(schema, list):
        return [n for v in schema for n in _nodes(v)]
    return []


@pytest.mark.parametrize("style", ["package", "paper"])
@pytest.mark.parametrize("rule", ["word", "substring"])
def test_every_list_and_string_in_a_tools_schema_is_bounded(style: str, rule: str) -> None:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from arag_graph.tools.toolkit import ToolSettings, retrieval_tool

    settings = ToolSettings(style=style, keyword_rule=rule)  # type: ignore[arg-type]
    for name in ("keyword_search", "semantic_search", "chunk_read"):
        tool = retrieval_tool(None, name, settings)  # as bound to a model: LangChain's tool-call schema
        parameters = convert_to_openai_tool(tool)["function"]["parameters"]
        for node in _nodes(parameters):
            if node.get("type") == "array":
                assert 0 < node.get("maxItems", 0) <= 32, (name, node)
            if node.get("type") == "string":
                assert 0 < node.get("maxLength", 0) <= 1000, (name, node)
            if node.get("type") == "integer":
                assert (node.get("minimum"), node.get("maximum")) == (1, 20), (name, node)


def test_bounds_are_shown_not_enforced() -> None:
    """A model that writes more than the schema says is still read, and clamped as before."""
    from arag_graph.tools.toolkit import ChunkReadArgs, KeywordSearchArgs, SemanticSearchArgs

    many = KeywordSearchArgs.model_validate({"keywords": [f"k{i}" for i in range(40)], "top_k": 500})
    assert len(many.keywords) == 40 and many.top_k == 20
    assert len(SemanticSearchArgs.model_validate({"query": "q" * 5000}).query) == 5000
    assert len(ChunkReadArgs.model_validate({"chunk_ids": [str(i) for i in range(30)]}).chunk_ids) == 30
