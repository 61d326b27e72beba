"""A read-only index directory answers searches, reads, ``verify`` and ``ask``.

The README's deployment advice mounts the index read-only; Chroma's embedded client opens its
database for writing, so even ``arag search --keywords`` failed there with "attempt to write a
readonly database". The index is bind-mounted read-only in a private mount namespace (the tests
run as root, whom permission bits would not stop), the commands run there, and their answers must
equal those of the same index when writable, with nothing under the index changed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.sample import sample_questions_path
from tests.cli_run import run_cli
from tests.mounts import CLI_SCRIPT, read_only_bind, require_mount_namespaces, run_in_namespace, subprocess_env
from tests.reliability import record

pytestmark = pytest.mark.integration

QUESTION = json.loads(sample_questions_path().read_text(encoding="utf-8"))[0]["question"]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def chroma_sample_index(tmp_path_factory: pytest.TempPathFactory) -> HierarchicalIndex:
    """The bundled sample with its sentences in Chroma (the store large indexes use), real encoder.

    Chroma's embedded client cannot open a read-only database: this is the index the copy of the
    sentence store to ``$TMPDIR`` is for (the matrix of a small index is only memory-mapped).
    """
    from arag_graph.index.build import build_index
    from arag_graph.index.sample import sample_corpus_path

    out = tmp_path_factory.mktemp("chroma-sample") / "index"
    return build_index(sample_corpus_path(), out, backend="chroma", progress=False)


@pytest.mark.parametrize("backend", ["matrix", "chroma"])
def test_a_read_only_index_answers(
    backend: str,
    sample_index: HierarchicalIndex,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    _isolated_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    require_mount_namespaces()
    source = sample_index if backend == "matrix" else request.getfixturevalue("chroma_sample_index")
    assert source.path is not None and (source.manifest.chroma["mode"] == "matrix") == (backend == "matrix")
    index = tmp_path / "mounted" / "index"
    shutil.copytree(source.path, index)
    before = snapshot(index)
    where = str(index)
    first_chunk = sample_index.store.chunks[0].id
    commands = [
        ["search", "--index", where, "--keywords", "Leland", "--json"],
        ["search", "--index", where, "--query", QUESTION, "--json"],
        ["read", "--index", where, first_chunk, "--json"],
        ["ask", QUESTION, "--index", where, "--model", "offline", "--json"],
        ["ask", QUESTION, "--index", where, "--model", "offline", "--graph", "naive_rag", "--json"],
        ["verify", "--index", where, "--json"],
    ]
    # The probe proves the mount is read-only for this root process before anything runs.
    mounts = [*read_only_bind(index.parent), f"! touch {index}/probe 2>/dev/null"]
    results = run_in_namespace(mounts, CLI_SCRIPT, [json.dumps(commands)], subprocess_env(_isolated_cache))
    assert snapshot(index) == before
    for result in results:
        assert result["code"] == 0, (result["argv"], result["err"][-2000:])
        assert "Traceback" not in result["err"]
    assert json.loads(results[-1]["out"])["ok"] is True
    for result in results[:-1]:  # the same answers as the index gives when writable (Chroma writes then)
        code, out, _ = run_cli(result["argv"], capsys)
        assert code == 0 and json.loads(result["out"]) == json.loads(out), result["argv"]
    what = f"search, read, ask (2 graphs), verify on a read-only bind mount ({backend})"
    record("read_only_index", what, trials=len(commands))
