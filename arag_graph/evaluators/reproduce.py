"""``arag reproduce TABLE``: one command per paper table, in the paper's layout, its numbers beside ours.

A table is an evaluation plan (graphs, a sweep, explicit rows or a grid) run through the usual
runner (:func:`arag_graph.evaluators.runner.run_evaluation`: resumable, the same ``--out`` rules,
``summary.md`` and the report) with the ``paper`` profile (:mod:`arag_graph.core.profiles`), then
one more file pair, ``TABLE.md`` and ``TABLE.json``: a row per setting of the plan, labelled as the
paper labels it, with our metrics and the paper's reported numbers
(:mod:`arag_graph.evaluators.paper_tables`) for the dataset run.

The rows are the plan's settings (:func:`arag_graph.evaluators.plan.settings_for`), not a list kept
here: a row added to a grid or a sweep appears in its table. Cells:

* ours: a metric that needs a model judge (LLM-Acc, Answer Relevance, Faithfulness) without one
  (``--model offline``, or no ``--judge`` and no key) is "unavailable", never estimated; another
  metric the data cannot give is "n/a";
* the paper's: "—" where the paper (or our notes on it) reports no number for that row and dataset.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arag_graph.core.errors import AragError
from arag_graph.evaluators import paper_tables as P
from arag_graph.evaluators.plan import EvalPlan, Setting, plan_settings, settings_for, with_profile

log = logging.getLogger(__name__)

__all__ = ["TABLES", "PaperColumn", "ReproTable", "reproduce", "reproduce_table", "table_markdown"]

MODEL_JUDGED = frozenset({"llm_acc", "answer_relevance", "faithfulness"})
"""Metrics that need a judge model: "unavailable" without one."""
NOT_REPORTED = "—"


@dataclass(frozen=True)
class Column:
    """One of our metric columns: the summary row's key, its header, how it is shown."""

    key: str
    header: str
    kind: str = "percent"
    """``percent`` (a fraction shown x100), ``fraction``, ``tokens``, ``number``."""


@dataclass(frozen=True)
class PaperColumn:
    """One column of the paper's numbers: its header and the value for a row label (None: not reported)."""

    header: str
    value: Callable[[str], Any]
    kind: str = "percent"
    """``percent`` (already in %), ``fraction``, ``tokens``, ``text``."""


@dataclass(frozen=True)
class ReproTable:
    """A paper table: the evaluation plan that fills it, how its rows are labelled, its columns."""

    name: str
    title: str
    ours: tuple[Column, ...]
    paper: Callable[[str | None], tuple[PaperColumn, ...]]
    """The paper's columns for a dataset (``musique``, ``hotpotqa``, ``2wiki``; None: unknown)."""
    label: Callable[[Setting], str]
    graphs: tuple[str, ...] = ()
    max_steps: tuple[int, ...] = ()
    sweeps: Mapping[str, str] = field(default_factory=dict)
    rows: tuple[tuple[str, dict[str, Any]], ...] = ()
    grid: str | None = None
    by_hops: bool = False
    """One row per (setting, hop count) from the summary's ``by_hops`` breakdown."""
    paper_hops: tuple[int, ...] = ()
    """Hop counts the paper reports: their rows are printed even where our data has none ("n/a")."""
    variants: tuple[tuple[str, dict[str, Any]], ...] = ()
    """Index variants the rows run on (``EvalPlan.variants``): ARAGOG's chunk sizes, embedding models."""
    compares_embeddings: bool = False
    """Rows: the evaluation's encoder (``--embedding``, else the packaged one) and, when ``--embedding``
    names another, the packaged encoder beside it."""

    def plan(self, **values: Any) -> EvalPlan:
        """The evaluation of this table with the paper profile (``values``: dataset, model, out, ...)."""
        rows: tuple[Any, ...] = self.rows
        if self.compares_embeddings:
            rows = ((COMPARED, {}),) + (((COMPARED, {}, PACKAGED),) if values.get("embedding") else ())
        return EvalPlan(
            graphs=list(self.graphs),
            max_steps=list(self.max_steps) or None,
            extra_context=dict(self.sweeps),
            rows=rows,
            grid=self.grid,
            variants=self.variants,
            profile="paper",
            **values,
        )


COMPARED = "naive_rag"
"""The graph ARAGOG's comparisons run (its naive RAG, one retrieval then an answer)."""
PACKAGED = "embedding-packaged"
"""The index variant with the packaged encoder, beside the one ``--embedding`` names."""
CHUNK_SIZES = (256, 512, 1024)
"""The chunk sizes the chunk-size table compares (ARAGOG found 512 best; the others are our choice
around it, as the notes do not say which sizes the paper tried)."""


# ---------------------------------------------------------------------------------------------
# Labels: the paper's names of our settings

GRAPH_LABELS = {
    "direct": "Direct answer",
    "naive_rag": "Naive RAG",
    "arag_naive": "A-RAG (Naive)",
    "arag": "A-RAG (Full)",
    "corag": "CoRAG",
    "srag": "SRAG",
}
TOOL_LABELS = {
    "full": "A-RAG (Full)",
    "no_keyword_search": "w/o keyword_search",
    "no_semantic_search": "w/o semantic_search",
    "no_chunk_read": "w/o chunk_read",
}
SRAG_LABELS = {
    "decompose": "w/o decomposition",
    "structured_extraction": "w/o structured extraction",
    "table_aggregation": "w/o table aggregation",
}


def _graph_label(setting: Setting) -> str:
    return GRAPH_LABELS.get(setting.graph, setting.graph)


def _tools_label(setting: Setting) -> str:
    return TOOL_LABELS.get(str(setting.values.get("tools", "full")), str(setting.values.get("tools")))


def _steps_label(setting: Setting) -> str:
    return f"step cap {setting.values.get('max_steps')}"


def _effort_label(setting: Setting) -> str:
    return f"reasoning effort {setting.values.get('reasoning_effort') or 'default'}"


def _chain_label(setting: Setting) -> str:
    if setting.graph == "corag":
        return f"CoRAG S={setting.values.get('max_steps')}"
    return _graph_label(setting)


def _decoding_label(setting: Setting) -> str:
    names = {"greedy": "greedy", "best_of_n": "best-of-N", "tree": "tree search"}
    return f"CoRAG, {names.get(str(setting.values.get('decoding')), setting.values.get('decoding'))}"


def _chunk_size_label(setting: Setting) -> str:
    return f"chunks of {setting.index.removeprefix('chunks-')} tokens"


def _srag_label(setting: Setting) -> str:
    if setting.graph == "naive_rag":
        return "standard RAG"
    off = [SRAG_LABELS[k] for k in SRAG_LABELS if setting.values.get(k) is False]
    return ", ".join(off) or "SRAG"


# ---------------------------------------------------------------------------------------------
# The paper's columns


def _name(dataset: str | None) -> str:
    return P.DATASETS.get(dataset or "", "dataset unknown")


def _lookup(table: Mapping[str, Mapping[str, Any]], dataset: str | None) -> Callable[[str], Any]:
    return lambda label: (table.get(label) or {}).get(dataset or "")


def _none(_label: str) -> None:
    return None


def _arag_main(dataset: str | None) -> tuple[PaperColumn, ...]:
    acc = [
        PaperColumn(f"paper LLM-Acc (%), {shown}, {_name(dataset)}", _lookup(P.ARAG_LLM_ACC[model], dataset))
        for model, shown in (("gpt-4o-mini", "GPT-4o-mini"), ("gpt-5-mini", "GPT-5-mini"))
    ]
    return (*acc, PaperColumn(f"paper Contain-Acc (%), {_name(dataset)}", _none))


def _arag_ablations(dataset: str | None) -> tuple[PaperColumn, ...]:
    return (PaperColumn(f"paper LLM-Acc (%), {_name(dataset)}", _none),)


def _arag_tokens(dataset: str | None) -> tuple[PaperColumn, ...]:
    header = f"paper retrieved tokens, GPT-5-mini, {_name(dataset)}"
    return (PaperColumn(header, _lookup(P.ARAG_TOKENS, dataset), "tokens"),)


def _scaling(key: str, last: str) -> Callable[[str | None], tuple[PaperColumn, ...]]:
    """The paper's gain over the sweep, shown on the sweep's last row (the paper gives curves, not cells)."""

    def gain(label: str) -> str | None:
        return P.ARAG_SCALING[key] if label == last else None

    def columns(_dataset: str | None) -> tuple[PaperColumn, ...]:
        return (PaperColumn("paper gain (LLM-Acc points, MuSiQue)", gain, "text"),)

    return columns


def _aragog_score(position: int) -> Callable[[str], float | None]:
    def value(label: str) -> float | None:
        scores = P.ARAGOG_SCORES.get(label)
        return None if scores is None else scores[position]

    return value


def _aragog(_dataset: str | None) -> tuple[PaperColumn, ...]:
    names = ("Context Precision", "Answer Similarity", "Answer Relevance")
    return tuple(PaperColumn(f"paper {name}", _aragog_score(i), "fraction") for i, name in enumerate(names))


def _aragog_chunk_size(_dataset: str | None) -> tuple[PaperColumn, ...]:
    def finding(label: str) -> str | None:
        size = label.removeprefix("chunks of ").removesuffix(" tokens")
        return P.ARAGOG_CHUNK_SIZE.get(int(size)) if size.isdigit() else None

    return (PaperColumn("paper's finding", finding, "text"),)


def _aragog_embeddings(_dataset: str | None) -> tuple[PaperColumn, ...]:
    return (PaperColumn("paper's finding", lambda _label: P.ARAGOG_EMBEDDINGS, "text"),)


def _corag_em(dataset: str | None) -> tuple[PaperColumn, ...]:
    return (PaperColumn(f"paper EM (%), {_name(dataset)}", _lookup(P.CORAG_EM, dataset)),)


def _corag_decoding(dataset: str | None) -> tuple[PaperColumn, ...]:
    return (PaperColumn(f"paper EM (%), {_name(dataset)}", _none),)


def _srag(dataset: str | None) -> tuple[PaperColumn, ...]:
    return (
        PaperColumn(f"paper F1, {_name(dataset)}", _lookup({**P.SRAG_F1, **P.SRAG_ABLATION_F1}, dataset), "fraction"),
    )


def _srag_hops(dataset: str | None) -> tuple[PaperColumn, ...]:
    """SRAG's F1 by hop count (MuSiQue), and its overall F1 on the "all" rows."""
    overall = _lookup(P.SRAG_F1, dataset)
    by_hops = _lookup(P.SRAG_HOPS_F1, dataset)

    def value(label: str) -> float | None:
        base, _, part = label.rpartition(", ")
        return overall(base) if part == "all" else by_hops(label)

    return (PaperColumn(f"paper F1, {_name(dataset)}", value, "fraction"),)


_ACC = (Column("llm_acc", "LLM-Acc (%)"), Column("contain_acc", "Contain-Acc (%)"))
_ARAGOG_OURS = (
    Column("context_precision", "Context Precision", "fraction"),
    Column("context_precision_ragas", "Context Precision (RAGAS)", "fraction"),
    Column("answer_similarity", "Answer Similarity", "fraction"),
    Column("answer_relevance", "Answer Relevance", "fraction"),
    Column("retrieved_tokens", "retrieved tokens", "tokens"),
)
_TOKENS = Column("retrieved_tokens", "retrieved tokens", "tokens")
_STEPS = Column("steps", "steps", "number")
_EM = (Column("exact_match", "EM (%)"), Column("f1", "F1", "fraction"), Column("llm_acc", "LLM-Acc (%)"))
_F1 = (Column("f1", "F1", "fraction"), Column("exact_match", "EM (%)"), Column("llm_acc", "LLM-Acc (%)"))

TABLES: dict[str, ReproTable] = {
    t.name: t
    for t in (
        ReproTable(
            "arag-main",
            "A-RAG: main results",
            _ACC,
            _arag_main,
            _graph_label,
            graphs=("direct", "naive_rag", "arag_naive", "arag"),
        ),
        ReproTable(
            "arag-ablations",
            "A-RAG: ablations",
            (*_ACC, _TOKENS),
            _arag_ablations,
            _tools_label,
            graphs=("arag",),
            sweeps={"tools": "full,no_keyword_search,no_semantic_search,no_chunk_read"},
        ),
        ReproTable(
            "arag-tokens",
            "A-RAG: retrieved tokens per question",
            (_TOKENS, *_ACC),
            _arag_tokens,
            _graph_label,
            graphs=("naive_rag", "arag_naive", "arag"),
        ),
        ReproTable(
            "arag-scaling",
            "A-RAG: test-time scaling by step cap",
            (*_ACC, _TOKENS, _STEPS),
            _scaling("steps", "step cap 20"),
            _steps_label,
            graphs=("arag",),
            max_steps=(5, 10, 15, 20),
        ),
        ReproTable(
            "arag-effort",
            "A-RAG: test-time scaling by reasoning effort",
            (*_ACC, _TOKENS, _STEPS),
            _scaling("effort", "reasoning effort high"),
            _effort_label,
            graphs=("arag",),
            sweeps={"reasoning_effort": "minimal,low,medium,high"},
        ),
        ReproTable(
            "aragog-grid",
            "ARAGOG: retrieval techniques",
            (
                Column("context_precision", "Context Precision", "fraction"),
                Column("context_precision_ragas", "Context Precision (RAGAS)", "fraction"),
                Column("answer_similarity", "Answer Similarity", "fraction"),
                Column("answer_relevance", "Answer Relevance", "fraction"),
            ),
            _aragog,
            _graph_label,  # replaced by the grid's own labels (see _labels)
            grid="aragog",
        ),
        ReproTable(
            "aragog-chunk-size",
            "ARAGOG: chunk size",
            _ARAGOG_OURS,
            _aragog_chunk_size,
            _chunk_size_label,
            rows=tuple((COMPARED, {}, f"chunks-{size}") for size in CHUNK_SIZES),
            variants=tuple((f"chunks-{size}", {"chunk_size": size}) for size in CHUNK_SIZES),
        ),
        ReproTable(
            "aragog-embeddings",
            "ARAGOG: embedding models",
            _ARAGOG_OURS,
            _aragog_embeddings,
            _graph_label,  # replaced by the encoders' names (see _labels)
            variants=((PACKAGED, {"embedding": ""}),),
            compares_embeddings=True,
        ),
        ReproTable(
            "corag-decoding",
            "CoRAG: decoding strategies",
            _EM,
            _corag_decoding,
            _decoding_label,
            graphs=("corag",),
            sweeps={"decoding": "greedy,best_of_n,tree"},
        ),
        ReproTable(
            "corag-chain-length",
            "CoRAG: test-time scaling by chain length",
            _EM,
            _corag_em,
            _chain_label,
            graphs=("naive_rag", "corag"),
            max_steps=(1, 2, 3, 5),
        ),
        ReproTable(
            "srag-ablations",
            "SRAG: main results and ablations",
            _F1,
            _srag,
            _srag_label,
            graphs=("naive_rag", "srag"),
            rows=tuple(("srag", {key: False}) for key in SRAG_LABELS),
        ),
        ReproTable(
            "srag-hops",
            "SRAG: results by number of hops",
            _F1,
            _srag_hops,
            _srag_label,
            graphs=("naive_rag", "srag"),
            by_hops=True,
            paper_hops=(2, 3, 4),
        ),
    )
}
"""Every table ``arag reproduce`` writes, by name."""


def reproduce_table(name: str) -> ReproTable:
    """The table called ``name``; one line naming the tables otherwise."""
    table = TABLES.get(str(name).strip().lower())
    if table is None:
        raise AragError(f"{str(name)[:40]!r} is not a table arag reproduces; choose one of {', '.join(TABLES)}")
    return table


# ---------------------------------------------------------------------------------------------
# Building and writing the table


def _labels(table: ReproTable, plan: EvalPlan) -> dict[str, str]:
    """Each setting's row label by its file name (grid rows keep the grid's own labels)."""
    labels = {s.file_name: table.label(s) for s in settings_for(plan)}
    if table.compares_embeddings:
        packaged = "all-MiniLM-L6-v2 (packaged)"
        for s in settings_for(plan):
            labels[s.file_name] = packaged if s.index == PACKAGED or not plan.embedding else str(plan.embedding)
    if plan.grid:
        from arag_graph.evaluators.grid import GRAPH, grid_rows
        from arag_graph.registry import get_graph_spec

        fixed = plan_settings(plan)[0]
        fields = get_graph_spec(GRAPH).config.model_fields
        base = {k: v for k, v in fixed.items() if k in fields}
        for row in grid_rows(plan.grid):
            labels[Setting(GRAPH, {**base, **row.values}, row.index).file_name] = row.label
    return labels


def _ours(row: Mapping[str, Any], columns: Sequence[Column]) -> dict[str, Any]:
    return {c.key: row.get(c.key) for c in columns}


def build_table(
    table: ReproTable, plan: EvalPlan, rows: Sequence[Mapping[str, Any]], dataset: str | None
) -> list[dict[str, Any]]:
    """The table's entries: per setting of the plan (per hop count too, for a by-hops table), its label,
    graph, setting key, n, errors, our metrics and the paper's numbers by column header."""
    by_key = {(str(r.get("graph")), str(r.get("setting_key"))): r for r in rows}
    labels = _labels(table, plan)
    paper_columns = table.paper(dataset)
    entries: list[dict[str, Any]] = []
    for setting in settings_for(plan):
        found = by_key.get((setting.graph, setting.key)) or {}
        label = labels[setting.file_name]
        parts: list[tuple[str, Mapping[str, Any]]] = [(label, found)]
        if table.by_hops:
            hops = {str(h): part for h, part in (found.get("by_hops") or {}).items()}
            counts = sorted({*hops, *(str(h) for h in table.paper_hops)}, key=lambda h: (len(h), h))
            parts = [(f"{label}, all", found)] + [(f"{label}, {h} hops", hops.get(h) or {}) for h in counts]
        for shown, metrics in parts:
            entries.append(
                {
                    "label": shown,
                    "graph": setting.graph,
                    "setting_key": setting.key,
                    "n": metrics.get("n", 0),
                    "errors": metrics.get("errors", 0),
                    "ours": _ours(metrics, table.ours),
                    "paper": {c.header: c.value(shown) for c in paper_columns},
                    "paper_setting": P.SETTINGS[table.name],
                }
            )
    return entries


def _our_cell(value: Any, column: Column) -> str:
    if value is None:
        return "unavailable" if column.key in MODEL_JUDGED else "n/a"
    if column.kind == "percent":
        return f"{100 * value:.1f}"
    if column.kind == "tokens":
        return f"{value:,.0f}"
    if column.kind == "number":
        return f"{value:.2f}"
    return f"{value:.3f}"


def _paper_cell(value: Any, column: PaperColumn) -> str:
    if value is None:
        return NOT_REPORTED
    if column.kind == "tokens":
        return f"{value:,.0f}"
    if column.kind == "fraction":
        return f"{value:.3f}"
    if column.kind == "percent":
        return f"{value:.1f}"
    return str(value)


def table_markdown(
    table: ReproTable, entries: Sequence[Mapping[str, Any]], *, model: str, dataset: str | None, command: str
) -> str:
    """``TABLE.md``: the command, what ran, the table (ours, then the paper's columns) and the cell conventions."""
    from arag_graph.evaluators.report import OFFLINE_LABEL, model_label

    paper_columns = table.paper(dataset)
    head = ["row", "n", *(c.header for c in table.ours), *(c.header for c in paper_columns), "errors"]
    label = model_label(model)
    lines = [
        f"# {table.title} (`arag reproduce {table.name}`)",
        "",
        f"Command: `{command}`",
        "",
        f"Model: {label}; profile: paper (docs/guide/reproducing.md); dataset: {_name(dataset)}.",
        f"Paper's numbers: {P.CITATIONS[table.name]}.",
        f"Paper's setting (model, data, k): {P.SETTINGS[table.name]}.",
    ]
    if label == OFFLINE_LABEL:
        lines.append(
            "The offline policy is a deterministic no-LLM baseline: its numbers measure retrieval and extraction "
            "rules, not a language model; model-judged cells are unavailable."
        )
    if table.compares_embeddings and len(entries) < 2:
        lines.append(
            "One encoder only: give --embedding SPEC (a local sentence-transformers folder, such as the A-RAG "
            "paper's Qwen3-Embedding-0.6B, or openai:NAME) to compare it with the packaged one."
        )
    lines += ["", "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for entry in entries:
        cells = [entry["label"], str(entry["n"])]
        cells += [_our_cell(entry["ours"].get(c.key), c) for c in table.ours]
        cells += [_paper_cell(entry["paper"].get(c.header), c) for c in paper_columns]
        cells.append(str(entry["errors"]))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        '- "unavailable": a metric that needs a judge model (LLM-Acc, Answer Relevance, Faithfulness) and had '
        'none; "n/a": the data cannot give it; "—": the paper (or our notes on it) reports no number there.',
        "- The paper's numbers come from its own data, backbone and judge; beside ours they show the layout and the "
        "trend to expect, not a target on this data. Every run's details: summary.md and report.html here.",
        "",
    ]
    return "\n".join(lines)


def reproduce(
    name: str,
    *,
    dataset: Path,
    out: Path,
    model: str,
    command: str,
    paper_dataset: str | None = None,
    progress: bool = True,
    on_checked: Callable[[], None] | None = None,
    **plan_values: Any,
) -> tuple[list[dict[str, Any]], list[Path]]:
    """Run table ``name`` on ``dataset`` into ``out`` (resumable); returns its entries and the files written."""
    from arag_graph.core.jsonl import dumps, replace_file
    from arag_graph.evaluators.runner import run_evaluation

    table = reproduce_table(name)
    which = paper_dataset.strip().lower() if paper_dataset else P.dataset_of(Path(dataset))
    if which is not None and which not in P.DATASETS:
        raise AragError(f"--paper-dataset {paper_dataset!r} is not a paper dataset; choose {', '.join(P.DATASETS)}")
    plan = with_profile(table.plan(dataset=Path(dataset), out=Path(out), model=model, **plan_values))
    rows = run_evaluation(plan, progress=progress, on_checked=on_checked)
    entries = build_table(table, plan, rows, which)
    record = {
        "table": table.name,
        "title": table.title,
        "command": command,
        "model": model,
        "judge": plan.judge,
        "profile": plan.profile,
        "dataset": str(dataset),
        "paper_dataset": which,
        "paper_source": P.CITATIONS[table.name],
        "paper_setting": P.SETTINGS[table.name],
        "rows": entries,
    }
    json_path, md_path = Path(out) / f"{table.name}.json", Path(out) / f"{table.name}.md"
    replace_file(json_path, (dumps(record, indent=2) + "\n").encode("utf-8"))
    markdown = table_markdown(table, entries, model=model, dataset=which, command=command)
    replace_file(md_path, markdown.encode("utf-8"))
    return entries, [json_path, md_path]
