"""API keys never leave the process: not in answers, trajectories, CLI output, errors or eval files.

Sentinel keys are set in the environment (``OPENAI_API_KEY``, ``LANGSMITH_API_KEY``) and really used:
the OpenAI stand-in checks that requests carry the key. Then everything a user can see or keep is
searched for any part of them (the marker ``SENTINEL`` they share): ``arag ask`` output (JSON and
text, stdout and stderr, in-process and as a process), and every file ``arag eval`` writes, for a
model that answers and for one whose errors quote the key back (as OpenAI's 401 does). Trace bodies
are checked in tests/test_tracing.py; the eval runner's LangSmith upload in tests/test_eval_runner.py.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from arag_graph.cli.main import main as cli_main
from arag_graph.llm import models
from arag_graph.qa.sample import sample_questions_path
from tests.fakes import sentinel_key, sentinel_langsmith_key
from tests.reliability import record
from tests.stubs._http import RecordedRequest
from tests.stubs.openai_server import OpenAIStubServer, Reply, http_error, text, tool_call

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
MARK = "SENTINEL"
OPENAI_KEY = sentinel_key("secrets")  # carries MARK
LANGSMITH_KEY = sentinel_langsmith_key("secrets")
OTHER_KEY = "-".join(("sk", "other", "9876543210fedcba"))  # a second key, without MARK
QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"


@pytest.fixture
def sentinel_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("OPENAI_BASE_URL", "ARAG_BASE_URL", "ARAG_API_KEY", "ARAG_MODEL", "ARAG_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("LANGSMITH_API_KEY", LANGSMITH_KEY)
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.setenv("ARAG_MODEL_RETRIES", "0")
    monkeypatch.setenv("ARAG_MODEL_TIMEOUT", "5.0")
    models._chat_openai.cache_clear()
    yield
    models._chat_openai.cache_clear()


def answering_model(request: RecordedRequest) -> Reply:
    """Searches once, then answers; grades every prediction correct when asked as a judge."""
    body = request.json() or {}
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if schema == "JudgeVerdict":
        return text(json.dumps({"reason": "It names the director.", "correct": True}))
    if schema is not None:
        return text("{}")
    if not any(m.get("role") == "tool" for m in body.get("messages") or []) and body.get("tools"):
        return tool_call("keyword_search", {"keywords": ["Leland"]})
    return text("Answer: John Doe")


def key_quoting_model(request: RecordedRequest) -> Reply:
    """Every call fails the way OpenAI answers a wrong key: by quoting it."""
    return http_error(401, f"Incorrect API key provided: {OPENAI_KEY}. Also tried {OTHER_KEY}.")


MODELS: dict[str, Callable[[RecordedRequest], Reply]] = {"answering": answering_model, "key_quoting": key_quoting_model}


def leaks(text: str) -> bool:
    return MARK in text or OTHER_KEY in text


def key_was_sent(server: OpenAIStubServer) -> None:
    assert server.completions, "the model was never called"
    assert all(r.headers.get("authorization") == f"Bearer {OPENAI_KEY}" for r in server.completions)


@pytest.mark.parametrize("behaviour", list(MODELS))
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_arag_ask_shows_no_key(
    behaviour: str,
    as_json: bool,
    openai_server: OpenAIStubServer,
    sentinel_env: None,
    sample_index: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    openai_server.script(MODELS[behaviour])
    argv = [
        "ask",
        QUESTION,
        "--index",
        str(sample_index.path),
        "--model",
        "gpt-4o-mini",
        "--base-url",
        openai_server.url,
    ]
    code = cli_main([*argv, "--json"] if as_json else argv)
    captured = capsys.readouterr()
    key_was_sent(openai_server)
    assert code == (0 if behaviour == "answering" else 1), captured.err
    assert not leaks(captured.out + captured.err), captured.out + captured.err
    if behaviour == "key_quoting":
        shown = json.loads(captured.out)["error"] if as_json else captured.err
        assert "HTTP 401" in shown and "***" in shown  # the key was there, and was replaced
    quoted = int(behaviour == "key_quoting")  # the fault: a provider error that quotes the key
    record("secrets", f"arag ask {behaviour} {'json' if as_json else 'text'}", trials=1, faults=quoted, survived=quoted)


def test_arag_ask_as_a_process_shows_no_key(openai_server: OpenAIStubServer, sample_index: Any) -> None:
    """The whole process output (library warnings and logging included) of a failing run."""
    openai_server.script(key_quoting_model)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "OPENAI_", "ARAG_M"))}
    env.update({"OPENAI_API_KEY": OPENAI_KEY, "LANGSMITH_API_KEY": LANGSMITH_KEY, "LANGSMITH_TRACING": "false"})
    env["PYTHONPATH"] = str(REPO)
    argv = [
        "ask",
        QUESTION,
        "--index",
        str(sample_index.path),
        "--model",
        "gpt-4o-mini",
        "--base-url",
        openai_server.url,
    ]
    done = subprocess.run(
        [sys.executable, "-m", "arag_graph.cli.main", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    key_was_sent(openai_server)
    assert done.returncode == 1, done.stderr
    assert "HTTP 401" in done.stderr
    assert not leaks(done.stdout + done.stderr), done.stdout + done.stderr
    record("secrets", "arag ask process", trials=1, faults=1, survived=1)


@pytest.mark.parametrize("behaviour", list(MODELS))
def test_arag_eval_writes_no_key_anywhere(
    behaviour: str,
    openai_server: OpenAIStubServer,
    sentinel_env: None,
    sample_index: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    openai_server.script(MODELS[behaviour])
    out = tmp_path / "run"
    argv = ["eval", "--dataset", str(sample_questions_path()), "--index", str(sample_index.path), "--limit", "3"]
    argv += ["--graphs", "arag,naive_rag", "--model", "gpt-4o-mini", "--judge", "gpt-4o-mini"]
    argv += ["--base-url", openai_server.url, "--out", str(out), "--no-upload", "--quiet"]
    code = cli_main(argv)
    captured = capsys.readouterr()
    assert code == (0 if behaviour == "answering" else 1), captured.err  # every run failed: non-zero
    key_was_sent(openai_server)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in files) and (out / "summary.json").exists()
    assert (out / "report.html").exists()
    for path in files:
        data = path.read_bytes()
        if path.suffix == ".html":  # report.html packs each question's steps (gzip in base64): read them unpacked
            blobs = re.findall(rb'<script type="application/gzip" id="[^"]*">([^<]*)</script>', data)
            assert blobs, "report.html without its packed details"
            data += b"".join(gzip.decompress(base64.b64decode(blob)) for blob in blobs)
        assert MARK.encode() not in data and OTHER_KEY.encode() not in data, f"a key in {path}"
    assert not leaks(captured.out + captured.err)
    records = [json.loads(line) for p in files if p.suffix == ".jsonl" for line in p.read_text().splitlines()]
    assert len(records) == 6
    if behaviour == "key_quoting":  # the failures were recorded, redacted, not dropped
        errors = [r["prediction"]["error"] for r in records]
        assert all(e and "HTTP 401" in e and "***" in e for e in errors), errors
    quoted = len(records) if behaviour == "key_quoting" else 0
    record("secrets", f"arag eval {behaviour}", trials=len(records), faults=quoted, survived=quoted, files=len(files))
