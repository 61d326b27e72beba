"""What the model sees, per graph and variant: golden files and invariants over them.

Every graph and variant (A-RAG full, Naive, each "w/o" tool set, HyDE on and off; naive_rag with
each retriever; CoRAG greedy, best-of-N and tree; SRAG and its ablations; Direct) answers one
two-hop question on a small fixed index with a scripted chat model that records every request it
receives: the tool schemas it was bound with (names, descriptions, argument schemas), the
structured-output schema asked for, and each message list (system and user prompts, tool calls and
tool results, in order). The record of each variant is kept in ``tests/golden/surface/<name>.json``
and compared here, so any change to what a model sees shows in a diff and is reviewed like code.

Regenerate after an intended change with ``ARAG_UPDATE_GOLDEN=1`` (see CONTRIBUTING.md), then read
the diff. Nondeterministic parts are normalised: tool-call IDs are numbered per file in order of
appearance, search scores are replaced by ``<score>`` (floating-point output of the encoder, not
wording), and the index's temporary path by ``<index>``.

The invariants hold over every record: a text the model receives names only tools it is bound
with (defect 1 of issue 24: A-RAG (Naive) and "w/o chunk_read" were told to use chunk_read); no
prompt keeps an unfilled ``{placeholder}``; a search tool described as returning whole chunks
returns whole chunks, and one described as returning snippets returns snippets.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from arag_graph.core.documents import SourceDocument
from arag_graph.index.build import build_index
from arag_graph.llm.summarize import summary_writer
from arag_graph.registry import build_graph
from tests.fakes import WordHashEmbeddings
from tests.scripted import ScriptedChatModel, calls, tool_call

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parent / "golden" / "surface"
UPDATE = os.environ.get("ARAG_UPDATE_GOLDEN") == "1"
TOOL_NAMES = ("keyword_search", "semantic_search", "chunk_read")
SEARCHES = ("keyword_search", "semantic_search")
QUESTION = "In which state was the director of Maximum Overdrive born?"

DOCS = [
    SourceDocument(
        "Maximum Overdrive is a 1986 American horror film. It was written and directed by Stephen King. "
        "The film was shot in and around Wilmington, North Carolina.",
        id="overdrive",
        title="Maximum Overdrive",
    ),
    SourceDocument(
        "Stephen King is an American author of horror novels. He was born in Portland, Maine, in 1947. "
        "He directed one film, Maximum Overdrive.",
        id="king",
        title="Stephen King",
    ),
    SourceDocument(
        "Wilmington is a port city in North Carolina. Its film studios have hosted many productions.",
        id="wilmington",
        title="Wilmington, North Carolina",
    ),
    SourceDocument(
        "Portland is the largest city in Maine. It lies on Casco Bay.", id="portland", title="Portland, Maine"
    ),
    SourceDocument("Casco Bay is an inlet of the Gulf of Maine. It holds many islands.", id="casco", title="Casco Bay"),
    SourceDocument(
        "A horror film seeks to frighten its audience. The genre began in the silent era.",
        id="horror",
        title="Horror film",
    ),
]

# name -> (graph, context). One entry per variant a reader of the papers' tables would compare.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "direct": ("direct", {}),
    "arag-full": ("arag", {}),
    "arag-full-hyde": ("arag", {"hyde": True}),
    "arag-no_keyword_search": ("arag", {"tools": "no_keyword_search"}),
    "arag-no_semantic_search": ("arag", {"tools": "no_semantic_search"}),
    "arag-no_chunk_read": ("arag", {"tools": "no_chunk_read"}),
    "arag_naive": ("arag_naive", {}),
    "arag_naive-hyde": ("arag_naive", {"hyde": True}),
    "naive_rag-dense": ("naive_rag", {"retriever": "dense"}),
    "naive_rag-bm25": ("naive_rag", {"retriever": "bm25"}),
    "naive_rag-hybrid": ("naive_rag", {"retriever": "hybrid"}),
    "naive_rag-amr": ("naive_rag", {"retriever": "amr"}),
    "naive_rag-dsi": ("naive_rag", {"retriever": "dsi"}),
    "naive_rag-sentence_window": ("naive_rag", {"sentence_window": True}),
    "naive_rag-hyde": ("naive_rag", {"hyde": True}),
    "naive_rag-multi_query": ("naive_rag", {"multi_query": 2}),
    "naive_rag-mmr": ("naive_rag", {"mmr": True, "candidates": 6}),
    "naive_rag-rerank": ("naive_rag", {"rerank": True, "candidates": 6}),
    "corag-greedy": ("corag", {"max_steps": 2}),
    "corag-greedy-hyde": ("corag", {"max_steps": 2, "hyde": True}),
    "corag-best_of_n": ("corag", {"max_steps": 2, "decoding": "best_of_n", "n": 2}),
    "corag-tree": ("corag", {"max_steps": 2, "decoding": "tree", "expand": 2, "rollouts": 1}),
    "corag-fixed_length": ("corag", {"max_steps": 2, "fixed_length": True}),
    "corag-rerank": ("corag", {"max_steps": 2, "rerank": True, "candidates": 6}),
    "srag": ("srag", {}),
    "srag-no_decompose": ("srag", {"decompose": False}),
    "srag-no_structured_extraction": ("srag", {"structured_extraction": False}),
    "srag-no_table_aggregation": ("srag", {"table_aggregation": False}),
    "srag-route": ("srag", {"route": True}),
}


# ---------------------------------------------------------------------------------------------
# The recording model


def _structured_fields(schema: str, messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """A plausible structured reply per schema, the same whatever the call (the record stays stable)."""
    if schema == "Sufficiency":
        return {"reasoning": "Stephen King directed it.", "is_sufficient": False, "missing_info": "where he was born"}
    if schema == "Reformulation":
        return {"query": "Stephen King birthplace"}
    if schema == "SubAnswer":
        return {"answer": "Stephen King", "confidence": 0.8}
    if schema == "Route":
        return {"multi_hop": True}
    if schema == "Decomposition":
        return {
            "sub_questions": [
                {"id": 1, "question": "Who directed Maximum Overdrive?", "depends_on": []},
                {"id": 2, "question": "In which state was [answer 1] born?", "depends_on": [1]},
            ]
        }
    if schema == "Triplets":
        return {"triplets": [{"subject": "Stephen King", "predicate": "born in", "object": "Maine", "relevance": 0.9}]}
    if schema == "QueryRewrites":
        return {"queries": ["Maximum Overdrive director", "who made Maximum Overdrive"]}
    if schema == "PassageRatings":
        return {"ratings": [{"passage": 1, "relevance": 0.2}, {"passage": 2, "relevance": 0.9}]}
    raise AssertionError(f"no scripted reply for the schema {schema}")


def _agent_turn(messages: Sequence[BaseMessage], bound: list[str]) -> AIMessage:
    """Search, then read what the search showed (when chunk_read is bound), then answer."""
    results = [m for m in messages if isinstance(m, ToolMessage)]
    shown = [cid for m in results for cid in (m.artifact or {}).get("chunk_ids", [])] if results else []
    if not results:
        if "keyword_search" in bound:
            return calls(tool_call("keyword_search", keywords=["Maximum Overdrive"]))
        return calls(tool_call("semantic_search", query="director of Maximum Overdrive"))
    if len(results) == 1 and "semantic_search" in bound:
        return calls(tool_call("semantic_search", query="where was Stephen King born"))
    if len(results) == 2 and "chunk_read" in bound and shown:
        return calls(tool_call("chunk_read", chunk_ids=shown[:2]))
    return AIMessage(f"Stephen King was born in Maine.\nAnswer: Maine [{', '.join(shown[:1])}]")


def _forced(kwargs: dict[str, Any]) -> bool:
    """A structured-output request names the schema's tool; the agent's ``auto`` leaves the choice to the model."""
    return kwargs.get("tool_choice") not in (None, "auto")


class RecordingChatModel(ScriptedChatModel):
    """A scripted model that keeps the full tool schemas it is bound with, and replies by rule."""

    schemas: dict[str, dict[str, Any]] = Field(default_factory=dict)
    structured: dict[str, dict[str, Any]] = Field(default_factory=dict)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        converted = [convert_to_openai_tool(t) for t in tools]
        kept = self.structured if _forced(kwargs) else self.schemas
        for schema in converted:
            kept[schema["function"]["name"]] = schema["function"]
        return self.bind(tools=converted, **kwargs)


def _reply(messages: Sequence[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
    names = [t["function"]["name"] for t in kwargs.get("tools") or []]
    if _forced(kwargs):
        return calls(tool_call(names[0], **_structured_fields(names[0], messages)))
    if names:
        return _agent_turn(messages, names)
    if "encyclopedia-style paragraph" in messages[-1].text:
        return AIMessage("Maximum Overdrive was directed by Stephen King, who was born in Portland, Maine.")
    return AIMessage("The passages say Stephen King was born in Maine.\nAnswer: Maine [king]")


# ---------------------------------------------------------------------------------------------
# Recording and normalising


def _message(message: BaseMessage, ids: dict[str, str]) -> dict[str, Any]:
    def number(raw: str) -> str:
        return ids.setdefault(raw, f"call-{len(ids) + 1}")

    out: dict[str, Any] = {"role": message.type, "content": message.text}
    if isinstance(message, AIMessage) and message.tool_calls:
        out["tool_calls"] = [
            {"id": number(c["id"] or ""), "name": c["name"], "args": c["args"]} for c in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        out.update(name=message.name, tool_call_id=number(message.tool_call_id))
    return out


def _normalise(text: str, index_dir: str) -> str:
    text = text.replace(index_dir, "<index>")
    return re.sub(r"score=-?\d+(\.\d+)?(e-?\d+)?", "score=<score>", text)


def record_variant(name: str, index: Any) -> dict[str, Any]:
    """Run one variant with the recording model; the record as the golden file holds it."""
    graph_name, context = VARIANTS[name]
    model = RecordingChatModel(messages=iter([]), reply=_reply)
    graph = build_graph(graph_name, index=index, model=model)
    out = graph.invoke({"question": QUESTION}, context=context, config={"max_concurrency": 1})
    assert out.get("error") is None, out.get("error")
    ids: dict[str, str] = {}
    requests = []
    for entry in model.log:
        kwargs = entry["kwargs"]
        request: dict[str, Any] = {}
        tools = [t["function"]["name"] for t in kwargs.get("tools") or []]
        if _forced(kwargs):
            request["structured_output"] = tools[0]
        elif tools:
            request["tools"] = tools
            request["parallel_tool_calls"] = kwargs.get("parallel_tool_calls")
        request["messages"] = [_message(m, ids) for m in entry["messages"]]
        requests.append(request)
    record = {
        "graph": graph_name,
        "context": context,
        "question": QUESTION,
        "bound_schemas": dict(sorted(model.schemas.items())),
        "structured_output_schemas": dict(sorted(model.structured.items())),
        "requests": requests,
    }
    return json.loads(_normalise(json.dumps(record, ensure_ascii=False), str(index.path)))


@pytest.fixture(scope="module")
def surface_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A small fixed index (a hashing encoder, no model download), with extractive summaries for DSI."""
    return build_index(
        DOCS,
        tmp_path_factory.mktemp("surface") / "index",
        embeddings=WordHashEmbeddings(),
        summaries=summary_writer("offline"),
        progress=False,
    )


@pytest.fixture(scope="module")
def records(surface_index: Any) -> dict[str, dict[str, Any]]:
    return {name: record_variant(name, surface_index) for name in VARIANTS}


# ---------------------------------------------------------------------------------------------
# Golden files


@pytest.mark.parametrize("name", list(VARIANTS))
def test_what_the_model_sees_matches_the_golden_file(name: str, records: dict[str, dict[str, Any]]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(records[name], ensure_ascii=False, indent=2) + "\n"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing: run ARAG_UPDATE_GOLDEN=1 pytest {__file__} and review the new file"
    assert text == path.read_text(encoding="utf-8"), (
        f"what the model sees in {name} changed: if intended, regenerate with ARAG_UPDATE_GOLDEN=1 and review the diff"
    )


def test_every_golden_file_belongs_to_a_variant() -> None:
    """A variant renamed or removed leaves no stale golden file behind."""
    assert {p.stem for p in GOLDEN.glob("*.json")} <= set(VARIANTS)


# ---------------------------------------------------------------------------------------------
# Invariants over every record


def _named_tools(text: str) -> set[str]:
    return {name for name in TOOL_NAMES if re.search(rf"\b{name}\b", text)}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_model_is_told_only_of_tools_it_has(name: str, records: dict[str, dict[str, Any]]) -> None:
    record = records[name]
    ever_bound = {t for r in record["requests"] for t in r.get("tools", [])}
    for number, request in enumerate(record["requests"]):
        bound = set(request.get("tools", [])) or ever_bound  # a synthesis call sees the conversation's tools
        for schema_name in request.get("tools", []):
            described = record["bound_schemas"][schema_name]["description"]
            assert _named_tools(described) <= bound, f"{name}: {schema_name}'s description names unbound tools"
        for message in request["messages"]:
            named = _named_tools(message["content"])
            assert named <= bound, f"{name}, request {number}: a {message['role']} message names {named - bound}"


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_prompt_placeholder_is_filled(name: str, records: dict[str, dict[str, Any]]) -> None:
    for request in records[name]["requests"]:
        for message in request["messages"]:
            if message["role"] in ("system", "human"):
                left = re.findall(r"\{[A-Za-z_][A-Za-z0-9_]*\}", message["content"])
                assert not left, f"{name}: unfilled placeholder(s) {left} in a {message['role']} prompt"


@pytest.mark.parametrize("name", [n for n, (graph, _) in VARIANTS.items() if graph in ("arag", "arag_naive")])
def test_a_search_tool_returns_what_its_description_says(name: str, records: dict[str, dict[str, Any]]) -> None:
    """Whole chunks when described so, snippets (one line per sentence, no chunk text) otherwise."""
    record = records[name]
    chunk_texts = [d.text for d in DOCS]
    checked = 0
    for request in record["requests"]:
        for message in request["messages"]:
            if message["role"] != "tool" or message["name"] not in SEARCHES:
                continue
            description = record["bound_schemas"][message["name"]]["description"]
            whole = "full text of each chunk" in description
            shown_whole = any(text in message["content"] for text in chunk_texts)
            assert whole == shown_whole, f"{name}: {message['name']} described {'whole' if whole else 'snippets'}"
            assert whole or "    - " in message["content"], f"{name}: a snippet search showed no snippet line"
            checked += 1
    assert checked, f"{name}: no search result to check"


def test_the_variants_differ_where_the_papers_say(records: dict[str, dict[str, Any]]) -> None:
    """The records are of the variants named: the ablations bind what their rows of the tables say."""
    bound = {name: sorted(r["bound_schemas"]) for name, r in records.items()}
    assert bound["arag-full"] == sorted(TOOL_NAMES)
    assert bound["arag-no_chunk_read"] == ["keyword_search", "semantic_search"]
    assert bound["arag-no_keyword_search"] == ["chunk_read", "semantic_search"]
    assert bound["arag-no_semantic_search"] == ["chunk_read", "keyword_search"]
    assert bound["arag_naive"] == ["semantic_search"]
    assert all(not bound[n] for n, (graph, _) in VARIANTS.items() if graph not in ("arag", "arag_naive"))
    assert [r.get("structured_output") for r in records["srag"]["requests"]][:1] == ["Decomposition"]
    assert "Route" not in {r.get("structured_output") for r in records["srag"]["requests"]}
    assert records["srag-route"]["requests"][0]["structured_output"] == "Route"
    hyde = [r for r in records["naive_rag-hyde"]["requests"] if "encyclopedia" in r["messages"][-1]["content"]]
    assert len(hyde) == 1 and not any(
        "encyclopedia" in r["messages"][-1]["content"] for r in records["naive_rag-dense"]["requests"]
    )
