"""Loading a corpus from disk into :class:`~arag_graph.core.documents.SourceDocument` objects.

The A-RAG paper, HippoRAG and LinearRAG each ship their corpora in a slightly different JSON
shape, and users bring JSON Lines dumps or folders of notes. This module reads all of them, guesses
which one it is looking at, and turns every problem into a one-line :class:`CorpusError` that
names the file, what is wrong and how to fix it: nothing is returned unless the whole corpus
loaded.

Formats (the names ``--format`` takes):

``chunks``
    A-RAG's ``chunks.json``: a JSON list of ``"id:text"`` strings (split at the first colon) or of
    ``{"id", "text"}`` objects, optionally with ``"title"``. Every item needs an id.
``hipporag``
    HippoRAG / LinearRAG corpora: a JSON object ``{title: [sentence, ...]}`` (the passage is the
    concatenated sentences) or a JSON list of ``{"title", "text"}`` objects (MuSiQue's
    ``paragraph_text`` works too). Ids are taken from an ``id``/``_id``/``idx`` field when present.
``jsonl``
    JSON Lines, one ``{"id"?, "title"?, "text"}`` object per line.
``dir``
    A directory of ``.txt``, ``.md``, ``.html`` and ``.pdf`` files, searched recursively in path order (hidden files and
    folders skipped, and so are arag index directories inside it, or the index's own ``builds``
    when the directory is indexed into itself), one document per file: the id is the path relative
    to the directory, the title the first line of a ``.md`` file when it is a ``# heading``, else
    the file name's stem (an HTML file's ``<title>``, a PDF's title field, when they have one).
    HTML is read with Beautiful Soup (``pip install arag-graph[html]``), PDF with pypdf
    (``arag-graph[pdf]``): well-kept parsers, each an optional extra named in the error when missing.
``text``
    A single ``.txt``, ``.md``, ``.html`` or ``.pdf`` file as one document, named as in ``dir``.

Documents from anywhere else, LangChain loaders included, go straight to
:func:`arag_graph.index.build.build_index`: :func:`source_documents` takes LangChain ``Document``
objects (``page_content``, ``metadata``, ``id``) as they come.

In every object form the text may also be called ``contents``, ``content``, ``paragraph_text``,
``passage`` or ``body`` (Pyserini, BEIR and MuSiQue spellings), and the id ``_id``, ``idx``,
``docid`` or ``doc_id``. Documents whose text is empty or whitespace are skipped, since there is
nothing to retrieve in them; a corpus in which every document is empty is an error.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, cast

from arag_graph.core.documents import SourceDocument
from arag_graph.core.errors import CorpusError
from arag_graph.core.jsonl import json_kind

__all__ = ["CORPUS_FORMATS", "detect_format", "load_corpus", "source_documents"]

CORPUS_FORMATS: tuple[str, ...] = ("chunks", "hipporag", "jsonl", "dir", "text")

TEXT_FIELDS: tuple[str, ...] = ("text", "contents", "content", "paragraph_text", "passage", "body")
ID_FIELDS: tuple[str, ...] = ("id", "_id", "idx", "docid", "doc_id")
TEXT_SUFFIXES: frozenset[str] = frozenset({".txt", ".md", ".html", ".htm", ".pdf"})
# Files read through an optional parser: suffix -> (module, extra that installs it).
_PARSED: dict[str, tuple[str, str]] = {".html": ("bs4", "html"), ".htm": ("bs4", "html"), ".pdf": ("pypdf", "pdf")}
_JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})

_HEADING = re.compile(r"#[ \t]+(.+?)[ \t#]*\Z")
# The largest corpus file read (``$ARAG_MAX_CORPUS_BYTES`` changes it): a file is read whole, and
# a bound keeps a wrong path (a disk image, a log that grows while read) from exhausting memory.
MAX_CORPUS_BYTES_ENV = "ARAG_MAX_CORPUS_BYTES"
DEFAULT_MAX_CORPUS_BYTES = 8 << 30
_FIX_FORMAT = "give a JSON, JSON Lines, .txt/.md file or a directory of them"


def detect_format(path: str | os.PathLike[str]) -> str:
    """The name of the format :func:`load_corpus` would read ``path`` as.

    A ``.json`` file is recognised by its top-level value, so this parses it; call
    :func:`load_corpus` directly when the documents are wanted too.
    """
    source = Path(path)
    if source.is_dir():
        return "dir"
    _check_exists(source)
    if source.suffix.lower() in _PARSED:
        return "text"
    return _sniff(source, _read_text(source))[0]


def load_corpus(path: str | os.PathLike[str], format: str | None = None) -> list[SourceDocument]:
    """Read the corpus at ``path``; ``format`` (one of :data:`CORPUS_FORMATS`) skips detection."""
    source = Path(path)
    fmt = _check_format_name(format)
    _check_exists(source)
    if source.is_dir():
        if fmt not in (None, "dir"):
            raise CorpusError(f"{source}: is a directory, not a {fmt} file; give the corpus file, or use --format dir")
        return _finish(source, _load_dir(source), "file")
    if fmt == "dir":
        raise CorpusError(
            f"{source}: is a file, but --format dir reads a directory of .txt/.md files; "
            "give the directory or another --format"
        )
    if source.suffix.lower() in _PARSED and fmt in (None, "text"):
        return _finish(source, [_file_document(source, source.name, allow_empty=False)], "item")
    text = _read_text(source)
    value: Any = None
    if fmt is None:
        fmt, value = _sniff(source, text)
    elif fmt in ("chunks", "hipporag"):
        value = _parse_json(source, text)
    if fmt == "chunks":
        documents = list(_chunks_documents(source, value))
    elif fmt == "hipporag":
        documents = list(_hipporag_documents(source, value))
    elif fmt == "jsonl":
        documents = list(_jsonl_documents(source, text))
    else:
        documents = [_text_document(source, source.name, text)]
    return _finish(source, documents, "line" if fmt == "jsonl" else "item")


# --- reading -------------------------------------------------------------------------------------


def _check_format_name(format: str | None) -> str | None:
    name = None if format is None else format.strip().lower()
    if name is None or name == "auto":
        return None
    if name not in CORPUS_FORMATS:
        raise CorpusError(
            f"unknown corpus format {format!r}; use one of: {', '.join(CORPUS_FORMATS)} (or leave it out)"
        )
    return name


def _check_exists(source: Path) -> None:
    if not source.exists():
        raise CorpusError(f"{source}: no such file or directory; give the path of a corpus file or directory")


def _max_bytes() -> int:
    text = os.environ.get(MAX_CORPUS_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_CORPUS_BYTES
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if limit <= 0:
        raise CorpusError(
            f"${MAX_CORPUS_BYTES_ENV}={text[:40]!r} is not a size; give a number of bytes, e.g. 8589934592"
        )
    return limit


def _read_bytes(source: Path) -> bytes:
    """The bytes of a regular file of at most the size limit; devices, pipes and sockets are refused
    (``/dev/zero`` as a corpus would be read forever)."""
    limit = _max_bytes()
    try:
        if not stat.S_ISREG(source.stat().st_mode):  # before opening: opening a FIFO waits for a writer
            raise CorpusError(f"{source}: is not a regular file (a device, pipe or socket); {_FIX_FORMAT}")
        with source.open("rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise CorpusError(f"{source}: is not a regular file (a device, pipe or socket); {_FIX_FORMAT}")
            data = fh.read(limit + 1) if info.st_size <= limit else b""
            size = max(info.st_size, len(data))
    except OSError as exc:
        raise CorpusError(f"{source}: cannot be read ({exc.strerror or exc}); check the path and permissions") from None
    if size > limit:
        raise CorpusError(
            f"{source}: is larger than {limit:,} bytes; split the corpus, or raise ${MAX_CORPUS_BYTES_ENV}"
        )
    return data


def _read_text(source: Path, *, allow_empty: bool = False) -> str:
    """The file's text, refusing binary files and undecodable bytes with a readable message."""
    data = _read_bytes(source)
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        encoding = "utf-32"
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
        if b"\x00" in data[:8192]:
            raise CorpusError(f"{source}: is a binary file, not text; {_FIX_FORMAT}")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{source}: is not {encoding.upper().removesuffix('-SIG')} text (undecodable byte at "
            f"offset {exc.start}); save it as UTF-8"
        ) from None
    if not allow_empty and not text.strip():
        raise CorpusError(f"{source}: is empty; give a corpus with at least one document")
    return text


def _parse_json(source: Path, text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        raise CorpusError(
            f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "give a JSON or JSON Lines corpus"
        ) from None
    except RecursionError:
        raise CorpusError(f"{source}: JSON nested too deeply to be a corpus; {_FIX_FORMAT}") from None


class _DuplicateKeys(dict[str, Any]):
    """A JSON object that repeated a key; only fatal at the top level, where keys are titles."""

    repeated: str = ""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of repeated keys silently; a HippoRAG corpus would lose passages.
    result = dict(pairs)
    if len(result) == len(pairs):
        return result
    flagged = _DuplicateKeys(result)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            flagged.repeated = key
            break
        seen.add(key)
    return flagged


def _sniff(source: Path, text: str) -> tuple[str, Any]:
    """The format of a corpus file and, when it had to be parsed to tell, its JSON value."""
    suffix = source.suffix.lower()
    if suffix in _JSONL_SUFFIXES:
        return "jsonl", None
    if suffix in TEXT_SUFFIXES:
        return "text", None
    head = text.lstrip()[:1]
    if suffix != ".json" and head not in ("[", "{"):
        raise CorpusError(
            f"{source}: cannot tell the corpus format from the name or content; "
            f"give --format (one of: {', '.join(CORPUS_FORMATS)})"
        )
    try:
        value = _parse_json(source, text)
    except CorpusError:
        if head == "{" and _first_line_is_object(text):
            return "jsonl", None  # JSON Lines saved under a .json name
        raise
    return _json_shape(source, value), value


def _first_line_is_object(text: str) -> bool:
    line = text.lstrip().split("\n", 1)[0]
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, RecursionError):
        return False


def _json_shape(source: Path, value: Any) -> str:
    if isinstance(value, dict):
        return "hipporag"
    if isinstance(value, list):
        if not value:
            raise CorpusError(f"{source}: the JSON list is empty; give a corpus with at least one document")
        first = value[0]
        if isinstance(first, str):
            return "chunks"
        if isinstance(first, dict):
            return "chunks" if "id" in first else "hipporag"
        raise CorpusError(
            f"{source}: item 0 of the JSON list is {json_kind(first)}; give a list of passage objects "
            '({"title", "text"}) or of "id:text" strings'
        )
    raise CorpusError(
        f"{source}: the JSON value is {json_kind(value)}, not a list or object; give a list of passages, "
        "a {title: [sentence, ...]} object, or JSON Lines"
    )


# --- formats -------------------------------------------------------------------------------------


def _chunks_documents(source: Path, value: Any) -> Iterator[SourceDocument]:
    if not isinstance(value, list):
        raise CorpusError(
            f'{source}: a chunks corpus is a JSON list of "id:text" strings or {{"id", "text"}} objects, '
            f"not {json_kind(value)}; use --format hipporag for a {{title: [sentence, ...]}} object"
        )
    for index, item in enumerate(value):
        where = f"item {index}"
        if isinstance(item, str):
            key, colon, text = item.partition(":")
            if not colon or not key.strip():
                raise CorpusError(
                    f'{source}: {where} ({_show(item)}) does not start with "id:"; write chunks as '
                    '"id:text" strings, or use --format hipporag for passages without ids'
                )
            yield SourceDocument(text=text, id=key.strip())
        elif isinstance(item, dict):
            document = _object_document(source, where, item)
            if document.id is None:
                raise CorpusError(
                    f"{source}: {where} has no id (found: {_fields(item)}); give every chunk an "
                    '"id", or use --format hipporag for passages without ids'
                )
            yield document
        else:
            raise CorpusError(
                f'{source}: {where} is {json_kind(item)}; every item must be an "id:text" string or an '
                '{"id", "text"} object'
            )


def _hipporag_documents(source: Path, value: Any) -> Iterator[SourceDocument]:
    if isinstance(value, dict):
        if isinstance(value, _DuplicateKeys):
            raise CorpusError(
                f"{source}: the title {_show(value.repeated)} appears twice in the JSON object, which "
                'keeps only one; make the titles unique or use a list of {"title", "text"} objects'
            )
        for title, sentences in value.items():
            yield SourceDocument(text=_joined_sentences(source, title, sentences), title=title)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                raise CorpusError(
                    f'{source}: item {index} is {json_kind(item)}; every item must be a {{"title", "text"}} object'
                )
            yield _object_document(source, f"item {index}", item)
    else:
        raise CorpusError(
            f"{source}: a HippoRAG corpus is a {{title: [sentence, ...]}} object or a list of "
            f'{{"title", "text"}} objects, not {json_kind(value)}; give one of those or use --format jsonl'
        )


def _joined_sentences(source: Path, title: str, sentences: Any) -> str:
    if isinstance(sentences, str):
        return sentences
    if not isinstance(sentences, list):
        raise CorpusError(
            f"{source}: {_show(title)} holds {json_kind(sentences)}, not a list of sentences; "
            "give a {title: [sentence, ...]} object"
        )
    for number, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise CorpusError(
                f"{source}: sentence {number} of {_show(title)} is {json_kind(sentence)}, not a string; "
                "give every passage as a list of sentence strings"
            )
    return "".join(sentences)


def _jsonl_documents(source: Path, text: str) -> Iterator[SourceDocument]:
    # split("\n") rather than splitlines(): JSON strings may legally hold U+2028 and friends.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                f"{source}: line {number} is not valid JSON (column {exc.colno}: {exc.msg}); "
                "give one JSON object per line"
            ) from None
        except RecursionError:
            raise CorpusError(f"{source}: line {number} is nested too deeply; give one flat object per line") from None
        if not isinstance(item, dict):
            raise CorpusError(
                f'{source}: line {number} is {json_kind(item)}, not a JSON object; give one {{"id", "title", '
                '"text"} object per line'
            )
        yield _object_document(source, f"line {number}", item)


def _object_document(source: Path, where: str, item: dict[str, Any]) -> SourceDocument:
    """A document from a ``{id?, title?, text}`` object, accepting the common field spellings."""
    text_field = next((name for name in TEXT_FIELDS if name in item), None)
    if text_field is None:
        fix = f"name the text field one of: {', '.join(TEXT_FIELDS)}"
        if "question" in item:
            fix = "this looks like a question file; give the corpus file instead"
        raise CorpusError(f"{source}: {where} has no text field (found: {_fields(item)}); {fix}")
    text = item[text_field]
    if not isinstance(text, str):
        raise CorpusError(f"{source}: {where} has {json_kind(text)} as {text_field!r}; the text must be a string")
    title = item.get("title")
    if title is not None and not isinstance(title, str):
        raise CorpusError(f"{source}: {where} has {json_kind(title)} as 'title'; a title must be a string")
    id_field = next((name for name in ID_FIELDS if item.get(name) is not None), None)
    doc_id: str | None = None
    if id_field is not None:
        raw = item[id_field]
        if isinstance(raw, bool) or not isinstance(raw, (str, int)):
            raise CorpusError(
                f"{source}: {where} has {json_kind(raw)} as {id_field!r}; an id must be a string or an integer"
            )
        doc_id = str(raw).strip()
        if not doc_id:
            raise CorpusError(f"{source}: {where} has an empty {id_field!r}; give it an id or leave it out")
    return SourceDocument(text=text, id=doc_id, title=title)


def _load_dir(root: Path) -> list[SourceDocument]:
    documents = [_file_document(path, path.relative_to(root).as_posix()) for path in _text_files(root)]
    if not documents:
        raise CorpusError(
            f"{root}: no .txt, .md, .html or .pdf files in this directory; put one document per file or give a "
            "corpus file"
        )
    return documents


def _text_files(root: Path) -> list[Path]:
    from arag_graph.index.layout import BUILDS, is_arag_index

    found: list[Path] = []
    for folder, subfolders, files in os.walk(root):
        # An index inside the corpus (or the corpus indexed into itself) holds text files of its
        # own, such as the keyword vocabulary: documents would grow with every rebuild.
        own_builds = is_arag_index(Path(folder))
        subfolders[:] = [
            name
            for name in subfolders
            if not name.startswith(".")
            and not (own_builds and name == BUILDS)
            and not is_arag_index(Path(folder, name))
        ]
        found.extend(
            Path(folder, name)
            for name in files
            if not name.startswith(".") and Path(name).suffix.lower() in TEXT_SUFFIXES
        )
    return sorted(found, key=lambda path: path.relative_to(root).as_posix())


def _file_document(path: Path, doc_id: str, *, allow_empty: bool = True) -> SourceDocument:
    """One file of a directory (or a single file) as a document, parsed by its suffix."""
    parsed = _PARSED.get(path.suffix.lower())
    if parsed is None:
        return _text_document(path, doc_id, _read_text(path, allow_empty=allow_empty))
    module, extra = parsed
    try:
        __import__(module)
    except ImportError:
        raise CorpusError(
            f"{path}: reading {path.suffix.lower()} files needs the {module} package; "
            f"pip install 'arag-graph[{extra}]' (or leave such files out)"
        ) from None
    data = _read_bytes(path)
    title, text = _pdf_text(path, data) if module == "pypdf" else _html_text(data)
    if not allow_empty and not text.strip():
        raise CorpusError(f"{path}: has no text to index; give a file with at least one document")
    return SourceDocument(text=text, id=doc_id, title=title or path.stem)


_HIDDEN_ELEMENTS = frozenset({"script", "style", "template", "noscript", "head"})


class _VisibleText(HTMLParser):
    """The title and visible text of a page, read as a stream of tags: no tree is built.

    A tree (BeautifulSoup's) costs memory and time per element whatever the page shows: 200,000
    nested ``<div>`` (2.2 MB) took over a minute and hundreds of MB to index, to find no text
    (issue 38). Streaming, the work is one pass over the markup, depth costs nothing, and memory
    follows the text kept. The rules are those the tree gave: every text node a line of its own,
    scripts, styles, templates, noscript and the head (title aside) left out, comments dropped.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self._hidden: list[str] = []  # the open hidden elements, innermost last
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body" and "head" in self._hidden:  # a head left open ends where the body starts
            del self._hidden[self._hidden.index("head") :]
        if tag in _HIDDEN_ELEMENTS:
            self._hidden.append(tag)
        elif tag == "title":
            self._in_title = True

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        pass  # <br/>, <meta/>: nothing opens

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self._hidden:  # closes it and anything left open inside it
            del self._hidden[len(self._hidden) - 1 - self._hidden[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._hidden:
            self.parts.append(data)


def _html_text(data: bytes) -> tuple[str | None, str]:
    """An HTML page's title and visible text (scripts, styles and templates dropped), one block a line.

    The bytes are decoded as BeautifulSoup decodes a page (its ``UnicodeDammit``: a declared or
    sniffed encoding); the markup is then read by the standard library's streaming parser
    (:class:`_VisibleText`), in time and memory that follow the page's size, not its depth.
    """
    from bs4.dammit import UnicodeDammit

    # UnicodeDammit always decodes bytes (with replacement characters at worst): never None here.
    markup = cast(str, UnicodeDammit(data, is_html=True).unicode_markup)
    reader = _VisibleText()
    reader.feed(markup)
    reader.close()
    title = " ".join(part.strip() for part in reader.title if part.strip())  # as the tree gave it
    lines = (line.strip() for part in reader.parts for line in part.splitlines())
    return title or None, "\n".join(line for line in lines if line)


def _pdf_text(path: Path, data: bytes) -> tuple[str | None, str]:
    """A PDF's title field and the text of its pages (pypdf's extraction), pages a blank line apart."""
    import io

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise CorpusError(f"{path}: is an encrypted PDF; decrypt it first or leave it out")
        pages = [page.extract_text() or "" for page in reader.pages]
        title = reader.metadata.title if reader.metadata is not None else None
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        detail = " ".join(str(exc).split())[:80]
        raise CorpusError(f"{path}: is not a readable PDF ({detail}); repair or remove it") from None
    return (title.strip() if isinstance(title, str) and title.strip() else None), "\n\n".join(
        p.strip() for p in pages if p.strip()
    )


def source_documents(items: Iterable[Any]) -> list[SourceDocument]:
    """``items`` as :class:`SourceDocument`: they pass as they are, LangChain ``Document`` objects
    (from any loader) become one each, ``page_content`` its text, ``id`` its id and ``metadata`` kept
    (its ``title``, when a string, is the title too). Metadata must be JSON, since the index stores
    it: anything else is a one-line error naming the key."""
    from langchain_core.documents import Document as LangChainDocument

    out: list[SourceDocument] = []
    for number, item in enumerate(items):
        if isinstance(item, SourceDocument):
            document = item
        elif isinstance(item, LangChainDocument):
            metadata = dict(item.metadata or {})
            title = metadata.get("title")
            document = SourceDocument(
                text=item.page_content,
                id=item.id if item.id else None,
                title=title if isinstance(title, str) and title.strip() else None,
                metadata=metadata or None,
            )
        else:
            raise CorpusError(
                f"document {number} is a {type(item).__name__}; give LangChain Documents, SourceDocuments, "
                "chunks or a corpus path"
            )
        if document.metadata:
            _check_metadata(number, document)
        out.append(document)
    return out


def _check_metadata(number: int, document: SourceDocument) -> None:
    assert document.metadata is not None
    for key, value in document.metadata.items():
        try:
            json.dumps({key: value}, allow_nan=False)
        except (TypeError, ValueError):
            label = f"document {_show(document.id)}" if document.id is not None else f"document {number}"
            raise CorpusError(
                f"{label}: metadata {_show(str(key), 40)} holds a {type(value).__name__}, which the index cannot "
                "store; give JSON values (text, numbers, booleans, lists, objects)"
            ) from None


def _text_document(path: Path, doc_id: str, text: str) -> SourceDocument:
    title = path.stem
    if path.suffix.lower() == ".md":
        first = text.lstrip().partition("\n")[0].strip()
        heading = _HEADING.match(first)
        if heading:
            title = heading.group(1)
    return SourceDocument(text=text, id=doc_id, title=title)


# --- checks and messages -------------------------------------------------------------------------


def _finish(source: Path, documents: list[SourceDocument], unit: str) -> list[SourceDocument]:
    """Drop empty documents, and refuse a corpus with nothing left or with an id used twice."""
    kept = [document for document in documents if document.text.strip()]
    if not kept:
        raise CorpusError(
            f"{source}: none of its {len(documents)} {unit}{'s' if len(documents) != 1 else ''} has any "
            "text; give a corpus with at least one non-empty document"
        )
    for number, document in enumerate(kept):
        _check_unicode(source, number, document)
    seen: set[str] = set()
    for document in kept:
        if document.id is None:
            continue
        if document.id in seen:
            raise CorpusError(f"{source}: the id {_show(document.id)} is used twice; give every document a unique id")
        seen.add(document.id)
    return kept


def _check_unicode(source: Path, number: int, document: SourceDocument) -> None:
    """Refuse text that cannot be encoded: a JSON escape of half a surrogate pair (``\\ud800``).

    JSON allows such escapes but they are not Unicode characters; the encoder, Chroma and the
    token counter all fail on them. Invalid bytes in the file are refused the same way (see
    :func:`_read_text`), so this keeps one rule: a corpus is valid Unicode text.
    """
    for name, value in (("text", document.text), ("title", document.title), ("id", document.id)):
        if value is None or value.isascii():
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            label = f"id {_show(document.id)}" if document.id is not None else f"document {number}"
            if document.title is not None and name != "title":
                label += f", title {_show(document.title)}"
            raise CorpusError(
                f"{source}: {label} has an unpaired surrogate ({value[exc.start]!r}) at character {exc.start} of "
                f"its {name}, which is not valid Unicode; fix or remove that escape"
            ) from None


def _fields(item: dict[str, Any]) -> str:
    names = [_show(name, 30) for name in list(item)[:8]]
    if len(item) > 8:
        names.append("...")
    return ", ".join(names) or "none"


def _show(value: str, limit: int = 60) -> str:
    """``value`` quoted and shortened, so one bad item cannot flood the one-line message."""
    return repr(value if len(value) <= limit else value[: limit - 3] + "...")
