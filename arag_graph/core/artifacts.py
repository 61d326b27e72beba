"""What a tool message's artifact says, read the one checked way, and the read set it gives.

Every retrieval tool returns ``(content, artifact)``; the artifact records what the call returned
(tokens, chunk IDs, the chunks whose full text it holds). Several layers read artifacts: the
tools' read set, the offline policy, the run pipeline's step figures and the CLI. A served run's
caller can send tool messages of its own in ``messages``, artifacts included, so the reader lives
here, in the bottom layer below all of them, and no one reads an artifact unchecked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Protocol

from langchain_core.messages import ToolMessage

_MAX_ARTIFACT_IDS = 1000
"""More chunk IDs than any tool call returns (top_k is at most 20, chunk_read's neighbours triple it)."""


class ChunkLookup(Protocol):
    """What :func:`read_in` needs of an index: a chunk by its ID (None when there is none)."""

    def get_chunk(self, chunk_id: str) -> Any: ...


def _ids(value: Any) -> list[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        return []
    return [str(i) for i in value[:_MAX_ARTIFACT_IDS] if isinstance(i, (str, int)) and not isinstance(i, bool)]


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0
    return max(0, min(int(value), 10**9))


def artifact_of(message: Any) -> dict[str, Any]:
    """A tool message's artifact as the graphs read it: known keys of known types, anything else dropped.

    Artifacts record what a tool call returned (:mod:`arag_graph.tools.toolkit`), but a served run's
    caller can send tool messages of its own in ``messages``, artifacts included, so no graph reads
    one unchecked: one reader, which never raises. Whether its ``read`` chunks were really returned
    is for :func:`read_in` to check against the message's text.
    """
    raw = message.artifact if isinstance(message, ToolMessage) and isinstance(message.artifact, dict) else {}
    artifact: dict[str, Any] = {
        "tokens": _count(raw.get("tokens")),
        "chunk_ids": _ids(raw.get("chunk_ids")),
        "read": _ids(raw.get("read")),
        "args": dict(raw["args"]) if isinstance(raw.get("args"), dict) else {},
        "error": raw.get("error") is True,
        "not_run": raw.get("not_run") is True,
    }
    if isinstance(raw.get("warning"), str) and raw["warning"]:
        artifact["warning"] = raw["warning"][:500]
    return artifact


def read_in(messages: Iterable[Any] | None, index: ChunkLookup | None = None) -> list[str]:
    """C_read of a conversation: chunks whose full text its tool messages already returned, in order.

    The artifact says which (read through :func:`artifact_of`, never raising). With ``index``, a
    chunk counts only when the message really holds its text: a caller's own tool message cannot
    mark a chunk as read that the model never saw.
    """
    read: dict[str, None] = {}
    for message in messages or ():
        if not isinstance(message, ToolMessage):
            continue
        content = message.text if index is not None else ""
        for cid in artifact_of(message)["read"]:
            chunk = index.get_chunk(cid) if index is not None else None
            if index is None or (chunk is not None and chunk.text in content):
                read[cid] = None
    return list(read)
