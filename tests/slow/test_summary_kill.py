"""``arag index --summaries MODEL`` killed with SIGKILL mid-pass, then run again: no document paid twice.

The model is the OpenAI-compatible stand-in. It answers the first two documents and stalls on the
others (the pass asks for several at once); the command (a subprocess) is killed once two summaries
are in its resume file. The rerun, same command, asks the model only for the documents that had no
summary, and the finished index holds every summary in corpus order with the tokens of all of them
in its manifest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arag_graph.index.load import load_index
from arag_graph.llm.summarize import resume_path
from arag_graph.retrievers.summaries import SUMMARIES
from tests.fakes import sentinel_key
from tests.stubs._http import RecordedRequest
from tests.stubs.openai_server import OpenAIStubServer, Reply, stall, text

pytestmark = [pytest.mark.slow, pytest.mark.integration]

DOCS = {f"Topic {n}": f"Topic {n} is a subject. It has {n} facts. Its third sentence is here." for n in range(5)}


def _command(corpus: Path, out: Path, url: str) -> list[str]:
    index = ["index", str(corpus), "--out", str(out), "--summaries", "stub-model", "--base-url", url]
    return [sys.executable, "-m", "arag_graph.cli.main", *index, "--model-timeout", "60", "--quiet"]


def _summaries(answered: set[int]) -> object:
    """A responder: "Summary N." for the documents in ``answered``, a two-minute stall for the others."""

    def reply(request: RecordedRequest) -> Reply:
        prompt = json.dumps(request.json())
        n = next(n for n in range(len(DOCS)) if f"Topic {n} is a subject" in prompt)
        return text(f"Summary {n}.") if n in answered else stall(120)

    return reply


def test_a_killed_summary_pass_resumes_without_paying_twice(openai_server: OpenAIStubServer, tmp_path: Path) -> None:
    corpus, out = tmp_path / "corpus.json", tmp_path / "index"
    corpus.write_text(json.dumps(DOCS), encoding="utf-8")
    # The session's cache directory, as this process's.
    env = {**os.environ, "OPENAI_API_KEY": sentinel_key("summary-kill")}
    openai_server.script(_summaries({0, 1}))  # type: ignore[arg-type]
    process = subprocess.Popen(_command(corpus, out, openai_server.url), env=env)
    progress = resume_path(out, "stub-model")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if progress.exists() and len(progress.read_text(encoding="utf-8").splitlines()) >= 2:
                break
            time.sleep(0.05)
        assert process.poll() is None, "the command ended before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    asked_before = len(openai_server.completions)
    assert 3 <= asked_before <= len(DOCS)  # two answered, the others stalled when the kill came

    openai_server.script(_summaries(set(range(len(DOCS)))))  # type: ignore[arg-type]
    done = subprocess.run(_command(corpus, out, openai_server.url), env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(openai_server.completions) - asked_before == 3  # only the documents without a summary
    index = load_index(out)
    records = [json.loads(line) for line in (index.build_dir / SUMMARIES).read_text().splitlines()]
    assert [r["summary"] for r in records] == [f"Summary {n}." for n in range(5)]
    info = index.manifest.extra["summaries"]
    assert info["documents"] == 5 and info["reused"] == 2 and info["input_tokens"] > 0
    assert not progress.exists()
