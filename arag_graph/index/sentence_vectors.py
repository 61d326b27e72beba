"""A build's sentence vectors: encoded, or taken from the previous build by an update, and stored.

Vectors are encoded and stored :data:`~arag_graph.index.text.BUILD_BLOCK` sentences at a time, so a
build never holds all of them in memory: one exact NumPy matrix (the fastest search for small and
mid-sized corpora), Chroma's HNSW (large ones) or a Chroma server. An update
(:func:`arag_graph.index.update.update_index`) encodes only new text: :class:`VectorReuse` copies the
vectors of text the previous build embedded, :class:`StoreReuse` copies the previous build's
embedded Chroma store and changes only the records of changed sentences.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from arag_graph.core.documents import HEADER_MAX_CHARS, Chunk
from arag_graph.core.errors import AragError
from arag_graph.index import integrity
from arag_graph.index.chroma import RECORD_IDS, SentenceStore, connect_sentence_store
from arag_graph.index.encoders import embed_texts
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.layout import load_index_array
from arag_graph.index.sentencematrix import MatrixWriter, SentenceLayout, SentenceMatrix, unit_rows
from arag_graph.index.text import HeaderStyle, sentence_blocks


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
        headers = manifest.embedded_headers
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
        headers = manifest.embedded_headers
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
class StoredSentences:
    """What :func:`store_sentences` leaves: the opened store, the vectors' dimension, the seconds
    spent encoding (the rest is storing) and, for Chroma, the vectors' fingerprint for ``verify``."""

    sentences: SentenceStore | SentenceMatrix
    dimension: int
    encode_seconds: float
    fingerprint: np.ndarray


def store_sentences(
    config: dict[str, Any],
    build_dir: Path,
    chunks: Sequence[Chunk],
    embeddings: Embeddings,
    contextual_headers: bool | HeaderStyle,
    chroma_timeout: float | None,
    progress: bool,
    header_max_chars: int = HEADER_MAX_CHARS,
    reuse: VectorReuse | StoreReuse | None = None,
    known_dimension: int = 0,
) -> StoredSentences:
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
        return StoredSentences(opened, dimension, encode_seconds, fingerprint)
    assert chroma is not None
    chroma.layout = layout
    return StoredSentences(chroma, dimension, encode_seconds, fingerprint)


def _changed_store(
    config: dict[str, Any],
    build_dir: Path,
    chunks: Sequence[Chunk],
    embeddings: Embeddings,
    contextual_headers: bool | HeaderStyle,
    header_max_chars: int,
    reuse: StoreReuse,
) -> StoredSentences:
    """An update's embedded store: the previous build's store copied into ``build_dir`` and changed
    (:class:`StoreReuse`): unchanged rows keep their records, the other old records are deleted and
    the new rows added, their vectors taken from a previous record with the same embedded text or
    encoded. Writes the record id of each row (:data:`~arag_graph.index.chroma.RECORD_IDS`)."""
    layout = SentenceLayout(chunks)
    total = len(layout)
    _copy_store(reuse, build_dir / str(config["path"]))
    store = connect_sentence_store(config, build_dir, update=True)
    rows = _match_rows(layout, chunks, contextual_headers, header_max_chars, reuse)
    t0 = time.perf_counter()
    vectors, encoded = _new_vectors(store, reuse, rows.new_texts, embeddings)
    dimension = int(vectors.shape[1]) if rows.new_rows else 0
    encode_seconds = time.perf_counter() - t0
    gone = reuse.record_ids[~rows.kept]
    first_new = int(reuse.record_ids.max()) + 1 if len(reuse.record_ids) else 0
    added_ids = np.arange(first_new, first_new + len(rows.new_rows), dtype=np.int64)
    store.delete_records(gone.tolist())
    if rows.new_rows:
        added = np.asarray(rows.new_rows, dtype=np.int64)
        store.add_rows(added, layout, rows.new_documents, vectors, ids=added_ids)
        rows.record_ids[added] = added_ids
        rows.fingerprint[added] = integrity.vector_fingerprint(vectors)
    np.save(build_dir / RECORD_IDS, rows.record_ids, allow_pickle=False)
    store.layout = layout
    store.use_record_ids(rows.record_ids)
    reuse.encoded, reuse.reused = encoded, total - encoded
    return StoredSentences(store, dimension, encode_seconds, rows.fingerprint)


def _copy_store(reuse: StoreReuse, target: Path) -> None:
    """The previous build's store, checked as it is copied to ``target`` (only files that build
    recorded, no link followed); the copy's folders get the source's modes back."""
    integrity.copy_verified(reuse.root, reuse.source, target, reuse.checksums)
    for folder, _, _ in os.walk(target):  # the copy's folders are private (0700): readable as the source's are
        with contextlib.suppress(OSError):
            os.chmod(folder, stat.S_IMODE((reuse.source / Path(folder).relative_to(target)).lstat().st_mode))


@dataclass
class _MatchedRows:
    """The new build's sentence rows against the previous store's records (:func:`_match_rows`)."""

    record_ids: np.ndarray
    """Each row's record id (filled for kept rows; the new rows' ids are given once added)."""
    fingerprint: np.ndarray
    """Each row's vector fingerprint (likewise)."""
    kept: np.ndarray
    """Which previous records a row keeps; the others are deleted."""
    new_rows: list[int]
    new_documents: list[str]
    new_texts: list[str]


def _match_rows(
    layout: SentenceLayout,
    chunks: Sequence[Chunk],
    contextual_headers: bool | HeaderStyle,
    header_max_chars: int,
    reuse: StoreReuse,
) -> _MatchedRows:
    """Each sentence row of ``chunks``: a previous record kept (same chunk, position, stored sentence
    and embedded text), or a new row to add. Takes the kept rows out of ``reuse.rows``."""
    total = len(layout)
    matched = _MatchedRows(
        record_ids=np.empty(total, dtype=np.int64),
        fingerprint=np.empty((total, 2), dtype=np.float32),
        kept=np.zeros(len(reuse.record_ids), dtype=bool),
        new_rows=[],
        new_documents=[],
        new_texts=[],
    )
    described = layout.describe(np.arange(total), np.zeros(total, dtype=np.float32))
    for start, documents, texts in sentence_blocks(chunks, contextual_headers, header_max_chars=header_max_chars):
        for row, (document, text) in enumerate(zip(documents, texts, strict=True), start):
            chunk_id, position, _ = described[row]
            old = reuse.rows.pop((chunk_id, position, document, text), None)
            if old is None:
                matched.new_rows.append(row)
                matched.new_documents.append(document)
                matched.new_texts.append(text)
            else:
                matched.kept[old] = True
                matched.record_ids[row] = reuse.record_ids[old]
                matched.fingerprint[row] = reuse.fingerprint[old]
    return matched


def _new_vectors(
    store: SentenceStore, reuse: StoreReuse, new_texts: list[str], embeddings: Embeddings
) -> tuple[np.ndarray, int]:
    """The vectors of the new rows and how many were encoded: a text a previous record embedded takes
    that record's vector (read from the copy, whose records are still the previous build's: nothing is
    deleted yet); only the others are encoded."""
    same_text = [reuse.by_text.get(text) for text in new_texts]
    copied = [i for i, old in enumerate(same_text) if old is not None]
    missing = [i for i, old in enumerate(same_text) if old is None]
    vectors = np.zeros((len(new_texts), 0), dtype=np.float32)
    if new_texts:
        parts: dict[int, np.ndarray] = {}
        if copied:
            found = store.vectors_of([int(reuse.record_ids[same_text[i]]) for i in copied])  # type: ignore[index]
            parts.update(zip(copied, found, strict=True))
        if missing:
            width = int(parts[copied[0]].shape[0]) if copied else None
            fresh = embed_texts(embeddings, [new_texts[i] for i in missing], dimension=width)
            parts.update(zip(missing, fresh, strict=True))
        vectors = np.asarray([parts[i] for i in range(len(new_texts))], dtype=np.float32)
    return vectors, len(missing)
