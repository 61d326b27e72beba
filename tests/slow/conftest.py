"""One ``langgraph dev`` server for the whole session, shared by every test in tests/slow that needs it.

Starting it (and building the sample index inside it on the first run) is the slow part, so the
Studio tests and the concurrency tests use the same server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.slow.devserver import DevServer, running_dev_server


@pytest.fixture(scope="session")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with running_dev_server(tmp_path_factory.mktemp("langgraph-dev")) as server:
        yield server
