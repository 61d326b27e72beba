"""Reading chunk texts into the keyword index's arrays (:mod:`arag_graph.index.keywords`).

One pass over the chunks, a batch of texts at a time, stores their lower-cased UTF-8 text back to
back and finds every ``\\w+`` word occurrence (its word, chunk and byte offset); the occurrences are
then sorted by word into the CSR table the index searches. An update
(:meth:`~arag_graph.index.keywords.KeywordIndex.updated`) reads only the chunks whose text is new and
merges their occurrences into the kept ones, ranked in the union of the two vocabularies.
Per-chunk (let alone per-word) Python work would dominate a build, so each step runs on a whole
batch at C or NumPy speed.
"""

from __future__ import annotations

import functools
import re
import sys
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from arag_graph.core.errors import AragError

WORD = re.compile(r"\w+")
"""A word, as the index (and the ``word`` matching rule) counts words."""
# Chunks tokenised together while building.
_BUILD_BATCH = 2048


class Indexed(Protocol):
    """What the index reads of a chunk: its id (for the fingerprint) and the text it matches."""

    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...


def utf8(text: str) -> bytes:
    # surrogatepass: a stray surrogate from a badly decoded file must not stop the build.
    return text.encode("utf-8", "surrogatepass")


@functools.cache
def _word_table() -> np.ndarray:
    """Which code points are word characters, asked of `re` itself so that both always agree."""
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    table = np.zeros(sys.maxunicode + 1, bool)
    for run in WORD.finditer(every):
        table[run.start() : run.end()] = True
    return table


def _words(code: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The ``\\w+`` words of a text given as code points, and where each word begins.

    Same result as ``re.findall``, at a third of its cost: the text is rewritten with one space
    after each word and nothing else between words, which ``str.split`` cuts at C speed. The
    text must end with a non-word character.
    """
    is_word = _word_table()[code]
    after_word = np.concatenate(([False], is_word[:-1]))
    first = np.flatnonzero(is_word & ~after_word)
    spaced = np.where(is_word, code, np.uint32(32))[is_word | after_word]
    words = spaced.tobytes().decode("utf-32-le", "surrogatepass").split(" ")
    words.pop()  # the empty string after the last space
    return words, first


@dataclass
class Scanned:
    """What one pass over chunk texts found (:func:`scan_texts`)."""

    text: np.ndarray  # the lower-cased texts, UTF-8, each followed by NUL
    starts: np.ndarray  # where each text starts in ``text``, and its end
    vocabulary: list[str]  # the words met, in the order of their ids
    word_ids: list[np.ndarray]  # per batch and occurrence: word id,
    chunk_ids: list[np.ndarray]  # chunk (position in the list scanned)
    positions: list[np.ndarray]  # and byte offset in the chunk's text


def scan_texts(chunks: Sequence[Indexed], *, words: bool, on_chunks: Callable[[int], None] | None = None) -> Scanned:
    """The stored text of ``chunks`` and, with ``words``, every word occurrence in it."""
    blob: list[bytes] = []
    starts = [np.zeros(1, np.int64)]
    word_ids: list[np.ndarray] = []
    chunk_ids: list[np.ndarray] = []
    in_chunk_offsets: list[np.ndarray] = []
    ids: defaultdict[str, int] = defaultdict()
    ids.default_factory = ids.__len__  # first sight of a word assigns the next id, at C speed
    done = 0  # bytes of text stored so far
    for first in range(0, len(chunks), _BUILD_BATCH):
        # A batch of texts goes through each step at once: per-chunk (let alone per-word)
        # Python work would dominate the build. NUL is not \w: no word straddles two texts.
        lows = [chunk.text.lower() for chunk in chunks[first : first + _BUILD_BATCH]]
        joined = "\x00".join(lows) + "\x00"
        data = utf8(joined)
        blob.append(data)
        ends = np.cumsum([len(low) + 1 for low in lows])  # in characters
        ascii_only = len(data) == len(joined)
        if words or not ascii_only:
            code = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32)
        byte_at = None  # byte offset of each character, needed once any is not ASCII
        if not ascii_only:
            width = 1 + (code >= 0x80).astype(np.int64) + (code >= 0x800) + (code >= 0x10000)
            byte_at = np.concatenate(([0], np.cumsum(width)))
        batch_starts = done + (ends if byte_at is None else byte_at[ends])
        starts.append(batch_starts)
        if words:
            found, at = _words(code)
            word_ids.append(np.fromiter(map(ids.__getitem__, found), np.int32, len(found)))
            at = done + (at if byte_at is None else byte_at[at])
            chunk = np.searchsorted(batch_starts, at, side="right")
            in_chunk = at - np.concatenate(([done], batch_starts))[chunk]
            chunk_ids.append((chunk + first).astype(np.int32))
            in_chunk_offsets.append(in_chunk.astype(np.uint32))
        done = int(batch_starts[-1]) if len(lows) else done
        if on_chunks is not None:
            on_chunks(len(lows))
    text = np.frombuffer(b"".join(blob), np.uint8)
    del blob
    return Scanned(text, np.concatenate(starts), list(ids), word_ids, chunk_ids, in_chunk_offsets)


def position_type(starts: np.ndarray) -> type[np.unsignedinteger[Any]]:
    """The narrowest type that holds every byte offset within a chunk."""
    longest = int((starts[1:] - starts[:-1]).max(initial=0))
    return np.uint16 if longest <= np.iinfo(np.uint16).max else np.uint32


def invert(
    words: list[str],
    word_ids: list[np.ndarray],
    chunk_ids: list[np.ndarray],
    offsets_in_chunk: list[np.ndarray],
    starts: np.ndarray,
) -> dict[str, Any]:
    """Sort the word occurrences by word (then corpus order) into the CSR arrays.

    Empties the lists it is given as it goes, which keeps the peak memory of a build lower.
    """
    order = sorted(range(len(words)), key=words.__getitem__)
    rank = np.empty(len(words), np.int64)
    rank[order] = np.arange(len(words))
    term = rank[drain(word_ids, np.int32)]
    if len(term) >= 1 << 32:  # the sort key below holds the occurrence number in 32 bits
        raise AragError(f"{len(term):,} words are too many for one keyword index (limit 4.2 billion); split the corpus")
    offsets = np.zeros(len(words) + 1, np.int64)
    np.cumsum(np.bincount(term, minlength=len(words)), out=offsets[1:])
    # One int64 sort of (word, occurrence) keys: 2-3x faster than a stable argsort of the words.
    term <<= 32
    term |= np.arange(len(term))
    term.sort()
    term &= 0xFFFFFFFF  # in place: the occurrence numbers, now in (word, corpus) order
    by_term = term
    occ_chunk = drain(chunk_ids, np.int32)[by_term]
    pos = drain(offsets_in_chunk, np.uint32).astype(position_type(starts))
    return {
        "vocabulary": [words[i] for i in order],
        "offsets": offsets,
        "occ_chunk": occ_chunk,
        "occ_pos": pos[by_term],
    }


def kept_chunks(chunks: Sequence[Indexed], before: Sequence[Indexed]) -> tuple[np.ndarray, list[int]]:
    """For an update (:meth:`KeywordIndex.updated`): where each chunk of ``before`` went in ``chunks``
    (-1 if nowhere), and the chunks to tokenize: new texts, and repeats of a text already taken."""
    first_with_text: dict[str, int] = {}
    for position, chunk in enumerate(before):
        first_with_text.setdefault(chunk.text, position)
    target = np.full(len(before), -1, np.int64)
    fresh: list[int] = []
    for position, chunk in enumerate(chunks):
        source = first_with_text.get(chunk.text)
        if source is None or target[source] >= 0:
            fresh.append(position)
        else:
            target[source] = position
    return target, fresh


def union_ranks(old_words: list[str], new_words: list[str]) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Ranks in the sorted union of two vocabularies (``old_words`` is sorted): each old word's rank,
    the new words the old vocabulary lacks (sorted), and each of ``new_words``' rank."""
    known = set(old_words)
    extra = sorted({word for word in new_words if word not in known})
    inserted_at = np.fromiter((bisect_left(old_words, word) for word in extra), np.int64, len(extra))
    old_rank = np.arange(len(old_words), dtype=np.int64)
    old_rank += np.searchsorted(inserted_at, old_rank, side="right")
    extra_rank = dict(zip(extra, (inserted_at + np.arange(len(extra))).tolist(), strict=True))
    new_rank = np.fromiter(
        (extra_rank[w] if w in extra_rank else int(old_rank[bisect_left(old_words, w)]) for w in new_words),
        np.int64,
        len(new_words),
    )
    return old_rank, extra, new_rank


def drain(parts: list[np.ndarray], dtype: type[np.generic]) -> np.ndarray:
    """Concatenate and empty ``parts``, so that the pieces are freed as soon as the whole exists."""
    whole = np.concatenate(parts) if parts else np.zeros(0, dtype)
    parts.clear()
    return whole
