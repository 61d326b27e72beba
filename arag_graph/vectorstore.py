"""The sentence level of large indexes: one Chroma record per sentence, searched by HNSW.

(Indexes up to :data:`arag_graph.sentencematrix.MATRIX_MAX_SENTENCES` sentences keep their vectors in
an exact matrix instead, :mod:`arag_graph.sentencematrix`.) Each record's document is the sentence
and its metadata names the parent chunk and the sentence's position in it. Builds since the matrix
number the records by row (``"ids": "rows"`` in the manifest), so a query asks Chroma for ids and
distances only and finds each row's chunk in the index's arrays; older collections are read through
the metadata, as they were written. We compute embeddings
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
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arag_graph.documents import Chunk
from arag_graph.errors import AragError, IndexNotFoundError
from arag_graph.sentencematrix import SentenceLayout

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

# HNSW settings: ef_search well above the number of sentences we fetch per query (10 * top_k) keeps
# the approximate search close to exact on the corpora we benchmark (see bench/).
HNSW_CONFIG: dict[str, Any] = {
    "space": "cosine",
    "ef_construction": 200,
    "ef_search": 200,
    "max_neighbors": 32,
}


CHROMA_URL_ENV = "ARAG_CHROMA_URL"
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


def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False, allow_reset=False)


class SentenceStore:
    """A Chroma collection of sentence embeddings, queried by vector."""

    def __init__(self, client: Any, collection: Any, config: dict[str, Any]) -> None:
        self.client = client
        self.collection = collection
        self.config = config
        # Set by the index when the record ids are row numbers (config "ids": "rows"): a query then
        # fetches only ids and distances and finds each row's chunk in the layout's arrays.
        self.layout: SentenceLayout | None = None

    def add_rows(self, start: int, layout: SentenceLayout, documents: Sequence[str], vectors: np.ndarray) -> None:
        """Insert sentence rows ``start`` to ``start + len(vectors)``: one block of a streamed build."""
        if len(documents) != len(vectors):
            raise ValueError("sentence documents and vectors differ in length")
        rows = np.arange(start, start + len(vectors))
        described = layout.describe(rows, np.zeros(len(rows), dtype=np.float32))
        batch = max(1, min(5000, int(self.client.get_max_batch_size())))
        for offset in range(0, len(rows), batch):
            end = offset + batch
            self.collection.add(
                ids=[str(r) for r in rows[offset:end].tolist()],
                embeddings=vectors[offset:end],
                documents=list(documents[offset:end]),
                metadatas=[{"chunk_id": c, "position": p} for c, p, _ in described[offset:end]],
            )

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
        """The ``n`` nearest sentences as ``(chunk_id, position, cosine similarity)``, best first."""
        if self.layout is not None:
            found = self.collection.query(
                query_embeddings=[np.asarray(vector, dtype=np.float32)], n_results=max(1, n), include=["distances"]
            )
            rows = np.asarray([int(i) for i in found["ids"][0]], dtype=np.int64) if found["ids"] else np.empty(0, int)
            distances = np.asarray(found["distances"][0] if found["distances"] else [], dtype=np.float64)
            return self.layout.describe(rows, 1.0 - distances)
        result = self.collection.query(
            query_embeddings=[np.asarray(vector, dtype=np.float32)],
            n_results=max(1, n),
            include=["metadatas", "distances"],
        )
        metadatas = result["metadatas"][0] if result["metadatas"] else []
        distances = result["distances"][0] if result["distances"] else []
        return [
            (str(m["chunk_id"]), int(m["position"]), 1.0 - float(d)) for m, d in zip(metadatas, distances, strict=False)
        ]

    def count(self) -> int:
        return int(self.collection.count())

    def all_vectors(self) -> tuple[np.ndarray, list[tuple[str, int]]]:
        """Every stored vector with its ``(chunk_id, position)``, for exact comparisons in tests and
        benchmarks."""
        got = self.collection.get(include=["embeddings", "metadatas"])
        owners = [(str(m["chunk_id"]), int(m["position"])) for m in got["metadatas"]]
        return np.asarray(got["embeddings"], dtype=np.float32), owners

    def drop(self) -> None:
        """Delete the collection (used for server-side collections of replaced builds)."""
        self.client.delete_collection(self.collection.name)


def _http_client(url: str) -> Any:
    from urllib.parse import urlparse

    import chromadb

    parsed = urlparse(url if "://" in url else f"http://{url}")
    if not parsed.hostname:
        raise AragError(f"cannot read Chroma URL {url!r}; give it as http://HOST:PORT")
    port = parsed.port or (443 if parsed.scheme == "https" else 8000)
    try:
        return chromadb.HttpClient(host=parsed.hostname, port=port, ssl=parsed.scheme == "https", settings=_settings())
    except Exception as exc:  # chromadb raises several types for an unreachable server
        raise AragError(
            f"cannot reach the Chroma server at {url} ({type(exc).__name__}); start it with "
            "`chroma run --path DIR --port PORT` or fix --chroma-url"
        ) from None


def check_chroma_server(url: str) -> None:
    """Fail now, with the one-line error, when no Chroma server answers at ``url``.

    A build calls this before encoding, which takes hours on a large corpus.
    """
    client = _http_client(url)
    try:
        client.heartbeat()
    except Exception as exc:
        raise AragError(
            f"the Chroma server at {url} does not answer ({type(exc).__name__}); check `chroma run` and --chroma-url"
        ) from None


def connect_sentence_store(config: dict[str, Any], build_dir: Path, *, create: bool = False) -> SentenceStore:
    """Open (or with ``create`` make) the sentence collection a manifest describes."""
    import chromadb

    mode = config.get("mode")
    name = str(config.get("collection") or "sentences")
    where: object = build_dir
    if mode == "http":
        override = None if create else os.environ.get(CHROMA_URL_ENV, "").strip()
        where = override or str(config["url"])
        client = _http_client(str(where))
    elif mode == "persistent":
        path = build_dir / str(config.get("path", "chroma"))
        if not create and not path.is_dir():
            raise IndexNotFoundError(f"{path}: sentence store missing; rebuild the index with `arag index`")
        client = chromadb.PersistentClient(path=str(path), settings=_settings())
    else:
        raise IndexNotFoundError(f"{build_dir}: unknown sentence-store mode {mode!r}; rebuild the index")
    try:
        if create:
            collection = client.create_collection(name, configuration={"hnsw": HNSW_CONFIG}, embedding_function=None)
        else:
            collection = client.get_collection(name, embedding_function=None)
    except AragError:
        raise
    except Exception as exc:
        raise IndexNotFoundError(
            f"{where}: sentence collection {name!r} unavailable ({type(exc).__name__}: {exc}); "
            "rebuild the index with `arag index`"
        ) from None
    return SentenceStore(client, collection, config)
