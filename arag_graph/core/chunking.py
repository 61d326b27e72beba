"""Cutting documents into the chunks A-RAG retrieves, on sentence boundaries.

The paper chunks its corpora into pieces of about 1,000 o200k tokens; ``chunk_read`` returns whole
chunks and ``semantic_search`` ranks their sentences. A chunk therefore never splits a sentence
(unless the sentence alone is longer than a chunk), and its text is always an exact substring of
its document, so offsets, snippets and citations can be traced back to the source.

Decisions:

* A document's text is stripped once; a document that fits keeps that text as its only chunk.
  Leading and trailing whitespace carries nothing to retrieve and would put the first sentence at
  a different offset in the chunk than in the document.
* Longer documents are packed greedily with whole sentences; a chunk's text runs from its first
  sentence's start to its last sentence's end, so the whitespace and newlines between sentences
  are kept. Packing uses per-sentence token counts (one tokenizer pass), and each packed chunk is
  counted once more as a whole, because token counts are not exactly additive across the joins;
  a chunk is never longer than ``chunk_size`` tokens.
* A sentence longer than ``chunk_size`` is cut at whitespace (inside a word only when a single
  word is too long) into pieces that each become a chunk sentence.
* Chunk ids: a document's own id, or its 0-based position in the input when it has none; a
  document cut into several chunks gives ``"<id>#0"``, ``"<id>#1"``, .... Ids that collide (a given
  id ``"3"`` and an id-less fourth document) are an error rather than a silent overwrite.
* ``prev_id``/``next_id`` follow corpus order across document boundaries, so an agent reading
  around a chunk can walk the whole corpus.
* Documents with no text are skipped (their position is still used up), and no documents give
  no chunks; :func:`arag_graph.index.corpus.load_corpus` already refuses a corpus that is all empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from arag_graph.core.documents import Chunk, SourceDocument
from arag_graph.core.errors import CorpusError
from arag_graph.core.sentences import sentence_spans
from arag_graph.core.tokens import count_tokens

__all__ = ["DEFAULT_CHUNK_SIZE", "MIN_CHUNK_SIZE", "chunk_documents"]

DEFAULT_CHUNK_SIZE = 1000
# A Python character is at most four UTF-8 bytes, hence at most four tokens; with room for a few
# words per chunk the hard cut always makes progress and chunks still hold some context.
MIN_CHUNK_SIZE = 16

# A text longer than this many characters per allowed token is all but certain not to fit, so it
# skips the whole-text count and goes straight to packing (which still makes one chunk if it fits).
_MAX_CHARS_PER_TOKEN = 16
# Up to the last non-space character that is followed by whitespace: a word-boundary cut.
_LAST_WORD_END = re.compile(r".*\S(?=\s)", re.DOTALL)
_NON_SPACE = re.compile(r"\S")


class _Unit(NamedTuple):
    """A sentence, or a piece of an over-long one, with its exact token count."""

    start: int
    end: int
    tokens: int


def check_chunk_size(chunk_size: int) -> None:
    """Refuse a chunk size :func:`chunk_documents` cannot cut with (callers check before they show
    progress, so the refusal stays one line)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise TypeError(f"chunk_size must be an integer number of tokens, not {type(chunk_size).__name__}")
    if chunk_size < MIN_CHUNK_SIZE:
        raise CorpusError(
            f"chunk size {chunk_size} is too small; use at least {MIN_CHUNK_SIZE} tokens "
            f"(A-RAG uses {DEFAULT_CHUNK_SIZE})"
        )


def chunk_documents(docs: Iterable[SourceDocument], chunk_size: int = DEFAULT_CHUNK_SIZE) -> list[Chunk]:
    """Chunks of at most ``chunk_size`` o200k tokens, cut on sentence boundaries, in corpus order."""
    check_chunk_size(chunk_size)
    planned: list[tuple[str, str | None, str, tuple[tuple[int, int], ...], dict[str, Any] | None]] = []
    owners: dict[str, int] = {}
    for position, doc in enumerate(docs):
        text = doc.text.strip()
        if not text:
            continue
        pieces = _split(text, chunk_size)
        base = doc.id if doc.id is not None else str(position)
        ids = [base] if len(pieces) == 1 else [f"{base}#{n}" for n in range(len(pieces))]
        for chunk_id, (start, end, sentences) in zip(ids, pieces, strict=True):
            if chunk_id in owners:
                raise CorpusError(
                    f"chunk id {chunk_id!r} is produced by documents {owners[chunk_id]} and {position}; "
                    "give every document a unique id (documents without one are numbered by position)"
                )
            owners[chunk_id] = position
            planned.append((chunk_id, doc.title, text[start:end], sentences, doc.metadata or None))
    return [
        Chunk(
            id=chunk_id,
            text=text,
            title=title,
            prev_id=planned[n - 1][0] if n > 0 else None,
            next_id=planned[n + 1][0] if n + 1 < len(planned) else None,
            sentences=sentences,
            metadata=metadata,
        )
        for n, (chunk_id, title, text, sentences, metadata) in enumerate(planned)
    ]


def _split(text: str, limit: int) -> list[tuple[int, int, tuple[tuple[int, int], ...]]]:
    """``(start, end, sentence spans relative to start)`` of each chunk of a stripped ``text``."""
    spans = sentence_spans(text)
    if len(text) <= limit * _MAX_CHARS_PER_TOKEN and count_tokens(text) <= limit:
        return [(0, len(text), tuple(spans))]
    units: list[_Unit] = []
    for start, end in spans:
        tokens = count_tokens(text[start:end])
        if tokens <= limit:
            units.append(_Unit(start, end, tokens))
        else:
            units.extend(_cut_long(text, start, end, tokens, limit))
    return [
        (
            group[0].start,
            group[-1].end,
            tuple((u.start - group[0].start, u.end - group[0].start) for u in group),
        )
        for group in _pack(text, units, limit)
    ]


def _pack(text: str, units: list[_Unit], limit: int) -> list[list[_Unit]]:
    """Greedy packing of whole units, each group checked against ``limit`` as one text."""
    groups: list[list[_Unit]] = []
    first = 0
    while first < len(units):
        stop, estimate = first + 1, units[first].tokens
        while stop < len(units) and estimate + units[stop].tokens <= limit:
            estimate += units[stop].tokens
            stop += 1
        while stop - first > 1:
            actual = count_tokens(text[units[first].start : units[stop - 1].end])
            if actual <= limit:
                break
            # Joins cost a few tokens more than the parts; give back units worth the excess.
            excess = actual - limit
            while stop - first > 1 and excess > 0:
                stop -= 1
                excess -= units[stop].tokens
        groups.append(units[first:stop])
        first = stop
    return groups


def _cut_long(text: str, start: int, end: int, tokens: int, limit: int) -> list[_Unit]:
    """Pieces of at most ``limit`` tokens of the over-long sentence ``text[start:end]``.

    Each piece is sized from the characters-per-token rate seen so far and counted once; a piece
    that comes out too long is shrunk in proportion, so the whole sentence costs little more than
    one tokenizer pass however long it is.
    """
    pieces: list[_Unit] = []
    chars_per_token = (end - start) / tokens
    position = start
    while position < end:
        reach = min(end, position + max(1, int(limit * chars_per_token)))
        while True:
            cut = _word_cut(text, position, reach, end)
            count = count_tokens(text[position:cut])
            if count <= limit or cut - position <= 1:
                break
            shrunk = int((cut - position) * limit / count * 0.95)
            reach = position + max(1, min(shrunk, cut - position - 1))
        pieces.append(_Unit(position, cut, count))
        chars_per_token = (cut - position) / count
        following = _NON_SPACE.search(text, cut, end)
        position = following.start() if following else end
    return pieces


def _word_cut(text: str, position: int, reach: int, end: int) -> int:
    """The end of the last word that ends by ``reach``; ``reach`` itself inside one huge word."""
    if reach >= end:
        return end
    match = _LAST_WORD_END.match(text, position, reach + 1)
    return match.end() if match else reach
