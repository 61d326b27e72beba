"""Execution through ``langsmith.evaluate``: LangSmith experiments with a key, the same call locally without.

Scores are computed once by the evaluators and stored in the record; LangSmith receives them from
there as feedback, one LangSmith evaluator per evaluator, while the run's outputs are the prediction.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from arag_graph.core.jsonl import JsonLinesFile
from arag_graph.evaluators.plan import EvalPlan, Setting, slug
from arag_graph.evaluators.scoring import evaluator_name
from arag_graph.qa.datasets import Question

log = logging.getLogger(__name__)


class TargetRun(Protocol):
    """What execution hands this module of one (graph, setting) run.

    :class:`~arag_graph.evaluators.runner.SettingRun` is one; a protocol keeps this module below execution.
    """

    plan: EvalPlan
    setting: Setting
    evaluators: Sequence[Callable[..., Any]]
    file: JsonLinesFile

    def reference(self, question: Question) -> dict[str, Any]: ...

    def recorded(self, question_id: str) -> dict[str, Any] | None: ...

    def target(self, question: Question) -> dict[str, Any]: ...


_NAMESPACE = uuid.UUID("6f1c2a5e-8f0b-4d1e-9a57-3b2d7c4e9a10")  # example ids derive from question ids


def upload_enabled(plan: EvalPlan) -> bool:
    if plan.upload is not None:
        return plan.upload
    return bool(os.environ.get("LANGSMITH_API_KEY") or os.environ.get("LANGCHAIN_API_KEY"))


def offline_client() -> Any:
    """A LangSmith client that never touches the network (``upload_results=False`` still needs one)."""
    from langsmith import Client

    return Client(api_key="offline", api_url="http://127.0.0.1:9", auto_batch_tracing=False, info={})


def _examples(questions: Sequence[Question], dataset_id: uuid.UUID, run: TargetRun) -> list[Any]:
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
    name = f"arag-{slug(plan.dataset.parent.name)}-{slug(plan.dataset.stem)}-{len(questions)}q-{digest}"
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


def feedback_evaluators(run: TargetRun) -> list[Callable[[dict[str, Any]], dict[str, Any]]]:
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
    run: TargetRun,
    questions: Sequence[Question],
    *,
    upload: bool,
    dataset_name: str | None,
    client: Any,
) -> str | None:
    """Run one (graph, setting) through ``langsmith.evaluate`` (uploaded or local).

    Returns the experiment's LangSmith URL when it was uploaded (the HTML report links to it).
    """
    from langsmith import evaluate, traceable

    by_id = {q.id: q for q in questions}
    described = {"graph": run.setting.graph, "setting": run.setting.key, "model": run.plan.model}

    # The root run of each example is the graph's (not langsmith's default "Target"), tagged and
    # described by the setting, so an experiment's traces say which graph and settings they ran.
    @traceable(
        name=run.setting.graph,
        run_type="chain",
        tags=[run.setting.graph, f"setting:{run.setting.key}"],
        metadata={**described, **{f"setting.{k}": v for k, v in run.setting.values.items()}},
    )
    def target(inputs: dict[str, Any]) -> dict[str, Any]:
        return run.target(by_id[inputs["question_id"]])

    common = {
        "evaluators": feedback_evaluators(run),
        "max_concurrency": run.plan.workers,
        "metadata": described,
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
