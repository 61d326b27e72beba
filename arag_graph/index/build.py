"""Building an index: corpus in, a new build written beside the old one, switched to when complete.

A rebuild writes a new ``builds/<build>`` and only then points ``CURRENT`` at it, so a build that is
killed half-way leaves the previous index loadable; the next build removes the leftovers. What arag
may delete there, and which ``--out`` it refuses, is :mod:`arag_graph.index.layout`'s business; the
checksums that keep a damaged index from answering are :mod:`arag_graph.index.integrity`'s.

The settings are one typed :class:`BuildOptions`. ARAGOG's document summaries are written by a
:class:`SummaryWriter` the caller passes in (the model layer's
:func:`arag_graph.llm.summarize.summary_writer`): the index layer sits below the models and never
imports them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import json
import os
import shutil
import stat
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from langchain_core.embeddings import Embeddings

from arag_graph.core.documents import DEFAULT_CONTEXTUAL_HEADERS, HEADER_MAX_CHARS, Chunk, SourceDocument
from arag_graph.core.errors import AragError
from arag_graph.core.profiles import DEFAULT_PROFILE, Profile, check_profile, index_values
from arag_graph.core.safety import url_credentials, url_without_credentials
from arag_graph.index import integrity
from arag_graph.index.chroma import (
    COLLECTION_NAME_MAX,
    RECORD_IDS,
    SentenceStore,
    check_chroma_server,
    connect_sentence_store,
    valid_collection_name,
)
from arag_graph.index.devices import check_device
from arag_graph.index.embedding_loader import endpoint_base_url, resolve_embeddings
from arag_graph.index.encoders import embed_texts, embedding_model_id, embedding_prompts, encoder_backend
from arag_graph.index.hierarchical import ChunkStore, HierarchicalIndex, SentenceOpener, open_sentences
from arag_graph.index.keywords import Indexed, KeywordIndex, keyword_files
from arag_graph.index.layout import (
    BUILDS,
    MANIFEST,
    build_lock,
    build_path,
    check_out,
    load_index_array,
    make_root,
    new_build_name,
    open_record,
    point_current,
    read_current,
    read_index_bytes,
    remove_stale_builds,
    remove_tree,
    write_atomic,
)
from arag_graph.index.manifest import CHUNKS, SENTENCE_BACKENDS, SENTENCE_STORE, KeywordMatch, Manifest, corpus_hash
from arag_graph.index.sentencematrix import (
    MATRIX_FILE,
    MATRIX_MAX_SENTENCES,
    MatrixWriter,
    SentenceLayout,
    SentenceMatrix,
    unit_rows,
)
from arag_graph.index.sources import DOCUMENTS, DocumentEntry, save_table, table_for
from arag_graph.index.text import keyword_chunks, sentence_blocks

if TYPE_CHECKING:
    from langchain_core.documents import Document as LangChainDocument

# Builds are named <UTC-ish timestamp>-<8 hex>; server collections are <prefix>-<build>.
_BUILD_NAME_LENGTH = len("20260101T000000-0123abcd")


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


@dataclass(frozen=True)
class BuildOptions:
    """How an index is built: every setting that shapes what it retrieves, checked in one place.

    The manifest records them, so that loading and evaluation can tell two indexes apart.
    """

    chunk_size: int = 1000
    """Target chunk length in o200k tokens, cut on sentence boundaries (the A-RAG paper: about 1,000)."""
    contextual_headers: bool = DEFAULT_CONTEXTUAL_HEADERS
    """ARAGOG's contextual chunk headers: title (and Markdown section) before each embedded sentence."""
    header_max_chars: int = HEADER_MAX_CHARS
    """The bound on a contextual header (0 to 1000 characters)."""
    keyword_match: KeywordMatch = "word"
    """``word``: a keyword counts where it starts a word; ``substring``: the paper's plain substring rule."""
    backend: str = "auto"
    """Where sentence vectors go: ``matrix``, ``chroma`` or ``auto`` (matrix up to MATRIX_MAX_SENTENCES)."""
    encoder: str | None = None
    """The backend of a local model (``onnx-int8``, ``onnx``, ``torch``); recorded for loading."""
    embedding_base_url: str | None = None
    """The OpenAI-compatible endpoint of an ``openai:NAME`` embedding spec."""
    corpus_format: str | None = None
    """The corpus file's format when it cannot be told from the file (see ``load_corpus``)."""
    chroma_url: str | None = None
    """A Chroma server for the sentence vectors (implies the ``chroma`` backend)."""
    collection: str | None = None
    """The server collection prefix (default: derived from the index directory's name)."""
    chroma_timeout: float | None = None
    """The longest wait for one Chroma server request (default ``$ARAG_CHROMA_TIMEOUT`` or 60 s)."""
    profile: Profile = DEFAULT_PROFILE
    """The profile the build was asked for (recorded in the manifest); :meth:`for_profile` applies it."""

    @classmethod
    def for_profile(cls, profile: str | None = None, **given: Any) -> BuildOptions:
        """Options of a profile (:mod:`arag_graph.core.profiles`): ``paper`` is the A-RAG paper's index
        (substring keyword rule, bare sentences). A setting given here (not None) wins over the profile."""
        name = check_profile(profile)
        values = {**index_values(name), **{k: v for k, v in given.items() if v is not None}}
        return cls(profile=name, **values)

    def check(self) -> None:
        """One-line errors for settings no build could use, before anything is read or written."""
        from arag_graph.core.chunking import check_chunk_size

        check_chunk_size(self.chunk_size)
        check_profile(self.profile, "profile")
        if self.keyword_match not in ("word", "substring"):
            raise AragError(f"unknown keyword match rule {self.keyword_match!r}; use 'word' or 'substring'")
        if not isinstance(self.header_max_chars, int) or not 0 <= self.header_max_chars <= 1000:
            raise AragError(
                f"header length {self.header_max_chars!r}: give 0 to 1000 characters (default {HEADER_MAX_CHARS})"
            )
        if self.backend not in SENTENCE_BACKENDS:
            raise AragError(f"unknown sentence backend {self.backend!r}; use one of {', '.join(SENTENCE_BACKENDS)}")
        if self.chroma_url and self.backend == "matrix":
            raise AragError("--chroma-url stores the sentences in a Chroma server; drop it or use --backend chroma")
        if self.chroma_url and url_credentials(self.chroma_url):  # the URL is recorded in the manifest
            raise AragError(
                f"--chroma-url {url_without_credentials(self.chroma_url)[:100]!r} carries credentials, which would "
                "be written into the index; give the URL without them (Chroma's client takes "
                "CHROMA_CLIENT_AUTH_CREDENTIALS)"
            )

    def with_changes(self, changes: Mapping[str, Any]) -> BuildOptions:
        """These options with ``changes`` (keyword arguments of :func:`build_index`); unknown names refused."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TypeError(
                f"build_index() got unknown setting(s) {', '.join(unknown)}; "
                f"BuildOptions has {', '.join(sorted(names))}"
            )
        return dataclasses.replace(self, **changes) if changes else self


class SummaryWriter(Protocol):
    """Writes ARAGOG's document summaries into a build (:func:`arag_graph.llm.summarize.summary_writer`).

    Passed in rather than imported: writing summaries takes a chat model, a layer above the index.
    """

    model: str
    """The summariser, as the manifest records it (``offline`` for extractive lead sentences)."""

    def check(self) -> None:
        """Fail in one line, before any encoding, when the summariser cannot run."""

    def write(
        self,
        build_dir: Path,
        root: Path,
        chunks: Sequence[Chunk],
        embeddings: Embeddings,
        *,
        reuse: Sequence[Path],
        progress: bool,
    ) -> Any:
        """Write the summaries into ``build_dir``; returns what was written (``files``, ``info``)."""

    def forget(self, root: Path) -> None:
        """Drop the resume file once the build holds the summaries."""


def build_index(
    corpus: str | os.PathLike[str] | Iterable[SourceDocument] | Iterable[LangChainDocument] | Sequence[Chunk],
    out: str | os.PathLike[str],
    options: BuildOptions | None = None,
    *,
    embeddings: Embeddings | str | None = None,
    summaries: SummaryWriter | None = None,
    progress: bool = False,
    out_flag: str = "--out",
    device: str | None = None,
    **changes: Any,
) -> HierarchicalIndex:
    """Build an index of ``corpus`` into ``out`` and return it loaded.

    ``progress`` draws progress bars on stderr; off by default, so a library call is quiet (the
    CLI turns them on at a terminal).

    ``out_flag`` names ``out`` as the user gave it (``--out``; eval's ``--index``; the cache
    directory) in a refusal of ``out``, so the one line says what to change.

    ``options`` holds the settings (:class:`BuildOptions`); keyword arguments named after its fields
    change single ones (``build_index(docs, out, chunk_size=512)``).

    ``summaries`` (:func:`arag_graph.llm.summarize.summary_writer`: a chat model, or ``offline`` for
    extractive lead sentences) adds ARAGOG's document summary index: a summary per document,
    embedded and stored in the build (:mod:`arag_graph.retrievers.summaries`).

    Sentence vectors go to one exact NumPy matrix (the fastest search for small and mid-sized
    corpora), Chroma's HNSW (large ones) or a Chroma server (``chroma_url``). Vectors are encoded and
    stored :data:`~arag_graph.index.text.BUILD_BLOCK` sentences at a time, so a build never holds all
    of them in memory.

    ``embeddings`` is any LangChain ``Embeddings`` or a spec string
    (:func:`arag_graph.index.embedding_loader.resolve_embeddings`: a sentence-transformers folder or cached
    name, or ``openai:NAME`` with ``embedding_base_url``); a spec is recorded so that
    :func:`~arag_graph.index.load.load_index` embeds queries with the same model without being told.
    ``encoder`` picks the backend of a local model and cannot be combined with an ``Embeddings`` instance.
    ``device`` (``auto``, the default, ``cpu``, ``cuda``, ``cuda:N``, ``mps``) is where a local model
    encodes (:func:`arag_graph.index.encoders.encoder_and_device`); a run setting, not recorded.

    ``corpus`` is a path (any format :func:`arag_graph.index.corpus.load_corpus` reads), documents
    (LangChain ``Document`` objects straight from any loader, their metadata kept with their chunks,
    or :class:`~arag_graph.core.documents.SourceDocument`), or ready-made chunks. The index then
    changes without a rebuild: :meth:`~arag_graph.index.hierarchical.HierarchicalIndex.add_documents`,
    :meth:`~arag_graph.index.hierarchical.HierarchicalIndex.delete` and :func:`arag_graph.index.sync.sync_index`.
    An index already in ``out`` is replaced only once the new one is complete.
    ``out`` must be new, empty or an arag index (see :mod:`arag_graph.index.layout`), and arag deletes
    only builds it recorded there.
    """
    from arag_graph.core.chunking import chunk_documents
    from arag_graph.index.corpus import load_corpus, source_documents

    opts = (options or BuildOptions()).with_changes(changes)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    root = Path(out)
    corpus_dir = Path(corpus) if isinstance(corpus, (str, os.PathLike)) and Path(corpus).is_dir() else None
    check_out(root, corpus_dir, flag=out_flag)
    opts.check()
    embeddings = resolve_embeddings(
        embeddings, base_url=opts.embedding_base_url, encoder=opts.encoder, device=check_device(device)
    )
    check = getattr(embeddings, "check_available", None)
    if callable(check):  # a missing optional package fails now, not after splitting the corpus
        check()
    if summaries is not None:  # an unusable summary model fails now, not after encoding
        summaries.check()

    def split(docs: list[SourceDocument]) -> list[Chunk]:
        from tqdm.auto import tqdm

        bar = tqdm(docs, desc="splitting documents", unit="doc", disable=not progress, leave=False)
        with bar:
            return chunk_documents(bar, chunk_size=opts.chunk_size)

    if isinstance(corpus, (str, os.PathLike)):
        loaded = load_corpus(corpus, opts.corpus_format)
        documents: list[SourceDocument] | None = loaded
        chunks = split(loaded)
    else:
        items = list(corpus)
        if items and all(isinstance(i, Chunk) for i in items):
            documents, chunks = None, list(items)  # type: ignore[assignment,arg-type]
        else:
            documents = source_documents(items)  # LangChain Documents from any loader, or ours
            chunks = split(documents)
    if not chunks:
        raise AragError("the corpus has no text to index; give a corpus with at least one non-empty document")
    timings["split_seconds"] = time.perf_counter() - started
    if opts.chroma_url:  # before encoding, which is what takes long
        prefix = _collection_prefix(opts.collection, root)
        check_chroma_server(opts.chroma_url, opts.chroma_timeout)

    total = sum(len(c.sentences) for c in chunks)
    if opts.chroma_url:
        chroma_cfg: dict[str, Any] = {"mode": "http", "url": opts.chroma_url, "collection": prefix, "ids": "rows"}
    elif opts.backend == "chroma" or (opts.backend == "auto" and total > MATRIX_MAX_SENTENCES):
        chroma_cfg = {"mode": "persistent", "path": "chroma", "collection": "sentences", "ids": "rows"}
    else:
        chroma_cfg = {"mode": "matrix", "path": MATRIX_FILE}

    created = not root.exists()
    make_root(root)
    # A process refused by the lock returns from build_lock's error before _build_locked runs: it
    # touches nothing, not even a directory it believes it created (another build is writing there).
    with build_lock(root):
        build = _Build(
            root=root,
            created=created,
            chunks=chunks,
            documents=documents,
            embeddings=embeddings,
            options=opts,
            summaries=summaries,
            chroma_cfg=chroma_cfg,
            timings=timings,
            started=started,
            progress=progress,
        )
        return _build_locked(build)


@dataclass
class _Build:
    """One build under way: what :func:`build_index` decided, handed to the build proper."""

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


def _build_locked(b: _Build) -> HierarchicalIndex:
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


def _switch(b: _Build) -> HierarchicalIndex:
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
            if not b.created:  # a failed first build's directory goes whole (_build_locked)
                record.discard(build)
        raise
    remove_stale_builds(record, keep=build, drop=drop)
    if index.sentences_opened:  # (a store opened at first search is opened as this index's)
        index.sentences.root = root  # from now on a failed read is this index's damage, not a failed build
    if b.summaries is not None:  # the build holds them now: the resume file is not needed any more
        b.summaries.forget(root)
    return index


def _write_build(b: _Build, build_dir: Path, previous: str | None) -> HierarchicalIndex:
    """Every file of the new build in ``build_dir`` (sentences, chunks, documents, keywords,
    summaries, checksums, manifest last), returned as an index. Nothing here touches ``CURRENT`` or
    another build."""
    root, opts, timings = b.root, b.options, b.timings
    chroma_cfg = b.chroma_cfg
    if chroma_cfg["mode"] == "http":
        chroma_cfg = {**chroma_cfg, "collection": f"{chroma_cfg['collection']}-{build_dir.name}"}
    write_atomic(
        build_dir / SENTENCE_STORE,
        json.dumps(
            {**chroma_cfg, **({"url": url_without_credentials(chroma_cfg["url"])} if "url" in chroma_cfg else {})}
        ),
    )
    t0 = time.perf_counter()
    stored = _store_sentences(
        chroma_cfg,
        build_dir,
        b.chunks,
        b.embeddings,
        opts.contextual_headers,
        opts.chroma_timeout,
        b.progress,
        b.header_max_chars,
        b.reuse,
        b.dimension,
    )
    sentences = stored.sentences
    timings["encode_seconds"] = stored.encode_seconds
    timings["insert_seconds"] = time.perf_counter() - t0 - stored.encode_seconds

    t0 = time.perf_counter()
    store = ChunkStore(b.chunks)
    store.save(build_dir / CHUNKS)
    table = b.table if b.table is not None else table_for(b.documents, b.chunks)
    save_table(table, build_dir / DOCUMENTS)
    keywords = _keyword_index(
        keyword_chunks(store.chunks, b.header_max_chars), opts.keyword_match, b.progress, b.keywords_before
    )
    keywords.save(build_dir)
    timings["keyword_seconds"] = time.perf_counter() - t0
    summarized = _summaries(b, build_dir, previous)

    t0 = time.perf_counter()
    written = [CHUNKS, DOCUMENTS, SENTENCE_STORE, *keyword_files(), *(summarized.files if summarized else ())]
    digest = None
    store_checksums = None
    stored_count = sentences.count()
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
    checksums = integrity.checksums(build_dir, written)
    timings["checksum_seconds"] = time.perf_counter() - t0
    manifest = Manifest(
        embedding_model=embedding_model_id(b.embeddings),
        embedding_dim=stored.dimension,
        chunk_size=opts.chunk_size,
        contextual_headers=opts.contextual_headers,
        header_max_chars=b.header_max_chars,
        keyword_match=opts.keyword_match,
        profile=opts.profile,
        corpus_hash=corpus_hash(b.chunks),
        documents=len(b.documents) if b.documents is not None and b.table is None else len(table),
        chunks=len(b.chunks),
        sentences=stored_count,
        chroma=chroma_cfg,
        build_seconds=round(time.perf_counter() - b.started, 3),
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        extra={
            "timings": {k: round(v, 3) for k, v in timings.items()},
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
    answering: SentenceStore | SentenceMatrix | SentenceOpener = sentences
    if store_checksums is not None:
        # The index returned answers from a checked copy, as loads do, made at its first search:
        # `arag index` and `--update` never search, and the copy is a pass over the whole store.
        answering = functools.partial(open_sentences, root, manifest, build_dir, b.chunks, opts.chroma_timeout)
    return HierarchicalIndex(root, manifest, store, keywords, answering, b.embeddings, build_dir, updater=update_index)


def _summaries(b: _Build, build_dir: Path, previous: str | None) -> Any:
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


def _collection_prefix(collection: str | None, root: Path) -> str:
    """The server collection prefix: ``collection`` checked against Chroma's naming rule, or one
    derived from the index directory's name (each build appends ``-<build>``)."""
    longest = COLLECTION_NAME_MAX - 1 - _BUILD_NAME_LENGTH
    if collection is not None and collection.strip():
        prefix = collection.strip()
        if len(prefix) > longest or not valid_collection_name(f"{prefix}-x0x"):
            raise AragError(
                f"--collection {prefix[:60]!r}: not a usable Chroma collection prefix; use 1-{longest} characters "
                "from a-z A-Z 0-9 . _ - that start with a letter or digit, without '..'"
            )
        return prefix
    ascii_name = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "-" for ch in root.resolve().name)
    while ".." in ascii_name:
        ascii_name = ascii_name.replace("..", ".")
    return ascii_name.strip("-._")[:40].strip("-._") or "arag"


@dataclass
class _StoredSentences:
    """What :func:`_store_sentences` leaves: the opened store, the vectors' dimension, the seconds
    spent encoding (the rest is storing) and, for Chroma, the vectors' fingerprint for ``verify``."""

    sentences: SentenceStore | SentenceMatrix
    dimension: int
    encode_seconds: float
    fingerprint: np.ndarray


def _store_sentences(
    config: dict[str, Any],
    build_dir: Path,
    chunks: Sequence[Chunk],
    embeddings: Embeddings,
    contextual_headers: bool,
    chroma_timeout: float | None,
    progress: bool,
    header_max_chars: int = HEADER_MAX_CHARS,
    reuse: VectorReuse | StoreReuse | None = None,
    known_dimension: int = 0,
) -> _StoredSentences:
    """Encode every sentence and store its vector, one block of :data:`BUILD_BLOCK` at a time.

    Holding one block of vectors at a time keeps a build's memory flat however large the corpus:
    the matrix is written to disk as it grows, Chroma takes one block per insert, and only the
    vectors' fingerprint (two floats a sentence) is kept for the manifest. With ``reuse`` (an
    update) a sentence whose embedded text the previous build holds takes its vector from there:
    only new text is encoded, which is what makes an update cheap.
    """
    from tqdm.auto import tqdm

    if isinstance(reuse, StoreReuse):
        stored = _changed_store(config, build_dir, chunks, embeddings, contextual_headers, header_max_chars, reuse)
        stored.dimension = stored.dimension or known_dimension
        return stored
    layout = SentenceLayout(chunks)
    total = len(layout)
    matrix = config["mode"] == "matrix"
    writer = MatrixWriter(build_dir / str(config["path"]), total) if matrix else None
    chroma = None if matrix else connect_sentence_store(config, build_dir, create=True, timeout=chroma_timeout)
    where = "writing vectors" if matrix else "inserting into Chroma"
    dimension, encode_seconds = 0, 0.0
    fingerprints: list[np.ndarray] = []
    bars: dict[str, Any] = dict(total=total, unit="sent", disable=not progress, leave=False)
    with tqdm(desc="embedding sentences", **bars) as encoded, tqdm(desc=where, position=1, **bars) as stored:
        for start, documents, texts in sentence_blocks(chunks, contextual_headers, header_max_chars=header_max_chars):
            t0 = time.perf_counter()
            if reuse is None:
                vectors = embed_texts(embeddings, texts, on_batch=encoded.update, dimension=dimension or None)
            else:
                vectors = reuse.vectors(embeddings, texts, on_batch=encoded.update)
            encode_seconds += time.perf_counter() - t0
            dimension = int(vectors.shape[1])
            if writer is not None:
                writer.add(vectors, unit=reuse is not None and reuse.unit)
            else:
                assert chroma is not None
                chroma.add_rows(start, layout, documents, vectors)
                fingerprints.append(integrity.vector_fingerprint(vectors))
            stored.update(len(vectors))
    dimension = dimension or known_dimension
    fingerprint = np.concatenate(fingerprints) if fingerprints else np.zeros((0, 2), np.float32)
    if writer is not None:
        writer.close()
        opened = SentenceMatrix.open(config, build_dir, layout, dimension, build_dir.parent.parent)
        return _StoredSentences(opened, dimension, encode_seconds, fingerprint)
    assert chroma is not None
    chroma.layout = layout
    return _StoredSentences(chroma, dimension, encode_seconds, fingerprint)


def _changed_store(
    config: dict[str, Any],
    build_dir: Path,
    chunks: Sequence[Chunk],
    embeddings: Embeddings,
    contextual_headers: bool,
    header_max_chars: int,
    reuse: StoreReuse,
) -> _StoredSentences:
    """An update's embedded store: the previous build's store copied into ``build_dir`` and changed
    (:class:`StoreReuse`): unchanged rows keep their records, the other old records are deleted and
    the new rows added, their vectors taken from a previous record with the same embedded text or
    encoded. Writes the record id of each row (:data:`~arag_graph.index.chroma.RECORD_IDS`)."""
    layout = SentenceLayout(chunks)
    total = len(layout)
    target = build_dir / str(config["path"])
    integrity.copy_verified(reuse.root, reuse.source, target, reuse.checksums)
    for folder, _, _ in os.walk(target):  # the copy's folders are private (0700): readable as the source's are
        with contextlib.suppress(OSError):
            os.chmod(folder, stat.S_IMODE((reuse.source / Path(folder).relative_to(target)).lstat().st_mode))
    store = connect_sentence_store(config, build_dir, update=True)
    record_ids = np.empty(total, dtype=np.int64)
    fingerprint = np.empty((total, 2), dtype=np.float32)
    kept = np.zeros(len(reuse.record_ids), dtype=bool)
    new_rows: list[int] = []
    new_documents: list[str] = []
    new_texts: list[str] = []
    described = layout.describe(np.arange(total), np.zeros(total, dtype=np.float32))
    for start, documents, texts in sentence_blocks(chunks, contextual_headers, header_max_chars=header_max_chars):
        for row, (document, text) in enumerate(zip(documents, texts, strict=True), start):
            chunk_id, position, _ = described[row]
            old = reuse.rows.pop((chunk_id, position, document, text), None)
            if old is None:
                new_rows.append(row)
                new_documents.append(document)
                new_texts.append(text)
            else:
                kept[old] = True
                record_ids[row] = reuse.record_ids[old]
                fingerprint[row] = reuse.fingerprint[old]
    t0 = time.perf_counter()
    same_text = [reuse.by_text.get(text) for text in new_texts]
    copied = [i for i, old in enumerate(same_text) if old is not None]
    missing = [i for i, old in enumerate(same_text) if old is None]
    dimension = 0
    vectors = np.zeros((len(new_rows), 0), dtype=np.float32)
    if new_rows:
        parts: dict[int, np.ndarray] = {}
        if copied:
            # Read from the copy, whose records are still the previous build's (nothing deleted yet).
            found = store.vectors_of([int(reuse.record_ids[same_text[i]]) for i in copied])  # type: ignore[index]
            parts.update(zip(copied, found, strict=True))
        if missing:
            width = int(parts[copied[0]].shape[0]) if copied else None
            fresh = embed_texts(embeddings, [new_texts[i] for i in missing], dimension=width)
            parts.update(zip(missing, fresh, strict=True))
        vectors = np.asarray([parts[i] for i in range(len(new_rows))], dtype=np.float32)
        dimension = int(vectors.shape[1])
    encode_seconds = time.perf_counter() - t0
    gone = reuse.record_ids[~kept]
    first_new = int(reuse.record_ids.max()) + 1 if len(reuse.record_ids) else 0
    added_ids = np.arange(first_new, first_new + len(new_rows), dtype=np.int64)
    store.delete_records(gone.tolist())
    if new_rows:
        rows = np.asarray(new_rows, dtype=np.int64)
        store.add_rows(rows, layout, new_documents, vectors, ids=added_ids)
        record_ids[rows] = added_ids
        fingerprint[rows] = integrity.vector_fingerprint(vectors)
    np.save(build_dir / RECORD_IDS, record_ids, allow_pickle=False)
    store.layout = layout
    store.use_record_ids(record_ids)
    reuse.encoded, reuse.reused = len(missing), total - len(missing)
    return _StoredSentences(store, dimension, encode_seconds, fingerprint)


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


# ---------------------------------------------------------------------------------------------
# Updates: a new build that reuses the previous build's chunks and vectors


class VectorReuse:
    """The previous build's sentence vectors, found by the exact text that was embedded for them.

    An update encodes only sentences whose embedded text (the sentence behind its contextual
    header) the previous build does not hold; every other vector is copied, so an update costs
    what its new text costs to encode, plus rewriting the files (bench/results/update.md).
    Keyed by a 16-byte hash of the text, to keep a million sentences' keys small.
    """

    def __init__(self, index: HierarchicalIndex) -> None:
        import hashlib

        self._hash = lambda text: hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        manifest = index.manifest
        self.vectors_of, owners = index.sentences.all_vectors()
        self.unit = isinstance(index.sentences, SentenceMatrix)
        """The previous vectors are a matrix's unit rows: new ones are scaled the same way before they join them."""
        headers = manifest.contextual_headers and manifest.header_max_chars > 0
        in_order = ((c.id, p) for c in index.store.chunks for p in range(len(c.sentences)))
        embedded: dict[tuple[str, int], str] = {}
        for _, _, texts in sentence_blocks(index.store.chunks, headers, header_max_chars=manifest.header_max_chars):
            for text in texts:
                embedded[next(in_order)] = text
        self.rows: dict[bytes, int] = {}
        for row, owner in enumerate(owners):
            seen = embedded.get(owner)
            if seen is not None:
                self.rows.setdefault(self._hash(seen), row)
        self.reused = 0
        self.encoded = 0

    def vectors(self, embeddings: Embeddings, texts: Sequence[str], on_batch: Any = None) -> np.ndarray:
        """Vectors of ``texts``: copied where the previous build embedded the same text, else encoded."""
        found = [self.rows.get(self._hash(text)) for text in texts]
        missing = [i for i, row in enumerate(found) if row is None]
        dimension = int(self.vectors_of.shape[1]) if self.vectors_of.ndim == 2 and len(self.vectors_of) else None
        fresh = embed_texts(embeddings, [texts[i] for i in missing], dimension=dimension) if missing else None
        width = dimension or (int(fresh.shape[1]) if fresh is not None else 0)
        out = np.empty((len(texts), width), dtype=np.float32)
        kept = [i for i, row in enumerate(found) if row is not None]
        if kept:
            rows = [row for row in found if row is not None]  # the rows of ``kept``, in its order
            out[kept] = np.asarray(self.vectors_of[rows], dtype=np.float32)
        if fresh is not None:
            out[missing] = unit_rows(fresh) if self.unit else fresh
        self.reused += len(kept)
        self.encoded += len(missing)
        if on_batch is not None:
            on_batch(len(texts))
        return out


class StoreReuse:
    """The previous build's embedded Chroma store, which an update copies and changes in place.

    Re-inserting every vector into a new collection would cost an update what a full build's
    storing costs (over a millisecond of CPU a sentence, bench/results/vs_paper.md). Instead the new
    build starts from a checked copy of the previous store (:func:`arag_graph.index.integrity.copy_verified`:
    only files that build recorded, no link followed); a sentence row whose chunk, position, stored
    sentence and embedded text are unchanged keeps its record (and id), the records of the others are
    deleted, and new rows are added under new ids: Chroma's work is in proportion to the change. Row
    ``i``'s record id is written to :data:`~arag_graph.index.chroma.RECORD_IDS`.
    """

    def __init__(self, index: HierarchicalIndex) -> None:
        # The previous store itself is never opened: the update reads what it needs from its own
        # checked copy, and from the record ids and fingerprint files the load checked.
        assert index.path is not None and index.build_dir is not None
        manifest = index.manifest
        self.root = index.path
        self.source = index.build_dir / str(manifest.chroma.get("path", "chroma"))
        self.checksums = dict(manifest.store_checksums or {})
        layout = SentenceLayout(index.store.chunks)
        count = len(layout)
        if count != manifest.sentences:
            raise AragError(
                f"{self.root}: the previous build's chunks hold {count} sentences, its manifest {manifest.sentences}"
            )
        if manifest.chroma.get("ids") == "records":
            self.record_ids = load_index_array(self.root, index.build_dir / RECORD_IDS, mmap=False).astype(np.int64)
        else:  # a store a full build wrote: record i is row i
            self.record_ids = np.arange(count, dtype=np.int64)
        if self.record_ids.shape != (count,):
            raise AragError(f"{self.root}: the previous build's record ids do not match its sentences")
        self.fingerprint = load_index_array(
            self.root, index.build_dir / integrity.VECTOR_FINGERPRINT, mmap=False
        ).astype(np.float32)
        if self.fingerprint.shape != (count, 2):
            raise AragError(f"{self.root}: the previous build's vector fingerprint does not match its sentences")
        headers = manifest.contextual_headers and manifest.header_max_chars > 0
        self.rows: dict[tuple[str, int, str, str], int] = {}
        """Previous rows by (chunk id, position, stored sentence, embedded text)."""
        self.by_text: dict[str, int] = {}
        """A previous row by embedded text: its vector serves a new row with the same text."""
        described = layout.describe(np.arange(count), np.zeros(count, dtype=np.float32))
        for start, documents, texts in sentence_blocks(
            index.store.chunks, headers, header_max_chars=manifest.header_max_chars
        ):
            for row, (document, text) in enumerate(zip(documents, texts, strict=True), start):
                chunk_id, position, _ = described[row]
                self.rows.setdefault((chunk_id, position, document, text), row)
                self.by_text.setdefault(text, row)
        self.reused = 0
        self.encoded = 0


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

    The update is a build like any other (:func:`build_index`): a new recorded build directory,
    checksummed and sealed, and ``CURRENT`` switched to it only when it is complete, so a reader
    never sees half an update and a killed update leaves the previous build answering. What makes
    it cheap: unchanged documents keep their chunks, and every sentence whose embedded text the
    previous build holds keeps its vector (:class:`VectorReuse`). Returns the updated index (the
    given one stays as it was: indexes are read-only snapshots, safe to share between threads)
    and what changed.
    """
    from arag_graph.core.chunking import chunk_documents
    from arag_graph.core.errors import CorpusError
    from arag_graph.index.corpus import source_documents
    from arag_graph.index.sources import document_hash, document_id, load_table

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
        by_id = {entry.id: entry for entry in table}
        report = UpdateReport()
        plan: list[DocumentEntry | SourceDocument] = []
        if sync is not None:
            seen: set[str] = set()
            for position, doc in enumerate(source_documents(sync)):
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
        else:
            unknown = [i for i in gone if i not in by_id]
            if unknown:
                raise AragError(
                    f"no document {unknown[0][:60]!r} in the index at {root}"
                    + (f" (nor {len(unknown) - 1} other id(s))" if len(unknown) > 1 else "")
                    + "; delete only ids it holds (a document cut into pieces is deleted by its own id, not <id>#<n>)"
                )
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
            removed = set(gone) - set(replacing)
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
        report.unchanged = sum(isinstance(item, DocumentEntry) for item in plan)
        if not report:
            return index, report
        chunks, new_table = _planned_chunks(index, plan, manifest.chunk_size, chunk_documents)
        opts = BuildOptions(
            chunk_size=manifest.chunk_size,
            contextual_headers=manifest.contextual_headers,
            header_max_chars=manifest.header_max_chars if manifest.contextual_headers else 0,
            keyword_match=manifest.keyword_match,
            profile=check_profile(manifest.profile),  # an update keeps the profile the index was built with
        )
        chroma_cfg = _same_store(manifest.chroma, build_dir.name)
        reuse: VectorReuse | StoreReuse
        if _store_reusable(index):
            reuse, chroma_cfg = StoreReuse(index), {**chroma_cfg, "ids": "records"}
        else:
            reuse = VectorReuse(index)
        build = _Build(
            root=root,
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
            table=new_table,
            reuse=reuse,
            dimension=manifest.embedding_dim,
            keywords_before=(index.keywords, keyword_chunks(index.store.chunks, manifest.header_max_chars)),
        )
        updated = _build_locked(build)
    report.sentences_encoded, report.sentences_reused = reuse.encoded, reuse.reused
    return updated, report


def _planned_chunks(
    index: HierarchicalIndex, plan: Sequence[DocumentEntry | SourceDocument], chunk_size: int, chunk_documents: Any
) -> tuple[list[Chunk], list[DocumentEntry]]:
    """The chunks of the updated corpus in order (kept documents' chunks as they were, the others cut
    anew), linked ``prev``/``next`` across documents as a build links them, and its table."""
    from arag_graph.core.errors import CorpusError
    from arag_graph.index.sources import document_hash

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
