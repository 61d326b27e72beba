"""Odd input to ``arag index``, ``search`` and ``read``: one line and a non-zero exit, never a traceback.

Non-UTF-8 bytes in a path or a query (Linux hands them to Python as lone surrogates, which failed
deep inside Chroma or the encoder), a device or a pipe as the corpus (``/dev/zero`` was read until
memory ran out; a FIFO waited for a writer forever), and ``--top-k`` outside its range, which
``search`` clamped silently while ``ask`` refused it: the command line now refuses it everywhere,
while tools called by models keep clamping.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.tools.toolkit import TOP_K_MAX, TOP_K_MIN
from tests.cli_run import assert_one_error_line, run_cli
from tests.mounts import REPO, subprocess_env
from tests.reliability import record

NOT_UTF8 = os.fsdecode(b"caf\xe9")  # what Python makes of the byte 0xE9 in argv: 'caf\udce9'


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "The Nile is a river."}) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def sample_path(sample_index: HierarchicalIndex) -> str:
    return str(sample_index.path)


def test_non_utf8_bytes_in_out_are_one_line(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"index-{NOT_UTF8}"
    line = assert_one_error_line(*run_cli(["index", str(corpus), "--out", str(out), "--quiet"], capsys))
    assert "--out is not UTF-8 text (byte 0xe9" in line
    assert not os.path.lexists(os.fsencode(out))
    record("odd_input", "arag index: non-UTF-8 --out", faults=1, survived=1)


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--query", f"who was {NOT_UTF8}"), ("--keywords", f"Nile,{NOT_UTF8}")],
)
def test_non_utf8_bytes_in_a_search_are_one_line(
    flag: str, value: str, sample_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = assert_one_error_line(*run_cli(["search", "--index", sample_path, flag, value], capsys))
    assert f"{flag} is not UTF-8 text (byte 0xe9" in line
    record("odd_input", f"arag search: non-UTF-8 {flag}", faults=1, survived=1)


def test_non_utf8_bytes_in_index_and_ids_are_one_line(sample_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_error_line(*run_cli(["search", "--index", f"/tmp/{NOT_UTF8}", "--keywords", "x"], capsys))
    assert "--index is not UTF-8 text (byte 0xe9" in line
    line = assert_one_error_line(*run_cli(["read", "--index", sample_path, NOT_UTF8], capsys))
    assert "not UTF-8" in line
    record("odd_input", "arag search/read: non-UTF-8 --index and chunk ID", faults=2, survived=2)


def _index_in_a_bounded_process(corpus: str, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``arag index CORPUS`` in a subprocess with 4 GiB of address space and a minute: what a
    corpus that never ends does to code that reads it all, without taking the machine down."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    return subprocess.run(
        [sys.executable, "-m", "arag_graph.cli.main", "index", corpus, "--out", str(out), "--quiet"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )


@pytest.mark.skipif(not Path("/dev/zero").exists() or not hasattr(os, "mkfifo"), reason="needs /dev/zero and FIFOs")
def test_a_device_or_a_pipe_as_the_corpus_is_one_line(tmp_path: Path, _isolated_cache: Path) -> None:
    fifo = tmp_path / "corpus.jsonl"
    os.mkfifo(fifo)
    for corpus in ("/dev/zero", str(fifo)):
        out = tmp_path / "index"
        done = _index_in_a_bounded_process(corpus, out, subprocess_env(_isolated_cache))
        assert done.returncode == 2 and done.stdout == "", done.stderr[-2000:]
        assert done.stderr.startswith("arag: error: ") and len(done.stderr.splitlines()) == 1, done.stderr[-2000:]
        assert "is not a regular file" in done.stderr and not out.exists()
    record("odd_input", "arag index: /dev/zero and a FIFO as the corpus", trials=2, faults=2, survived=2)


def test_an_oversized_corpus_is_refused_before_it_is_read(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARAG_MAX_CORPUS_BYTES", "10")
    line = assert_one_error_line(*run_cli(["index", str(corpus), "--out", str(tmp_path / "i")], capsys))
    assert "larger than 10 bytes" in line and "ARAG_MAX_CORPUS_BYTES" in line


@pytest.mark.parametrize("top_k", [0, -3, TOP_K_MAX + 1, 10**9])
def test_search_refuses_top_k_out_of_range_like_ask(
    top_k: int, sample_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One rule on the command line: search once clamped what ask refused."""
    for argv in (
        ["search", "--index", sample_path, "--keywords", "the", "--top-k", str(top_k)],
        ["ask", "Who?", "--index", sample_path, "--model", "offline", "--top-k", str(top_k)],
    ):
        line = assert_one_error_line(*run_cli(argv, capsys))
        assert f"--top-k {top_k} is out of range" in line and f"from {TOP_K_MIN} to {TOP_K_MAX}" in line
    for top_k_ok in (TOP_K_MIN, TOP_K_MAX):
        code, out, _ = run_cli(
            ["search", "--index", sample_path, "--keywords", "the", "--top-k", str(top_k_ok), "--json"], capsys
        )
        assert code == 0 and len(json.loads(out)["hits"]) == top_k_ok
