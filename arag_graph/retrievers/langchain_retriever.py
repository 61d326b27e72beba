"""The index as a LangChain retriever: any chain, agent or ``EnsembleRetriever`` can use it.

A-RAG's own interface is the three tools, which hand a model snippets first and whole chunks on
request. Most LangChain code instead expects a ``BaseRetriever``: text in, ``Document`` objects out.
:class:`IndexRetriever` is that view of the same index, without a second copy of anything. It ranks
chunks with the one-shot retrievers the non-agentic graphs use (:func:`arag_graph.retrievers.passages.retrieve`),
so a retriever and ``naive_rag`` with the same setting return the same chunks:

* ``semantic`` (default): the index's sentence-level semantic search, a chunk scored by its best
  sentence (cosine similarity), as ``semantic_search`` and ``naive_rag``'s ``dense`` do.
* ``keyword``: BM25 over chunk text (``naive_rag``'s ``bm25``). A retriever receives a question,
  not a keyword list; A-RAG's exact keyword score (``index.keyword_search``) needs the keywords
  picked out first, which is the agent's job.
* ``hybrid``: both rankings fused by reciprocal rank (``naive_rag``'s ``hybrid``); scores are
  fusion scores, comparable only within one result list.
* ``amr``: ARAGOG's auto-merging retrieval (``naive_rag``'s ``amr``, default threshold): the
  nearest sentences, handed over whole as their chunk (or document) where more than half of it
  matched, else as the matched sentences alone. ``naive_rag`` searches ``top_k`` sentences (ARAGOG's
  leaves), which may merge into fewer passages; a retriever's ``k`` is a number of documents
  (LangChain's contract), so it searches as many sentences as it takes to hand over ``k``
  (:func:`~arag_graph.retrievers.passages.auto_merge_documents`).
* ``dsi``: ARAGOG's document summary index (``naive_rag``'s ``dsi``): the ``k`` best chunks inside
  the documents whose summaries are nearest; needs an index built with ``--summaries``.

``search_kwargs={"k": 2, "filter": {"source": "a.pdf"}}`` (the argument LangChain's vector-store
retrievers take) sets ``k`` and the ``metadata_filter``; any other setting the retriever does not
have is refused in one line rather than ignored.

Each document is a whole chunk (``amr``: or the matched sentences of one): ``page_content`` is its
text, ``id`` and ``metadata["chunk_id"]`` its chunk ID (what ``chunk_read`` and the citations use),
with ``title``, ``score`` and ``search_type`` in the metadata, after the metadata its source
document was indexed with (a LangChain loader's ``source``, ``page``, ...). ``metadata_filter``
keeps only chunks whose document metadata matches (``{"source": "a.pdf"}``), for any search type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, field_validator, model_validator

from arag_graph.core.documents import check_filter, matches_filter
from arag_graph.core.errors import AragError
from arag_graph.retrievers.passages import Passage, Retriever, auto_merge_documents, passages, retrieve

SearchType = Literal["semantic", "keyword", "hybrid", "amr", "dsi"]
SEARCH_TYPES: tuple[str, ...] = get_args(SearchType)
_RETRIEVER: dict[str, Retriever] = {"semantic": "dense", "keyword": "bm25", "hybrid": "hybrid"}


def _check_k(k: Any) -> int:
    """``k`` as a whole number of at least 1 (``3``, ``3.0`` or ``"3"``).

    Unlike a tool's ``top_k``, which a model writes and which is clamped, ``k`` comes from code or a
    chain's configuration, so a wrong one is an error rather than a silent change.
    """
    error = AragError(f"retriever k={k!r} is not a number of documents; give a whole number of at least 1")
    if isinstance(k, bool):
        raise error
    try:
        value = int(k)
    except (TypeError, ValueError):
        raise error from None
    if (isinstance(k, float) and value != k) or value < 1:
        raise error
    return value


class IndexRetriever(BaseRetriever):
    """Top-``k`` chunks of a :class:`~arag_graph.index.hierarchical.HierarchicalIndex` as LangChain documents.

    Usually made with :func:`make_retriever`; ``invoke(query, k=3)``
    overrides ``k`` for one call. Thread-safe like the index, so one retriever serves concurrent runs.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any
    """The loaded :class:`~arag_graph.index.hierarchical.HierarchicalIndex` whose chunks are returned."""
    search_type: SearchType = "semantic"
    """How chunks are ranked: ``semantic`` (default), ``keyword`` (BM25) or ``hybrid`` (both, fused)."""
    k: int = 5
    """How many documents to return (fewer when the index has fewer matching chunks)."""

    metadata_filter: dict[str, Any] | None = None
    """Only chunks whose document metadata matches this filter (Chroma's ``where`` dialect:
    ``{"source": "a.pdf"}``, ``{"page": {"$gte": 3}}``, ``$and``/``$or``; see
    :data:`arag_graph.core.documents.MetadataFilter`); None: all chunks."""

    @field_validator("metadata_filter", mode="before")
    @classmethod
    def _a_filter(cls, value: Any) -> Any:
        return check_filter(value)

    @model_validator(mode="before")
    @classmethod
    def _known_settings(cls, data: Any) -> Any:
        """``search_kwargs`` read (its ``k`` and ``filter``), and any setting the retriever lacks
        refused, not dropped."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        search_kwargs = data.pop("search_kwargs", None)
        if search_kwargs is not None:
            data |= _from_search_kwargs(search_kwargs, data.get("k"), data.get("metadata_filter"))
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            raise AragError(
                f"the retriever has no setting {unknown[0]!r}; it takes index, search_type, k, metadata_filter "
                "(or search_kwargs={'k': N, 'filter': {...}}), tags and metadata"
            )
        return data

    @field_validator("search_type", mode="before")
    @classmethod
    def _known_search_type(cls, value: Any) -> Any:
        if value not in SEARCH_TYPES:
            raise AragError(f"retriever search_type={value!r} is unknown; use one of {', '.join(SEARCH_TYPES)}")
        return value

    @field_validator("index", mode="before")
    @classmethod
    def _an_index(cls, value: Any) -> Any:
        if not (hasattr(value, "semantic_search") and hasattr(value, "get_chunk")):
            raise AragError(f"the retriever needs a loaded index (load_index(DIR)), got {type(value).__name__}")
        return value

    @field_validator("k", mode="before")
    @classmethod
    def _positive_k(cls, value: Any) -> int:
        return _check_k(value)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: Any = None
    ) -> list[Document]:
        if not isinstance(query, str):
            raise AragError(
                f"the retriever got a {type(query).__name__}, not a query string; pass the question text "
                "(in a chain, pick it out first, e.g. itemgetter('question') | retriever)"
            )
        if not query.strip():
            return []
        top_k = self.k if k is None else _check_k(k)
        documents = []
        for passage, stored in self._filtered(query, top_k):
            documents.append(
                Document(
                    id=passage.chunk_id,
                    page_content=passage.text,
                    metadata={
                        **(stored or {}),
                        "chunk_id": passage.chunk_id,
                        "title": passage.title,
                        "score": passage.score,
                        "search_type": self.search_type,
                    },
                )
            )
        return documents

    def _filtered(self, query: str, top_k: int) -> list[tuple[Passage, dict[str, Any] | None]]:
        """The top ``top_k`` passages with their document metadata, those the filter allows only: the
        search is asked for more until enough pass or the index has no more chunks."""
        want = top_k
        total = len(self.index)
        while True:
            found = [
                (p, getattr(self.index.get_chunk(p.chunk_id), "metadata", None)) for p in self._passages(query, want)
            ]
            kept = [(p, m) for p, m in found if matches_filter(m, self.metadata_filter)]
            if len(kept) >= top_k or not self.metadata_filter or want >= total or len(found) < want:
                return kept[:top_k]
            want = min(total, want * 4)

    def _passages(self, query: str, top_k: int) -> list[Passage]:
        if self.search_type == "amr":
            return auto_merge_documents(self.index, query, top_k)
        if self.search_type == "dsi":
            from arag_graph.retrievers.summaries import summary_search

            return passages(self.index, summary_search(self.index, query, top_k))
        return passages(self.index, retrieve(self.index, query, top_k, _RETRIEVER[self.search_type]))


def _from_search_kwargs(search_kwargs: Any, k: Any, metadata_filter: Any) -> dict[str, Any]:
    """``k`` and ``metadata_filter`` from LangChain's ``search_kwargs`` (``{"k": 3, "filter": {...}}``,
    as its vector-store retrievers take them); anything else, or a value given twice differently, is
    refused in one line."""
    if not isinstance(search_kwargs, Mapping):
        given = type(search_kwargs).__name__
        raise AragError(f"retriever search_kwargs must be a mapping such as {{'k': 3}}, not {given}")
    other = sorted(set(search_kwargs) - {"k", "filter"})
    if other:
        raise AragError(
            f"retriever search_kwargs {other[0]!r} is not supported: only 'k' and 'filter' are; "
            "choose the ranking with search_type"
        )
    out: dict[str, Any] = {"k": _check_k(5 if k is None else k)}
    if "k" in search_kwargs:
        out["k"] = _check_k(search_kwargs["k"])
        if k is not None and _check_k(k) != out["k"]:
            raise AragError(f"retriever k={k!r} and search_kwargs k={search_kwargs['k']!r} disagree; give k once")
    if "filter" in search_kwargs:
        out["metadata_filter"] = search_kwargs["filter"]
        if metadata_filter is not None and metadata_filter != search_kwargs["filter"]:
            raise AragError("retriever metadata_filter and search_kwargs filter disagree; give the filter once")
    return out


def make_retriever(
    index: Any,
    search_type: SearchType = "semantic",
    k: int | None = None,
    *,
    search_kwargs: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> IndexRetriever:
    """``index`` as a LangChain ``BaseRetriever``; ``search_type``: semantic, keyword, hybrid, amr or dsi.

    Top ``k`` documents (default 5), given as ``k`` or, as LangChain's vector-store retrievers take
    it, ``search_kwargs={"k": k}`` (with ``"filter"``: the ``metadata_filter``); ``kwargs`` go to the
    retriever (``metadata_filter``, ``tags``, ``metadata``). A
    setting the retriever does not have is an error, never ignored. A function of the retrieval
    layer rather than a method of the index, so that the index never imports what is built on it.
    """
    if search_kwargs is not None:
        kwargs["search_kwargs"] = search_kwargs
    if k is not None:
        kwargs["k"] = k
    return IndexRetriever(index=index, search_type=search_type, **kwargs)
