"""The hierarchical index: chunks in memory, sentence vectors in a matrix or Chroma, keywords in an inverted index.

A-RAG needs three views of one corpus and they must agree: ``chunk_read`` returns chunk text,
``semantic_search`` ranks chunks by their best sentence embedding, ``keyword_search`` ranks them by
exact keyword matches and shows the matching sentences. All three come from the same chunk list
(with sentence spans computed once at ingestion). This module is the loaded index and its
searches; :mod:`arag_graph.index.build` writes one and :mod:`arag_graph.index.load` opens one.

On disk an index directory looks like::

    DIR/CURRENT                 name of the active build (replaced atomically)
    DIR/builds/<build>/manifest.json
    DIR/builds/<build>/chunks.jsonl
    DIR/builds/<build>/keywords.*       (inverted keyword index: vocabulary, occurrence arrays)
    DIR/builds/<build>/sentences.npy    (sentence vectors, exact search: indexes up to MATRIX_MAX_SENTENCES)
    DIR/builds/<build>/chroma/  (sentence vectors in Chroma's HNSW, larger indexes; absent with a server)

A rebuild writes a new ``builds/<build>`` and only then points ``CURRENT`` at it, so a build that is
killed half-way leaves the previous index loadable; the next build removes the leftovers. What arag
may delete there, and which ``--out`` it refuses, is :mod:`arag_graph.index.layout`'s business;
the checksums that keep a damaged index from answering are :mod:`arag_graph.index.integrity`'s.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from arag_graph.core.deprecation import warn_moved
from arag_graph.core.documents import (
    Chunk,
    MetadataFilter,
    SearchHit,
    SourceDocument,
    check_filter,
    matches_filter,
)
from arag_graph.core.errors import AragError, IndexDamagedError
from arag_graph.index.chroma import RECORD_IDS, SentenceStore, connect_sentence_store
from arag_graph.index.encoders import SentenceEncoder, check_vectors, embed_query, embed_texts
from arag_graph.index.keywords import KeywordIndex
from arag_graph.index.layout import load_index_array, open_index_file
from arag_graph.index.manifest import Manifest
from arag_graph.index.sentencematrix import DeviceMatrix, SentenceLayout, SentenceMatrix, unit_rows

SentenceOpener = Callable[[], "SentenceStore | SentenceMatrix"]
"""Opens a build's sentence store when it is first needed (:attr:`HierarchicalIndex.sentences`)."""

SNIPPET_POOL = 3
"""semantic_search's snippets are a chunk's sentences among the query's top ``SNIPPET_POOL * top_k``
(the A-RAG paper's tool)."""

KEYWORD_SNIPPET_SENTENCES = 5
"""keyword_search shows at most this many matching sentences per chunk, the first in chunk order, as
the A-RAG paper's released tool does (both profiles): a common keyword matches most sentences of a
long chunk, and a snippet that is the whole chunk defeats the point of snippets and inflates the
retrieved tokens the paper compares. The chunk's full text is one chunk_read away."""


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
                record: dict[str, Any] = {
                    "id": c.id,
                    "title": c.title,
                    "text": c.text,
                    "prev": c.prev_id,
                    "next": c.next_id,
                    "sentences": [list(span) for span in c.sentences],
                }
                if c.metadata:  # only where there is some: indexes without metadata keep their bytes
                    record["metadata"] = c.metadata
                fh.write(json.dumps(record, ensure_ascii=False))
                fh.write("\n")

    @classmethod
    def load(cls, path: Path, digest: Any | None = None, root: Path | None = None) -> ChunkStore:
        """Read ``chunks.jsonl`` of the index at ``root`` (default: the file's directory) under the
        file rule; ``digest`` (a hashlib object) sees every byte read, so checking the file costs no
        second pass. A line that is not a chunk record raises ``ValueError``."""
        chunks: list[Chunk] = []
        with open_index_file(root if root is not None else path.parent, path) as fh:
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
                        metadata=r.get("metadata"),
                    )
                except (ValueError, KeyError, TypeError):
                    raise ValueError(f"line {number} is not a chunk record") from None
                if (
                    not isinstance(chunk.id, str)
                    or not isinstance(chunk.text, str)
                    or not isinstance(chunk.metadata, (dict, type(None)))
                ):
                    raise ValueError(f"line {number} is not a chunk record")
                chunks.append(chunk)
        return cls(chunks)


class HierarchicalIndex:
    """A loaded A-RAG index: answers keyword and semantic searches and hands out chunks.

    Usable without any LLM layer; the LangChain tools in :mod:`arag_graph.tools.toolkit` are thin
    wrappers over :meth:`keyword_search`, :meth:`semantic_search` and :meth:`get_chunks`.
    Safe to share between threads: all state is read-only after loading.
    """

    def __init__(
        self,
        path: Path | None,
        manifest: Manifest,
        store: ChunkStore,
        keywords: KeywordIndex,
        sentences: SentenceStore | SentenceMatrix | SentenceOpener,
        embeddings: Embeddings,
        build_dir: Path | None = None,
        *,
        updater: Callable[..., tuple[HierarchicalIndex, Any]] | None = None,
        device: str | None = None,
    ) -> None:
        self.path = path
        self._updater = updater
        """What changes the index on disk (:func:`arag_graph.index.update.update_index`), handed in by
        whoever built or loaded it, since the index itself sits below the build."""
        self.build_dir = build_dir
        """The build this index was loaded from (``path/builds/<build>``), for ``verify_index``."""
        self.manifest = manifest
        self.store = store
        self.keywords = keywords
        self.embeddings = embeddings
        self.device = device or (embeddings.device if isinstance(embeddings, SentenceEncoder) else "cpu")
        """Where an exact index's sentence matrix is searched: a run setting (``load_index(device=)``,
        by default the encoder's device), never written to the index."""
        self._sentences: SentenceStore | SentenceMatrix | None = None
        self._open_sentences: SentenceOpener | None = None
        if isinstance(sentences, (SentenceStore, SentenceMatrix)):
            self._sentences = self._placed(sentences)
        else:
            self._open_sentences = sentences
        self._sentences_lock = threading.Lock()

    @property
    def sentences_opened(self) -> bool:
        """Whether the sentence store is open (an index handed an opener opens it at first use)."""
        return self._sentences is not None

    @property
    def sentences(self) -> SentenceStore | SentenceMatrix:
        """The sentence vectors (a matrix or a Chroma collection), opened at first use when the index
        was handed an opener: an embedded Chroma store is read through a checked private copy, which
        costs a pass over the store's files, and neither an update (which copies the previous store
        itself, checked) nor a build whose result nobody searches (``arag index``) has a use for one."""
        store = self._sentences
        if store is None:
            with self._sentences_lock:  # an index is shared between threads: one copy, opened once
                if self._sentences is None:
                    assert self._open_sentences is not None
                    self._sentences = self._placed(self._open_sentences())
                store = self._sentences
        return store

    def _placed(self, store: SentenceStore | SentenceMatrix) -> SentenceStore | SentenceMatrix:
        """The matrix searched on this index's device when that is a GPU (:class:`DeviceMatrix`)."""
        if self.device != "cpu" and type(store) is SentenceMatrix:
            return DeviceMatrix(store, self.device)
        return store

    def __len__(self) -> int:
        return len(self.store)

    def __repr__(self) -> str:
        return (
            f"HierarchicalIndex(path={str(self.path)!r}, chunks={self.manifest.chunks}, "
            f"sentences={self.manifest.sentences}, model={self.manifest.embedding_model!r})"
        )

    # -- changes -----------------------------------------------------------------------------
    def add_documents(self, documents: Iterable[Any], *, progress: bool = False) -> HierarchicalIndex:
        """Add documents (LangChain ``Document`` objects from any loader, or
        :class:`~arag_graph.core.documents.SourceDocument`) without a rebuild; a document whose id
        the index holds replaces it. Returns the updated index; this one stays as it was (an index
        is a read-only snapshot that concurrent readers may hold). See
        :func:`arag_graph.index.update.update_index` for how it is done safely and cheaply."""
        if hasattr(documents, "page_content") or isinstance(documents, SourceDocument):
            documents = [documents]  # one document given alone (pydantic models iterate over their fields)
        if documents is None or isinstance(documents, (str, bytes)) or not isinstance(documents, Iterable):
            raise AragError(
                f"add_documents() takes a list of documents, e.g. index.add_documents([Document(...)]); "
                f"got {type(documents).__name__}"
            )
        return self._update(upsert=list(documents), progress=progress)

    def delete(self, ids: Iterable[str] | str, *, progress: bool = False) -> HierarchicalIndex:
        """Remove the documents with these ids (each with all its chunks) without a rebuild; returns
        the updated index, like :meth:`add_documents`. An id the index does not hold is an error.

        One id given alone (``delete("doc3")``) is that id, not its characters; anything that is not
        ids (``None``, a number) is refused in one line, not with Python's bare ``TypeError``."""
        if isinstance(ids, str):
            ids = [ids]
        if ids is None or isinstance(ids, bytes) or not isinstance(ids, Iterable):
            raise AragError(
                f"delete() takes the ids of the documents to remove, e.g. index.delete(['doc3']); "
                f"got {type(ids).__name__}"
            )
        return self._update(delete=[str(i) for i in ids], progress=progress)

    def _update(self, **changes: Any) -> HierarchicalIndex:
        if self._updater is None:
            raise AragError("this index was not built or loaded from a directory; load it with load_index(DIR)")
        return self._updater(self, **changes)[0]

    def document_ids(self) -> list[str]:
        """The ids of the documents the index holds, in corpus order (chunks name them ``<id>`` or ``<id>#<n>``)."""
        from arag_graph.index.sources import load_table

        if self.path is None or self.build_dir is None:
            return []
        return [e.id for e in load_table(self.path, self.build_dir, self.manifest.checksums, self.store.chunks)]

    # -- chunks ------------------------------------------------------------------------------
    def get_chunk(self, chunk_id: str) -> Chunk | None:
        return self.store.get(chunk_id)

    def get_chunks(self, chunk_ids: Iterable[str]) -> list[Chunk | None]:
        return [self.store.get(i) for i in chunk_ids]

    def ids_for_title(self, title: str) -> list[str]:
        return self.store.ids_for_title(title)

    # -- deprecated ---------------------------------------------------------------------------
    def as_retriever(self, search_type: str = "semantic", k: int = 5, **kwargs: Any) -> Any:
        """Deprecated (0.2.0; goes in 0.3.0): ``make_retriever(index, search_type, k=k)`` from
        ``arag_graph``, or ``AragVectorStore(index).as_retriever()`` for a vector-store retriever.

        The retriever lives above the index (:mod:`arag_graph.retrievers`), so this alias reaches it
        through the package's lazy public name at call time, not by an import of this module.
        """
        warn_moved("HierarchicalIndex.as_retriever()", "arag_graph.make_retriever(index, search_type, k=k)")
        make_retriever = importlib.import_module("arag_graph").make_retriever
        return make_retriever(self, search_type, k, **kwargs)

    # -- searches ----------------------------------------------------------------------------
    def keyword_search(
        self, keywords: str | Sequence[str], top_k: int = 5, *, metadata_filter: MetadataFilter | None = None
    ) -> list[SearchHit]:
        """Chunks ranked by ``sum(count(k) * len(k))`` over the keywords (A-RAG's keyword score).

        A string is one keyword, as the ``keyword_search`` tool takes it: ``"Two Dollar Radio"``
        searches that phrase, not its single characters (a ``str`` is a ``Sequence[str]`` too).

        Snippets are the chunk's sentences that contain a matched keyword, at most
        :data:`KEYWORD_SNIPPET_SENTENCES` of them (the first, in chunk order). A chunk that matched only
        through its contextual header (its title or section, which keyword search also matches)
        shows its first sentence instead, so that the model has something to judge it by besides
        an ID (the title is on the hit's own line). With ``metadata_filter`` only chunks whose
        document metadata matches it are ranked (see :func:`~arag_graph.core.documents.matches_filter`).
        """
        wanted = check_filter(metadata_filter)
        # A filter ranks every matching chunk, then keeps the allowed ones: the top k of the allowed.
        words = [keywords] if isinstance(keywords, str) else list(keywords)
        hits = self.keywords.search(words, len(self.store) if wanted else top_k)
        results = []
        for hit in hits:
            chunk = self.store.chunks[hit.chunk_index]
            if not matches_filter(chunk.metadata, wanted):
                continue
            matched = self.keywords.snippets(chunk, list(hit.matched))[:KEYWORD_SNIPPET_SENTENCES]
            snippets = matched or _first_sentence(chunk)
            results.append(SearchHit(chunk.id, float(hit.score), tuple(snippets), chunk.title, metadata=chunk.metadata))
            if len(results) >= top_k:
                break
        return results

    def query_vector(self, query: str, query_vector: Sequence[float] | None = None) -> list[float]:
        """The vector a search of ``query`` uses (``query_vector`` when given: HyDE embeds something
        else), checked to be finite, non-zero and of the index's dimension (one line otherwise)."""
        if query_vector is None:
            return embed_query(self.embeddings, query, self.manifest.embedding_dim).tolist()
        return check_vectors([query_vector], 1, self.manifest.embedding_dim, self.embeddings)[0].tolist()

    def top_sentences(
        self, query: str, n: int = 5, *, query_vector: Sequence[float] | None = None
    ) -> list[tuple[str, int, float]]:
        """The ``n`` sentences nearest to ``query``: ``(chunk_id, position in the chunk, cosine)``, best first.

        The sentence level on its own, for retrieval that works on sentences rather than chunks
        (ARAGOG's sentence windows); ``semantic_search`` aggregates the same matches to chunks.
        """
        if n <= 0 or len(self.store) == 0:
            return []
        return self._nearest(self.query_vector(query, query_vector), n)

    def sentence_vectors(self, sentences: Sequence[tuple[str, int]]) -> np.ndarray:
        """The unit vectors of ``(chunk_id, position)`` sentences, in that order, as the index holds them.

        For comparing hits with one another (maximal marginal relevance), not only with a query.
        Stores that know their rows (the matrix, and Chroma collections of current builds) hand
        back the stored vectors; a collection of an older build, whose records name their chunk in
        metadata, has its sentences embedded again (without their contextual headers). A chunk or
        position the index does not hold is the one-line :class:`AragError`.
        """
        rows: list[int] = []
        for chunk_id, position in sentences:
            chunk = self.store.get(chunk_id)
            if chunk is None or not 0 <= position < len(chunk.sentences):
                raise AragError(f"the index holds no sentence {position} of chunk {chunk_id[:40]!r}")
            rows.append(self.store.position[chunk_id])
        if not rows:
            return np.zeros((0, self.manifest.embedding_dim), dtype=np.float32)
        store = self.sentences
        layout = store.layout
        if layout is None:
            texts = []
            for chunk_id, position in sentences:
                chunk = self.store.chunks[self.store.position[chunk_id]]
                texts.append(chunk.text[slice(*chunk.sentences[position])])
            return unit_rows(embed_texts(self.embeddings, texts, dimension=self.manifest.embedding_dim))
        wanted = [int(layout.first[row]) + position for row, (_, position) in zip(rows, sentences, strict=True)]
        if isinstance(store, SentenceMatrix):
            return unit_rows(np.asarray(store.vectors[wanted], dtype=np.float32))
        return unit_rows(store.vectors_of([int(i) for i in store.row_ids(wanted)]))

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
        self,
        query: str,
        top_k: int = 5,
        *,
        query_vector: Sequence[float] | None = None,
        metadata_filter: MetadataFilter | None = None,
    ) -> list[SearchHit]:
        """Chunks ranked by the cosine similarity of their best sentence to ``query``.

        Two pools, kept apart. Ranking: we fetch ``10 * top_k`` sentences (more if they fall in too
        few chunks) and group them by parent chunk with max aggregation, so ``top_k`` distinct
        chunks are found. Snippets: a chunk shows its sentences among the query's top
        ``SNIPPET_POOL * top_k`` (the A-RAG paper's pool, 15 for top_k 5), in their order in the
        chunk; a chunk ranked by a sentence outside that pool shows that one sentence. A wider
        snippet pool would hand the model more text per call than the paper's tool does, which
        its retrieved-tokens measure would count. ``query_vector`` lets a caller embed something
        else than the query (HyDE). With ``metadata_filter`` only chunks whose document metadata
        matches it count (the fetch grows until ``top_k`` of them are found or every sentence was
        seen).
        """
        wanted = check_filter(metadata_filter)
        if top_k <= 0 or len(self.store) == 0:
            return []
        vector = self.query_vector(query, query_vector)
        total = self.manifest.sentences
        n = min(total, max(10 * top_k, 50))
        # A matrix on a GPU finds, in one pass, as many sentences as hold the top_k best chunks.
        covering = None if wanted else getattr(self.sentences, "covering", None)
        while True:
            matches = covering(vector, top_k, n) if covering else self._nearest(vector, n)
            best: dict[str, float] = {}
            positions: dict[str, list[int]] = {}
            kept = []  # the sentences of chunks the filter allows, best first: the snippet pool's source
            for chunk_id, position, similarity in matches:
                if wanted and not matches_filter(getattr(self.store.get(chunk_id), "metadata", None), wanted):
                    continue
                kept.append((chunk_id, position))
                if chunk_id not in best:
                    best[chunk_id] = similarity
                    positions[chunk_id] = []
                positions[chunk_id].append(position)
            if len(best) >= top_k or n >= total or covering:
                break
            n = min(total, n * 4)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1], self.store.position.get(kv[0], 0)))[:top_k]
        pooled: dict[str, list[int]] = {}
        for chunk_id, position in kept[: SNIPPET_POOL * top_k]:
            pooled.setdefault(chunk_id, []).append(position)
        results = []
        for chunk_id, score in ranked:
            chunk = self.store.get(chunk_id)
            if chunk is None:  # a sentence store out of step with the chunk store: skip, never crash
                continue
            shown = pooled.get(chunk_id) or positions[chunk_id][:1]  # the best sentence first
            matched = tuple(p for p in sorted(set(shown)) if p < len(chunk.sentences))
            snippets = tuple(chunk.text[slice(*chunk.sentences[p])] for p in matched)
            results.append(SearchHit(chunk_id, float(score), snippets, chunk.title, matched, chunk.metadata))
        return results


def _first_sentence(chunk: Chunk) -> list[str]:
    """A chunk's first sentence (its whole text when it has no sentence spans), as a one-item list."""
    start, end = chunk.sentences[0] if chunk.sentences else (0, len(chunk.text))
    text = chunk.text[start:end].strip()
    return [text] if text else []


def open_sentences(
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
        sentences = connect_sentence_store(
            config, build_dir, root=root, timeout=chroma_timeout, checksums=manifest.store_checksums
        )
        if config.get("ids") in ("rows", "records"):
            sentences.layout = SentenceLayout(chunks)
        if config.get("ids") == "records":  # a build an update made: the record ids of the rows
            sentences.use_record_ids(load_index_array(root, build_dir / RECORD_IDS, mmap=False))
    stored = sentences.count()
    if stored != manifest.sentences:
        raise IndexDamagedError(
            root, f"the sentence store holds {stored} sentences, the manifest records {manifest.sentences}"
        )
    return sentences
