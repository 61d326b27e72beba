"""Rejection sampling of CoRAG chains: the paper's recipe for chain-of-retrieval training data.

For every QA pair, sample ``n`` retrieval chains with the ``corag`` graph at a temperature above
zero, keep the chains whose final answer matches a gold alias (Contain-Acc's substring rule or
CoRAG's exact match, from :mod:`arag_graph.evaluators.answers`), and append each kept chain as one JSON Lines
record: the question and its gold answers, the chain of queries with each step's intermediate
reasoning (the sufficiency check's ``reasoning``, this graph's sub-answer) and chunk IDs, and the
final answer with its citations.

Runs are resumable. After a question is done, a line ``{"id", "sampled", "kept", "failed"}`` goes
to a progress file beside the output (``chains.jsonl`` -> ``chains.progress.jsonl``); a later run
with ``resume=True`` skips the questions named there or in the output, so an interrupted run picks
up where it stopped and never writes a question's chains twice. Output is only ever appended to.

Temperature: a model given as a spec string (``gpt-4o-mini``) is created at the sampling
temperature; a model instance is copied with its ``temperature`` field set when it has one
(``ChatOpenAI`` and most LangChain chat models do). The offline policy and models without such a
field are deterministic or sample as they were built; :attr:`RejectionStats.temperature_applied`
says so, and records carry ``"temperature": null``. Reasoning models (``reasoning_effort`` set)
take no temperature either.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel

from arag_graph.configuration import CoragContext
from arag_graph.corag import build_corag_graph
from arag_graph.datasets import Question
from arag_graph.errors import AragError
from arag_graph.models import OFFLINE
from arag_graph.runtime import IndexLike

__all__ = ["MatchRule", "RejectionStats", "chain_record", "progress_path", "rejection_sample"]

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
            "sub_answer": link.get("reasoning", ""),
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
    if n < 1:
        raise AragError(f"rejection sampling needs n >= 1 chains per question, got {n}")
    if temperature <= 0:
        raise AragError(
            f"rejection sampling needs a temperature above zero to get different chains, got {temperature}; "
            "use for example 0.7"
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
    sampler, applied = _at_temperature(model, temperature, cfg)
    graph = build_corag_graph(index, sampler)
    is_match = _matcher(match)

    out_path = Path(out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    progress = progress_path(out_path)
    done = _done_ids(out_path, progress) if resume else set()
    stats = RejectionStats(out=str(out_path), progress=str(progress), temperature_applied=applied)
    record_temperature = temperature if applied else None

    for question in questions:
        stats.questions += 1
        if question.id in done:
            stats.skipped += 1
            continue
        outputs = graph.batch(
            [{"question": question.question}] * n,
            {"max_concurrency": max(1, max_concurrency)},
            return_exceptions=True,
            context=cfg,
        )
        kept: list[dict[str, Any]] = []
        failed = 0
        for sample, output in enumerate(outputs):
            if isinstance(output, BaseException) or output.get("error"):
                failed += 1
                continue
            if is_match(output.get("answer") or "", question.answers):
                kept.append(chain_record(question, output, sample=sample, match=match, temperature=record_temperature))
        # Chains first, then the progress line: a crash in between leaves the question in the
        # output, which resuming also treats as done, so no chain is ever written twice.
        _append(out_path, kept)
        _append(progress, [{"id": question.id, "sampled": n, "kept": len(kept), "failed": failed}])
        done.add(question.id)
        stats.chains += n
        stats.kept += len(kept)
        stats.failed += failed
        stats.questions_with_kept += bool(kept)
        if on_question is not None:
            on_question(question, len(kept), stats)
    return stats


def _at_temperature(model: BaseChatModel | str, temperature: float, cfg: CoragContext) -> tuple[Any, bool]:
    """The model to sample with and whether it samples at ``temperature``."""
    if isinstance(model, str):
        # A spec string is resolved per run with the configuration's temperature.
        return model, model.strip() != OFFLINE and not cfg.reasoning_effort
    if "temperature" in type(model).model_fields:
        # A copy, so the caller's model keeps its own setting; clients are shared, not reopened.
        return model.model_copy(update={"temperature": temperature}), True
    return model, False


def _matcher(match: MatchRule) -> Callable[[str, tuple[str, ...]], bool]:
    # Imported here: the library itself does not load the evaluation package.
    from arag_graph.evaluators.answers import contain_match, exact_match

    return contain_match if match == "contain" else exact_match


def _done_ids(out: Path, progress: Path) -> set[str]:
    """Question IDs an earlier run finished: named in the progress file or present in the output."""
    done: set[str] = set()
    for path in (progress, out):
        if not path.exists():
            continue
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by an interrupted run
                if isinstance(record, dict) and record.get("id") is not None:
                    done.add(str(record["id"]))
    return done


def _append(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if not text:
        return
    with path.open("a+", encoding="utf-8") as f:
        # A line cut short by an interrupted run must not swallow the first new record.
        if f.tell() > 0:
            f.seek(f.tell() - 1)
            if f.read(1) != "\n":
                text = "\n" + text
        f.write(text)
        f.flush()
