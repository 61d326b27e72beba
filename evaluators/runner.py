"""``arag eval``: run graphs over a QA dataset, score them, resume after a kill, report.

How a run is organised:

- Everything that can be checked is checked before any work (files, graph names, model and judge
  credentials, whether the corpus holds every question's supporting passages).
- The index is built once per corpus and reused while its corpus hash matches.
- Each (graph, setting) writes ``predictions/<graph>__<setting>.jsonl``, one record per question,
  appended as soon as the question is done. A killed run started again with the same arguments
  reads these files back and runs only the missing questions: none is lost or counted twice.
- Execution goes through ``langsmith.evaluate``: with a LangSmith key the runs and scores become an
  experiment per (graph, setting) on a dataset created (or reused) from the questions; without one
  the same call runs locally with ``upload_results=False``. Scores are computed once, by the
  evaluators in :mod:`arag_graph.evaluators`, and stored in the record; LangSmith receives them from there.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import UsageMetadataCallbackHandler

from arag_graph.datasets import Question, gold_chunk_ids, load_questions, missing_support, passage_maps
from arag_graph.errors import AragError, DatasetError
from arag_graph.registry import config_for, get_graph_spec

RUN_FILE = "run.json"
PREDICTIONS = "predictions"
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


@dataclass(frozen=True)
class Setting:
    """One configuration of one graph in the evaluation (a point of a sweep)."""

    graph: str
    values: dict[str, Any]

    @property
    def key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.values.items())) or "default"

    @property
    def file_name(self) -> str:
        return f"{self.graph}__{self.key.replace('=', '-').replace(',', '_')}.jsonl"


# ---------------------------------------------------------------------------------------------
# Planning and fail-fast checks


def settings_for(plan: EvalPlan) -> list[Setting]:
    """Every (graph, setting) to run; a step-cap sweep applies to the graphs that have a step cap."""
    out: list[Setting] = []
    for name in plan.graphs:
        fields = get_graph_spec(name).config.model_fields
        # --set values the graph has are part of its setting, so tables and file names show them.
        base = {k: v for k, v in plan.extra_context.items() if k in fields}
        caps = plan.max_steps if (plan.max_steps and "max_steps" in fields) else [None]
        for cap in caps:
            out.append(Setting(name, base if cap is None else {**base, "max_steps": cap}))
    return out


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

    if plan.model != OFFLINE:
        resolve_chat_model(plan.model, base_url=plan.base_url)  # raises a one-line ModelSpecError
    if plan.judge:
        from arag_graph.evaluators.judge import resolve_judge

        resolve_judge(plan.judge, plan.base_url)


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
    if not plan.graphs:
        raise AragError("no graphs given; use --graphs arag,naive_rag,...")
    for name in plan.graphs:
        get_graph_spec(name)
    if plan.workers < 1:
        raise AragError(f"--workers {plan.workers} must be at least 1")
    if plan.max_steps is not None and any(s < 1 for s in plan.max_steps):
        raise AragError(f"--max-steps {plan.max_steps}: step caps must be positive integers, e.g. 5,10,15,20")
    check_settings(plan)
    questions = load_plan_questions(plan)
    _check_credentials(plan)
    return questions


_RESERVED = {"model": "--model", "base_url": "--base-url", "top_k": "--top-k", "max_steps": "--max-steps"}
_RESERVED |= {"index_path": "--index"}


def check_settings(plan: EvalPlan) -> None:
    """``--set KEY=VALUE`` values: a field of some chosen graph, valid for every graph that has it.

    A value a graph cannot take (``tools=bogus``) would otherwise fail once per question, deep in
    the run; the graphs' own configuration classes coerce and check it here instead.
    """
    if not plan.extra_context:
        return
    for key, flag in _RESERVED.items():
        if key in plan.extra_context:
            raise AragError(f"--set {key}=...: use {flag} for that")
    known: set[str] = set()
    for name in plan.graphs:
        known |= set(get_graph_spec(name).config.model_fields)
    unknown = sorted(set(plan.extra_context) - known)
    if unknown:
        raise AragError(
            f"--set {unknown[0]}: none of the graphs {', '.join(plan.graphs)} has that setting; "
            f"choose from {', '.join(sorted(known - set(_RESERVED)))}"
        )
    for name in plan.graphs:
        config_for(name, **plan.extra_context)  # raises a one-line AragError naming the field


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
    from arag_graph.embedding_models import resolve_embeddings
    from arag_graph.embeddings import embedding_model_id
    from arag_graph.index import build_index, corpus_hash, load_index

    if _reuses_built_index(plan):
        index = load_index(plan.index, cache=True)
        chunks = index.store.chunks
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
        target = plan.index or cache_dir() / "indexes" / f"{slug}-{digest[:12]}"
        with contextlib.suppress(AragError):
            existing = load_index(target, cache=True)
            if existing.manifest.corpus_hash == digest and existing.manifest.embedding_model == model_id:
                index = existing
        if index is None:
            build_index(chunks, target, embeddings=embeddings, progress=progress)
            index = load_index(target, cache=True)
    gold = {q.id: list(gold_chunk_ids(q, title_to_ids, text_to_ids)) for q in questions}
    return index, gold


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in text).strip("-") or "corpus"


# ---------------------------------------------------------------------------------------------
# Resumable prediction files


class PredictionFile:
    """One JSON Lines file of records, appended under a lock, read back on resume.

    A run killed while writing can leave a torn last line; opening the file drops it (and any
    duplicate question) by rewriting the file atomically, so appends always start on a clean line.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.records: dict[str, dict[str, Any]] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            self._recover()

    def _recover(self) -> None:
        raw = self.path.read_bytes()
        clean: list[bytes] = []
        for line in raw.split(b"\n"):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a torn line from a kill mid-write
            qid = record.get("question_id")
            if isinstance(qid, str) and qid not in self.records:
                self.records[qid] = record
                clean.append(line)
        rewritten = b"".join(line + b"\n" for line in clean)
        if rewritten != raw:
            tmp = self.path.with_suffix(".jsonl.tmp")
            tmp.write_bytes(rewritten)
            os.replace(tmp, self.path)

    def add(self, record: dict[str, Any]) -> bool:
        """Append ``record`` unless its question is already there; False when it was."""
        with self.lock:
            qid = record["question_id"]
            if qid in self.records:
                return False
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            self.records[qid] = record
            return True


def _fingerprint(plan: EvalPlan, index: Any | None) -> dict[str, Any]:
    """What must not change between a run and its resumption (without ``index``: what is known before it)."""
    known = {
        "dataset_sha256": hashlib.sha256(plan.dataset.read_bytes()).hexdigest(),
        "model": plan.model,
        "judge": plan.judge,
        "top_k": plan.top_k,
        "context": plan.extra_context,
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
    if run_file.exists():
        try:
            previous = json.loads(run_file.read_text(encoding="utf-8")).get("fingerprint", {})
        except ValueError:
            previous = {}
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
    tmp = run_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, run_file)


def _plan_dict(plan: EvalPlan) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(plan).items()}


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
            for step in state.get("trajectory") or []
        ],
        "error": state.get("error"),
        # CoRAG/SRAG note here each structured step that fell back to its safe value (a provider
        # refusing the schema would otherwise degrade a whole comparison without a trace).
        "warnings": [str(w) for w in state.get("warnings") or []],
        "usage": _usage(state.get("messages") or [], calls),
    }


def _takes_inputs(evaluator: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(evaluator).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "inputs" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def score(
    prediction: dict[str, Any],
    reference: dict[str, Any],
    evaluators: Sequence[Callable[..., Any]],
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run each evaluator once; a key whose evaluator fails is recorded as None, never guessed.

    ``inputs`` (the example's ``{"question": ...}``) goes to the evaluators that take it, as
    ``langsmith.evaluate`` would pass it: the LLM judge grades against the question it was asked.
    """
    metrics: dict[str, Any] = {}
    for evaluator in evaluators:
        try:
            if inputs is not None and _takes_inputs(evaluator):
                result = evaluator(outputs=prediction, reference_outputs=reference, inputs=inputs)
            else:
                result = evaluator(outputs=prediction, reference_outputs=reference)
        except Exception:
            name = getattr(evaluator, "__name__", "metric").removesuffix("_evaluator")
            metrics.setdefault(name, None)
            continue
        for item in result.get("results", [result]) if isinstance(result, dict) else result:
            metrics[item["key"]] = item.get("score")
    return metrics


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
    ) -> None:
        from arag_graph.models import resolve_chat_model
        from arag_graph.registry import build_graph

        self.plan, self.setting, self.index, self.gold, self.evaluators = plan, setting, index, gold, evaluators
        self.file = PredictionFile(plan.out / PREDICTIONS / setting.file_name)
        values = {"top_k": plan.top_k, "model": plan.model, "base_url": plan.base_url}
        self.context = config_for(setting.graph, **{**values, **plan.extra_context, **setting.values})
        # Graphs use a model instance as given, so the run's sampling settings (temperature 0, the
        # 16,384-token output limit, --set reasoning_effort=...) are applied here, as graphs do
        # themselves when they resolve the model from their configuration.
        model = resolve_chat_model(
            plan.model,
            base_url=plan.base_url,
            temperature=self.context.temperature,
            max_tokens=self.context.max_tokens,
            reasoning_effort=self.context.reasoning_effort or None,
            index=index,
        )
        self.graph = build_graph(setting.graph, index=index, model=model)
        self.on_done = on_done

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

    def target(self, question: Question) -> dict[str, Any]:
        """Run (or replay, when already recorded) one question; returns the prediction with its metrics."""
        done = self.file.records.get(question.id)
        if done is not None:
            return {**done["prediction"], "metrics": done["metrics"]}
        from arag_graph.evaluators.judge import local_tracing_guard

        started = time.perf_counter()
        calls = UsageMetadataCallbackHandler()  # one per run: usage of every model call, side calls too
        try:
            # Local evaluation (no upload): no LangChainTracer may post the graph's runs anywhere.
            with local_tracing_guard():
                state = self.graph.invoke(
                    {"question": question.question},
                    {"metadata": self.metadata(question), "callbacks": [calls]},
                    context=self.context,
                )
        except Exception as exc:  # a graph bug must not stop the evaluation: record it as an error
            from arag_graph.safety import redact

            state = {"error": redact(f"graph failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")}
        prediction = prediction_of(state, calls)
        metrics = score(prediction, self.reference(question), self.evaluators, {"question": question.question})
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
            "metrics": metrics,
            # The failure analysis tells "cap reached" from steps against the cap the run had.
            "step_cap": getattr(self.context, "max_steps", None),
            "seconds": round(time.perf_counter() - started, 3),
        }
        self.file.add(record)
        self.on_done()
        return {**prediction, "metrics": metrics}


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


def stored_metrics(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    """Hands LangSmith the scores the runner already computed and stored (no second computation).

    Unavailable metrics (None, such as LLM-Acc without a judge) are left out, never sent as zero.
    """
    metrics = outputs.get("metrics") or {}
    return {"results": [{"key": k, "score": v} for k, v in metrics.items() if v is not None]}


def execute(
    run: SettingRun,
    questions: Sequence[Question],
    *,
    upload: bool,
    dataset_name: str | None,
    client: Any,
) -> None:
    """Run one (graph, setting) through ``langsmith.evaluate`` (uploaded or local)."""
    from langsmith import evaluate

    by_id = {q.id: q for q in questions}

    def target(inputs: dict[str, Any]) -> dict[str, Any]:
        return run.target(by_id[inputs["question_id"]])

    common = {
        "evaluators": [stored_metrics],
        "max_concurrency": run.plan.workers,
        "metadata": {"graph": run.setting.graph, "setting": run.setting.key, "model": run.plan.model},
        "experiment_prefix": f"{run.setting.graph}-{run.setting.key}",
        "client": client,
    }
    with _quiet_langsmith():
        if upload:
            assert dataset_name is not None
            evaluate(target, data=dataset_name, upload_results=True, **common)
        else:
            pending = [q for q in questions if q.id not in run.file.records]
            if pending:
                evaluate(target, data=_examples(pending, uuid.uuid4(), run), upload_results=False, **common)


@contextlib.contextmanager
def _quiet_langsmith() -> Iterator[None]:
    """Keep ``langsmith.evaluate``'s console output out of the way of ours.

    It prints "Starting evaluation of experiment" (or the experiment's URL) to stdout, where
    ``arag eval`` writes only its summary, so that goes to stderr; and it shows its own progress
    bar per experiment, which would interleave with the runner's single bar over all settings (and
    ignore ``--quiet``), so its tqdm is replaced by a pass-through. ``_load_tqdm`` is private: when
    a langsmith release renames it, only the extra bar comes back.
    """
    import sys

    from langsmith.evaluation import _runner

    original = getattr(_runner, "_load_tqdm", None)
    if original is not None:
        _runner._load_tqdm = lambda: lambda items: items
    try:
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
            # "'upload_results' parameter is in beta": true, and nothing a user of arag eval can act on.
            warnings.filterwarnings("ignore", message=".*upload_results.*")
            yield
    finally:
        if original is not None:
            _runner._load_tqdm = original


# ---------------------------------------------------------------------------------------------
# The whole evaluation


@contextlib.contextmanager
def _progress(total: int, enabled: bool) -> Iterator[Callable[[], None]]:
    from tqdm.auto import tqdm

    with tqdm(total=total, desc="questions", unit="q", disable=not enabled) as bar:
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
    from arag_graph.evaluators import default_evaluators
    from arag_graph.evaluators.judge import resolve_judge
    from arag_graph.evaluators.report import summarize, write_failures, write_plots, write_summary

    questions = check_plan(plan)
    check_resume(plan, None)
    if not _reuses_built_index(plan):
        find_corpus(plan.dataset, plan.corpus)
    if on_checked is not None:
        on_checked()
    settings = settings_for(plan)
    index, gold = prepare_index(plan, questions, progress)
    check_resume(plan, index)
    judge = resolve_judge(plan.judge, plan.base_url) if plan.judge else None
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

    runs = [SettingRun(plan, setting, index, gold, evaluators) for setting in settings]
    pending = sum(1 for run in runs for q in questions if q.id not in run.file.records)
    with _progress(pending, progress) as tick:
        for run in runs:
            run.on_done = tick
            execute(run, questions, upload=upload, dataset_name=dataset_name, client=client)
    if upload:
        client.flush()  # runs go up from a background thread; the process may exit right after
    types = {q.id: q.type for q in questions}
    records = [r for run in runs for qid, r in run.file.records.items() if qid in types]
    for record in records:  # records written before types were recorded still get theirs
        record.setdefault("question_type", types[record["question_id"]])
    rows = summarize(records)
    write_summary(rows, plan.out)
    write_failures(records, plan.out)
    write_plots(rows, plan.out)
    return rows


def load_records(out: Path) -> list[dict[str, Any]]:
    """Every record under ``out/predictions`` (for reports and tests)."""
    records: list[dict[str, Any]] = []
    for path in sorted((out / PREDICTIONS).glob("*.jsonl")):
        records.extend(PredictionFile(path).records.values())
    return records
