"""The sentence level of large indexes: one Chroma record per sentence, searched by HNSW.

(Indexes up to :data:`arag_graph.index.sentencematrix.MATRIX_MAX_SENTENCES` sentences keep their vectors in
an exact matrix instead, :mod:`arag_graph.index.sentencematrix`.) Each record's document is the sentence
and its metadata names the parent chunk and the sentence's position in it. Builds since the matrix
number the records by row (``"ids": "rows"`` in the manifest), so a query asks Chroma for ids and
distances only and finds each row's chunk in the index's arrays (a row outside them is damage). A
build made by an update (``"ids": "records"``) keeps the previous build's records under their ids and
writes the record id of every row to :data:`RECORD_IDS`, so that an update deletes and adds only the
records that changed instead of renumbering (re-inserting) all of them;
older collections are read through the metadata and text, as they were written, and each record is
checked against its chunk. We compute embeddings
ourselves and pass them explicitly: Chroma's default embedding function would download a model.
The same code serves an embedded (persistent) Chroma inside the index directory and a Chroma server
reached over HTTP (``chroma run``), so both modes give the same results.

Server mode keeps only the sentence records (vector, sentence, chunk id and position) in the server;
the chunk store, the keyword index and the manifest stay in the index directory. Every search reads
them besides the vectors, they are small next to the vectors, and keeping them on the graph
workers' disk means the active build still switches atomically with one ``CURRENT`` rename, as in
embedded mode, while the server holds nothing but collections. Each build writes its own
collection, ``<prefix>-<build>``, named in its manifest; a rebuild points ``CURRENT`` at the new
build only once its collection is complete, and then drops the old collection. ``$ARAG_CHROMA_URL``,
when set, replaces the URL recorded in the manifest on loading (an index built against
``http://localhost:8000`` and served from a container that reaches Chroma under another name).

Every wait on a server is bounded: ``chroma_timeout`` seconds (``--chroma-timeout``,
``$ARAG_CHROMA_TIMEOUT``, default 60) in total for each request, connecting (ten at most), sending
and every read of the reply included (:mod:`arag_graph.core.deadlines`), so a server that answers one
byte at a time fails like one that never answers. Chroma's embedded client writes to the files it
opens, so an embedded store is always opened from a private copy, checked against the build's
checksums as it is made (:func:`_private_copy`): damage refuses before Chroma reads a byte, and a
read-only index directory (mounted read-only, as deployments do) answers.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import ipaddress
import math
import os
import re
import shutil
import stat
import tempfile
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arag_graph.core.documents import Chunk
from arag_graph.core.endpoints import check_endpoint
from arag_graph.core.errors import AragError, IndexDamagedError, IndexMismatchError
from arag_graph.index.sentencematrix import SentenceLayout

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

# HNSW settings: ef_search well above the number of sentences we fetch per query (10 * top_k) keeps
# the approximate search close to exact on the corpora we benchmark (see bench/).
HNSW_CONFIG: dict[str, Any] = {
    "space": "cosine",
    "ef_construction": 200,
    "ef_search": 200,
    "max_neighbors": 32,
}


RECORD_IDS = "sentence_ids.npy"
"""The record id of each sentence row (int64), in a build whose manifest says ``"ids": "records"``."""

CHROMA_URL_ENV = "ARAG_CHROMA_URL"
CHROMA_TIMEOUT_ENV = "ARAG_CHROMA_TIMEOUT"
DEFAULT_CHROMA_TIMEOUT = 60.0
_CONNECT_TIMEOUT = 10.0
# The one name a build gives its embedded store's directory; a manifest naming anything else is damaged.
_STORE_DIR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Chroma's rule for collection names (checked by the server and the embedded client alike).
COLLECTION_NAME_MAX = 512
_COLLECTION_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def valid_collection_name(name: str) -> bool:
    """True when Chroma accepts ``name``: 3-512 of [a-zA-Z0-9._-], alphanumeric ends, no "..", no IP."""
    if not 3 <= len(name) <= COLLECTION_NAME_MAX or ".." in name or not _COLLECTION_NAME.fullmatch(name):
        return False
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return True
    return False


CHROMA_EXTRA = "pip install 'arag-graph[chroma]'"


def chromadb_installed() -> bool:
    """Whether the ``chroma`` extra is installed. chromadb (with kubernetes, gRPC and OpenTelemetry
    behind it, about 250 MB) is needed only for a Chroma store: past
    :data:`~arag_graph.index.sentencematrix.MATRIX_MAX_SENTENCES` sentences or for a Chroma server."""
    return importlib.util.find_spec("chromadb") is not None


def require_chromadb(what: str) -> None:
    """Fail in one line, before any long work, when ``what`` needs chromadb and it is not installed."""
    if not chromadb_installed():
        raise AragError(f"{what} needs chromadb, which is not installed; {CHROMA_EXTRA}")


def _settings() -> Any:
    require_chromadb("a Chroma sentence store")
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False, allow_reset=False)


def chroma_timeout(seconds: float | None = None) -> float:
    """The total bound on each Chroma server request: ``seconds``, else ``$ARAG_CHROMA_TIMEOUT``, else 60."""
    source = "--chroma-timeout"
    if seconds is None:
        text = os.environ.get(CHROMA_TIMEOUT_ENV, "").strip()
        if not text:
            return DEFAULT_CHROMA_TIMEOUT
        source = f"${CHROMA_TIMEOUT_ENV}"
        try:
            seconds = float(text)
        except ValueError:
            seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise AragError(f"{source} {seconds!r} is not a time limit; give seconds above 0, e.g. 60")
    return float(seconds)


class SentenceStore:
    """A Chroma collection of sentence embeddings, queried by vector.

    Every call to Chroma goes through :meth:`_calls`, which turns what can go wrong there into one
    line: a server that does not answer in time, a server that fails, or a damaged embedded store.
    """

    def __init__(
        self,
        client: Any,
        collection: Any,
        config: dict[str, Any],
        *,
        where: str = "",
        root: Path | None = None,
        timeout: float | None = None,
    ) -> None:
        """``where`` names the store in messages; ``root`` is the index directory whose damage a
        failed read is (None while building); ``timeout`` is the server bound, for messages."""
        self.client = client
        self.collection = collection
        self.config = config
        self.where = where or str(config.get("url") or "the sentence store")
        self.root = root
        self.timeout = timeout
        # Set by the index when the record ids are row numbers (config "ids": "rows"): a query then
        # fetches only ids and distances and finds each row's chunk in the layout's arrays.
        self.layout: SentenceLayout | None = None
        # Row -> record id and record id -> row (-1: no row), when the ids are not the rows ("records").
        self.record_ids: np.ndarray | None = None
        self._rows_of: np.ndarray | None = None

    def use_record_ids(self, record_ids: np.ndarray) -> None:
        """Records are found by the ids of :data:`RECORD_IDS` (row ``i`` is record ``record_ids[i]``);
        ids that are negative or repeated are damage."""
        ids = np.asarray(record_ids)
        if ids.ndim != 1 or (ids.size and (ids.dtype.kind not in "iu" or int(ids.min()) < 0)):
            raise self._failure(ValueError(f"{RECORD_IDS} does not hold record ids"), "read")
        ids = ids.astype(np.int64)
        rows_of = np.full(int(ids.max()) + 1 if ids.size else 0, -1, dtype=np.int64)
        rows_of[ids] = np.arange(len(ids))
        if ids.size and int(np.count_nonzero(rows_of >= 0)) != len(ids):
            raise self._failure(ValueError(f"{RECORD_IDS} names a record twice"), "read")
        self.record_ids, self._rows_of = ids, rows_of

    def row_ids(self, rows: Sequence[int]) -> list[str]:
        """The record ids of sentence rows ``rows``."""
        if self.record_ids is None:
            return [str(r) for r in rows]
        return [str(int(self.record_ids[r])) for r in rows]

    @contextlib.contextmanager
    def _calls(self, action: str) -> Iterator[None]:
        try:
            yield
        except AragError:
            raise
        except Exception as exc:
            raise self._failure(exc, action) from None

    def _failure(self, exc: Exception, action: str) -> AragError:
        detail = " ".join(str(exc).split())[:200]
        if self.config.get("mode") == "http":
            return _server_failure(self.where, exc, self.timeout or DEFAULT_CHROMA_TIMEOUT, action)
        if action == "store" or self.root is None:
            return AragError(
                f"{self.where}: cannot store the sentence vectors ({type(exc).__name__}: {detail}); "
                "check free disk space and permissions"
            )
        return IndexDamagedError(
            self.root, f"the sentence store {self.where} cannot be read ({type(exc).__name__}: {detail})"
        )

    def add_rows(
        self,
        start: int | np.ndarray,
        layout: SentenceLayout,
        documents: Sequence[str],
        vectors: np.ndarray,
        ids: np.ndarray | None = None,
    ) -> None:
        """Insert sentence rows ``start`` to ``start + len(vectors)`` (one block of a streamed build),
        or the rows ``start`` lists; their record ids are the rows unless ``ids`` gives them."""
        if len(documents) != len(vectors):
            raise ValueError("sentence documents and vectors differ in length")
        rows = np.arange(start, start + len(vectors)) if isinstance(start, int) else np.asarray(start, np.int64)
        record_ids = rows if ids is None else np.asarray(ids, np.int64)
        if len(rows) != len(vectors) or len(record_ids) != len(rows):
            raise ValueError("sentence rows, ids and vectors differ in length")
        described = layout.describe(rows, np.zeros(len(rows), dtype=np.float32))
        with self._calls("store"):
            batch = max(1, min(5000, int(self.client.get_max_batch_size())))
            for offset in range(0, len(rows), batch):
                end = offset + batch
                self.collection.add(
                    ids=[str(r) for r in record_ids[offset:end].tolist()],
                    embeddings=vectors[offset:end],
                    documents=list(documents[offset:end]),
                    metadatas=[{"chunk_id": c, "position": p} for c, p, _ in described[offset:end]],
                )

    def delete_records(self, ids: Sequence[int]) -> None:
        """Delete the records ``ids`` (an update's removed and changed sentences)."""
        with self._calls("store"):
            batch = max(1, min(5000, int(self.client.get_max_batch_size())))
            for offset in range(0, len(ids), batch):
                self.collection.delete(ids=[str(int(i)) for i in ids[offset : offset + batch]])

    def vectors_of(self, ids: Sequence[int]) -> np.ndarray:
        """The stored vectors of the records ``ids``, in that order (a record missing is damage)."""
        if not len(ids):
            return np.zeros((0, 0), dtype=np.float32)
        wanted = [str(int(i)) for i in ids]
        with self._calls("read"):
            got = self.collection.get(ids=wanted, include=["embeddings"])
            by_id = dict(zip(got["ids"], got["embeddings"], strict=True))
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise self._failure(ValueError(f"record {missing[0][:20]} is missing"), "read")
        return np.asarray([by_id[i] for i in wanted], dtype=np.float32)

    def add(self, chunks: Sequence[Chunk], documents: Sequence[str], vectors: np.ndarray) -> None:
        """Insert all sentences of ``chunks`` (in the order of ``documents``/``vectors``)."""
        ids: list[str] = []
        metadatas: list[dict[str, Any]] = []
        for chunk in chunks:
            for position in range(len(chunk.sentences)):
                ids.append(f"{len(ids)}")
                metadatas.append({"chunk_id": chunk.id, "position": position})
        if len(ids) != len(documents) or len(ids) != len(vectors):
            raise ValueError("sentence ids, documents and vectors differ in length")
        with self._calls("store"):
            batch = max(1, min(5000, int(self.client.get_max_batch_size())))
            for start in range(0, len(ids), batch):
                end = start + batch
                self.collection.add(
                    ids=ids[start:end],
                    embeddings=vectors[start:end],
                    documents=list(documents[start:end]),
                    metadatas=metadatas[start:end],
                )

    def query(self, vector: Sequence[float], n: int) -> list[tuple[str, int, float]]:
        """The ``n`` nearest sentences as ``(chunk_id, position, cosine similarity)``, best first.

        Row-numbered collections (:attr:`layout` set) answer from ids and distances alone; a record
        id that is not a row of the layout is damage. Older collections answer from metadata
        (:meth:`query_documents`, whose records the index checks against their chunks).
        """
        if self.layout is None:
            return [
                (chunk_id, position, similarity)
                for chunk_id, position, similarity, _ in self.query_documents(vector, n)
            ]
        with self._calls("query"):
            found = self.collection.query(
                query_embeddings=[np.asarray(vector, dtype=np.float32)], n_results=max(1, n), include=["distances"]
            )
            ids = found["ids"][0] if found["ids"] else []
            distances = np.asarray(found["distances"][0] if found["distances"] else [], dtype=np.float64)
        try:
            rows = np.asarray([int(i) for i in ids], dtype=np.int64)
        except ValueError:
            rows = np.full(1, -1, dtype=np.int64)
        if self._rows_of is not None and len(rows):
            known = (rows >= 0) & (rows < len(self._rows_of))
            rows = np.where(known, self._rows_of[np.where(known, rows, 0)], -1)
        if len(rows) != len(distances) or (len(rows) and (rows.min() < 0 or rows.max() >= len(self.layout))):
            raise self._failure(
                ValueError(f"record ids {[str(i)[:20] for i in ids[:3]]} are not rows of the index"), "query"
            )
        return self.layout.describe(rows, 1.0 - distances)

    def query_documents(self, vector: Sequence[float], n: int) -> list[tuple[str, int, float, str]]:
        """:meth:`query` with each sentence's stored text, which lets the caller check the record
        against its chunk (a record pointing at the wrong chunk is damage, not a result)."""
        with self._calls("query"):
            result = self.collection.query(
                query_embeddings=[list(vector)], n_results=max(1, n), include=["metadatas", "distances", "documents"]
            )
            metadatas = result["metadatas"][0] if result["metadatas"] else []
            distances = result["distances"][0] if result["distances"] else []
            documents = result["documents"][0] if result.get("documents") else [None] * len(metadatas)
        matches = []
        for metadata, distance, document in zip(metadatas, distances, documents, strict=False):
            chunk_id = metadata.get("chunk_id") if isinstance(metadata, dict) else None
            position = metadata.get("position") if isinstance(metadata, dict) else None
            if not isinstance(chunk_id, str) or not isinstance(position, int) or not isinstance(document, str):
                raise self._failure(ValueError(f"a sentence record has metadata {str(metadata)[:80]}"), "query")
            matches.append((chunk_id, position, 1.0 - float(distance), document))
        return matches

    def records(self, ids: Sequence[str]) -> dict[str, tuple[dict[str, Any], str, np.ndarray]]:
        """Stored records by ID: ``(metadata, sentence, vector)`` (for ``arag verify``)."""
        with self._calls("read"):
            got = self.collection.get(ids=list(ids), include=["metadatas", "documents", "embeddings"])
            return {
                record_id: (metadata or {}, document, np.asarray(vector, np.float32))
                for record_id, metadata, document, vector in zip(
                    got["ids"], got["metadatas"], got["documents"], got["embeddings"], strict=True
                )
            }

    def count(self) -> int:
        with self._calls("count"):
            return int(self.collection.count())

    def all_vectors(self) -> tuple[np.ndarray, list[tuple[str, int]]]:
        """Every stored vector with its ``(chunk_id, position)``, for exact comparisons in tests and
        benchmarks: in row order where the records know their rows (an update adds its records last)."""
        got: dict[str, list[Any]] = {"ids": [], "embeddings": [], "metadatas": []}
        with self._calls("read"):  # in pages: one get of every record exceeds SQLite's variable limit
            page = max(1, min(5000, int(self.client.get_max_batch_size())))
            for offset in range(0, int(self.collection.count()), page):
                part = self.collection.get(include=["embeddings", "metadatas"], limit=page, offset=offset)
                for key in got:
                    got[key].extend(part[key])
        owners = [(str(m["chunk_id"]), int(m["position"])) for m in got["metadatas"]]
        vectors = np.asarray(got["embeddings"], dtype=np.float32).reshape(len(owners), -1)
        if self.layout is not None and len(owners):
            rows = np.asarray([int(i) for i in got["ids"]], dtype=np.int64)
            if self._rows_of is not None:
                rows = self._rows_of[rows]
            order = np.argsort(rows, kind="stable")
            vectors, owners = vectors[order], [owners[i] for i in order.tolist()]
        return vectors, owners

    def close(self) -> None:
        """Release Chroma's client: an embedded store's files are final (and can be checksummed) after it."""
        with contextlib.suppress(Exception):
            self.client.close()

    @property
    def endpoint(self) -> str | None:
        """The Chroma server this store's client calls (None: an embedded store, no network)."""
        return getattr(self.client, "_arag_endpoint", None) if self.config.get("mode") == "http" else None

    def drop(self) -> None:
        """Delete the collection (used for server-side collections of replaced builds)."""
        with self._calls("drop"):
            self.client.delete_collection(self.collection.name)


def _caused_by(exc: BaseException | None, kinds: tuple[type[BaseException], ...]) -> bool:
    """Whether ``exc`` or an error it was raised from is one of ``kinds`` (Chroma re-raises timeouts
    and refused connections as ValueError)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, kinds):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _server_failure(url: str, exc: BaseException, timeout: float, action: str) -> AragError:
    import httpx

    if _caused_by(exc, (httpx.TimeoutException,)):
        return AragError(
            f"the Chroma server at {url} did not answer within {timeout:g} s ({action} timed out); check the "
            f"server, or allow more time with --chroma-timeout or ${CHROMA_TIMEOUT_ENV}"
        )
    if _caused_by(exc, (httpx.TransportError, ConnectionError)):
        return AragError(
            f"cannot reach the Chroma server at {url} ({type(exc).__name__}); start it with "
            "`chroma run --path DIR --port PORT` or fix --chroma-url"
        )
    detail = " ".join(str(exc).split())[:200]
    return AragError(f"the Chroma server at {url} failed ({action}: {type(exc).__name__}: {detail}); check the server")


def _http_client(url: str, timeout: float) -> Any:
    """A Chroma HTTP client whose every request ends within ``timeout`` seconds, all reads included,
    built only for an endpoint the serving policy allows (:func:`arag_graph.core.endpoints.check_endpoint`;
    ``client._arag_endpoint`` keeps the endpoint it calls, which a served run checks again when it
    reuses a loaded index).

    Chroma's client has no timeout setting (its httpx session is made with ``timeout=None``) and
    sends requests while it is being constructed (identity, tenant, database). So the client is a
    :class:`_DeadlineClient`, whose session gets the bound, and a transport that makes it the total of
    each request (:mod:`arag_graph.core.deadlines`), before its first request: construction, the
    heartbeat, opening the collection and every query then end in time in the caller's own thread,
    against a server that never answers and one that answers a byte at a time alike.
    """
    from urllib.parse import urlparse

    import httpx

    try:
        parsed = urlparse(url if "://" in url else f"http://{url}")
        host, port = parsed.hostname, parsed.port
    except ValueError:  # "http://[::1" and other unreadable hosts or ports
        host = port = None
    if not host:
        raise AragError(f"cannot read Chroma URL {url!r}; give it as http://HOST:PORT")
    port = port or (443 if parsed.scheme == "https" else 8000)
    bound = httpx.Timeout(timeout, connect=min(timeout, _CONNECT_TIMEOUT))
    base = f"{'https' if parsed.scheme == 'https' else 'http'}://{host if ':' not in host else f'[{host}]'}:{port}"
    # Before the first request: Chroma's client sends the Chroma credentials with every one of them.
    check_endpoint("chroma", base, "the sentence store's Chroma server")
    settings = _settings()
    settings.chroma_api_impl = "chromadb.api.fastapi.FastAPI"
    settings.chroma_server_host, settings.chroma_server_http_port = host, port
    settings.chroma_server_ssl_enabled = parsed.scheme == "https"
    try:
        client = _client_class()(bound, settings=settings)
    except Exception as exc:  # chromadb raises several types for an unreachable server
        raise _server_failure(url, exc, timeout, "connect") from None
    client._arag_endpoint = base
    return client


@functools.cache
def _client_class() -> type:
    """:class:`_DeadlineClient`: made on first use, as importing chromadb takes a while."""
    require_chromadb("a Chroma server")
    from chromadb.api.client import Client

    class _DeadlineClient(Client):  # type: ignore[misc]
        """Chroma's client, whose HTTP session keeps total deadlines from its first request on.

        Chroma's constructor first makes its server API (the session, no request yet), then asks for
        the caller's identity (the first request, so the session is bounded there), then checks the
        tenant and database through an admin client with a session of its own (bounded before those
        two requests). The tests that stall each start-up request fail if a chromadb release
        reorders this.
        """

        def __init__(self, bound: Any, **kwargs: Any) -> None:
            self._arag_bound = bound
            super().__init__(**kwargs)

        def get_user_identity(self) -> Any:
            _keep_session_deadlines(self._server, self._arag_bound)
            return super().get_user_identity()

        def _validate_tenant_database(self, tenant: str, database: str) -> None:
            _keep_session_deadlines(self._admin_client._server, self._arag_bound)
            super()._validate_tenant_database(tenant=tenant, database=database)

    return _DeadlineClient


def _keep_session_deadlines(server: Any, bound: Any) -> None:
    """Give the session of Chroma's server API (chromadb 1.x's private ``_session``) the bound and a
    transport that makes it the total of each request, once."""
    import httpx

    from arag_graph.core.deadlines import keep_deadlines

    session = getattr(server, "_session", None)
    if not isinstance(session, httpx.Client) or getattr(session, "_arag_bounded", False):
        return
    session.timeout = bound
    verify = getattr(getattr(server, "_settings", None), "chroma_server_ssl_verify", None)
    keep_deadlines(session, limits=server.http_limits, **({} if verify is None else {"verify": verify}))
    session._arag_bounded = True


def check_chroma_server(url: str, timeout: float | None = None) -> None:
    """Fail now, with the one-line error, when no Chroma server answers at ``url`` in time.

    A build calls this before encoding, which takes hours on a large corpus.
    """
    client = _http_client(url, chroma_timeout(timeout))
    try:
        client.heartbeat()
    except Exception as exc:
        raise _server_failure(url, exc, chroma_timeout(timeout), "heartbeat") from None


def _store_path(config: dict[str, Any], build_dir: Path, root: Path) -> Path:
    """The embedded store's directory, which must be a plain directory inside the build."""
    name = config.get("path", "chroma")
    if not isinstance(name, str) or not _STORE_DIR.fullmatch(name) or ".." in name:
        raise IndexDamagedError(root, f"the manifest puts the sentence store at {str(name)[:60]!r}, outside its build")
    path = build_dir / name
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(path.lstat().st_mode):
            raise IndexDamagedError(root, f"the sentence store {path} is a symbolic link, which arag does not follow")
    return path


def _private_copy(path: Path, root: Path, checksums: Mapping[str, str]) -> Path:
    """A verified copy of an embedded store in a temporary directory, deleted when the process ends.

    Chroma's embedded client writes to the files it opens (its database, and its HNSW files as it
    replays its log), so it never opens the build's own files: they stay as the build closed them,
    which is what makes their checksums mean something, and a read-only index answers too. The copy
    is the check (:func:`arag_graph.index.integrity.copy_verified`): disk and time in proportion to the
    store, once per process (``load_index(cache=True)`` shares it between runs).
    """
    from arag_graph.index import integrity

    try:
        where = Path(tempfile.mkdtemp(prefix="arag-store-"))
    except OSError as exc:
        raise AragError(
            f"{path}: no private copy of the sentence store can be made in {tempfile.gettempdir()} "
            f"({exc.strerror or type(exc).__name__}); give TMPDIR a writable directory with room for it"
        ) from None
    copy = where / "chroma"
    try:
        integrity.copy_verified(root, path, copy, checksums)
    except BaseException:
        shutil.rmtree(where, ignore_errors=True)
        raise
    return copy


def connect_sentence_store(
    config: dict[str, Any],
    build_dir: Path,
    *,
    create: bool = False,
    root: Path | None = None,
    timeout: float | None = None,
    checksums: Mapping[str, str] | None = None,
    update: bool = False,
) -> SentenceStore:
    """Open (or with ``create`` make) the sentence collection a manifest describes.

    ``update`` opens an embedded store inside a build that is still being written (an update's copy
    of the previous build's store, which it changes in place before the build is sealed) as it is:
    no private copy, no checksums yet.

    ``root`` is the index directory (for the damage error); ``timeout`` bounds each wait for a
    server (default :func:`chroma_timeout`). An embedded store is opened from a private copy
    checked against ``checksums`` (the build's record of its files, :func:`_private_copy`); one
    without that record is refused: rebuilt, it gets one.
    """
    root = root if root is not None else build_dir.parent.parent
    if not isinstance(config, dict):
        raise IndexDamagedError(root, f"the sentence store of {build_dir} is described by {type(config).__name__}")
    mode = config.get("mode")
    name = config.get("collection") or "sentences"
    if not isinstance(name, str) or not valid_collection_name(name):
        raise IndexDamagedError(root, f"the manifest names the sentence collection {str(name)[:60]!r}")
    copy: Path | None = None
    if mode == "http":
        override = None if create else os.environ.get(CHROMA_URL_ENV, "").strip()
        url = override or config.get("url")
        if not isinstance(url, str) or not url:
            raise IndexDamagedError(root, f"the manifest of {build_dir} names no Chroma server URL")
        where = url
        client = _http_client(url, chroma_timeout(timeout))
    elif mode == "persistent":
        client, where, copy = _persistent_client(config, build_dir, root, create, update, checksums)
    else:
        raise IndexDamagedError(
            root, f"the manifest of {build_dir} names an unknown sentence-store mode {str(mode)[:40]!r}"
        )
    chroma_wait = chroma_timeout(timeout) if mode == "http" else None
    building = create or update
    collection = _open_collection(client, name, where, root, create=create, building=building, wait=chroma_wait)
    store = SentenceStore(client, collection, config, where=where, root=None if building else root, timeout=chroma_wait)
    if copy is not None:
        weakref.finalize(store, shutil.rmtree, copy.parent, True)
    return store


def _persistent_client(
    config: dict[str, Any],
    build_dir: Path,
    root: Path,
    create: bool,
    update: bool,
    checksums: Mapping[str, str] | None,
) -> tuple[Any, str, Path | None]:
    """Chroma's embedded client of a build's store, where it is, and the private copy it opened (None
    for a build writing its own store): a store that is read is opened from a checked copy."""
    require_chromadb(f"the Chroma sentence store of {root}")
    import chromadb

    path = _store_path(config, build_dir, root)
    copy: Path | None = None
    if not create and not path.is_dir():
        raise IndexDamagedError(root, f"the sentence store {path} is missing")
    if not create and not update:
        from arag_graph.index.layout import check_index_tree

        check_index_tree(root, path)  # Chroma opens its files by name: none of them may be a link
        if checksums is None:
            raise IndexMismatchError(
                f"{root}: its sentence store was built before arag checksummed Chroma's files, so it cannot "
                f"be checked before use; rebuild it with `arag index CORPUS --out {root}`"
            )
        copy = _private_copy(path, root, checksums)
    try:
        client = chromadb.PersistentClient(path=str(copy or path), settings=_settings())
    except Exception as exc:
        if create or update:
            raise AragError(f"{path}: cannot create the sentence store ({type(exc).__name__}: {exc})") from None
        raise IndexDamagedError(
            root, f"the sentence store {path} cannot be opened ({type(exc).__name__}: {exc})"
        ) from None
    return client, str(path), copy


def _open_collection(
    client: Any, name: str, where: str, root: Path, *, create: bool, building: bool, wait: float | None
) -> Any:
    """The sentence collection ``name``, made with ``create``; a failure is the one-line error of a
    server that does not answer (``wait``: a server's bound), of a build that cannot write
    (``building``), or of the index's damage."""
    try:
        if create:
            return client.create_collection(name, configuration={"hnsw": HNSW_CONFIG}, embedding_function=None)
        return client.get_collection(name, embedding_function=None)
    except Exception as exc:
        if wait is not None and not _is_missing(exc):
            raise _server_failure(where, exc, wait or DEFAULT_CHROMA_TIMEOUT, "open") from None
        detail = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        if building:
            raise AragError(f"{where}: cannot open the sentence collection {name!r} to write it ({detail})") from None
        raise IndexDamagedError(
            root, f"the sentence collection {name!r} is unavailable in {where} ({detail})"
        ) from None


def _is_missing(exc: Exception) -> bool:
    """Whether Chroma said the collection does not exist (rather than failing to answer)."""
    from chromadb.errors import NotFoundError

    return isinstance(exc, NotFoundError) or (isinstance(exc, ValueError) and "does not exist" in str(exc))
