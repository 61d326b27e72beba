"""The hierarchical index: chunks in memory, sentence vectors in a matrix or Chroma, keywords in an inverted index.

A-RAG needs three views of one corpus and they must agree: ``chunk_read`` returns chunk text,
``semantic_search`` ranks chunks by their best sentence embedding, ``keyword_search`` ranks them by
exact keyword matches and shows the matching sentences. All three come from the same chunk list
(with sentence spans computed once at ingestion), which this module builds and loads.

On disk an index directory looks like::

    DIR/CURRENT                 name of the active build (replaced atomically)
    DIR/builds/<build>/manifest.json
    DIR/builds/<build>/chunks.jsonl
    DIR/builds/<build>/keywords.*       (inverted keyword index: vocabulary, occurrence arrays)
    DIR/builds/<build>/sentences.npy    (sentence vectors, exact search: indexes up to MATRIX_MAX_SENTENCES)
    DIR/builds/<build>/chroma/  (sentence vectors in Chroma's HNSW, larger indexes; absent with a server)

A rebuild writes a new ``builds/<build>`` and only then points ``CURRENT`` at it, so a build that is
killed half-way leaves the previous index loadable; the next build removes the leftovers. What arag
may delete there, and which ``--out`` it refuses, is :mod:`arag_graph.index_layout`'s business;
the checksums that keep a damaged index from answering are :mod:`arag_graph.integrity`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from langchain_core.embeddings import Embeddings

from arag_graph import integrity
from arag_graph.documents import (
    DEFAULT_CONTEXTUAL_HEADERS,
    HEADER_MAX_CHARS,
    Chunk,
    Document,
    SearchHit,
    bounded_header,
    chunk_header,
)
from arag_graph.embedding_models import endpoint_base_url, resolve_embeddings
from arag_graph.embeddings import (
    DEFAULT_MODEL_ID,
    ENCODERS,
    check_encoder,
    default_embeddings,
    embed_texts,
    embedding_model_id,
    encoder_backend,
)
from arag_graph.errors import AragError, IndexDamagedError, IndexMismatchError, IndexNotFoundError
from arag_graph.index_layout import (
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
    remove_stale_builds,
    remove_tree,
    write_atomic,
)
from arag_graph.index_layout import CURRENT as CURRENT  # re-exported: where callers have found it
from arag_graph.keywords import KeywordIndex, keyword_files
from arag_graph.sentencematrix import (
    MATRIX_FILE,
    MATRIX_MAX_SENTENCES,
    MatrixWriter,
    SentenceLayout,
    SentenceMatrix,
)
from arag_graph.vectorstore import (
    COLLECTION_NAME_MAX,
    SentenceStore,
    check_chroma_server,
    connect_sentence_store,
    valid_collection_name,
)

if TYPE_CHECKING:
    from arag_graph.langchain_retriever import IndexRetriever, SearchType

FORMAT_VERSION = 1
CHUNKS = "chunks.jsonl"
KEYWORDS_DIR = "."
# Where a build records its sentence store before creating it, so that the collection of a build
# that fails or is killed before its manifest exists can still be found and dropped in a server.
SENTENCE_STORE = "sentences.json"
# Builds are named <UTC-ish timestamp>-<8 hex>; server collections are <prefix>-<build>.
_BUILD_NAME_LENGTH = len("20260101T000000-0123abcd")

KeywordMatch = Literal["word", "substring"]
SentenceBackend = Literal["auto", "matrix", "chroma"]
SENTENCE_BACKENDS: tuple[str, ...] = ("auto", "matrix", "chroma")
# Sentences encoded and stored per step of a build: the most vectors a build holds at once.
BUILD_BLOCK = 4096


@dataclass(frozen=True)
class Manifest:
    """What an index was built from and with; checked when it is loaded."""

    embedding_model: str
    embedding_dim: int
    chunk_size: int
    contextual_headers: bool
    keyword_match: KeywordMatch
    corpus_hash: str
    documents: int
    chunks: int
    sentences: int
    chroma: dict[str, Any]
    build_seconds: float = 0.0
    created: str = ""
    format_version: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)
    encoder: str | None = "torch"
    """The backend that ran the model (``torch``, ``onnx``, ``onnx-int8``; ``None`` for other
    ``Embeddings``). Loading uses it for queries unless told otherwise; indexes from before this
    field were built with torch."""
    header_max_chars: int = 0
    """The bound on contextual chunk headers the sentences were embedded with (0: no headers)."""
    embedding_base_url: str | None = None
    """The OpenAI-compatible endpoint of an ``openai:NAME`` model (None: the environment's or OpenAI's).
    Never a key: keys come from the environment of whoever loads the index."""
    checksums: dict[str, str] = field(default_factory=dict)
    """SHA-256 of every file the build wrote, by name (:mod:`arag_graph.integrity`), the sentence
    matrix included; empty in indexes from before checksums, which load unchecked."""
    sentence_digest: str | None = None
    """One digest of the Chroma sentence records (chunk, position, text), for ``arag verify``; None
    for a matrix, whose rows hold vectors only (its checksum covers them)."""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_file(cls, path: Path, root: Path | None = None) -> Manifest:
        """Read and type-check a manifest; anything unusable is the one-line damage error."""
        from pydantic import TypeAdapter, ValidationError

        where = root if root is not None else path.parent
        try:
            data = json.loads(path.read_bytes())
        except OSError as exc:
            raise IndexDamagedError(where, f"{path} cannot be read ({exc.strerror or exc})") from None
        except ValueError:
            raise IndexDamagedError(where, f"{path} is not JSON") from None
        if not isinstance(data, dict):
            raise IndexDamagedError(where, f"{path} is not a JSON object")
        version = data.get("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise IndexMismatchError(
                f"{path}: index format {str(version)[:20]} is not supported by this version (expects "
                f"{FORMAT_VERSION}); rebuild the index with `arag index`"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        try:
            return TypeAdapter(cls).validate_python({k: v for k, v in data.items() if k in names})
        except ValidationError as exc:
            first = exc.errors()[0]
            field_name = ".".join(str(part) for part in first["loc"]) or "?"
            raise IndexDamagedError(where, f"{path}: field {field_name!r}: {first['msg']}") from None


class ChunkStore:
    """All chunks in corpus order, by id and by title, in memory.

    Chunk text is what ``chunk_read`` returns and what keyword matching runs over, so it stays in
    process memory; a million 1,000-character chunks is about 1 GB, in line with the vectors.
    """

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks: list[Chunk] = list(chunks)
        self.position: dict[str, int] = {c.id: i for i, c in enumerate(self.chunks)}
        self._by_title: dict[str, list[str]] | None = None

    def __len__(self) -> int:
        return len(self.chunks)

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self.position

    def get(self, chunk_id: str) -> Chunk | None:
        pos = self.position.get(chunk_id)
        return None if pos is None else self.chunks[pos]

    def ids_for_title(self, title: str) -> list[str]:
        if self._by_title is None:
            by_title: dict[str, list[str]] = {}
            for chunk in self.chunks:
                if chunk.title is not None:
                    by_title.setdefault(chunk.title, []).append(chunk.id)
            self._by_title = by_title
        return list(self._by_title.get(title, ()))

    @property
    def titles(self) -> dict[str, list[str]]:
        self.ids_for_title("")
        assert self._by_title is not None
        return self._by_title

    def save(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as fh:
            for c in self.chunks:
                record = {
                    "id": c.id,
                    "title": c.title,
                    "text": c.text,
                    "prev": c.prev_id,
                    "next": c.next_id,
                    "sentences": [list(span) for span in c.sentences],
                }
                fh.write(json.dumps(record, ensure_ascii=False))
                fh.write("\n")

    @classmethod
    def load(cls, path: Path, digest: Any | None = None) -> ChunkStore:
        """Read ``chunks.jsonl``; ``digest`` (a hashlib object) sees every byte read, so checking
        the file costs no second pass. A line that is not a chunk record raises ``ValueError``."""
        chunks: list[Chunk] = []
        with path.open("rb") as fh:
            for number, line in enumerate(fh, 1):
                if digest is not None:
                    digest.update(line)
                try:
                    r = json.loads(line)
                    chunk = Chunk(
                        id=r["id"],
                        text=r["text"],
                        title=r["title"],
                        prev_id=r["prev"],
                        next_id=r["next"],
                        sentences=tuple((s, e) for s, e in r["sentences"]),
                    )
                except (ValueError, KeyError, TypeError):
                    raise ValueError(f"line {number} is not a chunk record") from None
                if not isinstance(chunk.id, str) or not isinstance(chunk.text, str):
                    raise ValueError(f"line {number} is not a chunk record")
                chunks.append(chunk)
        return cls(chunks)


def corpus_hash(chunks: Iterable[Chunk]) -> str:
    """A digest of chunk ids, titles and texts: equal hashes mean the same retrievable corpus."""
    digest = hashlib.sha256()
    for c in chunks:
        for part in (c.id, c.title or "", c.text):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\x00")
    return digest.hexdigest()


_PIECE = re.compile(r"#\d+$")
_MARKDOWN_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def _document_of(chunk_id: str) -> str:
    """The id of a chunk's document: chunking names the pieces of a long document ``<id>#<n>``."""
    return _PIECE.sub("", chunk_id)


def _is_markdown(chunk_id: str) -> bool:
    """Chunks of a Markdown file of a directory corpus (whose document ids are the files' paths)."""
    return _document_of(chunk_id).lower().endswith(".md")


def sentence_headers(chunks: Sequence[Chunk], limit: int = HEADER_MAX_CHARS) -> Iterator[list[str]]:
    """Per chunk, the contextual header of each of its sentences, as ARAGOG writes them: the
    document title and, in Markdown documents, the heading of the section the sentence is in
    (``"Title > Section"``), at most ``limit`` characters ('' when there is nothing to say).

    A chunk that continues the previous chunk's document carries its section on.
    """
    section: str | None = None
    previous: str | None = None
    for c in chunks:
        document = _document_of(c.id)
        if document != previous:
            section = None
        previous = document
        headings = (
            [(m.start(), m.group(1).strip()) for m in _MARKDOWN_HEADING.finditer(c.text)] if _is_markdown(c.id) else []
        )
        headers: list[str] = []
        for _, end in c.sentences:
            while headings and headings[0][0] < end:
                section = headings.pop(0)[1]
            parts = [p for p in (c.title, section) if p]
            if len(parts) == 2 and parts[0].strip().lower() == parts[1].strip().lower():
                parts = parts[:1]  # a Markdown file's first heading is its title
            headers.append(bounded_header(" > ".join(parts), limit))
        for _, heading in headings:  # headings after the last sentence start the next chunk's section
            section = heading
        yield headers


def keyword_chunks(chunks: Sequence[Chunk], header_max_chars: int) -> Sequence[Chunk]:
    """What keyword_search matches: with contextual headers, each chunk's header (its title) before
    its text. Snippets still come from the chunk itself, so they never show the header.

    Kept because it helps: recall@5 of keyword_search rises from 0.5 to 0.605 on HotpotQA-100 and
    from 0.805 to 0.825 on the 2Wiki lookup questions (bench/results/quality.md). Indexes from before
    the header bound was recorded (``header_max_chars`` 0) keep matching the bare text.
    """
    if header_max_chars <= 0:
        return chunks
    headed = []
    for c in chunks:
        header = chunk_header(c, header_max_chars)
        headed.append(dataclasses.replace(c, text=f"{header}\n{c.text}") if header else c)
    return headed


def sentence_blocks(
    chunks: Sequence[Chunk], contextual_headers: bool, size: int | None = None, header_max_chars: int | None = None
) -> Iterator[tuple[int, list[str], list[str]]]:
    """The sentences to store and the texts to embed for them, ``size`` (default :data:`BUILD_BLOCK`)
    at a time, in row order.

    Yields ``(first row, sentences, texts to embed)``. With contextual chunk headers (ARAGOG's CCH)
    the embedded text is ``"header: sentence"`` (:func:`sentence_headers`) while the stored
    document stays the bare sentence, so snippets never show the header.
    """
    size = size or BUILD_BLOCK
    limit = HEADER_MAX_CHARS if header_max_chars is None else header_max_chars
    documents: list[str] = []
    embedded: list[str] = []
    start = 0
    headers = sentence_headers(chunks, limit) if contextual_headers and limit > 0 else None
    for c in chunks:
        own = next(headers) if headers is not None else None
        for n, (begin, end) in enumerate(c.sentences):
            sentence = c.text[begin:end]
            documents.append(sentence)
            embedded.append(f"{own[n]}: {sentence}" if own and own[n] else sentence)
            if len(documents) >= size:
                yield start, documents, embedded
                start += len(documents)
                documents, embedded = [], []
    if documents:
        yield start, documents, embedded


def sentence_inputs(
    chunks: Sequence[Chunk], contextual_headers: bool, header_max_chars: int | None = None
) -> tuple[list[str], list[str]]:
    """All sentences to store and all texts to embed (see :func:`sentence_blocks`) at once."""
    documents: list[str] = []
    embedded: list[str] = []
    for _, docs, texts in sentence_blocks(chunks, contextual_headers, size=1 << 62, header_max_chars=header_max_chars):
        documents += docs
        embedded += texts
    return documents, embedded


class HierarchicalIndex:
    """A loaded A-RAG index: answers keyword and semantic searches and hands out chunks.

    Usable without any LLM layer; the LangChain tools in :mod:`arag_graph.tools` are thin
    wrappers over :meth:`keyword_search`, :meth:`semantic_search` and :meth:`get_chunks`.
    Safe to share between threads: all state is read-only after loading.
    """

    def __init__(
        self,
        path: Path | None,
        manifest: Manifest,
        store: ChunkStore,
        keywords: KeywordIndex,
        sentences: SentenceStore | SentenceMatrix,
        embeddings: Embeddings,
        build_dir: Path | None = None,
    ) -> None:
        self.path = path
        self.build_dir = build_dir
        """The build this index was loaded from (``path/builds/<build>``), for ``verify_index``."""
        self.manifest = manifest
        self.store = store
        self.keywords = keywords
        self.sentences = sentences
        self.embeddings = embeddings

    def __len__(self) -> int:
        return len(self.store)

    def __repr__(self) -> str:
        return (
            f"HierarchicalIndex(path={str(self.path)!r}, chunks={self.manifest.chunks}, "
            f"sentences={self.manifest.sentences}, model={self.manifest.embedding_model!r})"
        )

    # -- chunks ------------------------------------------------------------------------------
    def get_chunk(self, chunk_id: str) -> Chunk | None:
        return self.store.get(chunk_id)

    def get_chunks(self, chunk_ids: Iterable[str]) -> list[Chunk | None]:
        return [self.store.get(i) for i in chunk_ids]

    def ids_for_title(self, title: str) -> list[str]:
        return self.store.ids_for_title(title)

    # -- searches ----------------------------------------------------------------------------
    def keyword_search(self, keywords: Sequence[str], top_k: int = 5) -> list[SearchHit]:
        """Chunks ranked by ``sum(count(k) * len(k))`` over the keywords (A-RAG's keyword score).

        Snippets are the chunk's sentences that contain a matched keyword.
        """
        hits = self.keywords.search(list(keywords), top_k)
        results = []
        for hit in hits:
            chunk = self.store.chunks[hit.chunk_index]
            snippets = self.keywords.snippets(chunk, list(hit.matched))
            results.append(SearchHit(chunk.id, float(hit.score), tuple(snippets), chunk.title))
        return results

    def _query_vector(self, query: str, query_vector: Sequence[float] | None) -> list[float]:
        return list(query_vector) if query_vector is not None else self.embeddings.embed_query(query)

    def top_sentences(
        self, query: str, n: int = 5, *, query_vector: Sequence[float] | None = None
    ) -> list[tuple[str, int, float]]:
        """The ``n`` sentences nearest to ``query``: ``(chunk_id, position in the chunk, cosine)``, best first.

        The sentence level on its own, for retrieval that works on sentences rather than chunks
        (ARAGOG's sentence windows); ``semantic_search`` aggregates the same matches to chunks.
        """
        if n <= 0 or len(self.store) == 0:
            return []
        return self._nearest(self._query_vector(query, query_vector), n)

    def _nearest(self, vector: Sequence[float], n: int) -> list[tuple[str, int, float]]:
        """The sentence store's nearest records, each checked against the chunk it names.

        A record whose chunk, position or text disagrees with the chunk store is damage: answering
        from it would show the wrong chunk, so the search fails with the one-line error instead.
        The matrix and row-numbered Chroma collections name rows, not chunks: each row's chunk comes
        from the chunk store's own sentence counts (and a row outside them is refused by the store).
        """
        if self.sentences.layout is not None:
            return self.sentences.query(vector, n)
        matches = []
        for chunk_id, position, similarity, document in self.sentences.query_documents(vector, n):
            chunk = self.store.get(chunk_id)
            if (
                chunk is None
                or not 0 <= position < len(chunk.sentences)
                or chunk.text[slice(*chunk.sentences[position])] != document
            ):
                raise IndexDamagedError(
                    self.path,
                    f"a sentence record names chunk {chunk_id[:40]!r} position {position}, which does not hold that "
                    f"sentence (`arag verify --index {self.path}` checks every record)",
                )
            matches.append((chunk_id, position, similarity))
        return matches

    def semantic_search(
        self, query: str, top_k: int = 5, *, query_vector: Sequence[float] | None = None
    ) -> list[SearchHit]:
        """Chunks ranked by the cosine similarity of their best sentence to ``query``.

        We fetch ``10 * top_k`` sentences (more if they fall in too few chunks), group them by
        parent chunk with max aggregation, and return each chunk's matched sentences in their order
        in the chunk. ``query_vector`` lets a caller embed something else than the query (HyDE).
        """
        if top_k <= 0 or len(self.store) == 0:
            return []
        vector = self._query_vector(query, query_vector)
        total = self.manifest.sentences
        n = min(total, max(10 * top_k, 50))
        while True:
            matches = self._nearest(vector, n)
            best: dict[str, float] = {}
            positions: dict[str, list[int]] = {}
            for chunk_id, position, similarity in matches:
                if chunk_id not in best:
                    best[chunk_id] = similarity
                    positions[chunk_id] = []
                positions[chunk_id].append(position)
            if len(best) >= top_k or n >= total:
                break
            n = min(total, n * 4)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1], self.store.position.get(kv[0], 0)))[:top_k]
        results = []
        for chunk_id, score in ranked:
            chunk = self.store.get(chunk_id)
            if chunk is None:  # a sentence store out of step with the chunk store: skip, never crash
                continue
            matched = tuple(p for p in sorted(set(positions[chunk_id])) if p < len(chunk.sentences))
            snippets = tuple(chunk.text[slice(*chunk.sentences[p])] for p in matched)
            results.append(SearchHit(chunk_id, float(score), snippets, chunk.title, matched))
        return results

    # -- LangChain ---------------------------------------------------------------------------
    def as_retriever(self, search_type: SearchType = "semantic", k: int = 5, **kwargs: Any) -> IndexRetriever:
        """This index as a LangChain ``BaseRetriever`` (``semantic``, ``keyword``, ``hybrid``, ``amr``, ``dsi``).

        Top ``k`` documents; see :mod:`arag_graph.langchain_retriever`; ``kwargs`` go to the retriever
        (``tags``, ``metadata``).
        """
        from arag_graph.langchain_retriever import IndexRetriever

        return IndexRetriever(index=self, search_type=search_type, k=k, **kwargs)


# --------------------------------------------------------------------------------------------
# Building


def _drop_build(build_dir: Path, timeout: float | None = None) -> None:
    """Delete a build arag recorded, and its collection when that lives in a Chroma server.

    The server collection is found from the manifest, or for a build that never finished from the
    record written before the collection was created; only a collection named for this build
    (``<prefix>-<build>``) is dropped. An unreachable server leaves the collection behind (safe to
    delete by hand); the directory goes regardless.
    """
    chroma: dict[str, Any] = {}
    for name in (MANIFEST, SENTENCE_STORE):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            data = json.loads((build_dir / name).read_text(encoding="utf-8"))
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


def build_index(
    corpus: str | os.PathLike[str] | Iterable[Document] | Sequence[Chunk],
    out: str | os.PathLike[str],
    *,
    embeddings: Embeddings | str | None = None,
    embedding_base_url: str | None = None,
    corpus_format: str | None = None,
    chunk_size: int = 1000,
    contextual_headers: bool = DEFAULT_CONTEXTUAL_HEADERS,
    header_max_chars: int = HEADER_MAX_CHARS,
    keyword_match: KeywordMatch = "word",
    chroma_url: str | None = None,
    collection: str | None = None,
    encoder: str | None = None,
    backend: str = "auto",
    chroma_timeout: float | None = None,
    summaries: str | None = None,
    summary_options: Mapping[str, Any] | None = None,
    progress: bool = True,
    out_flag: str = "--out",
) -> HierarchicalIndex:
    """Build an index of ``corpus`` into ``out`` and return it loaded.

    ``out_flag`` names ``out`` as the user gave it (``--out``; eval's ``--index``; the cache
    directory) in a refusal of ``out``, so the one line says what to change.

    ``summaries`` (a chat model spec, or ``offline`` for extractive lead sentences) adds ARAGOG's
    document summary index: a summary per document, embedded and stored in the build
    (:mod:`arag_graph.summaries`; ``summary_options`` go to its writer: ``base_url``, ``timeout``,
    ``max_retries``, ``workers``, ``reuse``).

    ``backend`` says where the sentence vectors go: ``matrix`` (one exact NumPy matrix, the fastest
    search for small and mid-sized corpora), ``chroma`` (Chroma's HNSW, for large ones) or ``auto``
    (``matrix`` up to :data:`MATRIX_MAX_SENTENCES` sentences). A Chroma server (``chroma_url``)
    implies ``chroma``. Vectors are encoded and stored :data:`BUILD_BLOCK` sentences at a time, so
    a build never holds all of them in memory.

    ``embeddings`` is any LangChain ``Embeddings`` or a spec string
    (:func:`arag_graph.embedding_models.resolve_embeddings`: a sentence-transformers folder or cached
    name, or ``openai:NAME`` with ``embedding_base_url``); a spec is recorded so that
    :func:`load_index` embeds queries with the same model without being told. ``encoder`` picks the
    backend of a local model (``onnx-int8``, the default for the packaged model; ``onnx``; ``torch``,
    see :mod:`arag_graph.embeddings`); it is recorded in the manifest so that loading the index
    embeds queries the same way. It cannot be combined with an ``Embeddings`` instance.

    ``corpus`` is a path (any format :func:`arag_graph.corpus.load_corpus` reads), documents, or
    ready-made chunks. With ``chroma_url`` the sentence vectors go to a Chroma server (collection
    ``collection``, default derived from the directory name; every request waits at most
    ``chroma_timeout`` seconds); chunks and manifest stay in ``out``. An index already in ``out`` is
    replaced only once the new one is complete. ``out`` must be new, empty or an arag index (see
    :mod:`arag_graph.index_layout`), and arag deletes only builds it recorded there.
    """
    from arag_graph.chunking import check_chunk_size, chunk_documents
    from arag_graph.corpus import load_corpus

    started = time.perf_counter()
    timings: dict[str, float] = {}
    root = Path(out)
    corpus_dir = Path(corpus) if isinstance(corpus, (str, os.PathLike)) and Path(corpus).is_dir() else None
    check_out(root, corpus_dir, flag=out_flag)
    check_chunk_size(chunk_size)
    if keyword_match not in ("word", "substring"):
        raise AragError(f"unknown keyword match rule {keyword_match!r}; use 'word' or 'substring'")
    if not isinstance(header_max_chars, int) or not 0 <= header_max_chars <= 1000:
        raise AragError(f"header length {header_max_chars!r}: give 0 to 1000 characters (default {HEADER_MAX_CHARS})")
    if backend not in SENTENCE_BACKENDS:
        raise AragError(f"unknown sentence backend {backend!r}; use one of {', '.join(SENTENCE_BACKENDS)}")
    if chroma_url and backend == "matrix":
        raise AragError("--chroma-url stores the sentences in a Chroma server; drop it or use --backend chroma")
    embeddings = resolve_embeddings(embeddings, base_url=embedding_base_url, encoder=encoder)
    check = getattr(embeddings, "check_available", None)
    if callable(check):  # a missing optional package fails now, not after splitting the corpus
        check()
    if summaries is not None:  # an unusable summary model fails now, not after encoding
        from arag_graph.summarize import check_summarizer

        check_summarizer(summaries, summary_options or {})

    def split(docs: list[Document]) -> list[Chunk]:
        from tqdm.auto import tqdm

        bar = tqdm(docs, desc="splitting documents", unit="doc", disable=not progress, leave=False)
        with bar:
            return chunk_documents(bar, chunk_size=chunk_size)

    if isinstance(corpus, (str, os.PathLike)):
        documents: list[Document] | None = load_corpus(corpus, corpus_format)
        chunks = split(documents)
    else:
        items = list(corpus)
        if items and all(isinstance(i, Chunk) for i in items):
            documents, chunks = None, list(items)  # type: ignore[assignment]
        else:
            documents = items  # type: ignore[assignment]
            chunks = split(documents)  # type: ignore[arg-type]
    if not chunks:
        raise AragError("the corpus has no text to index; give a corpus with at least one non-empty document")
    timings["split_seconds"] = time.perf_counter() - started
    if chroma_url:  # before encoding, which is what takes long
        prefix = _collection_prefix(collection, root)
        check_chroma_server(chroma_url, chroma_timeout)

    model_id = embedding_model_id(embeddings)
    total = sum(len(c.sentences) for c in chunks)
    if chroma_url:
        chroma_cfg: dict[str, Any] = {"mode": "http", "url": chroma_url, "collection": prefix, "ids": "rows"}
    elif backend == "chroma" or (backend == "auto" and total > MATRIX_MAX_SENTENCES):
        chroma_cfg = {"mode": "persistent", "path": "chroma", "collection": "sentences", "ids": "rows"}
    else:
        chroma_cfg = {"mode": "matrix", "path": MATRIX_FILE}

    created = not root.exists()
    make_root(root)
    try:
        with build_lock(root):
            record = open_record(root)
            return _build_locked(
                root,
                record,
                created,
                chunks=chunks,
                documents=documents,
                embeddings=embeddings,
                model_id=model_id,
                settings={
                    "chunk_size": chunk_size,
                    "contextual_headers": contextual_headers,
                    "header_max_chars": header_max_chars if contextual_headers else 0,
                    "summaries": summaries,
                    "summary_options": dict(summary_options or {}),
                },
                keyword_match=keyword_match,
                chroma_cfg=chroma_cfg,
                chroma_timeout=chroma_timeout,
                timings=timings,
                started=started,
                progress=progress,
            )
    except OSError as exc:
        if exc.errno is not None and exc.errno not in _WRITE_ERRORS:  # numpy's short writes have none
            raise
        raise _write_failure(root, exc) from None
    finally:
        if created and read_current(root, strict=False) is None:
            # A first build that failed leaves no directory behind, as if never started.
            shutil.rmtree(root, ignore_errors=True)


def _build_locked(
    root: Path,
    record: BuildRecord,
    created: bool,
    *,
    chunks: list[Chunk],
    documents: list[Document] | None,
    embeddings: Embeddings,
    model_id: str,
    settings: dict[str, Any],
    keyword_match: KeywordMatch,
    chroma_cfg: dict[str, Any],
    chroma_timeout: float | None,
    timings: dict[str, float],
    started: float,
    progress: bool,
) -> HierarchicalIndex:
    """The build proper, under the lock: a new recorded build directory, switched to when complete."""
    build = new_build_name()
    build_dir = root / BUILDS / build
    previous = read_current(root, strict=False)

    # Leftovers of killed builds (never pointed at) go now; the active build stays until the
    # new one is complete.
    def drop(path: Path) -> None:
        _drop_build(path, chroma_timeout)

    remove_stale_builds(record, keep=previous, drop=drop)
    record.add(build)  # recorded before it exists: a build killed at any point is still known as ours
    build_dir.mkdir(parents=True)
    try:
        if chroma_cfg["mode"] == "http":
            chroma_cfg = {**chroma_cfg, "collection": f"{chroma_cfg['collection']}-{build}"}
        write_atomic(build_dir / SENTENCE_STORE, json.dumps(chroma_cfg))
        t0 = time.perf_counter()
        stored = _store_sentences(
            chroma_cfg,
            build_dir,
            chunks,
            embeddings,
            settings["contextual_headers"],
            chroma_timeout,
            progress,
            settings["header_max_chars"],
        )
        sentences = stored.sentences
        timings["encode_seconds"] = stored.encode_seconds
        timings["insert_seconds"] = time.perf_counter() - t0 - stored.encode_seconds

        t0 = time.perf_counter()
        store = ChunkStore(chunks)
        store.save(build_dir / CHUNKS)
        keywords = _keyword_index(keyword_chunks(store.chunks, settings["header_max_chars"]), keyword_match, progress)
        keywords.save(build_dir)
        timings["keyword_seconds"] = time.perf_counter() - t0
        summarized = _summaries(root, build_dir, previous, chunks, embeddings, settings, progress, timings)

        t0 = time.perf_counter()
        written = [CHUNKS, SENTENCE_STORE, *keyword_files(), *(summarized.files if summarized else ())]
        digest = None
        if isinstance(sentences, SentenceMatrix):
            written.append(str(chroma_cfg["path"]))  # the vectors themselves: checked exactly
        else:
            # Chroma's files change when it opens them: its records are checked by content instead.
            np.save(build_dir / integrity.VECTOR_FINGERPRINT, stored.fingerprint, allow_pickle=False)
            written.append(integrity.VECTOR_FINGERPRINT)
            digest = integrity.sentence_digest(chunks)
        checksums = integrity.checksums(build_dir, written)
        timings["checksum_seconds"] = time.perf_counter() - t0
        manifest = Manifest(
            embedding_model=model_id,
            embedding_dim=stored.dimension,
            chunk_size=settings["chunk_size"],
            contextual_headers=settings["contextual_headers"],
            header_max_chars=settings["header_max_chars"],
            keyword_match=keyword_match,
            corpus_hash=corpus_hash(chunks),
            documents=len(documents) if documents is not None else len(chunks),
            chunks=len(chunks),
            sentences=sentences.count(),
            chroma=chroma_cfg,
            build_seconds=round(time.perf_counter() - started, 3),
            created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            extra={
                "timings": {k: round(v, 3) for k, v in timings.items()},
                **({"summaries": summarized.info} if summarized else {}),
            },
            encoder=encoder_backend(embeddings),
            embedding_base_url=endpoint_base_url(embeddings),
            checksums=checksums,
            sentence_digest=digest,
        )
        write_atomic(build_dir / MANIFEST, manifest.to_json())
        point_current(root, build)
        if summarized:  # the build holds them now
            from arag_graph.summarize import forget_progress

            forget_progress(root, str(settings["summaries"]))
    except BaseException:
        drop(build_dir)
        if not created or read_current(root, strict=False) is not None:
            record.discard(build)
        raise
    remove_stale_builds(record, keep=build, drop=drop)
    sentences.root = root  # from now on a failed read is this index's damage, not a failed build
    return HierarchicalIndex(root, manifest, store, keywords, sentences, embeddings, build_dir)


def _summaries(
    root: Path,
    build_dir: Path,
    previous: str | None,
    chunks: Sequence[Chunk],
    embeddings: Embeddings,
    settings: dict[str, Any],
    progress: bool,
    timings: dict[str, float],
) -> Any:
    """ARAGOG's document summaries into the build when asked for (:mod:`arag_graph.summaries`), else None."""
    if not settings.get("summaries"):
        return None
    from arag_graph.summarize import write_summaries

    t0 = time.perf_counter()
    options = dict(settings.get("summary_options") or {})
    extra = options.pop("reuse", None)  # other builds whose summaries serve (another index of the corpus)
    reuse = [build_path(root, previous)] if previous is not None else []
    reuse += [Path(extra)] if isinstance(extra, (str, os.PathLike)) else [Path(p) for p in extra or ()]
    done = write_summaries(
        build_dir, root, chunks, embeddings, str(settings["summaries"]), reuse=reuse, progress=progress, **options
    )
    timings["summary_seconds"] = time.perf_counter() - t0
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
            vectors = embed_texts(embeddings, texts, on_batch=encoded.update)
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


def _open_sentences(
    root: Path, manifest: Manifest, build_dir: Path, chunks: Sequence[Chunk], chroma_timeout: float | None
) -> SentenceStore | SentenceMatrix:
    """The sentence store a manifest describes, checked against the manifest's sentence count: the
    matrix, or a Chroma collection (whose record ids are row numbers in builds that say so; older
    builds find the chunk in each record's metadata)."""
    config = manifest.chroma
    sentences: SentenceStore | SentenceMatrix
    if config.get("mode") == "matrix":
        sentences = SentenceMatrix.open(config, build_dir, SentenceLayout(chunks), manifest.embedding_dim, root)
    else:
        sentences = connect_sentence_store(config, build_dir, root=root, timeout=chroma_timeout)
        if config.get("ids") == "rows":
            sentences.layout = SentenceLayout(chunks)
    stored = sentences.count()
    if stored != manifest.sentences:
        raise IndexDamagedError(
            root, f"the sentence store holds {stored} sentences, the manifest records {manifest.sentences}"
        )
    return sentences


# --------------------------------------------------------------------------------------------
# Loading

_LOADED: dict[tuple[str, str, str | None], HierarchicalIndex] = {}
_LOADED_LOCK = threading.Lock()


def _manifest_embeddings(root: Path, manifest: Manifest, encoder: str | None) -> Embeddings:
    """The model a manifest names, set up from its spec (no download), or a one-line mismatch error."""
    from arag_graph.embedding_specs import is_endpoint_spec

    try:
        return resolve_embeddings(
            manifest.embedding_model,
            base_url=manifest.embedding_base_url,
            encoder=None if is_endpoint_spec(manifest.embedding_model) else encoder or manifest.encoder,
        )
    except AragError as exc:
        raise IndexMismatchError(
            f"{root}: index was built with embedding model {manifest.embedding_model!r}, which cannot be set up "
            f"here ({exc}); make it available, or pass the same model as `embeddings=` when loading it"
        ) from None


def load_index(
    path: str | os.PathLike[str],
    *,
    embeddings: Embeddings | None = None,
    encoder: str | None = None,
    cache: bool = False,
    check_endpoint: Callable[[Manifest], None] | None = None,
    chroma_timeout: float | None = None,
) -> HierarchicalIndex:
    """Load the active build of the index at ``path``.

    ``embeddings`` must be the model the index was built with; it defaults to the offline
    all-MiniLM-L6-v2 when that is what the manifest names, run on the backend the manifest records
    (``encoder`` overrides it: any backend of the same model may query the index; ``torch`` and
    ``onnx`` give the same vectors, ``onnx-int8`` close ones). With ``cache=True`` the loaded index
    is shared per process (what graph servers want: one copy in memory for all runs).

    An index built with another model (a spec, see :func:`build_index`) loads that model from its
    manifest. ``check_endpoint(manifest)`` runs before any model is set up, and again on every
    cache hit: a served run passes the operator's policy, so that an index whose manifest names an
    embeddings endpoint the operator does not allow is refused before the key could go there.

    ``chroma_timeout`` bounds each wait for a Chroma server (default ``$ARAG_CHROMA_TIMEOUT`` or 60 s).

    Every file the build wrote is checked against the manifest's checksums, and the sentence
    store's size against the manifest (:func:`verify_index` checks every sentence record too); a
    damaged index raises the one-line :class:`~arag_graph.errors.IndexDamagedError` here, before
    any search could answer from it. A read-only index directory loads too.
    """
    if encoder is not None:
        if embeddings is not None:
            raise AragError("give either embeddings= or encoder=, not both: encoder picks the default model's backend")
        encoder = check_encoder(encoder)
    root = Path(path)
    build = read_current(root) if root.is_dir() else None
    if build is None:
        raise IndexNotFoundError(f"{root}: no index found; build one with `arag index CORPUS --out {root}`")
    key = (str(root.resolve()), build, encoder)
    if cache and embeddings is None:
        with _LOADED_LOCK:
            cached = _LOADED.get(key)
        if cached is not None:
            if check_endpoint is not None:
                check_endpoint(cached.manifest)
            return cached
    build_dir = build_path(root, build)
    manifest = Manifest.from_file(build_dir / MANIFEST, root)
    if check_endpoint is not None:
        check_endpoint(manifest)
    if embeddings is None and manifest.embedding_model != DEFAULT_MODEL_ID:
        embeddings = _manifest_embeddings(root, manifest, encoder)
    elif embeddings is None:
        backend = encoder or manifest.encoder or "torch"
        if backend not in ENCODERS:
            raise IndexMismatchError(
                f"{root}: index was built with encoder {backend!r}, unknown to this version; load it with "
                f"encoder='torch' or rebuild it"
            )
        embeddings = default_embeddings(backend)
        check = getattr(embeddings, "check_available", None)
        if callable(check):  # a missing optional package fails at load, not at the first query
            check()
    else:
        given = embedding_model_id(embeddings)
        if given != manifest.embedding_model:
            raise IndexMismatchError(
                f"{root}: index was built with embedding model {manifest.embedding_model!r} but "
                f"{given!r} was given; load it with the same model or rebuild the index"
            )
    store, keywords = _load_files(root, build_dir, manifest)
    sentences = _open_sentences(root, manifest, build_dir, store.chunks, chroma_timeout)
    index = HierarchicalIndex(root, manifest, store, keywords, sentences, embeddings, build_dir)
    if cache:
        with _LOADED_LOCK:
            _LOADED[key] = index
    return index


def _load_files(root: Path, build_dir: Path, manifest: Manifest) -> tuple[ChunkStore, KeywordIndex]:
    """The chunk store and keyword index of a build, checked against the manifest's checksums.

    ``chunks.jsonl`` is hashed as it is parsed; the other files are hashed whole. Indexes from
    before checksums load with the structural checks only.
    """
    recorded = manifest.checksums
    for name in recorded:
        if Path(name).name != name or name in ("", ".", ".."):
            raise IndexDamagedError(root, f"the manifest of {build_dir} names a file outside its build: {name[:60]!r}")
    digest = integrity.new_digest()
    try:
        store = ChunkStore.load(build_dir / CHUNKS, digest)
    except OSError as exc:
        raise IndexDamagedError(root, f"{build_dir / CHUNKS} cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise IndexDamagedError(root, f"{build_dir / CHUNKS}: {exc}") from None
    integrity.check_recorded(root, build_dir, recorded, integrity.tagged(digest), CHUNKS)
    for name, expected in recorded.items():
        if name != CHUNKS:
            integrity.check_file(root, build_dir, name, expected)
    if len(store) != manifest.chunks:
        raise IndexDamagedError(
            root, f"{build_dir / CHUNKS} holds {len(store)} chunks, the manifest records {manifest.chunks}"
        )
    keywords = KeywordIndex.load(build_dir, keyword_chunks(store.chunks, manifest.header_max_chars), root=root)
    return store, keywords


def verify_index(index: HierarchicalIndex) -> dict[str, Any]:
    """Check a loaded index completely: what loading checks, every element of the keyword arrays
    and every sentence record against its chunk and the recorded digest, or every row of the
    sentence matrix (``arag verify``).

    Raises the one-line damage error; returns what was checked.
    """
    root = index.path if index.path is not None else Path("DIR")
    build_dir = index.build_dir
    fingerprint = None
    if build_dir is not None:
        for name, expected in index.manifest.checksums.items():
            integrity.check_file(root, build_dir, name, expected)
        if integrity.VECTOR_FINGERPRINT in index.manifest.checksums:
            fingerprint = np.load(build_dir / integrity.VECTOR_FINGERPRINT, allow_pickle=False)
    index.keywords.check()
    if isinstance(index.sentences, SentenceMatrix):
        count = index.sentences.check()  # its bytes are in the checksums above; this reads every row
    else:
        count = integrity.verify_sentences(
            root, index.sentences, index.store.chunks, index.manifest.sentence_digest, fingerprint
        )
    return {
        "index": str(root),
        "chunks": len(index.store),
        "sentences": count,
        "sentence_store": "matrix" if isinstance(index.sentences, SentenceMatrix) else "chroma",
        "files_checked": len(index.manifest.checksums),
        "checksums": bool(index.manifest.checksums),
        "sentence_digest": index.manifest.sentence_digest is not None,
    }
