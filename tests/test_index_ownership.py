"""``arag index`` deletes only what it wrote, and refuses an ``--out`` it has no business in.

The issue's reproductions, as tests: a foreign directory under ``DIR/builds`` was deleted by the
next build; a ``builds`` symbolic link made the build delete the contents of the link's target; a
foreign ``CURRENT`` was overwritten. Now arag deletes only builds its ownership record names, never
follows a link out of the index directory, and refuses (one line, exit 2, nothing touched) an
``--out`` that exists, is not empty and is not an arag index. A directory corpus indexed into
itself does not ingest its own index files on the next build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from arag_graph.core.documents import SourceDocument
from arag_graph.core.errors import AragError
from arag_graph.index.build import build_index
from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST, RECORD
from arag_graph.index.load import load_index
from tests.cli_run import assert_one_error_line, run_cli
from tests.fakes import NamedFakeEmbeddings
from tests.reliability import record

DOCS = [SourceDocument("The Nile is a river in Africa.", id="nile"), SourceDocument("Paris is in France.", id="paris")]


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root`` (not following links): file bytes, link targets, directories."""
    out: dict[str, bytes | str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            key = str(path.relative_to(root))
            if path.is_symlink():
                out[key] = f"-> {os.readlink(path)}"
            elif path.is_dir():
                out[key] = "dir"
            else:
                out[key] = path.read_bytes()
    return out


def build(out: Path, docs: list[SourceDocument] = DOCS) -> None:
    build_index(docs, out, embeddings=NamedFakeEmbeddings(), progress=False)


def one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message
    return message


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps({"id": d.id, "text": d.text}) for d in DOCS) + "\n", encoding="utf-8")
    return path


def test_a_foreign_directory_under_builds_survives(tmp_path: Path) -> None:
    """Repro: `mkdir -p u/builds/p && echo x > u/builds/p/a && arag index corpus --out u` deleted u/builds/p."""
    out = tmp_path / "u"
    (out / BUILDS / "p").mkdir(parents=True)
    (out / BUILDS / "p" / "a").write_text("x")
    before = snapshot(out)
    with pytest.raises(AragError) as caught:
        build(out)
    assert "is not an arag index" in one_line(caught.value)
    assert snapshot(out) == before
    # Inside a real index too: a directory arag did not record is never deleted by a rebuild.
    index = tmp_path / "index"
    build(index)
    (index / BUILDS / "p").mkdir()
    (index / BUILDS / "p" / "a").write_text("x")
    (index / BUILDS / "20200101T000000-0123abcd").mkdir()  # named like a build, not recorded
    build(index)
    build(index)
    assert (index / BUILDS / "p" / "a").read_text() == "x" and (index / BUILDS / "20200101T000000-0123abcd").is_dir()
    assert len([p for p in (index / BUILDS).iterdir()]) == 3  # the two foreign ones and the active build
    record("index_ownership", "foreign directory under builds/", faults=2, survived=2)


def test_a_builds_link_is_never_followed(tmp_path: Path) -> None:
    """Repro: `ln -s $PWD/victim u2/builds && arag index corpus --out u2` deleted victim/photos."""
    victim = tmp_path / "victim"
    (victim / "photos").mkdir(parents=True)
    (victim / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    out = tmp_path / "u2"
    out.mkdir()
    (out / BUILDS).symlink_to(victim)
    before_victim, before_out = snapshot(victim), snapshot(out)
    with pytest.raises(AragError) as caught:
        build(out)
    assert "symbolic link" in one_line(caught.value)
    assert snapshot(victim) == before_victim and snapshot(out) == before_out

    # An arag index whose builds/ was replaced by a link: refused too, and the target untouched.
    index = tmp_path / "index"
    build(index)
    shutil.move(index / BUILDS, tmp_path / "real-builds")
    (index / BUILDS).symlink_to(victim)
    with pytest.raises(AragError) as caught:
        build(index)
    assert "symbolic link" in one_line(caught.value)
    assert snapshot(victim) == before_victim
    record("index_ownership", "builds/ is a symbolic link", faults=2, survived=2)


def test_a_recorded_build_replaced_by_a_link_is_not_followed(tmp_path: Path) -> None:
    index = tmp_path / "index"
    build(index)
    old = (index / CURRENT).read_text().strip()
    build(index, [SourceDocument("Another text.", id="x")])
    # The first build is gone; put a link in its recorded name, pointing at something precious.
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("keep")
    record_path = index / RECORD
    data = json.loads(record_path.read_text())
    data["builds"].append(old)
    record_path.write_text(json.dumps(data))
    (index / BUILDS / old).symlink_to(precious, target_is_directory=True)
    build(index)
    assert (precious / "keep").read_text() == "keep"
    record("index_ownership", "recorded build name is a symbolic link", faults=1, survived=1)


def test_a_foreign_current_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "project"
    out.mkdir()
    (out / CURRENT).write_text("my own notes, not an index\n")
    before = snapshot(out)
    with pytest.raises(AragError):
        build(out)
    assert snapshot(out) == before
    # A CURRENT link pointing elsewhere is refused, and its target is untouched.
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("precious")
    index = tmp_path / "index"
    build(index)
    (index / CURRENT).unlink()
    (index / CURRENT).symlink_to(elsewhere)
    with pytest.raises(AragError) as caught:
        build(index)
    assert "symbolic link" in one_line(caught.value) and elsewhere.read_text() == "precious"
    record("index_ownership", "foreign CURRENT", faults=2, survived=2)


@pytest.mark.parametrize(
    "layout",
    [
        {"notes.txt": "my notes"},
        {"sub/deep.md": "# deep"},
        {".hidden": "x"},
        {"builds/": None},
        {"CURRENT": "20200101T000000-0123abcd"},
    ],
    ids=["a-file", "a-subfolder", "a-hidden-file", "an-empty-builds", "a-current-without-builds"],
)
def test_cli_refuses_a_non_empty_foreign_out_in_one_line_and_touches_nothing(
    layout: dict[str, str | None], corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for name, text in layout.items():
        path = out / name
        if text is None:
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    before = snapshot(out)
    code, stdout, stderr = run_cli(["index", str(corpus), "--out", str(out), "--quiet"], capsys)
    assert code == 2
    line = assert_one_error_line(code, stdout, stderr)
    assert str(out) in line and "not an arag index" in line and "--out" in line
    assert snapshot(out) == before
    record("index_ownership", f"foreign --out: {next(iter(layout))}", faults=1, survived=1)


def test_new_empty_and_existing_index_directories_are_accepted(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (tmp_path / "new" / "deep", empty):
        build(out)
        build(out)
        assert json.loads((out / RECORD).read_text())["builds"] == [(out / CURRENT).read_text().strip()]
        assert len(load_index(out, embeddings=NamedFakeEmbeddings())) == 2


def test_an_index_of_an_earlier_version_is_adopted(tmp_path: Path) -> None:
    """Indexes built before the ownership record (the evaluation cache, the sample) rebuild in place:
    the active build is proven by CURRENT and its manifest, and is deleted once replaced."""
    index = tmp_path / "index"
    build(index)
    old = (index / CURRENT).read_text().strip()
    (index / RECORD).unlink()  # what an earlier version left
    (index / BUILDS / "foreign").mkdir()
    build(index, [SourceDocument("Something else.", id="x")])
    assert not (index / BUILDS / old).exists() and (index / BUILDS / "foreign").is_dir()
    assert [c.id for c in load_index(index, embeddings=NamedFakeEmbeddings()).store.chunks] == ["x"]
    # Without a manifest in the build CURRENT names, it is not an index any more: refused.
    other = tmp_path / "other"
    build(other)
    (other / RECORD).unlink()
    (other / BUILDS / (other / CURRENT).read_text().strip() / MANIFEST).unlink()
    with pytest.raises(AragError, match="not an arag index"):
        build(other)


def test_a_killed_builds_leftover_is_recorded_and_removed(tmp_path: Path) -> None:
    """The record names a build before its directory exists, so a build killed at any moment is
    cleaned up by the next one (here: a recorded build directory without any file in it)."""
    index = tmp_path / "index"
    build(index)
    leftover = "20200101T000000-0badc0de"
    data = json.loads((index / RECORD).read_text())
    data["builds"].append(leftover)
    (index / RECORD).write_text(json.dumps(data))
    (index / BUILDS / leftover).mkdir()
    build(index)
    assert not (index / BUILDS / leftover).exists()
    assert leftover not in json.loads((index / RECORD).read_text())["builds"]


@pytest.mark.integration
def test_a_directory_corpus_indexed_into_itself_keeps_its_documents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Repro: `arag index docs --out docs` twice went from 2 documents to 3 (the keyword vocabulary)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The Nile is a river in Africa.")
    (docs / "b.md").write_text("# Paris\n\nParis is in France.")
    for _ in range(3):
        code, out, err = run_cli(["index", str(docs), "--out", str(docs), "--json"], capsys)
        assert code == 0, err
        assert json.loads(out)["documents"] == 2
    assert (docs / "a.txt").read_text() == "The Nile is a river in Africa."
    # An index nested inside the corpus directory is skipped the same way.
    code, out, err = run_cli(["index", str(docs), "--out", str(docs / "index"), "--json"], capsys)
    code, out, err = run_cli(["index", str(docs), "--out", str(docs / "index"), "--json"], capsys)
    assert code == 0 and json.loads(out)["documents"] == 2, err
    record("index_ownership", "directory corpus indexed into itself", trials=5, faults=4, survived=4)


def test_the_package_imports_without_fcntl() -> None:
    """`import arag_graph` failed on Windows: index.py imported fcntl for the build lock (now filelock)."""
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['fcntl'] = None\n"  # what Windows has: no fcntl module
        "import arag_graph, arag_graph.index.hierarchical, arag_graph.cli.main, arag_graph.index.sample\n"
        "from arag_graph import build_index, load_index\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stderr[-2000:]


# What the CLI process runs: `arag index`, paused right before it asks for the build lock (after
# it has seen --out missing and created it) until the test says go. The pause is the only change.
_PAUSED_CLI = """
import sys, time
from pathlib import Path
from typing import Any
import arag_graph.index.build as index

ready, go = Path(sys.argv[1]), Path(sys.argv[2])
real_lock = index.build_lock

def paused_lock(root):
    ready.write_text("waiting")
    while not go.exists():
        time.sleep(0.05)
    return real_lock(root)

index.build_lock = paused_lock
from arag_graph.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


def test_a_build_that_loses_the_lock_touches_nothing(corpus: Path, tmp_path: Path) -> None:
    """Two `arag index` into the same new --out: the one the lock refuses (a second process here,
    which saw --out missing and so believes it created it) must leave the other's directory alone.
    The test plays the other build: it holds the lock and has written into --out meanwhile."""
    out = tmp_path / "new-index"
    ready, go = tmp_path / "ready", tmp_path / "go"
    argv = ["index", str(corpus), "--out", str(out), "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    process = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_CLI, str(ready), str(go), *argv],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(2400):
            if ready.exists() or process.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists(), process.communicate()
        assert out.is_dir()  # created by the CLI process, which will lose the lock
        with FileLock(str(out / ".lock"), timeout=0):
            (out / BUILDS).mkdir()
            (out / BUILDS / "in-progress").write_text("the other build's work")
            go.write_text("go")
            _, stderr = process.communicate(timeout=120)
            assert process.returncode != 0
            assert stderr.strip().startswith("arag: error: ") and "\n" not in stderr.strip(), stderr
            assert "another `arag index` is building into this directory" in stderr
            assert (out / BUILDS / "in-progress").read_text() == "the other build's work"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    record("index_ownership", "the loser of the build lock touches nothing", faults=1, survived=1)


# ---------------------------------------------------------------------------------------------
# The pieces, on files written by hand (no build): what counts as arag's, what a switch leaves


def damaged(root: Path, problem: str) -> str:
    return f"index damaged: {problem}; rebuild with `arag index CORPUS --out {root}`"


def test_current_names_a_build_or_is_damage_and_a_switch_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import io
    import stat

    from arag_graph.core.errors import IndexDamagedError
    from arag_graph.index import layout
    from arag_graph.index.layout import new_build_name, point_current, read_current, write_atomic

    current = tmp_path / CURRENT
    assert read_current(tmp_path) is None and read_current(tmp_path, strict=False) is None
    name = new_build_name()
    point_current(tmp_path, name)
    assert current.read_text(encoding="utf-8") == name + "\n" and read_current(tmp_path) == name
    point_current(tmp_path, new_build_name())  # replaces it whole
    fsync = os.fsync

    def fsync_no_directory(fd: int) -> None:  # as on filesystems that cannot sync a directory
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "Invalid argument")
        fsync(fd)

    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", fsync_no_directory)
        point_current(tmp_path, name)  # the switch is made; only the directory's sync is skipped
    assert read_current(tmp_path) == name
    assert sorted(p.name for p in tmp_path.iterdir()) == [CURRENT]  # no temp file left
    long_name = "../" + "x" * 60
    for content, problem in (
        (long_name.encode() + b"\n", f"{current} names {long_name[:40]!r}, not a build of this index"),
        (b"\xff\xfe" + name.encode(), f"{current} is not UTF-8 text"),
        (name.encode() + b"x" * 4096, f"{current} is longer than a build name"),
        (name.encode() + b" " * (4096 - len(name)), None),  # 4096 bytes at most: still a name
        (name.encode() + b" " * (4096 - len(name)) + b"x", f"{current} is longer than a build name"),
        (name.encode() + b"\n" + b" " * 8000 + b"x", f"{current} is longer than a build name"),
    ):
        current.write_bytes(content)
        if problem is None:
            assert read_current(tmp_path) == name
            continue
        with pytest.raises(IndexDamagedError) as caught:
            read_current(tmp_path)
        assert str(caught.value) == damaged(tmp_path, problem)
        assert read_current(tmp_path, strict=False) is None  # a rebuild replaces it
    current.write_text(name + "\n", encoding="utf-8")

    class FailingRead(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as patched:  # a disk error reading it (no file on disk fails on demand)
        patched.setattr(layout, "open_index_file", lambda root, path: FailingRead())
        with pytest.raises(IndexDamagedError) as caught:
            read_current(tmp_path)
        assert str(caught.value) == damaged(tmp_path, f"{current} cannot be read (Input/output error)")
        assert read_current(tmp_path, strict=False) is None
    current.unlink()
    current.mkdir()  # a CURRENT that cannot be read as a file
    with pytest.raises(IndexDamagedError, match=r"^index damaged: .*CURRENT"):
        read_current(tmp_path)
    assert read_current(tmp_path, strict=False) is None
    current.rmdir()
    (tmp_path / "elsewhere").write_text(name + "\n", encoding="utf-8")
    current.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(IndexDamagedError, match="symbolic link"):
        read_current(tmp_path)
    assert read_current(tmp_path, strict=False) is None

    write_atomic(tmp_path / "small.json", '{"a": 1}\n')
    write_atomic(tmp_path / "small.json", '{"b": 2}\n')
    assert (tmp_path / "small.json").read_text(encoding="utf-8") == '{"b": 2}\n'
    assert not list(tmp_path.glob(".small*"))


def test_the_ownership_record_is_read_only_when_arag_wrote_it(tmp_path: Path) -> None:
    from arag_graph.index.layout import RECORD_FORMAT, BuildRecord, new_build_name

    a, b = new_build_name(), new_build_name()
    path = tmp_path / RECORD
    assert BuildRecord.read(tmp_path) is None
    good = {"format": RECORD_FORMAT, "tool": "arag-graph", "builds": [a, b]}
    path.write_text(json.dumps(good), encoding="utf-8")
    record = BuildRecord.read(tmp_path)
    assert record is not None and record.builds == [a, b] and record.root == tmp_path
    assert record.owns(a) and not record.owns(new_build_name())
    for foreign in (
        "not json",
        "[1]",
        json.dumps({**good, "format": RECORD_FORMAT + 1}),
        json.dumps({"tool": "arag-graph", "builds": [a]}),
        json.dumps({**good, "builds": a}),
        json.dumps({**good, "builds": [a, "../etc"]}),
        json.dumps({**good, "builds": [a, 7]}),
    ):
        path.write_text(foreign, encoding="utf-8")
        assert BuildRecord.read(tmp_path) is None, foreign
    path.unlink()
    path.mkdir()
    assert BuildRecord.read(tmp_path) is None
    path.rmdir()

    record = BuildRecord(tmp_path, [])
    record.add(a)
    record.add(b)
    record.add(a)  # once
    assert json.loads(path.read_text(encoding="utf-8")) == {**good, "builds": [a, b]}
    record.discard(a)
    record.discard(a)  # not there: nothing to do
    assert json.loads(path.read_text(encoding="utf-8"))["builds"] == [b]
    assert BuildRecord.read(tmp_path).builds == [b]  # type: ignore[union-attr]
    path.unlink()
    record.discard(new_build_name())  # nothing recorded changes: the file is not written
    assert not path.exists()
    record.add(b)  # already recorded: not written either
    assert not path.exists()


def test_an_index_of_an_earlier_version_is_recognised_only_by_its_manifest(tmp_path: Path) -> None:
    from arag_graph.index.layout import legacy_build, new_build_name

    name = new_build_name()
    assert legacy_build(tmp_path) is None  # no CURRENT
    (tmp_path / CURRENT).write_text(name + "\n", encoding="utf-8")
    assert legacy_build(tmp_path) is None  # no build
    manifest = tmp_path / BUILDS / name / MANIFEST
    manifest.parent.mkdir(parents=True)
    for content in ("{}", "not json", json.dumps(["format_version"]), json.dumps({"version": 1})):
        manifest.write_text(content, encoding="utf-8")
        assert legacy_build(tmp_path) is None, content
    manifest.write_text(json.dumps({"format_version": 3}), encoding="utf-8")
    assert legacy_build(tmp_path) == name
    (tmp_path / CURRENT).write_text("../" + name + "\n", encoding="utf-8")
    assert legacy_build(tmp_path) is None  # a CURRENT that names no build
    (tmp_path / CURRENT).write_text(name + "\n", encoding="utf-8")

    elsewhere = tmp_path / "elsewhere"
    shutil.move(tmp_path / BUILDS, elsewhere)
    (tmp_path / BUILDS).symlink_to(elsewhere, target_is_directory=True)  # builds is a link
    assert legacy_build(tmp_path) is None
    (tmp_path / BUILDS).unlink()
    (tmp_path / BUILDS).mkdir()
    (tmp_path / BUILDS / name).symlink_to(elsewhere / name, target_is_directory=True)  # the build is a link
    assert legacy_build(tmp_path) is None
    (tmp_path / BUILDS / name).unlink()
    (tmp_path / BUILDS / name / MANIFEST).mkdir(parents=True)  # the manifest is no file
    assert legacy_build(tmp_path) is None


def test_stale_builds_go_and_nothing_else_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from arag_graph.index.layout import BuildRecord, new_build_name, remove_stale_builds, remove_tree

    keep, old, gone, linked = (new_build_name() for _ in range(4))
    builds = tmp_path / BUILDS
    for name in (keep, old):
        (builds / name).mkdir(parents=True)
        (builds / name / "data").write_text(name, encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep-me").write_text("x", encoding="utf-8")
    (builds / linked).symlink_to(outside, target_is_directory=True)
    tmp_names = [
        f".{CURRENT}.{'0' * 32}",
        f".{CURRENT}.{'a' * 31}",
        f".{CURRENT}.{'f' * 32}x",
        f"x.{CURRENT}.{'0' * 32}",
    ]
    for name in tmp_names:
        (tmp_path / name).write_text("left by a killed switch", encoding="utf-8")
    (tmp_path / f".{CURRENT}.{'1' * 32}").mkdir()  # a directory of that name is not a temp file
    (tmp_path / f".{CURRENT}.{'2' * 32}").symlink_to(outside / "keep-me")  # nor is a link: not arag's
    record = BuildRecord(tmp_path, [keep, old, gone, linked])
    record.save()
    dropped: list[Path] = []

    def drop(path: Path) -> None:
        dropped.append(path)
        remove_tree(path)

    remove_stale_builds(record, keep, drop)
    assert dropped == [builds / old]  # the link is never followed, nor passed on
    assert sorted(p.name for p in builds.iterdir()) == sorted([keep, linked])
    assert (outside / "keep-me").exists() and (builds / keep / "data").exists()
    assert record.builds == [keep, linked] and BuildRecord.read(tmp_path).builds == [keep, linked]  # type: ignore[union-attr]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".", "x."))) == sorted(
        [*tmp_names[1:], f".{CURRENT}.{'1' * 32}", f".{CURRENT}.{'2' * 32}"]
    )
    remove_stale_builds(record, None, drop)  # keep nothing: every real build goes
    assert not (builds / keep).exists() and (builds / linked).is_symlink()

    def denied(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    (builds / old).mkdir()
    record.add(old)
    with monkeypatch.context() as patched:  # the index directory cannot be listed: the builds still go
        patched.setattr(os, "scandir", denied)
        remove_stale_builds(record, None, drop)
    assert not (builds / old).exists() and record.builds == [linked]
    (builds / old / "sub").mkdir(parents=True)
    (builds / old / "sub" / "file").write_text("x", encoding="utf-8")
    with monkeypatch.context() as patched:  # what cannot be deleted stays, and the build goes on
        patched.setattr(os, "unlink", denied)
        remove_tree(builds / old)
    assert (builds / old / "sub" / "file").exists()
    remove_tree(builds / old)
    assert not (builds / old).exists()

    remove_tree(builds / linked)  # a link is not a build directory: nothing happens
    assert (outside / "keep-me").exists() and (builds / linked).is_symlink()
    shutil.rmtree(builds)
    builds.symlink_to(outside, target_is_directory=True)
    with pytest.raises(AragError) as caught:
        remove_stale_builds(BuildRecord(tmp_path, [keep]), None, drop)
    assert str(caught.value) == (
        f"{builds}: is a symbolic link, and arag never follows links out of an index directory"
    )
    assert (outside / "keep-me").exists()


# ---------------------------------------------------------------------------------------------
# The switch (arag_graph/index/build.py): CURRENT moves only to a complete build, a build that
# fails leaves the previous one answering and nothing of its own, and a dropped build takes only
# its own server collection with it. Small builds with a cheap encoder, so that the mutation run
# (bench/mutation.py) can run them for every mutant.

NEW_DOCS = [SourceDocument("The Danube flows through Vienna.", id="danube")]
SERVER = "http://127.0.0.1:8000"


class FailingEmbeddings(NamedFakeEmbeddings):
    """An encoder that fails on its first call, as a build interrupted by an error."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("embedding service went away")


def chunk_ids(root: Path) -> list[str]:
    return [c.id for c in load_index(root, embeddings=NamedFakeEmbeddings()).store.chunks]


def recorded(root: Path) -> list[str]:
    return list(json.loads((root / RECORD).read_text(encoding="utf-8"))["builds"])


def builds_of(root: Path) -> list[str]:
    return sorted(p.name for p in (root / BUILDS).iterdir())


def current_of(root: Path) -> str:
    return (root / CURRENT).read_text(encoding="utf-8").strip()


def test_a_write_the_disk_refuses_is_one_line_and_a_failed_build_leaves_nothing_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk (or a read-only one, no permission) while a build writes is one line naming the file;
    a failed first build leaves no directory it created, and an existing directory as it was;
    a failed rebuild leaves the previous build answering and recorded, and nothing else."""
    import errno

    from arag_graph.index.keywords import KeywordIndex

    def refuse(make: Any) -> None:
        def save(self: KeywordIndex, build_dir: Path) -> None:
            raise make(build_dir)

        monkeypatch.setattr(KeywordIndex, "save", save)

    def full(build_dir: Path) -> OSError:
        return OSError(errno.ENOSPC, "No space left on device", str(build_dir / "keywords.npz"))

    refuse(full)
    new = tmp_path / "new"
    with pytest.raises(AragError) as caught:
        build(new)
    message = one_line(caught.value)
    assert message.startswith(f"{new / BUILDS}/") and message.endswith(
        "/keywords.npz: cannot write the index (No space left on device); free disk space or choose another --out"
    )
    assert not new.exists()  # a first build that failed: as if never started

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(AragError, match="No space left on device"):
        build(empty)
    assert empty.is_dir() and builds_of(empty) == [] and recorded(empty) == []  # the user's directory stays

    monkeypatch.undo()
    index = tmp_path / "index"
    build(index)
    before = (current_of(index), builds_of(index), recorded(index), chunk_ids(index))
    refuse(full)
    with pytest.raises(AragError, match="No space left on device"):
        build(index, NEW_DOCS)
    assert (current_of(index), builds_of(index), recorded(index), chunk_ids(index)) == before

    refuse(lambda build_dir: OSError("wrote 3 of 12 bytes"))  # a short write, as numpy reports it: no errno
    with pytest.raises(AragError) as caught:
        build(index, NEW_DOCS)
    assert one_line(caught.value) == (
        f"{index}: cannot write the index (wrote 3 of 12 bytes); free disk space or choose another --out"
    )
    assert (current_of(index), builds_of(index), recorded(index), chunk_ids(index)) == before

    refuse(lambda build_dir: FileNotFoundError(errno.ENOENT, "No such file or directory", str(build_dir / "x")))
    with pytest.raises(FileNotFoundError):  # not a write the file system refused: goes on as it is
        build(index, NEW_DOCS)
    assert (current_of(index), builds_of(index), recorded(index), chunk_ids(index)) == before


def test_a_failed_first_build_whose_directory_cannot_be_removed_reports_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    out = tmp_path / "new"
    rmdir = os.rmdir

    def denied_for_out(path: Any, *args: Any, **kwargs: Any) -> None:
        if Path(path) == out:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", denied_for_out)
    with pytest.raises(RuntimeError, match="embedding service went away"):  # not the clean-up's error
        build_index(DOCS, out, embeddings=FailingEmbeddings(), progress=False)
    monkeypatch.undo()
    assert out.is_dir() and not (out / BUILDS).exists()  # emptied as far as it could be


def test_an_interrupt_after_current_is_replaced_leaves_the_new_build_answering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (or any error) landing after the rename of CURRENT, in the sync of the directory: the
    new build is complete and active, so it stays; the next build removes the previous one."""
    import stat

    index = tmp_path / "index"
    build(index)
    old = current_of(index)
    fsync = os.fsync

    def interrupted_after_the_switch(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode) and current_of(index) != old:
            raise KeyboardInterrupt
        fsync(fd)

    monkeypatch.setattr(os, "fsync", interrupted_after_the_switch)
    with pytest.raises(KeyboardInterrupt):
        build(index, NEW_DOCS)
    monkeypatch.undo()
    new = current_of(index)
    assert new != old and chunk_ids(index) == ["danube"]
    assert builds_of(index) == sorted([old, new]) and sorted(recorded(index)) == sorted([old, new])
    build(index, NEW_DOCS)
    assert builds_of(index) == [current_of(index)] == recorded(index) and chunk_ids(index) == ["danube"]


def test_a_rebuild_over_a_damaged_current_replaces_it_and_a_failed_one_leaves_no_build(tmp_path: Path) -> None:
    index = tmp_path / "index"
    build(index)
    (index / CURRENT).write_text("not a build\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="embedding service went away"):
        build_index(NEW_DOCS, index, embeddings=FailingEmbeddings(), progress=False)
    assert builds_of(index) == [] and recorded(index) == []  # no build was active: none is kept
    assert (index / CURRENT).read_text(encoding="utf-8") == "not a build\n"
    build(index, NEW_DOCS)
    assert builds_of(index) == [current_of(index)] == recorded(index) and chunk_ids(index) == ["danube"]


def test_damage_found_in_the_index_a_build_returns_names_its_directory(tmp_path: Path) -> None:
    from arag_graph.core.errors import IndexDamagedError

    root = tmp_path / "index"
    built = build_index(DOCS, root, embeddings=NamedFakeEmbeddings(), progress=False)
    assert built.build_dir is not None
    with (built.build_dir / str(built.manifest.chroma["path"])).open("r+b") as fh:  # the mapped matrix
        fh.seek(-4, os.SEEK_END)
        fh.write(b"\x00\x00\x40\x40")  # its last element 3.0: that row is no unit vector any more
    with pytest.raises(IndexDamagedError) as caught:
        built.sentences.check()
    assert one_line(caught.value).endswith(f"rebuild with `arag index CORPUS --out {root}`")


def test_summaries_of_the_previous_build_are_offered_and_forgotten_once_the_new_build_is_active(
    tmp_path: Path,
) -> None:
    from arag_graph.llm.summarize import ModelSummaries

    seen: list[tuple[str, Any]] = []

    class Recording(ModelSummaries):
        def write(self, build_dir: Path, root: Path, *args: Any, reuse: Any, **kwargs: Any) -> Any:
            seen.append(("write", [p.relative_to(root).as_posix() for p in reuse]))
            return super().write(build_dir, root, *args, reuse=reuse, **kwargs)

        def forget(self, root: Path) -> None:
            seen.append(("forget", current_of(root)))  # the resume file goes once CURRENT names the build
            super().forget(root)

    index = tmp_path / "index"
    build_index(DOCS, index, embeddings=NamedFakeEmbeddings(), summaries=Recording("offline"), progress=False)
    first = current_of(index)
    assert seen == [("write", []), ("forget", first)]
    seen.clear()
    build_index(NEW_DOCS, index, embeddings=NamedFakeEmbeddings(), summaries=Recording("offline"), progress=False)
    second = current_of(index)
    assert second != first and seen == [("write", [f"{BUILDS}/{first}"]), ("forget", second)]


# What _drop_build is given: a build directory of a Chroma server index, written by hand. Which
# collection the server is asked to drop is decided in arag; the server's side of it is
# tests/test_chroma_server.py::test_rebuild_swaps_collections_only_when_complete.
BUILD = "20260101T000000-0123abcd"
HTTP = {"mode": "http", "url": SERVER, "collection": f"p-{BUILD}", "ids": "rows"}
FROM_MANIFEST = ("connect", HTTP, {"create": False, "timeout": 7.5})
FROM_STORE = ("connect", {**HTTP, "collection": f"s-{BUILD}"}, {"create": False, "timeout": 7.5})
STORE = json.dumps(FROM_STORE[1])


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({MANIFEST: json.dumps({"chroma": HTTP}), "sentences.json": STORE}, [FROM_MANIFEST, ("drop", f"p-{BUILD}")]),
        ({"sentences.json": STORE}, [FROM_STORE, ("drop", f"s-{BUILD}")]),  # killed before its manifest
        ({MANIFEST: "{", "sentences.json": STORE}, [FROM_STORE, ("drop", f"s-{BUILD}")]),
        ({MANIFEST: "[1]", "sentences.json": STORE}, [FROM_STORE, ("drop", f"s-{BUILD}")]),
        ({MANIFEST: "link", "sentences.json": STORE}, [FROM_STORE, ("drop", f"s-{BUILD}")]),
        ({MANIFEST: "EIO", "sentences.json": STORE}, [FROM_STORE, ("drop", f"s-{BUILD}")]),  # a read that fails
        ({MANIFEST: json.dumps({"chroma": {**HTTP, "collection": "p-20200101T000000-0badc0de"}})}, []),
        ({MANIFEST: json.dumps({"chroma": {**HTTP, "collection": f"p-{BUILD}x"}})}, []),
        ({MANIFEST: json.dumps({"chroma": {**HTTP, "mode": "persistent"}})}, []),
        ({MANIFEST: json.dumps({"chroma": {**HTTP, "collection": 12}})}, []),
        ({MANIFEST: json.dumps({"chroma": ["http"]}), "sentences.json": STORE}, []),  # the manifest decides
        ({MANIFEST: json.dumps({"chroma": {**HTTP, "url": "http://unreachable:1"}})}, ["unreachable"]),
        ({}, []),
    ],
    ids=[
        "manifest",
        "unfinished",
        "manifest-not-json",
        "manifest-not-a-mapping",
        "manifest-a-link",
        "manifest-unreadable",
        "another-builds-collection",
        "a-longer-name",
        "embedded-store",
        "collection-not-a-name",
        "store-not-a-mapping",
        "server-unreachable",
        "empty",
    ],
)
def test_dropping_a_build_drops_the_server_collection_named_for_it_and_no_other(
    files: dict[str, str], expected: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from arag_graph.index import write as write_module

    root = tmp_path / "index"
    build_dir = root / BUILDS / BUILD
    build_dir.mkdir(parents=True)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"chroma": {**HTTP, "collection": f"theirs-{BUILD}"}}), encoding="utf-8")
    for name, text in files.items():
        if text == "link":  # a manifest that is a link is never read
            (build_dir / name).symlink_to(outside)
        else:
            (build_dir / name).write_text(text, encoding="utf-8")
    calls: list[Any] = []

    class Collection:
        def __init__(self, name: str) -> None:
            self.name = name

        def drop(self) -> None:
            calls.append(("drop", self.name))

    def connect(config: dict[str, Any], where: Path, **kwargs: Any) -> Collection:
        if config.get("url") == "http://unreachable:1":
            calls.append("unreachable")
            raise ConnectionError("connection refused")
        assert where == build_dir
        calls.append(("connect", config, kwargs))
        return Collection(config["collection"])

    read_index_bytes = write_module.read_index_bytes

    def failing_read(root: Path, path: Path) -> bytes:  # a disk error reading it: no file fails on demand
        if files.get(path.name) == "EIO":
            raise OSError(errno.EIO, "Input/output error")
        return read_index_bytes(root, path)

    monkeypatch.setattr(write_module, "connect_sentence_store", connect)
    monkeypatch.setattr(write_module, "read_index_bytes", failing_read)
    write_module._drop_build(build_dir, 7.5)
    assert calls == expected
    assert not build_dir.exists() and not build_dir.is_symlink()  # the directory goes regardless
    assert outside.exists()


def test_a_rebuild_drops_a_leftover_builds_collection_with_the_chroma_timeout_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arag_graph.index import write as write_module

    index = tmp_path / "index"
    build(index)
    leftover = "20200101T000000-0badc0de"
    data = json.loads((index / RECORD).read_text(encoding="utf-8"))
    (index / RECORD).write_text(json.dumps({**data, "builds": [*data["builds"], leftover]}), encoding="utf-8")
    (index / BUILDS / leftover).mkdir()
    config = {**HTTP, "collection": f"p-{leftover}"}
    (index / BUILDS / leftover / "sentences.json").write_text(json.dumps(config), encoding="utf-8")
    calls: list[Any] = []

    class Collection:
        def drop(self) -> None:
            calls.append("drop")

    def connect(config: dict[str, Any], where: Path, **kwargs: Any) -> Collection:
        calls.append((config["collection"], where.name, kwargs))
        return Collection()

    monkeypatch.setattr(write_module, "connect_sentence_store", connect)
    build_index(DOCS, index, embeddings=NamedFakeEmbeddings(), progress=False, chroma_timeout=7.5)
    assert calls == [(f"p-{leftover}", leftover, {"create": False, "timeout": 7.5}), "drop"]
    assert builds_of(index) == [current_of(index)] == recorded(index)


def test_a_build_is_not_deleted_while_a_reader_holds_the_readers_lock(tmp_path: Path) -> None:
    """Old builds go only when no reader can still be opening them (issue 38): while one holds
    ``.readers`` shared, a rebuild switches ``CURRENT`` and leaves the replaced build; the first
    rebuild after it was let go deletes it. Readers do not exclude each other."""
    from arag_graph.index.layout import READERS, no_readers, read_current, reading

    root = tmp_path / "index"
    build(root)
    first = read_current(root)
    with reading(root) as held, reading(root) as also:
        assert held and also  # shared: any number of readers at once
        with no_readers(root) as alone:
            assert not alone
        build(root)
        second = read_current(root)
        assert second != first and sorted(p.name for p in (root / BUILDS).iterdir()) == sorted([first, second])
    with no_readers(root) as alone:
        assert alone
    build(root)
    third = read_current(root)
    assert [p.name for p in (root / BUILDS).iterdir()] == [third]
    assert json.loads((root / RECORD).read_text())["builds"] == [third]
    assert (root / READERS).is_file() and not (root / READERS).is_symlink()


def test_the_readers_lock_never_follows_a_link(tmp_path: Path) -> None:
    """A ``.readers`` that is a symbolic link is not opened (nor created through): readers go without the
    lock (loading's retry covers them) and deletion goes ahead, and the link's target is untouched."""
    from arag_graph.index.layout import READERS, no_readers, reading

    root = tmp_path / "index"
    build(root)
    target = tmp_path / "elsewhere"
    (root / READERS).unlink(missing_ok=True)
    (root / READERS).symlink_to(target)
    with reading(root) as held:
        assert not held
    with no_readers(root) as alone:
        assert alone
    assert not target.exists()
    assert load_index(root, embeddings=NamedFakeEmbeddings()).document_ids() == ["nile", "paris"]
