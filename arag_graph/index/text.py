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

# Sentences encoded and stored per step of a build: the most vectors a build holds at once.
BUILD_BLOCK = 4096


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
