"""Serving the installed package (issue 37): after ``pip install arag-graph``, a three-line
``langgraph.json`` in an otherwise empty directory serves the package's graphs.

``graphs/`` was not in the wheel, so a user of the installed package had to write entry modules of
their own. The entry modules now ship as ``arag_graph.served``. The test builds the wheel from a
copy of the sources, installs it into a new virtual environment (the dependencies are reused from
the running one, so nothing is downloaded), checks that ``arag_graph`` imports from that environment,
and starts ``langgraph dev`` there from an empty directory holding only the three-line file
(no ``PYTHONPATH``, no checkout): a run of ``arag`` through the SDK answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from tests.fakes import seed_encoder
from tests.slow.devserver import DevServer, free_port, stop, wait_until_ready
from tests.test_packaging import build_wheel, source_copy

pytestmark = [pytest.mark.slow, pytest.mark.integration]

# As docs/guide/serving.md gives it. ``dependencies`` is what ``langgraph build`` installs (``langgraph
# dev`` requires the key and uses the environment it runs in).
LANGGRAPH_JSON = """{"dependencies": ["arag-graph"],
 "graphs": {"arag": "arag_graph.served.arag:graph", "corag": "arag_graph.served.corag:graph"},
 "env": {"ARAG_MODEL": "offline"}}
"""
QUESTION = "Who directed Maximum Overdrive?"


def _dependency_dirs() -> list[str]:
    """The running interpreter's site-packages folders, where the package's dependencies are.

    They are added to the new environment as plain path lines, so their own ``.pth`` files (an
    editable install of this checkout among them) are not run: ``arag_graph`` comes from the wheel."""
    return [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the built wheel installed; returns its Python."""
    base = tmp_path_factory.mktemp("installed")
    wheel = build_wheel(source_copy(base / "src"), base / "wheel")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "zz_dependencies.pth").write_text("\n".join(_dependency_dirs()) + "\n", encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assert Path(purelib, "arag_graph", "served", "arag.py").is_file()
    return python


def _clean_env(cache: Path) -> dict[str, str]:
    dropped = ("LANGSMITH_", "LANGCHAIN_", "OPENAI_", "ARAG_", "PYTHON")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update(
        ARAG_CACHE_DIR=str(cache), ARAG_MODEL="offline", LANGSMITH_TRACING="false", ANONYMIZED_TELEMETRY="False",
        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LANGGRAPH_CLI_NO_ANALYTICS="1", PYTHONUNBUFFERED="1",
    )  # fmt: skip
    return env


def test_the_served_modules_import_from_the_installed_package(installed: Path, tmp_path: Path) -> None:
    code = "import arag_graph, arag_graph.served.arag as m; print(arag_graph.__file__); print(callable(m.graph))"
    done = subprocess.run(
        [str(installed), "-c", code], cwd=tmp_path, env=_clean_env(tmp_path / "cache"),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    where, ok = done.stdout.split()
    assert Path(where).is_relative_to(installed.parent.parent), f"arag_graph came from {where}, not the wheel"
    assert ok == "True"


@pytest.fixture(scope="module")
def served(installed: Path, tmp_path_factory: pytest.TempPathFactory, exported_encoder: Path) -> Iterator[DevServer]:
    empty = tmp_path_factory.mktemp("empty")
    (empty / "langgraph.json").write_text(LANGGRAPH_JSON, encoding="utf-8")
    cache = tmp_path_factory.mktemp("cache")
    seed_encoder(cache, exported_encoder)
    port = free_port()
    command = [str(installed), "-m", "langgraph_cli", "dev", "--config", "langgraph.json", "--port", str(port)]
    command += ["--no-browser", "--no-reload"]
    log_path = tmp_path_factory.mktemp("log") / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=empty, env=_clean_env(cache), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    server = DevServer(f"http://127.0.0.1:{port}", port, process, log_path)
    try:
        wait_until_ready(server, 240)
        yield server
    finally:
        stop(process)


def test_a_three_line_langgraph_json_serves_the_installed_graphs(served: DevServer) -> None:
    assert len(LANGGRAPH_JSON.strip().splitlines()) == 3 and json.loads(LANGGRAPH_JSON)
    client = get_sync_client(url=served.url, timeout=600)
    with served.log_on_failure():
        graphs = sorted(a["graph_id"] for a in client.assistants.search())
        assert graphs == ["arag", "corag"]
        out: dict[str, Any] = client.runs.wait(None, "arag", input={"question": QUESTION}, context={"max_steps": 3})  # type: ignore[assignment]
        assert out.get("error") is None and out["answer"].strip() and out["citations"], json.dumps(out)[:2000]
