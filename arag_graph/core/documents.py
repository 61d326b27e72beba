"""The units of text the index knows: source documents, the chunks cut from them, and search hits.

A-RAG's hierarchy has three levels: chunks (what `chunk_read` returns), sentences (what
`semantic_search` embeds and what snippets are made of) and the raw text that
`keyword_search` matches. A chunk therefore carries its sentence spans, computed once at ingestion,
so every tool sees the same sentences.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_CONTEXTUAL_HEADERS = True
"""Indexes embed each sentence behind its contextual header (``title > section: sentence``) unless told
not to, as the A-RAG paper's code and ARAGOG's CCH do. Measured (bench/results/quality.md):
semantic_search recall@5 is unchanged on HotpotQA-100 (0.765) and on the 2Wiki lookup questions
(0.96), and issue 14 reports 0.55 → 0.59 on its held-out multi-hop set; BM25 and keyword_search,
which match the title too, gain 6 and 10.5 points on HotpotQA-100 and lose nothing on 2Wiki. The cost:
top-5-sentence retrievals (SWR, AMR) lose 4.5 points on HotpotQA-100, as a shared title pulls several
sentences of one chunk into the top 5; the ARAGOG grid keeps its base index bare for that reason."""
HEADER_MAX_CHARS = 128
"""Longest contextual chunk header, in characters (about 30 word pieces). All-MiniLM-L6-v2 reads
256 word pieces and HotpotQA/2Wiki sentences average about 30, so a header this long leaves the
sentence its room while covering every title of both corpora (the longest 2Wiki title is 95
characters; 99% are under 50). Longer ones (deep Markdown section paths) are cut at a word, so a
header never outweighs the sentence it introduces."""


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One document of a corpus as loaded from disk, before chunking.

    ``id`` is the identifier the corpus gave (None when it gave none); ``title`` is the passage
    or file title when there is one. ``metadata`` is what a LangChain loader (or the caller) said
    about the document (``source``, ``page``, ...): kept with its chunks, returned with search hits
    and usable as a search filter, so it must be JSON (checked when the index is built).
    """

    text: str
    id: str | None = None
    title: str | None = None
    metadata: dict[str, Any] | None = field(default=None, hash=False)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A retrievable unit: about ``chunk_size`` tokens of one document, cut on sentence boundaries.

    ``sentences`` are ``(start, end)`` character offsets into ``text``; every ``text[start:end]`` is
    one sentence. ``prev_id`` and ``next_id`` are the neighbouring chunks in corpus order, so that an
    agent can read around a chunk.
    """

    id: str
    text: str
    title: str | None = None
    prev_id: str | None = None
    next_id: str | None = None
    sentences: tuple[tuple[int, int], ...] = field(default=())
    metadata: dict[str, Any] | None = field(default=None, hash=False)
    """The metadata of the chunk's document (None when it had none)."""

    def sentence_texts(self) -> list[str]:
        return [self.text[start:end] for start, end in self.sentences]


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked chunk from a search, with the sentences that made it match."""

    chunk_id: str
    score: float
    snippets: tuple[str, ...]
    title: str | None = None
    positions: tuple[int, ...] = ()
    """Positions of the snippet sentences in the chunk (semantic hits), for sentence windows."""
    metadata: dict[str, Any] | None = field(default=None, hash=False)
    """The metadata of the chunk's document (None when it had none)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "chunk_id": self.chunk_id,
            "score": self.score,
            "title": self.title,
            "snippets": list(self.snippets),
        }
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out


MetadataFilter = Mapping[str, Any]
"""A filter on a chunk's document metadata, in Chroma's ``where`` dialect (so a filter written for
Chroma or LangChain's Chroma store works here unchanged):

- ``{"source": "a.pdf"}``: equality (a list or tuple value allows any of its items);
- ``{"page": {"$gt": 3}}``: an operator, one of ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
  ``$lte`` (numbers), ``$in`` and ``$nin`` (a list of values);
- ``{"$and": [f1, f2, ...]}`` and ``{"$or": [...]}``: filters combined; several keys in one filter
  must all match, as ``$and``.

A chunk whose metadata lacks the key never matches (``$ne`` and ``$nin`` included, as in Chroma);
a comparison between a number and a string is no match, not an error."""

_COMPARE = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
_OPERATORS = ("$eq", "$ne", *_COMPARE, "$in", "$nin")
_SCALAR = (str, int, float, bool)
_EXAMPLE = "e.g. {'source': 'a.pdf'}, {'page': {'$gte': 3}} or {'$or': [{'source': 'a.pdf'}, {'page': 1}]}"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _matches_operator(operator: str, have: Any, value: Any) -> bool:
    if operator == "$eq":
        return bool(have == value)
    if operator == "$ne":
        return bool(have != value)
    if operator == "$in":
        return have in value
    if operator == "$nin":
        return have not in value
    return _number(have) and _COMPARE[operator](have, value)


def matches_filter(metadata: Mapping[str, Any] | None, wanted: MetadataFilter | None) -> bool:
    """Whether a chunk with ``metadata`` passes the filter ``wanted`` (no filter: every chunk).

    ``wanted`` is a filter :func:`check_filter` accepted (see :data:`MetadataFilter`)."""
    if not wanted:
        return True
    metadata = metadata or {}
    for key, value in wanted.items():
        if key == "$and":
            if not all(matches_filter(metadata, part) for part in value):
                return False
        elif key == "$or":
            if not any(matches_filter(metadata, part) for part in value):
                return False
        elif key not in metadata:
            return False
        elif isinstance(value, Mapping):
            if not all(_matches_operator(op, metadata[key], v) for op, v in value.items()):
                return False
        elif isinstance(value, (list, tuple)):
            if metadata[key] not in value:
                return False
        elif metadata[key] != value:
            return False
    return True


def _filter_problem(wanted: Any, where: str) -> str | None:
    """What is wrong with the filter ``wanted`` (``where`` names it in the message), or None."""
    if not isinstance(wanted, Mapping) or not all(isinstance(k, str) for k in wanted):
        return f"{where} must map metadata keys to values; got {type(wanted).__name__}"
    if not wanted and where != "the filter":
        return f"{where} is empty"
    for key, value in wanted.items():
        if key in ("$and", "$or"):
            if not isinstance(value, (list, tuple)) or not value:
                return f"{key} takes a non-empty list of filters; got {type(value).__name__}"
            for n, part in enumerate(value):
                if problem := _filter_problem(part, f"{key}[{n}]"):
                    return problem
        elif key.startswith("$"):
            return f"{key} is not a filter operator here; combine filters with $and or $or"
        elif isinstance(value, Mapping):
            if not value:
                return f"{key!r} has an empty operator expression"
            for operator, operand in value.items():
                if operator not in _OPERATORS:
                    return f"{key!r} uses {operator!r}; the operators are {', '.join(_OPERATORS)}"
                if operator in ("$in", "$nin"):
                    if not isinstance(operand, (list, tuple)) or not all(isinstance(v, _SCALAR) for v in operand):
                        return f"{key!r}: {operator} takes a list of values; got {type(operand).__name__}"
                elif operator in _COMPARE:
                    if not _number(operand):
                        return f"{key!r}: {operator} compares numbers; got {type(operand).__name__}"
                elif not isinstance(operand, _SCALAR):
                    return f"{key!r}: {operator} takes a string, number or boolean; got {type(operand).__name__}"
        elif isinstance(value, (list, tuple)):
            if not all(isinstance(v, _SCALAR) for v in value):
                return f"{key!r}: a list of allowed values holds strings, numbers or booleans only"
        elif not isinstance(value, _SCALAR) and value is not None:
            return f"{key!r}: a value to match is a string, number or boolean; got {type(value).__name__}"
    return None


def check_filter(wanted: Any) -> MetadataFilter | None:
    """``wanted`` as a metadata filter (:data:`MetadataFilter`), or the one-line error a caller (or
    a model) can act on: what is wrong and an example of a filter that works."""
    from arag_graph.core.errors import AragError

    if wanted is None:
        return None
    problem = _filter_problem(wanted, "the filter")
    if problem:
        raise AragError(f"metadata_filter: {problem} ({_EXAMPLE})")
    return wanted


def bounded_header(header: str, limit: int) -> str:
    """``header`` cut to ``limit`` characters at a word boundary (contextual chunk headers)."""
    if len(header) <= limit:
        return header
    cut = header[:limit]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" >:")


def chunk_header(chunk: Chunk, limit: int = HEADER_MAX_CHARS) -> str:
    """A chunk's header for chunk-level matching (BM25): its title, bounded like sentence headers."""
    return bounded_header(chunk.title or "", limit)


def window_text(chunk: Chunk, positions: Iterable[int], window: int) -> str:
    """The sentences at ``positions``, each centred in a window of ``window`` sentences; runs joined by " ... ".

    ARAGOG's definition: the window counts sentences in total, ``start = pos - window // 2`` and
    ``end = pos + window // 2 + 1``, so a window of 3 is the sentence with one neighbour on each side
    and a window of 1 the sentence alone. Windows that meet or overlap are merged.
    """
    half = max(0, window) // 2
    keep: set[int] = set()
    for p in positions:
        keep.update(range(max(0, p - half), min(len(chunk.sentences), p + half + 1)))
    runs: list[list[int]] = []
    for p in sorted(keep):
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return " ... ".join(chunk.text[chunk.sentences[r[0]][0] : chunk.sentences[r[-1]][1]] for r in runs)
