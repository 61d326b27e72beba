"""The Studio path: ``langgraph dev`` serves the graphs of langgraph.json; ``langgraph_sdk`` drives them.

The server runs as a subprocess from the repository root, bound to 127.0.0.1 on a free port, with
the offline policy, no API keys, tracing off and a fresh cache directory, so its first run builds
the bundled sample index (20 to 40 s on two cores) the way a new user's first Studio run does.

No ``--allow-blocking``: the in-memory server flags blocking calls made on its event loop
(blockbuster) and fails the run. Our graphs comply instead: sync nodes and edges run in LangGraph's
executor, and the model nodes prepare their call (index loading, token counting) in a worker
thread before awaiting the model (``arag_graph.nodes.model_node``). Running without the flag is
what keeps that true. ``--no-reload`` keeps the file watcher from restarting the server when
tests write files.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "langgraph.json"
QUESTIONS = json.loads((REPO / "arag_graph" / "data" / "sample" / "questions.json").read_text(encoding="utf-8"))
QUESTION = QUESTIONS[0]["question"]
CAP = 3  # below the offline policy's plan for this question, so the cap decides the step count
STARTUP_TIMEOUT = 180.0
RUN_TIMEOUT = 300.0
_DROPPED_ENV_PREFIXES = ("LANGSMITH_", "LANGCHAIN_", "OPENAI_", "ARAG_")


@dataclass
class DevServer:
    """A running ``langgraph dev`` process and where to reach it."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, chars: int = 20_000) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
        return text[-chars:]

    def client(self) -> SyncLangGraphClient:
        return get_sync_client(url=self.url, timeout=RUN_TIMEOUT)

    @contextmanager
    def log_on_failure(self) -> Iterator[None]:
        """Print the server's log when the block fails (pytest shows a failing test's stdout)."""
        try:
            yield
        except BaseException:
            print(f"----- langgraph dev log ({self.log_path}) -----\n{self.log_tail()}")
            raise


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(cache: Path) -> dict[str, str]:
    """The test's environment minus any model or tracing setting, plus the offline set-up."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_ENV_PREFIXES)}
    env.update(
        {
            "ARAG_CACHE_DIR": str(cache),
            "ARAG_MODEL": "offline",
            "LANGSMITH_TRACING": "false",
            "ANONYMIZED_TELEMETRY": "False",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def wait_until_ready(server: DevServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"langgraph dev exited with {server.process.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(f"{server.url}/ok", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"langgraph dev not ready after {timeout:.0f} s:\n{server.log_tail()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """End the server's whole process group (uvicorn workers included), politely first."""
    if process.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    executable = Path(sys.executable).with_name("langgraph")
    if not executable.exists():
        pytest.skip("langgraph-cli is not installed next to this Python (pip install 'langgraph-cli[inmem]')")
    workdir = tmp_path_factory.mktemp("langgraph-dev")
    port = free_port()
    command = [
        str(executable),
        "dev",
        "--config",
        str(CONFIG),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-browser",
        "--no-reload",
    ]
    log_path = workdir / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env=server_env(workdir / "cache"),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so the teardown reaches every child
        )
    server = DevServer(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_until_ready(server, STARTUP_TIMEOUT)
        yield server
    finally:
        stop(process)


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on ``port`` (from /proc, Linux only)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


# -----------------------------------------------------------------------------------------------


def test_server_binds_to_localhost_only(dev_server: DevServer) -> None:
    port = int(dev_server.url.rsplit(":", 1)[1])
    addresses = listening_addresses(port)
    if not addresses:
        pytest.skip("cannot read listening sockets from /proc on this system")
    assert addresses == {"0100007F"}, addresses  # 127.0.0.1, little-endian hex


def test_both_graphs_are_served_with_their_configuration_forms(dev_server: DevServer) -> None:
    client = dev_server.client()
    with dev_server.log_on_failure():
        assistants = client.assistants.search(limit=20)
        by_graph = {a["graph_id"]: a for a in assistants}
        assert {"arag", "arag_naive"} <= set(by_graph)
        listed = json.loads(CONFIG.read_text(encoding="utf-8"))["graphs"]
        assert set(listed) == set(by_graph)  # every graph of langgraph.json, and nothing else

        for graph_id in ("arag", "arag_naive"):
            schemas = client.assistants.get_schemas(by_graph[graph_id]["assistant_id"])
            form = schemas["context_schema"]  # what Studio renders as the configuration form
            assert form is not None, f"{graph_id} exposes no context schema"
            properties = form["properties"]
            assert properties["max_steps"]["default"] == 15
            assert properties["top_k"]["default"] == 5
            assert {"model", "temperature", "system_prompt", "message_token_budget"} <= set(properties)
            assert {"question", "messages"} <= set(schemas["input_schema"]["properties"])
            outputs = set(schemas["output_schema"]["properties"])
            assert {"answer", "citations", "read_chunks", "retrieved_tokens", "steps", "trajectory"} <= outputs

        arag_form = client.assistants.get_schemas(by_graph["arag"]["assistant_id"])["context_schema"]
        assert set(arag_form["properties"]["tools"]["enum"]) >= {"full", "no_chunk_read"}


def test_run_through_the_sdk_returns_answer_and_state_fields(dev_server: DevServer) -> None:
    client = dev_server.client()
    with dev_server.log_on_failure():
        thread = client.threads.create()
        out: dict[str, Any] = client.runs.wait(  # type: ignore[assignment]
            thread["thread_id"], "arag", input={"question": QUESTION}, context={"max_steps": CAP}
        )
        assert out.get("error") is None, out.get("error")
        assert out["answer"].strip()
        assert out["read_chunks"], "the run read no chunk"
        assert out["steps"] == CAP  # the context reached the graph: the offline plan is longer
        assert len(out["trajectory"]) == out["steps"]
        assert out["retrieved_tokens"] > 0
        assert out["retrieved_tokens"] == sum(s["tokens"] for s in out["trajectory"])
        assert out["citations"] and set(out["citations"]) <= set(out["read_chunks"])

        # The same values are the thread's checkpointed state, which Studio shows.
        state = client.threads.get_state(thread["thread_id"])["values"]
        assert state["read_chunks"] == out["read_chunks"]
        assert state["steps"] == out["steps"]


def test_streamed_follow_up_on_the_same_thread(dev_server: DevServer) -> None:
    """Studio streams node updates; a second question on the thread starts its own step count."""
    client = dev_server.client()
    with dev_server.log_on_failure():
        thread = client.threads.create()
        first = client.runs.wait(thread["thread_id"], "arag", input={"question": QUESTION}, context={"max_steps": 2})
        assert first["steps"] == 2  # type: ignore[index]

        follow_up = QUESTIONS[1]["question"]
        nodes: list[str] = []
        for part in client.runs.stream(
            thread["thread_id"],
            "arag",
            input={"messages": [{"role": "user", "content": follow_up}]},
            context={"max_steps": CAP},
            stream_mode="updates",
        ):
            if part.event == "updates" and isinstance(part.data, dict):
                nodes.extend(part.data)
            assert part.event != "error", part.data
        assert nodes[0] == "start" and nodes[-1] == "finish"
        assert {"agent", "tools", "synthesize"} <= set(nodes)

        state = client.threads.get_state(thread["thread_id"])["values"]
        assert state["steps"] == CAP
        assert state["answer"].strip()
        asked = [m["content"] for m in state["messages"] if m["type"] == "human"]
        assert asked.index(QUESTION) < asked.index(follow_up)  # one history, in order
