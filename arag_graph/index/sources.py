"""Which documents an index holds: each document's id, content hash and chunks (``documents.jsonl``).

An index that changes without a rebuild has to know, per document, what to replace: the content
hash tells a changed document from an unchanged one (``arag index SOURCE --update``), and the
chunk ids tell which chunks a deleted or changed document leaves behind. Every build writes this
table beside its chunks; the manifest checksums it like every other file. Builds from before the
table derive it from their chunk ids (a document's chunks are ``<id>`` or ``<id>#<n>``), with no
hash, so their first update re-chunks every document it is given (the sentence vectors of
unchanged text are still reused).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arag_graph.core.documents import Chunk, SourceDocument
from arag_graph.core.errors import IndexDamagedError
from arag_graph.index import integrity
from arag_graph.index.layout import open_index_file

DOCUMENTS = "documents.jsonl"


@dataclass(frozen=True)
class DocumentEntry:
    """One document of an index: its id, the hash of its content (None when unknown) and its chunks."""

    id: str
    hash: str | None
    chunks: tuple[str, ...]


def document_hash(document: SourceDocument) -> str:
    """The hash of what a document contributes to an index: text, title and metadata."""
    digest = hashlib.sha256()
    for part in (document.text, document.title or "", json.dumps(document.metadata or {}, sort_keys=True)):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return f"sha256:{digest.hexdigest()}"


def document_id(document: SourceDocument, position: int) -> str:
    """The id chunking gives a document: its own, or its position in the corpus when it has none."""
    return document.id if document.id is not None else str(position)


def table_for(documents: Sequence[SourceDocument] | None, chunks: Sequence[Chunk]) -> list[DocumentEntry]:
    """The table of a corpus: each non-empty document with the chunks chunking cut from it.

    Without the documents (an index built from ready-made chunks) each run of chunks named
    ``<id>`` or ``<id>#<n>`` is one document of unknown hash.
    """
    if documents is None:
        return _derived(chunks)
    entries: list[DocumentEntry] = []
    at = 0
    for position, document in enumerate(documents):
        if not document.text.strip():
            continue
        base = document_id(document, position)
        taken: list[str] = []
        if at < len(chunks) and chunks[at].id == base:
            taken.append(base)
        else:
            while at + len(taken) < len(chunks) and chunks[at + len(taken)].id == f"{base}#{len(taken)}":
                taken.append(chunks[at + len(taken)].id)
        at += len(taken)
        entries.append(DocumentEntry(base, document_hash(document), tuple(taken)))
    if at != len(chunks):  # chunking cut these chunks itself; never out of step unless it changed
        return _derived(chunks)
    return entries


def _derived(chunks: Sequence[Chunk]) -> list[DocumentEntry]:
    entries: list[DocumentEntry] = []
    for chunk in chunks:
        base, _, piece = chunk.id.rpartition("#")
        if base and piece.isdigit() and entries and entries[-1].id == base:
            entries[-1] = DocumentEntry(base, None, (*entries[-1].chunks, chunk.id))
        elif base and piece == "0":
            entries.append(DocumentEntry(base, None, (chunk.id,)))
        else:
            entries.append(DocumentEntry(chunk.id, None, (chunk.id,)))
    return entries


def save_table(entries: Sequence[DocumentEntry], path: Path) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for entry in entries:
            fh.write(json.dumps({"id": entry.id, "hash": entry.hash, "chunks": list(entry.chunks)}, ensure_ascii=False))
            fh.write("\n")


def load_table(root: Path, build_dir: Path, recorded: dict[str, str], chunks: Sequence[Chunk]) -> list[DocumentEntry]:
    """The table of a build, checked against the manifest's checksum while it is read (a build from
    before the table: derived from its chunks). A table that does not name exactly the build's
    chunks is damage."""
    expected = recorded.get(DOCUMENTS)
    if expected is None:
        return _derived(chunks)
    digest = integrity.new_digest()
    entries: list[DocumentEntry] = []
    path = build_dir / DOCUMENTS
    try:
        with open_index_file(root, path) as fh:
            for number, line in enumerate(fh, 1):
                digest.update(line)
                try:
                    record = json.loads(line)
                    entry = DocumentEntry(str(record["id"]), record["hash"], tuple(str(c) for c in record["chunks"]))
                except (ValueError, KeyError, TypeError):
                    raise IndexDamagedError(root, f"{path}: line {number} is not a document record") from None
                entries.append(entry)
    except OSError as exc:
        raise IndexDamagedError(root, f"{path} cannot be read ({exc.strerror or exc})") from None
    integrity.check_recorded(root, build_dir, recorded, integrity.tagged(digest), DOCUMENTS)
    if [c for e in entries for c in e.chunks] != [c.id for c in chunks]:
        raise IndexDamagedError(root, f"{path} does not name the chunks of its build")
    return entries
