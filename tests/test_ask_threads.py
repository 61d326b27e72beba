"""``arag ask --thread NAME``: a conversation kept across invocations (issue 25, item 8).

The thread lives in LangGraph's SQLite checkpointer under the cache directory; the agent's read set
comes from the thread's messages, so a follow-up's ``chunk_read`` of a chunk an earlier question
read answers "already read" instead of sending its text again.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from arag_graph.cli.threads import THREAD_STORE
from arag_graph.core.cache import cache_dir
from arag_graph.index.hierarchical import HierarchicalIndex
from tests.cli_run import assert_one_error_line, run_cli

QUESTION = "Who directed Maximum Overdrive?"


def _ask(index: HierarchicalIndex, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    argv = ["ask", QUESTION, "--index", str(index.path), "--model", "offline", "--json", *extra]
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    return json.loads(out)


def _reads(record: dict[str, Any]) -> list[tuple[list[str], int]]:
    return [(s["chunk_ids"], s["tokens"]) for s in record["trajectory"] if s["tool"] == "chunk_read"]


def test_a_second_ask_on_a_thread_is_a_follow_up_that_knows_what_was_read(
    sample_index: HierarchicalIndex, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    thread = f"film-{tmp_path.name}"  # the session's cache is shared: a name of this test's own
    first = _ask(sample_index, capsys, "--thread", thread)
    second = _ask(sample_index, capsys, "--thread", thread)
    assert first["thread"] == second["thread"] == thread
    first_read = _reads(first)[0]
    assert first_read[0] and first_read[1] > 0  # the first question read its chunks in full
    assert _reads(second)[0] == (first_read[0], 0)  # the follow-up's read of them costs nothing

    store = cache_dir() / THREAD_STORE
    with SqliteSaver.from_conn_string(str(store)) as saver:
        saved = saver.get_tuple({"configurable": {"thread_id": f"arag:{thread}"}})
    assert saved is not None
    messages = saved.checkpoint["channel_values"]["messages"]
    assert [m.text for m in messages if isinstance(m, HumanMessage)] == [QUESTION, QUESTION]
    last_read = [m for m in messages if isinstance(m, ToolMessage) and m.name == "chunk_read"][-1]
    assert "already read" in last_read.text

    # Another thread, and a question without one, start from nothing.
    assert _reads(_ask(sample_index, capsys, "--thread", f"other-{tmp_path.name}"))[0] == first_read
    assert _reads(_ask(sample_index, capsys))[0] == first_read


@pytest.mark.parametrize("name", ["", "   ", "x" * 201, "tab\there"])
def test_a_bad_thread_name_is_one_line(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_error_line(*run_cli(["ask", QUESTION, "--model", "offline", "--thread", name], capsys))
    assert "--thread needs a name" in line


def test_an_unusable_thread_store_is_one_line(
    sample_index: HierarchicalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the cache directory should be", encoding="utf-8")
    monkeypatch.setattr("arag_graph.core.cache.cache_dir", lambda: blocked)
    argv = ["ask", QUESTION, "--index", str(sample_index.path), "--model", "offline", "--thread", "t", "--json"]
    line = assert_one_error_line(*run_cli(argv, capsys))
    assert "thread store" in line and "ARAG_CACHE_DIR" in line


@pytest.mark.parametrize(
    ("tables", "named"),
    [
        (
            "CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, data BLOB)",
            "lacks the column(s) checkpoint, checkpoint_id",
        ),
        ("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)", "holds the table(s) 'notes'"),
    ],
    ids=["its-table-other-columns", "other-tables"],
)
def test_a_foreign_thread_store_is_refused_in_one_line_and_left_as_it_was(
    sample_index: HierarchicalIndex,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    tables: str,
    named: str,
) -> None:
    """A ``threads.sqlite`` of another program (its own tables, or a ``checkpoints`` table of other
    columns) is not read as threads, nor written into: one line says so, and the file is unchanged."""
    import sqlite3

    monkeypatch.setattr("arag_graph.core.cache.cache_dir", lambda: tmp_path)
    store = tmp_path / THREAD_STORE
    with contextlib.closing(sqlite3.connect(store)) as conn, conn:
        conn.execute(tables)
    before = store.read_bytes()
    argv = ["ask", QUESTION, "--index", str(sample_index.path), "--model", "offline", "--thread", "t", "--json"]
    line = assert_one_error_line(*run_cli(argv, capsys))
    assert str(store) in line and "is not arag's" in line and named in line and "ARAG_CACHE_DIR" in line
    assert store.read_bytes() == before
