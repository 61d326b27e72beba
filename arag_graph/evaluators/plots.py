"""Plots of an evaluation's summary rows (:func:`arag_graph.evaluators.report.summarize`): accuracy
against retrieved tokens, and against each swept setting and the compute its values spent."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from arag_graph.core.jsonl import replace_file
from arag_graph.evaluators.report import _models, _number

__all__ = ["sweep_plot_name", "swept_settings", "write_plots"]


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


def _sweep_lines(
    rows: Sequence[Mapping[str, Any]], name: str, values: Sequence[Any]
) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """The rows of ``name``'s sweep, one line per graph and rest of its setting."""
    lines: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        setting = row.get("setting") or {}
        if name in setting and setting[name] in values:
            lines.setdefault((str(row.get("graph")), _rest(setting, name)), []).append(row)
    return lines


def _setting_axis(axes: Any, name: str, values: Sequence[Any], positions: Sequence[float], numeric: bool) -> None:
    """The first panel's x axis: the swept setting, one tick per value (``positions`` in ``values``' order)."""
    ticks = sorted(set(positions))
    axes.set_xticks(ticks)
    # The axis names the setting, so ticks show its values alone: 5, 10 / minimal, high.
    shown = {pos: ("default" if v in ("", None) else f"{_number(v):g}" if numeric else str(v))
             for v, pos in zip(values, positions, strict=True)}  # fmt: skip
    axes.set_xticklabels([shown[tick] for tick in ticks])
    axes.margins(x=0.08)
    axes.set_xlabel(_SWEEP_AXES.get(name, name))
    _accuracy_axis(axes)


def _sweep_figure(rows: Sequence[Mapping[str, Any]], name: str, values: Sequence[Any]) -> Any | None:
    """Accuracy against one swept setting, and against the compute each of its values spent.

    One panel with the setting on x, then one per kind of compute the rows report (retrieved corpus
    tokens; model tokens where the model reports usage, which the offline policy does not): the
    same lines, one per graph and rest of its setting, so a sweep reads as a path through cost.
    """
    lines = _sweep_lines(rows, name, values)
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
            _setting_axis(axes, name, values, list(position.values()), numeric)
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
