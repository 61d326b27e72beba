"""Loading an index, once per process when asked, and checking it completely (``arag verify``).

Every load checks the manifest's checksums and the sentence store's size before any search can
answer; :func:`verify_index` also reads every keyword array element and every sentence record.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec

from langchain_core.embeddings import Embeddings

from arag_graph.core.errors import AragError, IndexDamagedError, IndexMismatchError, IndexNotFoundError
from arag_graph.index import integrity
from arag_graph.index.chroma import RECORD_IDS
from arag_graph.index.devices import resolve_device
from arag_graph.index.embedding_loader import resolve_embeddings
from arag_graph.index.encoders import (
    DEFAULT_MODEL_ID,
    ENCODERS,
    SentenceEncoder,
    check_encoder,
    default_embeddings,
    embedding_model_id,
    embedding_prompts,
    encoder_and_device,
)
from arag_graph.index.hierarchical import ChunkStore, HierarchicalIndex, open_sentences
from arag_graph.index.keywords import KeywordIndex, keyword_files
from arag_graph.index.layout import MANIFEST, build_path, load_index_array, read_current, reading
from arag_graph.index.manifest import CHUNKS, Manifest
from arag_graph.index.sentencematrix import MATRIX_FILE, SentenceMatrix
from arag_graph.index.text import keyword_chunks
from arag_graph.index.update import update_index

_LOADED: dict[tuple[str, str, str | None, str], HierarchicalIndex] = {}
_LOADED_LOCK = threading.Lock()
_P = ParamSpec("_P")
LOAD_ATTEMPTS = 4
"""How many times a load whose build was replaced while it opened it follows ``CURRENT`` to the new one."""


def _follows_updates(load: Callable[_P, HierarchicalIndex]) -> Callable[_P, HierarchicalIndex]:
    """Loading that survives an update racing it (issue 38).

    The load runs holding the index's readers lock (:func:`arag_graph.index.layout.reading`), so an
    update does not delete a build while it is being opened. Where that lock is not available, an
    update may delete the build a load has just read from ``CURRENT``; its files are then missing,
    which reads as damage. A load that fails so while ``CURRENT`` has moved on is repeated on the new
    build (at most :data:`LOAD_ATTEMPTS` loads): the reader answers from the new build instead of
    being told to rebuild a healthy index. Damage of the build ``CURRENT`` still names is raised.
    """

    @functools.wraps(load)
    def follow(*args: _P.args, **kwargs: _P.kwargs) -> HierarchicalIndex:
        root = Path(args[0] if args else kwargs["path"])  # type: ignore[arg-type]
        return _load_following_current(root, functools.partial(load, *args, **kwargs))

    return follow


def _load_following_current(root: Path, load: Callable[[], HierarchicalIndex]) -> HierarchicalIndex:
    """``load()`` under the readers lock, again on the new build while ``CURRENT`` moved on under it."""
    for attempt in range(1, LOAD_ATTEMPTS + 1):
        before = read_current(root, strict=False) if root.is_dir() else None
        with reading(root):
            try:
                return load()
            except IndexDamagedError:
                now = read_current(root, strict=False) if root.is_dir() else None
                if attempt >= LOAD_ATTEMPTS or now is None or now == before:
                    raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _manifest_embeddings(root: Path, manifest: Manifest, encoder: str | None, device: str | None) -> Embeddings:
    """The model a manifest names, set up from its spec (no download), or a one-line mismatch error."""
    from arag_graph.index.embedding_loader import LOCAL_ENCODER
    from arag_graph.index.embedding_spec import is_endpoint_spec

    try:
        if is_endpoint_spec(manifest.embedding_model):
            return resolve_embeddings(manifest.embedding_model, base_url=manifest.embedding_base_url)
        recorded = check_encoder(manifest.encoder) if manifest.encoder else LOCAL_ENCODER
        backend, where = encoder_and_device(encoder, device, recorded)
        return resolve_embeddings(
            manifest.embedding_model, base_url=manifest.embedding_base_url, encoder=backend, device=where
        )
    except AragError as exc:
        raise IndexMismatchError(
            f"{root}: index was built with embedding model {manifest.embedding_model!r}, which cannot be set up "
            f"here ({exc}); make it available, or pass the same model as `embeddings=` when loading it"
        ) from None


@_follows_updates
def load_index(
    path: str | os.PathLike[str],
    *,
    embeddings: Embeddings | None = None,
    encoder: str | None = None,
    cache: bool = False,
    check_endpoint: Callable[[Manifest], None] | None = None,
    chroma_timeout: float | None = None,
    sentences_at_first_use: bool = False,
    device: str | None = None,
) -> HierarchicalIndex:
    """Load the active build of the index at ``path``.

    ``embeddings`` must be the model the index was built with; it defaults to the offline
    all-MiniLM-L6-v2 when that is what the manifest names, run on the backend the manifest records
    (``encoder`` overrides it: any backend of the same model may query the index; ``torch`` and
    ``onnx`` give the same vectors, ``onnx-int8`` close ones). With ``cache=True`` the loaded index
    is shared per process (what graph servers want: one copy in memory for all runs).

    An index built with another model (a spec, see :func:`build_index`) loads that model from its
    manifest. ``check_endpoint(manifest)`` runs before any model is set up, and again on every
    cache hit: a served run passes the operator's policy, so that an index whose manifest names an
    embeddings endpoint the operator does not allow is refused before the key could go there.

    ``sentences_at_first_use=True`` opens the sentence store at its first use rather than now (its
    checks then run there): an update, which reads the previous store through its own checked copy,
    has no use for a second one (:func:`arag_graph.index.sync.sync_index`).

    ``chroma_timeout`` bounds each wait for a Chroma server (default ``$ARAG_CHROMA_TIMEOUT`` or 60 s).
    ``device`` (default auto, :mod:`arag_graph.index.devices`): where queries and an exact matrix run.

    Every file the build wrote is checked against the manifest's checksums, and the sentence
    store's size against the manifest (:func:`verify_index` checks every sentence record too); a
    damaged index raises the one-line :class:`~arag_graph.core.errors.IndexDamagedError` here, before
    any search could answer from it. A read-only index directory loads too.
    """
    if encoder is not None:
        if embeddings is not None:
            raise AragError("give either embeddings= or encoder=, not both: encoder picks the default model's backend")
        encoder = check_encoder(encoder)
    root = Path(path)
    build = read_current(root) if root.is_dir() else None
    if build is None:
        raise IndexNotFoundError(f"{root}: no index found; build one with `arag index CORPUS --out {root}`")
    key = (str(root.resolve()), build, encoder, where := resolve_device(device))
    if cache and embeddings is None and (cached := _cached(key, check_endpoint)) is not None:
        return cached
    build_dir = build_path(root, build)
    manifest = Manifest.from_file(build_dir / MANIFEST, root)
    if check_endpoint is not None:
        check_endpoint(manifest)
    embeddings = _query_embeddings(root, manifest, embeddings, encoder, device)
    store, keywords = _load_files(root, build_dir, manifest)
    opener = functools.partial(open_sentences, root, manifest, build_dir, store.chunks, chroma_timeout)
    parts = (root, manifest, store, keywords, opener if sentences_at_first_use else opener(), embeddings, build_dir)
    index = HierarchicalIndex(*parts, updater=update_index, device=where)
    if cache and not sentences_at_first_use:
        with _LOADED_LOCK:
            _LOADED[key] = index
    return index


def _cached(
    key: tuple[str, str, str | None, str], check_endpoint: Callable[[Manifest], None] | None
) -> HierarchicalIndex | None:
    """The index this process loaded for ``key`` (index, build, encoder, device), checked again by
    ``check_endpoint`` (a served run's policy may differ from the run that loaded it), or None."""
    with _LOADED_LOCK:
        cached = _LOADED.get(key)
    if cached is not None and check_endpoint is not None:
        check_endpoint(cached.manifest)
    return cached


def _query_embeddings(
    root: Path, manifest: Manifest, embeddings: Embeddings | None, encoder: str | None, device: str | None
) -> Embeddings:
    """The model queries are embedded with: the one given (which must be the manifest's), else the one
    the manifest names (the default model on ``encoder``'s or the recorded backend, on ``device``:
    see :func:`~arag_graph.index.encoders.encoder_and_device`), with the prompts the passages were
    embedded with; a one-line mismatch error otherwise."""
    if embeddings is None and manifest.embedding_model != DEFAULT_MODEL_ID:
        embeddings = _manifest_embeddings(root, manifest, encoder, device)
        if isinstance(embeddings, SentenceEncoder):
            # Queries must meet the passages as they were embedded: with the recorded prompts, even when
            # the folder's configuration has changed since (or, for an older index, without any).
            embeddings.use_prompts(manifest.embedding_prompts)
    elif embeddings is None:
        recorded = manifest.encoder or "torch"
        if encoder is None and recorded not in ENCODERS:
            raise IndexMismatchError(
                f"{root}: index was built with encoder {recorded!r}, unknown to this version; load it with "
                f"encoder='torch' or rebuild it"
            )
        embeddings = default_embeddings(*encoder_and_device(encoder, device, recorded))  # type: ignore[arg-type]
        check = getattr(embeddings, "check_available", None)
        if callable(check):  # a missing optional package fails at load, not at the first query
            check()
    else:
        given = embedding_model_id(embeddings)
        if given != manifest.embedding_model:
            raise IndexMismatchError(
                f"{root}: index was built with embedding model {manifest.embedding_model!r} but "
                f"{given!r} was given; load it with the same model or rebuild the index"
            )
    if embedding_prompts(embeddings) != manifest.embedding_prompts:
        raise IndexMismatchError(
            f"{root}: index was embedded with the prompts {manifest.embedding_prompts or 'none'} but the model given "
            f"applies {embedding_prompts(embeddings) or 'none'}; load it with the same prompts (or let it set up "
            "the model from its manifest), or rebuild the index"
        )
    return embeddings


def _load_files(root: Path, build_dir: Path, manifest: Manifest) -> tuple[ChunkStore, KeywordIndex]:
    """The chunk store and keyword index of a build, checked against the manifest's checksums.

    ``chunks.jsonl`` is hashed as it is parsed; the other files are hashed whole. A manifest that
    records no checksum of a file loading reads (an index from before checksums, or a planted one)
    is refused: rebuild it.
    """
    recorded = manifest.checksums
    for name in recorded:
        if Path(name).name != name or name in ("", ".", ".."):
            raise IndexDamagedError(root, f"the manifest of {build_dir} names a file outside its build: {name[:60]!r}")
    missing = sorted(set(_checksummed_files(manifest)) - set(recorded))
    if missing:
        # An index from before checksums (or whose manifest lost them) would load unchecked:
        # refused, like damage, rather than trusted.
        raise IndexDamagedError(
            root,
            f"the manifest of {build_dir} records no checksum of {', '.join(missing[:3])}, so it cannot be checked",
        )
    digest = integrity.new_digest()
    try:
        store = ChunkStore.load(build_dir / CHUNKS, digest, root)
    except OSError as exc:
        raise IndexDamagedError(root, f"{build_dir / CHUNKS} cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise IndexDamagedError(root, f"{build_dir / CHUNKS}: {exc}") from None
    integrity.check_recorded(root, build_dir, recorded, integrity.tagged(digest), CHUNKS)
    for name, expected in recorded.items():
        if name != CHUNKS:
            integrity.check_file(root, build_dir, name, expected)
    if len(store) != manifest.chunks:
        raise IndexDamagedError(
            root, f"{build_dir / CHUNKS} holds {len(store)} chunks, the manifest records {manifest.chunks}"
        )
    keywords = KeywordIndex.load(build_dir, keyword_chunks(store.chunks, manifest.header_max_chars), root=root)
    return store, keywords


def _checksummed_files(manifest: Manifest) -> list[str]:
    """The files loading reads, each of which the manifest must checksum: the chunks, the keyword
    index, for a matrix the vectors (Chroma's records are checked by content), and for a Chroma build
    an update made the record id of each row."""
    names = [CHUNKS, *keyword_files()]
    if isinstance(manifest.chroma, dict) and manifest.chroma.get("mode") == "matrix":
        name = manifest.chroma.get("path", MATRIX_FILE)
        if isinstance(name, str) and Path(name).name == name and name not in ("", ".", ".."):  # others: outside
            names.append(name)
    if isinstance(manifest.chroma, dict) and manifest.chroma.get("ids") == "records":
        names.append(RECORD_IDS)
    return names


def verify_index(index: HierarchicalIndex) -> dict[str, Any]:
    """Check a loaded index completely: what loading checks, every element of the keyword arrays
    and every sentence record against its chunk and the recorded digest, or every row of the
    sentence matrix (``arag verify``).

    Raises the one-line damage error; returns what was checked.
    """
    root = index.path if index.path is not None else Path("DIR")
    build_dir = index.build_dir
    fingerprint = None
    if build_dir is not None:
        for name, expected in index.manifest.checksums.items():
            integrity.check_file(root, build_dir, name, expected)
        if integrity.VECTOR_FINGERPRINT in index.manifest.checksums:
            fingerprint = load_index_array(root, build_dir / integrity.VECTOR_FINGERPRINT, mmap=False)
    index.keywords.check()
    if isinstance(index.sentences, SentenceMatrix):
        count = index.sentences.check()  # its bytes are in the checksums above; this reads every row
    else:
        count = integrity.verify_sentences(
            root, index.sentences, index.store.chunks, index.manifest.sentence_digest, fingerprint
        )
    return {
        "index": str(root),
        "chunks": len(index.store),
        "sentences": count,
        "sentence_store": "matrix" if isinstance(index.sentences, SentenceMatrix) else "chroma",
        "files_checked": len(index.manifest.checksums),
        "checksums": bool(index.manifest.checksums),
        "sentence_digest": index.manifest.sentence_digest is not None,
    }
