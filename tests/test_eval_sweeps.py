"""Sweeps over any setting in one ``arag eval`` (issue 15 item 2), offline on a HotpotQA slice.

``--set KEY=V1,V2`` sweeps a setting as ``--max-steps 5,10`` does: one predictions file per value
(every combination when several settings are swept), values typed and in the order given, a plot
per swept setting; a free-text setting keeps its commas; a bad value fails before any work; a rerun
may add values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arag_graph.index.hierarchical import HierarchicalIndex
from tests.cli_run import assert_one_error_line
from tests.cli_run import run_cli as run

pytestmark = pytest.mark.integration


def eval_argv(questions: Path, out: Path, index: HierarchicalIndex, *extra: str) -> list[str]:
    argv = ["eval", "--dataset", str(questions), "--model", "offline", "--out", str(out), "--quiet"]
    return [*argv, "--index", str(index.path), "--limit", "2", *extra]


def records_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_two_settings_swept_together_run_every_combination_in_the_order_given(
    hotpot_slice: tuple[Path, Path], hotpot_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    extra = ("--graphs", "naive_rag,direct", "--set", "reasoning_effort=minimal,high", "--set", "window=3,1")
    code, _, err = run(
        [*eval_argv(hotpot_slice[1], out, hotpot_index, *extra), "--set", "sentence_window=true"], capsys
    )
    assert code == 0, err

    # naive_rag has both settings (4 runs); direct only the effort (2 runs), as without the window sweep.
    rows = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert [(r["graph"], r["setting"]) for r in rows] == [
        ("naive_rag", {"reasoning_effort": e, "sentence_window": "true", "window": w})
        for e in ("minimal", "high")
        for w in (3, 1)
    ] + [("direct", {"reasoning_effort": e}) for e in ("minimal", "high")]
    assert all(r["n"] == 2 and r["errors"] == 0 for r in rows)
    files = sorted(p.name for p in (out / "predictions").glob("*.jsonl"))
    assert len(files) == 6 and "naive_rag__reasoning_effort-high_sentence_window-true_window-1.jsonl" in files
    record = records_of(out / "predictions" / "naive_rag__reasoning_effort-high_sentence_window-true_window-1.jsonl")[0]
    assert record["setting"]["window"] == 1  # typed by the graph's configuration: plots sort it as a number

    # The window changes what naive_rag retrieves: a sentence window of 1 returns fewer tokens than 3.
    tokens = {(r["setting"]["window"], r["setting"]["reasoning_effort"]): r["retrieved_tokens"] for r in rows[:4]}
    assert tokens[(1, "minimal")] < tokens[(3, "minimal")]

    # A plot per swept setting, besides accuracy against retrieved tokens.
    plots = sorted(p.name for p in out.glob("accuracy_vs_*.png"))
    assert plots == ["accuracy_vs_reasoning_effort.png", "accuracy_vs_tokens.png", "accuracy_vs_window.png"]

    # A rerun may add values: only the new ones run, the others are kept as they are.
    before = (out / "predictions" / files[0]).read_bytes()
    extra = ("--graphs", "naive_rag,direct", "--set", "reasoning_effort=minimal,high", "--set", "window=3,1,5")
    code, _, err = run(
        [*eval_argv(hotpot_slice[1], out, hotpot_index, *extra), "--set", "sentence_window=true"], capsys
    )
    assert code == 0, err
    assert len(list((out / "predictions").glob("*.jsonl"))) == 8
    assert (out / "predictions" / files[0]).read_bytes() == before


def test_a_free_text_setting_keeps_its_commas(
    hotpot_slice: tuple[Path, Path], hotpot_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "prompt"
    prompt = "You answer questions, briefly, from the tools' results."
    argv = eval_argv(hotpot_slice[1], out, hotpot_index, "--graphs", "arag", "--set", f"system_prompt={prompt}")
    code, _, err = run([*argv, "--limit", "1"], capsys)
    assert code == 0, err
    (row,) = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert row["setting"] == {"system_prompt": prompt}


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("reasoning_effort=low,extreme", "reasoning_effort='extreme'"),
        ("window=1,zero", "window='zero'"),
        ("bogus=1,2", "--set bogus: none of the graphs naive_rag, direct has that setting; choose from"),
        ("model=gpt-4o", "--set model=...: use --model for that"),
        ("index_path=/etc", "--set index_path=...: use --index for that"),
    ],
    ids=["bad-value", "bad-number", "unknown", "model", "index"],
)
def test_a_bad_setting_fails_before_any_work(
    setting: str,
    named: str,
    hotpot_slice: tuple[Path, Path],
    hotpot_index: HierarchicalIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A bad value in a sweep, a setting none of the graphs has, or one a flag of its own sets."""
    out = tmp_path / "bad"
    argv = eval_argv(hotpot_slice[1], out, hotpot_index, "--graphs", "naive_rag,direct", "--set", setting)
    assert named in assert_one_error_line(*run(argv, capsys))
    assert not out.exists()
