"""Summaries and tables from prediction records (one record per question per graph and setting).

A record is what the runner writes to its JSON Lines files: ``graph``, ``setting`` (a dict such as
``{"max_steps": 5}``), ``setting_key``, ``model``, ``question_id``, ``prediction`` and ``metrics``.

Aggregation rules, chosen so that a table never claims more than the data shows:

* One row per (graph, setting_key); graphs in order of first appearance, settings sorted by their
  values (so a step sweep reads 5, 10, 15, 20; a swept setting in the order it was asked for).
* A question recorded twice for the same row counts once (the last record wins): a resumed run
  must not weigh a question double.
* Each metric is the mean over the records that have a value for it; ``None`` (unavailable) is
  skipped, never counted as zero. A metric no record has stays ``None``; that is how LLM-Acc without
  a judge appears, reported as "unavailable". ``counts`` says how many records each mean is over,
  and the table shows "(k/n judged)" when LLM-Acc is missing for some items.
* Runs that failed (``prediction.error``) stay in: a failure is a wrong answer, as in the paper.
  ``errors`` counts them.
* ``retrieved_tokens`` and ``steps`` are read from ``metrics``, else from ``prediction``.
* Totals for cost and tokens are sums over the records that have them (``None`` when none has).
* Every row is also broken down by question type where the records carry one (``question_type``:
  HotpotQA's bridge/comparison, 2Wiki's types, MuSiQue's id prefix) and by hop count where the type
  names one (MuSiQue's ``2hop``, ``3hop1``, ...), with the same rules inside each category.
* Every record falls in one failure mode (:mod:`arag_graph.evaluators.failures`); a row counts them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from arag_graph.core.jsonl import dumps, replace_file
from arag_graph.evaluators.failures import FAILURE_MODES, failure_counts, failures_csv, failures_markdown
from arag_graph.evaluators.fields import GRADED_TEXT
from arag_graph.qa.datasets import hop_count

__all__ = [
    "METRICS",
    "OFFLINE_LABEL",
    "model_label",
    "summarize",
    "write_failures",
    "write_summary",
]

METRICS: tuple[str, ...] = (
    "contain_acc",
    "exact_match",
    "f1",
    "llm_acc",
    "evidence_recall",
    "read_recall",
    "evidence_precision",
    "answer_similarity",
    "context_precision",
    "context_precision_ragas",
    "answer_relevance",
    "faithfulness",
    "retrieved_tokens",
    "steps",
    "input_tokens",
    "output_tokens",
    "cost_usd",
)
"""Metric keys in report order; other numeric keys found in records are summarised after these."""

_TOTALS = ("cost_usd", "input_tokens", "output_tokens")
_FROM_PREDICTION = ("retrieved_tokens", "steps")
OFFLINE_LABEL = "offline (no-LLM policy)"


# --- summary -----------------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _setting_order(setting: Mapping[str, Any], orders: Mapping[str, Sequence[Any]] | None = None) -> tuple[Any, ...]:
    # A swept value sorts where the sweep put it (minimal, low, medium, high); other numbers sort
    # numerically and before strings, so mixed settings never compare int with str.
    def rank(name: str, value: Any) -> tuple[int, float, str]:
        order = (orders or {}).get(name) or ()
        if value in order:
            return (0, float(list(order).index(value)), "")
        return (0, float(value), "") if _number(value) is not None else (1, 0.0, str(value))

    return tuple((name, rank(name, v)) for name, v in sorted(setting.items()))


def _metrics_of(record: Mapping[str, Any]) -> dict[str, Any]:
    metrics = dict(record.get("metrics") or {})
    prediction = record.get("prediction") or {}
    for key in _FROM_PREDICTION:
        if metrics.get(key) is None and prediction.get(key) is not None:
            metrics[key] = prediction[key]
    return metrics


def _aggregate(recs: Sequence[Mapping[str, Any]], metric_names: Iterable[str]) -> dict[str, Any]:
    """Counts, means, totals and failure modes of one group of records (a row or a breakdown cell)."""
    out: dict[str, Any] = {
        "n": len(recs),
        "errors": sum(1 for r in recs if (r.get("prediction") or {}).get("error")),
        "with_warnings": sum(1 for r in recs if (r.get("prediction") or {}).get("warnings")),
        # Runs whose score lacks a metric because its evaluator raised (the record names which).
        "evaluator_errors": sum(1 for r in recs if r.get("evaluator_errors")),
    }
    counts: dict[str, int] = {}
    values_of: dict[str, list[float]] = {}
    for name in metric_names:
        values = [v for v in (_number(_metrics_of(r).get(name)) for r in recs) if v is not None]
        values_of[name] = values
        counts[name] = len(values)
        out[name] = (sum(values) / len(values)) if values else None
    for name in _TOTALS:
        out[f"{name}_total"] = sum(values_of[name]) if values_of.get(name) else None
    seconds = [v for v in (_number(r.get("seconds")) for r in recs) if v is not None]
    out["seconds_mean"] = (sum(seconds) / len(seconds)) if seconds else None
    out["counts"] = counts
    out["failures"] = failure_counts(recs)
    return out


def _breakdown(
    recs: Sequence[Mapping[str, Any]], metric_names: Sequence[str], key_of: Any, order: Any
) -> dict[str, dict[str, Any]]:
    """``{category: aggregate}`` over the records whose category is known; {} when none is."""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for record in recs:
        category = key_of(record)
        if category is not None:
            groups.setdefault(category, []).append(record)
    return {str(c): _aggregate(groups[c], metric_names) for c in sorted(groups, key=order)}


def _question_type(record: Mapping[str, Any]) -> str | None:
    value = record.get("question_type")
    return str(value) if value not in (None, "") else None


def _hops(record: Mapping[str, Any]) -> int | None:
    return hop_count(_question_type(record))


def summarize(
    records: Iterable[Mapping[str, Any]], orders: Mapping[str, Sequence[Any]] | None = None
) -> list[dict[str, Any]]:
    """One summary row per (graph, setting_key); see the module docstring for the rules.

    ``orders`` lists a swept setting's values in the order the evaluation asked for them, which is
    the order of its rows (``reasoning_effort``: minimal, low, medium, high, not alphabetical).

    Each row has ``graph``, ``setting_key``, ``setting``, ``model``, ``n``, ``errors``,
    ``with_warnings`` (runs that noted a fallback, such as a structured step's safe value),
    ``evaluator_errors`` (runs an evaluator failed on, whose metric is missing), the mean of
    every metric under its own key (``None`` when unavailable), ``counts`` (records per mean),
    ``cost_usd_total``, ``input_tokens_total``, ``output_tokens_total``, ``failures`` (records per
    failure mode, :mod:`arag_graph.evaluators.failures`), and the breakdowns ``by_type`` (per question
    type, as the data names it) and ``by_hops`` (per hop count, where the type names one, as MuSiQue's
    do), each ``{category: {n, errors, metric means, counts, failures, ...}}`` and empty when the data
    has no such category.
    """
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    graph_order: dict[str, int] = {}
    for record in records:
        graph = str(record.get("graph") or "?")
        key = str(record.get("setting_key") or "")
        graph_order.setdefault(graph, len(graph_order))
        group = groups.setdefault(
            (graph, key), {"setting": dict(record.get("setting") or {}), "records": {}, "models": {}}
        )
        qid = record.get("question_id")
        slot = qid if qid is not None else f"#{len(group['records'])}"
        group["records"][slot] = record
        group["models"][str(record.get("model") or "?")] = None

    seen_metrics: dict[str, None] = dict.fromkeys(METRICS)
    for group in groups.values():
        for record in group["records"].values():
            for name, value in _metrics_of(record).items():
                if name not in seen_metrics and (value is None or _number(value) is not None):
                    seen_metrics[name] = None
    names = list(seen_metrics)

    rows = []
    ordered = sorted(
        groups.items(), key=lambda item: (graph_order[item[0][0]], _setting_order(item[1]["setting"], orders))
    )
    for (graph, key), group in ordered:
        recs = list(group["records"].values())
        row: dict[str, Any] = {
            "graph": graph,
            "setting_key": key,
            "setting": group["setting"],
            "model": ", ".join(group["models"]),
            **_aggregate(recs, names),
            "by_type": _breakdown(recs, names, _question_type, str),
            "by_hops": _breakdown(recs, names, _hops, int),
        }
        rows.append(row)
    return rows


# --- files -------------------------------------------------------------------------------------------

_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (row key, header, format)
    ("contain_acc", "Contain-Acc (%)", "percent"),
    ("exact_match", "EM (%)", "percent"),
    ("f1", "F1 (%)", "percent"),
    ("llm_acc", "LLM-Acc (%)", "judge"),
    ("evidence_recall", "evidence recall (%)", "percent"),
    ("evidence_precision", "evidence precision (%)", "percent"),
    ("answer_similarity", "answer similarity", "cosine"),
    ("context_precision", "context precision", "judge_score"),
    ("context_precision_ragas", "context precision (RAGAS)", "judge_score"),
    ("answer_relevance", "answer relevance", "judge_score"),
    ("faithfulness", "faithfulness", "judge_score"),
    ("retrieved_tokens", "retrieved tokens", "tokens"),
    ("steps", "steps", "steps"),
)


def model_label(model: str) -> str:
    """How a model is named in titles: the offline policy is always marked as a no-LLM baseline."""
    return OFFLINE_LABEL if model.strip().lower() == "offline" else model


def _models(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for row in rows:
        for name in str(row.get("model") or "?").split(", "):
            names[model_label(name)] = None
    return list(names)


def _cell(row: Mapping[str, Any], key: str, kind: str) -> str:
    value = row.get(key)
    if kind in ("judge", "judge_score"):
        # Metrics a model computes: "unavailable" rather than "n/a", and partial coverage is shown.
        if value is None:
            return "unavailable"
        judged, n = (row.get("counts") or {}).get(key, row.get("n")), row.get("n")
        text, done = (f"{100 * value:.1f}", "judged") if kind == "judge" else (f"{value:.3f}", "scored")
        return text if judged == n else f"{text} ({judged}/{n} {done})"
    if value is None:
        return "n/a"
    if kind == "percent":
        return f"{100 * value:.1f}"
    if kind == "cosine":
        return f"{value:.3f}"
    if kind == "tokens":
        return f"{value:,.0f}"
    if kind == "steps":
        return f"{value:.1f}"
    if kind == "usd":
        return f"{value:.4f}"
    return str(value)


def _escape_md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str, str]], category: str | None = None
) -> list[str]:
    """Markdown lines of a table of ``rows``; with ``category``, one line per row and category.

    ``category`` names a breakdown (``by_type``, ``by_hops``) whose cells are the rows' sub-rows.
    """
    lead = ["graph", "setting", *([_CATEGORY_HEADERS[category]] if category else []), "n"]
    lines = [
        "| " + " | ".join([*lead, *(title for _, title, _ in columns)]) + " |",
        "|" + "|".join([*("---" for _ in lead[:-1]), "---:", *("---:" for _ in columns)]) + "|",
    ]
    for row in rows:
        parts = [(None, row)] if category is None else list((row.get(category) or {}).items())
        for name, part in parts:
            cells = [
                _escape_md(str(row.get("graph"))),
                _escape_md(str(row.get("setting_key") or "default")),
                *([_escape_md(str(name))] if category else []),
                str(part.get("n", 0)),
                *(str(part.get(key, 0)) if kind == "int" else _cell(part, key, kind) for key, _, kind in columns),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


_METRIC_NAMES = {"contain_acc": "Contain-Acc", "llm_acc": "LLM-Acc", "exact_match": "EM", "f1": "F1"}
_CATEGORY_HEADERS = {"by_type": "question type", "by_hops": "hops"}


def _failure_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    # Modes no row has beyond the usual ones (no gold ids, unscored) would be empty columns.
    usual = ("correct", "error", "cap_reached", "not_retrieved", "not_read", "read_wrong")
    shown = [m for m in FAILURE_MODES if m in usual or any((r.get("failures") or {}).get(m) for r in rows)]
    columns = [(f"failures.{mode}", FAILURE_MODES[mode], "int") for mode in shown]
    flat = [{**row, **{f"failures.{m}": (row.get("failures") or {}).get(m, 0) for m in shown}} for row in rows]
    return [
        "",
        "## Where answers are lost",
        "",
        "Each run in one failure mode, the first that applies: correct (LLM-Acc where judged, else "
        "Contain-Acc); error; cap reached (all steps used, made to answer); gold never retrieved (a gold "
        "chunk never surfaced); retrieved, never read (a gold chunk seen only as a snippet); read, answer "
        "wrong (every gold chunk read in full). Per question: `failures.md`, `failures.csv`.",
        "",
        *_table(flat, columns),
    ]


def _breakdown_lines(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str, str]]) -> list[str]:
    lines: list[str] = []
    titles = {"by_type": "By question type", "by_hops": "By number of hops"}
    for category, title in titles.items():
        # One category alone would repeat the main table.
        if len({name for row in rows for name in row.get(category) or {}}) < 2:
            continue
        lines += ["", f"## {title}", "", *_table(rows, columns, category)]
    return lines


def summary_markdown(rows: Sequence[Mapping[str, Any]], profile: str | None = None) -> str:
    """The ``summary.md`` text: a table of every row, breakdowns, failure modes and definitions.

    ``profile`` (``package`` or ``paper``, :mod:`arag_graph.core.profiles`) is named under the model."""
    models = _models(rows)
    with_cost = any(row.get("cost_usd_total") is not None for row in rows)
    columns = [*_COLUMNS, ("errors", "errors", "int")]
    if any(row.get("with_warnings") for row in rows):
        columns.append(("with_warnings", "runs with warnings", "int"))
    if any(row.get("evaluator_errors") for row in rows):
        columns.append(("evaluator_errors", "runs with evaluator errors", "int"))
    if with_cost:
        columns.append(("cost_usd_total", "cost (USD)", "usd"))
    lines = [
        "# Evaluation summary",
        "",
        f"Model: {', '.join(models) or 'n/a'}.",
    ]
    if profile:
        lines.append(f"Profile: {profile} (docs/guide/reproducing.md lists what the paper profile changes).")
    if OFFLINE_LABEL in models:
        lines.append(
            "The offline policy is a deterministic no-LLM baseline: its numbers measure retrieval and "
            "extraction rules, not a language model, and are not comparable with LLM results."
        )
    lines += ["", *_table(rows, columns), "", *_definition_lines(rows, with_cost)]
    if any(row.get("failures") for row in rows):
        lines += _failure_lines(rows)
    lines += _breakdown_lines(rows, columns)
    lines.append("")
    return "\n".join(lines)


def _definition_lines(rows: Sequence[Mapping[str, Any]], with_cost: bool) -> list[str]:
    """What each column of the summary table means (the optional columns only where they are shown)."""
    lines = [
        "- Contain-Acc: the normalised gold answer (any alias) is a substring of the normalised prediction "
        "(lowercase, no punctuation or articles, single spaces), as in the A-RAG paper. EM: equal after "
        "normalisation. F1: token F1 against the best alias.",
        "- LLM-Acc: an LLM judge's verdict (contains the key information of the gold answer, consistent, "
        'contradicts nothing). "unavailable" means no judge model was given (--judge): it is never estimated.',
        "- Text graded: "
        + "; ".join(f"{_METRIC_NAMES[key]} reads {text}" for key, text in GRADED_TEXT.items())
        + " (chunk-ID citations removed; a failed run is graded on its empty answer), as the A-RAG paper's "
        "evaluator grades its whole final message. Answer similarity reads the short answer.",
        "- Evidence recall: share of gold supporting chunks among the chunks the run retrieved or read. "
        "Evidence precision: share of the chunks read in full that are gold. n/a: no gold chunk ids, or "
        "nothing read.",
        "- Answer similarity: cosine of the embeddings of prediction and gold answer (ARAGOG).",
        "- Context precision: the ARAGOG paper's formula, the sum of precision@k over the ranks k that hold a "
        "relevant chunk divided by K, the number of chunks the run retrieved, in the order it retrieved them. "
        "Context precision (RAGAS): the same sum divided by the relevant chunks found (the mean of precision@k "
        "over their ranks). Relevant = a gold supporting chunk (from the data's gold chunk ids), or the judge's "
        "call when the question has none. Answer relevance: mean cosine between the question and 3 questions "
        "the judge writes back from the answer (the index's encoder). Faithfulness: share of the answer's "
        'claims the judge finds supported by the retrieved chunks. "unavailable": no judge (--judge) for a '
        "metric that needs one, or nothing to score (no retrieval, no claims).",
        "- Retrieved tokens: corpus tokens (o200k_base) returned to the model per question, mean. Steps: "
        "retrieval tool steps per question, mean. Errors: runs that failed (scored as wrong).",
    ]
    if any(row.get("with_warnings") for row in rows):
        lines.append(
            "- Runs with warnings: runs in which a step fell back to a safe default (a structured output "
            "the model did not give, a HyDE passage that failed): their predictions.jsonl records say which."
        )
    if any(row.get("evaluator_errors") for row in rows):
        lines.append(
            "- Runs with evaluator errors: runs for which an evaluator raised, so that metric is missing for "
            "them (not counted as zero); their predictions.jsonl records name the evaluator and the error."
        )
    if with_cost:
        lines.append(
            "- Cost: every model call of the runs (structured sub-steps and HyDE included), priced from the "
            "provider's usage metadata; the judge's calls are not included."
        )
    return lines


def write_summary(rows: Sequence[Mapping[str, Any]], out_dir: str | Path, profile: str | None = None) -> list[Path]:
    """Write ``summary.json`` (the rows as they are) and ``summary.md``; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "summary.json", out / "summary.md"
    replace_file(json_path, (dumps(list(rows), indent=2) + "\n").encode("utf-8"))
    replace_file(md_path, summary_markdown(rows, profile).encode("utf-8"))
    return [json_path, md_path]


def write_failures(records: Sequence[Mapping[str, Any]], out_dir: str | Path) -> list[Path]:
    """Write the per-question failure tables ``failures.csv`` (one line per run) and ``failures.md``
    (one row per question, one column per graph and setting); returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / "failures.csv", out / "failures.md"
    replace_file(csv_path, failures_csv(records).encode("utf-8"))
    replace_file(md_path, failures_markdown(records).encode("utf-8"))
    return [csv_path, md_path]
