"""Writing ARAGOG's document summaries at index time (``arag index --summaries MODEL``).

What the summaries are and how they are searched: :mod:`arag_graph.retrievers.summaries`. This module is the
build-time half, apart because it reaches chat models (:mod:`arag_graph.llm.models`) while searching
needs none.

Resumable: each finished summary is appended at once to a JSON Lines file
(:class:`arag_graph.core.jsonl.JsonLinesFile`, keyed by a digest of the model and the document's title
and text), so a summary pass killed half-way pays on its rerun only for the documents it had not
finished. The file lives in arag's cache directory, not in the index directory, because a first
build that fails removes its directory and an index directory holds only arag's build names; it
is removed once a build has stored the summaries. A rebuild with the same model also reuses the
summaries of the active build (and of any build given in ``reuse``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from arag_graph.core.documents import Chunk
from arag_graph.core.errors import AragError
from arag_graph.core.jsonl import JsonLinesFile, dumps, replace_file
from arag_graph.index.document_groups import document_groups
from arag_graph.retrievers.summaries import (
    EXTRACTIVE,
    LEAD_SENTENCES,
    SUMMARIES,
    SUMMARY_MAX_TOKENS,
    SUMMARY_VECTORS,
    describe,
    kind_of,
    read_build_summaries,
)

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "ModelSummaries",
    "SummaryPass",
    "check_summarizer",
    "extractive_summary",
    "forget_progress",
    "resume_path",
    "summary_writer",
    "write_summaries",
]

# Document text shown to the summarising model, in characters: a summary needs the gist, and
# very long documents would cost more than the rest of the index.
_MAX_DOCUMENT_CHARS = 12_000

SUMMARY_PROMPT = """\
Summarise this document in two to four sentences for a search index: name its subject and the \
main facts it states (people, places, dates, numbers), so that a question about any of them can \
find it. Write only the summary.

Document "{title}":
{text}\
"""
"""The summarising model's request (ARAGOG's document summary index, written at index time)."""

_FORMAT = 1


def _document_text(chunks: Sequence[Chunk]) -> str:
    return "\n".join(c.text for c in chunks)


def extractive_summary(chunks: Sequence[Chunk], sentences: int = LEAD_SENTENCES) -> str:
    """The lead ``sentences`` sentences of a document (its first chunk's), as the chunker split them."""
    first = chunks[0]
    spans = first.sentences[:sentences]
    if not spans:
        return first.text[:500]
    return first.text[spans[0][0] : spans[-1][1]]


def _digest(model: str, title: str | None, text: str) -> str:
    digest = hashlib.sha256()
    for part in (str(_FORMAT), model, title or "", text):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()[:32]


def _is_summary(record: object) -> bool:
    return isinstance(record, dict) and isinstance(record.get("key"), str)


def _complete(record: Any) -> bool:
    return isinstance(record.get("summary"), str) and isinstance(record.get("usage"), dict)


def progress_file(path: Path) -> JsonLinesFile:
    """The resumable file of finished summaries (see the module doc)."""
    return JsonLinesFile(
        path,
        key="key",
        owns=_is_summary,
        complete=_complete,
        what="an arag document summary record",
        fix="remove that file to start the summaries over",
    )


def resume_path(root: Path, model: str) -> Path:
    """Where the summaries of a build of ``root`` by ``model`` are kept until the build is complete."""
    from arag_graph.core.cache import cache_dir

    key = hashlib.sha256(f"{Path(root).resolve()}\x00{model}".encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return cache_dir() / "summaries" / f"{key}.jsonl"


Summarizer = Callable[[str | None, str], tuple[str, dict[str, Any]]]
"""(title, text) -> (summary, usage)."""


def _model_summarizer(model: str, base_url: str | None, timeout: float | None, max_retries: int | None) -> Summarizer:
    """A function (title, text) -> (summary, usage) calling the chat model ``model``."""
    from arag_graph.core.tokens import count_tokens
    from arag_graph.llm.models import resolve_chat_model

    chat: BaseChatModel = resolve_chat_model(
        model,
        base_url=base_url,
        temperature=0.0,
        max_tokens=SUMMARY_MAX_TOKENS,
        timeout=timeout,
        max_retries=max_retries,
    )

    def summarize(title: str | None, text: str) -> tuple[str, dict[str, Any]]:
        prompt = SUMMARY_PROMPT.format(title=title or "(untitled)", text=text[:_MAX_DOCUMENT_CHARS])
        reply = chat.invoke(prompt)
        summary = " ".join(str(reply.content or "").split())
        usage = getattr(reply, "usage_metadata", None) or {}
        if usage.get("input_tokens") is not None:
            counted = {
                "input_tokens": int(usage["input_tokens"]),
                "output_tokens": int(usage.get("output_tokens") or 0),
            }
            return summary, {**counted, "source": "provider"}
        # A server that reports no usage: count o200k tokens ourselves, and say so.
        return summary, {
            "input_tokens": count_tokens(prompt),
            "output_tokens": count_tokens(summary),
            "source": "o200k",
        }

    return summarize


@dataclass
class SummaryPass:
    """What :func:`write_summaries` did: the files it wrote into the build and the manifest's entry."""

    files: list[str]
    info: dict[str, Any]


def write_summaries(
    build_dir: Path,
    root: Path,
    chunks: Sequence[Chunk],
    embeddings: Embeddings,
    model: str,
    *,
    base_url: str | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
    workers: int = 4,
    reuse: Sequence[Path] = (),
    progress: bool = False,
) -> SummaryPass:
    """Summarise every document of ``chunks`` with ``model`` and store the summaries in ``build_dir``.

    ``reuse`` lists build directories (the active build's, another index's of the same corpus)
    whose summaries by the same model are taken instead of being written again.
    A model that fails stops the pass with a one-line error; the summaries finished so far stay
    in the resume file for the rerun.
    """
    model = model.strip()
    if not model:
        raise AragError("--summaries needs a model: offline (extractive lead sentences) or a chat model name")
    groups = document_groups(chunks)
    by_id = {c.id: c for c in chunks}
    resume = progress_file(resume_path(root, model))
    known: dict[str, dict[str, Any]] = dict(resume.keys)
    for build in reuse:
        for record in read_build_summaries(Path(build)):
            if record.get("model") == model and isinstance(record.get("key"), str):
                known.setdefault(record["key"], record)
    summarize = None if model == EXTRACTIVE else _model_summarizer(model, base_url, timeout, max_retries)
    documents = [[by_id[c] for c in ids] for ids in groups.chunks]
    keys = [_digest(model, members[0].title, _document_text(members)) for members in documents]
    jobs = [(n, key, documents[n]) for n, key in enumerate(keys) if key not in known]

    def run(job: tuple[int, str, list[Chunk]]) -> dict[str, Any]:
        n, key, members = job
        summary, usage = _summary_of(members, summarize, groups.keys[n], resume)
        record = {"key": key, "document": groups.keys[n], "model": model, "summary": summary, "usage": usage}
        resume.add(record)
        return record

    for record in _run_jobs(run, jobs, workers if summarize is not None else 1, progress):
        known[record["key"]] = record
    records = [
        {
            "document": groups.keys[n],
            "chunk_ids": list(ids),
            "title": by_id[ids[0]].title,
            "summary": known[key]["summary"],
            "key": key,
            "model": model,
            "usage": known[key].get("usage") or {},
        }
        for n, (key, ids) in enumerate(zip(keys, groups.chunks, strict=True))
    ]
    _store_summaries(build_dir, records, embeddings)
    return SummaryPass([SUMMARIES, SUMMARY_VECTORS], _pass_info(model, records, reused=len(groups) - len(jobs)))


def _summary_of(
    members: list[Chunk],
    summarize: Callable[[str | None, str], tuple[str, dict[str, Any]]] | None,
    document: str,
    resume: Any,
) -> tuple[str, dict[str, Any]]:
    """One document's summary and its usage; a failed model call is a one-line error saying what is kept."""
    from arag_graph.core.safety import describe_model_error

    if summarize is None:
        return extractive_summary(members), {"input_tokens": 0, "output_tokens": 0, "source": "none"}
    try:
        return summarize(members[0].title, _document_text(members))
    except Exception as exc:
        done = len(resume.keys)
        raise AragError(
            f"summary of document {document[:60]!r} failed: {describe_model_error(exc)}; "
            f"{done} finished summaries are kept, rerun the same command to resume"
        ) from None


def _run_jobs(run: Callable[[Any], dict[str, Any]], jobs: Sequence[Any], workers: int, progress: bool) -> list[dict]:
    """``run`` over ``jobs`` on ``workers`` threads, with a progress bar when asked; results in job order."""
    from tqdm.auto import tqdm

    results = []
    bar = tqdm(total=len(jobs), desc="summarising documents", unit="doc", disable=not progress, leave=False)
    with bar, ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for record in pool.map(run, jobs):
            results.append(record)
            bar.update(1)
    return results


def _store_summaries(build_dir: Path, records: Sequence[dict[str, Any]], embeddings: Embeddings) -> None:
    """The summaries and their vectors (title and summary embedded, normalised) into the build."""
    from arag_graph.index.encoders import embed_texts

    texts = [f"{r['title']}: {r['summary']}" if r["title"] else r["summary"] for r in records]
    vectors = _normalized(embed_texts(embeddings, texts))
    replace_file(build_dir / SUMMARIES, "".join(dumps(r) + "\n" for r in records).encode("utf-8"))
    with (build_dir / SUMMARY_VECTORS).open("wb") as fh:
        np.save(fh, vectors.astype(np.float32), allow_pickle=False)


def _pass_info(model: str, records: Sequence[dict[str, Any]], *, reused: int) -> dict[str, Any]:
    """The manifest's entry for a summary pass: the model, the documents, the tokens it cost."""
    usage = [r["usage"] for r in records]
    info = {
        "model": model,
        "kind": kind_of(model),
        "documents": len(records),
        "reused": reused,
        "input_tokens": sum(int(u.get("input_tokens") or 0) for u in usage),
        "output_tokens": sum(int(u.get("output_tokens") or 0) for u in usage),
        "tokens_counted_locally": sum(1 for u in usage if u.get("source") == "o200k"),
    }
    info["described"] = describe(info)
    return info


def forget_progress(root: Path, model: str) -> None:
    """Drop the resume file once a build has stored the summaries (the build now holds them)."""
    path = resume_path(root, model.strip())
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".rejected").unlink(missing_ok=True)


def _normalized(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or not vectors.size:
        return vectors.reshape(len(vectors), -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def check_summarizer(model: str, options: Mapping[str, Any]) -> None:
    """Fail before any encoding when ``model`` cannot summarise (an unknown spec, no credentials)."""
    from arag_graph.llm.models import resolve_chat_model

    model = model.strip() if isinstance(model, str) else ""
    if not model:
        raise AragError("--summaries needs a model: offline (extractive lead sentences) or a chat model name")
    if model != EXTRACTIVE:
        limits = {"timeout": options.get("timeout"), "max_retries": options.get("max_retries")}
        resolve_chat_model(model, base_url=options.get("base_url"), **limits)  # one-line ModelSpecError


@dataclass(frozen=True)
class ModelSummaries:
    """ARAGOG's summary writer for :func:`~arag_graph.index.build.build_index` (its ``SummaryWriter``).

    ``model`` is a chat model spec or ``offline`` (extractive lead sentences); ``options`` go to
    :func:`write_summaries`: ``base_url``, ``timeout``, ``max_retries``, ``workers``, and ``reuse``
    (other builds whose summaries serve, e.g. another index of the same corpus).
    """

    model: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        check_summarizer(self.model, self.options)

    def write(
        self,
        build_dir: Path,
        root: Path,
        chunks: Sequence[Chunk],
        embeddings: Embeddings,
        *,
        reuse: Sequence[Path],
        progress: bool,
    ) -> SummaryPass:
        options = dict(self.options)
        extra = options.pop("reuse", None)
        more = [Path(extra)] if isinstance(extra, (str, os.PathLike)) else [Path(p) for p in extra or ()]
        return write_summaries(
            build_dir, root, chunks, embeddings, self.model, reuse=[*reuse, *more], progress=progress, **options
        )

    def forget(self, root: Path) -> None:
        forget_progress(root, self.model)


def summary_writer(model: str, options: Mapping[str, Any] | None = None) -> ModelSummaries:
    """The summary writer ``build_index(summaries=...)`` takes: ``summary_writer("offline")`` or a model spec."""
    return ModelSummaries(model.strip() if isinstance(model, str) else model, dict(options or {}))
