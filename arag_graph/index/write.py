"""Writing a build: its files into a new ``builds/<build>``, then the switch of ``CURRENT`` to it.

A full build (:func:`arag_graph.index.build.build_index`) and an update
(:func:`arag_graph.index.update.update_index`) decide what to write (a :class:`BuildJob`) and hand it
to :func:`build_locked` under the build lock. A rebuild writes a new ``builds/<build>`` and only then
points ``CURRENT`` at it, so a build that is killed half-way leaves the previous index loadable; the
next build removes the leftovers. What arag may delete there, and which ``--out`` it refuses, is
:mod:`arag_graph.index.layout`'s business; the checksums that keep a damaged index from answering
are :mod:`arag_graph.index.integrity`'s.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from arag_graph.core.documents import Chunk, SourceDocument
from arag_graph.core.errors import AragError
from arag_graph.core.safety import url_without_credentials
from arag_graph.index import integrity
from arag_graph.index.chroma import RECORD_IDS, SentenceStore, connect_sentence_store
from arag_graph.index.embedding_loader import endpoint_base_url
from arag_graph.index.encoders import embedding_model_id, embedding_prompts, encoder_backend
from arag_graph.index.hierarchical import ChunkStore, HierarchicalIndex, SentenceOpener, open_sentences
from arag_graph.index.keywords import Indexed, KeywordIndex, keyword_files
from arag_graph.index.layout import (
    BUILDS,
    MANIFEST,
    build_path,
    new_build_name,
    open_record,
    point_current,
    read_current,
    read_index_bytes,
    remove_stale_builds,
    remove_tree,
    write_atomic,
)
from arag_graph.index.manifest import CHUNKS, SENTENCE_STORE, KeywordMatch, Manifest, corpus_hash
from arag_graph.index.options import BuildOptions, SummaryWriter
from arag_graph.index.sentence_vectors import StoredSentences, StoreReuse, VectorReuse, store_sentences
from arag_graph.index.sentencematrix import SentenceMatrix
from arag_graph.index.sources import DOCUMENTS, DocumentEntry, save_table, table_for
from arag_graph.index.text import HeaderStyle, keyword_chunks


def _drop_build(build_dir: Path, timeout: float | None = None) -> None:
    """Delete a build arag recorded, and its collection when that lives in a Chroma server.

    The server collection is found from the manifest, or for a build that never finished from the
    record written before the collection was created; only a collection named for this build
    (``<prefix>-<build>``) is dropped. An unreachable server leaves the collection behind (safe to
    delete by hand); the directory goes regardless.
    """
    chroma: dict[str, Any] = {}
    for name in (MANIFEST, SENTENCE_STORE):
        with contextlib.suppress(OSError, ValueError, AttributeError, AragError):
            data = json.loads(read_index_bytes(build_dir.parent.parent, build_dir / name))
            chroma = data.get("chroma", {}) if name == MANIFEST else data
            break
    if not isinstance(chroma, dict):
        chroma = {}
    collection = chroma.get("collection")
    if chroma.get("mode") == "http" and isinstance(collection, str) and collection.endswith(f"-{build_dir.name}"):
        with contextlib.suppress(Exception):
            connect_sentence_store(chroma, build_dir, create=False, timeout=timeout).drop()
    remove_tree(build_dir)


# What a full disk, a read-only file system or missing permissions raise while the build writes.
_WRITE_ERRORS = frozenset(
    getattr(errno, name)
    for name in ("ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EFBIG", "EIO")
    if hasattr(errno, name)
)


def _write_failure(root: Path, exc: OSError) -> AragError:
    """A build that could not write (full disk, read-only or vanished directory) as one line."""
    where = exc.filename or root
    return AragError(
        f"{where}: cannot write the index ({exc.strerror or exc}); free disk space or choose another --out"
    )


@dataclass
class BuildJob:
    """One build under way: what :func:`~arag_graph.index.build.build_index` or
    :func:`~arag_graph.index.update.update_index` decided, handed to the build proper."""

    root: Path
    created: bool
    chunks: list[Chunk]
    documents: list[SourceDocument] | None
    embeddings: Embeddings
    options: BuildOptions
    summaries: SummaryWriter | None
    chroma_cfg: dict[str, Any]
    timings: dict[str, float]
    started: float
    progress: bool
    updater: Callable[..., tuple[HierarchicalIndex, Any]]
    """What changes the built index on disk (:func:`arag_graph.index.update.update_index`), handed in:
    the update module builds on this one."""
    table: list[DocumentEntry] | None = None
    """The documents and their chunks (an update gives it; a build derives it from ``documents``)."""
    reuse: VectorReuse | StoreReuse | None = None
    """The previous build's vectors (an update): only new text is encoded; an embedded Chroma store is
    copied and changed rather than filled anew (:class:`StoreReuse`)."""
    dimension: int = 0
    """The vectors' dimension when no sentence is encoded (an update that leaves the index empty)."""
    keywords_before: tuple[KeywordIndex, Sequence[Indexed]] | None = None
    """The previous build's keyword index and the chunks it indexes (an update): only chunks with new
    text are tokenized (:meth:`KeywordIndex.updated`)."""

    @property
    def header_max_chars(self) -> int:
        """The header bound the sentences are embedded with (0 without contextual headers)."""
        return self.options.header_max_chars if self.options.contextual_headers else 0

    @property
    def embedded_headers(self) -> bool | HeaderStyle:
        """What the sentences are embedded behind: False (bare), or the header style."""
        return self.options.header_style if self.options.contextual_headers else False


def build_locked(b: BuildJob) -> HierarchicalIndex:
    """A build or an update under the build lock, and what one that fails leaves behind.

    A write the file system refused (full disk, read-only, no permission) is the one-line
    :func:`_write_failure`; any other error goes on as it is. A first build (``created``: the
    directory did not exist) that failed leaves no directory behind, as if never started; under the
    lock, so that no other build can have started writing there meanwhile.
    """
    try:
        return _switch(b)
    except OSError as exc:
        if exc.errno is not None and exc.errno not in _WRITE_ERRORS:  # numpy's short writes have none
            raise
        raise _write_failure(b.root, exc) from None
    finally:
        if b.created and read_current(b.root, strict=False) is None:
            shutil.rmtree(b.root, ignore_errors=True)


def _switch(b: BuildJob) -> HierarchicalIndex:
    """A new recorded build directory, written, then made active.

    What a reader sees and what is deleted is decided here: ``CURRENT`` points at a build only once
    :func:`_write_build` has written all of it, a build that fails or is killed leaves the previous
    one active, and only builds the ownership record names are deleted.
    """
    root = b.root
    record = open_record(root)
    build = new_build_name()
    build_dir = root / BUILDS / build
    previous = read_current(root, strict=False)

    def drop(path: Path) -> None:
        _drop_build(path, b.options.chroma_timeout)

    # Leftovers of killed builds (never pointed at) go now; the active build stays until the
    # new one is complete.
    remove_stale_builds(record, keep=previous, drop=drop)
    record.add(build)  # recorded before it exists: a build killed at any point is still known as ours
    build_dir.mkdir(parents=True)
    try:
        index = _write_build(b, build_dir, previous)
        point_current(root, build)
    except BaseException:
        # An interrupt that lands after CURRENT was replaced (in the directory's fsync) leaves the
        # new build active: it is complete, and dropping it would leave CURRENT naming nothing.
        if read_current(root, strict=False) != build:
            drop(build_dir)
            if not b.created:  # a failed first build's directory goes whole (build_locked)
                record.discard(build)
        raise
    remove_stale_builds(record, keep=build, drop=drop)
    if index.sentences_opened:  # (a store opened at first search is opened as this index's)
        index.sentences.root = root  # from now on a failed read is this index's damage, not a failed build
    if b.summaries is not None:  # the build holds them now: the resume file is not needed any more
        b.summaries.forget(root)
    return index


def _write_build(b: BuildJob, build_dir: Path, previous: str | None) -> HierarchicalIndex:
    """Every file of the new build in ``build_dir`` (sentences, chunks, documents, keywords,
    summaries, checksums, manifest last), returned as an index. Nothing here touches ``CURRENT`` or
    another build."""
    chroma_cfg = b.chroma_cfg
    if chroma_cfg["mode"] == "http":
        chroma_cfg = {**chroma_cfg, "collection": f"{chroma_cfg['collection']}-{build_dir.name}"}
    stored = _write_sentences(b, build_dir, chroma_cfg)
    t0 = time.perf_counter()
    store = ChunkStore(b.chunks)
    store.save(build_dir / CHUNKS)
    table = b.table if b.table is not None else table_for(b.documents, b.chunks)
    save_table(table, build_dir / DOCUMENTS)
    keywords = _keyword_index(
        keyword_chunks(store.chunks, b.header_max_chars), b.options.keyword_match, b.progress, b.keywords_before
    )
    keywords.save(build_dir)
    b.timings["keyword_seconds"] = time.perf_counter() - t0
    summarized = _summaries(b, build_dir, previous)
    manifest = _seal(b, build_dir, chroma_cfg, stored, len(table), summarized)
    answering: SentenceStore | SentenceMatrix | SentenceOpener = stored.sentences
    if manifest.store_checksums is not None:
        # The index returned answers from a checked copy, as loads do, made at its first search:
        # `arag index` and `--update` never search, and the copy is a pass over the whole store.
        answering = functools.partial(open_sentences, b.root, manifest, build_dir, b.chunks, b.options.chroma_timeout)
    return HierarchicalIndex(b.root, manifest, store, keywords, answering, b.embeddings, build_dir, updater=b.updater)


def _write_sentences(b: BuildJob, build_dir: Path, chroma_cfg: dict[str, Any]) -> StoredSentences:
    """The sentence store's description (written first: a build killed after creating a server
    collection is still known to own it), then every sentence's vector, stored."""
    write_atomic(
        build_dir / SENTENCE_STORE,
        json.dumps(
            {**chroma_cfg, **({"url": url_without_credentials(chroma_cfg["url"])} if "url" in chroma_cfg else {})}
        ),
    )
    t0 = time.perf_counter()
    stored = store_sentences(
        chroma_cfg,
        build_dir,
        b.chunks,
        b.embeddings,
        b.embedded_headers,
        b.options.chroma_timeout,
        b.progress,
        b.header_max_chars,
        b.reuse,
        b.dimension,
    )
    b.timings["encode_seconds"] = stored.encode_seconds
    b.timings["insert_seconds"] = time.perf_counter() - t0 - stored.encode_seconds
    return stored


def _seal(
    b: BuildJob, build_dir: Path, chroma_cfg: dict[str, Any], stored: StoredSentences, documents: int, summarized: Any
) -> Manifest:
    """The checksums of every file the build wrote and, last, its manifest (what makes it a build).

    ``documents`` is the length of the build's document table (a full build from ready-made chunks
    counts its given documents instead)."""
    opts = b.options
    t0 = time.perf_counter()
    written = [CHUNKS, DOCUMENTS, SENTENCE_STORE, *keyword_files(), *(summarized.files if summarized else ())]
    count = stored.sentences.count()  # before _store_checks closes an embedded store
    digest, store_checksums = _store_checks(b, build_dir, chroma_cfg, stored, written)
    checksums = integrity.checksums(build_dir, written)
    b.timings["checksum_seconds"] = time.perf_counter() - t0
    manifest = Manifest(
        embedding_model=embedding_model_id(b.embeddings),
        embedding_dim=stored.dimension,
        chunk_size=opts.chunk_size,
        contextual_headers=opts.contextual_headers,
        header_max_chars=b.header_max_chars,
        header_style=opts.header_style if opts.contextual_headers else "path",
        keyword_match=opts.keyword_match,
        profile=opts.profile,
        corpus_hash=corpus_hash(b.chunks),
        documents=len(b.documents) if b.documents is not None and b.table is None else documents,
        chunks=len(b.chunks),
        sentences=count,
        chroma=chroma_cfg,
        build_seconds=round(time.perf_counter() - b.started, 3),
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        extra={
            "timings": {k: round(v, 3) for k, v in b.timings.items()},
            **({"summaries": summarized.info} if summarized else {}),
        },
        encoder=encoder_backend(b.embeddings),
        embedding_prompts=embedding_prompts(b.embeddings),
        embedding_base_url=endpoint_base_url(b.embeddings),
        checksums=checksums,
        sentence_digest=digest,
        store_checksums=store_checksums,
    )
    write_atomic(build_dir / MANIFEST, manifest.to_json())
    return manifest


def _store_checks(
    b: BuildJob, build_dir: Path, chroma_cfg: dict[str, Any], stored: StoredSentences, written: list[str]
) -> tuple[str | None, dict[str, str] | None]:
    """What checks the sentence store: a matrix's file joins ``written`` (checked exactly); a Chroma
    store's vector fingerprint (and record ids) do, with the sentence digest, and an embedded store is
    closed and its files checksummed. Returns the digest and the store's checksums."""
    sentences = stored.sentences
    digest = None
    store_checksums = None
    if isinstance(sentences, SentenceMatrix):
        written.append(str(chroma_cfg["path"]))  # the vectors themselves: checked exactly
    else:
        # The records' content, for `verify` and for a server's store, whose files arag never sees.
        np.save(build_dir / integrity.VECTOR_FINGERPRINT, stored.fingerprint, allow_pickle=False)
        written.append(integrity.VECTOR_FINGERPRINT)
        if chroma_cfg.get("ids") == "records":
            written.append(RECORD_IDS)
        digest = integrity.sentence_digest(b.chunks)
    if chroma_cfg["mode"] == "persistent":
        # Closed, its files are final; every later open reads them through a checked copy.
        assert isinstance(sentences, SentenceStore)
        sentences.close()
        store_checksums = integrity.tree_checksums(build_dir / str(chroma_cfg["path"]))
    return digest, store_checksums


def _summaries(b: BuildJob, build_dir: Path, previous: str | None) -> Any:
    """ARAGOG's document summaries into the build when asked for (:mod:`arag_graph.retrievers.summaries`), else None.

    The previous build's summaries are offered for reuse, so a rebuild pays only for new documents.
    """
    if b.summaries is None:
        return None
    t0 = time.perf_counter()
    reuse = [build_path(b.root, previous)] if previous is not None else []
    done = b.summaries.write(build_dir, b.root, b.chunks, b.embeddings, reuse=reuse, progress=b.progress)
    b.timings["summary_seconds"] = time.perf_counter() - t0
    return done


def _keyword_index(
    chunks: Sequence[Indexed],
    match: KeywordMatch,
    progress: bool,
    before: tuple[KeywordIndex, Sequence[Indexed]] | None = None,
) -> KeywordIndex:
    """The keyword index of ``chunks``; an update's (``before``) changes the previous one instead."""
    from tqdm.auto import tqdm

    with tqdm(total=len(chunks), desc="keyword index", unit="chunk", disable=not progress, leave=False) as bar:
        if before is not None and before[0].match == match:
            return before[0].updated(chunks, before[1], on_chunks=bar.update)
        return KeywordIndex.from_chunks(chunks, match=match, on_chunks=bar.update)
