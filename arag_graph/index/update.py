"""Updating an index: its documents changed without a rebuild, as a new build like any other.

An update (:func:`update_index`) writes a new recorded build and switches ``CURRENT`` to it only when
it is complete (:mod:`arag_graph.index.write`), so a reader never sees half an update and a killed
update leaves the previous build answering. What makes it cheap: unchanged documents keep their
chunks, only chunks with new text are tokenized for the keyword index, and every sentence whose
embedded text the previous build holds keeps its vector (:mod:`arag_graph.index.sentence_vectors`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arag_graph.core.documents import Chunk, SourceDocument
from arag_graph.core.errors import AragError, CorpusError
from arag_graph.core.profiles import check_profile
from arag_graph.index import integrity
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.layout import build_lock, read_current
from arag_graph.index.options import BuildOptions
from arag_graph.index.sentence_vectors import StoreReuse, VectorReuse
from arag_graph.index.sentencematrix import MATRIX_FILE
from arag_graph.index.sources import DocumentEntry, document_hash, document_id, load_table
from arag_graph.index.text import keyword_chunks
from arag_graph.index.write import BuildJob, build_locked


@dataclass
class UpdateReport:
    """What an update changed, by document id."""

    added: list[str] = dataclasses.field(default_factory=list)
    changed: list[str] = dataclasses.field(default_factory=list)
    removed: list[str] = dataclasses.field(default_factory=list)
    unchanged: int = 0
    sentences_encoded: int = 0
    sentences_reused: int = 0

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed, "
            f"{self.unchanged} unchanged ({self.sentences_encoded} sentences encoded, "
            f"{self.sentences_reused} reused)"
        )


def update_index(
    index: HierarchicalIndex,
    *,
    upsert: Iterable[Any] = (),
    delete: Iterable[str] = (),
    sync: Iterable[Any] | None = None,
    progress: bool = False,
) -> tuple[HierarchicalIndex, UpdateReport]:
    """Change the documents of the index ``index`` was loaded from, without a rebuild.

    ``upsert`` documents (LangChain ``Document`` objects or :class:`SourceDocument`) replace the
    documents with their ids in place or are appended (one without an id gets a new UUID, as
    LangChain's vector stores do); ``delete`` removes documents by id (an unknown id is a one-line
    error); ``sync`` makes the index hold exactly these documents, in their order (what
    ``arag index SOURCE --update`` does): new and changed ones found by content hash, the
    others removed.

    The update is a build like any other (:func:`~arag_graph.index.build.build_index`): a new
    recorded build directory, checksummed and sealed, and ``CURRENT`` switched to it only when it is
    complete, so a reader never sees half an update and a killed update leaves the previous build
    answering. What makes it cheap: unchanged documents keep their chunks, and every sentence whose
    embedded text the previous build holds keeps its vector
    (:class:`~arag_graph.index.sentence_vectors.VectorReuse`). Returns the updated index (the given
    one stays as it was: indexes are read-only snapshots, safe to share between threads) and what
    changed.
    """
    from arag_graph.index.corpus import source_documents

    root, build_dir = index.path, index.build_dir
    if root is None or build_dir is None:
        raise AragError("this index was not loaded from a directory; load it with load_index(DIR) to update it")
    started = time.perf_counter()
    manifest = index.manifest
    if manifest.extra.get("summaries"):
        raise AragError(
            f"{root}: this index holds document summaries (--summaries), which an update cannot refresh; "
            "rebuild it with `arag index SOURCE --out DIR --summaries ...`"
        )
    new_docs = source_documents(upsert)
    gone = [str(i) for i in delete]
    with build_lock(root):
        if read_current(root, strict=False) != build_dir.name:
            raise AragError(
                f"{root}: the index changed since this copy was loaded; load it again (load_index) and repeat "
                "the update"
            )
        table = load_table(root, build_dir, manifest.checksums, index.store.chunks)
        report = UpdateReport()
        if sync is not None:
            plan = _sync_plan(table, source_documents(sync), report)
        else:
            plan = _change_plan(table, new_docs, gone, root, report)
        report.unchanged = sum(isinstance(item, DocumentEntry) for item in plan)
        if not report:
            return index, report
        job = _update_job(index, plan, started, progress)
        updated = build_locked(job)
    assert job.reuse is not None
    report.sentences_encoded, report.sentences_reused = job.reuse.encoded, job.reuse.reused
    return updated, report


def _sync_plan(
    table: Sequence[DocumentEntry], docs: Sequence[SourceDocument], report: UpdateReport
) -> list[DocumentEntry | SourceDocument]:
    """The documents of an update with ``sync``: exactly ``docs``, in their order. A document whose
    content hash the table records keeps its entry (and chunks); new and changed ones are cut anew,
    and the table's other documents are removed."""
    by_id = {entry.id: entry for entry in table}
    plan: list[DocumentEntry | SourceDocument] = []
    seen: set[str] = set()
    for position, doc in enumerate(docs):
        if not doc.text.strip():
            continue
        doc_id = document_id(doc, position)
        if doc_id in seen:
            raise CorpusError(f"the id {doc_id[:60]!r} is used twice; give every document a unique id")
        seen.add(doc_id)
        old = by_id.get(doc_id)
        if old is not None and old.hash is not None and old.hash == document_hash(doc):
            plan.append(old)
            continue
        (report.changed if old is not None else report.added).append(doc_id)
        plan.append(dataclasses.replace(doc, id=doc_id))
    report.removed = [entry.id for entry in table if entry.id not in seen]
    return plan


def _change_plan(
    table: Sequence[DocumentEntry],
    new_docs: Sequence[SourceDocument],
    gone: list[str],
    root: Path,
    report: UpdateReport,
) -> list[DocumentEntry | SourceDocument]:
    """The documents of an update with ``upsert`` and ``delete``: the table's documents in their order,
    each kept, replaced in place by an upserted document with its id (unless the content is the same)
    or removed; then the upserted documents the table does not hold. An unknown id to delete is a
    one-line error."""
    by_id = {entry.id: entry for entry in table}
    unknown = [i for i in gone if i not in by_id]
    if unknown:
        raise AragError(
            f"no document {unknown[0][:60]!r} in the index at {root}"
            + (f" (nor {len(unknown) - 1} other id(s))" if len(unknown) > 1 else "")
            + "; delete only ids it holds (a document cut into pieces is deleted by its own id, not <id>#<n>)"
        )
    replacing, appended = _upserts(new_docs, by_id, gone)
    removed = set(gone) - set(replacing)
    plan: list[DocumentEntry | SourceDocument] = []
    for entry in table:
        replacement = replacing.get(entry.id)
        if entry.id in removed:
            report.removed.append(entry.id)
        elif replacement is None or (entry.hash is not None and entry.hash == document_hash(replacement)):
            plan.append(entry)
        else:
            report.changed.append(entry.id)
            plan.append(replacement)
    for doc in appended:
        if doc.text.strip():
            assert doc.id is not None
            report.added.append(doc.id)
            plan.append(doc)
    return plan


def _upserts(
    new_docs: Sequence[SourceDocument], by_id: dict[str, DocumentEntry], gone: list[str]
) -> tuple[dict[str, SourceDocument], list[SourceDocument]]:
    """The upserted documents that replace one of the index (by id, not deleted as well) and those
    appended; one without an id gets a new UUID, as LangChain's vector stores do. An id given twice
    is a one-line error."""
    replacing: dict[str, SourceDocument] = {}
    appended: list[SourceDocument] = []
    for doc in new_docs:
        if doc.id is None:
            import uuid

            doc = dataclasses.replace(doc, id=str(uuid.uuid4()))
        assert doc.id is not None
        if doc.id in replacing or any(d.id == doc.id for d in appended):
            raise CorpusError(f"the id {doc.id[:60]!r} is given twice; give every document a unique id")
        if doc.id in by_id and doc.id not in gone:
            replacing[doc.id] = doc
        else:
            appended.append(doc)
    return replacing, appended


def _update_job(
    index: HierarchicalIndex, plan: Sequence[DocumentEntry | SourceDocument], started: float, progress: bool
) -> BuildJob:
    """The build of an update: the planned chunks, with the settings, sentence store and profile of
    the build it replaces, and the previous build's vectors and keyword index to reuse."""
    from arag_graph.core.chunking import chunk_documents

    manifest = index.manifest
    assert index.path is not None and index.build_dir is not None
    chunks, new_table = _planned_chunks(index, plan, manifest.chunk_size, chunk_documents)
    opts = BuildOptions(
        chunk_size=manifest.chunk_size,
        contextual_headers=manifest.contextual_headers,
        header_max_chars=manifest.header_max_chars if manifest.contextual_headers else 0,
        header_style="aragog" if manifest.header_style == "aragog" else "path",
        keyword_match=manifest.keyword_match,
        profile=check_profile(manifest.profile),  # an update keeps the profile the index was built with
    )
    chroma_cfg = _same_store(manifest.chroma, index.build_dir.name)
    reuse: VectorReuse | StoreReuse
    if _store_reusable(index):
        reuse, chroma_cfg = StoreReuse(index), {**chroma_cfg, "ids": "records"}
    else:
        reuse = VectorReuse(index)
    return BuildJob(
        root=index.path,
        created=False,
        chunks=chunks,
        documents=None,
        embeddings=index.embeddings,
        options=opts,
        summaries=None,
        chroma_cfg=chroma_cfg,
        timings={"split_seconds": time.perf_counter() - started},
        started=started,
        progress=progress,
        updater=update_index,
        table=new_table,
        reuse=reuse,
        dimension=manifest.embedding_dim,
        keywords_before=(index.keywords, keyword_chunks(index.store.chunks, manifest.header_max_chars)),
    )


def _planned_chunks(
    index: HierarchicalIndex, plan: Sequence[DocumentEntry | SourceDocument], chunk_size: int, chunk_documents: Any
) -> tuple[list[Chunk], list[DocumentEntry]]:
    """The chunks of the updated corpus in order (kept documents' chunks as they were, the others cut
    anew), linked ``prev``/``next`` across documents as a build links them, and its table."""
    pieces: list[list[Chunk]] = []
    table: list[DocumentEntry] = []
    for item in plan:
        if isinstance(item, DocumentEntry):
            kept = [index.store.get(chunk_id) for chunk_id in item.chunks]
            pieces.append([c for c in kept if c is not None])
            table.append(item)
        else:
            cut = chunk_documents([item], chunk_size=chunk_size)
            pieces.append(cut)
            assert item.id is not None
            table.append(DocumentEntry(item.id, document_hash(item), tuple(c.id for c in cut)))
    flat = [c for piece in pieces for c in piece]
    owners: dict[str, int] = {}
    for number, entry in enumerate(table):
        for chunk_id in entry.chunks:
            if chunk_id in owners:
                raise CorpusError(
                    f"chunk id {chunk_id!r} is produced by documents {table[owners[chunk_id]].id!r} and "
                    f"{entry.id!r}; give every document a unique id"
                )
            owners[chunk_id] = number
    linked = []
    for n, chunk in enumerate(flat):
        prev_id = flat[n - 1].id if n > 0 else None
        next_id = flat[n + 1].id if n + 1 < len(flat) else None
        if chunk.prev_id != prev_id or chunk.next_id != next_id:
            chunk = dataclasses.replace(chunk, prev_id=prev_id, next_id=next_id)
        linked.append(chunk)
    return linked, table


def _store_reusable(index: HierarchicalIndex) -> bool:
    """Whether an update can copy the previous build's store and change it (:class:`StoreReuse`): an
    embedded Chroma store with checksummed files and row-numbered records. A server collection is
    re-inserted into a new collection (Chroma's server has no copy of a collection), as are stores
    too old to say which record is which row."""
    chroma = index.manifest.chroma
    return (
        chroma.get("mode") == "persistent"
        and chroma.get("ids") in ("rows", "records")
        and bool(index.manifest.store_checksums)
        and integrity.VECTOR_FINGERPRINT in index.manifest.checksums
    )


def _same_store(chroma: dict[str, Any], build: str) -> dict[str, Any]:
    """The sentence store of an update: of the same kind as the build it replaces (a matrix stays a
    matrix; a server collection gets a new ``<prefix>-<build>`` name)."""
    mode = chroma.get("mode")
    if mode == "matrix":
        return {"mode": "matrix", "path": MATRIX_FILE}
    if mode == "http":
        prefix = str(chroma.get("collection", "arag")).removesuffix(f"-{build}")
        return {"mode": "http", "url": chroma["url"], "collection": prefix, "ids": "rows"}
    return {"mode": "persistent", "path": "chroma", "collection": "sentences", "ids": "rows"}
