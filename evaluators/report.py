"""Summaries, tables and plots from prediction records (one record per question per graph and setting).

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

import io
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    "swept_settings",
    "write_failures",
    "write_plots",
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
    lines += ["", *_table(rows, columns)]
    lines += [
        "",
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
    if any(row.get("failures") for row in rows):
        lines += _failure_lines(rows)
    lines += _breakdown_lines(rows, columns)
    lines.append("")
    return "\n".join(lines)


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


# --- plots -------------------------------------------------------------------------------------------


def _title(kind: str, rows: Sequence[Mapping[str, Any]]) -> str:
    sizes = {row.get("n") for row in rows}
    size = f", {sizes.pop()} questions" if len(sizes) == 1 else ""
    return f"{kind}\n{', '.join(_models(rows))}{size}"


# --- sweeps: a setting that takes several values in one evaluation -----------------------------------


def _rest(setting: Mapping[str, Any], name: str) -> str:
    """The setting apart from ``name``: runs that share it form one line of ``name``'s sweep."""
    return ",".join(f"{k}={v}" for k, v in sorted(setting.items()) if k != name)


def _in_order(values: Sequence[Any], order: Sequence[Any] | None) -> list[Any]:
    """``values`` in sweep order: ``order`` (as given on the command line), else numeric, else as found."""
    if order:
        return [v for v in order if v in values] + [v for v in values if v not in order]
    if all(_number(v) is not None for v in values):
        return sorted(values, key=lambda v: _number(v) or 0.0)
    return list(values)


def swept_settings(
    rows: Sequence[Mapping[str, Any]], orders: Mapping[str, Sequence[Any]] | None = None
) -> dict[str, list[Any]]:
    """Every setting that takes two or more values for one graph (all else equal), with its values.

    A step-cap sweep (``--max-steps 5,10``) is ``max_steps``; ``--set reasoning_effort=low,high`` is
    ``reasoning_effort``; CoRAG's ``n`` and ``beam`` the same way. ``orders`` gives each setting's
    values in the order the evaluation was asked for (minimal, low, medium, high), which is the
    order of the plot's axis; without it numbers sort and other values keep the rows' order.
    """
    values: dict[str, list[Any]] = {}
    lines: dict[tuple[str, str, str], list[Any]] = {}
    for row in rows:
        setting = row.get("setting") or {}
        for name, value in setting.items():
            found = values.setdefault(name, [])
            if value not in found:
                found.append(value)
            line = lines.setdefault((str(row.get("graph")), name, _rest(setting, name)), [])
            if value not in line:
                line.append(value)
    swept = {name for (_, name, _), line in lines.items() if len(line) > 1}
    # Settings in the order asked for, else the step cap first and the others by name.
    given = [name for name in orders or {} if name in swept]
    names = given + sorted(swept - set(given), key=lambda name: (name != "max_steps", name))
    return {name: _in_order(values[name], (orders or {}).get(name)) for name in names}


def sweep_plot_name(name: str) -> str:
    """``accuracy_vs_<setting>.png`` (``accuracy_vs_steps.png`` for the step cap, as it always was)."""
    return "accuracy_vs_steps.png" if name == "max_steps" else f"accuracy_vs_{name}.png"


def _value_text(name: str, value: Any) -> str:
    """A swept value as a tick or point label: ``cap 5``, ``high``, ``n=4``; ``default`` for the empty value."""
    if value in ("", None):
        return "default"
    if name == "max_steps" and _number(value) is not None:
        return f"cap {_number(value):g}"
    if _number(value) is not None and not isinstance(value, bool):
        return f"{name}={_number(value):g}"
    return str(value)


_SWEEP_AXES = {"max_steps": "step cap (max_steps)"}


def _model_tokens(row: Mapping[str, Any]) -> float | None:
    """Mean model tokens per question (input + output, every call of the run), None when unknown."""
    spent = [_number(row.get(key)) for key in ("input_tokens", "output_tokens")]
    return None if None in spent else sum(s or 0.0 for s in spent)


_COMPUTE: dict[str, tuple[str, Callable[[Mapping[str, Any]], float | None]]] = {
    "retrieved tokens": (
        "mean retrieved corpus tokens per question (o200k_base)",
        lambda row: _number(row.get("retrieved_tokens")),
    ),
    "model tokens": ("mean model tokens per question (input + output)", _model_tokens),
}
"""The compute a sweep's points are plotted against besides the setting itself."""


# --- figures -----------------------------------------------------------------------------------------

_DPI = 120


def _new_figure(panels: int = 1) -> Any:
    # The object-oriented API with the Agg canvas: no display, no pyplot global state, thread-safe.
    # The figure's dpi is the PNG's, so the spread of coinciding points is laid out in the pixels saved.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8 if panels == 1 else 6 * panels, 5.5), layout="constrained", dpi=_DPI)
    FigureCanvasAgg(figure)
    return figure


def _palette() -> list[Any]:
    from matplotlib import colormaps

    return list(colormaps["tab10"].colors)


# One marker shape per graph as well as one colour: where two graphs' points coincide, the spread
# below keeps them apart, and the shape tells them apart in grey-scale prints and for colour-blind readers.
_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "h", "<", ">")
_MARKER_SIZE = 8.0  # points


def _looks(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[Any, str]]:
    """(colour, marker) per graph, in order of first appearance, the same in every plot."""
    palette = _palette()
    graphs = list(dict.fromkeys(str(row.get("graph")) for row in rows))
    return {graph: (palette[i % len(palette)], _MARKERS[i % len(_MARKERS)]) for i, graph in enumerate(graphs)}


def _point_label(row: Mapping[str, Any]) -> str:
    """A short label for a point; the graph itself is in the legend."""
    setting = row.get("setting") or {}
    if not setting:
        return ""  # the graph's default setting: the legend says it all
    if set(setting) == {"max_steps"}:
        return _value_text("max_steps", setting["max_steps"])
    return str(row.get("setting_key") or "")


class _Series:
    """One plotted line of markers and the summary rows behind its points, for the labels."""

    def __init__(
        self,
        line: Any,
        rows: Sequence[Mapping[str, Any]],
        key: str,
        graph: str,
        setting: Callable[[Mapping[str, Any]], str] | None,
    ) -> None:
        self.line, self.rows, self.key, self.graph = line, list(rows), key, graph
        self.setting = setting  # None where the x axis already says it (the swept setting)

    def label(self, i: int, in_cluster: bool) -> str:
        """The point's setting and sample size; the graph's name too where points were spread."""
        row = self.rows[i]
        n = row.get("n")
        scored = (row.get("counts") or {}).get(self.key, n)
        # LLM-Acc points are labelled only when the judge left some items unscored.
        size = f"n={n}" if self.key != "llm_acc" else (f"n={scored} judged" if scored != n else "")
        setting = self.setting(row) if self.setting is not None and self.key != "llm_acc" else ""
        parts = [self.graph if in_cluster else "", setting, size]
        return " ".join(part for part in parts if part)


def _plot_series(
    axes: Any,
    xs: Sequence[float],
    rows: Sequence[Mapping[str, Any]],
    key: str,
    graph: str,
    look: tuple[Any, str],
    name: str,
    style: str = "-",
    setting: Callable[[Mapping[str, Any]], str] | None = _point_label,
) -> _Series:
    """Contain-Acc as filled markers on a solid line, LLM-Acc as hollow markers on a dashed one."""
    colour, marker = look
    judge = key == "llm_acc"
    ys = [100 * r[key] for r in rows]
    (line,) = axes.plot(xs, ys, color=colour, marker=marker, markersize=_MARKER_SIZE,
                        markerfacecolor="none" if judge else colour, markeredgewidth=1.5,
                        linestyle=("--" if judge else style) if len(xs) > 1 else "none", linewidth=1, alpha=0.9,
                        label=f"{name}: {'LLM-Acc' if judge else 'Contain-Acc'}", zorder=3)  # fmt: skip
    return _Series(line, rows, key, graph, setting)


def _spread_and_label(figure: Any, axes: Any, series: Sequence[_Series]) -> None:
    """Move coinciding markers apart sideways, then write each point's label (with its n).

    At ``--max-steps 3,6`` the offline ``arag`` and ``arag_naive`` can land on the same accuracy
    and step cap, and one marker hid the other. Markers closer than about one marker width on
    screen are laid side by side around their common centre; only x moves, by a few pixels, so the
    accuracy read off the plot stays exact. Needs the final layout, so the title and legend are
    set before this is called.
    """
    import numpy as np

    figure.draw_without_rendering()  # constrained layout fixes the axes' place on the canvas
    axes.set_xlim(axes.get_xlim())  # and the view stays where autoscaling put it
    axes.set_ylim(axes.get_ylim())
    to_screen = axes.transData
    width = 1.3 * _MARKER_SIZE * figure.dpi / 72
    clusters: list[list[tuple[int, int, float, float]]] = []
    for s, item in enumerate(series):
        data = np.column_stack([np.asarray(item.line.get_xdata(), float), np.asarray(item.line.get_ydata(), float)])
        for i, (x, y) in enumerate(to_screen.transform(data)):
            for cluster in clusters:
                if math.hypot(x - cluster[0][2], y - cluster[0][3]) < width:
                    cluster.append((s, i, x, y))
                    break
            else:
                clusters.append([(s, i, x, y)])
    place: dict[tuple[int, int], int] = {}
    for cluster in clusters:
        if len(cluster) < 2:
            continue
        centre = sum(x for _, _, x, _ in cluster) / len(cluster)
        for j, (s, i, _x, y) in enumerate(cluster):
            moved = to_screen.inverted().transform((centre + (j - (len(cluster) - 1) / 2) * width, y))[0]
            xs = list(series[s].line.get_xdata())
            xs[i] = moved
            series[s].line.set_xdata(xs)
            place[(s, i)] = j
    to_axes = axes.transAxes.inverted()
    for s, item in enumerate(series):
        for i, (x, y) in enumerate(zip(item.line.get_xdata(), item.line.get_ydata(), strict=True)):
            text = item.label(i, (s, i) in place)
            if not text:
                continue
            # Labels grow away from the nearer side of the axes, so none runs off the canvas.
            right = to_axes.transform(to_screen.transform((x, y)))[0] > 0.6
            # In a cluster, stacked above it one line per member; else alternately above and below,
            # so labels of neighbouring sweep points do not overlap.
            offset = (0, 8 + 10 * place[(s, i)]) if (s, i) in place else (-5 if right else 5, -13 if i % 2 else 7)
            note = axes.annotate(text, (x, y), textcoords="offset points", xytext=offset, fontsize=7,
                                 color=item.line.get_color(), ha="right" if right else "left")  # fmt: skip
            note.set_in_layout(False)  # labels must not move the axes the spread was computed for


def _token_axis(axes: Any, values: Sequence[float], label: str) -> None:
    """An x axis of token counts: logarithmic when they span more than a factor of 20."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 20:
        axes.set_xscale("log")  # A-RAG (Naive) reads about ten times the tokens of the others
        axes.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axes.xaxis.set_minor_formatter(NullFormatter())
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:,.0f}"))
    axes.margins(x=0.12)
    axes.set_xlabel(label)


def _accuracy_axis(axes: Any) -> None:
    axes.set_ylabel("accuracy (%)")
    axes.set_ylim(-2, 108)  # room for the labels of points at 100 %
    axes.grid(True, alpha=0.3)


def _metric_title(rows: Sequence[Mapping[str, Any]]) -> str:
    judged = any(r.get("llm_acc") is not None for r in rows)
    return "Contain-Acc and LLM-Acc" if judged else "Contain-Acc (LLM-Acc unavailable: no judge)"


def _tokens_figure(rows: Sequence[Mapping[str, Any]]) -> Any | None:
    points = [r for r in rows if r.get("retrieved_tokens") is not None and r.get("contain_acc") is not None]
    if not points:
        return None
    looks = _looks(rows)  # the same colour and marker per graph in every plot
    figure = _new_figure()
    axes = figure.add_subplot()
    series: list[_Series] = []
    for graph, look in looks.items():
        mine = [r for r in points if str(r.get("graph")) == graph]  # already in setting order
        judged = [r for r in mine if r.get("llm_acc") is not None]
        for key, chosen in (("contain_acc", mine), ("llm_acc", judged)):
            if chosen:
                # Settings of one graph (a step sweep) are joined, so the cost of more steps reads as a path.
                xs = [r["retrieved_tokens"] for r in chosen]
                series.append(_plot_series(axes, xs, chosen, key, graph, look, graph))
    _token_axis(axes, [r["retrieved_tokens"] for r in points], _COMPUTE["retrieved tokens"][0])
    _accuracy_axis(axes)
    figure.suptitle(_title(f"{_metric_title(points)} vs. retrieved tokens", points), fontsize=11)
    axes.legend(fontsize=8, loc="best")
    _spread_and_label(figure, axes, series)
    return figure


def _sweep_figure(rows: Sequence[Mapping[str, Any]], name: str, values: Sequence[Any]) -> Any | None:
    """Accuracy against one swept setting, and against the compute each of its values spent.

    One panel with the setting on x, then one per kind of compute the rows report (retrieved corpus
    tokens; model tokens where the model reports usage, which the offline policy does not): the
    same lines, one per graph and rest of its setting, so a sweep reads as a path through cost.
    """
    lines: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        setting = row.get("setting") or {}
        if name in setting and setting[name] in values:
            lines.setdefault((str(row.get("graph")), _rest(setting, name)), []).append(row)
    if not any(len({_value_text(name, (r.get("setting") or {})[name]) for r in group}) > 1 for group in lines.values()):
        return None
    numeric = all(_number(v) is not None and not isinstance(v, bool) for v in values)
    position = {_value_text(name, v): (float(_number(v) or 0.0) if numeric else float(i)) for i, v in enumerate(values)}

    def x_of(row: Mapping[str, Any]) -> float:
        return position[_value_text(name, (row.get("setting") or {})[name])]

    def value_of(row: Mapping[str, Any]) -> str:
        return _value_text(name, (row.get("setting") or {})[name])

    for key in lines:
        lines[key].sort(key=x_of)
    points = [r for group in lines.values() for r in group]
    compute = {kind: how for kind, how in _COMPUTE.items() if any(how[1](r) is not None for r in points)}
    looks = _looks(rows)
    styles = ["-", "-.", ":"]  # a graph swept under several other settings gets one style per line
    figure = _new_figure(1 + len(compute))
    panels = figure.subplots(1, 1 + len(compute), sharey=True, squeeze=False)[0]
    drawn: list[tuple[Any, list[_Series]]] = []
    for p, axes in enumerate(panels):
        kind = None if p == 0 else list(compute)[p - 1]
        per_graph: dict[str, int] = {}
        series: list[_Series] = []
        for (graph, rest), group in lines.items():
            label = f"{graph} ({rest})" if rest else graph
            style = styles[per_graph.setdefault(graph, 0) % len(styles)]
            per_graph[graph] += 1
            for key in ("contain_acc", "llm_acc"):
                x = x_of if kind is None else compute[kind][1]
                chosen = [r for r in group if r.get(key) is not None and x(r) is not None]
                if chosen:
                    xs = [float(x(r) or 0.0) for r in chosen]
                    setting = None if kind is None else value_of
                    series.append(_plot_series(axes, xs, chosen, key, graph, looks[graph], label, style, setting))
        if kind is None:
            ticks = sorted(set(position.values()))
            axes.set_xticks(ticks)
            # The axis names the setting, so ticks show its values alone: 5, 10 / minimal, high.
            shown = {pos: ("default" if v in ("", None) else f"{_number(v):g}" if numeric else str(v))
                     for v, pos in zip(values, position.values(), strict=True)}  # fmt: skip
            axes.set_xticklabels([shown[tick] for tick in ticks])
            axes.margins(x=0.08)
            axes.set_xlabel(_SWEEP_AXES.get(name, name))
            _accuracy_axis(axes)
        else:
            _token_axis(axes, [v for v in (compute[kind][1](r) for r in points) if v is not None], compute[kind][0])
            axes.grid(True, alpha=0.3)
        drawn.append((axes, series))
    what = _SWEEP_AXES.get(name, name)
    figure.suptitle(_title(f"{_metric_title(points)} vs. {what} (test-time scaling)", points), fontsize=11)
    panels[0].legend(fontsize=8, loc="best")
    for axes, series in drawn:
        _spread_and_label(figure, axes, series)
    return figure


def _save(figure: Any, path: Path) -> None:
    # The title also goes into the PNG's text metadata, so tools (and tests) can tell plots apart.
    title = " ".join(figure.get_suptitle().split())
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI, metadata={"Title": title})
    replace_file(path, buffer.getvalue())


def write_plots(
    rows: Sequence[Mapping[str, Any]], out_dir: str | Path, orders: Mapping[str, Sequence[Any]] | None = None
) -> list[Path]:
    """Write the PNG plots the rows support and return their paths.

    ``accuracy_vs_tokens.png`` always (when any row has accuracy and tokens): one point per graph and
    setting, Contain-Acc (filled markers) and LLM-Acc when judged (hollow markers), one marker shape
    per graph. Then one plot per swept setting (:func:`swept_settings`; ``orders`` gives each one's
    values in the order asked for): ``accuracy_vs_steps.png`` for a step-cap sweep,
    ``accuracy_vs_<setting>.png`` for the others (``reasoning_effort``, CoRAG's ``n``, ...), with the
    setting on x in a first panel and the retrieved tokens and model tokens spent in the next. Every
    point is labelled with its n; points that would cover each other are set side by side.
    ``accuracy_vs_*.png`` plots left by an earlier evaluation in ``out_dir`` that these rows do not
    support are removed, so the directory never shows a plot of other results.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures: list[tuple[str, Any]] = [("accuracy_vs_tokens.png", _tokens_figure(rows))]
    for name, values in swept_settings(rows, orders).items():
        figures.append((sweep_plot_name(name), _sweep_figure(rows, name, values)))
    written = []
    for file_name, figure in figures:
        if figure is not None:
            _save(figure, out / file_name)
            written.append(out / file_name)
    for stale in out.glob("accuracy_vs_*.png"):
        if stale not in written:
            stale.unlink(missing_ok=True)
    return written
