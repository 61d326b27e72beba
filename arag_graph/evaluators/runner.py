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
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import UsageMetadataCallbackHandler

from arag_graph.core.jsonl import JsonLinesFile, scrub
from arag_graph.core.safety import remember_url_credentials
from arag_graph.evaluators.eval_index import (
    prepare_cch_index,
    prepare_index,
    prepare_variant_indexes,
    reuses_built_index,
)
from arag_graph.evaluators.plan import (
    EvalPlan,
    Setting,
    check_plan,
    find_corpus,
    plan_settings,
    settings_for,
    with_profile,
)
from arag_graph.evaluators.plots import write_plots
from arag_graph.evaluators.predictions import (
    PREDICTIONS,
    check_out_dir,
    check_resume,
    exclusive,
    load_records,
    prediction_file,
)
from arag_graph.evaluators.scoring import score
from arag_graph.evaluators.upload import execute, langsmith_dataset, offline_client, upload_enabled
from arag_graph.qa.datasets import Question
from arag_graph.registry import config_for

log = logging.getLogger(__name__)


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
        # The final message as the model wrote it, which Answer Relevance judges (the parsed short
        # answer alone, "1889", would not say what question it addresses).
        "response": final_response(state.get("messages") or []),
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


def final_response(messages: Sequence[Any]) -> str:
    """The text of the run's last AI message: the whole final answer, before its ``Answer:`` line is parsed."""
    last = next((m for m in reversed(messages) if getattr(m, "type", None) == "ai"), None)
    return last.text if last is not None else ""


_STEP_DETAILS = ("sub_answer", "reasoning")
_CHAIN_RUN_FIELDS = (
    "id", "role", "parent", "wave", "sample", "steps", "stop_reason", "penalty", "penalty_scorer", "score", "selected"
)  # fmt: skip
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
    if state.get("penalty_scorer"):
        out["penalty_scorer"] = state["penalty_scorer"]
    if state.get("sampled_chains"):
        out["sampled_chains"] = [{k: run[k] for k in _CHAIN_RUN_FIELDS if k in run} for run in state["sampled_chains"]]
    if state.get("sub_questions"):
        out["sub_questions"] = [
            {k: record[k] for k in _SUB_QUESTION_FIELDS if k in record} for record in state["sub_questions"]
        ]
    if state.get("table"):
        out["table"] = [dict(row) for row in state["table"]]
    return out


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
        from arag_graph.llm.models import resolve_chat_model
        from arag_graph.registry import build_graph
        from arag_graph.run.runtime import model_settings

        self.plan, self.setting, self.index, self.gold, self.evaluators = plan, setting, index, gold, evaluators
        self.file = file or prediction_file(plan.out / PREDICTIONS / setting.file_name)
        self.write_failure: OSError | None = None
        values = {"top_k": plan.top_k, "model": plan.model, "base_url": plan.base_url, "profile": plan.profile}
        self.context = config_for(setting.graph, **{**values, **setting.values})  # --set values are in setting
        # Graphs use a model instance as given, so the run's sampling settings (temperature 0, the
        # 16,384-token output limit, --set reasoning_effort=...) are applied here, as graphs do
        # themselves when they resolve the model from their configuration.
        model = resolve_chat_model(
            plan.model,
            base_url=plan.base_url,
            **model_settings(self.context),
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
            from arag_graph.core.safety import redact

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
            "profile": self.plan.profile,
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
    progress: bool = False,
    embeddings: Any = None,
    on_checked: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the plan and write predictions, ``summary.json``, ``summary.md`` and plots; returns summary rows.

    ``on_checked`` is called once the inputs passed their fail-fast checks (graphs, settings,
    questions, credentials, output directory, corpus present), before any work: the CLI says
    there which model runs, so that bad input prints its one error line only.
    """
    plan = with_profile(plan)
    questions = check_plan(plan)
    check_out_dir(plan.out)
    check_resume(plan, None)
    if not reuses_built_index(plan):
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


def _runs_inputs(
    plan: EvalPlan,
    questions: list[Question],
    files: list[tuple[Setting, JsonLinesFile]],
    progress: bool,
    embeddings: Any,
    index: Any,
    gold: dict[str, list[str]],
) -> tuple[dict[str, Any], dict[str, dict[str, list[str]]], dict[str, list[Callable[..., Any]]]]:
    """Per index a setting runs on (``""``, ``"cch"``, a plan's variants): the index, its questions'
    gold chunk ids and the evaluators that score runs on it."""
    from arag_graph.evaluators import default_evaluators
    from arag_graph.evaluators.judge import resolve_judge

    indexes = {"": index, "cch": prepare_cch_index(plan, index, progress)}
    golds = {"": gold, "cch": gold}  # contextual headers change no chunk: the same gold ids
    for name, (variant, variant_gold) in prepare_variant_indexes(plan, index, questions, progress).items():
        indexes[name], golds[name] = variant, variant_gold
    judge = resolve_judge(plan.judge, plan.base_url, timeout=plan.timeout, max_retries=plan.max_retries)
    # Answer similarity compares answers with the evaluation's encoder on every row; the judged metrics
    # read the passages of the index the row ran on (a variant's chunk ids are its own).
    scorers = {
        key: default_evaluators(
            embeddings=embeddings or index.embeddings, judge=judge, model=plan.model, chunks=indexes[key] or index
        )
        for key in dict.fromkeys(s.index for s, _ in files)
    }
    return indexes, golds, scorers


def _evaluate(
    plan: EvalPlan,
    questions: list[Question],
    files: list[tuple[Setting, JsonLinesFile]],
    progress: bool,
    embeddings: Any,
) -> list[dict[str, Any]]:
    from arag_graph.evaluators.html_report import write_experiment_links, write_report, write_snippets
    from arag_graph.evaluators.report import summarize, write_failures, write_summary

    index, gold = prepare_index(plan, questions, progress)
    check_resume(plan, index)
    indexes, golds, scorers = _runs_inputs(plan, questions, files, progress, embeddings, index, gold)
    upload = upload_enabled(plan)
    client = None if upload else offline_client()
    dataset_name = None
    if upload:
        from langsmith import Client

        client = Client()
        dataset_name = langsmith_dataset(client, plan, questions, gold)

    runs = [
        SettingRun(plan, setting, indexes[setting.index], golds[setting.index], scorers[setting.index], file=file)
        for setting, file in files
    ]
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
    for row in rows:
        row["profile"] = plan.profile
    write_summary(rows, plan.out, profile=plan.profile)
    write_failures(records, plan.out)
    write_plots(rows, plan.out, orders)
    if plan.grid:
        from arag_graph.evaluators.grid import write_grid

        write_grid(plan.grid, rows, plan_settings(plan)[0], plan.model, plan.out)
    write_experiment_links(plan.out, links)
    write_snippets(plan.out, records, [i for i in indexes.values() if i is not None])
    write_report(plan.out, records)
    return rows


def failed_everywhere(rows: Sequence[Mapping[str, Any]], out: Path) -> str | None:
    """When every run of the evaluation ended in an error: one line saying so with the first error; else None."""
    total = sum(int(row.get("n") or 0) for row in rows)
    if not total or any(int(row.get("errors") or 0) < int(row.get("n") or 0) for row in rows):
        return None
    first = next((r["prediction"]["error"] for r in load_records(out) if r["prediction"].get("error")), "")
    return f"every run of the evaluation failed ({total} of {total}), e.g. {first}"
