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
        foreign = _foreign_tables(conn, _checkpointer_tables(SqliteSaver))
        if foreign:
            conn.close()
            raise AragError(
                f"the thread store {path} is not arag's ({foreign}); move it away, or set ARAG_CACHE_DIR "
                "to another directory"
            )
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


def _columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """The tables of a SQLite database and their columns (SQLite's own tables left out)."""
    names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    # Names come from the database itself, quoted as SQLite quotes identifiers.
    return {
        name: {str(row[1]) for row in conn.execute(f'PRAGMA table_info("{name.replace(chr(34), chr(34) * 2)}")')}
        for name in names
        if not name.startswith("sqlite_")
    }


def _checkpointer_tables(saver_class: Any) -> dict[str, set[str]]:
    """The tables (and columns) the installed checkpointer creates: asked of it on a scratch
    database, so the check follows whatever version of langgraph-checkpoint-sqlite is installed."""
    scratch = sqlite3.connect(":memory:", check_same_thread=False)
    try:
        saver_class(scratch).setup()
        return _columns(scratch)
    finally:
        scratch.close()


def _foreign_tables(conn: sqlite3.Connection, expected: dict[str, set[str]]) -> str:
    """What in the store is not the checkpointer's (empty when nothing is): a table it does not create,
    or one of its tables without the columns it reads. Checked before anything is written, so a
    database of another program named like the store is neither changed nor read as threads."""
    found = _columns(conn)
    others = sorted(set(found) - set(expected))
    if others:
        return f"it holds the table(s) {', '.join(repr(name[:40]) for name in others[:3])}"
    for name, columns in sorted(found.items()):
        lacking = sorted(expected[name] - columns)
        if lacking:
            return f"its table {name!r} lacks the column(s) {', '.join(lacking[:3])}"
    return ""
