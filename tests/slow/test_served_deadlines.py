"""A served run against a model server that drips one byte at a time ends, under a real ``langgraph dev``.

Issue 22, section 3: such a run stayed active for over 7 minutes, because every read got a byte
before its timeout. The operator allows one model endpoint, a drip server
(:mod:`tests.stubs.silent_server`, dripping); a remote caller (``langgraph_sdk``) runs a graph on it, once
with the operator's limits from the environment and once with the run's own ``timeout`` and
``max_retries`` fields. Each run must end with its one-line "timed out" reason, and the drip server
must have seen the server's client leave, once per attempt. No timed assertion: the drip server
gives up after its ``limit`` (an outcome refused here) and pytest-timeout catches a hang.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import sentinel_key
from tests.reliability import record
from tests.slow.devserver import DevServer, running_dev_server
from tests.stubs.silent_server import CLIENT_LEFT, SilentServer
from tests.test_deadlines import chroma_start
from tests.test_endpoint_rule import plant_chroma_index

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(600)]

QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"


@pytest.fixture(scope="module")
def chroma_drips(tmp_path_factory: pytest.TempPathFactory, sample_index: Any) -> Iterator[tuple[Path, SilentServer]]:
    """An index root holding indexes on a Chroma server that drips, once from its first request on
    (the client's start-up) and once after its start-up (opening the collection)."""
    root = tmp_path_factory.mktemp("chroma-drip-root")
    with SilentServer(drip=True, limit=60.0, answer=chroma_start) as drip:
        plant_chroma_index(sample_index.path, root / "drips-at-open", drip.root_url)
        yield root, drip


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
    sample_index: Any,
    chroma_drips: tuple[Path, SilentServer],
    exported_encoder: Path,
) -> Iterator[tuple[DevServer, SilentServer]]:
    root, chroma = chroma_drips
    with SilentServer(drip=True, limit=60.0) as drip:
        plant_chroma_index(sample_index.path, root / "drips-at-start", drip.root_url)
        env = {
            "ARAG_INDEX_ROOT": str(root),
            "ARAG_ALLOWED_CHROMA_URLS": f"{chroma.root_url},{drip.root_url}",
            "ARAG_CHROMA_TIMEOUT": "1",
            "OPENAI_API_KEY": sentinel_key("operator-deadlines"),
            "ARAG_ALLOWED_BASE_URLS": drip.url,
            "ARAG_ALLOWED_MODELS": "gpt-4o-mini",
            "ARAG_INDEX": str(sample_index.path),  # the operator's index, built already
            "ARAG_MODEL_TIMEOUT": "2",
            "ARAG_MODEL_RETRIES": "0",
        }
        workdir = tmp_path_factory.mktemp("langgraph-dev-deadlines")
        with running_dev_server(workdir, env, encoder=exported_encoder) as server:
            yield server, drip


@pytest.mark.parametrize(
    ("graph", "limits", "attempts"),
    [("naive_rag", {}, 1), ("arag", {"timeout": 1.5, "max_retries": 1}, 2)],
    ids=["operator-limits", "run-limits"],
)
def test_a_served_run_on_a_dripping_model_ends(
    served: tuple[DevServer, SilentServer], graph: str, limits: dict[str, Any], attempts: int
) -> None:
    server, drip = served
    client = server.client()
    before = len(drip.outcomes())
    with server.log_on_failure():
        thread = client.threads.create()
        run = client.runs.create(
            thread["thread_id"],
            graph,
            input={"question": QUESTION},
            context={"model": "gpt-4o-mini", "base_url": drip.url, **limits},
        )
        client.runs.join(thread["thread_id"], run["run_id"])
        status = client.runs.get(thread["thread_id"], run["run_id"])["status"]
        assert status in ("success", "error", "timeout"), status  # ended, not still active
        values: Any = client.threads.get_state(thread["thread_id"])["values"]
        error = values.get("error") or ""
        assert "timed out" in error and "\n" not in error, values
    outcomes = drip.outcomes()[before:]
    assert outcomes == [CLIENT_LEFT] * attempts, outcomes
    record("served_security", f"{graph}: model drips one byte at a time ({'/'.join(limits) or 'operator'})", trials=1)


@pytest.mark.parametrize("index_path", ["drips-at-start", "drips-at-open"])
def test_a_served_run_on_a_dripping_chroma_server_ends(
    served: tuple[DevServer, SilentServer], chroma_drips: tuple[Path, SilentServer], index_path: str
) -> None:
    """The run's index is on a Chroma server the operator allows, which drips: from the client's
    first request on (its start-up, which Chroma sends without a timeout) or once the client has
    started. The run ends with its one-line "timed out" reason and the server sees the client leave."""
    server, model_drip = served
    drip = model_drip if index_path == "drips-at-start" else chroma_drips[1]
    client = server.client()
    before = len(drip.outcomes())
    with server.log_on_failure():
        thread = client.threads.create()
        try:
            out: Any = client.runs.wait(
                thread["thread_id"], "naive_rag", input={"question": QUESTION}, context={"index_path": index_path}
            )
        except Exception as exc:  # the SDK raises the run's error with the message the server sent
            error = str(exc)
        else:
            error = str(out.get("error") if isinstance(out, dict) else out)
        assert "did not answer within 1 s" in error and "timed out" in error and "\n" not in error.strip(), error
    outcomes = drip.outcomes()[before:]
    assert outcomes and set(outcomes) == {CLIENT_LEFT}, outcomes
    record("served_security", f"Chroma server drips ({index_path})", trials=1, faults=1, survived=1)
