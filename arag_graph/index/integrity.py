"""Content checksums of an index, so that a damaged index fails instead of answering wrongly.

A build records in its manifest the SHA-256 of every file it wrote (chunks, keyword index,
sentence-store record, the sentence matrix) and, for an embedded Chroma store, of every file of
the store as the build closed it (:func:`tree_checksums`). Chroma rewrites its files whenever it
opens them (its database, and its HNSW files as it replays its log), so a store is never opened
where the build left it: each process opens a private copy, and :func:`copy_verified` checks every
byte against the build's checksums while it copies, before Chroma reads any of it. A flipped bit
anywhere in the store is then the one-line damage error instead of an unrelated answer or a
crashed process (a damaged ``header.bin`` made hnswlib read out of bounds). The store's content
has two more records, for ``arag verify`` and for stores in a Chroma server, whose files arag
never sees: one digest of every sentence's chunk ID, position and text, in order, and a
fingerprint file of its vectors (each vector's length and its projection on a fixed direction:
Chroma returns vectors a rounding away from what it was given, so they are compared within a
tolerance rather than hashed). Loading an index checks what it can afford on every load (see
:func:`arag_graph.index.load.load_index` and bench/results/integrity.md for the costs); ``arag verify``
checks everything: every file's checksum, the keyword arrays' invariants and every sentence record.

Every failure is the one-line :class:`~arag_graph.core.errors.IndexDamagedError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from arag_graph.core.errors import AragError, IndexDamagedError
from arag_graph.index.layout import open_index_file

if TYPE_CHECKING:
    from arag_graph.core.documents import Chunk

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


def json_checksum(data: Mapping[str, Any]) -> str:
    """The checksum of a JSON object's content (keys sorted, no whitespace): a manifest's seal over
    itself, which any changed value fails however the file is laid out."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return tagged(hashlib.new(ALGORITHM, text.encode("ascii")))


def file_checksum(path: Path, root: Path | None = None) -> str:
    """The checksum of ``path``, a file of the index at ``root`` (default: its directory), opened
    under the file rule (:func:`arag_graph.index.layout.open_inside`)."""
    digest = new_digest()
    with open_index_file(root if root is not None else path.parent, path) as fh:
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
        got = file_checksum(path, root)
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
# The files of an embedded Chroma store


def tree_checksums(directory: Path) -> dict[str, str]:
    """Checksums of every file under ``directory`` by relative POSIX path (an embedded Chroma store,
    taken after the build closed it, when its files no longer change)."""
    found: dict[str, str] = {}
    for folder, subfolders, files in os.walk(directory):
        subfolders.sort()
        for name in sorted(files):
            path = Path(folder, name)
            found[path.relative_to(directory).as_posix()] = file_checksum(path)
    return found


def _copy_failure(source: Path, target: Path, exc: OSError) -> AragError:
    reason = exc.strerror or type(exc).__name__
    return AragError(
        f"{source}: the sentence store could not be copied to {target.parent} ({reason}); Chroma opens a "
        "private copy of it in each process: give TMPDIR room for it (or point TMPDIR elsewhere)"
    )


def copy_verified(root: Path, source: Path, target: Path, recorded: Mapping[str, str]) -> None:
    """Copy the store ``source`` to the new directory ``target``, checking every byte on the way.

    Every file must be one the build recorded, a regular file (never a symbolic link), and hash to
    its recorded checksum; every recorded file must be there. Each file is read once: the copy is
    what Chroma opens (it writes to what it opens), and the read that makes it is the check, so the
    check costs a hash on top of the copy. A file that cannot be read or differs is the damage
    error; a copy that cannot be written (a full or read-only ``TMPDIR``) is one line naming that.
    """
    seen: set[str] = set()
    try:
        walked = list(os.walk(source, onerror=_raise))
    except OSError as exc:
        raise IndexDamagedError(root, f"the sentence store {source} cannot be read ({exc.strerror or exc})") from None
    for folder, _, files in walked:
        here = Path(folder)
        relative = here.relative_to(source)
        try:
            (target / relative).mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise _copy_failure(source, target, exc) from None
        for name in sorted(files):
            key = (relative / name).as_posix()
            path = here / name
            expected = recorded.get(key)
            if expected is None:
                raise IndexDamagedError(root, f"{path} is not a file the build wrote into the sentence store")
            seen.add(key)
            _copy_file(root, path, target / relative / name, expected, source, target)
        for name in os.listdir(here):  # os.walk lists links to directories as directories
            if stat.S_ISLNK((here / name).lstat().st_mode) and name not in files:
                raise IndexDamagedError(root, f"{here / name} is a symbolic link, which arag does not follow")
    missing = sorted(set(recorded) - seen)
    if missing:
        raise IndexDamagedError(root, f"the sentence store {source} lacks {missing[0]}, which the build wrote")


def _raise(exc: OSError) -> None:
    raise exc


def _copy_file(root: Path, path: Path, into: Path, expected: str, source: Path, target: Path) -> None:
    """Copy one file of the store, hashing what is read (errors reading: damage; writing: ``TMPDIR``)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(path.lstat().st_mode):
                raise IndexDamagedError(root, f"{path} is a symbolic link, which arag does not follow") from None
        raise IndexDamagedError(root, f"{path} cannot be read ({exc.strerror or exc})") from None
    digest = new_digest()
    with open(fd, "rb") as src:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise IndexDamagedError(root, f"{path} is not a regular file")
        try:
            with open(into, "xb") as dst:
                while block := _read(root, path, src):
                    digest.update(block)
                    dst.write(block)
        except OSError as exc:  # only the copy's side: read errors are damage errors already
            raise _copy_failure(source, target, exc) from None
    if tagged(digest) != expected:
        raise IndexDamagedError(
            root, f"the sentence store file {path} differs from what the build wrote (checksum mismatch)"
        )


def _read(root: Path, path: Path, src: Any) -> bytes:
    try:
        return src.read(_BLOCK)
    except OSError as exc:
        raise IndexDamagedError(root, f"{path} cannot be read ({exc.strerror or exc})") from None


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
    # A damaged vector (a flipped exponent bit) overflows float32 here: the fingerprint becomes inf
    # or NaN and fails the comparison quietly, instead of numpy printing a warning beside the error.
    with np.errstate(all="ignore"):
        return np.stack([np.linalg.norm(vectors, axis=1), vectors @ direction], axis=1).astype(np.float32)


def _close(got: np.ndarray, expected: np.ndarray) -> bool:
    """Fingerprints equal within float32 round trips; NaN or infinite ones (damage) never are."""
    with np.errstate(all="ignore"):
        return bool(np.allclose(got, expected, rtol=_VECTOR_TOLERANCE, atol=_VECTOR_TOLERANCE))


class SentenceRecords(Protocol):
    """What :func:`verify_sentences` reads of a Chroma sentence store
    (:class:`arag_graph.index.chroma.SentenceStore`), named here because that module imports this
    one (to open its store through :func:`copy_verified`)."""

    def count(self) -> int: ...

    def records(self, ids: Sequence[str]) -> dict[str, tuple[dict[str, Any], str, np.ndarray]]: ...

    def row_ids(self, rows: Sequence[int]) -> list[str]: ...


def verify_sentences(
    root: Path, store: SentenceRecords, chunks: Sequence[Chunk], expected: str | None, fingerprint: np.ndarray | None
) -> int:
    """Read every sentence record back and compare it with the chunks, the digest and the fingerprint.

    Record ``i`` (the record of row ``i``: its id is ``i``, or for a build an update made the
    ``i``-th of its record ids) must be the ``i``-th sentence (its chunk ID, position and text), which catches
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
        ids = store.row_ids(range(start, min(start + _VERIFY_BATCH, len(wanted))))
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
            if fingerprint is not None and not _close(vector_fingerprint(vector[None, :])[0], fingerprint[i]):
                raise IndexDamagedError(
                    root, f"the vector of sentence record {record_id} differs from what the build stored"
                )
    if expected is not None and tagged(digest) != expected:
        raise IndexDamagedError(root, "the sentence records differ from what the build stored (checksum mismatch)")
    return count
