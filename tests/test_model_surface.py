"""What the model sees, per graph, variant and profile: golden files and invariants over them.

Every graph and variant (A-RAG full, Naive, each "w/o" tool set, HyDE on and off; naive_rag with
each retriever; CoRAG greedy, best-of-N and tree; SRAG and its ablations; Direct) answers one
two-hop question on a small fixed index, under the package profile and under the paper profile (on
an index built with each), through ``ChatOpenAI`` against an OpenAI-compatible stand-in that replies
by rule and records every HTTP request. The model is made as ``arag eval`` makes it (its spec and the
run's sampling settings), so the record holds what a real endpoint receives: each request's kind
(agent step, structured output, logprob scoring, text) and every parameter (output limit,
temperature, logprobs, tool choice, parallel tool calls), the tool schemas (names, descriptions,
argument schemas), the structured-output schemas, and each message list in order. The judged
metrics' requests and DSI's model-written summaries are recorded too. Each record is kept in
``tests/golden/surface/<profile>/<name>.json`` and compared here, so any change to what a model sees
under either profile shows in a diff and is reviewed like code (issue 35, defect 12: the record of
a scripted model left out request parameters and CoRAG's logprob requests, and the paper profile's
prompts went unseen).

Regenerate after an intended change with ``ARAG_UPDATE_GOLDEN=1`` (see CONTRIBUTING.md), then read
the diff. Nondeterministic parts are normalised: tool-call IDs are numbered per file in order of
appearance, search scores are replaced by ``<score>`` (floating-point output of the encoder, not
wording), the index's temporary path by ``<index>`` and the stand-in's URL by ``<endpoint>``.

The invariants hold over every record: a text the model receives names only tools it is bound
with (defect 1 of issue 24: A-RAG (Naive) and "w/o chunk_read" were told to use chunk_read); no
prompt keeps an unfilled ``{placeholder}``; a search tool described as returning whole chunks
returns whole chunks, and one described as returning snippets returns snippets.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from arag_graph.core.documents import SourceDocument
from arag_graph.index.build import BuildOptions, build_index
from arag_graph.llm.summarize import summary_writer
from arag_graph.registry import build_graph
from tests.fakes import WordHashEmbeddings, sentinel_key
from tests.stubs._http import RecordedRequest
from tests.stubs.openai_server import (
    OpenAIStubServer,
    Reply,
    TokenLogprob,
    forget_pooled_openai_clients,
    text,
    with_logprobs,
)
from tests.stubs.openai_server import tool_call as stub_tool_call

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
# The recording endpoint: an OpenAI-compatible stand-in that replies by rule


def _structured_fields(schema: str) -> dict[str, Any]:
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
    if schema == "JudgeVerdict":
        return {"reason": "It names Maine, the gold answer.", "correct": True}
    if schema == "PassageRelevance":
        return {"verdicts": [{"passage": 1, "reason": "names the birthplace", "relevant": True}]}
    if schema == "Claims":
        return {"claims": ["Stephen King was born in Maine."]}
    if schema == "ClaimVerdicts":
        return {"verdicts": [{"claim": 1, "reason": "passage 1 says so", "supported": True}]}
    if schema == "GeneratedQuestions":
        return {"questions": ["Where was Stephen King born?", "In which state was he born?", "Where is his home?"]}
    raise AssertionError(f"no scripted reply for the schema {schema}")


_CHUNK_IDS = re.compile(r"chunk ([A-Za-z0-9_#.-]+)")
NO_INFORMATION_TOKENS = (
    TokenLogprob("No", -2.3),
    TokenLogprob(" relevant", -0.1),
    TokenLogprob(" information", -0.1),
    TokenLogprob(" found", -0.1),
)


def _agent_turn(messages: Sequence[dict[str, Any]], bound: list[str]) -> Reply:
    """Search, then read what the search showed (when chunk_read is bound), then answer."""
    results = [m for m in messages if m.get("role") == "tool"]
    shown = [cid for m in results for cid in _CHUNK_IDS.findall(str(m.get("content") or ""))]
    if not results:
        if "keyword_search" in bound:
            return stub_tool_call("keyword_search", {"keywords": ["Maximum Overdrive"]})
        return stub_tool_call("semantic_search", {"query": "director of Maximum Overdrive"})
    if len(results) == 1 and "semantic_search" in bound:
        return stub_tool_call("semantic_search", {"query": "where was Stephen King born"})
    if len(results) == 2 and "chunk_read" in bound and shown:
        return stub_tool_call("chunk_read", {"chunk_ids": list(dict.fromkeys(shown))[:2]})
    return text(f"Stephen King was born in Maine.\nAnswer: Maine [{', '.join(shown[:1])}]")


def _schema_name(body: dict[str, Any]) -> str | None:
    """The structured output a request asks for: its JSON schema's name, or the tool it forces."""
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return str(response_format["json_schema"]["name"])
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return str(choice.get("function", {}).get("name"))
    if choice is not None and choice != "auto" and body.get("tools"):
        return str(body["tools"][0]["function"]["name"])
    return None


def respond(request: RecordedRequest) -> Reply:
    body = request.json() or {}
    schema = _schema_name(body)
    if schema is not None:
        fields = _structured_fields(schema)
        if body.get("response_format"):
            return text(json.dumps(fields))
        return stub_tool_call(schema, fields)
    if body.get("logprobs"):  # CoRAG's penalty: how likely "No relevant information found" is
        return with_logprobs("No relevant information found", NO_INFORMATION_TOKENS)
    names = [t["function"]["name"] for t in body.get("tools") or []]
    if names:
        return _agent_turn(body["messages"], names)
    if any(hyde in str(body["messages"][-1].get("content")) for hyde in ("encyclopedia-style", "passage that answers")):
        return text("Maximum Overdrive was directed by Stephen King, who was born in Portland, Maine.")
    if "Summarise this document" in str(body["messages"][-1].get("content")):
        return text("A short summary of the document.")
    return text("The passages say Stephen King was born in Maine.\nAnswer: Maine [king]")


# ---------------------------------------------------------------------------------------------
# Recording and normalising

_BODY_PARTS = ("messages", "tools", "response_format")
"""What a request's record shows apart from its parameters."""


def _content(value: Any) -> str:
    if isinstance(value, list):  # content parts
        return "".join(str(part.get("text", "")) for part in value if isinstance(part, dict))
    return "" if value is None else str(value)


def _message(message: dict[str, Any], ids: dict[str, str], names: dict[str, str]) -> dict[str, Any]:
    def number(raw: str) -> str:
        return ids.setdefault(raw, f"call-{len(ids) + 1}")

    for call in message.get("tool_calls") or []:
        names[call.get("id") or ""] = call["function"]["name"]

    out: dict[str, Any] = {"role": message.get("role"), "content": _content(message.get("content"))}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": number(c.get("id") or ""),
                "name": c["function"]["name"],
                "args": json.loads(c["function"].get("arguments") or "{}"),
            }
            for c in message["tool_calls"]
        ]
    if message.get("role") == "tool":  # the wire names a tool result's call only: its tool from that call
        out.update(
            name=names.get(message.get("tool_call_id") or ""), tool_call_id=number(message.get("tool_call_id") or "")
        )
    return out


def _kind(body: dict[str, Any]) -> str:
    """What a request is, in words, so that a golden file reads as the list of calls a run makes."""
    schema = _schema_name(body)
    if schema is not None:
        return f"structured: {schema}"
    if body.get("logprobs"):
        return "logprob scoring"
    if body.get("tools"):
        return "agent step (tools offered)"
    return "text"


def _normalise(text: str, index_dir: str, url: str) -> str:
    text = text.replace(index_dir, "<index>").replace(url, "<endpoint>")
    return re.sub(r"score=-?\d+(\.\d+)?(e-?\d+)?", "score=<score>", text)


def requests_record(bodies: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Each request as the golden file shows it (kind, every parameter, tools, messages), and the
    full tool and structured-output schemas the model was shown."""
    ids: dict[str, str] = {}
    names: dict[str, str] = {}
    requests: list[dict[str, Any]] = []
    tools: dict[str, Any] = {}
    structured: dict[str, Any] = {}
    for body in bodies:
        request: dict[str, Any] = {"kind": _kind(body)}
        request["parameters"] = {k: v for k, v in sorted(body.items()) if k not in _BODY_PARTS}
        schema = _schema_name(body)
        if body.get("response_format"):
            request["structured_output"] = schema
            structured[schema] = body["response_format"]["json_schema"]
        for tool in body.get("tools") or []:
            function = tool["function"]
            if schema is not None and function["name"] == schema:
                request["structured_output"] = schema
                structured[schema] = function
            else:
                request.setdefault("tools", []).append(function["name"])
                tools[function["name"]] = function
        request["messages"] = [_message(m, ids, names) for m in body["messages"]]
        requests.append(request)
    return requests, dict(sorted(tools.items())), dict(sorted(structured.items()))


def record_variant(name: str, index: Any, server: OpenAIStubServer, profile: str) -> dict[str, Any]:
    """Run one variant against the recording endpoint under ``profile``; the record as the golden file holds it.

    The model is made from its spec with the run's sampling settings, as ``arag eval`` and ``arag ask``
    make it, so every request parameter is the one a real endpoint would receive.
    """
    from arag_graph.llm.models import resolve_chat_model
    from arag_graph.registry import config_for
    from arag_graph.run.runtime import model_settings

    graph_name, context = VARIANTS[name]
    ctx = config_for(graph_name, model=MODEL, base_url=server.url, profile=profile, **context)
    model = resolve_chat_model(MODEL, base_url=server.url, **model_settings(ctx), index=index)
    graph = build_graph(graph_name, index=index, model=model)
    before = len(server.completions)
    out = graph.invoke({"question": QUESTION}, context=ctx, config={"max_concurrency": 1})
    assert out.get("error") is None, out.get("error")
    requests, tools, structured = requests_record([c.body for c in server.completions[before:]])
    record = {
        "graph": graph_name,
        "profile": profile,
        "context": context,
        "question": QUESTION,
        "bound_schemas": tools,
        "structured_output_schemas": structured,
        "requests": requests,
    }
    return json.loads(_normalise(json.dumps(record, ensure_ascii=False), str(index.path), server.url))


def record_evaluation(index: Any, server: OpenAIStubServer, profile: str) -> dict[str, Any]:
    """The judged metrics' requests on one prediction: LLM-Acc, Context Precision without gold ids,
    Faithfulness and Answer Relevance, with the judge the profile's evaluation uses."""
    from arag_graph.core.profiles import eval_value
    from arag_graph.evaluators import default_evaluators
    from arag_graph.evaluators.judge import resolve_judge

    judge = resolve_judge(eval_value(profile, "judge") or JUDGE, server.url)
    prediction = {
        "answer": "Maine",
        "response": "Stephen King was born in Portland, Maine.\nAnswer: Maine [king]",
        "citations": ["king"],
        "retrieved_chunks": ["king", "overdrive"],
        "read_chunks": ["king"],
    }
    reference = {"answers": ["Maine"], "gold_chunk_ids": []}  # no gold ids: the judge decides relevance
    before = len(server.completions)
    for evaluator in default_evaluators(embeddings=WordHashEmbeddings(), judge=judge, chunks=index):
        try:
            evaluator(outputs=prediction, reference_outputs=reference, inputs={"question": QUESTION})
        except TypeError:  # an evaluator without inputs
            evaluator(outputs=prediction, reference_outputs=reference)
    requests, _, structured = requests_record([c.body for c in server.completions[before:]])
    record = {"profile": profile, "structured_output_schemas": structured, "requests": requests}
    return json.loads(_normalise(json.dumps(record, ensure_ascii=False), str(index.path), server.url))


def record_summaries(server: OpenAIStubServer, profile: str, tmp: Path) -> dict[str, Any]:
    """The requests of DSI's document summaries, written by a model when the index is built."""
    before = len(server.completions)
    build_index(
        DOCS[:2],
        tmp / f"summaries-{profile}",
        BuildOptions.for_profile(profile),
        embeddings=WordHashEmbeddings(),
        summaries=summary_writer(MODEL, {"base_url": server.url}),
        progress=False,
    )
    # Documents are summarised concurrently: in document order here, so the record stays stable.
    bodies = sorted((c.body for c in server.completions[before:]), key=lambda b: json.dumps(b["messages"]))
    requests, _, _ = requests_record(bodies)
    return json.loads(_normalise(json.dumps({"profile": profile, "requests": requests}), str(tmp), server.url))


Records = dict[str, dict[str, dict[str, Any]]]
"""Each profile's records by variant (and ``evaluation``, ``summaries``)."""
MODEL = "gpt-4o-mini"
JUDGE = "gpt-5-mini"
PROFILES = ("package", "paper")
EXTRA = ("evaluation", "summaries")
"""Golden files of each profile besides the variants: the judged metrics' requests, DSI's summaries."""


@pytest.fixture(scope="module")
def endpoint() -> Iterator[OpenAIStubServer]:
    """The recording endpoint, allowed as a run's base URL, with a key in the environment."""
    forget_pooled_openai_clients()
    saved = {name: os.environ.get(name) for name in ("ARAG_ALLOWED_BASE_URLS", "OPENAI_API_KEY")}
    with OpenAIStubServer(models=(MODEL, JUDGE)) as server:
        os.environ["ARAG_ALLOWED_BASE_URLS"] = server.url
        os.environ["OPENAI_API_KEY"] = sentinel_key("surface")
        server.script(respond)
        try:
            yield server
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    assert not server.errors, f"the OpenAI stand-in itself failed: {server.errors[0]}"


@pytest.fixture(scope="module")
def surface_indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A small fixed index per profile (a hashing encoder, no model download), with extractive
    summaries for DSI: the package's (word-prefix keywords, headers) and the paper's (substring, bare)."""
    return {
        profile: build_index(
            DOCS,
            tmp_path_factory.mktemp(f"surface-{profile}") / "index",
            BuildOptions.for_profile(profile),
            embeddings=WordHashEmbeddings(),
            summaries=summary_writer("offline"),
            progress=False,
        )
        for profile in PROFILES
    }


@pytest.fixture(scope="module")
def all_records(
    surface_indexes: dict[str, Any], endpoint: OpenAIStubServer, tmp_path_factory: pytest.TempPathFactory
) -> Records:
    out: Records = {}
    tmp = tmp_path_factory.mktemp("surface-extra")
    for profile in PROFILES:
        index = surface_indexes[profile]
        out[profile] = {name: record_variant(name, index, endpoint, profile) for name in VARIANTS}
        out[profile]["evaluation"] = record_evaluation(index, endpoint, profile)
        out[profile]["summaries"] = record_summaries(endpoint, profile, tmp)
    return out


@pytest.fixture(scope="module")
def records(all_records: Records) -> dict[str, dict[str, Any]]:
    """The package profile's records of the variants."""
    return {name: all_records["package"][name] for name in VARIANTS}


# ---------------------------------------------------------------------------------------------
# Golden files


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", [*VARIANTS, *EXTRA])
def test_what_the_model_sees_matches_the_golden_file(name: str, profile: str, all_records: Records) -> None:
    path = GOLDEN / profile / f"{name}.json"
    text = json.dumps(all_records[profile][name], ensure_ascii=False, indent=2) + "\n"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing: run ARAG_UPDATE_GOLDEN=1 pytest {__file__} and review the new file"
    assert text == path.read_text(encoding="utf-8"), (
        f"what the model sees in {profile}/{name} changed: if intended, regenerate with ARAG_UPDATE_GOLDEN=1 "
        "and review the diff"
    )


def test_every_golden_file_belongs_to_a_variant() -> None:
    """A variant renamed or removed leaves no stale golden file behind."""
    assert {p.relative_to(GOLDEN).as_posix() for p in GOLDEN.rglob("*.json")} <= {
        f"{profile}/{name}.json" for profile in PROFILES for name in [*VARIANTS, *EXTRA]
    }


def test_every_request_states_its_parameters(all_records: Records) -> None:
    """Issue 35, defect 12: the records hold every request parameter, so that a change to one shows.

    The graphs' requests carry the run's output limit and temperature; CoRAG's penalty requests ask for
    logprobs (a best-of-N run under either profile has them); the judge's requests name the judge."""
    for profile, records in all_records.items():
        for name, record in records.items():
            for request in record["requests"]:
                parameters = request["parameters"]
                if name == "evaluation":
                    assert parameters["model"] == JUDGE, (profile, name)
                    continue
                assert "max_completion_tokens" in parameters or "max_tokens" in parameters, (profile, name)
                assert "temperature" in parameters, (profile, name)
        kinds = [r["kind"] for r in records["corag-best_of_n"]["requests"]]
        assert "logprob scoring" in kinds, profile
        assert any(r["parameters"].get("logprobs") for r in records["corag-best_of_n"]["requests"])


# ---------------------------------------------------------------------------------------------
# Invariants over every record


def _named_tools(text: str) -> set[str]:
    return {name for name in TOOL_NAMES if re.search(rf"\b{name}\b", text)}


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_model_is_told_only_of_tools_it_has(name: str, profile: str, all_records: Records) -> None:
    record = all_records[profile][name]
    ever_bound = {t for r in record["requests"] for t in r.get("tools", [])}
    for number, request in enumerate(record["requests"]):
        bound = set(request.get("tools", [])) or ever_bound  # a synthesis call sees the conversation's tools
        for schema_name in request.get("tools", []):
            described = record["bound_schemas"][schema_name]["description"]
            assert _named_tools(described) <= bound, f"{name}: {schema_name}'s description names unbound tools"
        for message in request["messages"]:
            named = _named_tools(message["content"])
            assert named <= bound, f"{name}, request {number}: a {message['role']} message names {named - bound}"


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", [*VARIANTS, *EXTRA])
def test_every_prompt_placeholder_is_filled(name: str, profile: str, all_records: Records) -> None:
    for request in all_records[profile][name]["requests"]:
        for message in request["messages"]:
            if message["role"] in ("system", "user"):
                left = re.findall(r"\{[A-Za-z_][A-Za-z0-9_]*\}", message["content"])
                assert not left, f"{name}: unfilled placeholder(s) {left} in a {message['role']} prompt"


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", [n for n, (graph, _) in VARIANTS.items() if graph in ("arag", "arag_naive")])
def test_a_search_tool_returns_what_its_description_says(name: str, profile: str, all_records: Records) -> None:
    """Whole chunks when described so, snippets (one line per sentence, no chunk text) otherwise."""
    record = all_records[profile][name]
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


def test_the_paper_profile_tells_the_agent_the_released_instructions(all_records: Records) -> None:
    """Issue 35, defect 2: under the paper profile keyword_search asks for keywords of one to three words,
    with good and bad examples, and the tools and system prompt say to read chunks before answering."""
    paper, package = all_records["paper"]["arag-full"], all_records["package"]["arag-full"]
    keyword = paper["bound_schemas"]["keyword_search"]
    assert "one to three words" in keyword["description"] and "Good:" in keyword["description"]
    assert "Bad:" in keyword["description"]
    assert "one to three words" in keyword["parameters"]["properties"]["keywords"]["description"]
    for name in ("keyword_search", "semantic_search", "chunk_read"):
        assert "before you answer from" in paper["bound_schemas"][name]["description"], name
    system = paper["requests"][0]["messages"][0]["content"]
    assert "chunk_read before you rely on them" in system and "Answer: <your answer>" in system
    assert "[<chunk IDs>]" not in system and "shortest" not in system  # graded on the whole reply
    assert package["requests"][0]["messages"][0]["content"] != system  # the package keeps its own wording


def test_keyword_search_is_described_as_the_index_matches(all_records: Records) -> None:
    """Issue 35, defect 10: the paper profile's index matches substrings and has no headers, so its
    keyword_search says so and promises no title matches; the package's index matches word starts and titles."""
    paper = all_records["paper"]["arag-full"]["bound_schemas"]["keyword_search"]
    package = all_records["package"]["arag-full"]["bound_schemas"]["keyword_search"]
    paper_rule = paper["parameters"]["properties"]["keywords"]["description"]
    package_rule = package["parameters"]["properties"]["keywords"]["description"]
    assert "inside longer words too" in paper_rule and "start of a word" not in paper_rule
    assert "start of a word" in package_rule
    assert "title" not in paper["description"] and "matched only by its title" in package["description"]


def test_the_paper_profile_asks_hyde_for_a_short_answering_passage(all_records: Records) -> None:
    """Issue 35, defect 11: ARAGOG's HyDE writes "a passage that answers" the question, at most 128 tokens,
    temperature 0; the package asks for an encyclopedia paragraph at the run's output limit."""
    for name in ("naive_rag-hyde", "corag-greedy-hyde", "arag-full-hyde"):
        paper = [
            r for r in all_records["paper"][name]["requests"] if "passage that answers" in r["messages"][-1]["content"]
        ]
        assert paper, name
        assert all(r["parameters"]["max_tokens"] == 128 for r in paper), name
        assert all(r["parameters"]["temperature"] == 0.0 for r in paper), name
        package = [
            r for r in all_records["package"][name]["requests"] if "encyclopedia" in r["messages"][-1]["content"]
        ]
        assert package and all(r["parameters"]["max_tokens"] == 16384 for r in package), name


def test_the_paper_profile_runs_corag_chains_with_the_sufficiency_check(all_records: Records) -> None:
    """Issue 35, defect 4: the paper's S is a maximum; each step asks whether the evidence suffices (the
    reformulation then names what is missing), under both profiles; fixed length is the ablation."""
    for profile in PROFILES:
        requests = all_records[profile]["corag-greedy"]["requests"]
        assert "structured: Sufficiency" in [r["kind"] for r in requests], profile
        reformulations = [r for r in requests if r["kind"] == "structured: Reformulation"]
        assert reformulations and all(
            "What is missing was not stated" not in r["messages"][-1]["content"] for r in reformulations
        ), profile
        ablation = [r["kind"] for r in all_records[profile]["corag-fixed_length"]["requests"]]
        assert "structured: Sufficiency" not in ablation, profile


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
