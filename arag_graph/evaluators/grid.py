"""ARAGOG's comparison as one ``arag eval --grid aragog``: naive RAG and each retrieval technique on it.

The grid is a list of named rows, each a ``naive_rag`` setting (the technique's switches) on one of
two indexes of the same corpus: the plain index, or one built with contextual chunk headers
(``--contextual-headers``, ARAGOG's CCH), which only changes what the sentences are embedded with.
Everything else (the questions, ``top_k``, the model, the evaluators) is the same for every row,
which is the point of the comparison. Rows run through the runner's usual machinery: each is a
(graph, setting) with its own resumable predictions file and its own row in ``summary.md``; the
grid adds ``aragog.md`` / ``aragog.json``, the paper's table (Context Precision, Answer Similarity,
Answer Relevance) with our other metrics beside it, one line per technique.

Which index each row needs:

* plain index: naive RAG, + SWR, + AMR, + HyDE and their combinations, + Multi-query, + MMR, + LLM rerank;
* with document summaries (``arag index --summaries``): every + DSI row;
* with contextual headers: every + CCH row (and + DSI + CCH needs summaries in that index too).

``arag eval`` builds both indexes itself (summaries extractive offline, or written by
``--summaries MODEL``); ``--index`` and ``--cch-index`` give built ones instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arag_graph.core.errors import AragError
from arag_graph.evaluators.paper_tables import ARAGOG_SCORES

__all__ = ["GRIDS", "GridRow", "grid_markdown", "grid_rows", "grid_table", "write_grid"]

PLAIN, CCH = "", "cch"


@dataclass(frozen=True)
class GridRow:
    """One technique of the comparison: a label, naive_rag's settings and the index it runs on."""

    label: str
    values: dict[str, Any] = field(default_factory=dict)
    index: str = PLAIN
    """``""``: the plain index; ``"cch"``: the index built with contextual chunk headers."""

    @property
    def needs_summaries(self) -> bool:
        return self.values.get("retriever") == "dsi"


_SWR = {"sentence_window": True}
_AMR = {"retriever": "amr"}
_DSI = {"retriever": "dsi"}
_HYDE = {"hyde": True}

ARAGOG: tuple[GridRow, ...] = (
    # The paper's table, in its order.
    GridRow("naive RAG"),
    GridRow("+ SWR", _SWR),
    GridRow("+ AMR", _AMR),
    GridRow("+ DSI", _DSI),
    GridRow("+ HyDE", _HYDE),
    GridRow("+ CCH", {}, CCH),
    GridRow("+ HyDE + CCH", _HYDE, CCH),
    # The rest of the grid: every other technique with HyDE and with CCH.
    GridRow("+ SWR + HyDE", {**_SWR, **_HYDE}),
    GridRow("+ AMR + HyDE", {**_AMR, **_HYDE}),
    GridRow("+ DSI + HyDE", {**_DSI, **_HYDE}),
    GridRow("+ SWR + CCH", _SWR, CCH),
    GridRow("+ AMR + CCH", _AMR, CCH),
    GridRow("+ DSI + CCH", _DSI, CCH),
    GridRow("+ SWR + HyDE + CCH", {**_SWR, **_HYDE}, CCH),
    # The full paper's other techniques (arag_graph.retrievers.techniques): multi-query retrieval with three
    # rewrites, maximal marginal relevance over 20 candidates and LLM reranking of 20 candidates.
    GridRow("+ Multi-query", {"multi_query": 3}),
    GridRow("+ MMR", {"mmr": True}),
    GridRow("+ LLM rerank", {"rerank": True}),
)

GRIDS: dict[str, tuple[GridRow, ...]] = {"aragog": ARAGOG}
GRAPH = "naive_rag"

PAPER: dict[str, tuple[float, float, float]] = ARAGOG_SCORES
"""ARAGOG's Context Precision / Answer Similarity / Answer Relevance (:mod:`arag_graph.evaluators.paper_tables`)."""


def grid_rows(name: str) -> tuple[GridRow, ...]:
    """The rows of grid ``name``; one line naming the grids there are otherwise."""
    rows = GRIDS.get(name.strip().lower())
    if rows is None:
        raise AragError(f"--grid {name!r} is not a grid; choose {', '.join(GRIDS)}")
    return rows


def setting_key(row: GridRow, fixed: Mapping[str, Any]) -> str:
    """The runner's setting key of a row (its file name and summary row): values, and the index."""
    values = {**fixed, **row.values}
    parts = [f"{k}={v}" for k, v in sorted(values.items())]
    if row.index:
        parts.insert(0, f"index={row.index}")
    return ",".join(parts) or "default"


# ---------------------------------------------------------------------------------------------
# The table

_PAPER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("context_precision", "Context Precision"),
    ("answer_similarity", "Answer Similarity"),
    ("answer_relevance", "Answer Relevance"),
)
_OUR_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("context_precision_ragas", "Context Precision (RAGAS)", "fraction"),
    ("contain_acc", "Contain-Acc (%)", "percent"),
    ("f1", "F1 (%)", "percent"),
    ("llm_acc", "LLM-Acc (%)", "model"),
    ("evidence_recall", "evidence recall (%)", "percent"),
    ("faithfulness", "Faithfulness", "model"),
    ("retrieved_tokens", "retrieved tokens", "tokens"),
)


def grid_table(
    grid: Sequence[GridRow], rows: Sequence[Mapping[str, Any]], fixed: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """One entry per grid row: its label, index, setting key and the summary row's metrics (None: unavailable)."""
    by_key = {str(r.get("setting_key")): r for r in rows if r.get("graph") == GRAPH}
    table = []
    for row in grid:
        key = setting_key(row, fixed)
        found = by_key.get(key) or {}
        metrics = {name: found.get(name) for name, _ in _PAPER_COLUMNS}
        metrics |= {name: found.get(name) for name, _, _ in _OUR_COLUMNS}
        table.append(
            {
                "technique": row.label,
                "index": "contextual headers" if row.index == CCH else "plain",
                "setting_key": key,
                "n": found.get("n", 0),
                "errors": found.get("errors", 0),
                **metrics,
                "paper": dict(zip([n for n, _ in _PAPER_COLUMNS], PAPER[row.label], strict=True))
                if row.label in PAPER
                else None,
            }
        )
    return table


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "unavailable" if kind == "score" else "n/a"
    if kind == "percent":
        return f"{100 * value:.1f}"
    if kind == "tokens":
        return f"{value:,.0f}"
    return f"{value:.3f}"


def grid_markdown(table: Sequence[Mapping[str, Any]], model: str) -> str:
    """``aragog.md``: the paper-style table, our metrics beside it, and ARAGOG's own figures for reference."""
    from arag_graph.evaluators.report import OFFLINE_LABEL, model_label

    label = model_label(model)
    head = ["technique", "index", "n", *(t for _, t in _PAPER_COLUMNS), *(t for _, t, _ in _OUR_COLUMNS), "errors"]
    lines = [
        "# ARAGOG's comparison (`arag eval --grid aragog`)",
        "",
        f"Graph: naive_rag; model: {label}. One row per retrieval technique, all on the same questions and "
        "corpus; the first three metric columns are ARAGOG's.",
    ]
    if label == OFFLINE_LABEL:
        lines.append(
            "The offline policy is a deterministic no-LLM baseline: Answer Relevance, LLM-Acc and Faithfulness need "
            'a model and are "unavailable"; HyDE embeds the question itself (rows with HyDE equal those without); '
            "DSI reads extractive summaries (lead sentences) unless --summaries named a model (its steps say which)."
        )
    lines += [
        "",
        "| " + " | ".join(head) + " |",
        "|---|---|" + "---:|" * (len(head) - 2),
    ]
    for entry in table:
        cells = [entry["technique"], entry["index"], str(entry["n"])]
        cells += [_cell(entry.get(name), "score") for name, _ in _PAPER_COLUMNS]
        for name, _, kind in _OUR_COLUMNS:
            value = entry.get(name)
            if kind == "model":
                cells.append(
                    "unavailable" if value is None else (f"{100 * value:.1f}" if "Acc" in name else f"{value:.3f}")
                )
            else:
                cells.append(_cell(value, kind))
        cells.append(str(entry.get("errors", 0)))  # failed runs count as wrong answers, as in summary.md
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "ARAGOG's own figures (the Llama 2 technical report with 100 QA pairs; a reference, not a target on this "
        "data):",
        "",
        "| technique | Context Precision | Answer Similarity | Answer Relevance |",
        "|---|---:|---:|---:|",
        *(f"| {name} | {cp} | {sim} | {rel} |" for name, (cp, sim, rel) in PAPER.items()),
        "",
        "- SWR: the top_k sentences, each in a window of `window` sentences (3: one neighbour each side). AMR: the "
        "top_k sentences merged into their chunk, and chunks into their document, when more than "
        "`merge_threshold` of the children were retrieved. DSI: the `summary_documents` documents whose summary "
        "is nearest the question, then the top_k chunks inside them. HyDE: the question's vector replaced by that "
        "of a model-written answer passage. CCH: sentences embedded as `title: sentence`.",
        "- Context Precision from gold chunk ids (HotpotQA's supporting passages), divided by K as the ARAGOG "
        "paper writes it; Context Precision (RAGAS) divides by the relevant chunks found. Answer Similarity with the "
        "index's encoder; Answer Relevance and Faithfulness need a judge (`--judge`). Definitions: summary.md.",
        "",
    ]
    return "\n".join(lines)


def write_grid(
    name: str, rows: Sequence[Mapping[str, Any]], fixed: Mapping[str, Any], model: str, out_dir: Any
) -> list[Any]:
    """Write ``aragog.json`` (the table's entries) and ``aragog.md`` for grid ``name``; returns both paths."""
    from pathlib import Path

    from arag_graph.core.jsonl import dumps, replace_file

    grid = grid_rows(name)
    table = grid_table(grid, rows, {k: v for k, v in fixed.items() if k in _naive_fields()})
    out = Path(out_dir)
    json_path, md_path = out / f"{name}.json", out / f"{name}.md"
    replace_file(json_path, (dumps(table, indent=2) + "\n").encode("utf-8"))
    replace_file(md_path, grid_markdown(table, model).encode("utf-8"))
    return [json_path, md_path]


def _naive_fields() -> set[str]:
    from arag_graph.registry import get_graph_spec

    return set(get_graph_spec(GRAPH).config.model_fields)
