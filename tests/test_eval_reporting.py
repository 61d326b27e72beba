"""``arag eval`` on the HotpotQA slice writes breakdowns by question type and the failure analysis.

The offline policy runs a step sweep (so some runs reach their cap); the outputs are checked against
the prediction records they were made from, and a resumed run whose records predate question types
still gets its breakdowns.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from arag_graph.evaluators.failures import failure_mode
from arag_graph.evaluators.predictions import load_records
from tests.cli_run import run_cli

pytestmark = pytest.mark.integration


def evaluate(questions: Path, index: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "--dataset", str(questions), "--index", str(index), "--out", str(out), "--quiet"]
    argv += ["--model", "offline", "--graphs", "arag,naive_rag", "--max-steps", "1,4", "--limit", "5"]
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err


def test_breakdowns_and_failure_analysis_from_one_eval(
    hotpot_slice: tuple[Path, Path], hotpot_index: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, questions = hotpot_slice
    types = {q["_id"]: q["type"] for q in json.loads(questions.read_text(encoding="utf-8"))[:5]}
    assert set(types.values()) == {"bridge", "comparison"}
    out = tmp_path / "run"
    evaluate(questions, hotpot_index.path, out, capsys)

    records = load_records(out)
    assert len(records) == 15  # arag at caps 1 and 4, naive_rag once, 5 questions each
    for record in records:
        assert record["question_type"] == types[record["question_id"]]
        assert record["step_cap"] == (record["setting"].get("max_steps") if record["graph"] == "arag" else None)

    # summary.json: every row broken down by type, each category's means over its own records.
    rows = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    for row in rows:
        mine = [r for r in records if (r["graph"], r["setting_key"]) == (row["graph"], row["setting_key"])]
        assert set(row["by_type"]) == {"bridge", "comparison"} and row["by_hops"] == {}
        for name, part in row["by_type"].items():
            group = [r for r in mine if r["question_type"] == name]
            assert part["n"] == len(group)
            for key in ("contain_acc", "evidence_recall", "context_precision", "retrieved_tokens"):
                values = [r["metrics"][key] for r in group if r["metrics"].get(key) is not None]
                assert part[key] == pytest.approx(sum(values) / len(values)), (row["setting_key"], name, key)
        # The failure modes of the row are those of its records, and they add up to n.
        expected = {mode: sum(failure_mode(r) == mode for r in mine) for mode in row["failures"]}
        assert row["failures"] == expected and sum(expected.values()) == row["n"]
    one_step = next(row for row in rows if row["setting_key"] == "max_steps=1")
    assert one_step["failures"]["cap_reached"] == one_step["n"] - one_step["failures"]["correct"] > 0

    markdown = (out / "summary.md").read_text(encoding="utf-8")
    assert "## By question type" in markdown and "## Where answers are lost" in markdown
    assert "| arag | max_steps=1 | bridge |" in markdown and "| naive_rag | default | comparison |" in markdown

    # The per-question tables: one CSV line per run, one Markdown row per question.
    with (out / "failures.csv").open(encoding="utf-8") as handle:
        lines = list(csv.DictReader(handle))
    assert sorted((r["question_id"], r["graph"], r["setting"]) for r in lines) == sorted(
        (r["question_id"], r["graph"], r["setting_key"]) for r in records
    )
    assert {r["mode"] for r in lines if r["setting"] == "max_steps=1"} <= {"correct", "cap_reached"}
    table = [line for line in (out / "failures.md").read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    assert table[0] == "| question | type | arag (max_steps=1) | arag (max_steps=4) | naive_rag |"
    assert len(table) == 2 + len(types)


def test_records_from_before_question_types_still_break_down(
    hotpot_slice: tuple[Path, Path], hotpot_index: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, questions = hotpot_slice
    out = tmp_path / "old"
    evaluate(questions, hotpot_index.path, out, capsys)
    for path in (out / "predictions").glob("*.jsonl"):  # records as an older version wrote them
        old = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for record in old:
            record.pop("question_type")
            record.pop("step_cap")
        path.write_text("".join(json.dumps(r) + "\n" for r in old), encoding="utf-8")
    (out / "summary.json").unlink()
    evaluate(questions, hotpot_index.path, out, capsys)  # a resume: nothing runs again
    rows = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert all(set(row["by_type"]) == {"bridge", "comparison"} for row in rows)
    # The swept cap still tells a capped run without the record's step_cap.
    assert next(row for row in rows if row["setting_key"] == "max_steps=1")["failures"]["cap_reached"] > 0
