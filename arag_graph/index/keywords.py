"""The keyword level of the A-RAG index: exact, case-insensitive keyword search without a scan.

A-RAG's ``keyword_search`` scores chunk *i* for a keyword set *K* as
``sum(count(k, text_i) * len(k) for k in K)``, so longer (more specific) keywords weigh more, and
returns the best chunks with the sentences that contain a match as snippets. The paper scans every
text per query; at 10^5-10^6 chunks that costs a tenth of a second to seconds per keyword, so this
module answers the same question from an inverted index.

Matching rule, ``match="word"`` (the default). A keyword ``k`` (stripped, ``str.lower()``-ed)
matches the lower-cased text at ``p`` when ``text[p:p + len(k)] == k`` and, if ``k`` starts with a
word character (``\\w``), ``p`` starts a word. Matches may end inside a word: ``film`` matches
``films`` but ``art`` does not match ``party``. Counts are of non-overlapping matches scanned left
to right, exactly what ``re.findall(r"(?<!\\w)" + re.escape(k), text)`` gives. ``len(k)`` is the
character length of the lower-cased keyword. Keywords are deduplicated case-insensitively, and a
keyword without any word character is ignored (it would match punctuation everywhere and carries
no signal); :func:`ignored_keywords` reports those so the tool layer can tell the model.

``match="substring"`` is the paper's rule (plain ``text.count(k)``). It cannot use word-prefix
postings, so it scans the whole corpus text per keyword; it exists to reproduce the paper.

The index (word mode) is one CSR table over the sorted vocabulary of ``\\w+`` tokens of the
lower-cased texts, with one entry per token *occurrence*: the chunk it is in and its byte offset in
the chunk's UTF-8 text. Because the vocabulary is sorted, every word with a given prefix sits in
one contiguous vocabulary range, and so do its occurrences: a single-word keyword is scored by
counting the chunk ids of one array slice, with no text at all. A keyword with several words or
punctuation (``J. Om Prakash``, ``U.S.``, ``(film)``) is anchored on the occurrences of its rarest
word, and the candidates are verified against the stored lower-cased corpus text (UTF-8, chunks
back to back), one byte position at a time for all candidates at once. Cost grows with the
rarest word's occurrences, not with the corpus: entity names take well under a millisecond, while
a phrase of two very common words ("of the") visits every occurrence of one of them.
All arrays are read-only after construction, so concurrent searches from threads are safe, and
:meth:`KeywordIndex.load` can memory-map them. Reading the texts into the arrays, for a build or an
update, is :mod:`arag_graph.index.keyword_scan`'s.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import itertools
import json
import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from arag_graph.core.documents import Chunk
from arag_graph.core.errors import AragError, IndexDamagedError, IndexMismatchError, IndexNotFoundError
from arag_graph.index.keyword_scan import (
    WORD,
    Scanned,
    drain,
    invert,
    kept_chunks,
    position_type,
    scan_texts,
    union_ranks,
    utf8,
)
from arag_graph.index.keyword_scan import Indexed as Indexed
from arag_graph.index.layout import load_index_array, read_index_bytes

MatchMode = Literal["word", "substring"]
MATCH_MODES: tuple[str, ...] = ("word", "substring")

FORMAT_VERSION = 1
# Every file starts with "keywords." so the index can share a build directory with other parts.
_META = "keywords.json"
_VOCABULARY = "keywords.vocabulary.txt"
_ARRAYS = ("offsets", "occ_chunk", "occ_pos", "starts", "text")
# What each array may hold: numpy kind ("i" signed, "u" unsigned) and item sizes.
_ARRAY_TYPES = {"offsets": ("i", (8,)), "occ_chunk": ("i", (4,)), "occ_pos": ("u", (2, 4)), "starts": ("i", (8,))}
_ARRAY_TYPES["text"] = ("u", (1,))
# Elements per step of the full check, which must not hold a second copy of a large array.
_CHECK_BLOCK = 1 << 24

# Sorts after every string that can start with a given prefix: U+10FFFF is a noncharacter, never \w.
_PAST_PREFIX = "\U0010ffff"
# Chunk texts are stored back to back, each followed by this byte.
_SEP = b"\x00"
_ASCII_WORD = np.array([bool(WORD.fullmatch(chr(b))) for b in range(128)] + [False] * 128)


@dataclass(frozen=True, slots=True)
class KeywordHit:
    """One chunk that matched: its position in the indexed chunk list, score and matching keywords."""

    chunk_index: int
    score: float
    matched: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Term:
    given: str  # as the caller wrote it; reported back in KeywordHit.matched
    text: str  # stripped and lower-cased: what is matched
    weight: int  # len(text): the paper's per-match weight


def _check_mode(match: str) -> None:
    if match not in MATCH_MODES:
        raise AragError(f"unknown keyword match mode {match!r}; use one of {', '.join(MATCH_MODES)}")


def _as_list(keywords: Sequence[str] | str) -> list[str]:
    # Models often pass one keyword as a bare string; iterating it would search single letters.
    return [keywords] if isinstance(keywords, str) else list(keywords)


def _prepare(keywords: Sequence[str] | str, match: str) -> tuple[list[_Term], list[str]]:
    """Usable terms (deduplicated, in the caller's order) and the keywords that cannot match."""
    terms: list[_Term] = []
    ignored: list[str] = []
    seen: set[str] = set()
    for given in _as_list(keywords):
        text = given.strip().lower()
        if not text or (match == "word" and not WORD.search(text)):
            ignored.append(given)
        elif text not in seen:
            seen.add(text)
            terms.append(_Term(given, text, len(text)))
    return terms, ignored


def ignored_keywords(keywords: Sequence[str] | str, match: MatchMode = "word") -> list[str]:
    """The keywords (as given) that the rule ignores: empty ones and, in word mode, those without
    a word character. The tool layer reports them so the model can rephrase."""
    _check_mode(match)
    return _prepare(keywords, match)[1]


@functools.lru_cache(maxsize=4096)
def _pattern(keyword: str, match: str) -> re.Pattern[str]:
    word_start = match == "word" and WORD.match(keyword) is not None
    return re.compile((r"(?<!\w)" if word_start else "") + re.escape(keyword))


def keyword_score(text: str, keywords: Sequence[str] | str, match: MatchMode = "word") -> float:
    """The A-RAG score of one text, computed by brute force.

    This is the reference the index is tested against, written as directly as the rule reads.
    """
    _check_mode(match)
    terms, _ = _prepare(keywords, match)
    low = text.lower()
    total = 0
    for term in terms:
        count = low.count(term.text) if match == "substring" else len(_pattern(term.text, match).findall(low))
        total += count * term.weight
    return float(total)


def _match_spans(text: str, terms: Sequence[_Term], match: str) -> list[tuple[int, int]]:
    """Character spans in ``text`` (original casing) of every counted match of every term."""
    low = text.lower()
    spans = [m.span() for term in terms for m in _pattern(term.text, match).finditer(low)]
    if len(low) != len(text):
        # A few characters lower-case to two (İ -> i̇); map lower-cased offsets back. Lengths do
        # not depend on context (only final sigma does, and it keeps its length). A match ends
        # after its last character, ``e - 1``, which is where its end maps from.
        to_original = [i for i, char in enumerate(text) for _ in char.lower()]
        spans = [(to_original[s], to_original[e - 1] + 1) for s, e in spans]
    return spans


def _word_bytes(text: str) -> list[int]:
    """Offsets of the UTF-8 bytes of ``text`` that belong to word characters."""
    out: list[int] = []
    at = 0
    for char in text:
        width = len(utf8(char))
        if WORD.match(char):
            out.extend(range(at, at + width))
        at += width
    return out


def _has_border(word: str) -> bool:
    """Whether two matches of ``word`` can overlap (a proper prefix equals a suffix)."""
    fail = [0] * len(word)
    k = 0
    for i in range(1, len(word)):
        while k and word[i] != word[k]:
            k = fail[k - 1]
        if word[i] == word[k]:
            k += 1
        fail[i] = k
    return bool(word) and fail[-1] > 0


def _runs(sorted_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted array and how often each occurs (np.unique without the sort)."""
    if not len(sorted_ids):
        return sorted_ids.astype(np.int64), np.zeros(0, np.int64)
    first = np.flatnonzero(np.concatenate(([True], sorted_ids[1:] != sorted_ids[:-1])))
    return sorted_ids[first].astype(np.int64), np.diff(np.append(first, len(sorted_ids)))


def _fingerprint(chunks: Sequence[Indexed]) -> str:
    """Identifies the chunk list an index was built from, cheaply enough to check on every load."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(utf8("\x1f".join(chunk.id for chunk in chunks)))
    digest.update(np.fromiter((len(chunk.text) for chunk in chunks), np.int64, len(chunks)).tobytes())
    return digest.hexdigest()


_Counts = tuple[np.ndarray, np.ndarray]  # ascending distinct chunk ids, match count per chunk


class KeywordIndex:
    """Answers A-RAG keyword searches over a fixed list of chunks.

    Build it with :meth:`from_chunks` or :meth:`load`; chunks are referred to by their position in
    that list. All state is read-only, so one index can serve searches from several threads.
    """

    __slots__ = (
        "_ends",
        "_fingerprint",
        "_occ_chunk",
        "_occ_pos",
        "_offsets",
        "_root",
        "_starts",
        "_text",
        "_vocab",
        "match",
    )

    def __init__(
        self,
        *,
        match: MatchMode,
        vocabulary: list[str],
        offsets: np.ndarray,
        occ_chunk: np.ndarray,
        occ_pos: np.ndarray,
        starts: np.ndarray,
        text: np.ndarray,
        fingerprint: str,
        root: Path | None = None,
    ) -> None:
        """Wrap prebuilt arrays; use :meth:`from_chunks` or :meth:`load` instead.

        ``vocabulary`` is sorted; the occurrences of word ``w`` are ``offsets[w]:offsets[w + 1]`` of
        ``occ_chunk`` (chunk index) and ``occ_pos`` (byte offset of the word in the chunk's UTF-8
        lower-cased text). ``text`` holds those texts back to back, chunk ``i`` at
        ``starts[i]:starts[i + 1] - 1`` followed by one NUL byte. ``root`` is the index directory
        that damage found while reading the arrays is reported against.
        """
        _check_mode(match)
        self.match: MatchMode = match
        self._vocab = vocabulary
        self._offsets = offsets
        self._occ_chunk = occ_chunk
        self._occ_pos = occ_pos
        self._starts = starts
        self._ends = starts[1:] - 1
        self._text = text
        self._fingerprint = fingerprint
        self._root = root

    def __len__(self) -> int:
        """Number of chunks indexed."""
        return len(self._starts) - 1

    @property
    def vocabulary_size(self) -> int:
        return len(self._vocab)

    # -- building and persistence -------------------------------------------------------------

    @classmethod
    def from_chunks(
        cls, chunks: Sequence[Indexed], match: MatchMode = "word", on_chunks: Callable[[int], None] | None = None
    ) -> KeywordIndex:
        """Index ``chunks``: word mode takes about 40 s and 3 GB at peak per million 400-character
        chunks on one core (substring mode only stores the text), hence :meth:`save`/:meth:`load`.
        ``on_chunks(n)`` is called as each batch of ``n`` chunks is read, for progress bars."""
        _check_mode(match)
        scan = scan_texts(chunks, words=match == "word", on_chunks=on_chunks)
        return cls(
            match=match,
            **invert(scan.vocabulary, scan.word_ids, scan.chunk_ids, scan.positions, scan.starts),
            starts=scan.starts,
            text=scan.text,
            fingerprint=_fingerprint(chunks),
        )

    def updated(
        self, chunks: Sequence[Indexed], before: Sequence[Indexed], on_chunks: Callable[[int], None] | None = None
    ) -> KeywordIndex:
        """The index of ``chunks``, equal array for array to ``from_chunks(chunks, self.match)``,
        made from this index of ``before`` (the chunks it was built from).

        An update changes a few chunks of many: tokenizing every chunk again and sorting every word
        occurrence was most of an update's keyword step (bench/results/update.md). Here a chunk
        whose text some chunk of ``before`` has word for word keeps that chunk's occurrences,
        renumbered; only the other chunks are tokenized, and their occurrences are merged into the
        kept ones, which are already in (word, corpus) order whenever the kept chunks keep their
        order (else they are sorted once). Texts, not ids, decide what is kept: occurrences depend
        on the text alone, so a match by text can never be stale.
        """
        if _fingerprint(before) != self._fingerprint or len(before) != len(self):
            raise AragError(
                f"this keyword index was not built from the {len(before)} chunks given as before; "
                "pass the chunks it was built from, or build anew with KeywordIndex.from_chunks"
            )
        if self.match != "word":  # substring mode stores only the text, which is the cheap part
            return type(self).from_chunks(chunks, self.match, on_chunks)
        target, fresh = kept_chunks(chunks, before)
        whole = scan_texts(chunks, words=False, on_chunks=on_chunks)  # every text (cheap: no words)
        new = scan_texts([chunks[i] for i in fresh], words=True)
        old_words = self._vocab
        old_rank, extra, new_rank = union_ranks(old_words, new.vocabulary)
        width = max(len(chunks), 1)
        key, pos = self._merged_occurrences(target, old_rank, new, new_rank, fresh, width)
        rank, owner = np.divmod(key, width)
        del key
        counts = np.bincount(rank, minlength=len(old_words) + len(extra))
        alive = np.flatnonzero(counts)  # a word no chunk holds any more leaves the vocabulary
        merged = list(heapq.merge(old_words, extra))
        offsets = np.zeros(len(alive) + 1, np.int64)
        np.cumsum(counts[alive], out=offsets[1:])
        return type(self)(
            match=self.match,
            vocabulary=[merged[i] for i in alive.tolist()],
            offsets=offsets,
            occ_chunk=owner.astype(np.int32),
            occ_pos=pos.astype(position_type(whole.starts)),
            starts=whole.starts,
            text=whole.text,
            fingerprint=_fingerprint(chunks),
        )

    def _merged_occurrences(
        self,
        target: np.ndarray,
        old_rank: np.ndarray,
        new: Scanned,
        new_rank: np.ndarray,
        fresh: list[int],
        width: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The occurrences of an update (:meth:`updated`), keyed by (word rank, chunk) as
        ``rank * width + chunk`` and sorted, with their positions; within a chunk they stay in text
        order. The kept chunks' occurrences are this index's, renumbered (``target``: where each of
        its chunks went); the ``new`` scan's, of the ``fresh`` chunks, are merged in."""
        moved = target[self._occ_chunk]
        keep = moved >= 0
        kept_key = np.repeat(old_rank, np.diff(self._offsets))[keep]
        kept_key *= width
        kept_key += moved[keep]
        kept_pos = self._occ_pos[keep].astype(np.uint32)
        del moved, keep
        if len(kept_key) > 1 and not bool(np.all(kept_key[1:] >= kept_key[:-1])):
            order = np.argsort(kept_key, kind="stable")  # the kept chunks changed order
            kept_key, kept_pos = kept_key[order], kept_pos[order]
        fresh_at = np.asarray(fresh, np.int64)
        new_key = new_rank[drain(new.word_ids, np.int32)] * width
        new_key += fresh_at[drain(new.chunk_ids, np.int32)]
        new_pos = drain(new.positions, np.uint32)
        order = np.argsort(new_key, kind="stable")
        new_key, new_pos = new_key[order], new_pos[order]
        # No key is in both (a chunk is kept or new), so where a new key goes is unambiguous.
        slots = np.searchsorted(kept_key, new_key)
        return np.insert(kept_key, slots, new_key), np.insert(kept_pos, slots, new_pos)

    def save(self, directory: Path) -> None:
        """Write the index into ``directory`` as ``keywords.*`` files: plain ``.npy`` arrays, the
        vocabulary as text and a JSON header (``keywords.json``, written last).

        ``.npy`` rather than ``.npz`` or pickle so that :meth:`load` can memory-map the arrays.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name in _ARRAYS:
            np.save(_array_path(directory, name), getattr(self, f"_{name}"), allow_pickle=False)
        (directory / _VOCABULARY).write_text("\n".join(self._vocab), encoding="utf-8")
        meta = {
            "format": FORMAT_VERSION,
            "match": self.match,
            "chunks": len(self),
            "vocabulary": len(self._vocab),
            "fingerprint": self._fingerprint,
        }
        # Written last: a directory without it is an interrupted save, not an index.
        (directory / _META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(
        cls, directory: Path, chunks: Sequence[Indexed], *, mmap: bool = True, root: Path | None = None
    ) -> KeywordIndex:
        """Open an index written by :meth:`save` for the same ``chunks``.

        With ``mmap`` (the default) the arrays are mapped, not read: loading takes milliseconds,
        pages come in as queries touch them, and processes serving the same index share them.
        Loading checks what costs no more than the arrays' headers (kinds, lengths, first and last
        offsets); :meth:`check` checks every element. With ``root`` (the index directory this one is
        part of), anything wrong but the format version is that index's damage, reported as such.
        """
        directory = Path(directory)
        meta, arrays, vocab_text = _read_keyword_files(directory, mmap, root)
        meta_path = directory / _META
        if not isinstance(meta, dict):
            raise _load_problem(root, f"keyword index header {meta_path} is not a JSON object", IndexNotFoundError)
        if meta.get("format") != FORMAT_VERSION or meta.get("match") not in MATCH_MODES:
            raise IndexMismatchError(
                f"keyword index in {directory} has format {meta.get('format')!r}, this version reads "
                f"{FORMAT_VERSION}; rebuild it"
            )
        if meta.get("chunks") != len(chunks) or meta.get("fingerprint") != _fingerprint(chunks):
            raise _load_problem(
                root,
                f"keyword index in {directory} was built from other chunks ({meta.get('chunks')} "
                f"indexed, {len(chunks)} given)",
                IndexMismatchError,
            )
        vocabulary = vocab_text.split("\n") if vocab_text else []
        _check_loaded_arrays(directory, arrays, vocabulary, meta, len(chunks), root)
        return cls(match=meta["match"], vocabulary=vocabulary, fingerprint=meta["fingerprint"], root=root, **arrays)

    def check(self) -> None:
        """Check every element of the arrays against the invariants searches rely on (``arag verify``).

        Sorted vocabulary; offsets rising; each word's occurrences in corpus order, in range, inside
        their chunk; chunk texts back to back with one NUL after each. Raises the damage error.
        """
        n = len(self)
        vocab = self._vocab
        if any(a >= b for a, b in itertools.pairwise(vocab)):
            self._damaged("the keyword vocabulary is not sorted")
        if len(self._offsets) > 1 and not bool(np.all(np.diff(self._offsets) >= 0)):
            self._damaged("the keyword offsets are not in order")
        if not bool(np.all(np.diff(self._starts) >= 1)) or (n and not bool(np.all(self._text[self._ends] == 0))):
            self._damaged("the keyword index's chunk texts are not where their offsets say")
        word_start = np.zeros(len(self._occ_chunk) + 1, bool)
        word_start[self._offsets[:-1]] = True  # an occurrence that begins a word's run may go back
        lengths = self._ends - self._starts[:-1]
        for a in range(0, len(self._occ_chunk), _CHECK_BLOCK):
            b = min(a + _CHECK_BLOCK, len(self._occ_chunk))
            chunk = np.asarray(self._occ_chunk[a:b], np.int64)
            if len(chunk) and (int(chunk.min()) < 0 or int(chunk.max()) >= n):
                self._damaged("a keyword occurrence points at a chunk that does not exist")
            if not bool(np.all(np.asarray(self._occ_pos[a:b], np.int64) < lengths[chunk])):
                self._damaged("a keyword occurrence lies outside its chunk")
            if a:
                chunk = np.concatenate(([int(self._occ_chunk[a - 1])], chunk))
            back = np.flatnonzero(np.diff(chunk) < 0) + max(a, 1)
            if len(back) and not bool(np.all(word_start[back])):
                self._damaged("keyword occurrences are out of corpus order")

    def _damaged(self, problem: str) -> None:
        raise IndexDamagedError(self._root if self._root is not None else "DIR", problem)

    def _chunk_ids(self, ids: np.ndarray) -> np.ndarray:
        """Chunk indices read from ``occ_chunk``, checked before they index anything."""
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= len(self)):
            self._damaged("a keyword occurrence points at a chunk that does not exist (run `arag verify`)")
        return ids

    # -- searching ----------------------------------------------------------------------------

    def ignored(self, keywords: Sequence[str] | str) -> list[str]:
        """The keywords (as given) this index ignores; see :func:`ignored_keywords`."""
        return _prepare(keywords, self.match)[1]

    def search(self, keywords: Sequence[str] | str, top_k: int) -> list[KeywordHit]:
        """The ``top_k`` best chunks with a positive score, best first, ties in corpus order."""
        terms, _ = _prepare(keywords, self.match)
        top_k = int(top_k)
        if not terms or top_k <= 0 or not len(self):
            return []
        counted = [(term, *self._counts(term)) for term in terms]
        n = len(self)
        if len(counted) == 1:
            term, chunk_ids, counts = counted[0]
            scores = counts * float(term.weight)
        elif sum(len(ids) for _, ids, _ in counted) > n // 32:
            # Many candidates: a dense score array (lazily zeroed pages) beats sorting the union.
            dense = np.zeros(n)
            for term, ids, counts in counted:
                dense[ids] += counts * term.weight  # ids are distinct within a term
            chunk_ids = np.flatnonzero(dense)
            scores = dense[chunk_ids]
        else:
            chunk_ids, inverse = np.unique(np.concatenate([ids for _, ids, _ in counted]), return_inverse=True)
            weights = np.concatenate([counts * float(term.weight) for term, _, counts in counted])
            scores = np.bincount(inverse, weights=weights, minlength=len(chunk_ids))
        best = _top(scores, top_k)  # positions in chunk order: ties go to the earlier chunk
        hits = []
        for at in best:
            chunk = chunk_ids[at]
            matched = tuple(
                term.given
                for term, ids, _ in counted
                if (i := int(np.searchsorted(ids, chunk))) < len(ids) and ids[i] == chunk
            )
            hits.append(KeywordHit(int(chunk), float(scores[at]), matched))
        return hits

    def snippets(self, chunk: Chunk, keywords: Sequence[str] | str) -> list[str]:
        """The sentences of ``chunk`` that a counted match of a keyword overlaps, in chunk order.

        A match running across a sentence boundary (rare: "1920. He") yields both sentences. A
        chunk without sentence spans counts as one sentence.
        """
        terms, _ = _prepare(keywords, self.match)
        spans = _match_spans(chunk.text, terms, self.match)
        if not spans:
            return []
        sentences = chunk.sentences or ((0, len(chunk.text)),)
        return [chunk.text[start:end] for start, end in sentences if any(s < end and start < e for s, e in spans)]

    def _counts(self, term: _Term) -> _Counts:
        if self.match == "substring":
            return self._scan_counts(term)
        if WORD.fullmatch(term.text):
            return self._prefix_counts(term.text)
        return self._phrase_counts(term.text)

    def _prefix_range(self, prefix: str) -> tuple[int, int]:
        lo = bisect_left(self._vocab, prefix)
        return lo, bisect_left(self._vocab, prefix + _PAST_PREFIX, lo)

    def _prefix_counts(self, prefix: str) -> _Counts:
        """Every word starting with ``prefix`` is one match: count occurrences per chunk."""
        lo, hi = self._prefix_range(prefix)
        seg = self._chunk_ids(self._occ_chunk[self._occ_range(lo, hi)])
        if hi - lo == 1:
            return _runs(seg)  # one word: its occurrences are already in corpus order
        if len(seg) > len(self) // 8:
            per_chunk = np.bincount(seg, minlength=len(self))
            ids = np.flatnonzero(per_chunk)
            return ids, per_chunk[ids]
        ids, counts = np.unique(seg, return_counts=True)
        return ids.astype(np.int64), counts

    def _occ_range(self, lo: int, hi: int) -> slice:
        """The occurrences of vocabulary words ``lo:hi``, refusing offsets that run backwards or past the end."""
        a, b = int(self._offsets[lo]), int(self._offsets[hi])
        if not 0 <= a <= b <= len(self._occ_chunk):
            self._damaged("the keyword offsets are out of range (run `arag verify`)")
        return slice(a, b)

    def _phrase_counts(self, keyword: str) -> _Counts:
        """Keywords with several words or punctuation, verified against the stored text.

        Every word of the keyword that is followed by a non-word character (and preceded by one,
        or by the word start the rule demands) appears in a matching text as that exact word, so
        each match starts at a known distance before an occurrence of it. The rarest word
        gives the candidates; comparing the keyword's bytes there decides. The last word may be a
        prefix (``J. Om Prak``, ``(film``); then the words it may begin anchor together.
        """
        words = list(WORD.finditer(keyword))
        last_is_prefix = words[-1].end() == len(keyword)
        best: tuple[int, int, int, int, int] | None = None  # occurrences, words, byte span in keyword
        for i, word in enumerate(words):
            lo, hi = self._prefix_range(word.group())
            if not (last_is_prefix and i == len(words) - 1):
                if lo == hi or self._vocab[lo] != word.group():
                    return _empty()
                hi = lo + 1
            count = int(self._offsets[hi] - self._offsets[lo])
            if not count:
                return _empty()
            if best is None or count < best[0]:
                shift = len(utf8(keyword[: word.start()]))
                best = (count, lo, hi, shift, shift + len(utf8(word.group())))
        assert best is not None  # the keyword has a word character, or it would be ignored
        _, lo, hi, shift, anchor_end = best
        occurrences = self._occ_range(lo, hi)
        chunk, pos = self._chunk_ids(self._occ_chunk[occurrences]), self._occ_pos[occurrences]
        if shift:
            inside = pos >= shift  # the keyword cannot begin before its chunk
            chunk, pos = chunk[inside], pos[inside]
        at = self._starts[chunk] + pos - shift  # where the keyword would begin in the text
        needle = utf8(keyword)
        if len(at) and int(at.max()) + len(needle) > len(self._text):  # would read past the end
            at = at[at + len(needle) <= len(self._text)]
        # Byte by byte, so most candidates go after a gather or two: first the letters of the other
        # words (nearest the anchor first), which discriminate better than spaces and punctuation.
        outside = [*range(anchor_end, len(needle)), *range(shift - 1, -1, -1)]
        letters = set(_word_bytes(keyword))
        for j in sorted(outside, key=lambda j: j not in letters):  # stable: keeps nearest first
            at = at[self._text[at + j] == needle[j]]
        # Every candidate begins inside its anchor's chunk, so that chunk is found from the start.
        chunk = np.searchsorted(self._starts, at, side="right") - 1
        keep = at + len(needle) <= self._ends[chunk]  # and the match must end there too
        if words[0].start() == 0 and shift > 0:  # a word start the anchor cannot vouch for
            keep &= self._at_word_start(at, at - self._starts[chunk])
        chunk, at = chunk[keep], at[keep]
        if hi - lo > 1:  # occurrences of several words: restore text order
            order = np.argsort(at, kind="stable")
            chunk, at = chunk[order], at[order]
        if _has_border(keyword) and len(at) > 1:
            chunk, at = _non_overlapping(chunk, at, len(needle))
        return _runs(chunk)

    def _at_word_start(self, at: np.ndarray, start: np.ndarray) -> np.ndarray:
        """Whether each text position begins a word (no word character right before it)."""
        before = self._text[np.maximum(at - 1, 0)]
        ok = (start == 0) | ~_ASCII_WORD[before]
        for i in np.flatnonzero((start > 0) & (before >= 0x80)):
            # A non-ASCII character ends there: decode it (its first byte is within 4 bytes back).
            end = int(at[i])
            first = end - 1
            while first > end - 4 and (self._text[first] & 0xC0) == 0x80:
                first -= 1
            char = bytes(self._text[first:end]).decode("utf-8", errors="replace")
            ok[i] = WORD.match(char) is None
        return ok

    def _scan_counts(self, term: _Term) -> _Counts:
        """Paper rule: plain substring counts, by scanning the whole stored text.

        UTF-8 is self-synchronising, so byte matches of the encoded keyword are exactly the
        character matches. NUL bytes separate chunks, so a match cannot straddle two unless the
        keyword itself holds a NUL; then each chunk is counted on its own.
        """
        needle = utf8(term.text)
        buffer = memoryview(self._text)
        if _SEP in needle:
            counts = np.array(
                [
                    bytes(buffer[s:e]).count(needle)
                    for s, e in zip(self._starts[:-1].tolist(), self._ends.tolist(), strict=True)
                ]
            )
            ids = np.flatnonzero(counts)
            return ids, counts[ids]
        at = np.fromiter((m.start() for m in re.finditer(re.escape(needle), buffer)), np.int64)
        return _runs(np.searchsorted(self._starts, at, side="right") - 1)


def keyword_files() -> list[str]:
    """The names of the files :meth:`KeywordIndex.save` writes (for checksums)."""
    return [_META, _VOCABULARY, *(_array_path(Path(), name).name for name in _ARRAYS)]


def _array_path(directory: Path, name: str) -> Path:
    return directory / f"keywords.{name}.npy"


def _load_problem(root: Path | None, message: str, standalone: type[AragError]) -> AragError:
    """What :meth:`KeywordIndex.load` raises: the damage of the index at ``root``, or for a keyword
    index loaded on its own (no ``root``) the ``standalone`` error."""
    if root is not None:
        return IndexDamagedError(root, message)
    return standalone(f"{message}; rebuild it")


def _read_keyword_files(directory: Path, mmap: bool, root: Path | None) -> tuple[Any, dict[str, np.ndarray], str]:
    """The header (parsed JSON, not yet checked), the arrays (mapped with ``mmap``) and the vocabulary
    text of the keyword index in ``directory``, opened under the index's file rule."""
    meta_path = directory / _META
    if not meta_path.is_file():
        if root is not None:
            raise IndexDamagedError(root, f"{meta_path} is missing")
        raise IndexNotFoundError(
            f"no keyword index in {directory} ({_META} missing); build it with KeywordIndex.from_chunks"
        )
    base = root if root is not None else directory  # the files are opened under the index's file rule
    try:
        meta = json.loads(read_index_bytes(base, meta_path))
        # A plain ndarray view of each mapping: the same pages, without np.memmap's Python-level
        # __getitem__ and __array_finalize__ on every slice (a fifth of a search's time at 200k passages).
        arrays = {
            name: np.asarray(load_index_array(base, _array_path(directory, name), mmap=mmap)).view(np.ndarray)
            for name in _ARRAYS
        }
        vocab_text = read_index_bytes(base, directory / _VOCABULARY).decode("utf-8")
    except IndexDamagedError as error:
        if root is not None:
            raise
        reason = str(error).split(";")[0].removeprefix("index damaged: ")
        raise IndexNotFoundError(f"{reason}; rebuild it") from None
    except (OSError, ValueError, EOFError) as error:
        detail = " ".join(str(error).split())[:200]
        message = f"keyword index in {directory} is unreadable ({detail})"
        raise _load_problem(root, message, IndexNotFoundError) from None
    return meta, arrays, vocab_text


def _check_loaded_arrays(
    directory: Path,
    arrays: dict[str, np.ndarray],
    vocabulary: list[str],
    meta: dict[str, Any],
    chunks: int,
    root: Path | None,
) -> None:
    """What loading checks of the arrays, costing no more than their headers: kinds, lengths, first
    and last offsets (:meth:`KeywordIndex.check` checks every element)."""
    offsets, starts = arrays["offsets"], arrays["starts"]
    for name, (kind, sizes) in _ARRAY_TYPES.items():
        array = arrays[name]
        if array.ndim != 1 or array.dtype.kind != kind or array.dtype.itemsize not in sizes:
            message = f"keyword array {name} in {directory} has type {array.dtype}{array.shape}"
            raise _load_problem(root, message, IndexNotFoundError)
    if (
        len(vocabulary) != meta.get("vocabulary")
        or len(offsets) != len(vocabulary) + 1
        or len(arrays["occ_chunk"]) != len(arrays["occ_pos"])
        or int(offsets[0]) != 0
        or int(offsets[-1]) != len(arrays["occ_chunk"])
        or len(starts) != chunks + 1
        or int(starts[0]) != 0
        or int(starts[-1]) != len(arrays["text"])
    ):
        raise _load_problem(root, f"keyword index in {directory} is incomplete", IndexNotFoundError)


def _empty() -> _Counts:
    return np.zeros(0, np.int64), np.zeros(0, np.int64)


def _non_overlapping(chunk: np.ndarray, at: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Keep matches left to right, dropping any that starts inside the previous kept one."""
    keep = np.zeros(len(at), bool)
    end = -1
    for i, position in enumerate(at.tolist()):
        if position >= end:
            keep[i] = True
            end = position + length
    return chunk[keep], at[keep]


_SAMPLE_STRIDE = 16


def _kth_largest(scores: np.ndarray, k: int) -> float:
    """The ``k``-th largest score (``k`` < ``len(scores)``).

    A common word scores tens of thousands of chunks, and a full partition of them is the largest
    single cost of such a search. The ``k``-th largest of every 16th score is a lower bound of the
    answer (those ``k`` scores are in the full array too), and usually few scores reach it: the
    exact partition then runs on those only. Many ties at the bound cost one extra comparison pass.
    """
    if len(scores) >= 64 * k:
        sample = scores[::_SAMPLE_STRIDE]
        if len(sample) > k:
            bound = np.partition(sample, len(sample) - k)[len(sample) - k]
            scores = scores[scores >= bound]  # at least k remain: the sample's top k
    return float(np.partition(scores, len(scores) - k)[len(scores) - k])


def _top(scores: np.ndarray, top_k: int) -> np.ndarray:
    """Positions of the ``top_k`` best scores, best first; equal scores in ascending position (the
    caller's positions are in chunk order, so the earlier chunk)."""
    if len(scores) > top_k:
        kth = _kth_largest(scores, top_k)
        above = np.flatnonzero(scores > kth)
        level = np.flatnonzero(scores == kth)[: top_k - len(above)]
        chosen = np.concatenate((above, level))
    else:
        chosen = np.arange(len(scores))
    return chosen[np.lexsort((chosen, -scores[chosen]))]
