"""Fifty and more concurrent A-RAG runs on one loaded index, in one process: threads and asyncio.

tests/test_tools.py shows two tool sets in threads keep their reads apart; here whole graph runs
do, at the scale of a server (see tests/concurrent_runs.py for what is checked and why). The
same checks through ``langgraph dev`` are in tests/slow/test_server_concurrency.py; throughput is
measured in bench/bench_concurrency.py.
"""

from __future__ import annotations

import asyncio
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from arag_graph.arag.graph import build_arag_graph
from arag_graph.index.sample import sample_questions_path
from arag_graph.llm import models
from arag_graph.qa.datasets import load_questions
from tests.concurrent_runs import (
    check_own_reads,
    check_shared_chunk_run,
    fingerprint,
    shared_chunk_model,
    tagged_question,
)
from tests.reliability import record
from tests.stubs.openai_server import OpenAIStubServer

pytestmark = pytest.mark.integration

RUNS = 50
QUESTIONS = [q.question for q in load_questions(sample_questions_path())]


def planned_questions(seed: int) -> list[str]:
    """``RUNS`` questions: every sample question several times, in a seeded shuffled order."""
    picked = [QUESTIONS[i % len(QUESTIONS)] for i in range(RUNS)]
    random.Random(seed).shuffle(picked)
    return picked


@pytest.fixture(scope="module")
def offline_graph(sample_index: Any) -> Any:
    return build_arag_graph(sample_index, model="offline")


@pytest.fixture(scope="module")
def alone(offline_graph: Any) -> dict[str, dict[str, Any]]:
    """Each sample question run by itself: what every concurrent run of it must reproduce."""
    return {q: fingerprint(offline_graph.invoke({"question": q})) for q in QUESTIONS}


def test_fifty_concurrent_offline_runs_in_threads_match_their_runs_alone(
    offline_graph: Any, alone: dict[str, dict[str, Any]]
) -> None:
    questions = planned_questions(seed=1)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=RUNS) as pool:
        outs = list(pool.map(lambda q: offline_graph.invoke({"question": q}), questions))
    seconds = time.perf_counter() - started
    assert len(outs) == RUNS
    for i, (question, out) in enumerate(zip(questions, outs, strict=True)):
        check_own_reads(out, f"thread run {i}")
        assert fingerprint(out) == alone[question], f"thread run {i} differs from the same question run alone"
    record("concurrency", "in-process threads offline", trials=RUNS, seconds=round(seconds, 2))


@pytest.mark.parametrize("how", ["threads", "asyncio"])
def test_fifty_concurrent_model_runs_keep_their_read_sets_apart(
    how: str, openai_server: OpenAIStubServer, sample_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every run reads the same shared chunk at the same time, through ``ChatOpenAI`` and HTTP."""
    monkeypatch.setenv("ARAG_MODEL_RETRIES", "0")
    models._chat_openai.cache_clear()
    ids = [c.id for c in sample_index.store.chunks]
    shared, own = ids[0], ids[1 : RUNS + 1]
    openai_server.script(shared_chunk_model(shared, own))
    graph = build_arag_graph(sample_index, model="gpt-4o-mini")
    context = {"base_url": openai_server.url, "max_steps": 5}

    started = time.perf_counter()
    if how == "threads":

        def run(i: int) -> dict[str, Any]:
            return graph.invoke({"question": tagged_question(i)}, context=context)

        with ThreadPoolExecutor(max_workers=RUNS) as pool:
            outs = list(pool.map(run, range(RUNS)))
    else:

        async def all_at_once() -> list[dict[str, Any]]:
            runs = (graph.ainvoke({"question": tagged_question(i)}, context=context) for i in range(RUNS))
            return list(await asyncio.gather(*runs))

        outs = asyncio.run(all_at_once())
    seconds = time.perf_counter() - started
    for i, out in enumerate(outs):
        check_shared_chunk_run(out, i, shared, own)
    assert len(openai_server.completions) == 3 * RUNS
    models._chat_openai.cache_clear()
    record("concurrency", f"in-process {how} ChatOpenAI", trials=RUNS, seconds=round(seconds, 2))
