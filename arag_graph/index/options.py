"""How an index is built: the typed settings (:class:`BuildOptions`) and the summary writer a build
is handed (:class:`SummaryWriter`).

Apart from :mod:`arag_graph.index.build` so that an update (:mod:`arag_graph.index.update`), which
builds with the settings the index was built with, can use them without importing the full build.
ARAGOG's document summaries are written by a :class:`SummaryWriter` the caller passes in (the model
layer's :func:`arag_graph.llm.summarize.summary_writer`): the index layer sits below the models and
never imports them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from langchain_core.embeddings import Embeddings

from arag_graph.core.documents import DEFAULT_CONTEXTUAL_HEADERS, HEADER_MAX_CHARS, Chunk
from arag_graph.core.errors import AragError
from arag_graph.core.profiles import DEFAULT_PROFILE, Profile, check_profile, index_values
from arag_graph.core.safety import url_credentials, url_without_credentials
from arag_graph.index.chroma import require_chromadb
from arag_graph.index.manifest import SENTENCE_BACKENDS, KeywordMatch
from arag_graph.index.text import HEADER_STYLES, HeaderStyle


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
    header_style: HeaderStyle = "path"
    """How a contextual header is written: ``path`` (``Title > Section``, per sentence) or ``aragog`` (the
    ARAGOG paper's ``[Document: Title, Section: Section]``, per chunk); see
    :data:`~arag_graph.index.text.HeaderStyle`."""
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
        if self.header_style not in HEADER_STYLES:
            raise AragError(f"unknown header style {self.header_style!r}; use {' or '.join(HEADER_STYLES)}")
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
        if self.chroma_url or self.backend == "chroma":  # before any document is read
            require_chromadb("--chroma-url (a Chroma server)" if self.chroma_url else "--backend chroma")

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
