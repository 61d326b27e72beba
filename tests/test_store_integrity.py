"""A Chroma-backed index answers only from the bytes its build wrote (issue 22, item 4).

Chroma's embedded store used to be opened where the build left it, so a flipped bit in its HNSW
vectors (``data_level0.bin``) answered with an unrelated chunk and exit 0, and one flipped byte in
``header.bin`` killed the process with SIGSEGV. Now the build records every file of the store and
each process opens a private copy checked byte for byte as it is made, before Chroma reads it.

The store is large enough (3,000 sentences) for Chroma to have written its HNSW files; its vectors
are hash-seeded fakes recorded under the default model's name, so the ``arag`` CLI loads the index
with the packaged encoder (the vectors live in the store, so only their dimension must agree).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from arag_graph.core.documents import SourceDocument
from arag_graph.core.errors import AragError
from arag_graph.index.build import build_index
from arag_graph.index.encoders import DEFAULT_MODEL_ID
from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST
from arag_graph.index.load import load_index
from tests.reliability import record

REPO = Path(__file__).resolve().parents[1]


class DefaultNamedFake(DeterministicFakeEmbedding):
    """Hash-seeded vectors of the default model's dimension, under its name (see the module doc)."""

    model_id: str = DEFAULT_MODEL_ID
    size: int = 384


DOCUMENTS = 1000
TEXT = "Sentence {i} about topic {topic}. Another line {line} here. Third one {i}."
PROBE = "T5: Sentence 5 about topic 5."  # what the build embedded for chunk d5's first sentence


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store-integrity") / "index"
    docs = [
        SourceDocument(TEXT.format(i=i, topic=i % 7, line=i * 3), id=f"d{i}", title=f"T{i}") for i in range(DOCUMENTS)
    ]
    build_index(docs, root, embeddings=DefaultNamedFake(), backend="chroma", progress=False)
    return root


@pytest.fixture
def copy(pristine: Path, tmp_path: Path) -> Path:
    target = tmp_path / "index"
    shutil.copytree(pristine, target, symlinks=True)
    return target


def build_of(root: Path) -> Path:
    return root / BUILDS / (root / CURRENT).read_text(encoding="utf-8").strip()


def store_file(root: Path, name: str) -> Path:
    store = build_of(root) / "chroma"
    return store / name if name == "chroma.sqlite3" else next(store.glob(f"*/{name}"))


def flip_bit(path: Path, offset: int, mask: int = 0x10) -> None:
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= mask
    path.write_bytes(bytes(data))


def load(root: Path) -> object:
    return load_index(root, embeddings=DefaultNamedFake())


def test_the_store_answers_and_its_files_stay_as_built(copy: Path) -> None:
    """The check refuses nothing sound, and opening never changes the build's files (it opens a copy)."""
    store = build_of(copy) / "chroma"
    before = {p: p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}
    manifest = json.loads((build_of(copy) / MANIFEST).read_text(encoding="utf-8"))
    assert set(manifest["store_checksums"]) == {p.relative_to(store).as_posix() for p in before}
    for _ in range(2):
        index = load(copy)
        assert index.semantic_search(PROBE, 1)[0].chunk_id == "d5"  # type: ignore[attr-defined]
    assert {p: p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()} == before


# One flipped bit at several places of every file Chroma keeps (the HNSW vectors and graph, its
# header and the database): each refuses at load, in one line naming the file.
FLIPS = [
    ("data_level0.bin", 0),
    ("data_level0.bin", 300 * 1804 + 300),  # inside a stored vector
    ("data_level0.bin", -5),
    ("header.bin", 8),
    ("header.bin", 40),
    ("length.bin", 17),
    ("link_lists.bin", 11),
    ("index_metadata.pickle", 50),
    ("chroma.sqlite3", 4096 * 3 + 100),
]


@pytest.mark.parametrize(("name", "offset"), FLIPS)
def test_one_flipped_bit_in_the_store_refuses_at_load(name: str, offset: int, copy: Path) -> None:
    flip_bit(store_file(copy, name), offset)
    with pytest.raises(AragError) as caught:
        index = load(copy)
        index.semantic_search(PROBE, 3)  # type: ignore[attr-defined]
    message = str(caught.value)
    assert "\n" not in message and message.startswith("index damaged: "), message
    assert name in message and "differs from what the build wrote" in message, message
    record("store_integrity", f"load: one bit of {name} at {offset}", faults=1, survived=1)


@pytest.mark.parametrize(
    ("case", "needle"),
    [("extra_file", "not a file the build wrote"), ("missing_file", "lacks"), ("symlinked_file", "symbolic link")],
)
def test_files_added_removed_or_linked_in_the_store_refuse(case: str, needle: str, copy: Path, tmp_path: Path) -> None:
    target = store_file(copy, "length.bin")
    if case == "extra_file":
        (target.parent / "planted.bin").write_bytes(b"\0" * 16)
    elif case == "missing_file":
        target.unlink()
    else:
        outside = tmp_path / "length.bin"
        shutil.copyfile(target, outside)
        target.unlink()
        target.symlink_to(outside)
    with pytest.raises(AragError) as caught:
        load(copy)
    assert str(caught.value).startswith("index damaged: ") and needle in str(caught.value)


def test_a_store_without_recorded_checksums_is_refused(copy: Path) -> None:
    path = build_of(copy) / MANIFEST
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["store_checksums"], data["manifest_checksum"]  # as a build from before them wrote it (format 1)
    data["format_version"] = 1
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(AragError) as caught:
        load(copy)
    assert "rebuild it" in str(caught.value) and "\n" not in str(caught.value)


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "OPENAI_"))}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LANGSMITH_TRACING="false")
    return env


def arag(*argv: str) -> subprocess.CompletedProcess[str]:
    script = "import sys; from arag_graph.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", script, *argv], env=cli_env(), capture_output=True, text=True, timeout=300, cwd=REPO
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    ("name", "offset", "mask"), [("header.bin", 8, 0xFF), ("data_level0.bin", 300 * 1804 + 300, 0x40)]
)
def test_arag_search_on_a_flipped_store_exits_with_one_line_not_a_signal(
    name: str, offset: int, mask: int, copy: Path
) -> None:
    """A byte of ``header.bin`` once made hnswlib crash the process (SIGSEGV, exit -11); a bit of a
    stored vector once answered with exit 0. The CLI runs in a subprocess so that a crash shows."""
    flip_bit(store_file(copy, name), offset, mask)
    done = arag("search", "--index", str(copy), "--query", "topic 5", "--json")
    assert done.returncode > 0, (done.returncode, done.stdout[-300:], done.stderr[-1500:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arag: error: index damaged: ") and name in lines[0], done.stderr
    assert done.stdout == ""
    record("store_integrity", f"cli: {name} flipped", faults=1, survived=1)


@pytest.mark.integration
def test_a_read_only_chroma_index_with_a_full_tmpdir_is_one_short_line(tmp_path: Path, _isolated_cache: Path) -> None:
    """The private copy could not be written (a 64 KB TMPDIR): the error once listed every file
    copytree failed on, a 3 KB line."""
    from tests.mounts import CLI_SCRIPT, read_only_bind, require_mount_namespaces, run_in_namespace, subprocess_env

    require_mount_namespaces()
    index = tmp_path / "mounted" / "index"
    docs = [SourceDocument(TEXT.format(i=i, topic=i % 7, line=i * 3), id=f"d{i}", title=f"T{i}") for i in range(40)]
    build_index(docs, index, embeddings=DefaultNamedFake(), backend="chroma", progress=False)
    small = tmp_path / "small-tmp"
    small.mkdir()
    mounts = [*read_only_bind(index.parent), f"mount -t tmpfs -o size=64k tmpfs {small}"]
    env = {**subprocess_env(_isolated_cache), "TMPDIR": str(small)}
    commands = [["search", "--index", str(index), "--query", "topic 5", "--json"]]
    (result,) = run_in_namespace(mounts, CLI_SCRIPT, [json.dumps(commands)], env)
    lines = result["err"].splitlines()
    assert result["code"] not in (0, "raised") and result["out"] == "", result
    assert len(lines) == 1 and lines[0].startswith("arag: error: ") and len(lines[0]) < 500, result["err"][:4000]
    assert "TMPDIR" in lines[0] and "No space left on device" in lines[0], lines[0]
