"""The comparable variants of issue 4, run as users run them: offline, on real indexes, from Studio and the CLI.

* ``arag_naive`` and the ``arag`` tool-set ablations answer a HotpotQA-slice question with the offline
  policy, within the step cap, never calling the tool they leave out (and, without ``chunk_read``,
  with searches that hand over whole chunks);
* every graph of ``langgraph.json`` runs on an index built with contextual chunk headers;
* every compiled graph exposes its configuration dataclass as the context schema Studio renders;
* Naive RAG's sentence windows are the top_k sentences, each centred in ``window`` sentences, no more;
* ``arag ask --graph NAME --json`` returns the common output fields for every graph.

Expected values are computed here from the index and the sentence splitter, never copied from a run.
"""

from __future__ import annotations

import importlib.util
import json
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from arag_graph.arag.context import ToolSet
from arag_graph.cli.main import main
from arag_graph.core.sentences import sentence_spans, split_sentences
from arag_graph.core.tokens import count_tokens
from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.registry import build_graph, get_graph_spec
from arag_graph.run.configuration import GraphContext

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
LANGGRAPH = json.loads((REPO / "langgraph.json").read_text(encoding="utf-8"))
GRAPH_IDS: list[str] = list(LANGGRAPH["graphs"])
COMMON_FIELDS = {"answer", "citations", "retrieved_tokens", "steps", "trajectory"}
SEARCHES = {"keyword_search", "semantic_search"}
ALL_TOOLS = {"keyword_search", "semantic_search", "chunk_read"}
NO_RETRIEVAL = {"direct"}
SAMPLE_QUESTIONS = REPO / "arag_graph" / "data" / "sample" / "questions.json"


@pytest.fixture(scope="module")
def slice_questions(hotpot_slice: tuple[Path, Path]) -> list[dict[str, Any]]:
    return json.loads(hotpot_slice[1].read_text(encoding="utf-8"))


def entry_graph(graph_id: str) -> Any:
    """The compiled graph of a langgraph.json entry, loaded from its file and asked of its graph
    factory for a run as ``langgraph dev`` does."""
    from langgraph_sdk.runtime import _ExecutionRuntime

    file, attr = LANGGRAPH["graphs"][graph_id].split(":")
    spec = importlib.util.spec_from_file_location(f"_variants_entry_{graph_id}", REPO / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    factory = getattr(module, attr)
    return factory(_ExecutionRuntime(access_context="threads.create_run", user=None, store=None, context={}))


def shown_chunks(out: dict[str, Any]) -> set[str]:
    return {cid for step in out["trajectory"] for cid in step.get("chunk_ids") or []}


def check_common_output(out: dict[str, Any], index: HierarchicalIndex, graph_id: str) -> None:
    """The output fields every graph returns, consistent with each other and with the index."""
    assert set(out) >= COMMON_FIELDS, f"{graph_id} lacks {COMMON_FIELDS - set(out)}"
    assert out.get("error") is None, f"{graph_id}: {out.get('error')}"
    assert out["answer"].strip(), f"{graph_id} gave an empty answer"
    assert out["steps"] == len(out["trajectory"])
    assert out["retrieved_tokens"] == sum(step["tokens"] for step in out["trajectory"])
    if graph_id in NO_RETRIEVAL:
        assert out["steps"] == 0 and out["retrieved_tokens"] == 0 and out["citations"] == []
        return
    assert out["steps"] >= 1 and out["retrieved_tokens"] > 0
    assert out["citations"], f"{graph_id} cited nothing"
    assert all(index.get_chunk(cid) is not None for cid in out["citations"]), out["citations"]
    assert set(out["citations"]) <= shown_chunks(out), "a citation its own retrieval never returned"


# ---------------------------------------------------------------------------------------------
# 1. A-RAG (Naive) and the tool-set ablations, offline, on the HotpotQA slice

VARIANTS = [
    pytest.param("arag_naive", {}, {"semantic_search"}, id="arag_naive"),
    pytest.param("arag", {"tools": "no_keyword_search"}, {"semantic_search", "chunk_read"}, id="no_keyword_search"),
    pytest.param("arag", {"tools": "no_semantic_search"}, {"keyword_search", "chunk_read"}, id="no_semantic_search"),
    pytest.param("arag", {"tools": "no_chunk_read"}, {"keyword_search", "semantic_search"}, id="no_chunk_read"),
]


def tool_messages(out: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def check_searches_return_whole_chunks(out: dict[str, Any], index: HierarchicalIndex) -> None:
    """Every chunk a search shows comes with its full text (or a note that it was already handed over)."""
    whole_multi_sentence = 0
    searches = [m for m in tool_messages(out) if m.name in SEARCHES and not m.text.startswith("Not run")]
    assert searches, "no search ran"
    for message, step in zip(searches, [s for s in out["trajectory"] if s["tool"] in SEARCHES], strict=True):
        handed_over = []
        for cid in step["chunk_ids"]:
            chunk = index.get_chunk(cid)
            assert chunk is not None
            if chunk.text in message.text:
                handed_over.append(chunk)
                whole_multi_sentence += len(chunk.sentences) > 1
            else:
                assert f"chunk {cid}" in message.text and "already read" in message.text, (cid, message.text[:500])
        # The step's tokens are exactly the whole chunks it handed over, not snippets.
        assert step["tokens"] == sum(count_tokens(c.text) for c in handed_over)
        assert "chunk_read" not in message.text
    assert whole_multi_sentence, "no search returned a whole multi-sentence chunk"


@pytest.mark.parametrize(("graph_id", "context", "kept"), VARIANTS)
def test_arag_variants_answer_offline_without_the_ablated_tool(
    hotpot_index: HierarchicalIndex,
    slice_questions: list[dict[str, Any]],
    graph_id: str,
    context: dict[str, Any],
    kept: set[str],
) -> None:
    if "tools" in context:
        assert context["tools"] in get_args(ToolSet)  # a real configuration value
    removed = ALL_TOOLS - kept
    cap = get_graph_spec(graph_id).config(**context).max_steps
    graph = build_graph(graph_id, index=hotpot_index, model="offline")
    question = next(q for q in slice_questions if q["type"] == "bridge" and "Krilanovich" in q["question"])["question"]

    out = graph.invoke({"question": question}, context=context)
    check_common_output(out, hotpot_index, graph_id)
    assert 0 < out["steps"] <= cap
    used = {step["tool"] for step in out["trajectory"]}
    called = {c["name"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls}
    assert used and used <= kept and called <= kept, (used, called)
    assert not {m.name for m in tool_messages(out)} & removed
    if "chunk_read" in removed:
        check_searches_return_whole_chunks(out, hotpot_index)
    else:
        assert "chunk_read" in used  # the offline plan reads what the searches found
        assert set(out["read_chunks"]) >= set(out["citations"])

    # A lower cap is enforced: the run stops searching at it and still answers from what it has.
    assert out["steps"] > 1, "the uncapped run is too short to show a cap"
    capped = graph.invoke({"question": question}, context={**context, "max_steps": 1})
    check_common_output(capped, hotpot_index, graph_id)
    assert capped["steps"] == 1 and capped["trajectory"][0] == out["trajectory"][0]


# ---------------------------------------------------------------------------------------------
# 2. Every graph of langgraph.json on an index with contextual chunk headers


@pytest.fixture(scope="module")
def cch_index(
    hotpot_slice: tuple[Path, Path], slice_questions: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[HierarchicalIndex, list[str]]:
    """A small index built with contextual chunk headers: the passages of a few slice questions."""
    picked = [q for q in slice_questions if q["type"] == "bridge"][:2] + [
        q for q in slice_questions if q["type"] == "comparison"
    ][:1]
    titles = {title for q in picked for title, _ in q["context"]}
    corpus = json.loads(hotpot_slice[0].read_text(encoding="utf-8"))
    out = tmp_path_factory.mktemp("cch")
    (out / "corpus.json").write_text(
        json.dumps({t: s for t, s in corpus.items() if t in titles}, ensure_ascii=False), encoding="utf-8"
    )
    index = build_index(out / "corpus.json", out / "index", contextual_headers=True, progress=False)
    return index, [q["question"] for q in picked]


def test_the_contextual_header_index_embeds_titles_but_shows_bare_sentences(
    cch_index: tuple[HierarchicalIndex, list[str]],
) -> None:
    index, _ = cch_index
    assert index.manifest.contextual_headers is True
    chunk = next(c for c in index.store.chunks if c.title and len(c.sentences) > 1 and c.title not in c.text)
    sentence = chunk.sentence_texts()[1]
    # The stored vector is that of "title: sentence": searching with exactly that text finds it at cosine 1,
    # while the bare sentence no longer matches its own vector exactly.
    headed = index.semantic_search(f"{chunk.title}: {sentence}", 1)
    assert headed[0].chunk_id == chunk.id and headed[0].score > 0.999
    assert index.semantic_search(sentence, 1)[0].score < 0.99
    # Snippets are the chunk's own sentences, without the header.
    assert sentence in headed[0].snippets
    assert all(not s.startswith(f"{chunk.title}:") for s in headed[0].snippets)


@pytest.mark.parametrize("graph_id", GRAPH_IDS)
def test_every_graph_runs_offline_on_a_contextual_header_index(
    cch_index: tuple[HierarchicalIndex, list[str]], graph_id: str
) -> None:
    index, questions = cch_index
    graph = entry_graph(graph_id)  # the langgraph.json entry, configured per run as in Studio
    context = {"index_path": str(index.path), "model": "offline", "top_k": 3}
    for question in questions[:2]:
        out = graph.invoke({"question": question}, context=context)
        check_common_output(out, index, graph_id)


# ---------------------------------------------------------------------------------------------
# 3. Typed configuration as Studio sees it

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


@pytest.mark.parametrize("graph_id", GRAPH_IDS)
def test_each_graph_exposes_its_context_schema_to_studio(graph_id: str) -> None:
    config_cls = get_graph_spec(graph_id).config
    assert issubclass(config_cls, GraphContext)
    graph = entry_graph(graph_id)
    schema = graph.get_context_jsonschema()
    assert schema is not None, f"{graph_id} exposes no context schema"
    properties = schema["properties"]
    assert set(properties) == set(config_cls.model_fields)
    assert not set(schema.get("required", [])), "Studio would demand a value for a field with a default"
    hints = typing.get_type_hints(config_cls)
    for name, field in config_cls.model_fields.items():
        prop = properties[name]
        hint = hints[name]
        if get_origin(hint) is Literal:
            assert prop["enum"] == list(get_args(hint)), name
        elif get_origin(hint) is list:  # approve_tools: a list of names, a list field in Studio's form
            (item,) = get_args(hint)
            assert prop["type"] == "array" and prop["items"]["type"] == _JSON_TYPES[item], name
        else:
            assert prop["type"] == _JSON_TYPES[hint], name
        if field.default_factory is not None:  # an empty list made per run: the schema states no default
            assert prop.get("default", field.default_factory()) == field.default_factory(), name
        else:
            assert prop.get("default") == field.default, name
        assert prop.get("description"), name
    # The bare context is valid, so an empty Studio form runs.
    assert config_cls.of_run({}) == config_cls()


# ---------------------------------------------------------------------------------------------
# 4. Sentence-window retrieval in naive_rag


def far_sentences(n: int, positions: tuple[int, ...], window: int) -> list[int]:
    near = {i for p in positions for i in range(p - window, p + window + 1)}
    return [i for i in range(n) if i not in near]


def naive_rag_passages(graph: Any, question: str, context: dict[str, Any]) -> tuple[list[dict[str, Any]], dict]:
    """What naive_rag's retrieve node handed to the model, and the final output."""
    found: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    stream: Iterator[Any] = graph.stream({"question": question}, context=context, stream_mode=["updates", "values"])
    for mode, chunk in stream:
        if mode == "values":
            final = chunk
        elif "retrieve" in chunk:
            found = chunk["retrieve"]["passages"]
    return found, final


def expected_window_text(text: str, positions: tuple[int, ...], window: int) -> tuple[str, list[str], list[str]]:
    """The window text from the splitter's sentences, plus the sentences kept and left out."""
    spans = sentence_spans(text)
    sentences = split_sentences(text)
    keep = sorted({i for p in positions for i in range(max(0, p - window), min(len(spans), p + window + 1))})
    runs: list[list[int]] = []
    for i in keep:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    joined = " ... ".join(text[spans[r[0]][0] : spans[r[-1]][1]] for r in runs)
    left_out = [sentences[i] for i in range(len(sentences)) if i not in keep]
    return joined, [sentences[i] for i in keep], left_out


def top_sentence_positions(index: HierarchicalIndex, question: str, k: int) -> dict[str, tuple[int, ...]]:
    """The query's ``k`` nearest sentences grouped by chunk, chunks in the order of their best sentence."""
    grouped: dict[str, list[int]] = {}
    for chunk_id, position, _ in index.top_sentences(question, k):
        grouped.setdefault(chunk_id, []).append(position)
    return {cid: tuple(positions) for cid, positions in grouped.items()}


@pytest.mark.parametrize("window", [None, 7])
def test_naive_rag_sentence_window_gives_the_top_k_sentences_in_their_windows(
    hotpot_index: HierarchicalIndex, slice_questions: list[dict[str, Any]], window: int | None
) -> None:
    """ARAGOG's sentence windows: the top_k *sentences*, each centred in a window of ``window`` sentences.

    ARAGOG's window counts sentences in total: the default 3 is one neighbour on each side, 7 three.
    """
    assert get_graph_spec("naive_rag").config().window == 3
    size = (3 if window is None else window) // 2  # neighbours on each side
    # A question where some window leaves part of its chunk out, so the window has work to do.
    question, expected = next(
        (q["question"], top)
        for q in slice_questions
        for top in [top_sentence_positions(hotpot_index, q["question"], 5)]
        if any(
            far_sentences(len(hotpot_index.get_chunk(cid).sentences), positions, 3)  # type: ignore[union-attr]
            for cid, positions in top.items()
        )
    )
    assert sum(len(p) for p in expected.values()) == 5
    context: dict[str, Any] = (
        {"sentence_window": True} if window is None else {"sentence_window": True, "window": window}
    )
    graph = build_graph("naive_rag", index=hotpot_index, model="offline")
    found, out = naive_rag_passages(graph, question, context)
    check_common_output(out, hotpot_index, "naive_rag")
    assert [p["chunk_id"] for p in found] == list(expected)

    trimmed = 0
    for passage in found:
        chunk = hotpot_index.get_chunk(passage["chunk_id"])
        positions = expected[passage["chunk_id"]]
        assert chunk is not None
        assert chunk.sentences == tuple(sentence_spans(chunk.text))  # the index uses the same splitter
        text, kept, left_out = expected_window_text(chunk.text, positions, size)
        for p in positions:  # each top sentence with up to `size` neighbours each side
            for i in range(max(0, p - size), min(len(chunk.sentences), p + size + 1)):
                assert split_sentences(chunk.text)[i] in passage["text"], (chunk.id, p, i)
        for sentence in left_out:  # and nothing further away
            if not any(sentence in k for k in kept):
                assert sentence not in passage["text"], (chunk.id, sentence)
        assert passage["text"] == text
        trimmed += bool(left_out)
    assert trimmed, "no window left anything of its chunk out"
    assert out["retrieved_tokens"] == sum(count_tokens(p["text"]) for p in found)

    whole, whole_out = naive_rag_passages(graph, question, {})
    hits = hotpot_index.semantic_search(question, 5)
    assert [p["text"] for p in whole] == [hotpot_index.get_chunk(h.chunk_id).text for h in hits]  # type: ignore[union-attr]
    assert out["retrieved_tokens"] < whole_out["retrieved_tokens"]  # windows, not chunks


# ---------------------------------------------------------------------------------------------
# 5. arag ask --graph NAME --json


@pytest.mark.parametrize("graph_id", GRAPH_IDS)
def test_arag_ask_runs_every_graph_with_json_output(
    sample_index: HierarchicalIndex, graph_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    question = json.loads(SAMPLE_QUESTIONS.read_text(encoding="utf-8"))[0]["question"]
    capsys.readouterr()
    code = main(
        ["ask", question, "--index", str(sample_index.path), "--graph", graph_id, "--model", "offline", "--json"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 1, out  # exactly one JSON object on stdout
    record = json.loads(lines[0])
    assert record["graph"] == graph_id and record["model"] == "offline"
    check_common_output(record, sample_index, graph_id)
