"""What a build records about itself (``manifest.json``), and the names of a build's files.

Building writes a :class:`Manifest`; loading reads it back and checks the index against it: the
embedding model, the settings that shaped the chunks and keywords, the counts, and the checksum of
every file (:mod:`arag_graph.index.integrity`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from arag_graph.core.documents import Chunk
from arag_graph.core.errors import IndexDamagedError, IndexMismatchError
from arag_graph.core.safety import url_without_credentials
from arag_graph.index import integrity
from arag_graph.index.layout import read_index_bytes

FORMAT_VERSION = 2
"""The manifest format builds write. 2: the same fields as 1, and the seal (``manifest_checksum``) is
required; a manifest of format 1 (from before this version) loads with its seal checked when it has one.

The seal guards against damage (a flipped bit, a file cut short or mixed with another), not against
someone who can write the index: a plain checksum, it can be recomputed as easily as the seal can be
dropped and the version set back to 1. So a manifest turned into an unsealed format 1 by hand loads,
as a sealed one rewritten by hand would; what keeps a hostile writer out is who may write the index
directory, and a served run reads only indexes under the roots the operator set."""
SUPPORTED_FORMATS = (1, 2)
SEALED_FROM = 2
CHUNKS = "chunks.jsonl"
KEYWORDS_DIR = "."
# Where a build records its sentence store before creating it, so that the collection of a build
# that fails or is killed before its manifest exists can still be found and dropped in a server.
SENTENCE_STORE = "sentences.json"

KeywordMatch = Literal["word", "substring"]
HeaderStyle = Literal["path", "aragog"]
"""How contextual headers are written (:data:`arag_graph.index.text.HEADER_STYLES` describes both)."""
SentenceBackend = Literal["auto", "matrix", "chroma"]
SENTENCE_BACKENDS: tuple[str, ...] = ("auto", "matrix", "chroma")


def _url_for_file(url: str) -> str:
    """``url`` as a manifest records it: without credentials, and without a fragment (``#...``), which
    no server receives and which could only carry something private into the index."""
    return url_without_credentials(url.split("#", 1)[0])


@dataclass(frozen=True)
class Manifest:
    """What an index was built from and with; checked when it is loaded."""

    embedding_model: str
    embedding_dim: int
    chunk_size: int
    contextual_headers: bool
    keyword_match: KeywordMatch
    corpus_hash: str
    documents: int
    chunks: int
    sentences: int
    chroma: dict[str, Any]
    build_seconds: float = 0.0
    created: str = ""
    format_version: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)
    encoder: str | None = "torch"
    """The backend that ran the model (``torch``, ``onnx``, ``onnx-int8``; ``None`` for other
    ``Embeddings``). Loading uses it for queries unless told otherwise; indexes from before this
    field were built with torch."""
    header_max_chars: int = 0
    """The bound on contextual chunk headers the sentences were embedded with (0: no headers)."""
    header_style: HeaderStyle = "path"
    """How the contextual headers were written (:data:`arag_graph.index.text.HEADER_STYLES`): ``path``
    (``Title > Section: sentence``, and every index from before this field) or ``aragog``."""

    @property
    def embedded_headers(self) -> bool | HeaderStyle:
        """What the sentences were embedded behind: False (bare), or the header style."""
        return self.header_style if self.contextual_headers and self.header_max_chars > 0 else False

    embedding_prompts: dict[str, str] = field(default_factory=dict)
    """The query and document prompts the model's folder defined and the build applied
    (:func:`arag_graph.index.encoders.read_prompts`); queries are embedded with the recorded query
    prompt. Empty: none (and in indexes from before this field, which were embedded without)."""
    embedding_base_url: str | None = None
    """The OpenAI-compatible endpoint of an ``openai:NAME`` model (None: the environment's or OpenAI's).
    Never a key: keys come from the environment of whoever loads the index."""
    checksums: dict[str, str] = field(default_factory=dict)
    """SHA-256 of every file the build wrote, by name (:mod:`arag_graph.index.integrity`), the sentence
    matrix included; empty in indexes from before checksums, which loading refuses (rebuild)."""
    sentence_digest: str | None = None
    """One digest of the Chroma sentence records (chunk, position, text), for ``arag verify``; None
    for a matrix, whose rows hold vectors only (its checksum covers them)."""
    store_checksums: dict[str, str] | None = None
    """SHA-256 of every file of an embedded Chroma store, by path inside it, as the build closed it;
    checked as each process copies the store to open it (:func:`arag_graph.index.integrity.copy_verified`).
    None for a matrix or a server; an embedded store without it is refused (rebuild)."""
    profile: str = "package"
    """The profile the build was asked for (``package`` or ``paper``, :mod:`arag_graph.core.profiles`);
    indexes from before profiles were built with the package's defaults."""
    manifest_checksum: str | None = None
    """The manifest's seal over its own content (:func:`arag_graph.index.integrity.json_checksum` of
    every other field), written by :meth:`to_json`: a flipped bit in any value refuses the manifest,
    as one in a key name does (an unknown key). Required from format 2 (:data:`SEALED_FROM`), so that
    deleting it does not turn "any changed byte refuses" off; manifests of format 1 load without one."""

    def to_json(self) -> str:
        """The manifest's text, with every URL it records passed through the one rule for URLs in files
        (:func:`arag_graph.core.safety.url_without_credentials`, and no fragment): builds refuse such
        URLs already; and
        sealed by ``manifest_checksum`` over everything else it holds (checked by :meth:`from_file`)."""
        record = json.loads(json.dumps(dataclasses.asdict(self)))
        if record["embedding_base_url"]:
            record["embedding_base_url"] = _url_for_file(record["embedding_base_url"])
        if isinstance(record["chroma"].get("url"), str):
            record["chroma"] = {**record["chroma"], "url": _url_for_file(record["chroma"]["url"])}
        record.pop("manifest_checksum", None)
        record["manifest_checksum"] = integrity.json_checksum(record)
        return json.dumps(record, indent=2, sort_keys=True)

    @classmethod
    def from_file(cls, path: Path, root: Path | None = None) -> Manifest:
        """Read and type-check a manifest; anything unusable is the one-line damage error."""
        from pydantic import TypeAdapter, ValidationError

        where = root if root is not None else path.parent
        try:
            data = json.loads(read_index_bytes(where, path))
        except OSError as exc:
            raise IndexDamagedError(where, f"{path} cannot be read ({exc.strerror or exc})") from None
        except ValueError:
            raise IndexDamagedError(where, f"{path} is not JSON") from None
        if not isinstance(data, dict):
            raise IndexDamagedError(where, f"{path} is not a JSON object")
        version = data.get("format_version", FORMAT_VERSION)
        if type(version) is not int or version not in SUPPORTED_FORMATS:
            raise IndexMismatchError(
                f"{path}: index format {str(version)[:20]} is not supported by this version (reads "
                f"{' and '.join(map(str, SUPPORTED_FORMATS))}); rebuild the index with `arag index`"
            )
        # Every key must be a field: a flipped bit in a key name (``checksums``) must not turn the
        # manifest into an older one whose missing field means "unchecked".
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in data if k not in names)
        if unknown:
            raise IndexDamagedError(where, f"{path} has the field {unknown[0][:40]!r}, which no arag manifest has")
        try:
            manifest = TypeAdapter(cls).validate_python(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            field_name = ".".join(str(part) for part in first["loc"]) or "?"
            raise IndexDamagedError(where, f"{path}: field {field_name!r}: {first['msg']}") from None
        seal = data.pop("manifest_checksum", None)
        if seal is None and version >= SEALED_FROM:
            raise IndexDamagedError(
                where, f"{path} has no manifest_checksum, which every manifest of format {version} has (its seal)"
            )
        if seal is not None and seal != integrity.json_checksum(data):
            raise IndexDamagedError(where, f"{path} differs from what the build wrote (its checksum of itself fails)")
        return manifest


def corpus_hash(chunks: Iterable[Chunk]) -> str:
    """A digest of chunk ids, titles, texts and metadata: equal hashes mean the same retrievable corpus.

    Metadata counts only where a chunk has some, so that indexes without any keep their hash."""
    digest = hashlib.sha256()
    for c in chunks:
        for part in (c.id, c.title or "", c.text):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\x00")
        if c.metadata:
            digest.update(json.dumps(c.metadata, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            digest.update(b"\x01")
    return digest.hexdigest()
