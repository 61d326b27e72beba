"""What an evaluation runs: the plan (graphs, settings, dataset, model), checked before any work.

Everything that can be checked is checked first (files, graph names, model and judge credentials,
whether the corpus holds every question's supporting passages), so a mistake costs nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arag_graph.core.errors import AragError, DatasetError
from arag_graph.core.profiles import check_profile, eval_value
from arag_graph.evaluators.sweeps import combinations, split_settings
from arag_graph.qa.datasets import Question, load_questions
from arag_graph.registry import check_setting_names, config_for, get_graph_spec

log = logging.getLogger(__name__)


@dataclass
class EvalPlan:
    """Everything ``arag eval`` was asked to do."""

    dataset: Path
    graphs: list[str]
    out: Path
    model: str = "offline"
    corpus: Path | None = None
    index: Path | None = None
    judge: str | None = None
    base_url: str | None = None
    limit: int | None = None
    workers: int = 1
    max_steps: list[int] | None = None
    top_k: int = 5
    dataset_format: str | None = None
    upload: bool | None = None  # None: upload when a LangSmith key is set
    extra_context: dict[str, Any] = field(default_factory=dict)
    embedding: str | None = None
    """The embedding model of an index this run builds (a spec, see ``arag index --embedding``)."""
    embedding_base_url: str | None = None
    timeout: float | None = None
    """Seconds per model request, the judge's too (None: ``$ARAG_MODEL_TIMEOUT``, else 30)."""
    max_retries: int | None = None
    """Retries per model request, the judge's too (None: ``$ARAG_MODEL_RETRIES``, else 2)."""
    grid: str | None = None
    """A named comparison (``aragog``, :mod:`arag_graph.evaluators.grid`) run beside ``graphs``."""
    cch_index: Path | None = None
    """The index with contextual chunk headers for the grid's CCH rows (None: built beside the other)."""
    summaries: str | None = None
    """Who writes document summaries when the evaluation builds an index that needs them (DSI):
    a chat model spec, or None for ``offline`` (extractive lead sentences)."""
    profile: str = "package"
    """``package`` or ``paper`` (:mod:`arag_graph.core.profiles`): the defaults of every run, the index
    an evaluation builds, and the judge (:func:`with_profile`)."""
    rows: tuple[tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str], ...] = ()
    """Explicit (graph, settings) pairs run besides ``graphs`` and the grid: a table's rows that no sweep
    spells (SRAG's ablations, one switch off at a time); each is a setting of its own, as a sweep's are.
    A third item names the index the row runs on (one of ``variants``; default the evaluation's)."""
    variants: tuple[tuple[str, dict[str, Any]], ...] = ()
    """Index variants that rows compare, by name: the same corpus built with other ``chunk_size`` or
    ``embedding`` (a spec; ``""`` the packaged encoder), as ARAGOG's chunk-size and embedding-model
    comparisons (:func:`arag_graph.evaluators.eval_index.prepare_variant_indexes`)."""


def row_parts(row: tuple[Any, ...]) -> tuple[str, dict[str, Any], str]:
    """A plan row as (graph, settings, index name): rows without an index run on the evaluation's."""
    name, values, *index = row
    return name, dict(values), (index[0] if index else "")


@dataclass(frozen=True)
class Setting:
    """One configuration of one graph in the evaluation (a point of a sweep)."""

    graph: str
    values: dict[str, Any]
    index: str = ""
    """Which index the setting runs on: ``""`` the evaluation's, ``"cch"`` the grid's with contextual headers,
    or a variant of the plan (``EvalPlan.variants``)."""

    @property
    def key(self) -> str:
        parts = [f"{k}={v}" for k, v in sorted(self.values.items())]
        return ",".join([f"index={self.index}"] * bool(self.index) + parts) or "default"

    @property
    def file_name(self) -> str:
        return f"{self.graph}__{self.key.replace('=', '-').replace(',', '_')}.jsonl"


def plan_settings(plan: EvalPlan) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The plan's fixed ``--set`` values and its sweeps (``--max-steps`` first), values in the order given."""
    fixed, sweeps = split_settings(plan.extra_context, planned_graphs(plan))
    if plan.max_steps:
        sweeps = {"max_steps": list(dict.fromkeys(plan.max_steps)), **sweeps}
    return fixed, sweeps


def settings_for(plan: EvalPlan) -> list[Setting]:
    """Every (graph, setting) to run: each combination of the sweeps' values a graph has settings for,
    then the grid's rows (each once, even when a graph's own setting is the same)."""
    fixed, sweeps = plan_settings(plan)
    out: list[Setting] = []
    for name in plan.graphs:
        fields = get_graph_spec(name).config.model_fields
        # --set values the graph has are part of its setting, so tables and file names show them.
        base = {k: v for k, v in fixed.items() if k in fields}
        out.extend(Setting(name, {**base, **values}) for values in combinations(fields, sweeps))
    for name, values, index in map(row_parts, plan.rows):
        fields = get_graph_spec(name).config.model_fields
        base = {k: v for k, v in fixed.items() if k in fields}
        out.append(Setting(name, {**base, **values}, index))
    if plan.grid:
        from arag_graph.evaluators.grid import GRAPH, grid_rows

        fields = get_graph_spec(GRAPH).config.model_fields
        base = {k: v for k, v in fixed.items() if k in fields}
        out.extend(Setting(GRAPH, {**base, **row.values}, row.index) for row in grid_rows(plan.grid))
    return list({s.file_name: s for s in out}.values())


def with_profile(plan: EvalPlan) -> EvalPlan:
    """The plan with its profile applied where the plan decides (the runs' context fields are filled by the
    graphs' schemas): the ``paper`` profile's judge (GPT-5-mini) when no ``--judge`` is given and the model
    is not the offline policy, whose runs have no model to pay a judge for."""
    from arag_graph.llm.models import OFFLINE

    profile = check_profile(plan.profile)
    judge = plan.judge
    if judge is None and plan.model.strip() != OFFLINE:
        judge = eval_value(profile, "judge")
    return dataclasses.replace(plan, profile=profile, judge=judge)


def planned_graphs(plan: EvalPlan) -> list[str]:
    """The graphs the plan runs: ``graphs``, and the grid's graph when there is a grid."""
    names = [*plan.graphs, *(row_parts(row)[0] for row in plan.rows)]
    if plan.grid:
        from arag_graph.evaluators.grid import GRAPH

        names.append(GRAPH)
    return list(dict.fromkeys(names))


def needs_summaries(plan: EvalPlan) -> dict[str, bool]:
    """Per index of the plan (``""``, ``"cch"``), whether some setting retrieves with DSI."""
    need: dict[str, bool] = {}
    for setting in settings_for(plan):
        retriever = setting.values.get("retriever", plan_settings(plan)[0].get("retriever"))
        need[setting.index] = need.get(setting.index, False) or retriever == "dsi"
    return need


def find_corpus(dataset: Path, given: Path | None) -> Path:
    """The corpus paired with a question file: ``--corpus``, else one beside it.

    ``corpus.json`` (HippoRAG/LinearRAG folders), ``<stem>_corpus.json`` (several sets in one
    folder) or ``chunks.json`` (A-RAG's dataset folders), in that order.
    """
    if given is not None:
        if not given.exists():
            raise AragError(f"{given}: corpus not found; check --corpus")
        return given
    names = ("corpus.json", f"{dataset.stem}_corpus.json", "chunks.json")
    for name in names:
        if (dataset.parent / name).exists():
            return dataset.parent / name
    raise AragError(f"{dataset}: no corpus found beside it ({', '.join(names)}); pass --corpus")


def _check_credentials(plan: EvalPlan) -> None:
    from arag_graph.llm.models import OFFLINE, resolve_chat_model

    if plan.model != OFFLINE:  # raises a one-line ModelSpecError
        resolve_chat_model(plan.model, base_url=plan.base_url, timeout=plan.timeout, max_retries=plan.max_retries)
    if plan.judge:
        from arag_graph.evaluators.judge import resolve_judge

        resolve_judge(plan.judge, plan.base_url, timeout=plan.timeout, max_retries=plan.max_retries)


def load_plan_questions(plan: EvalPlan) -> list[Question]:
    if not plan.dataset.exists():
        raise DatasetError(f"{plan.dataset}: question file not found; check --dataset")
    questions = load_questions(plan.dataset, plan.dataset_format)
    if plan.limit is not None:
        if plan.limit < 1:
            raise AragError(f"--limit {plan.limit} is not a positive number of questions")
        questions = questions[: plan.limit]
    return questions


def check_plan(plan: EvalPlan) -> list[Question]:
    """All the checks that need no index and no model call; returns the questions."""
    if not plan.graphs and not plan.grid and not plan.rows:
        raise AragError("no graphs given; use --graphs arag,naive_rag,... or --grid aragog")
    check_profile(plan.profile)
    if plan.grid:
        from arag_graph.evaluators.grid import grid_rows

        grid_rows(plan.grid)  # a one-line error naming the grids
        if plan_settings(plan)[1]:
            raise AragError("--grid runs fixed settings per technique; give single values to --set and --max-steps")
    for name in [*plan.graphs, *(row_parts(row)[0] for row in plan.rows)]:
        get_graph_spec(name)
    variants = dict(plan.variants)
    for name, values, index in map(row_parts, plan.rows):
        config_for(name, **values)  # a row's values, checked as --set values are
        if index and index not in variants:
            raise AragError(f"a row runs on index {index!r}, which the plan does not build; name it in variants")
    if plan.workers < 1:
        raise AragError(f"--workers {plan.workers} must be at least 1")
    from arag_graph.tools.toolkit import TOP_K_MAX, TOP_K_MIN

    if not TOP_K_MIN <= plan.top_k <= TOP_K_MAX:
        raise AragError(f"--top-k {plan.top_k} is out of range; give {TOP_K_MIN} to {TOP_K_MAX} chunks per search")
    if plan.max_steps is not None and any(s < 1 for s in plan.max_steps):
        raise AragError(f"--max-steps {plan.max_steps}: step caps must be positive integers, e.g. 5,10,15,20")
    check_settings(plan)
    questions = load_plan_questions(plan)
    _check_credentials(plan)
    return questions


def check_settings(plan: EvalPlan) -> None:
    """``--set KEY=VALUE`` values: a field of some chosen graph, valid for every graph that has it.

    ``KEY=V1,V2,...`` is a sweep (:mod:`arag_graph.evaluators.sweeps`): each value is checked.

    A value a graph cannot take (``tools=bogus``) would otherwise fail once per question, deep in
    the run; the graphs' own configuration classes coerce and check it here instead.
    """
    if not plan.extra_context:
        return
    graphs = planned_graphs(plan)
    check_setting_names(plan.extra_context, graphs)
    fixed, _ = split_settings(plan.extra_context, graphs)  # checks every swept value
    for name in graphs:
        config_for(name, **fixed)  # raises a one-line AragError naming the field


def slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in text).strip("-") or "corpus"
