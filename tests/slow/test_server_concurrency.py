"""Fifty concurrent runs through ``langgraph dev`` against the one index the server loaded.

The same checks as tests/test_concurrency.py (see tests/concurrent_runs.py), through the server and
``langgraph_sdk``, each run on its own thread: offline-policy runs must reproduce the same question
run alone on the same server, and runs of a model behind the OpenAI stand-in (picked per run in the
configuration form, as a Studio user would) must each get the shared chunk's text once.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from arag_graph.index.sample import sample_questions_path
from arag_graph.qa.datasets import load_questions
from tests.concurrent_runs import (
    check_own_reads,
    check_shared_chunk_run,
    fingerprint,
    shared_chunk_model,
    tagged_question,
)
from tests.reliability import record
from tests.slow.devserver import DevServer
from tests.stubs.openai_server import OpenAIStubServer

# One worker runs every module that uses the session's server (tests/slow/conftest.py), which starts once.
pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.xdist_group("langgraph-dev")]

RUNS = 50
QUESTIONS = [q.question for q in load_questions(sample_questions_path())]


def run_on_new_thread(server: DevServer, question: str, context: dict[str, Any]) -> dict[str, Any]:
    client = server.client()
    thread = client.threads.create()
    out = client.runs.wait(thread["thread_id"], "arag", input={"question": question}, context=context)
    assert isinstance(out, dict), out
    return out


def test_fifty_concurrent_offline_runs_through_the_server(dev_server: DevServer) -> None:
    with dev_server.log_on_failure():
        alone = {q: fingerprint(run_on_new_thread(dev_server, q, {})) for q in QUESTIONS}
        questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(RUNS)]
        random.Random(3).shuffle(questions)
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=RUNS) as pool:
            outs = list(pool.map(lambda q: run_on_new_thread(dev_server, q, {}), questions))
        seconds = time.perf_counter() - started
        for i, (question, out) in enumerate(zip(questions, outs, strict=True)):
            check_own_reads(out, f"server run {i}")
            assert fingerprint(out) == alone[question], f"server run {i} differs from the same question run alone"
    record("concurrency", "langgraph dev offline", trials=RUNS, seconds=round(seconds, 2))


def test_fifty_concurrent_model_runs_through_the_server(
    dev_server: DevServer, served_model: OpenAIStubServer, sample_index: Any
) -> None:
    """A model the operator allows (the session's stand-in endpoint), picked per run in the context."""
    ids = [c.id for c in sample_index.store.chunks]  # the server built the same bundled sample
    shared, own = ids[0], ids[1 : RUNS + 1]
    model = served_model
    before = len(model.completions)
    with dev_server.log_on_failure():
        model.script(shared_chunk_model(shared, own))
        context = {"model": "gpt-4o-mini", "base_url": model.url, "max_steps": 5}
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=RUNS) as pool:
            outs = list(pool.map(lambda i: run_on_new_thread(dev_server, tagged_question(i), context), range(RUNS)))
        seconds = time.perf_counter() - started
        for i, out in enumerate(outs):
            check_shared_chunk_run(out, i, shared, own)
        assert len(model.completions) - before == 3 * RUNS
        assert not model.errors
    record("concurrency", "langgraph dev ChatOpenAI", trials=RUNS, seconds=round(seconds, 2))
