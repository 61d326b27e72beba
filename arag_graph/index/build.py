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
import json
import os
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from langchain_core.embeddings import Embeddings

from arag_graph.core.documents import DEFAULT_CONTEXTUAL_HEADERS, HEADER_MAX_CHARS, Chunk, Document
from arag_graph.core.errors import AragError
from arag_graph.core.safety import url_credentials, url_without_credentials
from arag_graph.index import integrity
from arag_graph.index.chroma import (
    COLLECTION_NAME_MAX,
    SentenceStore,
    check_chroma_server,
    connect_sentence_store,
    valid_collection_name,
)
from arag_graph.index.embedding_models import endpoint_base_url, resolve_embeddings
from arag_graph.index.embeddings import embed_texts, embedding_model_id, encoder_backend
from arag_graph.index.hierarchical import ChunkStore, HierarchicalIndex
from arag_graph.index.keywords import KeywordIndex, keyword_files
from arag_graph.index.layout import (
    BUILDS,
    MANIFEST,
    BuildRecord,
    build_lock,
    build_path,
    check_out,
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
from arag_graph.index.load import _open_sentences
from arag_graph.index.manifest import CHUNKS, SENTENCE_BACKENDS, SENTENCE_STORE, KeywordMatch, Manifest, corpus_hash
from arag_graph.index.sentencematrix import (
    MATRIX_FILE,
    MATRIX_MAX_SENTENCES,
    MatrixWriter,
    SentenceLayout,
    SentenceMatrix,
)
from arag_graph.index.text import keyword_chunks, sentence_blocks

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

    def check(self) -> None:
        """One-line errors for settings no build could use, before anything is read or written."""
        from arag_graph.core.chunking import check_chunk_size

        check_chunk_size(self.chunk_size)
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
    corpus: str | os.PathLike[str] | Iterable[Document] | Sequence[Chunk],
    out: str | os.PathLike[str],
    options: BuildOptions | None = None,
    *,
    embeddings: Embeddings | str | None = None,
    summaries: SummaryWriter | None = None,
    progress: bool = False,
    out_flag: str = "--out",
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
    embedded and stored in the build (:mod:`arag_graph.retrieval.summaries`).

    Sentence vectors go to one exact NumPy matrix (the fastest search for small and mid-sized
    corpora), Chroma's HNSW (large ones) or a Chroma server (``chroma_url``). Vectors are encoded and
    stored :data:`~arag_graph.index.text.BUILD_BLOCK` sentences at a time, so a build never holds all
    of them in memory.

    ``embeddings`` is any LangChain ``Embeddings`` or a spec string
    (:func:`arag_graph.index.embedding_models.resolve_embeddings`: a sentence-transformers folder or cached
    name, or ``openai:NAME`` with ``embedding_base_url``); a spec is recorded so that
    :func:`~arag_graph.index.load.load_index` embeds queries with the same model without being told.
    ``encoder`` picks the backend of a local model and cannot be combined with an ``Embeddings`` instance.

    ``corpus`` is a path (any format :func:`arag_graph.index.corpus.load_corpus` reads), documents, or
    ready-made chunks. An index already in ``out`` is replaced only once the new one is complete.
    ``out`` must be new, empty or an arag index (see :mod:`arag_graph.index.layout`), and arag deletes
    only builds it recorded there.
    """
    from arag_graph.core.chunking import chunk_documents
    from arag_graph.index.corpus import load_corpus

    opts = (options or BuildOptions()).with_changes(changes)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    root = Path(out)
    corpus_dir = Path(corpus) if isinstance(corpus, (str, os.PathLike)) and Path(corpus).is_dir() else None
    check_out(root, corpus_dir, flag=out_flag)
    opts.check()
    embeddings = resolve_embeddings(embeddings, base_url=opts.embedding_base_url, encoder=opts.encoder)
    check = getattr(embeddings, "check_available", None)
    if callable(check):  # a missing optional package fails now, not after splitting the corpus
        check()
    if summaries is not None:  # an unusable summary model fails now, not after encoding
        summaries.check()

    def split(docs: list[Document]) -> list[Chunk]:
        from tqdm.auto import tqdm

        bar = tqdm(docs, desc="splitting documents", unit="doc", disable=not progress, leave=False)
        with bar:
            return chunk_documents(bar, chunk_size=opts.chunk_size)

    if isinstance(corpus, (str, os.PathLike)):
        loaded = load_corpus(corpus, opts.corpus_format)
        documents: list[Document] | None = loaded
        chunks = split(loaded)
    else:
        items = list(corpus)
        if items and all(isinstance(i, Chunk) for i in items):
            documents, chunks = None, list(items)  # type: ignore[assignment,arg-type]
        else:
            documents = items  # type: ignore[assignment]
            chunks = split(documents)  # type: ignore[arg-type]
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
    # A process refused by the lock returns from build_lock's error before the try below: it
    # touches nothing, not even a directory it believes it created (another build is writing there).
    with build_lock(root):
        try:
            build = _Build(
                root=root,
                record=open_record(root),
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
        except OSError as exc:
            if exc.errno is not None and exc.errno not in _WRITE_ERRORS:  # numpy's short writes have none
                raise
            raise _write_failure(root, exc) from None
        finally:
            if created and read_current(root, strict=False) is None:
                # A first build that failed leaves no directory behind, as if never started (under
                # the lock, so that no other build can have started writing there meanwhile).
                shutil.rmtree(root, ignore_errors=True)


@dataclass
class _Build:
    """One build under way: what :func:`build_index` decided, handed to the build proper."""

    root: Path
    record: BuildRecord
    created: bool
    chunks: list[Chunk]
    documents: list[Document] | None
    embeddings: Embeddings
    options: BuildOptions
    summaries: SummaryWriter | None
    chroma_cfg: dict[str, Any]
    timings: dict[str, float]
    started: float
    progress: bool

    @property
    def header_max_chars(self) -> int:
        """The header bound the sentences are embedded with (0 without contextual headers)."""
        return self.options.header_max_chars if self.options.contextual_headers else 0


def _build_locked(b: _Build) -> HierarchicalIndex:
    """The build proper, under the lock: a new recorded build directory, switched to when complete."""
    root, record, opts, timings = b.root, b.record, b.options, b.timings
    build = new_build_name()
    build_dir = root / BUILDS / build
    previous = read_current(root, strict=False)
    chroma_cfg = b.chroma_cfg

    # Leftovers of killed builds (never pointed at) go now; the active build stays until the
    # new one is complete.
    def drop(path: Path) -> None:
        _drop_build(path, opts.chroma_timeout)

    remove_stale_builds(record, keep=previous, drop=drop)
    record.add(build)  # recorded before it exists: a build killed at any point is still known as ours
    build_dir.mkdir(parents=True)
    try:
        if chroma_cfg["mode"] == "http":
            chroma_cfg = {**chroma_cfg, "collection": f"{chroma_cfg['collection']}-{build}"}
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
        )
        sentences = stored.sentences
        timings["encode_seconds"] = stored.encode_seconds
        timings["insert_seconds"] = time.perf_counter() - t0 - stored.encode_seconds

        t0 = time.perf_counter()
        store = ChunkStore(b.chunks)
        store.save(build_dir / CHUNKS)
        keywords = _keyword_index(keyword_chunks(store.chunks, b.header_max_chars), opts.keyword_match, b.progress)
        keywords.save(build_dir)
        timings["keyword_seconds"] = time.perf_counter() - t0
        summarized = _summaries(b, build_dir, previous)

        t0 = time.perf_counter()
        written = [CHUNKS, SENTENCE_STORE, *keyword_files(), *(summarized.files if summarized else ())]
        digest = None
        store_checksums = None
        stored_count = sentences.count()
        if isinstance(sentences, SentenceMatrix):
            written.append(str(chroma_cfg["path"]))  # the vectors themselves: checked exactly
        else:
            # The records' content, for `verify` and for a server's store, whose files arag never sees.
            np.save(build_dir / integrity.VECTOR_FINGERPRINT, stored.fingerprint, allow_pickle=False)
            written.append(integrity.VECTOR_FINGERPRINT)
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
            corpus_hash=corpus_hash(b.chunks),
            documents=len(b.documents) if b.documents is not None else len(b.chunks),
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
            embedding_base_url=endpoint_base_url(b.embeddings),
            checksums=checksums,
            sentence_digest=digest,
            store_checksums=store_checksums,
        )
        write_atomic(build_dir / MANIFEST, manifest.to_json())
        if store_checksums is not None:  # the index returned answers from a checked copy, as loads do
            sentences = _open_sentences(root, manifest, build_dir, b.chunks, opts.chroma_timeout)
        point_current(root, build)
        if summarized and b.summaries is not None:  # the build holds them now
            b.summaries.forget(root)
    except BaseException:
        drop(build_dir)
        if not b.created or read_current(root, strict=False) is not None:
            record.discard(build)
        raise
    remove_stale_builds(record, keep=build, drop=drop)
    sentences.root = root  # from now on a failed read is this index's damage, not a failed build
    return HierarchicalIndex(root, manifest, store, keywords, sentences, b.embeddings, build_dir)


def _summaries(b: _Build, build_dir: Path, previous: str | None) -> Any:
    """ARAGOG's document summaries into the build when asked for (:mod:`arag_graph.retrieval.summaries`), else None.

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
) -> _StoredSentences:
    """Encode every sentence and store its vector, one block of :data:`BUILD_BLOCK` at a time.

    Holding one block of vectors at a time keeps a build's memory flat however large the corpus:
    the matrix is written to disk as it grows, Chroma takes one block per insert, and only the
    vectors' fingerprint (two floats a sentence) is kept for the manifest.
    """
    from tqdm.auto import tqdm

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
            vectors = embed_texts(embeddings, texts, on_batch=encoded.update, dimension=dimension or None)
            encode_seconds += time.perf_counter() - t0
            dimension = int(vectors.shape[1])
            if writer is not None:
                writer.add(vectors)
            else:
                assert chroma is not None
                chroma.add_rows(start, layout, documents, vectors)
                fingerprints.append(integrity.vector_fingerprint(vectors))
            stored.update(len(vectors))
    fingerprint = np.concatenate(fingerprints) if fingerprints else np.zeros((0, 2), np.float32)
    if writer is not None:
        writer.close()
        opened = SentenceMatrix.open(config, build_dir, layout, dimension, build_dir.parent.parent)
        return _StoredSentences(opened, dimension, encode_seconds, fingerprint)
    assert chroma is not None
    chroma.layout = layout
    return _StoredSentences(chroma, dimension, encode_seconds, fingerprint)


def _keyword_index(chunks: Sequence[Chunk], match: KeywordMatch, progress: bool) -> KeywordIndex:
    from tqdm.auto import tqdm

    with tqdm(total=len(chunks), desc="keyword index", unit="chunk", disable=not progress, leave=False) as bar:
        return KeywordIndex.from_chunks(chunks, match=match, on_chunks=bar.update)
