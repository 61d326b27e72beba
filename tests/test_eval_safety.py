"""Evaluations and chain sampling keep what they write safe (issue 11, items 2, 9 and 11; issue 12's one writer).

- ``arag eval --out`` and ``sample-chains --out`` write only where they may: a file, a directory
  of someone else's, a damaged run record or a foreign line is refused with one line and left as
  it was.
- One evaluation at a time per output directory: a second one started while the first runs is
  refused before it pays for any question.
- A full disk ends the evaluation with one line and no temporary file; a rerun resumes.
- A malformed record found on resume is run again (and kept aside), never summarised.
- An evaluation in which every run failed exits non-zero.
- Credentials in ``--base-url`` and keys a model echoes back reach no file, output or log.
- The library does not import the evaluation package, and both writers share one JSON Lines writer.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arag_graph.core.errors import AragError
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.sample import sample_questions_path
from arag_graph.llm import models
from tests.cli_run import assert_one_error_line
from tests.cli_run import run_cli as run
from tests.conftest import REPO
from tests.fakes import sentinel_key
from tests.reliability import record
from tests.stubs._http import RecordedRequest
from tests.stubs.openai_server import OpenAIStubServer, Reply, http_error, text

KEY = sentinel_key("evalsafe")
PASSWORD = "pw-SENTINEL-a1b2c3d4"


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("OPENAI_BASE_URL", "ARAG_BASE_URL", "ARAG_API_KEY", "ARAG_MODEL", "ARAG_INDEX", "ARAG_MODEL_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    models._chat_openai.cache_clear()
    yield
    models._chat_openai.cache_clear()


def eval_argv(index: HierarchicalIndex, out: Path, *extra: str, limit: int = 3) -> list[str]:
    argv = ["eval", "--dataset", str(sample_questions_path()), "--index", str(index.path), "--out", str(out)]
    return [*argv, "--graphs", "naive_rag", "--model", "offline", "--limit", str(limit), "--quiet", *extra]


def model_eval_argv(index: HierarchicalIndex, out: Path, server: OpenAIStubServer) -> list[str]:
    """Two questions through ``direct`` on the model stand-in, no retries: one request per question."""
    argv = eval_argv(index, out, limit=2)
    argv += ["--graphs", "direct", "--model", "gpt-4o-mini", "--base-url", server.url, "--no-upload"]
    return [*argv, "--model-retries", "0"]


def chains_argv(index: HierarchicalIndex, out: Path, *extra: str) -> list[str]:
    argv = ["sample-chains", "--dataset", str(sample_questions_path()), "--index", str(index.path)]
    return [*argv, "--out", str(out), "--model", "offline", "--limit", "1", "--n", "1", *extra]


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (or ``path`` itself) with its bytes, to show nothing was touched."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def lines_of(path: Path, *, complete_only: bool = False) -> list[dict[str, Any]]:
    """The JSON records of a JSON Lines file (with ``complete_only``, without a last line cut short)."""
    lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    if complete_only and not path.read_bytes().endswith(b"\n"):
        lines = lines[:-1]
    return [json.loads(line) for line in lines]


# ---------------------------------------------------------------------------------------------
# What the writers refuse (nothing touched)


@pytest.mark.integration
@pytest.mark.parametrize(
    "contents",
    [{"summary.md": "my notes\n"}, {"summary.md": "mine\n", "run.json": '{"mine": true}\n'}, {"run.json": "[]"}],
    ids=["user-files", "foreign-run-json", "run-json-list"],
)
def test_eval_refuses_an_out_directory_it_did_not_write(
    contents: dict[str, str], sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    for name, data in contents.items():
        (out / name).write_text(data, encoding="utf-8")
    before = snapshot(out)
    line = assert_one_error_line(*run(eval_argv(sample_index, out), capsys))
    assert str(out) in line and "--out" in line
    assert snapshot(out) == before and sorted(p.name for p in out.iterdir()) == sorted(contents)
    record("malformed_inputs", f"eval --out {'+'.join(contents)}", faults=1, survived=1)


@pytest.mark.integration
def test_eval_out_naming_a_file_is_one_line(
    sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.txt"
    out.write_text("keep me\n", encoding="utf-8")
    line = assert_one_error_line(*run(eval_argv(sample_index, out), capsys))
    assert "is a file" in line and out.read_text(encoding="utf-8") == "keep me\n"


@pytest.mark.integration
@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("c.jsonl", "my own notes\n"),
        ("c.jsonl", '{"id": 1, "text": "a record of mine"}\n'),
        ("c.progress.jsonl", "null\n"),
    ],
    ids=["text", "foreign-json", "foreign-progress"],
)
def test_sample_chains_refuses_a_file_it_did_not_write(
    name: str, data: str, sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / name).write_text(data, encoding="utf-8")
    line = assert_one_error_line(*run(chains_argv(sample_index, tmp_path / "c.jsonl"), capsys))
    assert name in line and "arag sample-chains" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == [name] and (tmp_path / name).read_text() == data
    record("malformed_inputs", f"sample-chains --out {name}", faults=1, survived=1)


@pytest.mark.integration
def test_sample_chains_out_naming_a_directory_is_one_line(
    sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "chains").mkdir()
    line = assert_one_error_line(*run(chains_argv(sample_index, tmp_path / "chains"), capsys))
    assert "is a directory" in line and list((tmp_path / "chains").iterdir()) == []


@pytest.mark.integration
def test_langsmith_shows_no_progress_bar_of_its_own(
    sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its per-experiment bar is dropped (no private langsmith API); its messages become log records."""
    argv = [a for a in eval_argv(sample_index, tmp_path / "run") if a != "--quiet"]
    code, _, err = run([*argv, "-v"], capsys)
    assert code == 0, err
    assert "Starting evaluation of experiment" in err and "it/s" not in err and "\r" not in err


@pytest.mark.integration
def test_sample_chains_resumes_its_own_file(
    sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "c.jsonl"
    assert run(chains_argv(sample_index, out, "--json"), capsys)[0] == 0
    code, stdout, err = run(chains_argv(sample_index, out, "--json"), capsys)
    assert code == 0, err
    assert json.loads(stdout)["skipped"] == 1


@pytest.mark.integration
@pytest.mark.parametrize("setting", ["max_tokens=inf", "temperature=nan", "max_tokens=0"])
def test_impossible_set_values_are_one_line(
    setting: str, sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = assert_one_error_line(*run(eval_argv(sample_index, tmp_path / "run", "--set", setting), capsys))
    assert setting.split("=")[0] in line and not (tmp_path / "run").exists()
    record("malformed_inputs", f"eval --set {setting}", faults=1, survived=1)


# ---------------------------------------------------------------------------------------------
# Damaged records met on resume


@pytest.fixture
def finished_run(sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """An evaluation of three questions with naive_rag (offline), done."""
    out = tmp_path / "run"
    code, _, err = run(eval_argv(sample_index, out), capsys)
    assert code == 0, err
    return out


@pytest.mark.integration
@pytest.mark.parametrize(
    ("file", "damage"),
    [("predictions/naive_rag__default.jsonl", b"null\n"), ("run.json", None)],
    ids=["null-line", "run-json-list"],
)
def test_a_null_line_or_a_run_file_of_a_list_is_one_line_and_untouched(
    file: str,
    damage: bytes | None,
    finished_run: Path,
    sample_index: HierarchicalIndex,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = finished_run / file
    path.write_bytes(path.read_bytes() + damage if damage is not None else b"[]")
    before = snapshot(finished_run)
    line = assert_one_error_line(*run(eval_argv(sample_index, finished_run), capsys))
    assert str(path) in line
    assert snapshot(finished_run) == before
    record("malformed_inputs", f"eval resume {file} damaged", faults=1, survived=1)


@pytest.mark.integration
def test_a_linked_predictions_directory_is_refused_and_nothing_elsewhere_is_touched(
    finished_run: Path, sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``predictions/`` that links elsewhere was followed: resumed from and appended to (the fourth
    question's record landed in the linked directory)."""
    elsewhere = tmp_path / "elsewhere"
    shutil.move(finished_run / "predictions", elsewhere)
    (finished_run / "predictions").symlink_to(elsewhere, target_is_directory=True)
    before = snapshot(elsewhere)
    line = assert_one_error_line(*run(eval_argv(sample_index, finished_run, limit=4), capsys))
    assert "symbolic link" in line and "predictions" in line, line
    assert snapshot(elsewhere) == before
    record("malformed_inputs", "eval resume into a linked predictions directory", faults=1, survived=1)


@pytest.mark.integration
def test_a_malformed_record_is_run_again_on_resume(
    finished_run: Path, sample_index: HierarchicalIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    path = finished_run / "predictions" / "naive_rag__default.jsonl"
    records = lines_of(path)
    broken = records[1]["question_id"]
    records[1]["prediction"] = None
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    code, out, err = run(eval_argv(sample_index, finished_run), capsys)
    assert code == 0, err
    again = lines_of(path)
    assert sorted(r["question_id"] for r in again) == sorted(r["question_id"] for r in records)
    assert all(isinstance(r["prediction"], dict) and r["prediction"]["answer"] for r in again)
    rows = json.loads((finished_run / "summary.json").read_text(encoding="utf-8"))
    assert [(row["graph"], row["n"]) for row in rows] == [("naive_rag", 3)]
    assert "| ? |" not in out
    kept_aside = lines_of(path.with_name(path.name + ".rejected"))
    assert [r["question_id"] for r in kept_aside] == [broken] and kept_aside[0]["prediction"] is None
    record("malformed_inputs", "eval resume prediction null", faults=1, survived=1)


# ---------------------------------------------------------------------------------------------
# Failures


@pytest.mark.integration
def test_an_evaluation_in_which_every_run_failed_exits_non_zero(
    openai_server: OpenAIStubServer,
    model_env: None,
    sample_index: HierarchicalIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    openai_server.script([], then=http_error(500, "upstream exploded"))
    code, out, err = run(model_eval_argv(sample_index, tmp_path / "run", openai_server), capsys)
    assert code == 1
    assert "direct" in out  # the summary is still shown, with its error column
    last = err.splitlines()[-1]
    assert last.startswith("arag: error: every run of the evaluation failed (2 of 2)") and "HTTP 500" in last


@pytest.mark.integration
def test_a_rerun_retries_the_runs_that_failed(
    openai_server: OpenAIStubServer,
    model_env: None,
    sample_index: HierarchicalIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A model that failed every run, then recovered: the rerun into the same --out answers them."""
    out = tmp_path / "run"
    argv = model_eval_argv(sample_index, out, openai_server)
    openai_server.script([], then=http_error(500, "upstream exploded"))
    assert run(argv, capsys)[0] == 1
    openai_server.script([], then=text("Answer: recovered"))
    code, _, err = run(argv, capsys)
    assert code == 0, err
    path = out / "predictions" / "direct__default.jsonl"
    again = lines_of(path)
    assert len(again) == 2 and all(r["prediction"]["answer"] == "recovered" for r in again)
    assert all(not r["prediction"].get("error") for r in again)
    assert len(lines_of(path.with_name(path.name + ".rejected"))) == 2  # the failures are kept aside
    rows = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert [(row["graph"], row["n"], row["errors"]) for row in rows] == [("direct", 2, 0)]


@pytest.mark.integration
def test_a_write_failure_stops_the_evaluation_and_a_rerun_resumes(
    finished_run: Path,
    sample_index: HierarchicalIndex,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The disk fills after one more record: one line, no further question run, nothing lost."""
    from arag_graph.core.jsonl import JsonLinesFile

    real = JsonLinesFile.add_many
    calls: list[int] = []

    def filling(self: JsonLinesFile, records: Any) -> int:
        calls.append(1)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, records)

    monkeypatch.setattr(JsonLinesFile, "add_many", filling)
    argv = eval_argv(sample_index, finished_run, limit=6)
    code, out, err = run(argv, capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    errors = [line for line in err.splitlines() if "error" in line]  # after the progress lines of the run
    assert len(errors) == 1 and err.splitlines()[-1] == errors[0], err
    assert errors[0].startswith("arag: error: cannot write") and "No space left on device" in errors[0]
    assert len(calls) == 2  # the question after the failed write was not run
    path = finished_run / "predictions" / "naive_rag__default.jsonl"
    assert len(lines_of(path)) == 4
    assert not list(finished_run.rglob("*.tmp"))

    monkeypatch.setattr(JsonLinesFile, "add_many", real)
    code, _, err = run(argv, capsys)
    assert code == 0, err
    ids = [r["question_id"] for r in lines_of(path)]
    assert len(ids) == len(set(ids)) == 6
    record("eval_safety", "eval write failure", trials=2, faults=1, survived=1, inputs=6, lost=0)


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``path`` (needs the right to mount; skipped where there is none)."""
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.integration
@pytest.mark.timeout(1500)  # two evaluations in subprocesses, 600 s each at most
def test_a_full_disk_during_arag_eval_is_one_line_and_a_rerun_resumes(
    sample_index: HierarchicalIndex, tmp_path: Path
) -> None:
    """The real process on a real 16 KB file system: the disk fills while predictions are written."""
    with small_filesystem(tmp_path / "disk", "16k") as disk:
        out = disk / "run"
        argv = [sys.executable, "-m", "arag_graph.cli.main", *eval_argv(sample_index, out, limit=10)]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        full = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
        assert full.returncode == 2, full.stderr
        assert "Traceback" not in full.stderr
        last = full.stderr.splitlines()[-1]
        assert last.startswith("arag: error: cannot write") and "No space left on device" in last
        assert not list(out.rglob("*.tmp")) and not list(out.rglob(".*.tmp"))
        written = lines_of(out / "predictions" / "naive_rag__default.jsonl", complete_only=True)
        assert 0 < len(written) < 10

        subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)
        again = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr
        ids = [r["question_id"] for r in lines_of(out / "predictions" / "naive_rag__default.jsonl")]
        assert len(ids) == len(set(ids)) == 10
    record("eval_safety", "eval full disk (tmpfs)", trials=2, faults=1, survived=1, inputs=10, lost=0)


def test_a_failed_summary_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    from arag_graph.evaluators.report import write_summary

    (tmp_path / "summary.json").mkdir()  # the rename onto it fails, as a full disk fails the write
    with pytest.raises(OSError):
        write_summary([], tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


# ---------------------------------------------------------------------------------------------
# One evaluation per output directory


@pytest.mark.integration
@pytest.mark.timeout(900)  # the first evaluation may wait 300 s for the model, then 300 s to finish
def test_a_second_evaluation_into_the_same_out_is_refused_while_the_first_runs(
    openai_server: OpenAIStubServer,
    model_env: None,
    sample_index: HierarchicalIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    release = threading.Event()
    held = threading.Event()

    def responder(request: RecordedRequest) -> Reply:
        if not held.is_set():  # the first evaluation's first question waits here until released
            held.set()
            release.wait(120)
        return text("Answer: Stephen King")

    openai_server.script(responder)
    out = tmp_path / "run"
    argv = eval_argv(sample_index, out, limit=2)
    argv += ["--graphs", "direct", "--model", "gpt-4o-mini", "--base-url", openai_server.url, "--no-upload"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": KEY}
    first = subprocess.Popen(
        [sys.executable, "-m", "arag_graph.cli.main", *argv],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert held.wait(300), "the first evaluation never reached the model"
        line = assert_one_error_line(*run(argv, capsys))
        assert "in use by another arag eval" in line
        assert len(openai_server.requests) == 1  # the second one asked nothing
    finally:
        release.set()
        _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err.decode(errors="replace")
    ids = [r["question_id"] for r in lines_of(out / "predictions" / "direct__default.jsonl")]
    assert len(ids) == len(set(ids)) == 2
    assert len(openai_server.requests) == 2  # no question paid for twice
    record("eval_safety", "two evals into one --out", trials=2, faults=1, survived=1, inputs=2, lost=0)


# ---------------------------------------------------------------------------------------------
# Secrets


@pytest.mark.integration
def test_credentials_in_base_url_and_echoed_keys_reach_no_file_or_output(
    openai_server: OpenAIStubServer,
    model_env: None,
    sample_index: HierarchicalIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    openai_server.script([], then=text(f"Answer: my key is {KEY}, and the password {PASSWORD}"))
    base_url = openai_server.url.replace("http://", f"http://evaluser:{PASSWORD}@")
    out = tmp_path / "run"
    argv = eval_argv(sample_index, out, limit=2)
    argv += ["--graphs", "direct", "--model", "gpt-4o-mini", "--base-url", base_url, "--no-upload"]
    code, stdout, err = run(argv, capsys)
    assert code == 0, err
    assert openai_server.requests, "the model was never called"
    files = snapshot(out)
    assert "run.json" in files and any(name.endswith(".jsonl") for name in files)
    for name, data in files.items():
        assert PASSWORD.encode() not in data and KEY.encode() not in data, f"a secret in {name}"
    assert PASSWORD not in stdout + err and KEY not in stdout + err
    plan = json.loads(files["run.json"])["plan"]
    assert plan["base_url"].startswith("http://***@127.0.0.1:")
    answers = [r["prediction"]["answer"] for r in lines_of(out / "predictions" / "direct__default.jsonl")]
    assert answers and all("***" in a for a in answers)
    record("secrets", "arag eval base-url credentials and echoed key", trials=2, faults=2, survived=2)


# ---------------------------------------------------------------------------------------------
# One writer, and a library that does not import the evaluation package


def test_the_library_does_not_import_the_evaluation_package() -> None:
    """Function-level imports included; only the command line (cli.py) runs evaluations."""
    offenders = []
    for path in sorted((REPO / "arag_graph").glob("*.py")):
        if path.name == "cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("arag_graph.evaluators")]
    assert offenders == []


def _predictions(path: Path) -> Any:
    from arag_graph.evaluators.predictions import prediction_file

    return prediction_file(path)


GOOD = {"question_id": "q1", "graph": "g", "prediction": {"answer": "A"}, "metrics": {}}


def test_the_writer_drops_a_line_cut_short_and_appends_on_a_clean_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(GOOD) + '\n{"question_id": "q2", "pred', encoding="utf-8")
    file = _predictions(path)
    assert list(file.keys) == ["q1"]
    assert file.add({**GOOD, "question_id": "q2"}) and not file.add(GOOD)
    assert [r["question_id"] for r in lines_of(path)] == ["q1", "q2"]


@pytest.mark.parametrize(
    "damaged", ['{"question_id": "q2", "pred', '{"question_id": "q2", "prediction": {"ans\x00', "{\xff"]
)
def test_a_damaged_line_before_the_last_is_refused_kept_and_not_silently_rerun(damaged: str, tmp_path: Path) -> None:
    """Only the last line, with no newline after it, can be a record cut short by a kill. A line
    like it in the middle was written whole and damaged later: once it was dropped without a word
    and its question run (and paid for) again. Now the run stops with one line, the line is kept
    in ``.rejected``, and the next run redoes that question only."""
    path = tmp_path / "p.jsonl"
    third = {**GOOD, "question_id": "q3"}
    path.write_bytes(
        (json.dumps(GOOD) + "\n").encode() + damaged.encode("latin-1") + b"\n" + json.dumps(third).encode() + b"\n"
    )
    with pytest.raises(AragError, match=r"line 2 is damaged") as caught:
        _predictions(path)
    assert "\n" not in str(caught.value) and "p.jsonl.rejected" in str(caught.value)
    assert (tmp_path / "p.jsonl.rejected").read_bytes() == damaged.encode("latin-1") + b"\n"
    file = _predictions(path)  # the rerun: q2 is not done, q1 and q3 are
    assert sorted(file.keys) == ["q1", "q3"]
    record("eval_safety", "a damaged middle line of a predictions file", faults=1, survived=1)


@pytest.mark.parametrize("line", ["null", "[]", '"text"', '{"something": "else"}', "plain words"])
def test_the_writer_refuses_a_file_with_a_foreign_line_untouched(line: str, tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    data = (json.dumps(GOOD) + "\n" + line + "\n").encode()
    path.write_bytes(data)
    with pytest.raises(AragError, match=r"line 2 is not an arag prediction record") as caught:
        _predictions(path)
    assert "\n" not in str(caught.value) and path.read_bytes() == data
    assert str(caught.value).endswith("; remove that line to resume, or use another --out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl"]


def test_the_writer_runs_a_failed_question_again_and_sets_its_record_aside(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    failed = {**GOOD, "question_id": "q2", "prediction": {"answer": "", "error": "model call failed"}}
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(failed) + "\n", encoding="utf-8")
    file = _predictions(path)
    assert list(file.keys) == ["q1"]  # q2 runs again
    assert [json.loads(line) for line in file.rejected_path.read_text(encoding="utf-8").splitlines()] == [failed]


def test_the_writer_writes_strict_json_without_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from arag_graph.core.jsonl import dumps

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    path = tmp_path / "p.jsonl"
    file = _predictions(path)
    weird = {"nan": float("nan"), "inf": [float("inf")], "key": f"x {KEY} y", "url": "http://u:p4ssw0rd@h/v1"}
    file.add({**GOOD, "prediction": {"answer": "A", **weird}})
    raw = path.read_text(encoding="utf-8")
    assert KEY not in raw and "p4ssw0rd" not in raw
    stored = json.loads(raw, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert stored["prediction"]["nan"] is None and stored["prediction"]["inf"] == [None]
    assert json.loads(dumps({"v": float("-inf")})) == {"v": None}


def _sample_chains(path: Path) -> Any:
    from arag_graph.corag.rejection_sampling import open_outputs

    return open_outputs(path)[0]


WRITERS = {
    "eval predictions": (_predictions, "p.jsonl", "question_id", GOOD),
    "sample-chains chains": (_sample_chains, "chains.jsonl", "id", {"id": "q1", "chain": [], "final_answer": "A"}),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_writer_recovers_refuses_and_scrubs_alike(
    writer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both output files that a kill may cut (eval's predictions, sample-chains' chains) behave as the
    one JSON Lines writer: a cut line is dropped and the next record starts clean, a foreign line is a
    one-line refusal that changes nothing, secrets and NaN never reach the file."""
    open_file, name, key, good = WRITERS[writer]
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    path = tmp_path / name
    path.write_text(json.dumps(good) + f'\n{{"{key}": "q2", "cut', encoding="utf-8")
    file = open_file(path)
    assert [r[key] for r in file.records] == ["q1"]
    file.add({**good, key: "q3", "note": f"x {KEY} y", "nan": float("nan")})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)[key] for line in lines] == ["q1", "q3"]
    assert KEY not in lines[1] and json.loads(lines[1])["nan"] is None
    assert [r[key] for r in open_file(path).records] == ["q1", "q3"]  # read back as written

    foreign = tmp_path / f"foreign-{name}"
    data = b'{"something": "else"}\n'
    foreign.write_bytes(data)
    with pytest.raises(AragError, match="line 1 is not") as caught:
        open_file(foreign)
    assert "\n" not in str(caught.value) and str(foreign) in str(caught.value) and foreign.read_bytes() == data


def test_the_rejected_file_is_not_read_as_predictions(tmp_path: Path) -> None:
    from arag_graph.evaluators.predictions import PREDICTIONS, load_records

    folder = tmp_path / PREDICTIONS
    folder.mkdir()
    (folder / "g__default.jsonl").write_text(json.dumps({**GOOD, "metrics": None}) + "\n", encoding="utf-8")
    assert load_records(tmp_path) == []
    assert not (folder / "g__default.jsonl.rejected").exists()  # reading sets nothing aside


# ---------------------------------------------------------------------------------------------
# Resuming only what the same settings produced


def _manifest(**changes: Any) -> Any:
    from arag_graph.index.manifest import Manifest

    base = Manifest(
        embedding_model="sentence-transformers/all-MiniLM-L6-v2",
        embedding_dim=384,
        chunk_size=1000,
        contextual_headers=True,
        keyword_match="word",
        corpus_hash="c0ffee",
        documents=3,
        chunks=3,
        sentences=9,
        chroma={"mode": "matrix", "path": "sentences.npy"},
        encoder="onnx-int8",
        header_max_chars=200,
    )
    return dataclasses.replace(base, **changes)


INDEX_CHANGES: dict[str, dict[str, Any]] = {
    "corpus_hash": {"corpus_hash": "beef"},
    "embedding_model": {"embedding_model": "openai:text-embedding-3-small"},
    "encoder": {"encoder": "torch"},
    "embedding_base_url": {"embedding_base_url": "http://127.0.0.1:9/v1"},
    "embedding_dim": {"embedding_dim": 768},
    "chunk_size": {"chunk_size": 500},
    "contextual_headers": {"contextual_headers": False, "header_max_chars": 0},
    "header_max_chars": {"header_max_chars": 80},
    "header_style": {"header_style": "aragog"},
    "keyword_match": {"keyword_match": "substring"},
    "embedding_prompts": {"embedding_prompts": {"query": "query: ", "document": "passage: "}},
    "sentence_search": {"chroma": {"mode": "persistent", "path": "chroma", "collection": "sentences"}},
    "summaries": {"extra": {"summaries": {"model": "offline"}}},
}


def test_every_index_setting_of_the_fingerprint_is_tested() -> None:
    from arag_graph.evaluators.predictions import INDEX_FINGERPRINT_FIELDS

    assert set(INDEX_FINGERPRINT_FIELDS) <= set(INDEX_CHANGES)


@pytest.mark.parametrize("field", list(INDEX_CHANGES))
def test_each_index_setting_changes_the_fingerprint(field: str, tmp_path: Path) -> None:
    """``arag eval`` once resumed into an --out whose results came from an index with other headers,
    keyword rule or encoder: the fingerprint held only the corpus hash and the embedding model."""
    from types import SimpleNamespace

    from arag_graph.evaluators.plan import EvalPlan
    from arag_graph.evaluators.predictions import _fingerprint

    plan = EvalPlan(dataset=sample_questions_path(), graphs=["naive_rag"], out=tmp_path / "out")
    before = _fingerprint(plan, SimpleNamespace(manifest=_manifest()))
    after = _fingerprint(plan, SimpleNamespace(manifest=_manifest(**INDEX_CHANGES[field])))
    assert before != after and {k for k in before if before[k] != after[k]} >= {field}


@pytest.mark.parametrize(
    "change",
    [
        {"model": "gpt-4o-mini"},
        {"judge": "gpt-4o"},
        {"top_k": 7},
        {"extra_context": {"max_steps": 3}},
        {"profile": "paper"},
    ],
    ids=["model", "judge", "top_k", "context", "profile"],
)
def test_each_run_setting_changes_the_fingerprint(change: dict[str, Any], tmp_path: Path) -> None:
    from arag_graph.evaluators.plan import EvalPlan
    from arag_graph.evaluators.predictions import _fingerprint

    plan = EvalPlan(dataset=sample_questions_path(), graphs=["naive_rag"], out=tmp_path / "out")
    assert _fingerprint(plan, None) != _fingerprint(dataclasses.replace(plan, **change), None)


def test_resuming_into_results_of_an_index_with_other_settings_is_refused(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from arag_graph.evaluators.runner import EvalPlan, check_resume

    plan = EvalPlan(dataset=sample_questions_path(), graphs=["naive_rag"], out=tmp_path / "out")
    check_resume(plan, SimpleNamespace(manifest=_manifest()))
    with pytest.raises(AragError, match=r"keyword_match differ") as caught:
        check_resume(plan, SimpleNamespace(manifest=_manifest(keyword_match="substring")))
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------------------------------------
# The --out rules, the lock and the run record, called directly (what mutation testing runs)


def test_out_must_be_new_empty_or_an_earlier_evaluations(tmp_path: Path) -> None:
    from arag_graph.evaluators.predictions import LOCK_FILE, RUN_FILE, check_out_dir

    check_out_dir(tmp_path / "new")
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(AragError) as caught:
        check_out_dir(tmp_path / "file")
    assert str(caught.value) == f"--out {tmp_path / 'file'} is a file; give a directory for the evaluation's results"
    out = tmp_path / "out"
    out.mkdir()
    check_out_dir(out)
    (out / LOCK_FILE).write_text("", encoding="utf-8")
    (out / f".{RUN_FILE}.tmp").write_text("{", encoding="utf-8")
    check_out_dir(out)  # what a run killed before its first record leaves
    for name in ("d.txt", "a.txt", "c.txt"):
        (out / name).write_text("", encoding="utf-8")
    with pytest.raises(AragError) as caught:
        check_out_dir(out)
    assert str(caught.value) == (
        f"--out {out} is a directory arag did not write (it holds a.txt, c.txt, d.txt, and no run.json); "
        "give a new or empty directory, or an earlier evaluation's --out to resume it"
    )
    (out / "b.txt").write_text("", encoding="utf-8")
    with pytest.raises(AragError, match=r"it holds a\.txt, b\.txt, c\.txt, \.\.\., and no run\.json"):
        check_out_dir(out)
    (out / RUN_FILE).write_text(json.dumps({"fingerprint": {}}), encoding="utf-8")
    check_out_dir(out)  # an earlier evaluation's, whatever else it holds
    for damaged in ("{", "[]", '{"fingerprint": []}', '{"plan": {}}'):
        (out / RUN_FILE).write_text(damaged, encoding="utf-8")
        with pytest.raises(AragError) as caught:
            check_out_dir(out)
        assert str(caught.value) == (
            f"{out / RUN_FILE} is not the run record of an arag evaluation (damaged, or another program's); "
            "use another --out, or delete that directory to start over"
        )


@pytest.mark.parametrize(
    ("error", "shown"),
    [(OSError(errno.EIO, "Input/output error"), "Input/output error"), (OSError("no reason given"), "no reason given")],
    ids=["strerror", "message"],
)
def test_out_must_be_readable_or_is_named_with_its_error(
    error: OSError, shown: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory that cannot be listed (a failing disk; as root no permission stops a listing) is
    refused in one line naming it and the system's reason, never a traceback."""
    from arag_graph.evaluators.predictions import PREDICTIONS, check_out_dir

    out = tmp_path / "out"
    (out / PREDICTIONS).mkdir(parents=True)
    scandir = os.scandir

    def failing(path: Any) -> Any:
        if Path(path) == out / PREDICTIONS:
            raise error
        return scandir(path)

    monkeypatch.setattr(os, "scandir", failing)
    with pytest.raises(AragError) as caught:
        check_out_dir(out)
    assert str(caught.value) == f"--out {out}: {out / PREDICTIONS} cannot be read ({shown})"


@pytest.mark.parametrize("where", ["top", "predictions"])
def test_out_refuses_a_link_at_its_top_or_in_predictions(where: str, tmp_path: Path) -> None:
    from arag_graph.evaluators.predictions import PREDICTIONS, RUN_FILE, check_out_dir

    out = tmp_path / "out"
    (out / PREDICTIONS).mkdir(parents=True)
    (out / RUN_FILE).write_text(json.dumps({"fingerprint": {}}), encoding="utf-8")
    (tmp_path / "elsewhere").write_text("", encoding="utf-8")
    check_out_dir(out)
    link = (out if where == "top" else out / PREDICTIONS) / "linked.jsonl"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(AragError) as caught:
        check_out_dir(out)
    assert str(caught.value) == (
        f"--out {out} holds a symbolic link, {link}, and arag follows no link in its results; "
        "remove it or use another --out"
    )
    linked_out = tmp_path / "linked-out"
    linked_out.symlink_to(tmp_path / "new-out", target_is_directory=True)
    (tmp_path / "new-out").mkdir()
    check_out_dir(linked_out)  # --out itself may be a link: the user named it


def test_the_lock_refuses_a_second_evaluation_and_removes_only_a_directory_it_made_empty(tmp_path: Path) -> None:
    from arag_graph.evaluators.predictions import LOCK_FILE, exclusive

    out = tmp_path / "made" / "out"
    with exclusive(out):
        assert (out / LOCK_FILE).exists()
        with pytest.raises(AragError) as caught, exclusive(out):
            pass
        assert str(caught.value) == (
            f"--out {out} is in use by another arag eval that is still running; wait for it to finish "
            "(rerun then to resume), or use another --out"
        )
        assert (out / LOCK_FILE).exists()  # the refused second run removed nothing
    assert not out.exists() and (tmp_path / "made").is_dir()
    with exclusive(out):
        (out / "run.json").write_text("{}", encoding="utf-8")
    assert (out / "run.json").exists()
    with exclusive(out):  # released: a rerun takes it
        pass
    existing = tmp_path / "existing"
    existing.mkdir()
    with exclusive(existing):
        pass
    assert existing.is_dir()


def test_the_run_record_holds_the_fingerprint_and_a_plan_without_credentials(tmp_path: Path) -> None:
    import hashlib
    from types import SimpleNamespace

    from arag_graph.evaluators.plan import EvalPlan
    from arag_graph.evaluators.predictions import RUN_FILE, _fingerprint, check_resume

    plan = EvalPlan(
        dataset=sample_questions_path(),
        graphs=["naive_rag"],
        out=tmp_path / "new" / "out",  # made with its parents once the index is loaded
        base_url="http://user:pw-123456@127.0.0.1:9/v1",
    )
    check_resume(plan, None)
    assert not plan.out.exists()  # before the index is loaded nothing is written
    manifest = _manifest(embedding_base_url="http://u:secret-1@127.0.0.1:9/v1", extra={"summaries": {"model": "m"}})
    check_resume(plan, SimpleNamespace(manifest=manifest))
    meta = json.loads((plan.out / RUN_FILE).read_text(encoding="utf-8"))
    assert meta["fingerprint"] == {
        "dataset_sha256": hashlib.sha256(sample_questions_path().read_bytes()).hexdigest(),
        "model": "offline",
        "judge": None,
        "top_k": 5,
        "context": {},
        "profile": "package",
        "corpus_hash": "c0ffee",
        "embedding_model": "sentence-transformers/all-MiniLM-L6-v2",
        "encoder": "onnx-int8",
        "embedding_base_url": "http://***@127.0.0.1:9/v1",
        "embedding_dim": 384,
        "chunk_size": 1000,
        "contextual_headers": True,
        "header_max_chars": 200,
        "header_style": "path",
        "keyword_match": "word",
        "embedding_prompts": {},
        "sentence_search": "exact",
        "summaries": "m",
    }
    assert meta["plan"]["base_url"] == "http://***@127.0.0.1:9/v1" and meta["plan"]["out"] == str(plan.out)
    assert meta["plan"]["graphs"] == ["naive_rag"] and set(meta["plan"]) == {f.name for f in dataclasses.fields(plan)}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", meta["updated"])
    # indented for a person reading it
    assert (plan.out / RUN_FILE).read_text(encoding="utf-8").startswith('{\n  "fingerprint": {\n    "dataset_sha256": ')
    check_resume(plan, None)  # the same settings resume, before and after loading the index
    check_resume(plan, SimpleNamespace(manifest=manifest))
    no_chroma = SimpleNamespace(manifest=_manifest(chroma=None, extra=None))
    assert _fingerprint(plan, no_chroma)["sentence_search"] == "hnsw"
    assert _fingerprint(plan, no_chroma)["summaries"] is None
    assert _fingerprint(plan, SimpleNamespace(manifest=_manifest()))["embedding_base_url"] is None


def test_resume_names_every_changed_setting_and_ignores_settings_the_record_lacks(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from arag_graph.evaluators.plan import EvalPlan
    from arag_graph.evaluators.predictions import RUN_FILE, check_resume

    plan = EvalPlan(dataset=sample_questions_path(), graphs=["naive_rag"], out=tmp_path / "out")
    check_resume(plan, SimpleNamespace(manifest=_manifest()))
    changed = dataclasses.replace(plan, model="gpt-4o-mini", top_k=9)
    with pytest.raises(AragError) as caught:
        check_resume(changed, None)
    assert str(caught.value) == (
        f"{plan.out} holds results of another evaluation (model, top_k differ); "
        "use another --out or delete that directory"
    )
    meta = json.loads((plan.out / RUN_FILE).read_text(encoding="utf-8"))
    del meta["fingerprint"]["model"]  # a record of an older arag, without that setting
    (plan.out / RUN_FILE).write_text(json.dumps(meta), encoding="utf-8")
    check_resume(dataclasses.replace(plan, model="gpt-4o-mini"), None)
    # A record from before profiles was made with the package's: it resumes under that profile only.
    del meta["fingerprint"]["profile"]
    (plan.out / RUN_FILE).write_text(json.dumps(meta), encoding="utf-8")
    check_resume(plan, None)
    with pytest.raises(AragError, match=r"another evaluation \(profile differ\)"):
        check_resume(dataclasses.replace(plan, profile="paper"), None)


def test_load_records_returns_only_scored_predictions_of_every_file_past_a_cut_line(tmp_path: Path) -> None:
    """Reports read every (graph, setting) file under predictions/, skip a line cut short by a kill and
    go on after it, and leave out the set-aside ``.rejected`` file and whatever else is there."""
    from arag_graph.evaluators.predictions import PREDICTIONS, load_records

    folder = tmp_path / PREDICTIONS
    folder.mkdir()
    first, third = GOOD, {**GOOD, "question_id": "q3"}
    other = {**GOOD, "graph": "h"}
    (folder / "g__default.jsonl").write_text(
        json.dumps(first) + '\n{"question_id": "q2", "pre\n' + json.dumps(third) + "\n", encoding="utf-8"
    )
    (folder / "h__default.jsonl").write_text(json.dumps(other) + "\n" + json.dumps({"x": 1}) + "\n", encoding="utf-8")
    (folder / "g__default.jsonl.rejected").write_text(
        json.dumps({**GOOD, "question_id": "q9"}) + "\n", encoding="utf-8"
    )
    (folder / "notes.txt").write_text(json.dumps({**GOOD, "question_id": "q8"}) + "\n", encoding="utf-8")
    assert load_records(tmp_path) == [first, third, other]


def test_only_scored_records_of_runs_that_did_not_fail_are_kept_on_resume() -> None:
    from arag_graph.evaluators.predictions import _is_complete, _is_prediction, _is_scored

    assert _is_prediction(GOOD) and not _is_prediction({**GOOD, "question_id": 1}) and not _is_prediction([GOOD])
    assert _is_complete(GOOD) and _is_scored(GOOD)
    failed = {**GOOD, "prediction": {"answer": "", "error": "model call failed"}}
    assert _is_scored(failed) and not _is_complete(failed)
    assert _is_complete({**GOOD, "prediction": {"answer": "A", "error": None}})
    for broken in (
        {**GOOD, "prediction": None},
        {**GOOD, "prediction": {"answer": None}},
        {**GOOD, "metrics": None},
        {**GOOD, "graph": None},
    ):
        assert not _is_scored(broken) and not _is_complete(broken)
