"""The file rule on a real ``langgraph dev`` server: no index is read through a symbolic link.

The operator's index root is itself reached through a link (their choice, which must work). Below it
sit a real index, an index planted with build files that link to a private index outside the root,
a link to that private index, and an empty directory. A remote caller (``langgraph_sdk``) names each:
the real one answers; every other run is refused with its one-line reason (never "An internal error
occurred", never a blocking-call traceback from a filesystem check on the server's event loop),
and neither the refusals nor the threads' checkpoints name the operator's directories.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arag_graph.index.layout import BUILDS, CURRENT
from tests.reliability import record
from tests.slow.devserver import DevServer, running_dev_server

pytestmark = [pytest.mark.slow, pytest.mark.integration]

QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, sample_index: Any, exported_encoder: Path
) -> Iterator[tuple[DevServer, Path, Path]]:
    base = tmp_path_factory.mktemp("served-files")
    private = base / "private"
    shutil.copytree(sample_index.path, private, symlinks=True)
    root = base / "indexes"
    root.mkdir()
    shutil.copytree(private, root / "real", symlinks=True)
    planted = root / "planted"
    shutil.copytree(private, planted, symlinks=True)
    build = (planted / CURRENT).read_text(encoding="utf-8").strip()
    for path in (planted / BUILDS / build).iterdir():
        if path.name.startswith(("chunks", "keywords")):
            path.unlink()
            path.symlink_to(private / BUILDS / build / path.name)
    (root / "linked").symlink_to(private, target_is_directory=True)
    (root / "empty").mkdir()
    via = base / "root-link"
    via.symlink_to(root, target_is_directory=True)
    # gpt-4o-mini is allowed but the operator set no key: its runs fail inside a graph node
    env = {"ARAG_INDEX_ROOT": str(via), "ARAG_INDEX": str(root / "real"), "ARAG_ALLOWED_MODELS": "gpt-4o-mini"}
    (base / "server").mkdir()
    with running_dev_server(base / "server", env, encoder=exported_encoder) as server:
        yield server, base, root


def run(server: DevServer, index_path: str) -> tuple[str, Any, str]:
    """(thread id, the run's output or the error the client received, the error or "")."""
    client = server.client()
    thread = client.threads.create()
    try:
        out: Any = client.runs.wait(
            thread["thread_id"], "naive_rag", input={"question": QUESTION}, context={"index_path": index_path}
        )
    except Exception as exc:  # the SDK raises the run's error with the message the server sent
        return thread["thread_id"], None, str(exc)
    return thread["thread_id"], out, str(out.get("error") or "") if isinstance(out, dict) else ""


def test_the_root_may_be_a_link_and_the_real_index_answers(served: tuple[DevServer, Path, Path]) -> None:
    server, _, _ = served
    with server.log_on_failure():
        _, out, error = run(server, "real")
        assert not error and out["answer"], (error, out)
    record("served_files", "a run under a root reached through a link", trials=1)


@pytest.mark.parametrize(
    ("index_path", "fragment"),
    [
        ("planted", "is a symbolic link, which arag does not follow"),
        ("linked", "'linked' is a symbolic link"),
        ("empty", "no index found"),
    ],
)
def test_no_served_run_reads_an_index_through_a_link(
    served: tuple[DevServer, Path, Path], index_path: str, fragment: str
) -> None:
    server, base, _ = served
    client = server.client()
    with server.log_on_failure():
        thread_id, out, error = run(server, index_path)
        assert out is None, f"the run was not refused: {out}"
        assert error.startswith("RunRefused: ") and fragment in error, error
        assert "\n" not in error.strip() and "internal error" not in error.lower(), error
        assert str(base) not in error, error
        history = json.dumps(client.threads.get_history(thread_id), default=str)
        assert str(base) not in history, "a checkpoint names the operator's directories"
        assert "BlockingError" not in server.log_tail(200_000)
    record("served_files", f"a run naming {index_path!r}", trials=1, faults=1, survived=1)


def test_an_error_inside_a_node_reaches_the_caller_as_its_line(served: tuple[DevServer, Path, Path]) -> None:
    """An allowed model without the operator's key fails in the node that builds it (an AragError,
    not a ValueError): the caller gets its one line, not "An internal error occurred"."""
    server, base, _ = served
    client = server.client()
    with server.log_on_failure():
        thread = client.threads.create()
        try:
            out: Any = client.runs.wait(
                thread["thread_id"],
                "naive_rag",
                input={"question": QUESTION},
                context={"index_path": "real", "model": "gpt-4o-mini"},
            )
        except Exception as exc:  # the SDK raises the run's error with the message the server sent
            error = str(exc)
        else:
            error = str(out.get("error") if isinstance(out, dict) else out)
        assert "ModelSpecError" in error and "needs an API key" in error, error
        assert "\n" not in error.strip() and "internal error" not in error.lower(), error
        assert str(base) not in error, error
    record("served_files", "an AragError raised inside a node", trials=1, faults=1, survived=1)
