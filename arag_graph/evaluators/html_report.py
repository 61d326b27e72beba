"""``report.html``: one self-contained page to read an evaluation (or one ``arag ask`` run) in a browser.

Researchers compare graphs by reading ``summary.md``, PNG plots and JSON Lines; to see why a question
was lost they read a trajectory as JSON. This page shows the same records the way people look at
them, offline: the summary table (sortable, with n and failure-mode counts), the plots, and per
question the gold answer and passages beside each graph's answer, score and trajectory.

How it is built, and why:

* One HTML file with its styles and script inline (``report_template.html``, hand-written vanilla
  JS): it opens from disk, on a machine without network, and can be mailed around.
* The data goes in as one JSON blob (``<script type="application/json">``) and the page renders it:
  the question list a page at a time, a question's detail only when it is expanded. So a run of
  1,000 questions x 6 graphs opens in well under the 3 s target (``bench/bench_report.py``).
* Every text of a record is untrusted (a model wrote it, or a dataset): the blob is JSON with ``<``,
  ``>`` and ``&`` escaped, so no text ends the script element, and the page only ever puts text in
  with ``textContent``, never as markup. Links are only ``http(s)`` LangSmith URLs.
* The summary cells are formatted here by the same rules as ``summary.md``
  (:mod:`arag_graph.evaluators.report`), the failure modes are :mod:`~arag_graph.evaluators.failures`'s.
* Chunk snippets: prediction records name chunks by ID only, so ``arag eval`` writes the start of
  every chunk its records name to ``report_chunks.json`` beside them; ``arag report`` uses it when present.
* Two runs (``arag report RUN_A RUN_B``): columns of both, and per question what changed between a
  graph and setting's run in A and in B (the failure mode or the answer).
"""

from __future__ import annotations

import base64
import gzip
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from arag_graph.core.errors import AragError
from arag_graph.core.jsonl import dumps, replace_file
from arag_graph.evaluators.failures import FAILURE_MODES, failure_mode
from arag_graph.evaluators.report import _COLUMNS, _cell, model_label, summarize
from arag_graph.qa.datasets import hop_count

__all__ = [
    "REPORT_FILE",
    "build_report",
    "question_report",
    "render",
    "report_data",
    "write_experiment_links",
    "write_report",
    "write_snippets",
]

REPORT_FILE = "report.html"
SNIPPETS_FILE = "report_chunks.json"
EXPERIMENTS_FILE = "experiments.json"
SNIPPET_CHARS = 240
"""How much of each chunk the page shows: enough to recognise the passage, not the corpus."""

_SCORES = ("contain_acc", "exact_match", "f1", "llm_acc", "evidence_recall", "answer_similarity")


# --- what eval writes besides the page ---------------------------------------------------------


def write_experiment_links(out: Path, links: Mapping[tuple[str, str], str]) -> None:
    """Record each uploaded experiment's LangSmith URL (merged with those of earlier runs into ``out``)."""
    if not links:
        return
    known = _experiment_links(out)
    known |= {f"{graph}\t{key}": url for (graph, key), url in links.items()}
    entries = [{"graph": k.split("\t")[0], "setting_key": k.split("\t")[1], "url": v} for k, v in known.items()]
    replace_file(out / EXPERIMENTS_FILE, (dumps(entries, indent=2) + "\n").encode("utf-8"))


def _experiment_links(out: Path) -> dict[str, str]:
    try:
        entries = json.loads((out / EXPERIMENTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    links: dict[str, str] = {}
    for entry in entries if isinstance(entries, list) else []:
        url = entry.get("url") if isinstance(entry, dict) else None
        if isinstance(url, str) and url.startswith(("https://", "http://")):
            links[f"{entry.get('graph')}\t{entry.get('setting_key')}"] = url
    return links


def _chunk_ids(record: Mapping[str, Any]) -> set[str]:
    prediction = record.get("prediction") or {}
    ids = set(record.get("gold_chunk_ids") or [])
    ids |= set(prediction.get("read_chunks") or []) | set(prediction.get("retrieved_chunks") or [])
    for step in [*(prediction.get("trajectory") or []), *(prediction.get("chain") or [])]:
        if isinstance(step, Mapping):
            ids |= set(step.get("chunk_ids") or [])
    return {str(i) for i in ids if i is not None}


def snippets_of(chunk_ids: Iterable[str], indexes: Sequence[Any]) -> dict[str, dict[str, str]]:
    """``{chunk id: {title, text}}`` with the start of each chunk, from the first index that has it."""
    found: dict[str, dict[str, str]] = {}
    for chunk_id in sorted(set(chunk_ids)):
        for index in indexes:
            chunk = index.get_chunk(chunk_id)
            if chunk is not None:
                text = " ".join(chunk.text.split())
                cut = text[:SNIPPET_CHARS] + ("…" if len(text) > SNIPPET_CHARS else "")
                found[chunk_id] = {"title": chunk.title or "", "text": cut}
                break
    return found


def write_snippets(out: Path, records: Iterable[Mapping[str, Any]], indexes: Sequence[Any]) -> None:
    """Write ``report_chunks.json``: the start of every chunk the records name, for the report's trajectories."""
    ids: set[str] = set()
    for record in records:
        ids |= _chunk_ids(record)
    replace_file(out / SNIPPETS_FILE, dumps(snippets_of(ids, indexes)).encode("utf-8"))


# --- reading a run directory ------------------------------------------------------------------------


class _Run:
    """One evaluation output directory as the report reads it (its records are read by the caller:
    the runner has them at hand, ``arag report`` reads them with :func:`predictions.load_records`)."""

    def __init__(self, path: Path, label: str, records: Sequence[Mapping[str, Any]]) -> None:
        if not records:
            raise AragError(
                f"{path} holds no evaluation (no scored records in predictions/*.jsonl); "
                "give the --out directory of an arag eval run"
            )
        self.path, self.label = path, label
        self.records = list(records)
        try:
            rows = json.loads((path / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            rows = None
        self.rows: list[dict[str, Any]] = rows if isinstance(rows, list) else summarize(self.records)
        try:
            snippets = json.loads((path / SNIPPETS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            snippets = {}
        self.snippets: dict[str, Any] = snippets if isinstance(snippets, dict) else {}
        self.links = _experiment_links(path)
        self.plots = sorted(path.glob("accuracy_vs_*.png"))
        self.questions = len({str(record.get("question_id")) for record in self.records})


# --- the data blob --------------------------------------------------------------------------------


def _column_label(graph: str, key: str) -> str:
    return graph if key in ("", "default") else f"{graph} ({key})"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _run_view(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the list and the filters need of one record: answer, failure mode, scores, counts."""
    prediction = record.get("prediction") or {}
    metrics = record.get("metrics") or {}
    view: dict[str, Any] = {
        "answer": str(prediction.get("answer") or ""),
        "mode": failure_mode(record),
        "scores": {k: round(v, 4) for k in _SCORES if (v := _number(metrics.get(k))) is not None},
        "steps": prediction.get("steps"),
        "tokens": prediction.get("retrieved_tokens"),
        "seconds": record.get("seconds"),
    }
    if prediction.get("error"):
        view["error"] = str(prediction["error"])
    return view


def _run_detail(record: Mapping[str, Any]) -> dict[str, Any]:
    """What only an expanded question shows of one record: its steps and the structure behind them.

    Empty fields are left out (a step without an error carries no ``error: false``): a large run's
    page is mostly this, and its size is what the browser spends its time on.
    """
    prediction = record.get("prediction") or {}
    trajectory = []
    for step in prediction.get("trajectory") or []:
        if isinstance(step, Mapping):
            trajectory.append({k: v for k, v in step.items() if v not in (None, False, "", [], {})})
    detail: dict[str, Any] = {
        "trajectory": trajectory,
        "read": list(prediction.get("read_chunks") or []),
        "citations": list(prediction.get("citations") or []),
    }
    for key in ("warnings", "chain", "sampled_chains", "sub_questions", "table"):
        if prediction.get(key):
            detail[key] = prediction[key]
    return detail


def _changes(question: Mapping[str, Any], columns: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per graph and setting run in both A and B: what changed (the failure mode, the answer)."""
    runs = question["runs"]
    pairs: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for i, column in enumerate(columns):
        if runs[i] is not None:
            pairs.setdefault((column["graph"], column["setting_key"]), {})[column["run"]] = runs[i]
    changed = []
    for (graph, key), both in pairs.items():
        if 0 in both and 1 in both:
            a, b = both[0], both[1]
            if a["mode"] != b["mode"] or a["answer"] != b["answer"]:
                column, answer_changed = _column_label(graph, key), a["answer"] != b["answer"]
                changed.append({"column": column, "from": a["mode"], "to": b["mode"], "answer_changed": answer_changed})
    return changed


def _png_uri(path: Path) -> str:
    """A plot as a data URI, so the page needs no file beside it."""
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _summary_rows(rows: Sequence[Mapping[str, Any]], run: int) -> list[dict[str, Any]]:
    """Summary rows as the page's table shows them: cell text (summary.md's rules) and sort keys."""
    out = []
    for row in rows:
        failures = row.get("failures") or {}
        out.append(
            {
                "run": run,
                "graph": str(row.get("graph")),
                "setting_key": str(row.get("setting_key") or "default"),
                "n": row.get("n"),
                "cells": [_cell(row, key, kind) for key, _, kind in _COLUMNS],
                "values": [_number(row.get(key)) for key, _, _ in _COLUMNS],
                "errors": row.get("errors") or 0,
                "failures": [int(failures.get(mode) or 0) for mode in FAILURE_MODES],
            }
        )
    return out


def report_data(runs: Sequence[_Run], title: str) -> dict[str, Any]:
    """The page's JSON blob: runs, summary rows, plots, columns and one entry per question."""
    columns: list[dict[str, Any]] = []
    column_of: dict[tuple[int, str, str], int] = {}
    questions: dict[str, dict[str, Any]] = {}
    details: dict[str, list[dict[str, Any] | None]] = {}
    snippets: dict[str, Any] = {}
    for r, run in enumerate(runs):
        snippets |= run.snippets
        for row in run.rows:
            key = (r, str(row.get("graph")), str(row.get("setting_key") or "default"))
            column_of.setdefault(key, len(columns))
            if len(columns) < len(column_of):
                columns.append({"run": r, "graph": key[1], "setting_key": key[2]})
        for record in run.records:
            key = (r, str(record.get("graph")), str(record.get("setting_key") or "default"))
            if key not in column_of:
                column_of[key] = len(columns)
                columns.append({"run": r, "graph": key[1], "setting_key": key[2]})
    for column in columns:
        label = _column_label(column["graph"], column["setting_key"])
        column["label"] = f"{runs[column['run']].label}: {label}" if len(runs) > 1 else label
        column["link"] = runs[column["run"]].links.get(f"{column['graph']}\t{column['setting_key']}")
    for r, run in enumerate(runs):
        for record in run.records:
            qid = str(record.get("question_id"))
            question = questions.get(qid)
            if question is None:
                qtype = record.get("question_type")
                question = questions[qid] = {
                    "id": qid,
                    "question": str(record.get("question") or ""),
                    "type": str(qtype) if qtype not in (None, "") else None,
                    "hops": hop_count(str(qtype)) if qtype not in (None, "") else None,
                    "answers": [str(a) for a in record.get("answers") or []],
                    "gold": [str(g) for g in record.get("gold_chunk_ids") or []],
                    "runs": [None] * len(columns),
                }
            key = (r, str(record.get("graph")), str(record.get("setting_key") or "default"))
            question["runs"][column_of[key]] = _run_view(record)
            details.setdefault(qid, [None] * len(columns))[column_of[key]] = _run_detail(record)
    if len(runs) > 1:
        for question in questions.values():
            question["changes"] = _changes(question, columns)
    models = {model_label(str(rec.get("model") or "?")) for run in runs for rec in run.records}
    return {
        "title": title,
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "runs": [{"label": run.label, "path": str(run.path), "questions": run.questions} for run in runs],
        "models": sorted(models),
        "compare": len(runs) > 1,
        "metric_headers": [title for _, title, _ in _COLUMNS],
        "modes": [{"key": key, "label": label} for key, label in FAILURE_MODES.items()],
        "summary": [row for r, run in enumerate(runs) for row in _summary_rows(run.rows, r)],
        "plots": [{"run": run.label, "name": p.name, "src": _png_uri(p)} for run in runs for p in run.plots],
        "columns": columns,
        "questions": list(questions.values()),
        "details": [details[qid] for qid in questions],
        "snippets": snippets,
    }


# --- the page ----------------------------------------------------------------------------------------


def _script_json(data: Any) -> str:
    """JSON safe inside a <script> element: no ``<``, ``>`` or ``&`` that could end it or start markup."""
    text = dumps(data)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _packed(data: Any) -> str:
    """JSON, gzip-compressed and base64-encoded: the page inflates it with the browser's DecompressionStream."""
    return base64.b64encode(gzip.compress(dumps(data).encode("utf-8"), compresslevel=6, mtime=0)).decode("ascii")


def render(data: Mapping[str, Any]) -> str:
    """The HTML page for a data blob (:func:`report_data`).

    What the first view needs (summary, plots, the questions' list) is plain JSON, parsed at once.
    Each question's steps (element ``qd-<i>``) and the chunk snippets are gzip-compressed JSON in
    base64, inflated by the browser only when a question is first expanded: a large run's page is
    mostly steps and snippets, and its bytes are what a browser spends its opening time on
    (``bench/bench_report.py``). Base64 has no ``<``, so no packed text can end its element.
    """
    template = resources.files("arag_graph.evaluators").joinpath("report_template.html").read_text(encoding="utf-8")
    light = {k: v for k, v in data.items() if k not in ("details", "snippets")}
    blobs = [(f"qd-{i}", detail) for i, detail in enumerate(data["details"])]
    blobs.append(("report-snippets", data.get("snippets") or {}))
    packed = [f'<script type="application/gzip" id="{name}">{_packed(blob)}</script>' for name, blob in blobs]
    # The template is cut at its placeholders first, so no text of the data is taken for one.
    head, rest = template.split("__DATA__", 1)
    before, after = rest.split("__DETAILS__", 1)
    head = head.replace("__TITLE__", _html_text(str(data.get("title") or "arag report")))
    return head + _script_json(light) + before + "\n".join(packed) + after


def write_report(out: Path, records: Sequence[Mapping[str, Any]]) -> Path | None:
    """Write ``out/report.html`` for the evaluation in ``out`` (what ``arag eval`` calls at its end).

    An evaluation without a single record (nothing ran) has nothing to show: no page, and no error
    on top of what the evaluation itself reports.
    """
    if not records:
        return None
    run = _Run(out, out.name, records)
    path = out / REPORT_FILE
    replace_file(path, render(report_data([run], f"arag eval: {out.name}")).encode("utf-8"))
    return path


def build_report(
    run_dirs: Sequence[Path], records: Sequence[Sequence[Mapping[str, Any]]], out_file: Path | None = None
) -> Path:
    """``arag report RUN [RUN_B]``: one run's page, or two runs compared; returns the file written.

    ``records`` holds each directory's prediction records. The default file is ``RUN/report.html``
    for one run and ``RUN/compare-<RUN_B's name>.html`` for two, so comparing never replaces the
    run's own report.
    """
    if not 1 <= len(run_dirs) <= 2:
        raise AragError("arag report takes one run directory, or two to compare: arag report RUN_A [RUN_B]")
    labels = [p.name or str(p) for p in run_dirs]
    if len(run_dirs) == 2 and labels[0] == labels[1]:
        labels = ["A", "B"]
    runs = [_Run(path, label, recs) for path, label, recs in zip(run_dirs, labels, records, strict=True)]
    if out_file is None:
        out_file = run_dirs[0] / (REPORT_FILE if len(runs) == 1 else f"compare-{run_dirs[1].name or 'B'}.html")
    title = f"arag eval: {labels[0]}" if len(runs) == 1 else f"arag eval: {labels[0]} vs. {labels[1]}"
    try:
        replace_file(out_file, render(report_data(runs, title)).encode("utf-8"))
    except OSError as exc:
        raise AragError(f"cannot write {out_file}: {exc.strerror or exc}; give another --out file") from None
    return out_file


def question_report(
    question: str, graph: str, model: str, prediction: Mapping[str, Any], index: Any, out_file: Path
) -> Path:
    """``arag ask --html FILE``: the trajectory view of one question, as the evaluation report shows it.

    A single question has no gold answer, so it is not scored (no failure mode, no scores).
    """
    record = {"question_id": "ask", "question": question, "prediction": dict(prediction)}
    return questions_report([record], graph, model, index, out_file, title=f"arag ask: {question}")


def questions_report(
    records: Sequence[Mapping[str, Any]], graph: str, model: str, index: Any, out_file: Path, title: str
) -> Path:
    """The trajectory view of questions run one at a time (``arag ask --html``, ``arag demo``).

    Each record holds ``question_id``, ``question`` and ``prediction`` (the evaluation's record of
    a run), and may hold ``answers``, ``gold_chunk_ids``, ``question_type`` and ``metrics``: a
    question with gold answers is shown with its scores and failure mode as the evaluation report
    shows them; one without is shown unscored. The page is the evaluation report's, so both read
    the same way.
    """
    columns = [{"run": 0, "graph": graph, "setting_key": "default", "label": graph, "link": None}]
    full = [{"graph": graph, "setting_key": "default", "model": model, "metrics": {}, **given} for given in records]
    scored = any(record.get("answers") for record in full)
    questions, details, wanted = [], [], set()
    for record in full:
        wanted |= _chunk_ids(record)
        view = _run_view(record)
        view.pop("seconds", None)
        if not record.get("answers"):
            view["mode"] = None  # no gold answer: nothing to score
        qtype = record.get("question_type")
        questions.append(
            {
                "id": str(record["question_id"]),
                "question": str(record["question"]),
                "type": str(qtype) if qtype else None,
                "hops": hop_count(str(qtype)) if qtype else None,
                "answers": [str(a) for a in record.get("answers") or []],
                "gold": [str(g) for g in record.get("gold_chunk_ids") or []],
                "runs": [view],
            }
        )
        details.append([_run_detail(record)])
    data = {
        "title": title,
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "runs": [{"label": graph, "path": f"index {index.path}", "questions": len(questions)}] if scored else [],
        "models": [model_label(model)],
        # One unscored question is a trajectory page: no filters, no summary, the question open.
        "single": not scored and len(questions) == 1,
        "compare": False,
        "metric_headers": [title for _, title, _ in _COLUMNS] if scored else [],
        "modes": [{"key": key, "label": label} for key, label in FAILURE_MODES.items()],
        "summary": _summary_rows(summarize(full), 0) if scored else [],
        "plots": [],
        "columns": columns,
        "questions": questions,
        "details": details,
        "snippets": snippets_of(wanted, [index]),
    }
    try:
        replace_file(out_file, render(data).encode("utf-8"))
    except OSError as exc:
        raise AragError(f"cannot write {out_file}: {exc.strerror or exc}; give another --html file") from None
    return out_file
