"""Every network wait has a total deadline per attempt: a server that drips one byte at a time fails in time.

httpx's timeouts bound each read, so a server that sends one byte every 0.4 s (less than any read
timeout set here) and never finishes held a chat-model call, an embeddings request and a Chroma
request forever (issue 22, section 3). The drip server (:mod:`tests.stubs.silent_server`, dripping) plays that
server for every endpoint kind: the chat model (sync and async, as graphs and served runs call it),
the LLM judge, the summary writer, an OpenAI-compatible embeddings endpoint, and a Chroma server at
each stage (heartbeat, collection requests). Each test checks the kind of failure (timed out, in
one line) and that the server saw the client leave; no timed assertion: the drip server gives up
by itself after its ``limit`` (an outcome the tests refuse) and pytest-timeout catches a hang.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest

from arag_graph.core.errors import AragError
from arag_graph.core.safety import describe_model_error
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.llm import models
from arag_graph.registry import build_graph, config_for
from tests.cli_run import assert_one_error_line, run_cli
from tests.fakes import sentinel_key
from tests.reliability import record
from tests.stubs.silent_server import CLIENT_LEFT, SilentServer, complete
from tests.test_chroma_timeouts import server_index

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
# Each drip gives up after this long: on code without total deadlines a test fails after it.
LIMIT = 25.0


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("OPENAI_BASE_URL", "ARAG_BASE_URL", "ARAG_API_KEY", "ARAG_MODEL_TIMEOUT", "ARAG_MODEL_RETRIES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", sentinel_key("deadlines"))
    models._chat_openai.cache_clear()
    yield
    models._chat_openai.cache_clear()


@pytest.fixture
def drip() -> Iterator[SilentServer]:
    with SilentServer(drip=True, limit=LIMIT) as server:
        yield server


def every_client_left(server: SilentServer, attempts: int) -> None:
    outcomes = server.outcomes()
    assert outcomes == [CLIENT_LEFT] * attempts, outcomes


# ---------------------------------------------------------------------------------------------
# Chat models: graphs (sync and async), the judge, the summary writer


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_graph_run_against_a_dripping_model_ends_after_its_attempts(
    mode: str, drip: SilentServer, model_env: None, sample_index: HierarchicalIndex
) -> None:
    """The run's ``timeout`` and ``max_retries`` fields: two attempts, each ended by its deadline."""
    built = build_graph("naive_rag", index=sample_index, model="gpt-4o-mini")
    context = config_for("naive_rag", base_url=drip.url, timeout=1, max_retries=1)
    if mode == "invoke":
        out = built.invoke({"question": QUESTION}, context=context)
    else:
        out = asyncio.run(built.ainvoke({"question": QUESTION}, context=context))
    error = out.get("error") or ""
    assert "timed out" in error and "--model-timeout" in error and "\n" not in error, out
    every_client_left(drip, attempts=2)
    record("bounded_waits", f"naive_rag {mode}, model drips one byte at a time", trials=1, faults=1, survived=1)


def test_the_judge_against_a_dripping_model_times_out(drip: SilentServer, model_env: None) -> None:
    from arag_graph.evaluators.judge import resolve_judge

    judge = resolve_judge("gpt-4o-mini", drip.url, timeout=1, max_retries=0)
    with pytest.raises(openai.APITimeoutError) as caught:
        judge.invoke("Is the answer right?")
    assert "timed out" in describe_model_error(caught.value)
    every_client_left(drip, attempts=1)


def test_the_summary_writer_against_a_dripping_model_times_out(drip: SilentServer, model_env: None) -> None:
    from arag_graph.llm.summarize import _model_summarizer

    summarize = _model_summarizer("gpt-4o-mini", drip.url, timeout=1, max_retries=0)
    with pytest.raises(openai.APITimeoutError):
        summarize("Leland", "A town in North Carolina.")
    every_client_left(drip, attempts=1)


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible embeddings


def test_a_dripping_embeddings_endpoint_times_out_in_one_line(drip: SilentServer, model_env: None) -> None:
    from arag_graph.index.embedding_loader import resolve_embeddings

    embeddings = resolve_embeddings("openai:embed", base_url=drip.url, timeout=1, max_retries=1)
    with pytest.raises(AragError, match=r"^[^\n]+$") as caught:
        embeddings.embed_query("a river")
    assert "timed out" in str(caught.value).lower() and "ARAG_EMBEDDING_TIMEOUT" in str(caught.value)
    every_client_left(drip, attempts=2)
    record("bounded_waits", "embeddings endpoint drips one byte at a time", trials=1, faults=1, survived=1)


def test_an_operation_that_asks_again_shares_the_embedding_endpoints_bound(drip: SilentServer, model_env: None) -> None:
    """Issue 38: the bound was per request, so an operation that embeds again after a timeout (HyDE's
    passage, then the query) waited ``timeout × attempts`` once more for each request. In one operation
    the endpoint's requests share the bound from the first: the second embedding is refused without a
    request. A new operation (a later search) starts its own bound."""
    from arag_graph.core.deadlines import one_operation
    from arag_graph.index.embedding_loader import resolve_embeddings

    embeddings = resolve_embeddings("openai:embed", base_url=drip.url, timeout=1, max_retries=1)
    errors = []
    with one_operation():
        for text in ("a hypothetical passage", "the query"):
            with pytest.raises(AragError, match=r"^[^\n]+$") as caught:
                embeddings.embed_query(text)
            errors.append(str(caught.value))
    assert all("timed out" in e and "ARAG_EMBEDDING_TIMEOUT" in e for e in errors), errors
    assert "time for the endpoint is spent" in errors[1]
    every_client_left(drip, attempts=2)  # the second embedding sent nothing
    with one_operation(), pytest.raises(AragError, match="timed out"):
        embeddings.embed_query("the next search")
    every_client_left(drip, attempts=4)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hyde_search_against_a_dripping_embeddings_endpoint_waits_one_bound(
    mode: str, drip: SilentServer, model_env: None, sample_index: HierarchicalIndex
) -> None:
    """A-RAG's semantic_search with HyDE: the passage's embedding times out, the search falls back to the
    query, whose embedding must not wait a second ``timeout × attempts`` (the tool call is one operation)."""
    from tests.scripted import hyde_search_graph

    # the session's index, its query embeddings from the dripping endpoint
    graph = hyde_search_graph(sample_index, drip.url, timeout=1)
    inputs, context = {"question": "Who directed it?"}, {"hyde": True}
    out = (
        graph.invoke(inputs, context=context) if mode == "sync" else asyncio.run(graph.ainvoke(inputs, context=context))
    )
    assert any("HyDE failed" in w for w in out["warnings"]), out["warnings"]
    every_client_left(drip, attempts=2)  # the passage's two attempts; the query's embedding sent nothing


# ---------------------------------------------------------------------------------------------
# Chroma server

DATABASE = {"id": str(uuid.uuid4()), "name": "default_database", "tenant": "default_tenant"}
# Chroma's requests in the order a client sends them: its start-up (identity, tenant, database), the
# heartbeat a build checks first, then the collection (created by a build, opened by a search).
START = {
    "/auth/identity": {"user_id": "", "tenant": "default_tenant", "databases": ["default_database"]},
    "/tenants/default_tenant": {"name": "default_tenant"},
    "/databases/default_database": DATABASE,
    "/heartbeat": {"nanosecond heartbeat": 1},
}


def chroma_answering(*suffixes: str) -> Callable[[str, str], bytes | None]:
    """A Chroma server that answers requests ending in ``suffixes`` and drips every other one."""

    def answer(method: str, path: str) -> bytes | None:
        for suffix in suffixes:
            if path.endswith(suffix):
                return complete(200, json.dumps(START[suffix]).encode())
        return None

    return answer


chroma_start = chroma_answering(*START)
"""Chroma's start-up requests answered; every collection request drips."""


def chroma_open(method: str, path: str) -> bytes | None:
    """Start-up and opening the collection answered; the query drips."""
    name = path.rpartition("/collections/")[2]
    if method == "GET" and name and "/" not in name:
        collection = {"id": str(uuid.uuid4()), "name": name, "tenant": "default_tenant", "configuration_json": {}}
        return complete(200, json.dumps({**collection, "database": "default_database"}).encode())
    return chroma_start(method, path)


def timed_out(line: str, url: str) -> None:
    assert url in line and "did not answer within 1 s" in line and "timed out" in line, line


@pytest.mark.parametrize("answered", range(len(START) + 1), ids=[*START, "/collections"])
def test_a_chroma_server_dripping_at_any_stage_fails_the_build_in_one_line(
    answered: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each request of ``arag index --chroma-url`` drips in turn, the client's start-up included
    (Chroma sends those without a timeout): the command fails in time, and the server sees the
    client leave, so no thread is left waiting on it."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "The Nile is a river."}) + "\n", encoding="utf-8")
    with SilentServer(drip=True, limit=LIMIT, answer=chroma_answering(*list(START)[:answered])) as drip:
        argv = ["index", str(corpus), "--out", str(tmp_path / "i"), "--chroma-url", drip.root_url, "--quiet"]
        timed_out(assert_one_error_line(*run_cli([*argv, "--chroma-timeout", "1"], capsys)), drip.root_url)
        outcomes = drip.outcomes()  # a failed build also drops its collection: that request drips too
        assert outcomes and set(outcomes) == {CLIENT_LEFT}, outcomes
    assert not (tmp_path / "i").exists()
    record("chroma_waits", f"index: server drips after {answered} answered requests", trials=1, faults=1, survived=1)


@pytest.mark.parametrize("answer", [chroma_start, chroma_open], ids=["open", "query"])
def test_a_chroma_server_that_drips_collection_requests_fails_search_in_one_line(
    answer: Callable[[str, str], bytes | None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SilentServer(drip=True, limit=LIMIT, answer=answer) as drip:
        root = server_index(tmp_path, drip.root_url)
        argv = ["search", "--index", str(root), "--query", "a river", "--chroma-timeout", "1"]
        timed_out(assert_one_error_line(*run_cli(argv, capsys)), drip.root_url)
        outcomes = drip.outcomes()
        assert outcomes and set(outcomes) == {CLIENT_LEFT}, outcomes
    record("chroma_waits", "search: server drips collection requests", trials=1, faults=1, survived=1)


# ---------------------------------------------------------------------------------------------
# A Chroma URL that cannot be read


@pytest.mark.parametrize("url", ["http://[::1", "http://[::1]:notaport", "http://host:99999"])
def test_an_unreadable_chroma_url_is_one_line(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "The Nile is a river."}) + "\n", encoding="utf-8")
    argv = ["index", str(corpus), "--out", str(tmp_path / "i"), "--chroma-url", url, "--quiet"]
    line = assert_one_error_line(*run_cli(argv, capsys))
    assert "cannot read Chroma URL" in line and "http://HOST:PORT" in line, line
    assert not (tmp_path / "i").exists()
    record("malformed_inputs", f"--chroma-url {url}", faults=1, survived=1)
