"""ARAGOG's document summary index (DSI): a summary per document, then chunks inside the best documents.

At index time (``arag index --summaries MODEL``) every document (:mod:`arag_graph.hierarchy`) gets
a summary, embedded with the index's own encoder and stored in the build: ``summaries.jsonl`` (one
record per document: its key, chunk ids, title, summary) and ``summaries.npy`` (their vectors),
both covered by the manifest's checksums like every other file of the build. The manifest's
``extra["summaries"]`` says who wrote them and what they cost.

``MODEL`` is any chat model spec of :mod:`arag_graph.models` (same resolution, timeouts and
retries as ``arag ask``), or ``offline``: an *extractive* summary, the document's lead sentences,
which needs no model and is labelled as such (``kind: "extractive"``) in the manifest and in every
retrieval that uses it. It is a stand-in that keeps DSI runnable offline, not what ARAGOG measured.

At query time, two stages: the ``documents`` summaries nearest the query, then the ``top_k``
chunks of those documents nearest it (best sentence per chunk, as ``semantic_search`` ranks).

Resumable: each finished summary is appended at once to a JSON Lines file
(:class:`arag_graph.jsonl.JsonLinesFile`, keyed by a digest of the model and the document's title
and text), so a summary pass killed half-way pays on its rerun only for the documents it had not
finished. The file lives in arag's cache directory, not in the index directory, because a first
build that fails removes its directory and an index directory holds only arag's build names; it
is removed once a build has stored the summaries. A rebuild with the same model also reuses the
summaries of the active build.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from arag_graph.documents import Chunk, SearchHit
from arag_graph.errors import AragError
from arag_graph.hierarchy import document_groups
from arag_graph.jsonl import JsonLinesFile, dumps, replace_file

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

    from arag_graph.index import HierarchicalIndex

__all__ = [
    "EXTRACTIVE",
    "SUMMARIES",
    "SUMMARY_DOCUMENTS",
    "SUMMARY_VECTORS",
    "SummaryIndex",
    "extractive_summary",
    "summary_index",
    "summary_search",
    "write_summaries",
]

SUMMARIES = "summaries.jsonl"
SUMMARY_VECTORS = "summaries.npy"
EXTRACTIVE = "offline"
"""The ``--summaries`` value that writes extractive summaries (no model)."""
LEAD_SENTENCES = 3
SUMMARY_DOCUMENTS = 3
"""Documents kept by the first stage unless a run says otherwise (``summary_documents``)."""
SUMMARY_MAX_TOKENS = 256
# Document text shown to the summarising model, in characters: a summary needs the gist, and
# very long documents would cost more than the rest of the index.
_MAX_DOCUMENT_CHARS = 12_000
_FORMAT = 1


def _kind(model: str) -> str:
    return "extractive" if model == EXTRACTIVE else "model"


def describe(info: dict[str, Any]) -> str:
    """How summaries were written, for hits and messages: "extractive (lead sentences, no model)"."""
    if info.get("kind") == "extractive":
        return f"extractive (the first {LEAD_SENTENCES} sentences of each document, no model)"
    return f"written by {info.get('model')}"


# ---------------------------------------------------------------------------------------------
# Writing


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
    from arag_graph.cache import cache_dir

    key = hashlib.sha256(f"{Path(root).resolve()}\x00{model}".encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return cache_dir() / "summaries" / f"{key}.jsonl"


def _model_summarizer(
    model: str, base_url: str | None, timeout: float | None, max_retries: int | None
) -> Callable[[str | None, str], tuple[str, dict[str, Any]]]:
    """A function (title, text) -> (summary, usage) calling the chat model ``model``."""
    from arag_graph.models import resolve_chat_model
    from arag_graph.prompts import SUMMARY_PROMPT
    from arag_graph.tokens import count_tokens

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
    from tqdm.auto import tqdm

    from arag_graph.embeddings import embed_texts
    from arag_graph.safety import describe_model_error

    model = model.strip()
    if not model:
        raise AragError("--summaries needs a model: offline (extractive lead sentences) or a chat model name")
    groups = document_groups(chunks)
    by_id = {c.id: c for c in chunks}
    resume = progress_file(resume_path(root, model))
    known: dict[str, dict[str, Any]] = dict(resume.keys)
    for build in reuse:
        for record in _read_build_summaries(Path(build)):
            if record.get("model") == model and isinstance(record.get("key"), str):
                known.setdefault(record["key"], record)
    summarize = None if model == EXTRACTIVE else _model_summarizer(model, base_url, timeout, max_retries)

    jobs: list[tuple[int, str, list[Chunk]]] = []
    keys: list[str] = []
    for n, ids in enumerate(groups.chunks):
        members = [by_id[c] for c in ids]
        key = _digest(model, members[0].title, _document_text(members))
        keys.append(key)
        if key not in known:
            jobs.append((n, key, members))

    def run(job: tuple[int, str, list[Chunk]]) -> dict[str, Any]:
        n, key, members = job
        if summarize is None:
            summary, usage = extractive_summary(members), {"input_tokens": 0, "output_tokens": 0, "source": "none"}
        else:
            try:
                summary, usage = summarize(members[0].title, _document_text(members))
            except Exception as exc:
                done = len(resume.keys)
                raise AragError(
                    f"summary of document {groups.keys[n][:60]!r} failed: {describe_model_error(exc)}; "
                    f"{done} finished summaries are kept, rerun the same command to resume"
                ) from None
        record = {"key": key, "document": groups.keys[n], "model": model, "summary": summary, "usage": usage}
        resume.add(record)
        return record

    reused = len(groups) - len(jobs)
    bar = tqdm(total=len(jobs), desc="summarising documents", unit="doc", disable=not progress, leave=False)
    with bar, ThreadPoolExecutor(max_workers=max(1, workers if summarize is not None else 1)) as pool:
        for record in pool.map(run, jobs):
            known[record["key"]] = record
            bar.update(1)

    records = []
    for n, (key, ids) in enumerate(zip(keys, groups.chunks, strict=True)):
        done = known[key]
        records.append(
            {
                "document": groups.keys[n],
                "chunk_ids": list(ids),
                "title": by_id[ids[0]].title,
                "summary": done["summary"],
                "key": key,
                "model": model,
                "usage": done.get("usage") or {},
            }
        )
    texts = [f"{r['title']}: {r['summary']}" if r["title"] else r["summary"] for r in records]
    vectors = _normalized(embed_texts(embeddings, texts))
    replace_file(build_dir / SUMMARIES, "".join(dumps(r) + "\n" for r in records).encode("utf-8"))
    with (build_dir / SUMMARY_VECTORS).open("wb") as fh:
        np.save(fh, vectors.astype(np.float32), allow_pickle=False)
    usage = [r["usage"] for r in records]
    info = {
        "model": model,
        "kind": _kind(model),
        "documents": len(records),
        "reused": reused,
        "input_tokens": sum(int(u.get("input_tokens") or 0) for u in usage),
        "output_tokens": sum(int(u.get("output_tokens") or 0) for u in usage),
        "tokens_counted_locally": sum(1 for u in usage if u.get("source") == "o200k"),
    }
    info["described"] = describe(info)
    return SummaryPass([SUMMARIES, SUMMARY_VECTORS], info)


def forget_progress(root: Path, model: str) -> None:
    """Drop the resume file once a build has stored the summaries (the build now holds them)."""
    path = resume_path(root, model.strip())
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".rejected").unlink(missing_ok=True)


def _read_build_summaries(build_dir: Path) -> list[dict[str, Any]]:
    path = build_dir / SUMMARIES
    if not path.is_file():
        return []
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError):
        return []  # a damaged earlier build: its summaries are simply written again


def _normalized(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or not vectors.size:
        return vectors.reshape(len(vectors), -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


# ---------------------------------------------------------------------------------------------
# Reading and searching


@dataclass(frozen=True)
class SummaryIndex:
    """The summaries of a loaded index: one record and one unit vector per document."""

    records: list[dict[str, Any]]
    vectors: np.ndarray
    info: dict[str, Any]

    @property
    def label(self) -> str:
        return describe(self.info)


_loaded: weakref.WeakKeyDictionary[HierarchicalIndex, SummaryIndex] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def missing_summaries_error(index: HierarchicalIndex) -> AragError:
    where = index.path if index.path is not None else "DIR"
    return AragError(
        f"{where}: this index has no document summaries, which retriever=dsi needs; rebuild it with "
        f"`arag index CORPUS --out {where} --summaries offline` (extractive) or `--summaries MODEL`"
    )


def has_summaries(index: HierarchicalIndex) -> bool:
    return bool((index.manifest.extra or {}).get("summaries"))


def summary_index(index: HierarchicalIndex) -> SummaryIndex:
    """The summaries of ``index``, read (and checked against the manifest's checksums) on first use."""
    from arag_graph import integrity
    from arag_graph.errors import IndexDamagedError

    with _lock:
        loaded = _loaded.get(index)
        if loaded is not None:
            return loaded
        info = (index.manifest.extra or {}).get("summaries")
        build_dir = getattr(index, "build_dir", None)
        if not info or build_dir is None:
            raise missing_summaries_error(index)
        root = Path(index.path) if index.path is not None else Path(build_dir)
        for name in (SUMMARIES, SUMMARY_VECTORS):
            expected = index.manifest.checksums.get(name)
            if expected is None:
                raise IndexDamagedError(root, f"the manifest records summaries but no checksum of {name}")
            integrity.check_file(root, Path(build_dir), name, expected)
        records = _read_build_summaries(Path(build_dir))
        vectors = np.load(Path(build_dir) / SUMMARY_VECTORS, allow_pickle=False)
        if len(records) != len(vectors):
            raise IndexDamagedError(root, f"{len(records)} summaries but {len(vectors)} summary vectors")
        loaded = SummaryIndex(records, vectors, dict(info))
        _loaded[index] = loaded
    return loaded


def summary_search(
    index: HierarchicalIndex,
    query: str,
    top_k: int,
    documents: int = SUMMARY_DOCUMENTS,
    *,
    query_vector: Sequence[float] | None = None,
) -> list[SearchHit]:
    """DSI's two stages: the ``documents`` best summaries, then the ``top_k`` best chunks inside them.

    Chunks are ranked by their best sentence among the query's nearest sentences, fetched deeper
    until enough chunks of the chosen documents turn up; chunks of those documents that never do
    follow in document order (a summary can pick a document none of whose sentences is near).
    """
    summaries = summary_index(index)
    if top_k <= 0 or not summaries.records:
        return []
    vector = list(query_vector) if query_vector is not None else index.embeddings.embed_query(query)
    q = np.asarray(vector, dtype=np.float32)
    q /= float(np.linalg.norm(q)) or 1.0
    similarity = summaries.vectors @ q
    chosen = [int(i) for i in np.argsort(-similarity, kind="stable")[: max(1, documents)]]
    allowed: list[str] = [cid for i in chosen for cid in summaries.records[i]["chunk_ids"]]
    allowed_set = set(allowed)
    wanted = min(top_k, len(allowed))
    total = index.manifest.sentences
    n = min(total, max(50 * top_k, 200))
    best: dict[str, float] = {}
    positions: dict[str, list[int]] = {}
    while True:
        best.clear()
        positions.clear()
        for chunk_id, position, score in index.top_sentences(query, n, query_vector=vector):
            if chunk_id in allowed_set:
                best.setdefault(chunk_id, score)
                positions.setdefault(chunk_id, []).append(position)
        if len(best) >= wanted or n >= total:
            break
        n = min(total, n * 4)
    ranked = sorted(best, key=lambda cid: -best[cid])
    ranked += [cid for cid in allowed if cid not in best]
    hits = []
    for chunk_id in ranked[:top_k]:
        chunk = index.get_chunk(chunk_id)
        if chunk is None:
            continue
        matched = tuple(p for p in sorted(set(positions.get(chunk_id, ()))) if p < len(chunk.sentences))
        snippets = tuple(chunk.text[slice(*chunk.sentences[p])] for p in matched)
        hits.append(SearchHit(chunk_id, float(best.get(chunk_id, 0.0)), snippets, chunk.title, matched))
    return hits


def check_summarizer(model: str, options: Mapping[str, Any]) -> None:
    """Fail before any encoding when ``model`` cannot summarise (an unknown spec, no credentials)."""
    from arag_graph.models import resolve_chat_model

    model = model.strip() if isinstance(model, str) else ""
    if not model:
        raise AragError("--summaries needs a model: offline (extractive lead sentences) or a chat model name")
    if model != EXTRACTIVE:
        limits = {"timeout": options.get("timeout"), "max_retries": options.get("max_retries")}
        resolve_chat_model(model, base_url=options.get("base_url"), **limits)  # one-line ModelSpecError
