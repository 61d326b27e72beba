"""Building an index: corpus in, a new build written beside the old one, switched to when complete.

:func:`build_index` checks its settings (:class:`~arag_graph.index.options.BuildOptions`) and its
inputs before anything is read or written, cuts the corpus into chunks, chooses the sentence store
and hands the build to :mod:`arag_graph.index.write`, which writes it and switches ``CURRENT`` to it.
An index already in ``out`` is replaced only once the new one is complete. The index then changes
without a rebuild (:mod:`arag_graph.index.update`):
:meth:`~arag_graph.index.hierarchical.HierarchicalIndex.add_documents`,
:meth:`~arag_graph.index.hierarchical.HierarchicalIndex.delete` and
:func:`arag_graph.index.sync.sync_index`.

Sentence vectors go to one exact NumPy matrix (the fastest search for small and mid-sized corpora),
Chroma's HNSW (large ones) or a Chroma server (``chroma_url``), encoded and stored a block at a
time (:mod:`arag_graph.index.sentence_vectors`).

:class:`BuildOptions`, :class:`SummaryWriter`, :func:`update_index`, :class:`UpdateReport`,
:class:`VectorReuse` and :class:`StoreReuse` are importable from here too, as they were before the
build was split into these modules.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from arag_graph.core.documents import Chunk, SourceDocument
from arag_graph.core.errors import AragError
from arag_graph.core.profiles import Profile
from arag_graph.index.chroma import (
    CHROMA_EXTRA,
    COLLECTION_NAME_MAX,
    check_chroma_server,
    chromadb_installed,
    valid_collection_name,
)
from arag_graph.index.devices import check_device
from arag_graph.index.embedding_loader import resolve_embeddings
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.layout import build_lock, check_out, make_root
from arag_graph.index.manifest import KeywordMatch
from arag_graph.index.options import BuildOptions as BuildOptions
from arag_graph.index.options import SummaryWriter as SummaryWriter
from arag_graph.index.sentence_vectors import StoreReuse as StoreReuse
from arag_graph.index.sentence_vectors import VectorReuse as VectorReuse
from arag_graph.index.sentencematrix import MATRIX_FILE, MATRIX_MAX_SENTENCES
from arag_graph.index.text import HeaderStyle
from arag_graph.index.update import UpdateReport as UpdateReport
from arag_graph.index.update import update_index as update_index
from arag_graph.index.write import BuildJob, build_locked

if TYPE_CHECKING:
    from langchain_core.documents import Document as LangChainDocument

# Builds are named <UTC-ish timestamp>-<8 hex>; server collections are <prefix>-<build>.
_BUILD_NAME_LENGTH = len("20260101T000000-0123abcd")

# The settings build_index takes one by one: BuildOptions' fields (a test keeps the two in step).
_SETTINGS = tuple(field.name for field in dataclasses.fields(BuildOptions))

logger = logging.getLogger(__name__)


def build_index(
    corpus: str | os.PathLike[str] | Iterable[SourceDocument] | Iterable[LangChainDocument] | Sequence[Chunk],
    out: str | os.PathLike[str],
    options: BuildOptions | None = None,
    *,
    embeddings: Embeddings | str | None = None,
    summaries: SummaryWriter | None = None,
    progress: bool = False,
    out_flag: str = "--out",
    chunk_size: int | None = None,
    contextual_headers: bool | None = None,
    header_max_chars: int | None = None,
    header_style: HeaderStyle | None = None,
    keyword_match: KeywordMatch | None = None,
    backend: str | None = None,
    encoder: str | None = None,
    embedding_base_url: str | None = None,
    corpus_format: str | None = None,
    chroma_url: str | None = None,
    collection: str | None = None,
    chroma_timeout: float | None = None,
    profile: Profile | None = None,
    device: str | None = None,
) -> HierarchicalIndex:
    """Build an index of ``corpus`` into ``out`` and return it loaded.

    ``corpus`` is a path (any format :func:`arag_graph.index.corpus.load_corpus` reads), documents
    (LangChain ``Document`` objects straight from any loader, their metadata kept with their chunks,
    or :class:`~arag_graph.core.documents.SourceDocument`), or ready-made chunks. ``out`` must be new,
    empty or an arag index (see :mod:`arag_graph.index.layout`), and arag deletes only builds it
    recorded there; ``out_flag`` names ``out`` as the user gave it (``--out``; eval's ``--index``;
    the cache directory) in a refusal of ``out``, so the one line says what to change.

    ``options`` holds the settings (:class:`BuildOptions`); the keyword arguments from ``chunk_size``
    on, named after its fields (documented there), change single ones
    (``build_index(docs, out, chunk_size=512)``); one left None keeps the value of ``options``.

    ``embeddings`` is any LangChain ``Embeddings`` or a spec string
    (:func:`arag_graph.index.embedding_loader.resolve_embeddings`: a sentence-transformers folder or
    cached name, or ``openai:NAME`` with ``embedding_base_url``); a spec is recorded so that
    :func:`~arag_graph.index.load.load_index` embeds queries with the same model without being told.
    ``encoder`` picks the backend of a local model and cannot be combined with an ``Embeddings``.
    ``device`` (``auto``, the default, ``cpu``, ``cuda``, ``cuda:N``, ``mps``) is where a local model
    encodes (:func:`arag_graph.index.encoders.encoder_and_device`): a run setting, never recorded.

    ``summaries`` (:func:`arag_graph.llm.summarize.summary_writer`: a chat model, or ``offline`` for
    extractive lead sentences) adds ARAGOG's document summary index: a summary per document,
    embedded and stored in the build (:mod:`arag_graph.retrievers.summaries`). ``progress`` draws
    progress bars on stderr; off by default, so a library call is quiet (the CLI turns them on).
    """
    given = locals()  # nothing but the parameters is bound yet
    changes = {name: given[name] for name in _SETTINGS if given[name] is not None}
    opts = (options or BuildOptions()).with_changes(changes)
    return _full_build(corpus, Path(out), opts, embeddings, summaries, progress, out_flag, device)


def _full_build(
    corpus: Any,
    root: Path,
    opts: BuildOptions,
    embeddings: Embeddings | str | None,
    summaries: SummaryWriter | None,
    progress: bool,
    out_flag: str,
    device: str | None = None,
) -> HierarchicalIndex:
    """:func:`build_index` with its settings in one :class:`BuildOptions`: ``out`` and every input
    checked before anything is read or written, the corpus cut, then the build written and switched
    to under the build lock."""
    started = time.perf_counter()
    timings: dict[str, float] = {}
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
    documents, chunks = _corpus_chunks(corpus, opts, progress)
    if not chunks:
        raise AragError("the corpus has no text to index; give a corpus with at least one non-empty document")
    timings["split_seconds"] = time.perf_counter() - started
    chroma_cfg = _sentence_store(opts, root, chunks)
    created = not root.exists()
    make_root(root)
    # A process refused by the lock returns from build_lock's error before build_locked runs: it
    # touches nothing, not even a directory it believes it created (another build is writing there).
    with build_lock(root):
        build = BuildJob(
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
            updater=update_index,
        )
        return build_locked(build)


def _corpus_chunks(corpus: Any, opts: BuildOptions, progress: bool) -> tuple[list[SourceDocument] | None, list[Chunk]]:
    """The documents of ``corpus`` (None when it is ready-made chunks) and their chunks."""
    from arag_graph.core.chunking import chunk_documents
    from arag_graph.index.corpus import load_corpus, source_documents

    def split(docs: list[SourceDocument]) -> list[Chunk]:
        from tqdm.auto import tqdm

        bar = tqdm(docs, desc="splitting documents", unit="doc", disable=not progress, leave=False)
        with bar:
            return chunk_documents(bar, chunk_size=opts.chunk_size)

    if isinstance(corpus, (str, os.PathLike)):
        loaded = load_corpus(corpus, opts.corpus_format)
        return loaded, split(loaded)
    items = list(corpus)
    if items and all(isinstance(i, Chunk) for i in items):
        return None, list(items)
    documents = source_documents(items)  # LangChain Documents from any loader, or ours
    return documents, split(documents)


def _sentence_store(opts: BuildOptions, root: Path, chunks: Sequence[Chunk]) -> dict[str, Any]:
    """Where the sentence vectors go (the build's sentence-store record): a Chroma server (checked
    now, before encoding, which is what takes long), an embedded Chroma store or the matrix."""
    if opts.chroma_url:
        prefix = _collection_prefix(opts.collection, root)
        check_chroma_server(opts.chroma_url, opts.chroma_timeout)
        return {"mode": "http", "url": opts.chroma_url, "collection": prefix, "ids": "rows"}
    if opts.backend == "chroma":
        return {"mode": "persistent", "path": "chroma", "collection": "sentences", "ids": "rows"}
    total = sum(len(c.sentences) for c in chunks)
    if opts.backend == "auto" and total > MATRIX_MAX_SENTENCES:
        if chromadb_installed():
            return {"mode": "persistent", "path": "chroma", "collection": "sentences", "ids": "rows"}
        # chromadb is an extra: without it the exact matrix serves any size, only with more memory
        # (4 bytes per dimension per sentence) and a full scan per query, so the build goes on and says so.
        logger.warning(
            "%s sentences: past %s the auto backend stores them in Chroma, which is not installed; keeping "
            "the exact matrix (all vectors in memory). For Chroma: %s",
            f"{total:,}",
            f"{MATRIX_MAX_SENTENCES:,}",
            CHROMA_EXTRA,
        )
    return {"mode": "matrix", "path": MATRIX_FILE}


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
