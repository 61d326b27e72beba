"""Rejection sampling of CoRAG chains: the paper's recipe for chain-of-retrieval training data.

For every QA pair, sample ``n`` retrieval chains with the ``corag`` graph at a temperature above
zero, keep the chains whose final answer matches a gold alias (Contain-Acc's substring rule or
CoRAG's exact match), and append each kept chain as one JSON Lines record: the question and its
gold answers, the chain of query/sub-answer pairs (each step's sub-answer, what the step's
documents say about its query, with its penalty; beside it the sufficiency check's reasoning and
verdict) and chunk IDs, and the final answer with its citations. The match is
:mod:`arag_graph.qa.matching`' (the library's, which the evaluators use too; the library never
imports the evaluation package).

Runs are resumable. After a question is done, a line ``{"id", "sampled", "kept", "failed"}`` goes
to a progress file beside the output (``chains.jsonl`` -> ``chains.progress.jsonl``); a later run
with ``resume=True`` skips the questions named there or in the output, so an interrupted run picks
up where it stopped and never writes a question's chains twice. Both are JSON Lines files
(:class:`arag_graph.core.jsonl.JsonLinesFile`): output is only appended to, a line cut short by a kill
is dropped, and a file that holds anything but this command's records (someone else's JSON Lines,
a directory) is refused with one line before any chain is sampled, and left as it was.

Temperature: a model given as a spec string (``gpt-4o-mini``) is created at the sampling
temperature; a model instance is copied with its ``temperature`` field set when it has one
(``ChatOpenAI`` and most LangChain chat models do). The offline policy and models without such a
field are deterministic or sample as they were built; :attr:`RejectionStats.temperature_applied`
says so, and records carry ``"temperature": null``. Reasoning models (``reasoning_effort`` set)
take no temperature either.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel

from arag_graph.corag.context import CoragContext
from arag_graph.corag.graph import build_corag_graph
from arag_graph.core.errors import AragError
from arag_graph.core.jsonl import JsonLinesFile
from arag_graph.llm.models import OFFLINE
from arag_graph.qa.datasets import Question
from arag_graph.qa.matching import contain_match, exact_match
from arag_graph.run.runtime import IndexLike

__all__ = ["MatchRule", "RejectionStats", "chain_record", "open_outputs", "progress_path", "rejection_sample"]

MatchRule = Literal["contain", "em"]
MATCH_RULES: tuple[str, ...] = ("contain", "em")


@dataclass
class RejectionStats:
    """What a rejection-sampling run did (counts cover this run only, not earlier resumed ones)."""

    out: str
    progress: str
    questions: int = 0
    """Questions given."""
    skipped: int = 0
    """Questions already done by an earlier run (``resume=True``)."""
    chains: int = 0
    """Chains sampled."""
    kept: int = 0
    """Chains whose answer matched and that were written."""
    questions_with_kept: int = 0
    failed: int = 0
    """Chains that ended with an error (a failing model, say) or raised; never kept."""
    temperature_applied: bool = True
    """False when the model could not be set to the sampling temperature (see the module doc)."""

    @property
    def acceptance_rate(self) -> float:
        return self.kept / self.chains if self.chains else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "acceptance_rate": round(self.acceptance_rate, 4)}


def _is_chain(record: object) -> bool:
    return isinstance(record, dict) and {"id", "chain", "final_answer"} <= record.keys()


def _is_progress(record: object) -> bool:
    return isinstance(record, dict) and {"id", "sampled"} <= record.keys()


def open_outputs(out: str | os.PathLike[str]) -> tuple[JsonLinesFile, JsonLinesFile]:
    """The chains file and its progress file, read back for resuming.

    Raises the one-line :class:`AragError` for a path that is a directory, or a file that holds
    anything but records this command wrote (nothing in it is changed). Cheap, so the CLI calls it
    before it loads an index.
    """
    path = Path(out)
    fix = "choose another --out (sample-chains writes only its own chains files)"
    chains = JsonLinesFile(
        path,
        key="id",
        owns=_is_chain,
        complete=lambda r: isinstance(r.get("chain"), list),
        unique=False,  # n chains per question
        what="a chain record of arag sample-chains",
        fix=fix,
    )
    progress = JsonLinesFile(
        progress_path(path), key="id", owns=_is_progress, what="a progress line of arag sample-chains", fix=fix
    )
    return chains, progress


def progress_path(out: str | os.PathLike[str]) -> Path:
    """The progress file kept beside ``out`` (``chains.jsonl`` -> ``chains.progress.jsonl``)."""
    path = Path(out)
    return path.with_name(f"{path.stem}.progress.jsonl")


def chain_record(
    question: Question, output: Mapping[str, Any], *, sample: int, match: MatchRule, temperature: float | None
) -> dict[str, Any]:
    """One training record from a ``corag`` run's output."""
    chain = list(output.get("chain") or [])
    steps = [
        {
            "step": link.get("step"),
            "query": link.get("query", ""),
            "sub_answer": link.get("sub_answer", ""),
            "penalty": link.get("penalty"),
            "reasoning": link.get("reasoning", ""),
            "is_sufficient": link.get("is_sufficient"),
            "missing_info": link.get("missing_info", ""),
            "confidence": link.get("confidence"),
            "chunk_ids": list(link.get("chunk_ids") or []),
            "new_chunk_ids": list(link.get("new_chunk_ids") or []),
        }
        for link in chain
    ]
    retrieved = list(dict.fromkeys(cid for link in chain for cid in link.get("new_chunk_ids") or []))
    return {
        "id": question.id,
        "question": question.question,
        "answers": list(question.answers),
        "sample": sample,
        "queries": [s["query"] for s in steps],
        "chain": steps,
        "retrieved_chunk_ids": retrieved,
        "context_chunk_ids": list(output.get("context_chunks") or []),
        "final_answer": output.get("answer", ""),
        "citations": list(output.get("citations") or []),
        "stop_reason": output.get("stop_reason", ""),
        "steps": output.get("steps", len(steps)),
        "match": match,
        "temperature": temperature,
    }


def check_settings(
    *, n: int, temperature: float, max_steps: int, match: str, context: Mapping[str, Any] | None = None
) -> CoragContext:
    """The chains' configuration, or the one-line :class:`AragError` of a setting that cannot work.

    Separate from :func:`rejection_sample` so the CLI can check everything before it prints a line.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise AragError(f"rejection sampling needs n >= 1 chains per question, got {n!r}")
    if not (math.isfinite(temperature) and 0 < temperature <= 2):  # NaN fails this test too
        raise AragError(
            f"rejection sampling needs a temperature above zero (at most 2) to get different chains, got "
            f"{temperature}; use for example 0.7"
        )
    if match not in MATCH_RULES:
        raise AragError(f"unknown match rule {match!r}; use 'contain' (Contain-Acc) or 'em' (exact match)")
    return CoragContext.trusted(**{**(context or {}), "max_steps": max_steps, "temperature": temperature})


def rejection_sample(
    questions: Iterable[Question],
    *,
    index: IndexLike,
    model: BaseChatModel | str,
    out: str | os.PathLike[str],
    n: int = 4,
    temperature: float = 0.7,
    max_steps: int = 3,
    match: MatchRule = "contain",
    context: Mapping[str, Any] | None = None,
    resume: bool = True,
    max_concurrency: int = 1,
    on_question: Callable[[Question, int, RejectionStats], None] | None = None,
) -> RejectionStats:
    """Sample ``n`` CoRAG chains per question at ``temperature``; append the correct ones to ``out``.

    ``index`` is an index or its directory (None: the bundled sample); ``model`` a chat model or a
    spec string (``offline``, ``gpt-4o-mini``). ``context`` sets other :class:`CoragContext` fields
    (``retriever``, ``top_k``, ``hyde``, ``base_url``, ...). ``max_concurrency`` chains of a
    question run at once. ``on_question(question, kept, stats)`` is called after each question, for
    progress display. Raises :class:`AragError` for a setting that cannot work.
    """
    cfg = check_settings(n=n, temperature=temperature, max_steps=max_steps, match=match, context=context)
    if max_concurrency < 1:
        raise AragError(f"max_concurrency {max_concurrency} is not a number of chains at once; give 1 or more")
    chains, progress = open_outputs(out)
    sampler, applied = _at_temperature(model, temperature, cfg)
    graph = build_corag_graph(index, sampler)
    is_match = contain_match if match == "contain" else exact_match

    done = set(progress.keys) | set(chains.keys) if resume else set()
    stats = RejectionStats(out=str(chains.path), progress=str(progress.path), temperature_applied=applied)
    record_temperature = temperature if applied else None

    for question in questions:
        stats.questions += 1
        if question.id in done:
            stats.skipped += 1
            continue
        outputs = graph.batch(
            [{"question": question.question}] * n,
            {"max_concurrency": max_concurrency},
            return_exceptions=True,
            context=cfg,
        )
        kept, failed = _correct_chains(question, outputs, is_match, match=match, temperature=record_temperature)
        # Chains first, then the progress line: a crash in between leaves the question in the
        # output, which resuming also treats as done, so no chain is ever written twice.
        chains.add_many(kept)
        progress.add({"id": question.id, "sampled": n, "kept": len(kept), "failed": failed})
        done.add(question.id)
        stats.chains += n
        stats.kept += len(kept)
        stats.failed += failed
        stats.questions_with_kept += bool(kept)
        if on_question is not None:
            on_question(question, len(kept), stats)
    return stats


def _correct_chains(
    question: Question,
    outputs: Iterable[Any],
    is_match: Callable[[str, Any], bool],
    *,
    match: MatchRule,
    temperature: float | None,
) -> tuple[list[dict[str, Any]], int]:
    """The records of the sampled chains whose answer matches the gold answer, and how many runs failed."""
    kept: list[dict[str, Any]] = []
    failed = 0
    for sample, output in enumerate(outputs):
        if isinstance(output, BaseException) or output.get("error"):
            failed += 1
            continue
        if is_match(output.get("answer") or "", question.answers):
            kept.append(chain_record(question, output, sample=sample, match=match, temperature=temperature))
    return kept, failed


def _at_temperature(model: BaseChatModel | str, temperature: float, cfg: CoragContext) -> tuple[Any, bool]:
    """The model to sample with and whether it samples at ``temperature``."""
    if isinstance(model, str):
        # A spec string is resolved per run with the configuration's temperature.
        return model, model.strip() != OFFLINE and not cfg.reasoning_effort
    if "temperature" in type(model).model_fields:
        # A copy, so the caller's model keeps its own setting; clients are shared, not reopened.
        return model.model_copy(update={"temperature": temperature}), True
    return model, False
