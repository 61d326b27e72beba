"""What an index embeds and keyword-indexes for each chunk: sentences, with their contextual headers.

ARAGOG's contextual chunk headers put a chunk's title (and, in Markdown, its section) before each
sentence that is embedded, and before the text that keyword search matches; the stored sentences
and the snippets stay bare. Build and load both need this, so it lives apart from either.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from arag_graph.core.documents import HEADER_MAX_CHARS, Chunk, bounded_header, chunk_header
from arag_graph.index.manifest import HeaderStyle

# Sentences encoded and stored per step of a build: the most vectors a build holds at once.
BUILD_BLOCK = 4096

HEADER_STYLES: tuple[HeaderStyle, ...] = ("path", "aragog")
"""How a contextual header is written. ``path``: ``Title > Section`` per sentence, embedded as
``header: sentence`` (the package's; a sentence carries the section it is in). ``aragog``: the ARAGOG
paper's ``[Document: Title, Section: Section]``, one per chunk (the section where the chunk starts),
embedded as ``header sentence`` before every sentence of the chunk."""


_PIECE = re.compile(r"#\d+$")
_MARKDOWN_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def _document_of(chunk_id: str) -> str:
    """The id of a chunk's document: chunking names the pieces of a long document ``<id>#<n>``."""
    return _PIECE.sub("", chunk_id)


def _is_markdown(chunk_id: str) -> bool:
    """Chunks of a Markdown file of a directory corpus (whose document ids are the files' paths)."""
    return _document_of(chunk_id).lower().endswith(".md")


def sentence_headers(
    chunks: Sequence[Chunk], limit: int = HEADER_MAX_CHARS, style: HeaderStyle = "path"
) -> Iterator[list[str]]:
    """Per chunk, the contextual header of each of its sentences: the document title and, in Markdown
    documents, the heading of the section the sentence is in (``"Title > Section"``), at most ``limit``
    characters ('' when there is nothing to say). In the ``aragog`` style every sentence of a chunk gets
    the chunk's header, ``[Document: Title, Section: Section]`` with the section where the chunk starts.

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
            if style == "aragog":
                headers.append(headers[0] if headers else _aragog_header(c.title, parts[1:], limit))
            else:
                headers.append(bounded_header(" > ".join(parts), limit))
        for _, heading in headings:  # headings after the last sentence start the next chunk's section
            section = heading
        yield headers


def _aragog_header(title: str | None, section: Sequence[str], limit: int) -> str:
    """``[Document: Title, Section: Section]`` (the parts there are); title and section together within
    ``limit`` characters, the labels not counted."""
    document = bounded_header(title or "", limit)
    rest = bounded_header(section[0], limit - len(document)) if section and limit > len(document) else ""
    named = [f"Document: {document}"] if document else []
    named += [f"Section: {rest}"] if rest else []
    return f"[{', '.join(named)}]" if named else ""


class KeywordText(NamedTuple):
    """A chunk as keyword search matches it: its id, and its header before its text.

    Only what the keyword index reads: a copy of the whole chunk (``dataclasses.replace``) cost
    four times as much, and an update makes this list for the previous build and the new one.
    """

    id: str
    text: str


def keyword_chunks(chunks: Sequence[Chunk], header_max_chars: int) -> Sequence[Chunk | KeywordText]:
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
        headed.append(KeywordText(c.id, f"{header}\n{c.text}" if header else c.text))
    return headed


def sentence_blocks(
    chunks: Sequence[Chunk],
    contextual_headers: bool | HeaderStyle,
    size: int | None = None,
    header_max_chars: int | None = None,
) -> Iterator[tuple[int, list[str], list[str]]]:
    """The sentences to store and the texts to embed for them, ``size`` (default :data:`BUILD_BLOCK`)
    at a time, in row order.

    Yields ``(first row, sentences, texts to embed)``. With contextual chunk headers (ARAGOG's CCH;
    ``contextual_headers`` True or a :data:`HeaderStyle`, True being ``path``) the embedded text is
    ``"header: sentence"``, or ``"[Document: ...] sentence"`` in the ``aragog`` style
    (:func:`sentence_headers`), while the stored document stays the bare sentence, so snippets never
    show the header.
    """
    size = size or BUILD_BLOCK
    limit = HEADER_MAX_CHARS if header_max_chars is None else header_max_chars
    style: HeaderStyle = contextual_headers if isinstance(contextual_headers, str) else "path"
    joiner = " " if style == "aragog" else ": "
    documents: list[str] = []
    embedded: list[str] = []
    start = 0
    headers = sentence_headers(chunks, limit, style) if contextual_headers and limit > 0 else None
    for c in chunks:
        own = next(headers) if headers is not None else None
        for n, (begin, end) in enumerate(c.sentences):
            sentence = c.text[begin:end]
            documents.append(sentence)
            embedded.append(f"{own[n]}{joiner}{sentence}" if own and own[n] else sentence)
            if len(documents) >= size:
                yield start, documents, embedded
                start += len(documents)
                documents, embedded = [], []
    if documents:
        yield start, documents, embedded


def sentence_inputs(
    chunks: Sequence[Chunk], contextual_headers: bool | HeaderStyle, header_max_chars: int | None = None
) -> tuple[list[str], list[str]]:
    """All sentences to store and all texts to embed (see :func:`sentence_blocks`) at once."""
    documents: list[str] = []
    embedded: list[str] = []
    for _, docs, texts in sentence_blocks(chunks, contextual_headers, size=1 << 62, header_max_chars=header_max_chars):
        documents += docs
        embedded += texts
    return documents, embedded
