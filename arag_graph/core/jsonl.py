"""JSON that every reader accepts, and the one resumable JSON Lines writer.

Two writers append records as they are produced and pick up after a kill: ``arag eval`` (one
prediction per question, :mod:`arag_graph.evaluators.runner`) and ``arag sample-chains`` (kept
chains and a progress line per question, :mod:`arag_graph.corag.rejection_sampling`). Both use
:class:`JsonLinesFile`, which is written here rather than taken from the ``jsonlines`` package
because what matters is not the format but the recovery rules:

- A line cut short by a kill (it starts like a record, ``{``, and does not parse) is dropped.
- A line that parses but is not a record of this file's kind (``null``, ``[]``, someone else's
  JSON) means the file is not the one arag wrote: it is refused with one line, and nothing in it
  is touched.
- A record of this kind that is incomplete (``"prediction": null``) is set aside into
  ``<file>.rejected`` and its key counts as not done, so the work is done again instead of being
  reported from a broken record.
- With unique keys, a later duplicate of a key is dropped.

When recovery changed anything, the file is rewritten through a temporary file and a rename, so
appends always start on a clean line. Every record is serialised by :func:`dumps`: strict JSON (a
non-finite number, which Python would write as ``NaN`` or ``Infinity``, becomes ``null``) with
API keys and URL credentials redacted.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from arag_graph.core.errors import AragError
from arag_graph.core.safety import redact


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None, as JavaScript's ``JSON.stringify`` does."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def scrub(value: Any) -> Any:
    """``value`` with secrets redacted from every string (see :func:`arag_graph.core.safety.redact`)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {scrub(k) if isinstance(k, str) else k: scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value


def dumps(value: Any, *, indent: int | None = None) -> str:
    """Strict JSON of ``value``, secrets redacted; what arag writes to files and to ``--json`` output."""
    return json.dumps(scrub(finite(value)), ensure_ascii=False, allow_nan=False, indent=indent, default=str)


def replace_file(path: Path, data: bytes) -> None:
    """Write through a temporary file and a rename: a kill or a full disk leaves the old file whole.

    The temporary file is removed when the write fails, so a failed write leaves nothing behind.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _shown(line: bytes) -> str:
    text = line.decode("utf-8", "replace").strip()
    return text if len(text) <= 40 else text[:37] + "..."


class JsonLinesFile:
    """An append-only JSON Lines file of one kind of record, read back after a kill.

    ``key`` names the field that identifies a record (a question ID); ``owns(record)`` says whether a
    parsed line is a record of this kind (a mapping with ``key``, at least), ``complete(record)``
    whether it can be used as it is; ``unique`` keeps one record per key. ``what`` (``"an arag
    prediction record"``) and ``fix`` (what to do about a foreign line) make the one-line refusal.
    ``records`` holds the usable records in file order, ``keys`` the first record of each key.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        key: str,
        owns: Callable[[Any], bool],
        complete: Callable[[Mapping[str, Any]], bool] = lambda _record: True,
        unique: bool = True,
        what: str = "a record arag wrote",
        fix: str = "use another output file",
    ) -> None:
        self.path = Path(path)
        self.key, self.owns, self.complete, self.unique = key, owns, complete, unique
        self.what, self.fix = what, fix
        self.lock = threading.Lock()
        self.records: list[dict[str, Any]] = []
        self.keys: dict[str, dict[str, Any]] = {}
        self.set_aside = 0
        if self.path.is_dir():
            raise AragError(f"{self.path} is a directory, not a JSON Lines file; {fix}")
        if self.path.exists():
            self._recover()

    @property
    def rejected_path(self) -> Path:
        return self.path.with_name(self.path.name + ".rejected")

    def _recover(self) -> None:
        raw = self.path.read_bytes()
        kept: list[bytes] = []
        rejected: list[bytes] = []
        for number, line in enumerate(raw.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:  # UnicodeDecodeError included: a kill can cut a character in two
                if line.lstrip().startswith(b"{"):
                    continue  # a record cut short by a kill
                raise AragError(f"{self.path} line {number} is not {self.what} ({_shown(line)}); {self.fix}") from None
            if not self.owns(record):
                raise AragError(f"{self.path} line {number} is not {self.what} ({_shown(line)}); {self.fix}")
            if not self.complete(record):
                rejected.append(line)
                continue
            key = str(record[self.key])
            if self.unique and key in self.keys:
                continue
            self.keys.setdefault(key, record)
            self.records.append(record)
            kept.append(line)
        rewritten = b"".join(line + b"\n" for line in kept)
        if rewritten == raw:
            return
        if rejected:
            with self.rejected_path.open("ab") as fh:
                fh.write(b"".join(line + b"\n" for line in rejected))
                fh.flush()
                os.fsync(fh.fileno())
            self.set_aside = len(rejected)
        replace_file(self.path, rewritten)

    def add(self, record: Mapping[str, Any]) -> bool:
        """Append ``record``; False (and nothing written) when its key is already there in a unique file."""
        return bool(self.add_many([record]))

    def add_many(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Append ``records`` in one write (made durable before returning); returns how many were written."""
        with self.lock:
            fresh: list[Mapping[str, Any]] = []
            seen: set[str] = set()
            for record in records:
                key = str(record[self.key])
                if self.unique and (key in self.keys or key in seen):
                    continue
                seen.add(key)
                fresh.append(record)
            if not fresh:
                return 0
            lines = [dumps(r) for r in fresh]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write("".join(line + "\n" for line in lines))
                fh.flush()
                os.fsync(fh.fileno())
            # What was written, not what was given: resuming reads the same records back.
            written: list[dict[str, Any]] = [json.loads(line) for line in lines]
            for record in written:
                self.keys.setdefault(str(record[self.key]), record)
                self.records.append(record)
            return len(written)


def json_kind(value: Any) -> str:
    """A JSON-flavoured name for the type of ``value`` ("a string", "an object"), as users see it in their file.

    One-line errors about corpus and question files say what was found where something else was
    expected, in the words of the file's format rather than Python's.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
