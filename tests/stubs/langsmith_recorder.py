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

And, in memory, the resources ``langsmith.evaluate`` uploads an experiment with (what
``Client`` 0.15 calls from ``evaluate``, ``create_dataset``, ``create_examples``, ``list_examples``,
``create_project``, ``update_project`` and ``create_feedback``):

- datasets: ``GET /datasets`` (by ``name`` or all), ``GET /datasets/<id>``, ``POST /datasets``
  (409 on a duplicate name, as LangSmith);
- examples: ``POST /examples/bulk``, ``POST /examples``, ``GET /examples`` (by ``dataset`` and
  ``id``, paginated with ``offset``/``limit``), ``GET /examples/<id>``;
- experiments (sessions, "projects"): ``POST /sessions``, ``GET /sessions`` (by ``name``),
  ``GET``/``PATCH /sessions/<id>``;
- feedback: ``POST /feedback`` and ``feedback.<id>`` parts of a multipart run upload.

:attr:`LangSmithRecorder.datasets`, :attr:`~LangSmithRecorder.examples`,
:attr:`~LangSmithRecorder.sessions` and :attr:`~LangSmithRecorder.feedback` hold what was stored.

:attr:`LangSmithRecorder.runs` merges each run's creation and its updates into one
:class:`RecordedRun`. Every raw body stays in :attr:`~tests.stubs._http.StubServer.requests`, so a
test can also check that a secret never appears in anything the client sent.
"""

from __future__ import annotations

import io
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal
from urllib.parse import parse_qs

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
        self.tenant_id = str(uuid.uuid4())
        self.datasets: dict[str, JSONDict] = {}
        """Datasets by id, as created through ``POST /datasets``."""
        self.examples: dict[str, JSONDict] = {}
        """Examples by id, in creation order."""
        self.sessions: dict[str, JSONDict] = {}
        """Tracer sessions (projects, experiments) by id."""
        self.feedback: list[JSONDict] = []
        """Feedback items in arrival order (``key``, ``score``, ``run_id``, ...)."""

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
        elif path.startswith(("/datasets", "/examples", "/sessions", "/feedback")):
            status, payload = self._resource(method, path, parse_qs(request.query), request.json())
            exchange.send_json(status, payload)
        else:
            super().handle(exchange)

    # -- datasets, examples, sessions, feedback (what evaluate() uploads) --------------------------
    def experiments(self) -> list[JSONDict]:
        """Sessions that are experiments: those run against a dataset."""
        with self._runs_lock:
            return [s for s in self.sessions.values() if s.get("reference_dataset_id")]

    def examples_of(self, dataset_id: str) -> list[JSONDict]:
        with self._runs_lock:
            return [e for e in self.examples.values() if e["dataset_id"] == dataset_id]

    def _resource(self, method: str, path: str, query: Mapping[str, list[str]], body: Any) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        kind, item = parts[0], (parts[1] if len(parts) > 1 else None)
        with self._runs_lock:
            if kind == "datasets":
                return self._datasets(method, item, query, body)
            if kind == "examples":
                return self._examples(method, item, query, body)
            if kind == "sessions":
                return self._sessions(method, item, query, body)
            if kind == "feedback" and method == "POST" and item is None:
                self.feedback.append(dict(body or {}))
                return 200, dict(body or {})
        return 404, {"detail": f"no route for {method} {path}"}

    def _datasets(self, method: str, item: str | None, query: Mapping[str, list[str]], body: Any) -> tuple[int, Any]:
        if method == "GET" and item is None:
            names = query.get("name")
            found = [d for d in self.datasets.values() if not names or d["name"] in names]
            return 200, _page(found, query)
        if method == "GET" and item in self.datasets:
            return 200, self.datasets[item]
        if method == "POST" and item is None:
            body = dict(body or {})
            if any(d["name"] == body.get("name") for d in self.datasets.values()):
                return 409, {"detail": f"Dataset {body.get('name')} already exists"}
            dataset = {
                "id": str(body.get("id") or uuid.uuid4()),
                "name": body.get("name"),
                "description": body.get("description"),
                "data_type": body.get("data_type") or "kv",
                "created_at": _now(),
                "modified_at": _now(),
                "example_count": 0,
                "session_count": 0,
                "metadata": (body.get("extra") or {}).get("metadata"),
            }
            self.datasets[dataset["id"]] = dataset
            return 200, dataset
        return 404, {"detail": f"dataset {item} not found"}

    def _examples(self, method: str, item: str | None, query: Mapping[str, list[str]], body: Any) -> tuple[int, Any]:
        if method == "POST" and item in (None, "bulk"):
            many = body if item == "bulk" else [body]
            created = []
            for raw in many or []:
                dataset_id = str(raw.get("dataset_id"))
                if dataset_id not in self.datasets:
                    return 404, {"detail": f"dataset {dataset_id} not found"}
                example = {
                    "id": str(raw.get("id") or uuid.uuid4()),
                    "dataset_id": dataset_id,
                    "inputs": raw.get("inputs"),
                    "outputs": raw.get("outputs"),
                    "metadata": raw.get("metadata"),
                    "created_at": raw.get("created_at") or _now(),
                    "modified_at": _now(),
                }
                self.examples[example["id"]] = example
                self.datasets[dataset_id]["example_count"] += 1
                created.append(example)
            return 200, created if item == "bulk" else created[0]
        if method == "GET" and item is None:
            datasets, ids = query.get("dataset"), query.get("id")
            found = [
                e
                for e in self.examples.values()
                if (not datasets or e["dataset_id"] in datasets) and (not ids or e["id"] in ids)
            ]
            return 200, _page(found, query)
        if method == "GET" and item in self.examples:
            return 200, self.examples[item]
        return 404, {"detail": f"example {item} not found"}

    def _sessions(self, method: str, item: str | None, query: Mapping[str, list[str]], body: Any) -> tuple[int, Any]:
        if method == "GET" and item is None:
            names = query.get("name")
            found = [s for s in self.sessions.values() if not names or s["name"] in names]
            return 200, _page(found, query)
        if method == "GET" and item in self.sessions:
            return 200, self.sessions[item]
        if method == "POST" and item is None:
            body = dict(body or {})
            session = {
                "id": str(body.get("id") or uuid.uuid4()),
                "name": body.get("name"),
                "description": body.get("description"),
                "extra": body.get("extra"),
                "reference_dataset_id": body.get("reference_dataset_id"),
                "start_time": _now(),
                "end_time": None,
                "tenant_id": self.tenant_id,
            }
            if session["reference_dataset_id"] in self.datasets:
                self.datasets[session["reference_dataset_id"]]["session_count"] += 1
            self.sessions[session["id"]] = session
            return 200, session
        if method == "PATCH" and item in self.sessions:
            session = self.sessions[item]
            session.update({k: v for k, v in dict(body or {}).items() if v is not None})
            return 200, session
        return 404, {"detail": f"session {item} not found"}

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
            if operation == "feedback" and part.content:
                with self._runs_lock:
                    self.feedback.append(json.loads(part.content))
                continue
            if operation not in ("post", "patch"):
                continue  # attachments are not runs
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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _page(items: list[JSONDict], query: Mapping[str, list[str]]) -> list[JSONDict]:
    """``offset``/``limit`` paging, as the client's ``_get_paginated_list`` walks it."""
    offset = int((query.get("offset") or ["0"])[0])
    limit = int((query.get("limit") or ["100"])[0])
    return items[offset : offset + limit]
