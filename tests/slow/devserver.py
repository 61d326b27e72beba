"""Starting a real ``langgraph dev`` server for tests, shared by the tests/slow modules that need one.

The server runs as a subprocess from the repository root on a free port, with the offline policy,
no API keys, tracing off and a fresh cache directory, so its first run exports the default encoder
to ONNX (about 30 s of CPU) and builds the bundled sample index the way a new user's first Studio
run does. A server that stands for an operator whose machine has run arag before gets the session's
exported encoder in its cache instead (``encoder=``): the export is the same every time, and
tests/slow/test_langgraph_dev.py's server still does it as a new user's does. It is started the way
the README says (``langgraph dev --no-browser --port N``, no ``--host``), so the address it binds to
is the default one a user gets; tests check that it is localhost.

No ``--allow-blocking``: the in-memory server flags blocking calls made on its event loop
(blockbuster) and fails the run. Our graphs comply instead: sync nodes and edges run in LangGraph's
executor, and the model nodes prepare their call (index loading, token counting) in a worker
thread before awaiting the model (``arag_graph.run.nodes.model_node``). Running without the flag is
what keeps that true. ``--no-reload`` keeps the file watcher from restarting the server when
tests write files.
"""

from __future__ import annotations

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

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.client import LangGraphClient, SyncLangGraphClient

from tests.fakes import seed_encoder

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "langgraph.json"
STARTUP_TIMEOUT = 180.0
RUN_TIMEOUT = 300.0
_DROPPED_ENV_PREFIXES = ("LANGSMITH_", "LANGCHAIN_", "OPENAI_", "ARAG_")


@dataclass
class DevServer:
    """A running ``langgraph dev`` process and where to reach it."""

    url: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, chars: int = 20_000) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
        return text[-chars:]

    def client(self) -> SyncLangGraphClient:
        return get_sync_client(url=self.url, timeout=RUN_TIMEOUT)

    def async_client(self) -> LangGraphClient:
        return get_client(url=self.url, timeout=RUN_TIMEOUT)

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


def server_env(cache: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment minus any model or tracing setting, plus the offline set-up (and ``extra``)."""
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
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",  # the CLI would post usage data to an outside server
        }
    )
    env.update(extra or {})
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


@contextmanager
def running_dev_server(
    workdir: Path, env: dict[str, str] | None = None, *, encoder: Path | None = None
) -> Iterator[DevServer]:
    """Start ``langgraph dev`` as the README does and stop it (with all its children) afterwards.

    ``env`` adds to the server's environment (the operator's settings: keys, allowed endpoints).
    ``encoder``: an exported encoder file the server's cache starts with (:func:`seed_encoder`).
    """
    executable = Path(sys.executable).with_name("langgraph")
    if not executable.exists():
        pytest.skip("langgraph-cli is not installed next to this Python (pip install 'langgraph-cli[inmem]')")
    if encoder is not None:
        seed_encoder(workdir / "cache", encoder)
    port = free_port()
    command = [str(executable), "dev", "--config", str(CONFIG), "--port", str(port), "--no-browser", "--no-reload"]
    command += ["--n-jobs-per-worker", "10"]  # as the README says: `langgraph dev` alone runs one run at a time
    log_path = workdir / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env=server_env(workdir / "cache", env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so the teardown reaches every child
        )
    server = DevServer(f"http://127.0.0.1:{port}", port, process, log_path)
    try:
        wait_until_ready(server, STARTUP_TIMEOUT)
        yield server
    finally:
        stop(process)
    if encoder is not None:  # the server found the encoder it was given: it exported none of its own
        exported = sorted(path.name for path in (workdir / "cache" / "encoders").iterdir())
        assert exported == [encoder.name], f"the server exported an encoder beside the one it was given: {exported}"


def listening_addresses(port: int | None = None, inodes: set[str] | None = None) -> set[str]:
    """Local addresses (hex, as in /proc/net/tcp) with a socket listening on ``port``, or owned by
    one of the socket ``inodes`` (Linux only)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if fields[3] != "0A":  # 0A: LISTEN
                continue
            if (port is not None and int(hex_port, 16) == port) or (inodes is not None and fields[9] in inodes):
                found.add(address)
    return found


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1, as /proc shows them
