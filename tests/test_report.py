"""Summaries from hand-made prediction records: exact numbers, the markdown table, and the PNG plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arag_graph.evaluators.report import (
    OFFLINE_LABEL,
    model_label,
    summarize,
    summary_markdown,
    write_plots,
    write_summary,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def record(
    graph: str,
    setting: dict[str, Any],
    qid: str,
    *,
    model: str = "offline",
    error: str | None = None,
    **metrics: Any,
) -> dict[str, Any]:
    key = ",".join(f"{k}={v}" for k, v in setting.items())
    base = {
        "contain_acc": 0.0,
        "exact_match": 0.0,
        "f1": 0.0,
        "llm_acc": None,
        "evidence_recall": None,
        "evidence_precision": None,
        "answer_similarity": None,
        "cost_usd": None,
    }
    return {
        "question_id": qid,
        "question": f"question {qid}?",
        "answers": ["gold"],
        "gold_chunk_ids": ["1"],
        "graph": graph,
        "setting": setting,
        "setting_key": key,
        "model": model,
        "prediction": {"answer": "x", "error": error, "retrieved_tokens": 0, "steps": 0},
        "metrics": {**base, **metrics},
        "seconds": 1.0,
    }


def sweep_records() -> list[dict[str, Any]]:
    five, ten = {"max_steps": 5}, {"max_steps": 10}
    return [
        # max_steps=10 first: rows must still come out 5 then 10 (numeric, not "10" < "5").
        record("arag", ten, "q1", contain_acc=0.0, retrieved_tokens=9999, steps=99),  # superseded below
        record("arag", ten, "q1", contain_acc=1.0, retrieved_tokens=2000, steps=8),
        record("arag", ten, "q2", contain_acc=1.0, retrieved_tokens=4000, steps=10),
        record(
            "arag",
            five,
            "q1",
            contain_acc=1.0,
            exact_match=1.0,
            f1=1.0,
            evidence_recall=1.0,
            evidence_precision=0.5,
            answer_similarity=0.9,
            retrieved_tokens=1000,
            steps=4,
        ),
        record(
            "arag",
            five,
            "q2",
            error="graph failed: RuntimeError: boom",
            f1=0.5,
            evidence_recall=0.5,
            answer_similarity=0.3,
            retrieved_tokens=3000,
            steps=6,
        ),
        record("naive_rag", {}, "q1", retrieved_tokens=500, steps=1),
        record("naive_rag", {}, "q2", contain_acc=1.0, retrieved_tokens=700, steps=1),
    ]


def test_summary_numbers_by_hand() -> None:
    rows = summarize(sweep_records())
    assert [(row["graph"], row["setting_key"]) for row in rows] == [
        ("arag", "max_steps=5"),
        ("arag", "max_steps=10"),
        ("naive_rag", ""),
    ]
    five, ten, naive = rows
    assert five["n"] == 2
    assert five["errors"] == 1  # the failed run stays in the means, as a wrong answer
    assert five["contain_acc"] == 0.5  # (1 + 0) / 2
    assert five["exact_match"] == 0.5
    assert five["f1"] == 0.75  # (1.0 + 0.5) / 2
    assert five["llm_acc"] is None  # no judge: unavailable, not 0
    assert five["evidence_recall"] == 0.75  # (1.0 + 0.5) / 2
    assert five["evidence_precision"] == 0.5  # the only non-None value
    assert five["counts"]["evidence_precision"] == 1
    assert five["answer_similarity"] == pytest.approx(0.6)
    assert five["retrieved_tokens"] == 2000  # (1000 + 3000) / 2
    assert five["steps"] == 5
    assert five["cost_usd"] is None
    assert five["cost_usd_total"] is None
    assert five["setting"] == {"max_steps": 5}
    assert five["model"] == "offline"
    assert five["seconds_mean"] == 1.0
    # The repeated q1 counts once, the last record wins.
    assert ten["n"] == 2
    assert ten["contain_acc"] == 1.0
    assert ten["retrieved_tokens"] == 3000  # (2000 + 4000) / 2
    assert ten["steps"] == 9
    assert ten["errors"] == 0
    assert naive["contain_acc"] == 0.5
    assert naive["retrieved_tokens"] == 600
    assert naive["steps"] == 1
    assert naive["evidence_recall"] is None


def test_summary_partial_judge_cost_and_prediction_fallback() -> None:
    records = [
        record("arag", {}, "q1", model="gpt-4o-mini", llm_acc=1.0, cost_usd=0.001),
        record("arag", {}, "q2", model="gpt-4o-mini", llm_acc=None, cost_usd=0.002),
        record("arag", {}, "q3", model="gpt-4o-mini", llm_acc=0.0, cost_usd=None),
    ]
    # Tokens and steps missing from metrics are read from the prediction.
    records[0]["prediction"].update(retrieved_tokens=300, steps=3)
    (row,) = summarize(records)
    assert row["llm_acc"] == 0.5  # mean over the 2 judged items
    assert row["counts"]["llm_acc"] == 2
    assert row["cost_usd_total"] == pytest.approx(0.003)
    assert row["cost_usd"] == pytest.approx(0.0015)
    assert row["retrieved_tokens"] == 100  # (300 + 0 + 0) / 3
    assert row["steps"] == 1
    text = summary_markdown([row])
    assert "50.0 (2/3 judged)" in text
    assert "cost (USD)" in text
    assert "0.0030" in text
    assert OFFLINE_LABEL not in text


def test_summary_of_nothing() -> None:
    assert summarize([]) == []


def test_markdown_table(tmp_path: Path) -> None:
    rows = summarize(sweep_records())
    paths = write_summary(rows, tmp_path / "out")
    assert [p.name for p in paths] == ["summary.json", "summary.md"]
    assert json.loads(paths[0].read_text(encoding="utf-8")) == json.loads(json.dumps(rows))
    text = paths[1].read_text(encoding="utf-8")
    header = (
        "| graph | setting | n | Contain-Acc (%) | EM (%) | F1 (%) | LLM-Acc (%) | evidence recall (%) "
        "| evidence precision (%) | answer similarity | retrieved tokens | steps | errors |"
    )
    assert header in text
    assert (
        "| arag | max_steps=5 | 2 | 50.0 | 50.0 | 75.0 | unavailable | 75.0 | 50.0 | 0.600 | 2,000 | 5.0 | 1 |" in text
    )
    assert "| arag | max_steps=10 | 2 | 100.0 | 0.0 | 0.0 | unavailable | n/a | n/a | n/a | 3,000 | 9.0 | 0 |" in text
    assert "| naive_rag | default | 2 | 50.0 | 0.0 | 0.0 | unavailable | n/a | n/a | n/a | 600 | 1.0 | 0 |" in text
    assert OFFLINE_LABEL in text
    assert "never estimated" in text
    assert "cost (USD)" not in text  # no row has a cost
    assert "runs with warnings" not in text  # no run noted a fallback


def test_runs_whose_steps_fell_back_are_counted_and_shown() -> None:
    records = [record("corag", {}, "q1"), record("corag", {}, "q2"), record("srag", {}, "q1")]
    records[1]["prediction"]["warnings"] = ["step 1: the sufficiency check fell back to 'not sufficient' (...)"]
    rows = summarize(records)
    assert [(r["graph"], r["with_warnings"]) for r in rows] == [("corag", 1), ("srag", 0)]
    text = summary_markdown(rows)
    assert "| errors | runs with warnings |" in text
    assert "| corag | default | 2 |" in text and text.split("| corag | default | 2 |")[1].split("\n")[0].endswith(
        "| 0 | 1 |"
    )
    assert "fell back to a safe default" in text


def test_model_label() -> None:
    assert model_label("offline") == "offline (no-LLM policy)"
    assert model_label("gpt-5-mini") == "gpt-5-mini"


def _png_title(path: Path) -> str:
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size[0] > 400 and image.size[1] > 300
        return image.text.get("Title", "")


def test_sweep_writes_both_plots(tmp_path: Path) -> None:
    paths = write_plots(summarize(sweep_records()), tmp_path)
    assert [p.name for p in paths] == ["accuracy_vs_tokens.png", "accuracy_vs_steps.png"]
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC)
        assert len(data) > 15_000  # axes, points, labels: far more than an empty canvas
    tokens_title, steps_title = (_png_title(p) for p in paths)
    assert "retrieved tokens" in tokens_title
    assert "step cap" in steps_title
    for title in (tokens_title, steps_title):
        assert "offline (no-LLM policy)" in title
        assert "LLM-Acc unavailable" in title


def test_no_sweep_no_step_plot(tmp_path: Path) -> None:
    records = [r for r in sweep_records() if r["setting"].get("max_steps") != 10]
    (tmp_path / "accuracy_vs_steps.png").write_bytes(PNG_MAGIC + b"stale")  # left by an earlier run
    paths = write_plots(summarize(records), tmp_path)
    assert [p.name for p in paths] == ["accuracy_vs_tokens.png"]
    assert not (tmp_path / "accuracy_vs_steps.png").exists()
    assert paths[0].read_bytes().startswith(PNG_MAGIC)


def test_plots_with_a_judge_are_titled_with_the_model(tmp_path: Path) -> None:
    records = [
        record("arag", {"max_steps": cap}, qid, model="gpt-4o-mini", contain_acc=1.0, llm_acc=acc, retrieved_tokens=t)
        for cap, qid, acc, t in [(5, "q1", 0.0, 1000), (10, "q1", 1.0, 2000), (20, "q1", 1.0, 60_000)]
    ]
    paths = write_plots(summarize(records), tmp_path)
    assert len(paths) == 2
    for path in paths:
        title = _png_title(path)
        assert "gpt-4o-mini" in title
        assert "Contain-Acc and LLM-Acc" in title
        assert "offline" not in title


def test_no_rows_no_plots(tmp_path: Path) -> None:
    assert write_plots([], tmp_path) == []
