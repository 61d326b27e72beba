"""``arag index`` on a full disk and into a read-only directory: one line, nothing half-written.

Each case runs the real command (real encoder, real Chroma) in a private mount namespace
(tests/mounts.py): a small tmpfs filled so that only so much room is left, swept from nothing to
enough, so the build runs out of space at every stage (the sentence matrix or Chroma's insert, the
chunk store, the keyword arrays, the manifest) without guessing sizes; and a read-only bind mount. Every run must end in
success or in one ``arag: error:`` line with exit status 2; a failed first build leaves no
``--out``, and a failed rebuild leaves the previous index answering as before.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from arag_graph.index.sample import sample_corpus_path
from tests.mounts import CLI_SCRIPT, RESULT_MARK, read_only_bind, require_mount_namespaces, run_in_namespace
from tests.mounts import subprocess_env as mount_env
from tests.reliability import record

pytestmark = [pytest.mark.slow, pytest.mark.integration]

# Room left on the file system for each build, from none to enough for the sample (about 4 MB).
LEFT = [0, 64 << 10, 256 << 10, 640 << 10, 1 << 20, 2 << 20, 3 << 20, 6 << 20]

FULL_DISK_SCRIPT = f"""
import contextlib, io, json, os, shutil, sys
from pathlib import Path
from arag_graph.cli.main import main

mnt, corpus, left, backend = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]

# The seventeen builds below index the same corpus with the real encoder; its vectors are computed
# once and handed back to every later build, since what varies is the room left for storing them.
# The context manager is held by a name: dropped at once, it would be closed and undone.
from tests.fakes import encodings_remembered
remembered = encodings_remembered()
encoded = remembered.__enter__()

def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except BaseException as exc:
            import traceback
            traceback.print_exc(file=err)
            code = "raised"
    return {{"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue()}}

def fill(leave):
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    with open(mnt / "filler", "wb") as fh:
        fh.write(b"\\1" * max(0, free - leave))

def empty():
    with contextlib.suppress(FileNotFoundError):
        os.unlink(mnt / "filler")

first, rebuilds = [], []
for leave in left:
    fill(leave)
    result = run(["index", corpus, "--out", str(mnt / "first"), "--quiet", "--backend", backend])
    result.update(left=leave, out_exists=(mnt / "first").exists())
    first.append(result)
    empty()
    shutil.rmtree(mnt / "first", ignore_errors=True)

search = ["search", "--index", str(mnt / "index"), "--keywords", "Leland", "--json"]
built = run(["index", corpus, "--out", str(mnt / "index"), "--quiet", "--backend", backend])
before = run(search)
for leave in left:
    fill(leave)
    result = run(["index", corpus, "--out", str(mnt / "index"), "--quiet", "--backend", backend])
    result.update(left=leave, search=run(search), builds=sorted(os.listdir(mnt / "index" / "builds")))
    rebuilds.append(result)
    empty()
from arag_graph.index.load import load_index
sentences = load_index(mnt / "index").manifest.sentences
result = {{"first": first, "built": built, "before": before, "rebuilds": rebuilds, "encoded": sum(encoded),
          "sentences": sentences}}
print({RESULT_MARK!r} + json.dumps(result))
"""


def one_error_line(result: dict[str, Any]) -> str:
    assert result["code"] == 2 and result["out"] == "", result
    lines = result["err"].splitlines()
    assert len(lines) == 1 and lines[0].startswith("arag: error: ") and "Traceback" not in result["err"], result
    return lines[0]


@pytest.mark.parametrize("backend", ["matrix", "chroma"])
def test_a_full_disk_at_every_stage_of_a_build_is_one_line(backend: str, tmp_path: Path, _isolated_cache: Path) -> None:
    require_mount_namespaces()
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    mounts = [f"mount -t tmpfs -o size=16m tmpfs {shlex.quote(str(mnt))}"]
    args = [str(mnt), str(sample_corpus_path()), json.dumps(LEFT), backend]
    got = run_in_namespace(mounts, FULL_DISK_SCRIPT, args, mount_env(_isolated_cache), timeout=1200)

    encoded, sentences = got["encoded"], got["sentences"]
    assert encoded == sentences, f"the sweep's builds encoded {encoded} texts for {sentences} sentences, not each once"
    failures: list[str] = []
    for result in got["first"]:
        if result["code"] != 0:
            failures.append(one_error_line(result))
            assert not result["out_exists"], f"a failed first build left --out behind: {result}"
    assert got["first"][-1]["code"] == 0, "the sweep never left enough room for a whole build"

    assert got["built"]["code"] == 0 and got["before"]["code"] == 0
    answer = json.loads(got["before"]["out"])
    for result in got["rebuilds"]:
        if result["code"] != 0:
            failures.append(one_error_line(result))
        assert result["search"]["code"] == 0, result["search"]
        assert json.loads(result["search"]["out"]) == answer  # the previous or the new, equal build
        assert len(result["builds"]) <= 2, result["builds"]
    if backend == "chroma":
        assert any("cannot store the sentence vectors" in line for line in failures), failures  # in Chroma
    assert any("cannot write the index" in line for line in failures), failures  # in arag's own files
    runs = len(got["first"]) + len(got["rebuilds"])
    kinds = Counter(
        "Chroma's insert"
        if "cannot store the sentence vectors" in line
        else "arag's own files"
        if "cannot write the index" in line
        else "other steps (lock, directories, Chroma start-up)"
        for line in failures
    )
    record(
        "full_disk",
        f"arag index swept over the room left on a tmpfs ({backend})",
        trials=runs,
        faults=len(failures),
        survived=len(failures),
        failure_kinds=dict(kinds),
    )


def test_out_in_a_read_only_directory_is_one_line(tmp_path: Path, _isolated_cache: Path) -> None:
    require_mount_namespaces()
    parent = tmp_path / "read-only"
    parent.mkdir()
    corpus = str(sample_corpus_path())
    existing = tmp_path / "existing-index"
    commands = [
        ["index", corpus, "--out", str(parent / "sub" / "index"), "--quiet"],
        ["index", corpus, "--out", str(parent), "--quiet"],
    ]
    # An index that already exists, then mounted read-only: a rebuild cannot take its lock.
    prepare = run_in_namespace(
        [], CLI_SCRIPT, [json.dumps([["index", corpus, "--out", str(existing), "--quiet"]])], mount_env(_isolated_cache)
    )
    assert prepare[0]["code"] == 0, prepare
    commands.append(["index", corpus, "--out", str(existing), "--quiet"])
    mounts = [*read_only_bind(parent), *read_only_bind(existing)]
    results = run_in_namespace(mounts, CLI_SCRIPT, [json.dumps(commands)], mount_env(_isolated_cache))
    lines = [one_error_line(result) for result in results]
    assert "cannot be created (Read-only file system)" in lines[0]
    assert "Read-only file system" in lines[1] and "Read-only file system" in lines[2]
    record("read_only_out", "arag index --out in a read-only directory", trials=3, faults=3, survived=3)
