"""Content checksums of an index, so that a damaged index fails instead of answering wrongly.

A build records in its manifest the SHA-256 of every file it wrote (chunks, keyword index,
sentence-store record) and, since Chroma's own files change when it opens them and cannot be
checksummed, the sentence store's content: one digest of every sentence's chunk ID, position and
text, in order, and a fingerprint file of its vectors (each vector's length and its projection on a
fixed direction: Chroma returns vectors a rounding away from what it was given, so they are
compared within a tolerance rather than hashed). Loading an index checks what it can afford on every load (see
:func:`arag_graph.index.load.load_index` and bench/results/integrity.md for the costs); ``arag verify``
checks everything: every file's checksum, the keyword arrays' invariants and every sentence record.

Every failure is the one-line :class:`~arag_graph.core.errors.IndexDamagedError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from arag_graph.core.errors import IndexDamagedError

if TYPE_CHECKING:
    from arag_graph.core.documents import Chunk
    from arag_graph.index.chroma import SentenceStore

ALGORITHM = "sha256"
_BLOCK = 1 << 20
# Sentences fetched from Chroma per request by a full check (well under its maximum batch).
_VERIFY_BATCH = 2000
VECTOR_FINGERPRINT = "sentences.fingerprint.npy"
# How far a stored vector's fingerprint may drift (float32 round trips) before it counts as changed.
_VECTOR_TOLERANCE = 1e-3


def new_digest() -> Any:
    return hashlib.new(ALGORITHM)


def tagged(digest: Any) -> str:
    """``sha256:<hex>``: the algorithm travels with the value, so it can change later."""
    return f"{ALGORITHM}:{digest.hexdigest()}"


def file_checksum(path: Path) -> str:
    digest = new_digest()
    with path.open("rb") as fh:
        while block := fh.read(_BLOCK):
            digest.update(block)
    return tagged(digest)


def checksums(directory: Path, names: Iterable[str]) -> dict[str, str]:
    """Checksums of the named files of a build, for its manifest."""
    return {name: file_checksum(directory / name) for name in sorted(names)}


def check_file(root: Path, directory: Path, name: str, expected: str) -> None:
    """Raise the one-line damage error when ``name`` is missing or differs from ``expected``."""
    path = directory / name
    try:
        got = file_checksum(path)
    except OSError as exc:
        raise IndexDamagedError(root, f"{path} cannot be read ({exc.strerror or exc})") from None
    if got != expected:
        raise IndexDamagedError(root, f"{path} differs from what the build wrote (checksum mismatch)")


def check_recorded(root: Path, directory: Path, recorded: dict[str, str], got: str, name: str) -> None:
    """Compare a checksum computed while reading ``name`` with the recorded one (if recorded)."""
    expected = recorded.get(name)
    if expected is not None and got != expected:
        raise IndexDamagedError(root, f"{directory / name} differs from what the build wrote (checksum mismatch)")


# ---------------------------------------------------------------------------------------------
# The sentence store


def expected_sentences(chunks: Sequence[Chunk]) -> Iterable[tuple[str, int, str]]:
    """``(chunk_id, position, sentence)`` of every sentence, in the order the build stores them."""
    for chunk in chunks:
        for position, (start, end) in enumerate(chunk.sentences):
            yield chunk.id, position, chunk.text[start:end]


def _update(digest: Any, chunk_id: str, position: int, sentence: str) -> None:
    for part in (chunk_id, str(position), sentence):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")


def sentence_digest(chunks: Sequence[Chunk]) -> str:
    """One digest of what the sentence records say: every record's chunk, position and text, in order."""
    digest = new_digest()
    for chunk_id, position, sentence in expected_sentences(chunks):
        _update(digest, chunk_id, position, sentence)
    return tagged(digest)


def vector_fingerprint(vectors: np.ndarray) -> np.ndarray:
    """Per vector: its length and its projection on a fixed unit direction (float32, shape ``(n, 2)``)."""
    vectors = np.asarray(vectors, np.float32)
    if vectors.ndim != 2 or not vectors.size:
        return np.zeros((len(vectors), 2), np.float32)
    direction = np.random.default_rng(20260203).standard_normal(vectors.shape[1]).astype(np.float32)
    direction /= np.linalg.norm(direction)
    return np.stack([np.linalg.norm(vectors, axis=1), vectors @ direction], axis=1).astype(np.float32)


def verify_sentences(
    root: Path, store: SentenceStore, chunks: Sequence[Chunk], expected: str | None, fingerprint: np.ndarray | None
) -> int:
    """Read every sentence record back and compare it with the chunks, the digest and the fingerprint.

    Record ``i`` must be the ``i``-th sentence (its chunk ID, position and text), which catches
    records pointing at the wrong chunk, and its vector must match the build's fingerprint.
    Returns the number of records.
    """
    wanted = list(expected_sentences(chunks))
    count = store.count()
    if count != len(wanted):
        raise IndexDamagedError(root, f"the sentence store holds {count} sentences, the chunks have {len(wanted)}")
    if fingerprint is not None and fingerprint.shape != (len(wanted), 2):
        raise IndexDamagedError(root, f"the vector fingerprint has shape {fingerprint.shape}, not ({len(wanted)}, 2)")
    digest = new_digest()
    for start in range(0, len(wanted), _VERIFY_BATCH):
        ids = [str(i) for i in range(start, min(start + _VERIFY_BATCH, len(wanted)))]
        records = store.records(ids)
        for i, record_id in enumerate(ids, start):
            record = records.get(record_id)
            if record is None:
                raise IndexDamagedError(root, f"sentence record {record_id} is missing from the sentence store")
            chunk_id, position, sentence = wanted[i]
            metadata, document, vector = record
            if metadata.get("chunk_id") != chunk_id or metadata.get("position") != position or document != sentence:
                raise IndexDamagedError(
                    root,
                    f"sentence record {record_id} points at chunk {str(metadata.get('chunk_id'))[:40]!r} "
                    f"position {metadata.get('position')!r}, not at sentence {position} of chunk {chunk_id[:40]!r}",
                )
            _update(digest, chunk_id, position, sentence)
            if fingerprint is not None and not np.allclose(
                vector_fingerprint(vector[None, :])[0], fingerprint[i], rtol=_VECTOR_TOLERANCE, atol=_VECTOR_TOLERANCE
            ):
                raise IndexDamagedError(
                    root, f"the vector of sentence record {record_id} differs from what the build stored"
                )
    if expected is not None and tagged(digest) != expected:
        raise IndexDamagedError(root, "the sentence records differ from what the build stored (checksum mismatch)")
    return count
