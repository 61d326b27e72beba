"""The conventions people expect of a command line (issue 13 items 5 and 6).

``--json`` on every command (``eval`` and ``demo`` included) prints exactly one JSON object; the
options whose values the library defines list them in ``--help``; log records go through
``logging`` at the level ``-v``/``-q`` or ``$ARAG_LOG_LEVEL`` chooses, and with ``--quiet`` nothing
of LangSmith's reaches stderr; an evaluator that raises is logged and counted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arag_graph.index.corpus import CORPUS_FORMATS
from arag_graph.index.encoders import ENCODERS
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.qa.datasets import QUESTION_FORMATS
from arag_graph.registry import graph_names
from tests.cli_run import assert_one_error_line
from tests.cli_run import run_cli as run


def eval_argv(questions: Path, out: Path, index: HierarchicalIndex, *extra: str) -> list[str]:
    argv = ["eval", "--dataset", str(questions), "--model", "offline", "--out", str(out), "--limit", "2"]
    return [*argv, "--index", str(index.path), *extra]


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ARAG_API_KEY", "ARAG_MODEL", "OPENAI_BASE_URL", "ARAG_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------------------------
# --help lists the choices the library defines


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _ = run([*argv, "--help"], capsys)
    assert code == 0
    return " ".join(out.split())  # argparse wraps lines wherever it likes


@pytest.mark.parametrize(
    ("command", "option", "choices"),
    [
        ("ask", "--graph", graph_names()),
        ("demo", "--graph", graph_names()),
        ("eval", "--graphs", graph_names()),
        ("eval", "--format", QUESTION_FORMATS),
        ("sample-chains", "--format", QUESTION_FORMATS),
        ("index", "--format", CORPUS_FORMATS),
        ("index", "--encoder", ENCODERS),
    ],
)
def test_help_lists_every_choice(command: str, option: str, choices: Any, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help([command], capsys)
    described = text.split(f"{option} ", 2)[2].split(" --", 1)[0]  # the option's own help, after the usage line
    assert f"one of: {', '.join(choices)}" in described, described


def test_every_command_takes_json_and_the_output_flags(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("index", "search", "read", "ask", "eval", "sample-chains", "demo"):
        text = _help([command], capsys)
        assert "--json" in text and "-v, --verbose" in text and "-q, --quiet" in text, command


# --------------------------------------------------------------------------------------------
# --json on eval and demo


@pytest.mark.integration
def test_eval_json_is_one_object_with_the_summary(
    no_key: None,
    hotpot_slice: tuple[Path, Path],
    hotpot_index: HierarchicalIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "json"
    code, stdout, err = run([*eval_argv(hotpot_slice[1], out, hotpot_index, "--graphs", "naive_rag"), "--json"], capsys)
    assert code == 0, err
    assert stdout.count("\n") == 1
    printed = json.loads(stdout)
    assert printed["out"] == str(out)
    assert printed["summary"] == json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert [(r["graph"], r["n"]) for r in printed["summary"]] == [("naive_rag", 2)]
    assert {"summary.md", "summary.json", "accuracy_vs_tokens.png"} <= set(printed["files"])


@pytest.mark.integration
def test_demo_json_is_one_object_with_each_answer(
    no_key: None, sample_index: HierarchicalIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, err = run(["demo", "--index", str(sample_index.path), "--questions", "2", "--json"], capsys)
    assert code == 0, err
    assert stdout.count("\n") == 1
    printed = json.loads(stdout)
    assert printed["model"] == "offline" and printed["graph"] == "arag"
    assert len(printed["questions"]) == 2
    for answered in printed["questions"]:
        assert answered["question"] and answered["gold_answers"] and answered["answer"]
        assert answered["steps"] == len(answered["trajectory"]) > 0 and answered["warnings"] == []


# --------------------------------------------------------------------------------------------
# Logging: -v, -q, $ARAG_LOG_LEVEL


@pytest.mark.integration
def test_quiet_eval_writes_nothing_to_stderr_and_verbose_shows_langsmiths_lines(
    no_key: None,
    hotpot_slice: tuple[Path, Path],
    hotpot_index: HierarchicalIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = eval_argv(hotpot_slice[1], tmp_path / "quiet", hotpot_index, "--graphs", "naive_rag")
    code, stdout, err = run([*argv, "--quiet"], capsys)
    assert code == 0 and "| naive_rag |" in stdout
    assert err == ""  # no "Starting evaluation of experiment", no LangSmith progress bar

    code, _, err = run(
        [*eval_argv(hotpot_slice[1], tmp_path / "verbose", hotpot_index, "--graphs", "naive_rag"), "-v"], capsys
    )
    assert code == 0
    assert "arag: debug [arag_graph.evaluators.upload]: LangSmith: Starting evaluation of experiment" in err
    assert "it/s" not in err  # LangSmith's own bar never shows: the runner's one bar is the progress


def test_an_unknown_log_level_is_one_error_line(
    no_key: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ARAG_LOG_LEVEL", "chatty")
    line = assert_one_error_line(*run(["ask", "Who?", "--index", "/nonexistent"], capsys))
    assert "ARAG_LOG_LEVEL='chatty' is not a log level" in line


def test_verbose_and_quiet_together_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["ask", "Who?", "-v", "-q"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "not allowed with argument" in err


@pytest.mark.integration
def test_an_evaluator_that_raises_is_logged_and_counted(
    no_key: None,
    hotpot_slice: tuple[Path, Path],
    hotpot_index: HierarchicalIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import arag_graph.evaluators

    real = arag_graph.evaluators.default_evaluators

    def broken_f1(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("tokenizer exploded")

    def with_a_broken_one(*args: Any, **kwargs: Any) -> list[Any]:
        broken_f1.__name__ = "broken_f1_evaluator"
        return [*real(*args, **kwargs), broken_f1]

    monkeypatch.setattr(arag_graph.evaluators, "default_evaluators", with_a_broken_one)
    out = tmp_path / "broken"
    code, stdout, err = run(eval_argv(hotpot_slice[1], out, hotpot_index, "--graphs", "naive_rag"), capsys)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "broken_f1" in line]
    assert len(warnings) == 2 and all(line.startswith("arag: warning: evaluator broken_f1 failed") for line in warnings)
    assert all("RuntimeError: tokenizer exploded" in line for line in warnings)
    (row,) = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert row["evaluator_errors"] == 2 and row["broken_f1"] is None and row["contain_acc"] is not None
    assert "runs with evaluator errors" in stdout
    records = [json.loads(line) for line in (out / "predictions" / "naive_rag__default.jsonl").read_text().splitlines()]
    assert all(r["evaluator_errors"] == {"broken_f1": "RuntimeError: tokenizer exploded"} for r in records)
