"""The index as a LangChain ``VectorStore``, so LangChain's indexing API can keep it current.

``langchain_core.indexing.index(docs, record_manager, vector_store, cleanup="incremental",
source_id_key="source")`` decides what changed with its record manager and calls
``add_documents`` and ``delete`` by document id; :class:`AragVectorStore` passes those to the
index's own incremental update (:func:`arag_graph.index.update.update_index`), so every change is a
complete, checksummed build switched to atomically. Searches are the index's sentence-level
semantic search; each hit is one chunk, returned as a ``Document`` with its document's id and
metadata (a document cut into several chunks can therefore answer more than once).

The store holds the current index and replaces it whole after each change, so concurrent readers
always search one consistent build.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

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

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The ``k`` chunks nearest to ``query`` (a chunk scores its best sentence's cosine
        similarity), only those whose metadata matches ``filter`` when given."""
        index = self._index
        if index is None or k <= 0:
            return []
        owner = self._entries(index)[1]
        hits = index.semantic_search(query, k, metadata_filter=filter)
        out = []
        for hit in hits:
            chunk = index.get_chunk(hit.chunk_id)
            if chunk is None:
                continue
            document = Document(
                id=owner.get(chunk.id, chunk.id), page_content=chunk.text, metadata=dict(chunk.metadata or {})
            )
            out.append((document, hit.score))
        return out

    def similarity_search(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter=filter, **kwargs)]

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
        """A store at ``path`` (required: the index directory) holding ``texts``."""
        if path is None:
            raise AragError("AragVectorStore.from_texts needs path=DIR, the index directory to write")
        store = cls(path=path, embedding=embedding, options=kwargs.get("options"))
        store.add_texts(texts, metadatas, ids=ids)
        return store
