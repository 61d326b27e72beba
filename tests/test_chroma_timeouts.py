"""Every wait on a Chroma server is bounded: a server that accepts and never answers is one line.

Chroma's HTTP client has no timeout (its session waits forever), so ``--chroma-url`` pointing at a
server that accepts connections and never answers held ``arag index`` and ``arag search`` with no
limit. A stand-in on localhost plays that server, at each stage: not answering at all, and
answering the client's start-up requests but never the collection requests that follow. The bound
comes from ``--chroma-timeout`` or ``$ARAG_CHROMA_TIMEOUT`` (default 60 s).
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from arag_graph.core.documents import SourceDocument
from arag_graph.core.errors import AragError
from arag_graph.index import integrity
from arag_graph.index.build import build_index
from arag_graph.index.encoders import DEFAULT_MODEL_ID
from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST
from arag_graph.index.load import load_index
from tests.cli_run import assert_one_error_line, run_cli
from tests.fakes import NamedFakeEmbeddings
from tests.reliability import record
from tests.stubs._http import Exchange, StubServer

# A test that would wait forever on old code fails instead (pytest-timeout).
pytestmark = pytest.mark.timeout(120)


START_REQUESTS = ("/heartbeat", "/auth/identity", "/tenants/default_tenant", "/databases/default_database")


class SilentChroma(StubServer):
    """Accepts every connection and request and answers only those ending in one of ``answers``,
    from the requests Chroma's client makes while it is created (heartbeat, identity, tenant,
    database): none, a server that never answers; all, a server whose collection requests hang."""

    def __init__(self, answers: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.answers = answers

    @property
    def url(self) -> str:
        return self.root_url

    def handle(self, exchange: Exchange) -> None:
        path = exchange.request.path
        if path.endswith(self.answers):
            if path.endswith("/heartbeat"):
                return exchange.send_json(200, {"nanosecond heartbeat": 1})
            if path.endswith("/auth/identity"):
                return exchange.send_json(
                    200, {"user_id": "", "tenant": "default_tenant", "databases": ["default_database"]}
                )
            if path.endswith("/tenants/default_tenant"):
                return exchange.send_json(200, {"name": "default_tenant"})
            if path.endswith("/databases/default_database"):
                return exchange.send_json(
                    200, {"id": str(uuid.uuid4()), "name": "default_database", "tenant": "default_tenant"}
                )
        self.stopping.wait()  # until the test ends: the client must give up first
        exchange.drop()


@pytest.fixture
def silent() -> Iterator[SilentChroma]:
    with SilentChroma() as server:
        yield server


@pytest.fixture
def half_silent() -> Iterator[SilentChroma]:
    with SilentChroma(answers=START_REQUESTS) as server:
        yield server


@pytest.mark.parametrize("answered", [1, 2, 3], ids=["heartbeat", "identity", "tenant"])
def test_a_server_that_stalls_while_the_client_starts_is_one_line(
    answered: int, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Chroma's client sends its start-up requests without any timeout; they are bounded too."""
    with SilentChroma(answers=START_REQUESTS[:answered]) as server:
        argv = ["index", str(corpus), "--out", str(tmp_path / "i"), "--chroma-url", server.url]
        line = assert_one_error_line(*run_cli([*argv, "--chroma-timeout", "1", "--quiet"], capsys))
        timed_out(line, server.url, "1")
    assert not (tmp_path / "i").exists()
    record(
        "chroma_waits",
        f"arag index: server stalls after {START_REQUESTS[answered - 1]}",
        trials=1,
        faults=1,
        survived=1,
    )


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "The Nile is a river. It flows north."}) + "\n", encoding="utf-8")
    return path


def timed_out(line: str, url: str, seconds: str) -> None:
    assert url in line and f"did not answer within {seconds} s" in line and "timed out" in line, line
    assert "--chroma-timeout" in line and "ARAG_CHROMA_TIMEOUT" in line


def test_index_against_a_server_that_never_answers_is_one_line(
    silent: SilentChroma, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "index"
    argv = ["index", str(corpus), "--out", str(out), "--chroma-url", silent.url, "--quiet"]
    line = assert_one_error_line(*run_cli([*argv, "--chroma-timeout", "1"], capsys))
    timed_out(line, silent.url, "1")
    assert not out.exists()
    record("chroma_waits", "arag index: server never answers (--chroma-timeout)", trials=1, faults=1, survived=1)


def test_the_environment_sets_the_bound(
    silent: SilentChroma,
    corpus: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARAG_CHROMA_TIMEOUT", "1.5")
    argv = ["index", str(corpus), "--out", str(tmp_path / "index"), "--chroma-url", silent.url, "--quiet"]
    timed_out(assert_one_error_line(*run_cli(argv, capsys)), silent.url, "1.5")
    record("chroma_waits", "arag index: server never answers ($ARAG_CHROMA_TIMEOUT)", trials=1, faults=1, survived=1)


@pytest.mark.integration
def test_a_server_that_hangs_after_connecting_fails_the_build_in_one_line(
    half_silent: SilentChroma, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The client's own start-up passes; the collection requests that follow are bounded too."""
    out = tmp_path / "index"
    argv = ["index", str(corpus), "--out", str(out), "--chroma-url", half_silent.url, "--chroma-timeout", "1"]
    line = assert_one_error_line(*run_cli([*argv, "--quiet"], capsys))
    timed_out(line, half_silent.url, "1")
    assert not out.exists()
    record("chroma_waits", "arag index: server hangs after connecting", trials=1, faults=1, survived=1)


def server_index(tmp_path: Path, url: str) -> Path:
    """An index whose manifest sends its sentences to ``url`` (built embedded, then pointed there)."""
    root = tmp_path / "index"
    docs = [SourceDocument("The Nile is a river.", id="a")]
    build_index(docs, root, embeddings=NamedFakeEmbeddings(), backend="chroma", progress=False)
    build = root / BUILDS / (root / CURRENT).read_text().strip()
    manifest = json.loads((build / MANIFEST).read_text())
    manifest["chroma"] = {"mode": "http", "url": url, "collection": f"index-{build.name}"}
    # The CLI loads the default model; the vectors live in the "server", so nothing local changes.
    manifest.update(embedding_model=DEFAULT_MODEL_ID, encoder="torch")
    manifest.pop("manifest_checksum")  # edited by hand: its old seal would (rightly) refuse it; sealed anew
    manifest["manifest_checksum"] = integrity.json_checksum(manifest)
    (build / MANIFEST).write_text(json.dumps(manifest))
    shutil.rmtree(build / "chroma")
    return root


def test_loading_and_searching_a_server_index_are_bounded(
    half_silent: SilentChroma,
    silent: SilentChroma,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = server_index(tmp_path, half_silent.url)
    with pytest.raises(AragError) as caught:
        load_index(root, chroma_timeout=1)
    timed_out(str(caught.value), half_silent.url, "1")
    monkeypatch.setenv("ARAG_CHROMA_TIMEOUT", "1")
    for argv in (["search", "--index", str(root), "--keywords", "Nile"], ["read", "--index", str(root), "a"]):
        timed_out(assert_one_error_line(*run_cli(argv, capsys)), half_silent.url, "1")
    # Redirected ($ARAG_CHROMA_URL) to a server that answers nothing at all.
    monkeypatch.setenv("ARAG_CHROMA_URL", silent.url)
    line = assert_one_error_line(*run_cli(["search", "--index", str(root), "--query", "a river"], capsys))
    timed_out(line, silent.url, "1")
    record("chroma_waits", "load and search: server hangs", trials=4, faults=4, survived=4)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_bound_that_is_not_a_time_is_refused(
    value: str, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = assert_one_error_line(
        *run_cli(["index", str(corpus), "--out", str(tmp_path / "i"), f"--chroma-timeout={value}"], capsys)
    )
    assert "--chroma-timeout" in line and "seconds above 0" in line
    monkeypatch.setenv("ARAG_CHROMA_TIMEOUT", value)
    root = server_index(tmp_path, "http://127.0.0.1:1")
    line = assert_one_error_line(*run_cli(["search", "--index", str(root), "--keywords", "Nile"], capsys))
    assert "$ARAG_CHROMA_TIMEOUT" in line and "seconds above 0" in line
    assert not (tmp_path / "i").exists()
