"""Bounded model waits and checked command-line values (issue 11, items 3, 9 and 10 for ask/eval/sample-chains).

- A model server that accepts and never answers (tests/stubs/silent_server.py) ends a run after
  the request timeout and retries, which users set (flags, environment, configuration fields,
  ``resolve_chat_model`` parameters), with one line that says it timed out and how to raise the
  limit; the default ends a dead call in about 90 s.
- Numbers that make no sense (NaN, infinity, zero where zero is no answer, ``--top-k`` outside
  the tools' range) are refused with one line before anything runs; ``--json`` is strict JSON.
- Text that is not UTF-8 (a command-line byte Python could not decode) is one line, not a traceback.

The connections the silent server accepted count the request attempts: no timed assertions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arag_graph.core.errors import ModelSpecError
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.sample import sample_questions_path
from arag_graph.llm import models
from arag_graph.registry import build_graph, config_for
from tests.cli_run import assert_one_error_line
from tests.cli_run import run_cli as run
from tests.conftest import REPO
from tests.fakes import sentinel_key
from tests.reliability import record
from tests.stubs.openai_server import OpenAIStubServer, text, tool_call
from tests.stubs.silent_server import SilentServer

pytestmark = pytest.mark.integration

KEY = sentinel_key("limits")
QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
# The OpenAI client's backoff between attempts is at most 8 s (0.5 s doubling); with 2 retries, 1.5 s.
MAX_BACKOFF = 8.0


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A sentinel key, no model settings from the environment, and fresh model clients."""
    for name in ("OPENAI_BASE_URL", "ARAG_BASE_URL", "ARAG_API_KEY", "ARAG_MODEL", "ARAG_INDEX"):
        monkeypatch.delenv(name, raising=False)
    for name in ("ARAG_MODEL_TIMEOUT", "ARAG_MODEL_RETRIES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    models._chat_openai.cache_clear()
    yield
    models._chat_openai.cache_clear()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    with SilentServer() as server:
        yield server


def _limits(model: Any) -> tuple[float, int]:
    return float(model.request_timeout), int(model.max_retries)


# ---------------------------------------------------------------------------------------------
# The limits themselves


def test_default_limits_end_a_dead_model_call_in_about_90_seconds(model_env: None) -> None:
    timeout, retries = _limits(models.resolve_chat_model("gpt-4o-mini"))
    attempts = retries + 1
    backoff = sum(min(0.5 * 2**n, MAX_BACKOFF) for n in range(retries))
    assert attempts * timeout + backoff <= 95, (timeout, retries)
    assert retries >= 1  # one transient 429 or 500 is still retried


def test_limits_come_from_parameters_then_environment(model_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARAG_MODEL_TIMEOUT", "7.5")
    monkeypatch.setenv("ARAG_MODEL_RETRIES", "0")
    assert _limits(models.resolve_chat_model("gpt-4o-mini")) == (7.5, 0)
    assert _limits(models.resolve_chat_model("gpt-4o-mini", timeout=3, max_retries=4)) == (3.0, 4)
    from arag_graph.evaluators.judge import resolve_judge

    assert _limits(resolve_judge("gpt-4o-mini", timeout=12, max_retries=1)) == (12.0, 1)


@pytest.mark.parametrize(
    ("env", "kwargs", "named"),
    [
        ({"ARAG_MODEL_TIMEOUT": "soon"}, {}, "$ARAG_MODEL_TIMEOUT"),
        ({"ARAG_MODEL_TIMEOUT": "nan"}, {}, "$ARAG_MODEL_TIMEOUT"),
        ({"ARAG_MODEL_RETRIES": "-3"}, {}, "$ARAG_MODEL_RETRIES"),
        ({}, {"timeout": float("inf")}, "timeout"),
        ({}, {"timeout": float("nan")}, "timeout"),
        ({}, {"max_retries": 50}, "retries"),
    ],
)
def test_unusable_limits_are_one_line(
    env: dict[str, str], kwargs: dict[str, Any], named: str, model_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ModelSpecError, match=r"^[^\n]+$") as caught:
        models.resolve_chat_model("gpt-4o-mini", **kwargs)
    assert named in str(caught.value)


@pytest.mark.parametrize(
    ("values", "accepted"),
    [
        ({"timeout": "12.5", "max_retries": "1"}, True),
        ({"timeout": "nan"}, False),
        ({"timeout": "inf"}, False),
        ({"timeout": -1}, False),
        ({"max_retries": 11}, False),
    ],
)
def test_graph_configuration_has_the_limits_with_ranges(values: dict[str, Any], accepted: bool) -> None:
    from arag_graph.core.errors import AragError

    if accepted:
        cfg = config_for("arag", **values)
        assert (cfg.timeout, cfg.max_retries) == (12.5, 1)
    else:
        with pytest.raises(AragError, match=r"out of range|not valid"):
            config_for("arag", **values)


@pytest.mark.parametrize("graph", ["arag", "naive_rag"])
def test_a_run_against_a_silent_server_ends_after_the_configured_attempts(
    graph: str, silent: SilentServer, model_env: None, sample_index: HierarchicalIndex
) -> None:
    built = build_graph(graph, index=sample_index, model="gpt-4o-mini")
    context = config_for(graph, base_url=silent.url, timeout=0.3, max_retries=1)
    out = built.invoke({"question": QUESTION}, context=context)
    assert out["error"] and "timed out" in out["error"] and "--model-timeout" in out["error"], out.get("error")
    assert "\n" not in out["error"]
    assert silent.accepted == 2  # the first attempt and one retry, then the run ended
    record("bounded_waits", f"{graph} run, limits from its configuration", trials=1, faults=1, survived=1)


# ---------------------------------------------------------------------------------------------
# arag ask, eval and sample-chains against a server that never answers


def test_arag_ask_against_a_silent_server_ends_with_one_line(
    silent: SilentServer, sample_index: HierarchicalIndex
) -> None:
    """The real process, limits from the environment: exit 1, one error line that says what to raise."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ARAG_MODEL", "ARAG_BASE"))}
    env |= {"OPENAI_API_KEY": KEY, "ARAG_MODEL_TIMEOUT": "1", "ARAG_MODEL_RETRIES": "1", "PYTHONPATH": str(REPO)}
    argv = ["ask", QUESTION, "--index", str(sample_index.path), "--model", "gpt-4o-mini", "--base-url", silent.url]
    # The limit here only stops a hang of this test; what is checked are the exit, the line and the count.
    done = subprocess.run(
        [sys.executable, "-m", "arag_graph.cli.main", *argv],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and KEY not in done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr
    assert "timed out" in errors[0] and "within 1 s" in errors[0] and "--model-timeout" in errors[0]
    assert silent.accepted == 2
    record("bounded_waits", "arag ask process, limits from the environment", trials=1, faults=1, survived=1)


def test_arag_ask_flags_set_the_limits(
    silent: SilentServer, model_env: None, sample_index: HierarchicalIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ask", QUESTION, "--index", str(sample_index.path), "--model", "gpt-4o-mini", "--base-url", silent.url]
    code, out, err = run([*argv, "--model-timeout", "0.3", "--model-retries", "0", "--json"], capsys)
    assert code == 1, err
    result = json.loads(out)
    assert "timed out" in result["error"] and silent.accepted == 1


def test_arag_eval_flags_set_the_limits(
    silent: SilentServer,
    model_env: None,
    sample_index: HierarchicalIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["eval", "--dataset", str(sample_questions_path()), "--index", str(sample_index.path), "--limit", "2"]
    argv += ["--graphs", "direct", "--model", "gpt-4o-mini", "--base-url", silent.url, "--no-upload", "--quiet"]
    argv += ["--out", str(tmp_path / "run"), "--model-timeout", "0.3", "--model-retries", "0"]
    code, _, err = run(argv, capsys)
    assert code == 1 and "every run of the evaluation failed (2 of 2)" in err, err
    assert silent.accepted == 2  # one attempt per question


def test_arag_sample_chains_flags_set_the_limits(
    openai_server: OpenAIStubServer,
    model_env: None,
    sample_index: HierarchicalIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every request stalls past the timeout: one retry doubles the requests of the same chain."""
    from tests.stubs.openai_server import stall

    counts = []
    for retries in (0, 1):
        openai_server.clear()
        openai_server.script([], then=stall(3))
        argv = ["sample-chains", "--dataset", str(sample_questions_path()), "--index", str(sample_index.path)]
        argv += ["--out", str(tmp_path / f"chains{retries}.jsonl"), "--model", "gpt-4o-mini", "--limit", "1"]
        argv += ["--base-url", openai_server.url, "--n", "1", "--max-steps", "1", "--json"]
        code, out, err = run([*argv, "--model-timeout", "0.3", "--model-retries", str(retries)], capsys)
        assert code == 0, err
        assert json.loads(out)["failed"] == 1
        counts.append(len(openai_server.requests))
    assert counts[0] >= 1 and counts[1] == 2 * counts[0], counts


# ---------------------------------------------------------------------------------------------
# Numbers that make no sense, one rule for --top-k, strict --json


def _eval(*extra: str) -> list[str]:
    return ["eval", "--dataset", str(sample_questions_path()), "--graphs", "naive_rag", "--model", "offline", *extra]


def _chains(tmp: Path, *extra: str) -> list[str]:
    argv = ["sample-chains", "--dataset", str(sample_questions_path()), "--out", str(tmp / "c.jsonl")]
    return [*argv, "--model", "offline", *extra]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["sample-chains", "--temperature", "nan"], "temperature"),
        (["sample-chains", "--temperature", "inf"], "temperature"),
        (["sample-chains", "--temperature", "0"], "temperature"),
        (["sample-chains", "--workers", "0"], "--workers"),
        (["sample-chains", "--n", "0"], "n >= 1"),
        (["sample-chains", "--model-timeout", "nan"], "--model-timeout"),
        (["ask", "--model-timeout", "0"], "--model-timeout"),
        (["ask", "--model-timeout", "inf"], "--model-timeout"),
        (["ask", "--model-retries", "-1"], "--model-retries"),
        (["eval", "--model-timeout", "nan"], "--model-timeout"),
        (["eval", "--workers", "0"], "--workers"),
    ],
    ids=lambda v: "_".join(v) if isinstance(v, list) else None,
)
def test_nan_infinity_and_zero_are_refused_where_they_make_no_sense(
    argv: list[str], named: str, sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command, extra = argv[0], argv[1:]
    index = ["--index", str(sample_index.path)]
    full = {
        "ask": ["ask", QUESTION, *index, "--model", "offline", *extra],
        "eval": [*_eval("--out", str(tmp_path / "run"), *index), *extra],
        "sample-chains": [*_chains(tmp_path, *index), *extra],
    }[command]
    line = assert_one_error_line(*run(full, capsys))
    assert named in line
    assert not (tmp_path / "run").exists() and not (tmp_path / "c.jsonl").exists()
    record("malformed_inputs", f"flag {' '.join(argv)}", faults=1, survived=1)


@pytest.mark.parametrize("value", ["0", "21", "-5"])
@pytest.mark.parametrize("command", ["ask", "eval", "sample-chains"])
def test_top_k_out_of_range_is_refused_by_every_command(
    command: str,
    value: str,
    sample_index: HierarchicalIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    index = ["--index", str(sample_index.path)]
    full = {
        "ask": ["ask", QUESTION, *index, "--model", "offline"],
        "eval": _eval("--out", str(tmp_path / "run"), *index),
        "sample-chains": _chains(tmp_path, *index),
    }[command]
    line = assert_one_error_line(*run([*full, "--top-k", value], capsys))
    assert f"--top-k {value}" in line and "1 to 20" in line


def _strict(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_json_output_is_strict_when_a_model_asks_for_infinite_top_k(
    openai_server: OpenAIStubServer,
    model_env: None,
    sample_index: HierarchicalIndex,
    capsys: pytest.CaptureFixture[str],
) -> None:
    openai_server.script(
        [tool_call("semantic_search", {"query": "Leland", "top_k": float("inf")}), text("Answer: Stephen King")]
    )
    argv = ["ask", QUESTION, "--index", str(sample_index.path), "--model", "gpt-4o-mini"]
    code, out, err = run([*argv, "--base-url", openai_server.url, "--max-steps", "2", "--json"], capsys)
    assert "Traceback" not in err
    result = _strict(out)  # Python's json would also read NaN and Infinity; JSON has neither
    assert code == 0, err
    assert result["trajectory"] and result["trajectory"][0]["tool"] == "semantic_search"


# ---------------------------------------------------------------------------------------------
# Text that is not UTF-8

BAD = os.fsdecode(b"caf\xe9")  # what Python makes of a Latin-1 byte on a UTF-8 command line


@pytest.mark.parametrize("where", ["ask question", "ask --index", "eval --out", "sample-chains --out"])
def test_a_non_utf8_byte_in_an_argument_is_one_line(
    where: str, sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = ["--index", str(sample_index.path)]
    argv = {
        "ask question": ["ask", f"Who directed {BAD}?", *index, "--model", "offline"],
        "ask --index": ["ask", QUESTION, "--index", str(tmp_path / BAD), "--model", "offline"],
        "eval --out": _eval("--out", str(tmp_path / BAD), *index),
        "sample-chains --out": [
            "sample-chains",
            "--dataset",
            str(sample_questions_path()),
            "--out",
            str(tmp_path / f"{BAD}.jsonl"),
            *index,
            "--model",
            "offline",
        ],
    }[where]
    line = assert_one_error_line(*run(argv, capsys))
    assert "not UTF-8" in line and "0xe9" in line
    assert list(tmp_path.iterdir()) == []
    record("malformed_inputs", f"non-UTF-8 {where}", faults=1, survived=1)


def test_a_non_utf8_question_as_a_process_is_one_line(sample_index: HierarchicalIndex) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [b"ask", b"Who directed caf\xe9?", b"--index", os.fsencode(str(sample_index.path)), b"--model", b"offline"]
    done = subprocess.run([sys.executable, "-m", "arag_graph.cli.main", *argv], env=env, cwd=REPO, capture_output=True)
    assert done.returncode == 2 and done.stdout == b""
    lines = done.stderr.decode("utf-8", "replace").splitlines()
    assert len(lines) == 1 and lines[0].startswith("arag: error: the question is not UTF-8"), lines
