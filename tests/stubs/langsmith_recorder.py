"""A LangSmith API stand-in that records the runs the LangSmith client posts.

Tracing is part of the product (runs named after graphs, nodes and tools, with the graph, index and
step cap as metadata), so tests point the real ``langsmith.Client`` at this server and read back
what it would have uploaded. It speaks the ingestion endpoints of the langsmith SDK (0.15):

- ``GET /info``: server facts the client reads once. They choose how it uploads (``ingest``):
  zstd-compressed multipart (``"zstd"``, what LangSmith's cloud asks for today), plain multipart
  (``"multipart"``) or JSON batches (``"batch"``, older and some self-hosted servers);
- ``POST /runs/multipart``: ``multipart/form-data`` with one part per run operation and field
  (``post.<id>``, ``post.<id>.inputs``, ``patch.<id>.outputs``, ...), possibly with
  ``Content-Encoding: zstd``; decoded with requests-toolbelt and zstandard (both dependencies of
  langsmith) rather than by hand;
- ``POST /runs/batch``: JSON ``{"post": [...], "patch": [...]}``;
- ``POST /runs`` and ``PATCH /runs/<id>``: one run at a time (older clients, non-batched mode).

:attr:`LangSmithRecorder.runs` merges each run's creation and its updates into one
:class:`RecordedRun`. Every raw body stays in :attr:`~tests.stubs._http.StubServer.requests`, so a
test can also check that a secret never appears in anything the client sent.
"""

from __future__ import annotations

import io
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from requests_toolbelt.multipart.decoder import MultipartDecoder

from tests.stubs._http import LOCALHOST, Exchange, RecordedRequest, StubServer

JSONDict = dict[str, Any]
Ingest = Literal["zstd", "multipart", "batch"]

_PART_NAME = re.compile(r'name="(?P<name>[^"]+)"')
_RUN_FIELDS = ("inputs", "outputs", "events", "extra", "error", "serialized")


@dataclass
class RecordedRun:
    """One traced run: its creation (``post``) merged with later updates (``patch``)."""

    id: str
    data: JSONDict = field(default_factory=dict)
    operations: list[str] = field(default_factory=list)
    """``post`` / ``patch`` in the order they arrived."""

    @property
    def name(self) -> str:
        return str(self.data.get("name") or "")

    @property
    def run_type(self) -> str:
        return str(self.data.get("run_type") or "")

    @property
    def parent_run_id(self) -> str | None:
        parent = self.data.get("parent_run_id")
        return str(parent) if parent else None

    @property
    def trace_id(self) -> str | None:
        trace = self.data.get("trace_id")
        return str(trace) if trace else None

    @property
    def metadata(self) -> JSONDict:
        return dict((self.data.get("extra") or {}).get("metadata") or {})

    @property
    def tags(self) -> list[str]:
        return list(self.data.get("tags") or [])

    @property
    def inputs(self) -> Any:
        return self.data.get("inputs")

    @property
    def outputs(self) -> Any:
        return self.data.get("outputs")

    @property
    def error(self) -> Any:
        return self.data.get("error")

    @property
    def ended(self) -> bool:
        return bool(self.data.get("end_time"))

    def __repr__(self) -> str:
        parent = (self.parent_run_id or "none")[:8]
        return f"RecordedRun({self.name!r}, type={self.run_type!r}, id={self.id[:8]}, parent={parent})"


class LangSmithRecorder(StubServer):
    """Records LangSmith run ingestion on localhost; ``url`` is the ``LANGSMITH_ENDPOINT`` to use.

    ``ingest`` is the upload format ``/info`` asks clients for; a client reads ``/info`` once, so
    set it before the client's first upload.
    """

    def __init__(self, host: str = LOCALHOST, port: int = 0, *, ingest: Ingest = "zstd") -> None:
        super().__init__(host, port)
        self.ingest: Ingest = ingest
        self._runs_lock = threading.Lock()
        self._runs: dict[str, RecordedRun] = {}

    @property
    def url(self) -> str:
        return self.root_url

    # -- reading what was recorded ---------------------------------------------------------------
    @property
    def runs(self) -> list[RecordedRun]:
        """Every run recorded so far, in the order of their first operation."""
        with self._runs_lock:
            return list(self._runs.values())

    def named(self, name: str) -> list[RecordedRun]:
        return [r for r in self.runs if r.name == name]

    def roots(self) -> list[RecordedRun]:
        return [r for r in self.runs if r.parent_run_id is None]

    def children(self, run: RecordedRun) -> list[RecordedRun]:
        return [r for r in self.runs if r.parent_run_id == run.id]

    def descendants(self, run: RecordedRun) -> list[RecordedRun]:
        """Runs below ``run`` in its trace, at any depth."""
        found: list[RecordedRun] = []
        frontier = [run]
        while frontier:
            below = [c for parent in frontier for c in self.children(parent)]
            found.extend(below)
            frontier = below
        return found

    def wait_for_runs(self, predicate: Callable[[list[RecordedRun]], bool], timeout: float = 15.0) -> bool:
        """Wait until ``predicate(runs)`` holds (the client posts from a background thread)."""
        return self.wait_for(lambda: predicate(self.runs), timeout=timeout)

    def bodies_containing(self, needle: str) -> list[str]:
        """Requests whose (decompressed) body contains ``needle``, say an API key: ``METHOD path``."""
        return [f"{r.method} {r.path}" for r in self.requests if needle.encode("utf-8") in plain_body(r)]

    # -- HTTP ------------------------------------------------------------------------------------
    def handle(self, exchange: Exchange) -> None:
        request = exchange.request
        method, path = request.method, request.path.rstrip("/")
        if method == "GET" and path == "/info":
            exchange.send_json(200, self.info())
        elif method == "POST" and path == "/runs/multipart":
            self._ingest_multipart(request.headers.get("content-type", ""), plain_body(request))
            exchange.send_json(202, {})
        elif method == "POST" and path == "/runs/batch":
            body = request.json() or {}
            self._ingest("post", body.get("post") or [])
            self._ingest("patch", body.get("patch") or [])
            exchange.send_json(202, {})
        elif method == "POST" and path == "/runs":
            self._ingest("post", [request.json() or {}])
            exchange.send_json(202, {})
        elif method == "PATCH" and path.startswith("/runs/"):
            update = {**(request.json() or {}), "id": path.rsplit("/", 1)[-1]}
            self._ingest("patch", [update])
            exchange.send_json(202, {})
        else:
            super().handle(exchange)

    def info(self) -> JSONDict:
        """What ``GET /info`` answers: the upload format of :attr:`ingest`, small batches."""
        return {
            "version": "0.0.0-recorder",
            "instance_flags": {"zstd_compression_enabled": self.ingest == "zstd"},
            "batch_ingest_config": {
                "use_multipart_endpoint": self.ingest != "batch",
                "size_limit": 100,
                "size_limit_bytes": 20_971_520,
                "scale_up_qsize_trigger": 1000,
                "scale_up_nthreads_limit": 16,
                "scale_down_nempty_trigger": 4,
            },
        }

    # -- decoding --------------------------------------------------------------------------------
    def _ingest_multipart(self, content_type: str, raw: bytes) -> None:
        operations: dict[tuple[str, str], JSONDict] = {}
        for part in MultipartDecoder(raw, content_type).parts:
            disposition = part.headers.get(b"Content-Disposition", b"").decode("utf-8")
            match = _PART_NAME.search(disposition)
            if match is None:
                continue
            operation, _, rest = match.group("name").partition(".")
            if operation not in ("post", "patch"):
                continue  # attachments and feedback are not runs
            run_id, _, key = rest.partition(".")
            value = json.loads(part.content) if part.content else None
            entry = operations.setdefault((operation, run_id), {"id": run_id})
            if not key:
                entry.update(value or {})
            elif key in _RUN_FIELDS:
                entry[key] = value
        for (operation, _), data in operations.items():
            self._ingest(operation, [data])

    def _ingest(self, operation: str, items: Iterable[Mapping[str, Any]]) -> None:
        with self._runs_lock:
            for item in items:
                run_id = str(item.get("id") or "")
                if not run_id:
                    continue
                run = self._runs.setdefault(run_id, RecordedRun(run_id))
                run.operations.append(operation)
                for key, value in item.items():
                    if value is None and key in run.data:
                        continue  # a patch leaves out what it does not change
                    run.data[key] = value


def plain_body(request: RecordedRequest) -> bytes:
    """The request body with its ``Content-Encoding`` (zstd, from the SDK's compressed uploads) undone."""
    if request.headers.get("content-encoding", "").lower() != "zstd":
        return request.raw
    import zstandard  # a langsmith dependency; only compressed uploads need it

    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(request.raw), read_across_frames=True)
    return reader.read()
