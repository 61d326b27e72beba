"""One ``langgraph dev`` server for the whole session, shared by every test in tests/slow that needs it.

Starting it (and building the sample index inside it on the first run) is the slow part, so the
Studio tests and the concurrency tests use the same server. Its operator allows one model endpoint,
an OpenAI-compatible stand-in started for the session (``served_model``), which tests script.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slow.devserver import DevServer, running_dev_server
from tests.stubs.openai_server import OpenAIStubServer


@pytest.fixture(scope="session")
def served_model() -> Iterator[OpenAIStubServer]:
    with OpenAIStubServer() as server:
        yield server


@pytest.fixture(scope="session")
def exported_encoder(_isolated_cache: Path) -> Path:
    """The default encoder's ONNX file, exported once into the session's cache (loading it exports
    it there if no build has yet), for the servers that stand for an operator who has run arag before."""
    from arag_graph.index.encoders import OnnxSentenceEncoder, default_embeddings

    encoder = default_embeddings()
    assert isinstance(encoder, OnnxSentenceEncoder), f"the default encoder is {type(encoder).__name__}, not ONNX"
    assert encoder.dimension > 0  # loads the model, exporting it on first use
    assert encoder.onnx_path is not None and encoder.onnx_path.is_file(), encoder.onnx_path
    return encoder.onnx_path


@pytest.fixture(scope="session")
def dev_server(tmp_path_factory: pytest.TempPathFactory, served_model: OpenAIStubServer) -> Iterator[DevServer]:
    env = {"ARAG_ALLOWED_BASE_URLS": served_model.url, "ARAG_ALLOWED_MODELS": "gpt-4o-mini"}
    with running_dev_server(tmp_path_factory.mktemp("langgraph-dev"), env) as server:
        yield server


SLOW_TIMEOUT = 1800  # seconds: starting `langgraph dev`, killing builds, filling disks on a loaded machine


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/slow gets a longer per-test timeout than the project's 600 s (pyproject.toml)."""
    for item in items:
        if item.get_closest_marker("timeout") is None and "tests/slow/" in item.nodeid:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))
