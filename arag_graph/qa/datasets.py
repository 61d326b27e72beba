"""Question sets for evaluation: HotpotQA, 2WikiMultihopQA, MuSiQue and A-RAG's own format.

The A-RAG paper evaluates on the HippoRAG/LinearRAG packaging of these benchmarks, where every
set has its own field names. The loaders turn each into one :class:`Question` shape so the
runner, the evaluators and the gold-passage checks never look at raw records.

A question file is a JSON list of objects or JSON Lines (one object per line; recognised by a
``.jsonl``/``.ndjson`` suffix or by its content). Fields each format reads:

``hotpotqa``
    ``_id``, ``question``, ``answer``, ``type`` (bridge/comparison), ``level``, ``supporting_facts``
    (``[title, sentence_index]`` pairs) and ``context`` (``[title, [sentence, ...]]``). Supporting
    titles are the distinct titles of ``supporting_facts`` in order; their texts are the context
    sentences joined as they are (HotpotQA sentences carry their own leading spaces).
``2wiki``
    As ``hotpotqa``, plus ``evidences`` (subject, relation, object triples), ``answer_id`` and
    ``entity_ids``, which are kept in ``metadata``.
``musique``
    ``id``, ``question``, ``answer``, ``answer_aliases``, ``paragraphs`` (``{idx, title,
    paragraph_text, is_supporting}``), ``question_decomposition``, ``answerable``. Supporting
    passages are the paragraphs with ``is_supporting`` true; ``type`` is the id prefix ("2hop",
    "3hop1", ...).
``arag``
    A list of ``{"question", "answer"}`` objects in the LinearRAG style, where ``answer`` is a
    string, a number or a list (first element the gold answer, the rest aliases). Optional: ``id``
    or ``_id`` (else the 0-based position), ``answer_aliases``/``aliases``, ``type``/
    ``question_type``, gold titles from ``gold_titles``/``supporting_titles`` (lists of titles),
    ``supporting_facts`` (``[title, sentence_index]`` pairs or bare titles) and ``evidence`` when it
    is a list of ``[title, ...]`` pairs. Free-text ``evidence`` (GraphRAG-Bench) cannot be tied to
    a passage title, so it stays in ``metadata`` with every other unrecognised field.

Every format also accepts ``answer_aliases``/``aliases``. Without ``format`` the first record
decides: ``paragraphs`` means musique, ``evidences`` 2wiki, ``supporting_facts`` with ``context``
hotpotqa, anything else arag. Problems raise :class:`~arag_graph.core.errors.DatasetError` with one line
naming the file, the record and the fix.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from arag_graph.core.documents import Chunk
from arag_graph.core.errors import DatasetError
from arag_graph.core.jsonl import json_kind

__all__ = [
    "QUESTION_FORMATS",
    "Question",
    "gold_chunk_ids",
    "hop_count",
    "load_questions",
    "missing_support",
    "passage_maps",
]

QUESTION_FORMATS: tuple[str, ...] = ("hotpotqa", "2wiki", "musique", "arag")
"""Names accepted by ``load_questions(format=...)``."""

_JSON_LINES_SUFFIXES = frozenset({".jsonl", ".ndjson"})
_REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "hotpotqa": ("question", "answer", "supporting_facts"),
    "2wiki": ("question", "answer", "supporting_facts"),
    "musique": ("question", "answer", "paragraphs"),
    "arag": ("question", "answer"),
}
_ALIAS_FIELDS = ("answer_aliases", "aliases")
_HOP_TYPE = re.compile(r"(\d+)hop\w*", re.IGNORECASE)


def hop_count(question_type: str | None) -> int | None:
    """The number of hops a question type names (MuSiQue's "2hop", "3hop1", "4hop3"), else None.

    SRAG and CoRAG report accuracy per hop count; MuSiQue says it only in the id prefix, which the
    loader keeps as the type, so the count is read from there rather than stored twice.

    >>> hop_count("3hop2"), hop_count("bridge"), hop_count(None)
    (3, None, None)
    """
    match = _HOP_TYPE.fullmatch(question_type.strip()) if question_type else None
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class Question:
    """One evaluation question, whatever file format it came from.

    ``answers`` holds the gold answer first and then its aliases, distinct and in file order; the
    metrics take the best alias. ``supporting_texts`` is either empty or parallel to
    ``supporting_titles`` (text ``i`` is the passage titled ``supporting_titles[i]``), so a passage
    whose title is ambiguous or absent from an index can still be found by its text.
    ``metadata`` keeps format-specific fields (``level``, ``evidences``, ...); treat it as
    read-only. It takes part in equality but not in hashing.
    """

    id: str
    question: str
    answers: tuple[str, ...]
    supporting_titles: tuple[str, ...] = ()
    supporting_texts: tuple[str, ...] = ()
    type: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not self.answers:
            raise ValueError(f"question {self.id!r} has no gold answer")
        if self.supporting_texts and len(self.supporting_texts) != len(self.supporting_titles):
            raise ValueError(f"question {self.id!r}: supporting_texts must be empty or parallel to supporting_titles")

    @property
    def answer(self) -> str:
        """The gold answer (the first of ``answers``)."""
        return self.answers[0]

    @property
    def hops(self) -> int | None:
        """Hops the type names (MuSiQue's ``3hop1`` is 3); None for types such as ``bridge``."""
        return hop_count(self.type)


# --- reading files ---------------------------------------------------------------------------------


def _field_names(record: Mapping[str, Any]) -> str:
    names = list(record)
    shown = ", ".join(str(name) for name in names[:12])
    return (shown + ", ...") if len(names) > 12 else (shown or "none")


def _read_text(path: Path) -> str:
    if not path.exists():
        raise DatasetError(f"{path}: no such file; pass the path of a question file (JSON list or JSON Lines)")
    if path.is_dir():
        raise DatasetError(f"{path}: is a directory; pass the question file inside it, e.g. {path}/questions.json")
    try:
        # utf-8-sig: files saved by some editors start with a byte-order mark that json rejects.
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: is not UTF-8 text (bad byte at offset {error.start}); save it as UTF-8") from None
    except OSError as error:
        raise DatasetError(f"{path}: cannot be read ({error.strerror}); check the path and its permissions") from None


def _parse_json_lines(path: Path, text: str) -> list[tuple[str, Any]]:
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as error:
            raise DatasetError(
                f"{path}: line {number} is not valid JSON (column {error.colno}: {error.msg}); "
                "each line of a JSON Lines file must hold one question object"
            ) from None
    return records


def _looks_like_json_lines(text: str) -> bool:
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    try:
        return isinstance(json.loads(first_line), dict)
    except json.JSONDecodeError:
        return False


def _read_records(path: Path) -> list[tuple[str, Any]]:
    """The raw records of a question file, each labelled with where it sits for error messages."""
    text = _read_text(path)
    if path.suffix.lower() in _JSON_LINES_SUFFIXES:
        return _parse_json_lines(path, text)
    if not text.strip():
        raise DatasetError(f"{path}: is empty; it should hold a JSON list of question objects")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        # Several top-level values ("Extra data") are what JSON Lines looks like to json.loads.
        if error.msg == "Extra data" and _looks_like_json_lines(text):
            return _parse_json_lines(path, text)
        raise DatasetError(
            f"{path}: invalid JSON at line {error.lineno}, column {error.colno} ({error.msg}); "
            "fix the file so it is a JSON list of questions or one JSON object per line"
        ) from None
    if isinstance(data, dict) and "question" in data:
        return [("line 1", data)]  # a JSON Lines file with a single question
    if isinstance(data, dict):
        raise DatasetError(
            f"{path}: holds a JSON object with keys {_field_names(data)}, not a list of questions; "
            "pass a file whose top level is a JSON list of question objects"
        )
    if not isinstance(data, list):
        raise DatasetError(
            f"{path}: holds {json_kind(data)}, not a list of questions; pass a JSON list of question objects"
        )
    return [(f"item {index} (0-based)", record) for index, record in enumerate(data)]


# --- field parsers -----------------------------------------------------------------------------------


class _Record:
    """One raw record plus what an error message needs to point at it."""

    __slots__ = ("data", "format", "path", "where")

    def __init__(self, path: Path, where: str, data: Mapping[str, Any], format: str) -> None:
        self.path = path
        self.where = where
        self.data = data
        self.format = format

    def error(self, problem: str, fix: str) -> DatasetError:
        return DatasetError(f"{self.path}: {self.where} {problem}; {fix}")

    def text(self, name: str) -> str:
        value = self.data[name]
        if not isinstance(value, str) or not value.strip():
            shown = "an empty string" if isinstance(value, str) else json_kind(value)
            raise self.error(f"has {shown} as '{name}'", f"give every question a non-empty string '{name}'")
        return value.strip()

    def title_list(self, name: str, *, bare_titles: bool) -> list[str]:
        """Titles from a list of ``[title, ...]`` pairs (and, if allowed, plain title strings)."""
        value = self.data[name]
        if not isinstance(value, list):
            raise self.error(
                f"has {json_kind(value)} as '{name}'",
                f"make '{name}' a list of [title, sentence_index] pairs",
            )
        titles = []
        for position, entry in enumerate(value):
            if isinstance(entry, (list, tuple)) and entry and isinstance(entry[0], str):
                titles.append(entry[0])
            elif bare_titles and isinstance(entry, str):
                titles.append(entry)
            else:
                expected = (
                    "a [title, sentence_index] pair or a title" if bare_titles else "a [title, sentence_index] pair"
                )
                raise self.error(f"has {json_kind(entry)} as {name}[{position}]", f"make it {expected}")
        return titles

    def string_list(self, name: str) -> list[str]:
        value = self.data[name]
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(item, str) for item in values):
            raise self.error(f"has {json_kind(value)} as '{name}'", f"make '{name}' a list of strings")
        return values


def _answer_strings(record: _Record, name: str, value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    strings = []
    for item in values:
        # bool is an int subclass, but true/false is never a gold answer text.
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            strings.append(str(item))
        else:
            raise record.error(f"has {json_kind(item)} in '{name}'", f"make '{name}' a string or a list of strings")
    return strings


def _answers(record: _Record) -> tuple[str, ...]:
    answers = [answer.strip() for answer in _answer_strings(record, "answer", record.data["answer"])]
    if not answers or not answers[0]:
        raise record.error("has an empty 'answer'", "give every question its gold answer, or remove it from the file")
    for name in _ALIAS_FIELDS:
        if record.data.get(name) is not None:
            answers.extend(alias.strip() for alias in _answer_strings(record, name, record.data[name]))
    return tuple(dict.fromkeys(answer for answer in answers if answer))


def _question_id(record: _Record, position: int) -> str:
    for name in ("_id", "id"):
        value = record.data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
            raise record.error(f"has {json_kind(value)} as '{name}'", f"make '{name}' a non-empty string or a number")
        return str(value).strip()
    return str(position)


def _optional_str(record: _Record, *names: str) -> str | None:
    for name in names:
        value = record.data.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _pick(data: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    return {name: data[name] for name in names if name in data}


def _context_texts(data: Mapping[str, Any]) -> dict[str, str]:
    """Passage texts from a HotpotQA-style ``context``; malformed entries are skipped.

    The context only supplies the optional ``supporting_texts``, so a damaged context should not
    make an otherwise good question unusable.
    """
    texts: dict[str, str] = {}
    context = data.get("context")
    if not isinstance(context, list):
        return texts
    for entry in context:
        if (
            isinstance(entry, (list, tuple))
            and len(entry) == 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], list)
            and all(isinstance(sentence, str) for sentence in entry[1])
        ):
            texts.setdefault(entry[0], "".join(entry[1]))
    return texts


def _parallel_texts(titles: Sequence[str], texts_by_title: Mapping[str, str]) -> tuple[str, ...]:
    if titles and all(title in texts_by_title for title in titles):
        return tuple(texts_by_title[title] for title in titles)
    return ()


def _parse_hotpot_like(record: _Record, position: int) -> Question:
    data = record.data
    titles = tuple(dict.fromkeys(record.title_list("supporting_facts", bare_titles=False)))
    kept = ("level",) if record.format == "hotpotqa" else ("level", "evidences", "answer_id", "entity_ids")
    return Question(
        id=_question_id(record, position),
        question=record.text("question"),
        answers=_answers(record),
        supporting_titles=titles,
        supporting_texts=_parallel_texts(titles, _context_texts(data)),
        type=_optional_str(record, "type"),
        metadata=_pick(data, kept),
    )


def _parse_musique(record: _Record, position: int) -> Question:
    paragraphs = record.data["paragraphs"]
    if not isinstance(paragraphs, list):
        raise record.error(f"has {json_kind(paragraphs)} as 'paragraphs'", "make 'paragraphs' a list of objects")
    support: dict[tuple[str, str], None] = {}
    for index, paragraph in enumerate(paragraphs):
        if not isinstance(paragraph, dict):
            raise record.error(f"has {json_kind(paragraph)} as paragraphs[{index}]", "make every paragraph an object")
        if not paragraph.get("is_supporting"):
            continue
        title, text = paragraph.get("title"), paragraph.get("paragraph_text")
        if not isinstance(title, str) or not isinstance(text, str):
            raise record.error(
                f"has a supporting paragraphs[{index}] without a string 'title' and 'paragraph_text' "
                f"(fields found: {_field_names(paragraph)})",
                "give every supporting paragraph its title and text",
            )
        support.setdefault((title, text), None)
    question_id = _question_id(record, position)
    hops, separator, _ = question_id.partition("__")
    return Question(
        id=question_id,
        question=record.text("question"),
        answers=_answers(record),
        supporting_titles=tuple(title for title, _ in support),
        supporting_texts=tuple(text for _, text in support),
        type=hops if separator else _optional_str(record, "type"),
        metadata=_pick(record.data, ("answerable", "question_decomposition")),
    )


_ARAG_FIELDS = frozenset(
    {"id", "_id", "question", "answer", *_ALIAS_FIELDS, "type", "question_type"}
    | {"gold_titles", "supporting_titles", "supporting_facts"}
)


def _parse_arag(record: _Record, position: int) -> Question:
    data = record.data
    titles: list[str] = []
    for name in ("gold_titles", "supporting_titles"):
        if data.get(name) is not None:
            titles.extend(record.string_list(name))
    if data.get("supporting_facts") is not None:
        titles.extend(record.title_list("supporting_facts", bare_titles=True))
    metadata = {name: value for name, value in data.items() if name not in _ARAG_FIELDS}
    evidence = data.get("evidence")
    if (
        isinstance(evidence, list)
        and evidence
        and all(isinstance(entry, (list, tuple)) and entry and isinstance(entry[0], str) for entry in evidence)
    ):
        titles.extend(entry[0] for entry in evidence)
        metadata.pop("evidence")
    return Question(
        id=_question_id(record, position),
        question=record.text("question"),
        answers=_answers(record),
        supporting_titles=tuple(dict.fromkeys(titles)),
        type=_optional_str(record, "type", "question_type"),
        metadata=metadata,
    )


_PARSERS: dict[str, Callable[[_Record, int], Question]] = {
    "hotpotqa": _parse_hotpot_like,
    "2wiki": _parse_hotpot_like,
    "musique": _parse_musique,
    "arag": _parse_arag,
}


def _detect_format(record: Any) -> str:
    if not isinstance(record, dict):
        return "arag"  # the record is rejected with a precise message when it is parsed
    if "paragraphs" in record:
        return "musique"
    if "evidences" in record:
        return "2wiki"
    if "supporting_facts" in record and "context" in record:
        return "hotpotqa"
    return "arag"


def load_questions(path: str | PathLike[str], format: str | None = None) -> list[Question]:
    """Load a question file as :class:`Question` objects, in file order.

    ``format`` is one of :data:`QUESTION_FORMATS`; leave it out to detect the format from the first
    record. Question ids must be unique, because results are keyed by them.
    """
    path = Path(path)
    chosen = format.strip().lower() if format is not None else None
    if chosen is not None and chosen not in _PARSERS:
        raise DatasetError(
            f"{path}: unknown question format {format!r}; use one of {', '.join(QUESTION_FORMATS)} "
            "or leave the format out to detect it"
        )
    records = _read_records(path)
    if not records:
        raise DatasetError(f"{path}: holds no questions; add at least one {{'question': ..., 'answer': ...}} object")
    fmt = chosen or _detect_format(records[0][1])
    required = _REQUIRED_FIELDS[fmt]
    questions: list[Question] = []
    seen: dict[str, str] = {}
    for position, (where, data) in enumerate(records):
        if not isinstance(data, dict):
            raise DatasetError(
                f"{path}: {where} is {json_kind(data)}, not an object; "
                "every question must be a JSON object with 'question' and 'answer'"
            )
        record = _Record(path, where, data, fmt)
        missing = [name for name in required if name not in data]
        if missing:
            fix = f"every {fmt} question needs {', '.join(repr(name) for name in required)}"
            if chosen is not None:
                fix += "; check the format argument or leave it out to detect the format"
            raise record.error(
                f"has no {', '.join(repr(name) for name in missing)} (fields found: {_field_names(data)})",
                fix,
            )
        question = _PARSERS[fmt](record, position)
        if question.id in seen:
            raise record.error(
                f"repeats question id {question.id!r} of {seen[question.id]}",
                "give every question a unique id",
            )
        seen[question.id] = where
        questions.append(question)
    return questions


# --- gold passages in an index ---------------------------------------------------------------------


def _title_key(title: str) -> str:
    return " ".join(unicodedata.normalize("NFC", title).split())


def _text_key(text: str) -> str:
    # Passages rebuilt from sentence lists differ only in the spaces between sentences, so all
    # whitespace is dropped; two different passages are not going to collide on that.
    return "".join(unicodedata.normalize("NFC", text).split())


def _as_ids(value: str | Sequence[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


class _Lookup:
    """Exact key first, then a normalised key; the normalised index is built on the first miss."""

    def __init__(self, mapping: Mapping[str, str | Sequence[str]], normalise: Callable[[str], str]) -> None:
        self._mapping = mapping
        self._normalise = normalise
        self._normalised: dict[str, list[str]] | None = None

    def get(self, key: str) -> tuple[str, ...]:
        ids = self._mapping.get(key)
        if ids:
            return _as_ids(ids)
        if self._normalised is None:
            self._normalised = {}
            for raw_key, raw_ids in self._mapping.items():
                self._normalised.setdefault(self._normalise(raw_key), []).extend(_as_ids(raw_ids))
        return tuple(dict.fromkeys(self._normalised.get(self._normalise(key), ())))


def _resolve(question: Question, titles: _Lookup, texts: _Lookup | None) -> tuple[list[str], list[str]]:
    found: list[str] = []
    missing: list[str] = []
    for index, title in enumerate(question.supporting_titles):
        ids = titles.get(title)
        if texts is not None and question.supporting_texts:
            # The passage's own text is the more specific key: MuSiQue-style corpora hold several
            # paragraphs under one title, and only the supporting one is gold. A long document cut
            # into several chunks is not found by its whole text, so its title's chunks stand.
            by_text = texts.get(question.supporting_texts[index])
            if by_text:
                ids = tuple(i for i in by_text if i in ids) or by_text
        if ids:
            found.extend(ids)
        else:
            missing.append(title)
    return list(dict.fromkeys(found)), missing


def gold_chunk_ids(
    question: Question,
    title_to_ids: Mapping[str, Sequence[str]],
    text_to_ids: Mapping[str, Sequence[str]] | None = None,
) -> tuple[str, ...]:
    """Chunk ids of the question's supporting passages, for retrieval recall.

    Each passage is looked up by title (exactly, then after NFC and whitespace normalisation) and,
    when ``text_to_ids`` is given and the question carries the passage's text, by that text, which
    wins: several passages may share a title, and only the supporting one is gold. Passages found
    nowhere are left out; :func:`missing_support` reports them.
    """
    texts = _Lookup(text_to_ids, _text_key) if text_to_ids is not None else None
    found, _ = _resolve(question, _Lookup(title_to_ids, _title_key), texts)
    return tuple(found)


def missing_support(
    questions: Iterable[Question],
    title_to_ids: Mapping[str, Sequence[str]],
    text_to_ids: Mapping[str, Sequence[str]] | None = None,
) -> list[tuple[str, str]]:
    """``(question id, title)`` for every supporting passage the index does not contain.

    An empty list means every gold passage can be scored; anything else usually means the
    questions were paired with the wrong corpus, which a run should refuse before spending tokens.
    """
    titles = _Lookup(title_to_ids, _title_key)
    texts = _Lookup(text_to_ids, _text_key) if text_to_ids is not None else None
    return [(question.id, title) for question in questions for title in _resolve(question, titles, texts)[1]]


def passage_maps(chunks: Iterable[Chunk]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``(title_to_ids, text_to_ids)`` for :func:`gold_chunk_ids` from an index's chunks.

    A long document cut into several chunks maps its title to all of them; for the QA benchmarks
    each passage is one chunk, so its text maps to exactly that chunk.
    """
    title_to_ids: dict[str, list[str]] = {}
    text_to_ids: dict[str, list[str]] = {}
    for chunk in chunks:
        if chunk.title is not None:
            title_to_ids.setdefault(chunk.title, []).append(chunk.id)
        text_to_ids.setdefault(chunk.text, []).append(chunk.id)
    return title_to_ids, text_to_ids
