"""Prediction files, the output directory and resuming: one evaluation at a time, nothing paid twice.

Each (graph, setting) writes ``predictions/<graph>__<setting>.jsonl``, one record per question,
appended as soon as the question is done. A killed run started again with the same arguments reads
these files back and runs only the missing questions. The output directory is arag's alone:
``--out`` must be new, empty, or an earlier evaluation's (it has ``run.json``); one evaluation at a
time writes into it (``.arag-eval.lock``); a run resumes only into results made with the same
settings (:func:`check_resume`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from arag_graph.core.errors import AragError
from arag_graph.core.jsonl import JsonLinesFile, dumps, replace_file
from arag_graph.core.safety import url_without_credentials
from arag_graph.evaluators.plan import EvalPlan, plan_settings

log = logging.getLogger(__name__)

RUN_FILE = "run.json"
PREDICTIONS = "predictions"
LOCK_FILE = ".arag-eval.lock"


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
    _refuse_links(out)
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


def _refuse_links(out: Path) -> None:
    """Refuse an ``--out`` holding a symbolic link where arag reads and writes (its top level and
    ``predictions/``): a linked ``predictions/`` would make arag resume from, set aside and append to
    files elsewhere. ``--out`` itself may be a link; the user named it."""
    for folder in (out, out / PREDICTIONS):
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise AragError(f"--out {out}: {folder} cannot be read ({exc.strerror or exc})") from None
        for entry in entries:
            if entry.is_symlink():
                raise AragError(
                    f"--out {out} holds a symbolic link, {entry.path}, and arag follows no link in its results; "
                    "remove it or use another --out"
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


# What of an index changes what its searches return, hence an evaluation's results: the corpus,
# how it was chunked and embedded (model, backend, endpoint, headers) and matched by keyword.
INDEX_FINGERPRINT_FIELDS = (
    "corpus_hash",
    "embedding_model",
    "encoder",
    "embedding_base_url",
    "embedding_dim",
    "chunk_size",
    "contextual_headers",
    "header_max_chars",
    "header_style",
    "keyword_match",
    "embedding_prompts",  # query/document instructions of the encoder (E5, BGE, Qwen3-Embedding)
)


def _fingerprint(plan: EvalPlan, index: Any | None) -> dict[str, Any]:
    """Every setting that changes an evaluation's results, which must not change between a run and
    its resumption (without ``index``: what is known before it is loaded).

    The one list of them: the dataset, the model, the judge, top-k, the fixed context values, the
    profile (:mod:`arag_graph.core.profiles`), and the index's settings
    (:data:`INDEX_FINGERPRINT_FIELDS`, whether its sentence search is exact or HNSW, who wrote its
    summaries). Sweeps are left out, as --max-steps is: a rerun may add values, each to its own file.
    """
    known = {
        "dataset_sha256": hashlib.sha256(plan.dataset.read_bytes()).hexdigest(),
        "model": plan.model,
        "judge": plan.judge,
        "top_k": plan.top_k,
        "context": plan_settings(plan)[0],
        "profile": plan.profile,
    }
    if index is not None:
        manifest = index.manifest
        known |= {name: getattr(manifest, name, None) for name in INDEX_FINGERPRINT_FIELDS}
        if known["embedding_base_url"]:
            known["embedding_base_url"] = url_without_credentials(known["embedding_base_url"])
        mode = (manifest.chroma or {}).get("mode")
        known["sentence_search"] = "exact" if mode == "matrix" else "hnsw"
        known["summaries"] = ((manifest.extra or {}).get("summaries") or {}).get("model")
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
        previous = {"profile": "package", **meta["fingerprint"]}  # runs from before profiles: the package's
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
