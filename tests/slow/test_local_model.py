"""Every graph driven by a real language model (issue 34): SmolLM2-135M-Instruct behind llama-cpp-python's
OpenAI-compatible server (:mod:`tests.localmodel`), reached the way users reach one:
``--model smollm2-135m --base-url http://127.0.0.1:P/v1``.

The model is far too small to answer well; what is checked is that real, messy output never breaks a
run: each run ends with an answer or a one-line reason, within its step cap, with no traceback; token
usage comes from the server's own usage fields and latency is recorded; the report shows the
trajectory the model really took. Every reply is logged (:class:`tests.localmodel.ReplyLog`) and the
malformed ones are classified; ``$ARAG_LOCAL_MODEL_REPORT`` names a JSON file to write them to
(docs/guide/local-models.md quotes them).

One server for the module (started once, stopped at the end); small replies (``max_tokens`` 128),
a 4,096-token context and one question per graph keep the module to a few minutes.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk

from arag_graph.index.hierarchical import HierarchicalIndex
from tests.localmodel import (
    MAX_TOKENS,
    LocalModel,
    LocalModelMissing,
    ReplyLog,
    classify,
    examples,
    running_local_model,
    tally,
)

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
QUESTION = (
    "Grace Krilanovich's first novel was published by an independent mom-and-pop publishing house "
    "that was founded in 2005, and is based where?"
)
LOGS: dict[str, ReplyLog] = {}
"""Every run's replies, by case, for the malformed-reply table at the end."""


@pytest.fixture(scope="session")
def local_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModel]:
    """The llama-cpp-python server with the local model, once per session (a skip fails under CI=true)."""
    try:
        with running_local_model(tmp_path_factory.mktemp("local-model")) as server:
            yield server
    except LocalModelMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module", autouse=True)
def _operator_allows_the_local_model(local_model: LocalModel) -> Iterator[None]:
    """The operator's allow-lists (a graph whose model comes from the run's context is policed as a
    served run is): this module's runs may name the local server and its model."""
    allowed = {"ARAG_ALLOWED_MODELS": local_model.name, "ARAG_ALLOWED_BASE_URLS": local_model.base_url}
    before = {name: os.environ.get(name) for name in allowed}
    os.environ.update(allowed)
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def one_line(text: str | None) -> bool:
    return bool(text) and "\n" not in str(text) and "Traceback" not in str(text)


def run_graph(
    case: str, graph_name: str, index: HierarchicalIndex, server: LocalModel, **settings: Any
) -> tuple[dict[str, Any], ReplyLog]:
    """One question through ``graph_name``, its model resolved from the run's context (the served path)."""
    from arag_graph.registry import build_graph

    log = LOGS.setdefault(case, ReplyLog())
    graph = build_graph(graph_name, index=index)
    state = graph.invoke({"question": QUESTION}, {"callbacks": [log]}, context=server.context(**settings))
    return state, log


def check_run(state: dict[str, Any], log: ReplyLog, *, cap: int | None = None) -> None:
    """The contract of a run against a real model: an answer or a one-line reason, within the cap,
    replies whose usage the server reported, and none longer than ``max_tokens``."""
    assert state.get("answer") or one_line(state.get("error")), state.get("error")
    if state.get("error"):
        assert one_line(state["error"]), state["error"]
    if cap is not None:
        assert state.get("steps", 0) <= cap
    replies = [e for e in log.exchanges if e.error is None]
    assert replies, [e.error for e in log.exchanges]
    assert all(e.usage and e.usage["input_tokens"] > 0 for e in replies), [e.name for e in replies if not e.usage]
    # What the run controls is what it asks for: every request carries the run's max_tokens, which the
    # server keeps for text; a tool call's arguments it writes with no limit (their schemas bound them),
    # so a reply with a call may pass it: counted as over_max_tokens in the table below.
    unbounded = [(e.name, e.max_tokens) for e in log.exchanges if not e.max_tokens or e.max_tokens > MAX_TOKENS]
    assert not unbounded, unbounded
    assert all(e.seconds > 0 for e in log.exchanges)


# ---------------------------------------------------------------------------------------------
# Every graph, in Python (the model resolved from the run's context, as a served run does)

GRAPH_CASES = {
    "arag": ("arag", {"max_steps": 3}),
    "arag_naive": ("arag_naive", {"max_steps": 2}),
    "arag_no_chunk_read": ("arag", {"max_steps": 2, "tools": "no_chunk_read"}),
    "naive_rag": ("naive_rag", {}),
    "direct": ("direct", {}),
    "corag_greedy": ("corag", {"max_steps": 2}),
    "srag": ("srag", {"max_sub_questions": 1}),
    "naive_rag_hyde": ("naive_rag", {"hyde": True}),
    "naive_rag_multi_query": ("naive_rag", {"multi_query": 2}),
    "naive_rag_rerank": ("naive_rag", {"rerank": True, "candidates": 6}),
}


@pytest.mark.parametrize("case", list(GRAPH_CASES))
def test_each_graph_ends_cleanly_on_real_output(case: str, local_model: LocalModel, sample_index: Any) -> None:
    graph_name, settings = GRAPH_CASES[case]
    state, log = run_graph(case, graph_name, sample_index, local_model, **settings)
    check_run(state, log, cap=settings.get("max_steps"))
    names = {e.name for e in log.exchanges}
    if graph_name in {"arag", "arag_naive"}:
        assert "agent_model" in names, names
    if settings.get("hyde"):
        assert "hyde_model" in names, names
    if graph_name in {"naive_rag", "corag", "srag"}:  # retrieval happened, and shows in the trajectory
        assert state["trajectory"] and state["retrieved_tokens"] > 0


def test_corag_best_of_n_scores_chains_with_the_servers_logprobs(local_model: LocalModel, sample_index: Any) -> None:
    """The paper's penalty, log P("No relevant information found"), from the real token log-probabilities."""
    state, log = run_graph(
        "corag_best_of_n", "corag", sample_index, local_model, decoding="best_of_n", n=2, max_steps=2
    )
    check_run(state, log)
    assert state.get("penalty_scorer") == "logprob", state.get("warnings")
    penalties = [run.get("penalty") for run in state.get("sampled_chains") or []]
    assert len(penalties) == 2 and all(isinstance(p, float) and p >= 0 for p in penalties), penalties


def test_corag_tree_search_ends_cleanly(local_model: LocalModel, sample_index: Any) -> None:
    state, log = run_graph(
        "corag_tree", "corag", sample_index, local_model, decoding="tree", expand=2, rollouts=0, max_steps=2
    )
    check_run(state, log)
    assert state.get("sampled_chains"), state.get("warnings")


def test_document_summaries_written_by_the_model_serve_dsi(local_model: LocalModel, tmp_path: Path) -> None:
    """ARAGOG's document summary index with summaries the local model wrote at index time."""
    from arag_graph.index.build import build_index
    from arag_graph.llm.summarize import summary_writer
    from arag_graph.registry import build_graph

    corpus = json.loads((REPO / "arag_graph/data/sample/corpus.json").read_text(encoding="utf-8"))
    titles = ["Grace Krilanovich", "Two Dollar Radio", "Maximum Overdrive", "Leland, North Carolina"]
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps({t: corpus[t] for t in titles}), encoding="utf-8")
    options = {"base_url": local_model.base_url, "timeout": 300, "max_retries": 0}
    index = build_index(path, tmp_path / "index", summaries=summary_writer(local_model.name, options), progress=False)
    log = LOGS.setdefault("summaries", ReplyLog())
    state = build_graph("naive_rag", index=index).invoke(
        {"question": QUESTION}, {"callbacks": [log]}, context=local_model.context(retriever="dsi", summary_documents=2)
    )
    assert state.get("answer") or one_line(state.get("error"))
    assert state["trajectory"] and state["trajectory"][0]["chunk_ids"]
    from arag_graph.retrievers.summaries import summary_index

    summaries = summary_index(index)
    assert summaries.info.get("kind") == "model" and summaries.info.get("model") == local_model.name, summaries.info
    assert len(summaries.records) == len(titles) and all(r.get("summary") for r in summaries.records)


# ---------------------------------------------------------------------------------------------
# The Python API with token streaming, the CLI, the evaluation and a served run


def test_python_api_streams_the_models_tokens(local_model: LocalModel, sample_index: Any) -> None:
    """``stream_mode="messages"`` makes LangChain stream the reply from the server (``stream: true``):
    chunks arrive as the model writes them and add up to the final message. (The text of a short reply
    comes in one piece at its end: the secret redactor holds back the last 63 characters of a stream
    until it knows they hold no key, :class:`arag_graph.core.safety.StreamRedactor`.)"""
    from arag_graph.registry import build_graph

    graph = build_graph("naive_rag", index=sample_index)
    pieces: list[str] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream(
        {"question": QUESTION}, context=local_model.context(), stream_mode=["messages", "values"]
    ):
        if mode == "messages":
            message, _ = chunk
            if isinstance(message, AIMessageChunk):
                pieces.append(message.text)
        else:
            final = chunk
    assert len(pieces) > 2, pieces  # the server's stream: a chunk per token and the end marker
    assert final.get("answer") or one_line(final.get("error"))
    last = next(m for m in reversed(final["messages"]) if m.type == "ai")
    assert "".join(pieces) == last.text


def test_the_server_stops_each_reply_at_the_runs_max_tokens(local_model: LocalModel) -> None:
    """llama-cpp-python's server reads the reply limit only as ``max_tokens``; ChatOpenAI names it
    ``max_completion_tokens``, which the server ignored: a reply asked to count to 200 ran on (the
    client now sends the old name to any server but OpenAI's). Streamed or not."""
    from langchain_core.messages import HumanMessage

    from arag_graph.llm.models import resolve_chat_model

    model = resolve_chat_model(local_model.name, base_url=local_model.base_url, max_tokens=8, timeout=300)
    ask = [HumanMessage("Count from 1 to 200, separated by commas.")]
    whole = model.invoke(ask)
    assert whole.usage_metadata and 0 < whole.usage_metadata["output_tokens"] <= 8, whole.usage_metadata
    assert whole.response_metadata.get("finish_reason") == "length"
    streamed = "".join(chunk.text for chunk in model.stream(ask))
    assert 0 < len(streamed) <= len(whole.text) + 8, streamed  # the same eight tokens, give or take a piece


def test_tool_results_reach_the_prompt_only_as_user_turns(
    local_model: LocalModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """chatml-function-calling writes a ``tool`` turn's header and none of its content: the prompt is as long
    with a 150-word search result as with a one-word one, so an agent never reads what it found. Sent as
    user turns (``$ARAG_TOOL_RESULTS_AS_USER=1``) the result is in the prompt."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from arag_graph.llm.models import TOOL_RESULTS_AS_USER_ENV, resolve_chat_model

    def prompt_tokens(as_user: str, result: str) -> int:
        monkeypatch.setenv(TOOL_RESULTS_AS_USER_ENV, as_user)
        model = resolve_chat_model(local_model.name, base_url=local_model.base_url, max_tokens=1, timeout=300)
        call = {"name": "keyword_search", "args": {"keywords": ["Krilanovich"]}, "id": "c1"}
        turns = [HumanMessage(QUESTION), AIMessage("", tool_calls=[call]), ToolMessage(result, tool_call_id="c1")]
        usage = model.invoke(turns).usage_metadata
        assert usage, "the server reported no usage"
        return usage["input_tokens"]

    long_result = " ".join(f"passage{i}" for i in range(150))
    assert prompt_tokens("0", long_result) == prompt_tokens("0", "none")  # dropped, whatever it holds
    assert prompt_tokens("1", long_result) - prompt_tokens("1", "none") >= 150


def test_the_agent_reads_its_results_with_tool_results_as_user(
    local_model: LocalModel, sample_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A-RAG on the real server with ``$ARAG_TOOL_RESULTS_AS_USER=1``: the run keeps its contract, and the
    agent's next request is longer than its first by at least the search results it was given."""
    from langchain_core.messages import ToolMessage

    from arag_graph.core.tokens import count_tokens

    monkeypatch.setenv("ARAG_TOOL_RESULTS_AS_USER", "1")
    state, log = run_graph("arag_tool_results_as_user", "arag", sample_index, local_model, max_steps=2)
    check_run(state, log, cap=2)
    agent = [e for e in log.exchanges if e.name == "agent_model" and e.usage]
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert agent and agent[0].tool_calls and results, [(e.name, e.tool_calls) for e in log.exchanges]
    after = next(e for e in log.exchanges[log.exchanges.index(agent[0]) + 1 :] if e.usage)
    first_results = results[: len(agent[0].tool_calls)]
    given = sum(count_tokens(m.text) for m in first_results)
    assert after.usage and agent[0].usage
    assert after.usage["input_tokens"] - agent[0].usage["input_tokens"] >= given, (after.usage, agent[0].usage, given)


def _llama_grammar_parses(vocab_model: Any, schema: dict[str, Any]) -> bool:
    import llama_cpp
    from llama_cpp import llama_grammar

    grammar = llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab_model._model.vocab, grammar._grammar.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def test_every_schema_arag_sends_is_a_grammar_llama_cpp_accepts() -> None:
    """llama.cpp turns a tool's or a structured reply's JSON schema into a grammar; its parser refuses one
    with a string bounded past about 1,100 characters, and llama-cpp-python's server then died on the
    request (a SubAnswer with maxLength 2,000). Every tool, in every style, and every structured schema
    as its forced tool call sends it, parsed by llama.cpp itself; and the bound that broke it, refused."""
    import llama_cpp
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from arag_graph.core.limits import bounded_schema
    from arag_graph.llm.structured import ModelFacing
    from arag_graph.tools.toolkit import ToolSettings, retrieval_tool
    from tests.localmodel import model_path
    from tests.test_structured_schemas import EXAMPLES

    vocab = llama_cpp.Llama(str(model_path()), vocab_only=True, verbose=False)
    schemas = []
    for style in ("package", "paper"):
        for name in ("keyword_search", "semantic_search", "chunk_read"):
            tool = retrieval_tool(None, name, ToolSettings(style=style))  # type: ignore[arg-type]
            schemas.append((f"{style} {name}", convert_to_openai_tool(tool)["function"]["parameters"]))
    for example in EXAMPLES:
        assert isinstance(example, ModelFacing)
        parameters = convert_to_openai_tool(type(example))["function"]["parameters"]
        schemas.append((type(example).__name__, bounded_schema(parameters)))
    refused = [name for name, schema in schemas if not _llama_grammar_parses(vocab, schema)]
    assert refused == []
    too_long = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 2000}}, "required": ["a"]}
    assert not _llama_grammar_parses(vocab, too_long)  # the check can fail


def cli(args: list[str], cache: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k}
    env.update({"ARAG_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO), "LANGSMITH_TRACING": "false"})
    command = [sys.executable, "-m", "arag_graph.cli.main", *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def test_arag_ask_prints_the_real_trajectory_and_writes_the_page(
    local_model: LocalModel, sample_index: Any, tmp_path: Path
) -> None:
    page = tmp_path / "ask.html"
    args = ["ask", QUESTION, "--index", str(sample_index.path), *local_model.cli_args(), "--max-steps", "3"]
    done = cli([*args, "--set", f"max_tokens={MAX_TOKENS}", "--html", str(page)], tmp_path / "cache")
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    # An answer (exit 0), or the run's reason in one line (exit 1): what a small model earns either way.
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert (done.returncode == 0 and not errors) or (done.returncode == 1 and len(errors) == 1), done.stderr[-3000:]
    streamed = [line.strip() for line in done.stdout.splitlines() if line.strip().startswith(("->", "<-"))]
    # The page keeps each question's steps gzip-compressed in base64 (the browser inflates them).
    html_text = page.read_text(encoding="utf-8")
    blobs = re.findall(r'<script type="application/gzip" id="[^"]*">([^<]*)</script>', html_text)
    shown = html_text + "".join(gzip.decompress(base64.b64decode(b)).decode("utf-8") for b in blobs)
    assert "trajectory view" in done.stdout
    for line in streamed:  # each tool call printed as it happened is on the page too
        if line.startswith("->"):
            tool = line[3:].split("(", 1)[0]
            assert tool in shown, line


def test_arag_eval_with_the_judge_resumes_after_a_kill(
    local_model: LocalModel, sample_index: Any, tmp_path: Path
) -> None:
    """3 questions, 2 workers, naive_rag, the local model as judge too; killed at the first prediction
    on disk, then rerun: every question recorded once, with the server's usage and a latency."""
    from tests.slow.eval_faults import kill_at_records, read_predictions

    out = tmp_path / "run"
    args = [
        "eval", "--dataset", str(REPO / "arag_graph/data/sample/questions.json"),
        "--index", str(sample_index.path), *local_model.cli_args(), "--judge", local_model.name,
        "--graphs", "naive_rag", "--limit", "3", "--workers", "2",
        "--set", f"max_tokens={MAX_TOKENS}", "--out", str(out), "--quiet", "--no-upload",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k}
    env.update({"ARAG_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO), "LANGSMITH_TRACING": "false"})
    kill = kill_at_records([sys.executable, "-m", "arag_graph.cli.main", *args], env, 1, out)
    assert kill.landed
    done = cli(args, tmp_path / "cache", timeout=900)
    # Exit 0, or 1 with one line when every run failed (a small model may copy the answer format
    # three times): what is checked is that each question was recorded once, whatever it earned.
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert (done.returncode == 0 and not errors) or (
        done.returncode == 1 and len(errors) == 1 and "every run of the evaluation failed" in errors[0]
    ), done.stderr[-3000:]
    files, duplicates, torn = read_predictions(out)
    assert duplicates == 0 and torn == 0
    records = [r for by_question in files.values() for r in by_question.values()]
    assert len(records) == 3, sorted(files)
    for record in records:
        prediction = record["prediction"]
        assert prediction["answer"] or one_line(prediction["error"]), (record["question_id"], prediction.get("error"))
        assert prediction["usage"] and prediction["usage"]["input_tokens"] > 0, prediction
        assert record["seconds"] > 0
    assert (out / "summary.md").is_file() and (out / "report.html").is_file()


def test_langgraph_dev_serves_a_run_on_the_local_model(
    local_model: LocalModel, sample_index: Any, tmp_path_factory: pytest.TempPathFactory, exported_encoder: Path
) -> None:
    from tests.slow.devserver import running_dev_server

    env = {
        "ARAG_ALLOWED_BASE_URLS": local_model.base_url,
        "ARAG_ALLOWED_MODELS": local_model.name,
        "ARAG_INDEX": str(sample_index.path),
    }
    workdir = tmp_path_factory.mktemp("langgraph-dev-local")
    with running_dev_server(workdir, env, encoder=exported_encoder) as server, server.log_on_failure():
        client = server.client()
        thread = client.threads.create()
        result = client.runs.wait(
            thread["thread_id"], "arag", input={"question": QUESTION}, context=local_model.context(max_steps=2)
        )
    assert isinstance(result, dict), result
    assert result.get("answer") or one_line(result.get("error")), result
    assert result.get("steps", 0) <= 2


# ---------------------------------------------------------------------------------------------
# What the model sent that was malformed, by class


def test_every_malformed_reply_was_classified_and_the_runs_still_ended(local_model: LocalModel) -> None:
    """Runs last in the module: the table of the replies logged above (written to
    ``$ARAG_LOCAL_MODEL_REPORT`` when set)."""
    table = {case: tally(log.exchanges) for case, log in LOGS.items()}
    assert table, "no run was logged"
    shown = {case: examples(log.exchanges) for case, log in LOGS.items()}
    report = os.environ.get("ARAG_LOCAL_MODEL_REPORT")
    if report:
        Path(report).write_text(json.dumps({"table": table, "examples": shown}, indent=1), encoding="utf-8")
    print(json.dumps(table, indent=1))
    for log in LOGS.values():
        for exchange in log.exchanges:
            for name in classify(exchange):
                assert re.fullmatch(r"[a-z_]+", name)
    assert sum(row["replies"] for row in table.values()) > 0
