"""Server mode for real: a ``chroma run`` subprocess on localhost holds the sentence vectors.

The module starts one Chroma server (its own process group, a free port on 127.0.0.1, a temporary
data directory), builds the bundled sample into it and checks that everything a user does with an
embedded index gives the same results against the server: both searches, the A-RAG graph with the
offline policy, ``arag search``. Then the server-specific parts: a rebuild swaps collections only
once the new one is complete and drops the old one, a failed rebuild leaves nothing behind,
collection names follow Chroma's rule, and an unreachable server is one clean error line.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from arag_graph.arag.graph import build_arag_graph
from arag_graph.core.errors import AragError
from arag_graph.index.build import build_index
from arag_graph.index.chroma import CHROMA_URL_ENV, valid_collection_name
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST
from arag_graph.index.load import load_index
from arag_graph.index.sample import sample_corpus_path, sample_questions_path
from tests.cli_run import run_cli
from tests.fakes import NamedFakeEmbeddings

pytestmark = pytest.mark.integration

STARTUP_TIMEOUT = 60.0
QUESTIONS = [q["question"] for q in json.loads(sample_questions_path().read_text(encoding="utf-8"))]
KEYWORD_SETS = [["Leland"], ["Maximum Overdrive", "Stephen King"], ["Grace Krilanovich"], ["1986", "film"], ["novel"]]
PASSAGES = [
    {"id": "curie", "title": "Marie Curie", "text": "Marie Curie was a physicist. She won the Nobel Prize in 1903."},
    {"id": "eiffel", "title": "Eiffel Tower", "text": "The Eiffel Tower is in Paris. It was completed in 1889."},
    {"id": "nile", "title": "Nile", "text": "The Nile is a river in Africa. It flows into the Mediterranean Sea."},
]
MORE = {"id": "everest", "title": "Mount Everest", "text": "Mount Everest is in the Himalayas. It is 8,849 m high."}


@dataclass
class ChromaServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def client(self) -> Any:
        import chromadb
        from chromadb.config import Settings

        host, port = self.url.removeprefix("http://").split(":")
        return chromadb.HttpClient(host=host, port=int(port), settings=Settings(anonymized_telemetry=False))

    def collections(self, prefix: str = "") -> set[str]:
        return {c.name for c in self.client().list_collections() if c.name.startswith(prefix)}

    def log_tail(self, chars: int = 5000) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(process: subprocess.Popen[bytes]) -> None:
    """End the server's process group: SIGTERM, then SIGKILL if it lingers."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    executable = Path(sys.executable).parent / "chroma"
    if not executable.exists():
        pytest.skip(f"no `chroma` command next to {sys.executable} (it comes with the chromadb package)")
    workdir = tmp_path_factory.mktemp("chroma-server")
    port = free_port()
    command = [str(executable), "run", "--path", str(workdir / "data"), "--host", "127.0.0.1", "--port", str(port)]
    log_path = workdir / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so stopping it reaches every child
        )
    server = ChromaServer(f"http://127.0.0.1:{port}", process, log_path)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"chroma run exited with {process.returncode}:\n{server.log_tail()}")
            try:
                if httpx.get(f"{server.url}/api/v2/heartbeat", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"chroma run not answering after {STARTUP_TIMEOUT:.0f} s:\n{server.log_tail()}")
            time.sleep(0.2)
        yield server
    finally:
        stop(process)
    assert process.poll() is not None, "the Chroma server outlived the tests"


@pytest.fixture(scope="module")
def server_index_dir(chroma_server: ChromaServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample built into the server (real encoder), as a user's `arag index` would."""
    out = tmp_path_factory.mktemp("server-index") / "sample"
    build_index(sample_corpus_path(), out, chroma_url=chroma_server.url, progress=False)
    return out


@pytest.fixture(scope="module")
def server_index(server_index_dir: Path) -> HierarchicalIndex:
    """The server index loaded back from its directory (the manifest names URL and collection)."""
    return load_index(server_index_dir)


def active_manifest(root: Path) -> dict[str, Any]:
    build = (root / CURRENT).read_text(encoding="utf-8").strip()
    return json.loads((root / BUILDS / build / MANIFEST).read_text(encoding="utf-8"))


def assert_same_hits(got: list[Any], expected: list[Any]) -> None:
    assert [h.chunk_id for h in got] == [h.chunk_id for h in expected]
    assert [h.snippets for h in got] == [h.snippets for h in expected]
    assert [h.title for h in got] == [h.title for h in expected]
    for a, b in zip(got, expected, strict=True):
        assert a.score == pytest.approx(b.score, abs=1e-5)


def write_corpus(path: Path, passages: list[dict[str, str]]) -> Path:
    path.write_text("\n".join(json.dumps(p) for p in passages) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Same results as the embedded index


def test_manifest_records_the_server_and_no_local_vectors(server_index_dir: Path, chroma_server: ChromaServer) -> None:
    manifest = active_manifest(server_index_dir)
    chroma = manifest["chroma"]
    assert chroma["mode"] == "http" and chroma["url"] == chroma_server.url
    assert chroma["collection"].startswith("sample-") and valid_collection_name(chroma["collection"])
    assert chroma["collection"] in chroma_server.collections()
    build = server_index_dir / BUILDS / (server_index_dir / CURRENT).read_text(encoding="utf-8").strip()
    assert not (build / "chroma").exists()  # the vectors live in the server only
    assert (build / "chunks.jsonl").exists()  # chunks and keywords travel with the directory
    assert chroma_server.client().get_collection(chroma["collection"]).count() == manifest["sentences"]


def test_searches_match_the_embedded_index(server_index: HierarchicalIndex, sample_index: HierarchicalIndex) -> None:
    assert server_index.manifest.corpus_hash == sample_index.manifest.corpus_hash
    assert server_index.manifest.chroma["mode"] == "http" and sample_index.manifest.chroma["mode"] == "matrix"
    for question in QUESTIONS[:5]:
        for top_k in (5, 10):
            got = server_index.semantic_search(question, top_k)
            assert len(got) == top_k
            assert_same_hits(got, sample_index.semantic_search(question, top_k))
    for keywords in KEYWORD_SETS:
        got = server_index.keyword_search(keywords, 5)
        assert got
        assert_same_hits(got, sample_index.keyword_search(keywords, 5))


def test_arag_graph_runs_against_the_server(server_index_dir: Path, sample_index: HierarchicalIndex) -> None:
    index = load_index(server_index_dir)
    question = QUESTIONS[0]
    out = build_arag_graph(index, "offline").invoke({"question": question})
    assert out["answer"] and out["error"] is None
    assert out["citations"] and all(index.get_chunk(c) for c in out["citations"])
    assert out["read_chunks"] and set(out["citations"]) <= set(out["read_chunks"])
    assert any(s["tool"] == "semantic_search" and s["chunk_ids"] for s in out["trajectory"])
    # the offline policy is deterministic: same retrieval results, same run
    embedded = build_arag_graph(sample_index, "offline").invoke({"question": question})
    for key in ("answer", "citations", "read_chunks", "retrieved_tokens", "steps"):
        assert out[key] == embedded[key], key
    assert [s["chunk_ids"] for s in out["trajectory"]] == [s["chunk_ids"] for s in embedded["trajectory"]]


def test_graph_takes_the_server_index_from_its_configuration(
    server_index_dir: Path, chroma_server: ChromaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an `arag_graph/served/` entry point or LangGraph Server run does: `index_path` in the context, on a
    Chroma server the operator allows (a run's index may name no other: tests/test_endpoint_rule.py)."""
    from arag_graph.registry import build_graph

    monkeypatch.setenv("ARAG_ALLOWED_CHROMA_URLS", chroma_server.url)

    out = build_graph("arag", model="offline").invoke(
        {"question": QUESTIONS[1]}, context={"index_path": str(server_index_dir)}
    )
    assert out["answer"] and out["error"] is None and out["citations"]


def test_cli_search_against_the_server(
    server_index_dir: Path, sample_index: HierarchicalIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    for flag, value in (("--query", QUESTIONS[2]), ("--keywords", "Maximum Overdrive,Stephen King")):
        code, out, err = run_cli(["search", "--index", str(server_index_dir), flag, value, "--json"], capsys)
        assert code == 0, err
        hits = json.loads(out)["hits"]
        code, out, _ = run_cli(["search", "--index", str(sample_index.path), flag, value, "--json"], capsys)
        expected = json.loads(out)["hits"]
        assert hits and [h["chunk_id"] for h in hits] == [h["chunk_id"] for h in expected]
        assert [h["snippets"] for h in hits] == [h["snippets"] for h in expected]
        assert [h["score"] for h in hits] == pytest.approx([h["score"] for h in expected], abs=1e-5)
    code, out, err = run_cli(["search", "--index", str(server_index_dir), "--query", QUESTIONS[0]], capsys)
    assert code == 0 and out.startswith(" 1. [") and not err


# ---------------------------------------------------------------------------------------------
# Rebuilds, names and failures


def test_rebuild_swaps_collections_only_when_complete(
    chroma_server: ChromaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import arag_graph.index.write as write_module

    out = tmp_path / "idx"
    url = chroma_server.url
    prefix = "rebuild_test.v1"
    first = write_corpus(tmp_path / "first.jsonl", PASSAGES)
    code, _, err = run_cli(
        ["index", str(first), "--out", str(out), "--chroma-url", url, "--collection", prefix, "--quiet"], capsys
    )
    assert code == 0, err
    old = active_manifest(out)["chroma"]["collection"]
    assert chroma_server.collections(prefix) == {old}
    assert [h.chunk_id for h in load_index(out).keyword_search(["Everest"])] == []

    # A rebuild that fails after its collection is filled: the old build stays active and
    # complete throughout, and the half-made collection is dropped.
    seen: dict[str, Any] = {}

    def failing_from_chunks(*args: Any, **kwargs: Any) -> Any:
        seen["collections"] = chroma_server.collections(prefix)
        seen["active"] = active_manifest(out)["chroma"]["collection"]
        seen["hits"] = [h.chunk_id for h in load_index(out).semantic_search("Nobel Prize physicist", 1)]
        raise RuntimeError("disk full (injected)")

    second = write_corpus(tmp_path / "second.jsonl", [*PASSAGES, MORE])
    with monkeypatch.context() as patch, pytest.raises(RuntimeError, match="injected"):
        patch.setattr(write_module.KeywordIndex, "from_chunks", failing_from_chunks)
        build_index(second, out, chroma_url=url, collection=prefix, progress=False)
    assert len(seen["collections"]) == 2 and old in seen["collections"]  # new one filled, old one live
    assert seen["active"] == old and seen["hits"] == ["curie"]
    assert chroma_server.collections(prefix) == {old}  # the half-made collection is gone
    assert len(list((out / BUILDS).iterdir())) == 1

    # A complete rebuild: the new collection becomes active, the old one is dropped.
    code, _, err = run_cli(
        ["index", str(second), "--out", str(out), "--chroma-url", url, "--collection", prefix, "--quiet"], capsys
    )
    assert code == 0, err
    new = active_manifest(out)["chroma"]["collection"]
    assert new != old and chroma_server.collections(prefix) == {new}
    reloaded = load_index(out)
    assert reloaded.sentences.count() == reloaded.manifest.sentences == 8
    assert [h.chunk_id for h in reloaded.semantic_search("the highest mountain in the Himalayas", 1)] == ["everest"]


def test_collection_names_follow_chromas_rule(
    chroma_server: ChromaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = NamedFakeEmbeddings()
    corpus = write_corpus(tmp_path / "c.jsonl", PASSAGES)
    # derived from an awkward directory name
    awkward = tmp_path / "..my index..été.."
    built = build_index(corpus, awkward, embeddings=fake, chroma_url=chroma_server.url, progress=False)
    name = built.manifest.chroma["collection"]
    assert valid_collection_name(name) and name.startswith("my-index.-")
    assert name in chroma_server.collections()
    # the longest prefix that fits, and one character more
    longest = "p" * 487
    built = build_index(
        corpus, tmp_path / "long", embeddings=fake, chroma_url=chroma_server.url, collection=longest, progress=False
    )
    assert len(built.manifest.chroma["collection"]) == 512 and built.sentences.count() == 6
    for bad in ("p" * 488, "-x", "a..b", "my index", "x/y"):
        argv = ["index", str(corpus), "--out", str(tmp_path / "bad"), "--chroma-url", chroma_server.url]
        code, out, err = run_cli([*argv, f"--collection={bad}", "--quiet"], capsys)
        assert code == 2 and out == "" and len(err.splitlines()) == 1, err
        assert err.startswith("arag: error: --collection") and "Traceback" not in err
    assert not (tmp_path / "bad" / CURRENT).exists()


def test_unreachable_server_is_one_error_line(
    server_index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", PASSAGES)
    out = tmp_path / "idx"
    # No timed bound here: a client that retried for ever fails this test by its per-test timeout.
    code, stdout, err = run_cli(
        ["index", str(corpus), "--out", str(out), "--chroma-url", "http://127.0.0.1:1", "--quiet"], capsys
    )
    assert code == 2 and stdout == "" and len(err.splitlines()) == 1, err
    assert err.startswith("arag: error: ") and "http://127.0.0.1:1" in err and "chroma run" in err
    assert "Traceback" not in err
    assert not (out / CURRENT).exists()

    # Loading a server index whose server is gone (here: redirected to a closed port)
    monkeypatch.setenv(CHROMA_URL_ENV, "http://127.0.0.1:1")
    with pytest.raises(AragError) as caught:
        load_index(server_index_dir)
    assert "\n" not in str(caught.value) and "http://127.0.0.1:1" in str(caught.value)
    code, stdout, err = run_cli(["search", "--index", str(server_index_dir), "--query", "anything"], capsys)
    assert code == 2 and stdout == "" and len(err.splitlines()) == 1 and err.startswith("arag: error: ")


def test_chroma_url_override_reaches_the_same_collection(
    server_index_dir: Path, chroma_server: ChromaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$ARAG_CHROMA_URL`` replaces the recorded URL (e.g. a container reaching Chroma by another name)."""
    port = chroma_server.url.rsplit(":", 1)[1]
    monkeypatch.setenv(CHROMA_URL_ENV, f"localhost:{port}")
    index = load_index(server_index_dir)
    assert index.sentences.count() == index.manifest.sentences
    assert index.semantic_search(QUESTIONS[0], 3)
