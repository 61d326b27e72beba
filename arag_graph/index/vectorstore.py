"""The index as a LangChain ``VectorStore``, so LangChain's indexing API can keep it current.

``langchain_core.indexing.index(docs, record_manager, vector_store, cleanup="incremental",
source_id_key="source")`` decides what changed with its record manager and calls
``add_documents`` and ``delete`` by document id; :class:`AragVectorStore` passes those to the
index's own incremental update (:func:`arag_graph.index.update.update_index`), so every change is a
complete, checksummed build switched to atomically.

Searches are the index's sentence-level semantic search, one hit per document: a store holds
documents by id (``get_by_ids``, ``delete``), so a search answers each document id once, with the
text and score of its best chunk (a document cut into several chunks no longer answers twice).
Maximal marginal relevance compares hits by their best sentences' stored vectors, the ones that
scored them. Filters take Chroma's ``where`` dialect (:data:`arag_graph.core.documents.MetadataFilter`).

Async searches await the query's embedding natively (``aembed_query``: the network call, for an
embeddings endpoint) and run the in-process vector search in a worker thread; changes, which
rebuild files on disk, run in a worker thread as a whole.

The store holds the current index and replaces it whole after each change, so concurrent readers
always search one consistent build.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from arag_graph.core.documents import SearchHit, check_filter
from arag_graph.core.errors import AragError
from arag_graph.index.build import BuildOptions, build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.layout import read_current
from arag_graph.index.load import load_index
from arag_graph.index.sources import DocumentEntry, load_table


class AragVectorStore(VectorStore):
    """A LangChain ``VectorStore`` over an arag index directory.

    Give a loaded ``index``, or a ``path`` and the ``embedding`` model: an index already there is
    loaded, else the first :meth:`add_documents` builds one with ``options``.
    """

    def __init__(
        self,
        index: HierarchicalIndex | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        embedding: Embeddings | None = None,
        options: BuildOptions | None = None,
    ) -> None:
        if index is None and path is None:
            raise AragError("AragVectorStore needs an index (load_index(DIR)) or path=DIR and embedding=MODEL")
        root = Path(path) if path is not None else index.path if index is not None else None
        if root is None:
            raise AragError("AragVectorStore needs an index loaded from a directory (load_index(DIR))")
        if index is None and read_current(root, strict=False) is not None:
            index = load_index(root, embeddings=embedding)
        if index is None and embedding is None:
            raise AragError(f"{root}: holds no index yet; give embedding=MODEL to build one with the first documents")
        self._root = root
        self._index = index
        self._embedding = embedding if embedding is not None else index.embeddings  # type: ignore[union-attr]
        self._options = options
        self._lock = threading.Lock()
        self._tables: dict[int, tuple[list[DocumentEntry], dict[str, str]]] = {}

    @property
    def index(self) -> HierarchicalIndex | None:
        """The current index (None until the first documents are added to a new directory)."""
        return self._index

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    # -- changes -----------------------------------------------------------------------------
    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Add or replace documents by id (``ids=`` or each document's own; new UUIDs otherwise)."""
        ids = kwargs.get("ids")
        if ids is not None and len(ids) != len(documents):
            raise AragError(f"add_documents got {len(ids)} ids for {len(documents)} documents; give one id each")
        given = [
            Document(
                page_content=doc.page_content,
                metadata=dict(doc.metadata),
                id=str(ids[n]) if ids is not None and ids[n] is not None else doc.id or str(uuid.uuid4()),
            )
            for n, doc in enumerate(documents)
        ]
        if not given:
            return []
        with self._lock:
            if self._index is None:
                self._index = build_index(given, self._root, self._options, embeddings=self._embedding, progress=False)
            else:
                self._index = self._index.add_documents(given)
        return [str(doc.id) for doc in given]

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        texts = list(texts)
        metadatas = metadatas or [{} for _ in texts]
        documents = [Document(page_content=t, metadata=m) for t, m in zip(texts, metadatas, strict=True)]
        return self.add_documents(documents, ids=ids)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete the documents with these ids; ids the index does not hold are skipped, as LangChain's
        stores do (``HierarchicalIndex.delete`` itself refuses them)."""
        if not ids:
            return None
        with self._lock:
            if self._index is None:
                return True
            held = self._entries(self._index)[1]
            known = [i for i in dict.fromkeys(str(i) for i in ids) if i in held]
            if known:
                self._index = self._index.delete(known)
        return True

    # -- reads -------------------------------------------------------------------------------
    def _entries(self, index: HierarchicalIndex) -> tuple[list[DocumentEntry], dict[str, str]]:
        """The index's documents, and each chunk's document id (cached per index snapshot)."""
        cached = self._tables.get(id(index))
        if cached is None:
            assert index.path is not None and index.build_dir is not None
            table = load_table(index.path, index.build_dir, index.manifest.checksums, index.store.chunks)
            owner = {chunk_id: entry.id for entry in table for chunk_id in entry.chunks}
            owner |= {entry.id: entry.id for entry in table}
            cached = (table, owner)
            self._tables = {id(index): cached}
        return cached

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids, in the order given (missing ids skipped): a document's text
        is its chunks' text, a blank line apart when it was cut into several."""
        index = self._index
        if index is None:
            return []
        table = {entry.id: entry for entry in self._entries(index)[0]}
        found = []
        for doc_id in ids:
            entry = table.get(str(doc_id))
            if entry is None:
                continue
            chunks = [c for c in index.get_chunks(entry.chunks) if c is not None]
            metadata = dict(chunks[0].metadata or {}) if chunks else {}
            found.append(Document(id=entry.id, page_content="\n\n".join(c.text for c in chunks), metadata=metadata))
        return found

    def _hits(
        self, index: HierarchicalIndex, vector: Sequence[float], k: int, filter: dict[str, Any] | None
    ) -> list[tuple[str, SearchHit]]:
        """The ``k`` best documents for ``vector``: each document's id and best chunk's hit, best first.

        The index ranks chunks; several can be one document's, so the search widens until ``k``
        documents are found or every chunk was ranked.
        """
        owner = self._entries(index)[1]
        n = k
        while True:
            hits = index.semantic_search("", n, query_vector=vector, metadata_filter=filter)
            best: dict[str, SearchHit] = {}
            for hit in hits:
                best.setdefault(owner.get(hit.chunk_id, hit.chunk_id), hit)
            if len(best) >= k or len(hits) < n or n >= len(index):
                return list(best.items())[:k]
            n = min(len(index), n * 4)

    def _document(self, index: HierarchicalIndex, doc_id: str, hit: SearchHit) -> Document | None:
        chunk = index.get_chunk(hit.chunk_id)
        if chunk is None:
            return None
        return Document(id=doc_id, page_content=chunk.text, metadata=dict(chunk.metadata or {}))

    def similarity_search_with_score_by_vector(
        self, embedding: Sequence[float], k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The ``k`` documents nearest to the vector ``embedding`` (a document scores its best
        sentence's cosine similarity), only those whose metadata matches ``filter`` when given."""
        index = self._index
        check_filter(filter)
        if index is None or k <= 0:
            return []
        vector = index.query_vector("", embedding)
        found = (
            (self._document(index, doc_id, hit), hit.score) for doc_id, hit in self._hits(index, vector, k, filter)
        )
        return [(doc, score) for doc, score in found if doc is not None]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The ``k`` documents nearest to ``query``; see :meth:`similarity_search_with_score_by_vector`."""
        index = self._index
        check_filter(filter)
        if index is None or k <= 0:
            return []
        return self.similarity_search_with_score_by_vector(index.query_vector(query), k, filter)

    def similarity_search(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter=filter, **kwargs)]

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score_by_vector(embedding, k, filter=filter)]

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """``k`` documents among the ``fetch_k`` nearest to ``embedding``, picked one by one for
        relevance to the query and difference from those already picked (``lambda_mult`` 1: relevance
        only, 0: difference only). A document stands for its best chunk, compared by the stored
        vector of that chunk's best sentence (the one that scored it)."""
        if not 0.0 <= float(lambda_mult) <= 1.0:
            raise AragError(f"lambda_mult must be between 0 and 1 (1: relevance only); got {lambda_mult}")
        index = self._index
        check_filter(filter)
        if index is None or k <= 0:
            return []
        vector = np.asarray(index.query_vector("", embedding), dtype=np.float32)
        found = self._hits(index, vector.tolist(), max(int(fetch_k), k), filter)
        if not found:
            return []
        candidates = [self._best_sentence(index, vector, hit) for _, hit in found]
        picked = maximal_marginal_relevance(vector, candidates, lambda_mult=float(lambda_mult), k=k)
        documents = (self._document(index, *found[i]) for i in picked)
        return [doc for doc in documents if doc is not None]

    @staticmethod
    def _best_sentence(index: HierarchicalIndex, query: np.ndarray, hit: SearchHit) -> list[float]:
        """The stored vector of the sentence that scored ``hit``: the nearest to the query among the
        hit's snippets (the chunk's best sentence is always among them)."""
        positions = list(hit.positions) or [0]
        vectors = index.sentence_vectors([(hit.chunk_id, p) for p in positions])
        return vectors[int(np.argmax(vectors @ query))].tolist()

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """:meth:`max_marginal_relevance_search_by_vector` for the query's embedding."""
        index = self._index
        if index is None or k <= 0:
            check_filter(filter)
            return []
        return self.max_marginal_relevance_search_by_vector(index.query_vector(query), k, fetch_k, lambda_mult, filter)

    # -- async: the query's embedding awaited, the in-process search in a worker thread ---------
    async def _aquery_vector(self, query: str) -> list[float]:
        return list(await self._embedding.aembed_query(query))

    async def asimilarity_search_with_score(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        check_filter(filter)
        if self._index is None or k <= 0:
            return []
        vector = await self._aquery_vector(query)
        return await run_in_executor(None, self.similarity_search_with_score_by_vector, vector, k, filter)

    async def asimilarity_search(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in await self.asimilarity_search_with_score(query, k, filter=filter)]

    async def asimilarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return await run_in_executor(None, self.similarity_search_by_vector, embedding, k, filter)

    async def amax_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        check_filter(filter)
        if self._index is None or k <= 0:
            return []
        vector = await self._aquery_vector(query)
        return await self.amax_marginal_relevance_search_by_vector(vector, k, fetch_k, lambda_mult, filter)

    async def amax_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        return await run_in_executor(
            None, self.max_marginal_relevance_search_by_vector, embedding, k, fetch_k, lambda_mult, filter
        )

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Scores are cosine similarities in [-1, 1]; relevance maps them onto [0, 1]."""
        return lambda score: (score + 1.0) / 2.0

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        path: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> AragVectorStore:
        """A store holding ``texts``, its index at ``path``; without one, in a new temporary
        directory removed when the store is garbage-collected or the process ends (as Chroma's
        ``from_texts`` without a ``persist_directory`` keeps its collection in memory). Give ``path``
        to keep the index."""
        if path is None:
            path = Path(tempfile.mkdtemp(prefix="arag-vectorstore-")) / "index"
            store = cls(path=path, embedding=embedding, options=kwargs.get("options"))
            weakref.finalize(store, shutil.rmtree, str(path.parent), True)
        else:
            store = cls(path=path, embedding=embedding, options=kwargs.get("options"))
        store.add_texts(texts, metadatas, ids=ids)
        return store
