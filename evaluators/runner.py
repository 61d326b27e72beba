"""``arag eval``: run graphs over a QA dataset, score them, resume after a kill, report.

How a run is organised:

- Everything that can be checked is checked before any work (files, graph names, model and judge
  credentials, whether the corpus holds every question's supporting passages).
- The index is built once per corpus and reused while its corpus hash matches.
- Each (graph, setting) writes ``predictions/<graph>__<setting>.jsonl``, one record per question,
  appended as soon as the question is done. A killed run started again with the same arguments
  reads these files back and runs only the missing questions: none is lost or counted twice. A
  record found incomplete on resume, or of a run that failed, is set aside (``<file>.rejected``)
  and its question run again.
- The output directory is arag's alone: ``--out`` must be new, empty, or an earlier evaluation's
  (it has ``run.json``); anything else is refused before anything in it is touched. One
  evaluation at a time writes into it (a lock file, ``.arag-eval.lock``), so no question is paid
  for twice. A write that fails (a full disk) stops the evaluation with the ``OSError``; what was
  written stays, and a rerun resumes from it.
- Execution goes through ``langsmith.evaluate``: with a LangSmith key the runs and scores become an
  experiment per (graph, setting) on a dataset created (or reused) from the questions; without one
  the same call runs locally with ``upload_results=False``. Scores are computed once, by the
  evaluators in :mod:`arag_graph.evaluators`, and stored in the record; LangSmith receives them from
  there as feedback, one LangSmith evaluator per evaluator, while the run's outputs are the prediction.
- Sweeps (``--max-steps 5,10``, ``--set reasoning_effort=low,high``) run every combination of their
  values, each as its own (graph, setting): :mod:`arag_graph.evaluators.sweeps`.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import os
import re
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import UsageMetadataCallbackHandler

from arag_graph.datasets import Question, gold_chunk_ids, load_questions, missing_support, passage_maps
from arag_graph.errors import AragError, DatasetError
from arag_graph.evaluators.sweeps import combinations, split_settings
from arag_graph.jsonl import JsonLinesFile, dumps, replace_file, scrub
from arag_graph.registry import check_setting_names, config_for, get_graph_spec
from arag_graph.safety import remember_url_credentials, url_without_credentials

log = logging.getLogger(__name__)

RUN_FILE = "run.json"
PREDICTIONS = "predictions"
LOCK_FILE = ".arag-eval.lock"
_NAMESPACE = uuid.UUID("6f1c2a5e-8f0b-4d1e-9a57-3b2d7c4e9a10")  # example ids derive from question ids


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


@dataclass(frozen=True)
class Setting:
    """One configuration of one graph in the evaluation (a point of a sweep)."""

    graph: str
    values: dict[str, Any]
    index: str = ""
    """Which index the setting runs on: ``""`` the evaluation's, ``"cch"`` the grid's with contextual headers."""

    @property
    def key(self) -> str:
        parts = [f"{k}={v}" for k, v in sorted(self.values.items())]
        return ",".join([f"index={self.index}"] * bool(self.index) + parts) or "default"

    @property
    def file_name(self) -> str:
        return f"{self.graph}__{self.key.replace('=', '-').replace(',', '_')}.jsonl"


# ---------------------------------------------------------------------------------------------
# Planning and fail-fast checks


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
    if plan.grid:
        from arag_graph.evaluators.grid import GRAPH, grid_rows

        fields = get_graph_spec(GRAPH).config.model_fields
        base = {k: v for k, v in fixed.items() if k in fields}
        out.extend(Setting(GRAPH, {**base, **row.values}, row.index) for row in grid_rows(plan.grid))
    return list({s.file_name: s for s in out}.values())


def planned_graphs(plan: EvalPlan) -> list[str]:
    """The graphs the plan runs: ``graphs``, and the grid's graph when there is a grid."""
    if plan.grid:
        from arag_graph.evaluators.grid import GRAPH

        return list(dict.fromkeys([*plan.graphs, GRAPH]))
    return list(plan.graphs)


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
    from arag_graph.models import OFFLINE, resolve_chat_model

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
    if not plan.graphs and not plan.grid:
        raise AragError("no graphs given; use --graphs arag,naive_rag,... or --grid aragog")
    if plan.grid:
        from arag_graph.evaluators.grid import grid_rows

        grid_rows(plan.grid)  # a one-line error naming the grids
        if plan_settings(plan)[1]:
            raise AragError("--grid runs fixed settings per technique; give single values to --set and --max-steps")
    for name in plan.graphs:
        get_graph_spec(name)
    if plan.workers < 1:
        raise AragError(f"--workers {plan.workers} must be at least 1")
    from arag_graph.tools import TOP_K_MAX, TOP_K_MIN

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


# ---------------------------------------------------------------------------------------------
# Index: built once per corpus, reused while it matches


def _reuses_built_index(plan: EvalPlan) -> bool:
    """True when ``--index`` names a built index and no ``--corpus`` asks for another build."""
    return plan.index is not None and plan.corpus is None and (plan.index / "CURRENT").exists()


def prepare_index(plan: EvalPlan, questions: Sequence[Question], progress: bool) -> tuple[Any, dict[str, list[str]]]:
    """Load or build the index and map every question to its gold chunk IDs.

    The corpus is chunked (cheap, no embedding) first so that missing supporting passages are
    reported before any index is built.
    """
    from arag_graph.cache import cache_dir
    from arag_graph.chunking import chunk_documents
    from arag_graph.corpus import load_corpus
    from arag_graph.documents import DEFAULT_CONTEXTUAL_HEADERS
    from arag_graph.embedding_models import resolve_embeddings
    from arag_graph.embeddings import embedding_model_id
    from arag_graph.index import build_index, corpus_hash, load_index
    from arag_graph.summaries import has_summaries, missing_summaries_error

    summaries = needs_summaries(plan).get("", False)
    if _reuses_built_index(plan):
        index = load_index(plan.index, cache=True)
        _check_embedding_matches(plan, index)
        chunks = index.store.chunks
        if summaries and not has_summaries(index):  # before any question is paid for
            raise missing_summaries_error(index)
        if plan.grid and index.manifest.contextual_headers:
            # The grid's rows without CCH must run on bare sentences, or "+ CCH" compares CCH with itself.
            raise AragError(
                f"--index {plan.index}: built with contextual headers, but the grid's base rows need bare "
                "sentences; build it with --no-contextual-headers (and give the headed one as --cch-index)"
            )
    else:
        corpus = find_corpus(plan.dataset, plan.corpus)
        chunks = chunk_documents(load_corpus(corpus))
        index = None
    title_to_ids, text_to_ids = passage_maps(chunks)
    missing = missing_support(questions, title_to_ids, text_to_ids)
    if missing:
        qid, what = missing[0]
        raise DatasetError(
            f"the corpus lacks supporting passages of {len({q for q, _ in missing})} question(s), e.g. question "
            f"{qid}: {what[:80]!r}; give the corpus these questions were written for (--corpus)"
        )
    if index is None:
        digest = corpus_hash(chunks)
        embeddings = resolve_embeddings(plan.embedding, base_url=plan.embedding_base_url)  # fails before a build
        model_id = embedding_model_id(embeddings)
        slug = _slug(plan.dataset.parent.name) + ("" if plan.embedding is None else f"-{_slug(model_id)[-40:]}")
        # A grid compares techniques with and without contextual headers (its CCH rows get their own
        # index), so its base index has none; otherwise the package's default applies.
        headers = False if plan.grid else DEFAULT_CONTEXTUAL_HEADERS
        slug += "" if headers == DEFAULT_CONTEXTUAL_HEADERS else "-bare"
        target = plan.index or cache_dir() / "indexes" / f"{slug}-{digest[:12]}"
        with contextlib.suppress(AragError):
            existing = load_index(target, cache=True)
            if (
                existing.manifest.corpus_hash == digest
                and existing.manifest.embedding_model == model_id
                and existing.manifest.contextual_headers == headers
                and _has_wanted_summaries(existing, plan, summaries)
            ):
                index = existing
        if index is None:
            options = _summary_options(plan, summaries)
            build_index(chunks, target, embeddings=embeddings, contextual_headers=headers, progress=progress, **options)
            index = load_index(target, cache=True)
    gold = {q.id: list(gold_chunk_ids(q, title_to_ids, text_to_ids)) for q in questions}
    return index, gold


def _check_embedding_matches(plan: EvalPlan, index: Any) -> None:
    """``--embedding`` with a built ``--index``: an index answers with the model it was built with, so a
    different one is refused rather than silently ignored."""
    from arag_graph.embedding_models import resolve_embeddings
    from arag_graph.embeddings import embedding_model_id

    if plan.embedding is None and plan.embedding_base_url is None:
        return
    wanted = embedding_model_id(resolve_embeddings(plan.embedding, base_url=plan.embedding_base_url))
    built = index.manifest.embedding_model
    if wanted != built:
        raise AragError(
            f"--index {plan.index} was built with the embedding model {built!r}, not {wanted!r}; drop --embedding "
            "to use the index as built, or give a new --index (with --corpus) to build one with that model"
        )


def _summary_options(plan: EvalPlan, wanted: bool, reuse: Any = None) -> dict[str, Any]:
    """``build_index`` arguments for the document summaries a plan's DSI settings need (none when none do)."""
    if not wanted:
        return {}
    options: dict[str, Any] = {"base_url": plan.base_url, "timeout": plan.timeout, "max_retries": plan.max_retries}
    if reuse is not None:
        options["reuse"] = reuse
    return {"summaries": plan.summaries or "offline", "summary_options": options}


def _has_wanted_summaries(index: Any, plan: EvalPlan, wanted: bool) -> bool:
    """Whether a cached index can serve the plan: summaries by the plan's summariser when DSI needs them."""
    if not wanted:
        return True
    info = (index.manifest.extra or {}).get("summaries") or {}
    return info.get("model") == (plan.summaries or "offline")


def prepare_cch_index(plan: EvalPlan, index: Any, progress: bool) -> Any | None:
    """The grid's index with contextual chunk headers (CCH rows), of the same chunks; None when no row needs it.

    ``--cch-index`` gives a built one (checked: headers on, same corpus, summaries when DSI needs
    them) or where to build it; without it the index is built in the cache beside the other.
    """
    from arag_graph.cache import cache_dir
    from arag_graph.index import build_index, load_index
    from arag_graph.summaries import has_summaries, missing_summaries_error

    if not any(s.index == "cch" for s in settings_for(plan)):
        return None
    summaries = needs_summaries(plan).get("cch", False)
    digest = index.manifest.corpus_hash
    given = plan.cch_index
    if given is not None and (given / "CURRENT").exists():
        cch = load_index(given, cache=True)
        if not cch.manifest.contextual_headers:
            raise AragError(
                f"--cch-index {given}: built without contextual headers; build it with --contextual-headers"
            )
        if cch.manifest.corpus_hash != digest:
            raise AragError(f"--cch-index {given}: another corpus than the evaluation's index; build it from the same")
        if summaries and not has_summaries(cch):
            raise missing_summaries_error(cch)
        return cch
    target = given or cache_dir() / "indexes" / f"{_slug(plan.dataset.parent.name)}-{digest[:12]}-cch"
    with contextlib.suppress(AragError):
        existing = load_index(target, cache=True)
        if (
            existing.manifest.corpus_hash == digest
            and existing.manifest.contextual_headers
            and _has_wanted_summaries(existing, plan, summaries)
        ):
            return existing
    reuse = getattr(index, "build_dir", None)  # the plain index's summaries: not paid for twice
    options = _summary_options(plan, summaries, reuse)
    build_index(index.store.chunks, target, contextual_headers=True, progress=progress, **options)
    return load_index(target, cache=True)


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in text).strip("-") or "corpus"


# ---------------------------------------------------------------------------------------------
# Resumable prediction files


def _is_prediction(record: object) -> bool:
    return isinstance(record, dict) and isinstance(record.get("question_id"), str)


def _is_scored(record: Mapping[str, Any]) -> bool:
    """A record the summary can use: a prediction with an answer (maybe an error) and its metrics."""
    prediction, metrics = record.get("prediction"), record.get("metrics")
    return (
        isinstance(prediction, dict)
        and isinstance(prediction.get("answer"), str)
        and isinstance(metrics, dict)
        and isinstance(record.get("graph"), str)
    )


def _is_complete(record: Mapping[str, Any]) -> bool:
    """A record to keep on resume: scored, of a run that did not fail; anything else is run again.

    A run that failed (its prediction has an ``error``: a model timeout, a server's 500) is not
    kept either: rerunning an evaluation is how a user retries after fixing what failed, and a
    record that replays the failure would leave them no way but a new ``--out``. The failed record
    is kept in ``<file>.rejected``.
    """
    return _is_scored(record) and not record["prediction"].get("error")


def prediction_file(path: Path) -> JsonLinesFile:
    """One (graph, setting)'s predictions: a record per question, appended as each is done, resumable."""
    return JsonLinesFile(
        path,
        key="question_id",
        owns=_is_prediction,
        complete=_is_complete,
        what="an arag prediction record",
        fix="remove that line to resume, or use another --out",
    )


# ---------------------------------------------------------------------------------------------
# The output directory: arag's alone, one evaluation at a time


def _read_run_file(out: Path) -> dict[str, Any] | None:
    """``run.json`` of ``out`` (None when there is none); one line refusing a damaged or foreign one."""
    run_file = out / RUN_FILE
    if not run_file.exists():
        return None
    try:
        meta = json.loads(run_file.read_bytes())
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or not isinstance(meta.get("fingerprint"), dict):
        raise AragError(
            f"{run_file} is not the run record of an arag evaluation (damaged, or another program's); "
            "use another --out, or delete that directory to start over"
        )
    return meta


def check_out_dir(out: Path) -> None:
    """Refuse an ``--out`` that is not arag's to write: a file, or a directory of other things.

    Acceptable: a path that does not exist yet, an empty directory, or an earlier evaluation's
    directory (``run.json``), including one left holding only the lock file (and a half-written
    ``run.json``) by a run killed early.
    """
    if out.exists() and not out.is_dir():
        raise AragError(f"--out {out} is a file; give a directory for the evaluation's results")
    if not out.exists() or _read_run_file(out) is not None:
        return
    # What a run killed before its first record can leave: the lock, and run.json half-written.
    ours = {LOCK_FILE, f".{RUN_FILE}.tmp"}
    foreign = sorted(p.name for p in out.iterdir() if p.name not in ours)
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise AragError(
            f"--out {out} is a directory arag did not write (it holds {shown}, and no {RUN_FILE}); "
            "give a new or empty directory, or an earlier evaluation's --out to resume it"
        )


@contextlib.contextmanager
def exclusive(out: Path) -> Iterator[None]:
    """Hold ``out``'s lock for the whole evaluation; a second evaluation into it is refused at once.

    A lock (``filelock``, an OS lock the kernel releases when the process dies, so a killed run
    never leaves it stuck) rather than a check of the files: two runs started together would both
    see the same unfinished questions and both pay for them. A directory made here for an
    evaluation that then failed before writing anything is removed again.
    """
    from filelock import FileLock, Timeout

    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(out / LOCK_FILE, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise AragError(
            f"--out {out} is in use by another arag eval that is still running; wait for it to finish "
            "(rerun then to resume), or use another --out"
        ) from None
    try:
        yield
    finally:
        lock.release()
        if created and [p.name for p in out.iterdir()] == [LOCK_FILE]:
            with contextlib.suppress(OSError):
                (out / LOCK_FILE).unlink()
                out.rmdir()


def _fingerprint(plan: EvalPlan, index: Any | None) -> dict[str, Any]:
    """What must not change between a run and its resumption (without ``index``: what is known before it)."""
    known = {
        "dataset_sha256": hashlib.sha256(plan.dataset.read_bytes()).hexdigest(),
        "model": plan.model,
        "judge": plan.judge,
        "top_k": plan.top_k,
        # Sweeps are left out, as --max-steps is: a rerun may add values, each to its own file.
        "context": plan_settings(plan)[0],
    }
    if index is not None:
        known |= {"corpus_hash": index.manifest.corpus_hash, "embedding_model": index.manifest.embedding_model}
    return known


def check_resume(plan: EvalPlan, index: Any | None) -> None:
    """Refuse to mix results of different evaluations in one output directory.

    Called twice: without the index before any work (a changed dataset, model, judge or top-k fails
    at once), then with it, which also compares the corpus and the encoder and records the run.
    """
    run_file = plan.out / RUN_FILE
    current = _fingerprint(plan, index)
    meta = _read_run_file(plan.out) if plan.out.is_dir() else None
    if meta is not None:
        previous = meta["fingerprint"]
        changed = sorted(k for k in current if k in previous and previous[k] != current[k])
        if changed:
            raise AragError(
                f"{plan.out} holds results of another evaluation ({', '.join(changed)} differ); "
                "use another --out or delete that directory"
            )
    if index is None:
        return
    plan.out.mkdir(parents=True, exist_ok=True)
    meta = {"fingerprint": current, "plan": _plan_dict(plan), "updated": time.strftime("%Y-%m-%dT%H:%M:%S")}
    replace_file(run_file, dumps(meta, indent=2).encode("utf-8"))


def _plan_dict(plan: EvalPlan) -> dict[str, Any]:
    plan_dict = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(plan).items()}
    if plan.base_url:
        plan_dict["base_url"] = url_without_credentials(plan.base_url)
    return plan_dict


# ---------------------------------------------------------------------------------------------
# Running one (graph, setting)


def _usage(messages: Sequence[Any], calls: UsageMetadataCallbackHandler | None = None) -> dict[str, int] | None:
    """Token usage of the run: every model call the callback saw, else what the state's messages carry.

    The callback counts the calls whose replies never reach ``messages`` (CoRAG's sufficiency
    checks and reformulations, SRAG's decomposition and triplet extraction, HyDE passages), so
    graphs with side calls are not made to look cheaper than they are.
    """
    from arag_graph.evaluators.retrieval import usage_from_messages

    if calls is not None and calls.usage_metadata:
        return usage_from_messages({"usage_metadata": u} for u in calls.usage_metadata.values())
    return usage_from_messages(messages)


def prediction_of(state: dict[str, Any], calls: UsageMetadataCallbackHandler | None = None) -> dict[str, Any]:
    """The fields of a graph's final state that evaluators and reports use (JSON-safe)."""
    return {
        "answer": state.get("answer") or "",
        "citations": list(state.get("citations") or []),
        "read_chunks": list(state.get("read_chunks") or []),
        "retrieved_chunks": list(state.get("retrieved_chunks") or []),
        "retrieved_tokens": int(state.get("retrieved_tokens") or 0),
        "steps": int(state.get("steps") or 0),
        "trajectory": [
            {k: step.get(k) for k in ("tool", "args", "tokens", "chunk_ids", "error")}
            # CoRAG's steps also carry the sub-answer and the check's verdict: kept for the report.
            | {k: step[k] for k in _STEP_DETAILS if step.get(k) not in (None, "")}
            for step in state.get("trajectory") or []
        ],
        "error": state.get("error"),
        # CoRAG/SRAG note here each structured step that fell back to its safe value (a provider
        # refusing the schema would otherwise degrade a whole comparison without a trace).
        "warnings": [str(w) for w in state.get("warnings") or []],
        "usage": _usage(state.get("messages") or [], calls),
        **structure_of(state),
    }


_STEP_DETAILS = ("sub_answer", "reasoning")
_CHAIN_RUN_FIELDS = ("id", "role", "parent", "wave", "sample", "steps", "stop_reason", "penalty", "score", "selected")
_SUB_QUESTION_FIELDS = ("id", "question", "resolved", "depends_on", "wave", "status", "answer", "chunk_ids", "error")


def structure_of(state: Mapping[str, Any]) -> dict[str, Any]:
    """How a structured graph reached its answer, for the HTML report (only the fields a state has).

    CoRAG: the answering ``chain`` (each step's query, chunks, sub-answer, penalty, check) and a
    summary of every sampled chain (``sampled_chains``, without their passages and steps, which
    the trajectory already holds). SRAG: the ``sub_questions`` (without their triplets) and the fact
    ``table``. Passages' text is left out: records stay small, and chunk IDs name them.
    """
    out: dict[str, Any] = {}
    if state.get("chain"):
        out["chain"] = [dict(link) for link in state["chain"]]
    if state.get("sampled_chains"):
        out["sampled_chains"] = [{k: run[k] for k in _CHAIN_RUN_FIELDS if k in run} for run in state["sampled_chains"]]
    if state.get("sub_questions"):
        out["sub_questions"] = [
            {k: record[k] for k in _SUB_QUESTION_FIELDS if k in record} for record in state["sub_questions"]
        ]
    if state.get("table"):
        out["table"] = [dict(row) for row in state["table"]]
    return out


def _takes_inputs(evaluator: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(evaluator).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "inputs" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def evaluator_name(evaluator: Callable[..., Any]) -> str:
    """An evaluator's name as LangSmith shows it: ``contain_acc`` for ``contain_acc_evaluator``."""
    return getattr(evaluator, "__name__", "metric").removesuffix("_evaluator")


@dataclass
class Scores:
    """What the evaluators made of one prediction."""

    metrics: dict[str, Any] = field(default_factory=dict)
    """Every key's score (None: unavailable, never guessed), for the summary."""
    feedback: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per evaluator, its results as it returned them (key, score, comment): LangSmith's feedback."""
    errors: dict[str, str] = field(default_factory=dict)
    """Per evaluator that raised, the error in one line."""


def score(
    prediction: dict[str, Any],
    reference: dict[str, Any],
    evaluators: Sequence[Callable[..., Any]],
    inputs: dict[str, Any] | None = None,
) -> Scores:
    """Run each evaluator once; a key whose evaluator fails is recorded as None, never guessed.

    ``inputs`` (the example's ``{"question": ...}``) goes to the evaluators that take it, as
    ``langsmith.evaluate`` would pass it: the LLM judge grades against the question it was asked.
    An evaluator that raises is logged and named in ``errors``, so the summary counts the runs it
    left unscored instead of their metric silently missing.
    """
    from arag_graph.safety import redact

    scores = Scores()
    for evaluator in evaluators:
        name = evaluator_name(evaluator)
        try:
            if inputs is not None and _takes_inputs(evaluator):
                result = evaluator(outputs=prediction, reference_outputs=reference, inputs=inputs)
            else:
                result = evaluator(outputs=prediction, reference_outputs=reference)
        except Exception as exc:
            scores.errors[name] = redact(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
            scores.metrics.setdefault(name, None)
            log.warning("evaluator %s failed, its metric is missing for this run: %s", name, scores.errors[name])
            continue
        items = result.get("results", [result]) if isinstance(result, dict) else list(result)
        scores.feedback[name] = [
            {"key": item["key"], "score": item.get("score"), "comment": item.get("comment")} for item in items
        ]
        for item in items:
            scores.metrics[item["key"]] = item.get("score")
    return scores


class SettingRun:
    """Runs the questions of one (graph, setting) and records each as soon as it is done."""

    def __init__(
        self,
        plan: EvalPlan,
        setting: Setting,
        index: Any,
        gold: dict[str, list[str]],
        evaluators: Sequence[Callable[..., Any]],
        on_done: Callable[[], None] = lambda: None,
        file: JsonLinesFile | None = None,
    ) -> None:
        from arag_graph.models import resolve_chat_model
        from arag_graph.registry import build_graph

        self.plan, self.setting, self.index, self.gold, self.evaluators = plan, setting, index, gold, evaluators
        self.file = file or prediction_file(plan.out / PREDICTIONS / setting.file_name)
        self.write_failure: OSError | None = None
        values = {"top_k": plan.top_k, "model": plan.model, "base_url": plan.base_url}
        self.context = config_for(setting.graph, **{**values, **setting.values})  # --set values are in setting
        # Graphs use a model instance as given, so the run's sampling settings (temperature 0, the
        # 16,384-token output limit, --set reasoning_effort=...) are applied here, as graphs do
        # themselves when they resolve the model from their configuration.
        model = resolve_chat_model(
            plan.model,
            base_url=plan.base_url,
            temperature=self.context.temperature,
            max_tokens=self.context.max_tokens,
            reasoning_effort=self.context.reasoning_effort or None,
            timeout=plan.timeout,
            max_retries=plan.max_retries,
            index=index,
        )
        self.graph = build_graph(setting.graph, index=index, model=model)
        self.on_done = on_done
        self.scored: dict[str, dict[str, Any]] = {}

    def metadata(self, question: Question) -> dict[str, Any]:
        """Trace metadata of the run for one question (LangSmith shows it on the root run)."""
        return {
            "question_id": question.id,
            "setting": self.setting.key,
            "model": self.plan.model,
            "index": str(self.index.path),
            **self.setting.values,
        }

    def reference(self, question: Question) -> dict[str, Any]:
        return {"answers": list(question.answers), "gold_chunk_ids": self.gold.get(question.id, [])}

    def recorded(self, question_id: str) -> dict[str, Any] | None:
        """The record of a question of this run: written now, or read back from an earlier run."""
        return self.scored.get(question_id) or self.file.keys.get(question_id)

    def target(self, question: Question) -> dict[str, Any]:
        """Run (or replay, when already recorded) one question; returns the prediction.

        The prediction is the model's output as LangSmith shows it; the scores go to LangSmith as
        feedback (:func:`feedback_evaluators`), read from the record written here.
        """
        done = self.file.keys.get(question.id)
        if done is not None:
            return dict(done["prediction"])
        if self.write_failure is not None:  # results could not be saved: pay for no more questions
            return {"answer": "", "error": f"not run: {self.write_failure}"}
        started = time.perf_counter()
        calls = UsageMetadataCallbackHandler()  # one per run: usage of every model call, side calls too
        try:
            # The graph's invoke keeps a local evaluation (no upload) from posting its runs anywhere.
            state = self.graph.invoke(
                {"question": question.question},
                {"metadata": self.metadata(question), "callbacks": [calls]},
                context=self.context,
            )
        except Exception as exc:  # a graph bug must not stop the evaluation: record it as an error
            from arag_graph.safety import redact

            state = {"error": redact(f"graph failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")}
        prediction = scrub(prediction_of(state, calls))  # no key a model echoed reaches files or LangSmith
        if prediction["error"]:
            log.warning("%s, question %s: %s", self.setting.graph, question.id, prediction["error"])
        scores = score(prediction, self.reference(question), self.evaluators, {"question": question.question})
        record = {
            "question_id": question.id,
            "question": question.question,
            "question_type": question.type,  # for the per-type and per-hop breakdowns
            "answers": list(question.answers),
            "gold_chunk_ids": self.gold.get(question.id, []),
            "graph": self.setting.graph,
            "setting": self.setting.values,
            "setting_key": self.setting.key,
            "model": self.plan.model,
            "prediction": prediction,
            "metrics": scores.metrics,
            "feedback": scores.feedback,  # each evaluator's results with their comments, for LangSmith
            # The failure analysis tells "cap reached" from steps against the cap the run had.
            "step_cap": getattr(self.context, "max_steps", None),
            "seconds": round(time.perf_counter() - started, 3),
        }
        if scores.errors:
            record["evaluator_errors"] = scores.errors
        self.scored[question.id] = record
        try:
            self.file.add(record)
        except OSError as exc:  # a full disk, say: langsmith.evaluate would only log it and go on
            self.write_failure = exc
            return prediction
        self.on_done()
        return prediction


# ---------------------------------------------------------------------------------------------
# Execution through langsmith.evaluate


def upload_enabled(plan: EvalPlan) -> bool:
    if plan.upload is not None:
        return plan.upload
    return bool(os.environ.get("LANGSMITH_API_KEY") or os.environ.get("LANGCHAIN_API_KEY"))


def _offline_client() -> Any:
    """A LangSmith client that never touches the network (``upload_results=False`` still needs one)."""
    from langsmith import Client

    return Client(api_key="offline", api_url="http://127.0.0.1:9", auto_batch_tracing=False, info={})


def _examples(questions: Sequence[Question], dataset_id: uuid.UUID, run: SettingRun) -> list[Any]:
    from langsmith.schemas import Example

    return [
        Example(
            id=uuid.uuid5(_NAMESPACE, q.id),
            dataset_id=dataset_id,
            inputs={"question": q.question, "question_id": q.id},
            outputs=run.reference(q),
            metadata={"type": q.type},
        )
        for q in questions
    ]


def langsmith_dataset(client: Any, plan: EvalPlan, questions: Sequence[Question], gold: dict[str, list[str]]) -> str:
    """Create the LangSmith dataset for these questions, or reuse it when it already exists.

    The name carries a digest of the questions and their gold, so a reused dataset holds these
    questions; a run killed between creating the dataset and adding its examples left it short,
    so the examples it lacks are added before any experiment runs on it.
    """
    digest = hashlib.sha256(
        json.dumps([[q.id, q.question, list(q.answers), gold.get(q.id, [])] for q in questions]).encode()
    ).hexdigest()[:10]
    name = f"arag-{_slug(plan.dataset.parent.name)}-{_slug(plan.dataset.stem)}-{len(questions)}q-{digest}"
    if client.has_dataset(dataset_name=name):
        dataset = client.read_dataset(dataset_name=name)
        present = {(e.inputs or {}).get("question_id") for e in client.list_examples(dataset_id=dataset.id)}
    else:
        description = f"Questions of {plan.dataset.name} for arag-graph evaluations"
        dataset = client.create_dataset(name, description=description)
        present = set()
    missing = [q for q in questions if q.id not in present]
    if missing:
        client.create_examples(
            dataset_id=dataset.id,
            examples=[
                {
                    "inputs": {"question": q.question, "question_id": q.id},
                    "outputs": {"answers": list(q.answers), "gold_chunk_ids": gold.get(q.id, [])},
                    "metadata": {"type": q.type},
                }
                for q in missing
            ],
        )
    return name


def _stored_feedback(record: Mapping[str, Any], name: str, names: Sequence[str]) -> list[dict[str, Any]]:
    """Evaluator ``name``'s results as the record holds them (unavailable scores left out).

    A record written before records kept each evaluator's results has only its metrics: a metric is
    then given to the evaluator of its name, and the ones no evaluator is named after (a usage
    evaluator's tokens and cost) to the first evaluator, so every key still arrives once.
    """
    if isinstance(record.get("feedback"), dict):
        results = list(record["feedback"].get(name) or [])
    else:
        metrics = record.get("metrics") or {}
        keys = [k for k in metrics if k == name or (name == names[0] and k not in names)]
        results = [{"key": k, "score": metrics[k], "comment": None} for k in keys]
    error = (record.get("evaluator_errors") or {}).get(name)
    if error:  # as LangSmith records an evaluator that raised: feedback under its name, marked an error
        results.append({"key": name, "score": None, "comment": f"evaluator failed: {error}", "extra": {"error": True}})
    return [r for r in results if r.get("score") is not None or r.get("extra")]


def feedback_evaluators(run: SettingRun) -> list[Callable[[dict[str, Any]], dict[str, Any]]]:
    """One LangSmith evaluator per evaluator of the run, named after it, handing over what it scored.

    LangSmith then shows each metric as feedback from its own evaluator, with its comment (the
    judge's reason, why a metric is unavailable), as its own evaluators do. The scores themselves
    are computed once, in :meth:`SettingRun.target`, and stored with the prediction: a resumed
    evaluation replays them from the predictions file instead of paying for them (and the judge)
    again.
    """
    names = [evaluator_name(e) for e in run.evaluators]

    def make(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def evaluator(inputs: dict[str, Any]) -> dict[str, Any]:
            record = run.recorded(str(inputs.get("question_id")))
            return {"results": _stored_feedback(record, name, names) if record else []}

        evaluator.__name__ = evaluator.__qualname__ = name
        return evaluator

    return [make(name) for name in names]


def execute(
    run: SettingRun,
    questions: Sequence[Question],
    *,
    upload: bool,
    dataset_name: str | None,
    client: Any,
) -> str | None:
    """Run one (graph, setting) through ``langsmith.evaluate`` (uploaded or local).

    Returns the experiment's LangSmith URL when it was uploaded (the HTML report links to it).
    """
    from langsmith import evaluate

    by_id = {q.id: q for q in questions}

    def target(inputs: dict[str, Any]) -> dict[str, Any]:
        return run.target(by_id[inputs["question_id"]])

    common = {
        "evaluators": feedback_evaluators(run),
        "max_concurrency": run.plan.workers,
        "metadata": {"graph": run.setting.graph, "setting": run.setting.key, "model": run.plan.model},
        "experiment_prefix": f"{run.setting.graph}-{run.setting.key}",
        "client": client,
    }
    with _quiet_langsmith():
        if upload:
            assert dataset_name is not None
            results = evaluate(target, data=dataset_name, upload_results=True, **common)
            try:
                url = results.url
            except Exception:  # the link is a convenience: a server that will not say it costs nothing
                return None
            return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None
        pending = [q for q in questions if q.id not in run.file.keys]
        if pending:
            evaluate(target, data=_examples(pending, uuid.uuid4(), run), upload_results=False, **common)
    return None


_BAR = re.compile(r"\[\d+:\d{2}(:\d{2})?(<[^\]]*)?, [^\]]*(it/s|s/it|\?it/s)[^\]]*\]\s*$")
"""The end of a tqdm progress line: ``[00:21, 21.60s/it]``, ``[00:01<00:03, 2.50it/s]``."""


@contextlib.contextmanager
def _quiet_langsmith() -> Iterator[None]:
    """Keep ``langsmith.evaluate``'s console output out of ours, by public means only.

    It prints "Starting evaluation of experiment: ..." (uploading: the experiment's URL) to stdout,
    where ``arag eval`` writes only its summary, and draws a progress bar per experiment on stderr,
    which would interleave with the runner's one bar over all settings and ignore ``--quiet``. Both
    streams are captured while it runs; the runner's bar and the command's log handler were given
    the real stderr before, so they still show. Afterwards the printed lines become log records
    (the URL at info, the rest at debug: ``--quiet`` shows neither), LangSmith's bar is dropped, and
    anything else written to stderr meanwhile is passed on.
    """
    import io
    import sys

    printed, errors = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors), warnings.catch_warnings():
            # "'upload_results' parameter is in beta": true, and nothing a user of arag eval can act on.
            warnings.filterwarnings("ignore", message=".*upload_(results|runs).*")
            yield
    finally:
        for line in printed.getvalue().splitlines():
            if line.strip():
                log.log(logging.INFO if "://" in line else logging.DEBUG, "LangSmith: %s", line.strip())
        rest = [line for line in errors.getvalue().splitlines() if line.strip() and not _BAR.search(line)]
        if rest:
            sys.stderr.write("\n".join(rest) + "\n")


# ---------------------------------------------------------------------------------------------
# The whole evaluation


@contextlib.contextmanager
def _progress(total: int, enabled: bool) -> Iterator[Callable[[], None]]:
    """One bar over every question of every setting; log lines are written above it, not through it."""
    from tqdm.auto import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    redirect = logging_redirect_tqdm() if enabled else contextlib.nullcontext()
    with tqdm(total=total, desc="questions", unit="q", disable=not enabled) as bar, redirect:
        lock = threading.Lock()

        def tick() -> None:
            with lock:
                bar.update(1)

        yield tick


def run_evaluation(
    plan: EvalPlan,
    *,
    progress: bool = True,
    embeddings: Any = None,
    on_checked: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the plan and write predictions, ``summary.json``, ``summary.md`` and plots; returns summary rows.

    ``on_checked`` is called once the inputs passed their fail-fast checks (graphs, settings,
    questions, credentials, output directory, corpus present), before any work: the CLI says
    there which model runs, so that bad input prints its one error line only.
    """
    questions = check_plan(plan)
    check_out_dir(plan.out)
    check_resume(plan, None)
    if not _reuses_built_index(plan):
        find_corpus(plan.dataset, plan.corpus)
    remember_url_credentials(plan.base_url)
    settings = settings_for(plan)
    with exclusive(plan.out):
        # Read back before any work, so that a damaged predictions file is refused now, untouched.
        files = [(s, prediction_file(plan.out / PREDICTIONS / s.file_name)) for s in settings]
        for _, file in files:
            if file.set_aside:
                log.warning(
                    "%s: %d failed or incomplete record(s) moved to %s; their questions run again",
                    file.path.name,
                    file.set_aside,
                    file.rejected_path.name,
                )
        if on_checked is not None:
            on_checked()
        return _evaluate(plan, questions, files, progress, embeddings)


def _evaluate(
    plan: EvalPlan,
    questions: list[Question],
    files: list[tuple[Setting, JsonLinesFile]],
    progress: bool,
    embeddings: Any,
) -> list[dict[str, Any]]:
    from arag_graph.evaluators import default_evaluators
    from arag_graph.evaluators.html_report import write_experiment_links, write_report, write_snippets
    from arag_graph.evaluators.judge import resolve_judge
    from arag_graph.evaluators.report import summarize, write_failures, write_plots, write_summary

    index, gold = prepare_index(plan, questions, progress)
    check_resume(plan, index)
    indexes = {"": index, "cch": prepare_cch_index(plan, index, progress)}
    judge = resolve_judge(plan.judge, plan.base_url, timeout=plan.timeout, max_retries=plan.max_retries)
    evaluators = default_evaluators(
        embeddings=embeddings or index.embeddings, judge=judge, model=plan.model, chunks=index
    )
    upload = upload_enabled(plan)
    client = None if upload else _offline_client()
    dataset_name = None
    if upload:
        from langsmith import Client

        client = Client()
        dataset_name = langsmith_dataset(client, plan, questions, gold)

    runs = [SettingRun(plan, setting, indexes[setting.index], gold, evaluators, file=file) for setting, file in files]
    pending = sum(1 for run in runs for q in questions if q.id not in run.file.keys)
    links: dict[tuple[str, str], str] = {}
    with _progress(pending, progress) as tick:
        for run in runs:
            run.on_done = tick
            url = execute(run, questions, upload=upload, dataset_name=dataset_name, client=client)
            if url:
                links[(run.setting.graph, run.setting.key)] = url
            if run.write_failure is not None:
                raise run.write_failure
    if upload:
        client.flush()  # runs go up from a background thread; the process may exit right after
    types = {q.id: q.type for q in questions}
    records = [r for run in runs for qid, r in run.file.keys.items() if qid in types]
    for record in records:  # records written before types were recorded still get theirs
        record.setdefault("question_type", types[record["question_id"]])
    orders = plan_settings(plan)[1]  # each swept setting's values in the order asked for
    rows = summarize(records, orders)
    write_summary(rows, plan.out)
    write_failures(records, plan.out)
    write_plots(rows, plan.out, orders)
    if plan.grid:
        from arag_graph.evaluators.grid import write_grid

        write_grid(plan.grid, rows, plan_settings(plan)[0], plan.model, plan.out)
    write_experiment_links(plan.out, links)
    write_snippets(plan.out, records, [i for i in indexes.values() if i is not None])
    write_report(plan.out, records)
    return rows


def load_records(out: Path) -> list[dict[str, Any]]:
    """Every scored record under ``out/predictions``, failed runs included (for reports and tests).

    Reading only: unlike opening a file to resume it, nothing is set aside or rewritten; a line cut
    short by a kill and an incomplete record are skipped.
    """
    records: list[dict[str, Any]] = []
    for path in sorted((out / PREDICTIONS).glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if _is_prediction(record) and _is_scored(record):
                records.append(record)
    return records


def failed_everywhere(rows: Sequence[Mapping[str, Any]], out: Path) -> str | None:
    """When every run of the evaluation ended in an error: one line saying so with the first error; else None."""
    total = sum(int(row.get("n") or 0) for row in rows)
    if not total or any(int(row.get("errors") or 0) < int(row.get("n") or 0) for row in rows):
        return None
    first = next((r["prediction"]["error"] for r in load_records(out) if r["prediction"].get("error")), "")
    return f"every run of the evaluation failed ({total} of {total}), e.g. {first}"
