"""The thread store of ``arag ask --thread NAME``: a conversation kept across invocations."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any

from arag_graph.core.errors import AragError

THREAD_STORE = "threads.sqlite"
"""The SQLite checkpointer of ``arag ask --thread``, in the cache directory."""


def thread_name(name: str | None) -> str | None:
    """``--thread NAME`` checked: non-empty, at most 200 characters, no control characters (None: no thread)."""
    if name is None:
        return None
    name = name.strip()
    if not name or len(name) > 200 or any(not ch.isprintable() for ch in name):
        raise AragError("--thread needs a name of 1 to 200 printable characters, e.g. --thread research")
    return name


@contextlib.contextmanager
def thread_store(thread: str | None) -> Iterator[Any]:
    """The checkpointer that keeps ``arag ask --thread`` conversations (None without a thread).

    LangGraph's SQLite checkpointer, one file in the cache directory (:func:`arag_graph.core.cache.cache_dir`):
    a later ``arag ask --thread NAME`` continues the conversation, so the agent's read set (derived
    from the thread's messages) still holds what the earlier questions read.
    """
    if thread is None:
        yield None
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    from arag_graph.core.cache import cache_dir

    path = cache_dir() / THREAD_STORE
    conn: sqlite3.Connection | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False)  # as SqliteSaver.from_conn_string does
        saver = SqliteSaver(conn)
        saver.setup()
    except (OSError, sqlite3.Error) as exc:
        if conn is not None:
            conn.close()
        raise AragError(
            f"the thread store {path} cannot be used ({exc}); set ARAG_CACHE_DIR to a writable directory"
        ) from None
    try:
        yield saver
    finally:
        conn.close()
