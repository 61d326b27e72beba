"""Summaries, tables and plots from prediction records (one record per question per graph and setting).

A record is what the runner writes to its JSON Lines files: ``graph``, ``setting`` (a dict such as
``{"max_steps": 5}``), ``setting_key``, ``model``, ``question_id``, ``prediction`` and ``metrics``.

Aggregation rules, chosen so that a table never claims more than the data shows:

* One row per (graph, setting_key); graphs in order of first appearance, settings sorted by their
  values (so a step sweep reads 5, 10, 15, 20).
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
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from arag_graph.jsonl import dumps, replace_file

__all__ = [
    "METRICS",
    "OFFLINE_LABEL",
    "model_label",
    "summarize",
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


def _setting_order(setting: Mapping[str, Any]) -> tuple[Any, ...]:
    # Numbers sort numerically and before strings, so mixed settings never compare int with str.
    return tuple(
        (name, (0, float(v), "") if _number(v) is not None else (1, 0.0, str(v))) for name, v in sorted(setting.items())
    )


def _metrics_of(record: Mapping[str, Any]) -> dict[str, Any]:
    metrics = dict(record.get("metrics") or {})
    prediction = record.get("prediction") or {}
    for key in _FROM_PREDICTION:
        if metrics.get(key) is None and prediction.get(key) is not None:
            metrics[key] = prediction[key]
    return metrics


def summarize(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One summary row per (graph, setting_key); see the module docstring for the rules.

    Each row has ``graph``, ``setting_key``, ``setting``, ``model``, ``n``, ``errors``,
    ``with_warnings`` (runs that noted a fallback, such as a structured step's safe value), the mean of
    every metric under its own key (``None`` when unavailable), ``counts`` (records per mean),
    ``cost_usd_total``, ``input_tokens_total`` and ``output_tokens_total``.
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

    rows = []
    ordered = sorted(groups.items(), key=lambda item: (graph_order[item[0][0]], _setting_order(item[1]["setting"])))
    for (graph, key), group in ordered:
        recs = list(group["records"].values())
        row: dict[str, Any] = {
            "graph": graph,
            "setting_key": key,
            "setting": group["setting"],
            "model": ", ".join(group["models"]),
            "n": len(recs),
            "errors": sum(1 for r in recs if (r.get("prediction") or {}).get("error")),
            "with_warnings": sum(1 for r in recs if (r.get("prediction") or {}).get("warnings")),
        }
        counts: dict[str, int] = {}
        values_of: dict[str, list[float]] = {}
        for name in seen_metrics:
            values = [v for v in (_number(_metrics_of(r).get(name)) for r in recs) if v is not None]
            values_of[name] = values
            counts[name] = len(values)
            row[name] = (sum(values) / len(values)) if values else None
        for name in _TOTALS:
            row[f"{name}_total"] = sum(values_of[name]) if values_of[name] else None
        seconds = [v for v in (_number(r.get("seconds")) for r in recs) if v is not None]
        row["seconds_mean"] = (sum(seconds) / len(seconds)) if seconds else None
        row["counts"] = counts
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
    if kind == "judge":
        if value is None:
            return "unavailable"
        judged, n = (row.get("counts") or {}).get(key, row.get("n")), row.get("n")
        text = f"{100 * value:.1f}"
        return text if judged == n else f"{text} ({judged}/{n} judged)"
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


def summary_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The ``summary.md`` text: a table of every row and the definitions a reader needs."""
    models = _models(rows)
    with_cost = any(row.get("cost_usd_total") is not None for row in rows)
    columns = [*_COLUMNS, ("errors", "errors", "int")]
    if any(row.get("with_warnings") for row in rows):
        columns.append(("with_warnings", "runs with warnings", "int"))
    if with_cost:
        columns.append(("cost_usd_total", "cost (USD)", "usd"))
    header = ["graph", "setting", "n", *(title for _, title, _ in columns)]
    lines = [
        "# Evaluation summary",
        "",
        f"Model: {', '.join(models) or 'n/a'}.",
    ]
    if OFFLINE_LABEL in models:
        lines.append(
            "The offline policy is a deterministic no-LLM baseline: its numbers measure retrieval and "
            "extraction rules, not a language model, and are not comparable with LLM results."
        )
    lines += [
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---", "---", "---:", *("---:" for _ in columns)]) + "|",
    ]
    for row in rows:
        cells = [
            _escape_md(str(row.get("graph"))),
            _escape_md(str(row.get("setting_key") or "default")),
            str(row.get("n", 0)),
            *(str(row.get(key, 0)) if kind == "int" else _cell(row, key, kind) for key, _, kind in columns),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "- Contain-Acc: the normalised gold answer (any alias) is a substring of the normalised prediction "
        "(lowercase, no punctuation or articles, single spaces), as in the A-RAG paper. EM: equal after "
        "normalisation. F1: token F1 against the best alias.",
        "- LLM-Acc: an LLM judge's verdict (contains the key information of the gold answer, consistent, "
        'contradicts nothing). "unavailable" means no judge model was given (--judge): it is never estimated.',
        "- Evidence recall: share of gold supporting chunks among the chunks the run retrieved or read. "
        "Evidence precision: share of the chunks read in full that are gold. n/a: no gold chunk ids, or "
        "nothing read.",
        "- Answer similarity: cosine of the embeddings of prediction and gold answer (ARAGOG).",
        "- Retrieved tokens: corpus tokens (o200k_base) returned to the model per question, mean. Steps: "
        "retrieval tool steps per question, mean. Errors: runs that failed (scored as wrong).",
    ]
    if any(row.get("with_warnings") for row in rows):
        lines.append(
            "- Runs with warnings: runs in which a step fell back to a safe default (a structured output "
            "the model did not give, a HyDE passage that failed): their predictions.jsonl records say which."
        )
    if with_cost:
        lines.append(
            "- Cost: every model call of the runs (structured sub-steps and HyDE included), priced from the "
            "provider's usage metadata; the judge's calls are not included."
        )
    lines.append("")
    return "\n".join(lines)


def write_summary(rows: Sequence[Mapping[str, Any]], out_dir: str | Path) -> list[Path]:
    """Write ``summary.json`` (the rows as they are) and ``summary.md``; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "summary.json", out / "summary.md"
    replace_file(json_path, (dumps(list(rows), indent=2) + "\n").encode("utf-8"))
    replace_file(md_path, summary_markdown(rows).encode("utf-8"))
    return [json_path, md_path]


# --- plots -------------------------------------------------------------------------------------------


def _title(kind: str, rows: Sequence[Mapping[str, Any]]) -> str:
    sizes = {row.get("n") for row in rows}
    size = f", {sizes.pop()} questions" if len(sizes) == 1 else ""
    return f"{kind}\n{', '.join(_models(rows))}{size}"


def _step_cap(row: Mapping[str, Any]) -> float | None:
    return _number((row.get("setting") or {}).get("max_steps"))


def _sweeps(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """Rows with a step cap, grouped into lines by graph and the rest of their setting."""
    lines: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        cap = _step_cap(row)
        if cap is None:
            continue
        rest = ",".join(f"{k}={v}" for k, v in sorted((row.get("setting") or {}).items()) if k != "max_steps")
        lines.setdefault((str(row.get("graph")), rest), []).append(row)
    return {key: sorted(group, key=lambda r: _step_cap(r) or 0.0) for key, group in lines.items()}


def _new_figure() -> Any:
    # The object-oriented API with the Agg canvas: no display, no pyplot global state, thread-safe.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5.5), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _palette() -> list[Any]:
    from matplotlib import colormaps

    return list(colormaps["tab10"].colors)


def _colours(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    palette = _palette()
    graphs = list(dict.fromkeys(str(row.get("graph")) for row in rows))
    return {graph: palette[i % len(palette)] for i, graph in enumerate(graphs)}


def _point_label(row: Mapping[str, Any]) -> str:
    """A short label for a point; the graph itself is in the legend."""
    setting = row.get("setting") or {}
    if not setting:
        return ""  # the graph's default setting: the legend says it all
    if set(setting) == {"max_steps"} and _step_cap(row) is not None:
        return f"cap {_step_cap(row):g}"
    return str(row.get("setting_key") or "")


def _plot_tokens(rows: Sequence[Mapping[str, Any]], path: Path) -> bool:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    points = [r for r in rows if r.get("retrieved_tokens") is not None and r.get("contain_acc") is not None]
    if not points:
        return False
    colours = _colours(rows)  # the same colour per graph in every plot
    figure = _new_figure()
    axes = figure.add_subplot()
    with_judge = any(r.get("llm_acc") is not None for r in points)
    for graph, colour in colours.items():
        mine = [r for r in points if str(r.get("graph")) == graph]  # already in setting order
        if not mine:
            continue
        series = [("Contain-Acc", "o", "-", mine, "contain_acc")]
        judged = [r for r in mine if r.get("llm_acc") is not None]
        if judged:
            series.append(("LLM-Acc", "^", "--", judged, "llm_acc"))
        for metric, marker, style, chosen, key in series:
            xs = [r["retrieved_tokens"] for r in chosen]
            ys = [100 * r[key] for r in chosen]
            # Settings of one graph (a step sweep) are joined, so the cost of more steps reads as a path.
            axes.plot(xs, ys, color=colour, marker=marker, markersize=8, linestyle=style if len(xs) > 1 else "none",
                      linewidth=1, alpha=0.9, label=f"{graph}: {metric}", zorder=3)  # fmt: skip
        for i, r in enumerate(mine):
            label = _point_label(r)
            if label:
                # Alternate above and below so labels of neighbouring sweep points do not overlap.
                axes.annotate(label, (r["retrieved_tokens"], 100 * r["contain_acc"]), textcoords="offset points",
                              xytext=(5, 7 if i % 2 == 0 else -13), fontsize=8, color=colour)  # fmt: skip
    tokens = [r["retrieved_tokens"] for r in points if r["retrieved_tokens"] > 0]
    if tokens and max(tokens) / min(tokens) > 20:
        axes.set_xscale("log")  # A-RAG (Naive) reads about ten times the tokens of the others
        axes.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axes.xaxis.set_minor_formatter(NullFormatter())
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:,.0f}"))
    axes.margins(x=0.12)
    axes.set_xlabel("mean retrieved corpus tokens per question (o200k_base)")
    axes.set_ylabel("accuracy (%)")
    axes.set_ylim(-2, 102)
    axes.grid(True, alpha=0.3)
    metric = "Contain-Acc and LLM-Acc" if with_judge else "Contain-Acc (LLM-Acc unavailable: no judge)"
    _save(figure, axes, _title(f"{metric} vs. retrieved tokens", points), path)
    return True


def _plot_steps(rows: Sequence[Mapping[str, Any]], path: Path) -> bool:
    lines = _sweeps(rows)
    if not any(len({_step_cap(r) for r in group}) > 1 for group in lines.values()):
        return False
    colours = _colours(rows)
    styles = ["-", "-.", ":"]  # a graph swept under several other settings gets one style per line
    figure = _new_figure()
    axes = figure.add_subplot()
    caps: set[float] = set()
    with_judge = False
    per_graph: dict[str, int] = {}
    for (graph, rest), group in lines.items():
        name = f"{graph} ({rest})" if rest else graph
        colour = colours[graph]
        style = styles[per_graph.setdefault(graph, 0) % len(styles)]
        per_graph[graph] += 1
        xs = [_step_cap(r) for r in group]
        caps.update(x for x in xs if x is not None)
        acc = [(x, 100 * r["contain_acc"]) for x, r in zip(xs, group, strict=True) if r.get("contain_acc") is not None]
        if acc:
            axes.plot(*zip(*acc, strict=True), color=colour, marker="o", linestyle=style, label=f"{name}: Contain-Acc")
        judged = [(x, 100 * r["llm_acc"]) for x, r in zip(xs, group, strict=True) if r.get("llm_acc") is not None]
        if judged:
            with_judge = True
            axes.plot(*zip(*judged, strict=True), color=colour, marker="^", linestyle="--", label=f"{name}: LLM-Acc")
    axes.set_xticks(sorted(caps))
    axes.set_xticklabels([f"{c:g}" for c in sorted(caps)])
    axes.margins(x=0.08)
    axes.set_xlabel("step cap (max_steps)")
    axes.set_ylabel("accuracy (%)")
    axes.set_ylim(-2, 102)
    axes.grid(True, alpha=0.3)
    metric = "Contain-Acc and LLM-Acc" if with_judge else "Contain-Acc (LLM-Acc unavailable: no judge)"
    _save(figure, axes, _title(f"{metric} vs. step cap (test-time scaling)", rows), path)
    return True


def _save(figure: Any, axes: Any, title: str, path: Path) -> None:
    axes.set_title(title, fontsize=11)
    axes.legend(fontsize=8, loc="best")
    # The title also goes into the PNG's text metadata, so tools (and tests) can tell plots apart.
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120, metadata={"Title": " ".join(title.split())})
    replace_file(path, buffer.getvalue())


def write_plots(rows: Sequence[Mapping[str, Any]], out_dir: str | Path) -> list[Path]:
    """Write the PNG plots the rows support and return their paths.

    ``accuracy_vs_tokens.png`` always (when any row has accuracy and tokens): one point per graph and
    setting, Contain-Acc (circles) and LLM-Acc when judged (triangles). ``accuracy_vs_steps.png`` only
    for a step sweep (some graph has two or more ``max_steps`` settings): one line per graph.
    A plot of that name left by an earlier evaluation in ``out_dir`` is removed when these rows do
    not support it, so the directory never shows a plot of other results.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, plot in (("accuracy_vs_tokens.png", _plot_tokens), ("accuracy_vs_steps.png", _plot_steps)):
        path = out / name
        if plot(rows, path):
            written.append(path)
        else:
            path.unlink(missing_ok=True)
    return written
