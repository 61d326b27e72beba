"""``arag eval --grid aragog``: ARAGOG's comparison in one command, offline on the HotpotQA-100 slice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arag_graph.evaluators.grid import ARAGOG
from arag_graph.index.load import load_index
from arag_graph.llm.summarize import summary_writer
from tests.cli_run import assert_one_error_line
from tests.cli_run import run_cli as run

pytestmark = pytest.mark.integration


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_grid_runs_every_technique_and_writes_the_paper_table(
    hotpot_slice: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus, questions = hotpot_slice
    out, plain, cch = tmp_path / "grid", tmp_path / "plain", tmp_path / "cch"
    argv = ["eval", "--dataset", str(questions), "--corpus", str(corpus), "--model", "offline", "--quiet"]
    argv += ["--grid", "aragog", "--limit", "2", "--out", str(out), "--index", str(plain), "--cch-index", str(cch)]
    code, stdout, err = run(argv, capsys)
    assert code == 0, err
    assert "ARAGOG" in stdout  # the table is printed after the summary

    # Both indexes were built: the plain one with (extractive) summaries for DSI, the other with headers.
    assert load_index(plain).manifest.extra["summaries"]["kind"] == "extractive"
    headed = load_index(cch).manifest
    assert headed.contextual_headers and headed.extra["summaries"]["kind"] == "extractive"

    table = json.loads((out / "aragog.json").read_text(encoding="utf-8"))
    assert [row["technique"] for row in table] == [row.label for row in ARAGOG]
    for row, spec in zip(table, ARAGOG, strict=True):
        assert row["n"] == 2 and row["errors"] == 0
        assert row["index"] == ("contextual headers" if spec.index else "plain")
        assert 0.0 <= row["context_precision"] <= 1.0  # from gold chunk ids: no model needed
        assert row["answer_similarity"] is not None
        assert row["answer_relevance"] is None and row["llm_acc"] is None  # need a model: unavailable
        records = _records(
            out / "predictions" / f"naive_rag__{row['setting_key'].replace('=', '-').replace(',', '_')}.jsonl"
        )
        assert len(records) == 2
        args = records[0]["prediction"]["trajectory"][0]["args"]
        assert args["retriever"] == spec.values.get("retriever", "dense")
        if spec.values.get("retriever") == "dsi":
            assert "extractive" in args["summaries"]

    md = (out / "aragog.md").read_text(encoding="utf-8")
    header = next(line for line in md.splitlines() if line.startswith("| technique"))
    assert "| Context Precision | Answer Similarity | Answer Relevance |" in header
    assert "Contain-Acc" in header and "evidence recall" in header
    lines = [line for line in md.splitlines() if line.startswith("| + ") or line.startswith("| naive RAG |")]
    ours = lines[: len(ARAGOG)]
    assert len(ours) == len(ARAGOG)
    for line in ours:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[5] == "unavailable"  # Answer Relevance, never a number offline
        float(cells[3]), float(cells[4])  # Context Precision, Answer Similarity are numbers
    # The plain rows ran on the plain index, the CCH rows on the other: their retrievals differ somewhere.
    by_label = {row["technique"]: row for row in table}
    assert by_label["+ CCH"]["setting_key"].startswith("index=cch")


def test_a_given_index_without_summaries_fails_the_grid_before_any_work(
    hotpot_slice: tuple[Path, Path], hotpot_index: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "grid"
    argv = ["eval", "--dataset", str(hotpot_slice[1]), "--model", "offline", "--grid", "aragog", "--limit", "1"]
    code, out_text, err = run([*argv, "--out", str(out), "--index", str(hotpot_index.path)], capsys)
    line = assert_one_error_line(code, out_text, err)
    assert "arag index" in line and "--summaries" in line
    assert not (out / "predictions").exists() or not any((out / "predictions").iterdir())


def test_a_given_index_with_headers_fails_the_grid_before_any_work(
    hotpot_slice: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its base rows would run on headed sentences, so "+ CCH" would compare headers with themselves."""
    from arag_graph.index.build import build_index
    from arag_graph.index.corpus import load_corpus

    documents = load_corpus(hotpot_slice[0])[:3]
    headed = build_index(documents, tmp_path / "headed", summaries=summary_writer("offline"), progress=False)
    assert headed.manifest.contextual_headers  # the default
    out = tmp_path / "grid"
    argv = ["eval", "--dataset", str(hotpot_slice[1]), "--model", "offline", "--grid", "aragog", "--limit", "1"]
    line = assert_one_error_line(*run([*argv, "--out", str(out), "--index", str(headed.path)], capsys))
    assert "contextual headers" in line and "--no-contextual-headers" in line
    assert not (out / "predictions").exists() or not any((out / "predictions").iterdir())


def test_an_unknown_grid_names_the_grids(hotpot_slice: tuple[Path, Path], tmp_path: Path, capsys: Any) -> None:
    argv = ["eval", "--dataset", str(hotpot_slice[1]), "--model", "offline", "--grid", "nope", "--out", str(tmp_path)]
    line = assert_one_error_line(*run(argv, capsys))
    assert "aragog" in line
