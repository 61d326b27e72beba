"""Summaries from hand-made prediction records: exact numbers, the markdown table, and the PNG plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arag_graph.evaluators.plots import write_plots
from arag_graph.evaluators.report import (
    OFFLINE_LABEL,
    model_label,
    summarize,
    summary_markdown,
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


def test_summary_says_which_text_each_metric_graded() -> None:
    text = summary_markdown([])
    assert "Contain-Acc reads the whole final reply" in text
    assert "LLM-Acc reads the whole final reply" in text
    assert "EM reads the short answer" in text
    assert "F1 reads the short answer" in text


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
        "| evidence precision (%) | answer similarity | context precision | context precision (RAGAS) "
        "| answer relevance | faithfulness | retrieved tokens | steps | errors |"
    )
    assert header in text
    na3 = "unavailable | unavailable | unavailable | unavailable"  # ARAGOG's metrics: no record has them
    assert f"| arag | max_steps=5 | 2 | 50.0 | 50.0 | 75.0 | unavailable | 75.0 | 50.0 | 0.600 | {na3} | 2,000 | 5.0 | 1 |" in text  # fmt: skip  # noqa: E501
    assert f"| arag | max_steps=10 | 2 | 100.0 | 0.0 | 0.0 | unavailable | n/a | n/a | n/a | {na3} | 3,000 | 9.0 | 0 |" in text  # fmt: skip  # noqa: E501
    assert f"| naive_rag | default | 2 | 50.0 | 0.0 | 0.0 | unavailable | n/a | n/a | n/a | {na3} | 600 | 1.0 | 0 |" in text  # fmt: skip  # noqa: E501
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


def test_runs_an_evaluator_failed_on_are_counted_and_shown() -> None:
    records = [record("arag", {}, "q1"), record("arag", {}, "q2", f1=None)]
    records[1]["evaluator_errors"] = {"f1": "RuntimeError: tokenizer exploded"}
    rows = summarize(records)
    assert rows[0]["evaluator_errors"] == 1 and rows[0]["counts"]["f1"] == 1  # missing, not zero
    text = summary_markdown(rows)
    assert "| errors | runs with evaluator errors |" in text
    assert text.split("| arag | default | 2 |")[1].split("\n")[0].endswith("| 0 | 1 |")
    assert "an evaluator raised" in text


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


# --- breakdowns by question type and hops (issue 15 item 3) ---------------------------------------


def typed(graph: str, qid: str, question_type: str | None, **metrics: Any) -> dict[str, Any]:
    r = record(graph, {}, qid, **metrics)
    r["question_type"] = question_type
    return r


def musique_records() -> list[dict[str, Any]]:
    return [
        typed("arag", "a", "2hop", contain_acc=1.0, context_precision=1.0, retrieved_tokens=100),
        typed("arag", "b", "2hop", contain_acc=1.0, context_precision=0.5, retrieved_tokens=300),
        typed("arag", "c", "3hop1", contain_acc=0.0, retrieved_tokens=500),
        typed("arag", "d", "3hop2", contain_acc=1.0, retrieved_tokens=700),
        typed("arag", "e", "4hop3", contain_acc=0.0, error="graph failed: boom", retrieved_tokens=900),
        typed("naive_rag", "a", "2hop", contain_acc=0.0),
        typed("naive_rag", "c", "3hop1", contain_acc=1.0),
    ]


def test_every_metric_broken_down_by_type_and_by_hops() -> None:
    arag, naive = summarize(musique_records())
    assert list(arag["by_type"]) == ["2hop", "3hop1", "3hop2", "4hop3"]
    two = arag["by_type"]["2hop"]
    assert (two["n"], two["contain_acc"], two["context_precision"], two["retrieved_tokens"]) == (2, 1.0, 0.75, 200)
    assert two["counts"]["context_precision"] == 2 and two["llm_acc"] is None
    assert arag["by_type"]["4hop3"]["errors"] == 1
    # Hops from MuSiQue's type: 3hop1 and 3hop2 are both three hops.
    assert list(arag["by_hops"]) == ["2", "3", "4"]
    three = arag["by_hops"]["3"]
    assert (three["n"], three["contain_acc"], three["retrieved_tokens"]) == (2, 0.5, 600)
    assert three["context_precision"] is None  # no record of that category has it: unavailable, not 0
    assert list(naive["by_hops"]) == ["2", "3"]
    assert (naive["by_hops"]["2"]["contain_acc"], naive["by_hops"]["3"]["contain_acc"]) == (0.0, 1.0)
    assert sum(part["n"] for part in arag["by_type"].values()) == arag["n"]

    text = summary_markdown([arag, naive])
    assert "## By question type" in text and "## By number of hops" in text
    hops_table = text.split("## By number of hops")[1]
    assert "| graph | setting | hops | n | Contain-Acc (%) |" in hops_table
    assert "| arag | default | 3 | 2 | 50.0 |" in hops_table
    assert "| naive_rag | default | 2 | 1 | 0.0 |" in hops_table
    type_table = text.split("## By question type")[1].split("## By number of hops")[0]
    assert "| arag | default | 2hop | 2 | 100.0 |" in type_table
    assert "| arag | default | 4hop3 | 1 | 0.0 |" in type_table and type_table.count("\n| arag |") == 4


def test_hotpotqa_types_have_no_hops_and_untyped_data_no_breakdown() -> None:
    (row,) = summarize([typed("arag", "a", "bridge", contain_acc=1.0), typed("arag", "b", "comparison")])
    assert list(row["by_type"]) == ["bridge", "comparison"]
    assert row["by_hops"] == {}
    text = summary_markdown([row])
    assert "## By question type" in text and "## By number of hops" not in text
    (untyped,) = summarize([typed("arag", "a", None), typed("arag", "b", None)])
    assert untyped["by_type"] == {} and untyped["by_hops"] == {}
    assert "## By question type" not in summary_markdown([untyped])


# --- failure modes summed per row (issue 15 item 4) -------------------------------------------------


def test_failure_modes_are_summed_per_graph_in_the_summary() -> None:
    records = [
        record("arag", {}, "q1", contain_acc=1.0),
        record("arag", {}, "q2"),  # gold "1", nothing retrieved
        record("arag", {}, "q3", error="graph failed: boom"),
        record("naive_rag", {}, "q1"),
    ]
    records[1]["prediction"].update(retrieved_chunks=["1"], read_chunks=[])
    arag, naive = summarize(records)
    assert arag["failures"] == {**dict.fromkeys(arag["failures"], 0), "correct": 1, "not_read": 1, "error": 1}
    assert naive["failures"]["not_retrieved"] == 1
    text = summary_markdown([arag, naive])
    lost = text.split("## Where answers are lost")[1]
    assert (
        "| graph | setting | n | correct | error | cap reached | gold never retrieved | retrieved, never read "
        "| read, answer wrong |" in lost
    )
    assert "| arag | default | 3 | 1 | 1 | 0 | 0 | 1 | 0 |" in lost
    assert "| naive_rag | default | 1 | 0 | 0 | 0 | 1 | 0 | 0 |" in lost
    assert "no gold ids" not in lost  # a column only when some run needs it


def test_write_failures(tmp_path: Path) -> None:
    from arag_graph.evaluators.report import write_failures

    paths = write_failures([record("arag", {}, "q1", contain_acc=1.0), record("naive_rag", {}, "q1")], tmp_path)
    assert [p.name for p in paths] == ["failures.csv", "failures.md"]
    assert paths[0].read_text(encoding="utf-8").splitlines()[1].startswith("q1,,arag,default,correct,True")
    assert "| q1: question q1? | correct | gold never retrieved (0/1 retrieved, 0 read) |" in paths[1].read_text()


# --- ARAGOG's metrics in the table (issue 14 item 5) -----------------------------------------------


def test_aragog_columns_show_scores_and_coverage() -> None:
    aragog = ("context_precision", "context_precision_ragas", "answer_relevance", "faithfulness")
    records = [
        record("arag", {}, "q1", **dict(zip(aragog, (1.0, 1.0, 0.9, 1.0), strict=True))),
        record("arag", {}, "q2", **dict(zip(aragog, (0.5, 0.7, 0.7, None), strict=True))),
    ]
    (row,) = summarize(records)
    assert (row["context_precision"], row["answer_relevance"], row["faithfulness"]) == (0.75, pytest.approx(0.8), 1.0)
    line = next(line for line in summary_markdown([row]).splitlines() if line.startswith("| arag |"))
    assert "| 0.750 | 0.850 | 0.800 | 1.000 (1/2 scored) |" in line


# --- plots: n per point, coinciding points kept apart (issue 13 item 12) -------------------------


@pytest.fixture
def saved_figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every matplotlib figure saved while the test runs, as it was saved."""
    from matplotlib.figure import Figure

    figures: list[Any] = []
    original = Figure.savefig

    def savefig(self: Any, *args: Any, **kwargs: Any) -> Any:
        figures.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return figures


def _markers_on_screen(figure: Any) -> dict[str, list[tuple[float, float]]]:
    """Pixel positions of every plotted marker, by legend label, after the figure was drawn."""
    import numpy as np

    axes = figure.axes[0]
    out: dict[str, list[tuple[float, float]]] = {}
    for line in axes.get_lines():
        if line.get_marker() in (None, "None", ""):
            continue
        xy = np.column_stack([np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)])
        out[line.get_label()] = [tuple(p) for p in axes.transData.transform(xy)]
    return out


def overlapping_sweep() -> list[dict[str, Any]]:
    """``--max-steps 3,6`` where arag and arag_naive score and spend exactly the same."""
    records = []
    for cap in (3, 6):
        for graph in ("arag", "arag_naive"):
            for qid, acc in (("q1", 1.0), ("q2", 0.0), ("q3", 0.0)):
                records.append(
                    record(graph, {"max_steps": cap}, qid, contain_acc=acc, retrieved_tokens=200 * cap, steps=cap)
                )
    records += [record("naive_rag", {}, q, contain_acc=1.0, retrieved_tokens=600, steps=1) for q in ("q1", "q2")]
    return records


def test_coinciding_points_stay_visible_and_every_point_shows_its_n(tmp_path: Path, saved_figures: list[Any]) -> None:
    paths = write_plots(summarize(overlapping_sweep()), tmp_path)
    assert [p.name for p in paths] == ["accuracy_vs_tokens.png", "accuracy_vs_steps.png"]
    assert len(saved_figures) == 2
    for figure in saved_figures:
        markers = _markers_on_screen(figure)
        arag, naive = markers["arag: Contain-Acc"], markers["arag_naive: Contain-Acc"]
        assert len(arag) == len(naive) == 2
        for (ax, ay), (nx, ny) in zip(arag, naive, strict=True):
            assert ay == pytest.approx(ny)  # the same accuracy, still read exactly off the y axis
            assert abs(ax - nx) >= 8 * figure.dpi / 72  # a whole marker width apart: neither hides the other
        # One marker shape per graph as well as one colour.
        shapes = {line.get_label(): line.get_marker() for line in figure.axes[0].get_lines()}
        assert shapes["arag: Contain-Acc"] != shapes["arag_naive: Contain-Acc"]
        labels = [text.get_text() for text in figure.axes[0].texts]
        # Every point says how many questions it is over; a spread point also says whose it is.
        assert sum("n=3" in label for label in labels) == 4
        assert any(label.startswith("arag ") for label in labels)
        assert any(label.startswith("arag_naive ") for label in labels)
    tokens_labels = [text.get_text() for text in saved_figures[0].axes[0].texts]
    assert "n=2" in tokens_labels  # naive_rag's single point: its n, nothing else to say
    assert "arag cap 3 n=3" in tokens_labels and "arag_naive cap 6 n=3" in tokens_labels


def test_points_apart_are_not_moved(tmp_path: Path, saved_figures: list[Any]) -> None:
    records = [r for r in overlapping_sweep() if r["graph"] != "arag_naive"]
    write_plots(summarize(records), tmp_path)
    axes = saved_figures[0].axes[0]
    line = next(line for line in axes.get_lines() if line.get_label() == "arag: Contain-Acc")
    assert list(line.get_xdata()) == [600, 1200]  # exact data where nothing coincides


# --- sweeps over any setting (issue 15 item 2) -----------------------------------------------------

EFFORTS = ["minimal", "low", "medium", "high"]


def effort_sweep(usage: bool = True) -> list[dict[str, Any]]:
    """``--set reasoning_effort=minimal,low,medium,high``: accuracy and spending grow with the effort."""
    records = []
    for i, effort in enumerate(EFFORTS):
        for q in range(4):
            spent = {"input_tokens": 5000 * (i + 1), "output_tokens": 300 * 2**i} if usage else {}
            records.append(
                record(
                    "arag",
                    {"reasoning_effort": effort},
                    f"q{q}",
                    model="gpt-5-mini",
                    contain_acc=float(q <= i),
                    retrieved_tokens=1000 * (i + 1),
                    **spent,
                )
            )
    return records


def _tick_labels(axes: Any) -> list[str]:
    return [tick.get_text() for tick in axes.get_xticklabels()]


def test_a_sweep_over_any_setting_plots_accuracy_against_the_setting_and_the_compute_spent(
    tmp_path: Path, saved_figures: list[Any]
) -> None:
    orders = {"reasoning_effort": EFFORTS}
    rows = summarize(effort_sweep(), orders)
    # Rows in the order the sweep asked for, not alphabetical (high, low, medium, minimal).
    assert [r["setting"]["reasoning_effort"] for r in rows] == EFFORTS
    paths = write_plots(rows, tmp_path, orders)
    assert [p.name for p in paths] == ["accuracy_vs_tokens.png", "accuracy_vs_reasoning_effort.png"]
    assert "reasoning_effort" in _png_title(paths[1]) and "gpt-5-mini" in _png_title(paths[1])
    figure = saved_figures[1]
    setting_panel, retrieved_panel, model_panel = figure.axes
    assert _tick_labels(setting_panel) == EFFORTS
    assert "retrieved" in retrieved_panel.get_xlabel() and "model tokens" in model_panel.get_xlabel()
    # Each panel plots the same four points: accuracy 25, 50, 75, 100 % against the setting's position,
    # the retrieved tokens and the model tokens (input + output) of each effort.
    for axes, xs in (
        (setting_panel, [0, 1, 2, 3]),
        (retrieved_panel, [1000, 2000, 3000, 4000]),
        (model_panel, [5300, 10600, 16200, 22400]),
    ):
        (line,) = [line for line in axes.get_lines() if line.get_label() == "arag: Contain-Acc"]
        assert list(line.get_ydata()) == [25.0, 50.0, 75.0, 100.0]
        assert list(line.get_xdata()) == xs
    # On the compute panels each point says which effort it is.
    assert {t.get_text() for t in retrieved_panel.texts} == {f"{e} n=4" for e in EFFORTS}


def test_without_model_usage_a_sweep_plot_has_no_model_token_panel(tmp_path: Path, saved_figures: list[Any]) -> None:
    write_plots(summarize(effort_sweep(usage=False)), tmp_path)
    assert len(saved_figures[1].axes) == 2  # the setting and the retrieved tokens; the offline policy reports no usage


def test_two_sweeps_in_one_run_write_a_plot_each_and_numbers_sort_numerically(tmp_path: Path) -> None:
    records = [
        record("corag", {"n": n, "max_steps": cap}, q, contain_acc=float(q == "q1"), retrieved_tokens=100 * n * cap)
        for n in (8, 2, 4)
        for cap in (3, 6)
        for q in ("q1", "q2")
    ]
    records += [record("naive_rag", {}, q, retrieved_tokens=600) for q in ("q1", "q2")]
    rows = summarize(records)
    # By step cap, then n; numbers numerically (8 after 4).
    shown = [(r["setting"].get("n"), r["setting"].get("max_steps")) for r in rows]
    assert shown[:4] == [(2, 3), (4, 3), (8, 3), (2, 6)]
    (tmp_path / "accuracy_vs_beam.png").write_bytes(PNG_MAGIC + b"stale")  # an earlier evaluation's sweep
    paths = write_plots(rows, tmp_path)
    assert [p.name for p in paths] == ["accuracy_vs_tokens.png", "accuracy_vs_steps.png", "accuracy_vs_n.png"]
    assert "n (test-time scaling)" in _png_title(tmp_path / "accuracy_vs_n.png")
    assert not (tmp_path / "accuracy_vs_beam.png").exists()


def test_a_setting_with_one_value_is_no_sweep(tmp_path: Path) -> None:
    records = [record("arag", {"tools": "no_chunk_read"}, q, retrieved_tokens=10) for q in ("q1", "q2")]
    assert [p.name for p in write_plots(summarize(records), tmp_path)] == ["accuracy_vs_tokens.png"]
