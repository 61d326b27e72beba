"""An index directory on disk: its builds, which of them arag wrote, and what arag may delete.

An index directory holds ``CURRENT`` (the name of the active build), ``builds/<build>/`` and
``arag-index.json``, the ownership record: the names of the builds arag created here. A rebuild
deletes old builds and leftovers of killed ones, and a user's ``--out`` may be any directory, so
deletion follows rules that do not depend on the directory being what it looks like:

- a build is deleted only when the record names it (the name goes into the record *before* the
  directory is created, so a build killed at any moment is still known) and it is a real directory
  with a build's name (``<timestamp>-<8 hex>``), never a symbolic link;
- ``builds``, ``CURRENT`` and the record must not be symbolic links: arag never follows a link out
  of the index directory, and ``CURRENT`` must name a build, never a path;
- ``--out`` must be new, empty, an arag index (the record, or an index of an older version:
  ``CURRENT`` naming a build with a manifest), or the directory corpus being indexed into itself
  when none of arag's names is taken there. Anything else is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from arag_graph.core.errors import AragError, IndexDamagedError

CURRENT = "CURRENT"
BUILDS = "builds"
RECORD = "arag-index.json"
LOCK = ".lock"
MANIFEST = "manifest.json"
RECORD_FORMAT = 1
_BUILD_NAME = re.compile(r"\d{8}T\d{6}-[0-9a-f]{8}")
_CURRENT_TMP = re.compile(re.escape(f".{CURRENT}.") + r"[0-9a-f]{32}")
_CURRENT_MAX_BYTES = 4096  # a build name and a newline; anything longer is not ours


def new_build_name() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


def is_build_name(name: str) -> bool:
    """A name arag gives builds: never a path, never ``..``."""
    return _BUILD_NAME.fullmatch(name) is not None


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except FileNotFoundError:
        return None


def _is_link(path: Path) -> bool:
    st = _lstat(path)
    return st is not None and stat.S_ISLNK(st.st_mode)


def _is_real_dir(path: Path) -> bool:
    st = _lstat(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def read_current(root: Path, *, strict: bool = True) -> str | None:
    """The active build's name, or None when there is no ``CURRENT``.

    A ``CURRENT`` that is a link, not UTF-8, or names anything but a build is damage: with
    ``strict`` it raises the one-line :class:`IndexDamagedError`, without (a rebuild, which will
    replace it) it counts as no active build.
    """
    path = root / CURRENT
    try:
        st = _lstat(path)
        if st is None:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise IndexDamagedError(root, f"{path} is not a regular file")
        with path.open("rb") as fh:
            data = fh.read(_CURRENT_MAX_BYTES + 1)
        try:
            name = data.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise IndexDamagedError(root, f"{path} is not UTF-8 text") from None
        if not is_build_name(name):
            raise IndexDamagedError(root, f"{path} names {name[:40]!r}, not a build of this index")
    except IndexDamagedError:
        if strict:
            raise
        return None
    except OSError as exc:
        if strict:
            raise IndexDamagedError(root, f"{path} cannot be read ({exc.strerror or exc})") from None
        return None
    return name


def build_path(root: Path, build: str) -> Path:
    """``root/builds/<build>`` for loading, refusing links that lead out of the index directory."""
    builds = root / BUILDS
    if _is_link(builds):
        raise IndexDamagedError(root, f"{builds} is a symbolic link, which arag does not follow")
    path = builds / build
    if not _is_real_dir(path):
        what = "a symbolic link" if _is_link(path) else "missing"
        raise IndexDamagedError(root, f"the active build {path} is {what}")
    return path


# ---------------------------------------------------------------------------------------------
# The ownership record


class BuildRecord:
    """``arag-index.json``: the builds arag created in one index directory (kept under the build lock)."""

    def __init__(self, root: Path, builds: list[str]) -> None:
        self.root = root
        self.builds = builds

    @classmethod
    def read(cls, root: Path) -> BuildRecord | None:
        """The record, or None when there is none or it is not one arag wrote."""
        path = root / RECORD
        st = _lstat(path)
        if st is None or not stat.S_ISREG(st.st_mode):
            return None
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
            return None
        builds = data.get("builds")
        if not isinstance(builds, list) or not all(isinstance(b, str) and is_build_name(b) for b in builds):
            return None
        return cls(root, list(builds))

    def save(self) -> None:
        text = json.dumps({"format": RECORD_FORMAT, "tool": "arag-graph", "builds": self.builds}, indent=1)
        write_atomic(self.root / RECORD, text + "\n")

    def owns(self, build: str) -> bool:
        return build in self.builds

    def add(self, build: str) -> None:
        if build not in self.builds:
            self.builds.append(build)
            self.save()

    def discard(self, build: str) -> None:
        if build in self.builds:
            self.builds.remove(build)
            self.save()


def legacy_build(root: Path) -> str | None:
    """The active build of an index written before the ownership record existed, if ``root`` is one.

    ``CURRENT`` must name a real build directory holding a manifest with a format version: what
    earlier versions of arag wrote and nothing else does by accident.
    """
    name = read_current(root, strict=False)
    if name is None or _is_link(root / BUILDS):
        return None
    manifest = root / BUILDS / name / MANIFEST
    st = _lstat(manifest)
    if st is None or not stat.S_ISREG(st.st_mode) or not _is_real_dir(manifest.parent):
        return None
    try:
        data = json.loads(manifest.read_bytes())
    except (OSError, ValueError):
        return None
    return name if isinstance(data, dict) and "format_version" in data else None


def is_arag_index(path: Path) -> bool:
    """Whether ``path`` is an index directory arag wrote (record, or an older version's layout)."""
    return BuildRecord.read(path) is not None or legacy_build(path) is not None


def open_record(root: Path) -> BuildRecord:
    """The record of ``root``, adopting an older version's active build or starting an empty one."""
    record = BuildRecord.read(root)
    if record is None:
        legacy = legacy_build(root)
        record = BuildRecord(root, [legacy] if legacy else [])
        record.save()
    return record


# ---------------------------------------------------------------------------------------------
# Where a build may go


def check_out(root: Path, corpus_dir: Path | None = None) -> None:
    """Refuse, before anything is written, an ``--out`` that arag has no business writing into."""
    if _is_link(root) and not root.exists():
        raise AragError(f"{root}: is a broken symbolic link; choose another --out")
    if not root.exists():
        return
    if not root.is_dir():
        raise AragError(f"{root}: exists and is not a directory; choose another --out")
    for name in (BUILDS, CURRENT, RECORD):
        if _is_link(root / name):
            raise AragError(
                f"{root / name}: is a symbolic link, and arag never follows links out of an index directory; "
                "remove the link or choose another --out"
            )
    if is_arag_index(root):
        return
    try:
        empty = next(root.iterdir(), None) is None
    except OSError as exc:
        raise AragError(f"{root}: cannot be read ({exc.strerror or exc}); choose another --out") from None
    if empty:
        return
    if corpus_dir is not None and _same_dir(root, corpus_dir):
        taken = [name for name in (BUILDS, CURRENT, RECORD) if _lstat(root / name) is not None]
        if not taken:
            return  # a directory corpus indexed into itself: arag adds only its own names
        raise AragError(
            f"{root}: already holds {', '.join(taken)} that arag did not write; index the corpus into another --out"
        )
    raise AragError(
        f"{root}: exists, is not empty and is not an arag index; give a new or empty directory as --out "
        "(arag deletes old builds in its index directories, so it writes only where it can tell what it wrote)"
    )


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def make_root(root: Path) -> None:
    """Create the index directory, turning a read-only or full file system into the one-line error."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AragError(f"{root}: cannot be created ({exc.strerror or exc}); choose a writable --out") from None


@contextlib.contextmanager
def build_lock(root: Path) -> Iterator[None]:
    """One build at a time per index directory; a second one fails fast instead of interleaving.

    ``filelock`` rather than ``fcntl``, so that importing the package works on Windows too.
    """
    from filelock import FileLock, Timeout

    lock = FileLock(str(root / LOCK), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise AragError(
            f"{root}: another `arag index` is building into this directory; wait for it to finish"
        ) from None
    except OSError as exc:
        raise AragError(f"{root}: cannot write into it ({exc.strerror or exc}); choose a writable --out") from None
    try:
        yield
    finally:
        lock.release()


# ---------------------------------------------------------------------------------------------
# Switching and deleting builds


def write_atomic(path: Path, text: str) -> None:
    """Write a small file whole or not at all: a temp file, fsync, rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def point_current(root: Path, build: str) -> None:
    """Atomically make ``build`` the active build (write a temp file, fsync, rename)."""
    tmp = root / f".{CURRENT}.{uuid.uuid4().hex}"
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(build + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, root / CURRENT)
    with contextlib.suppress(OSError):
        dir_fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def remove_stale_builds(record: BuildRecord, keep: str | None, drop: Callable[[Path], None]) -> None:
    """Delete the recorded builds other than ``keep`` (older builds, leftovers of killed ones).

    ``drop`` deletes one build (and whatever it holds outside the directory, such as a server
    collection). Builds that are not real directories are never followed; the temp files of
    ``CURRENT`` switches that a kill left behind go too.
    """
    root = record.root
    builds = root / BUILDS
    if _is_link(builds):
        raise AragError(f"{builds}: is a symbolic link, and arag never follows links out of an index directory")
    for name in list(record.builds):
        if name == keep:
            continue
        path = builds / name
        if _is_real_dir(path):
            drop(path)
        if _lstat(path) is None:
            record.discard(name)
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            if _CURRENT_TMP.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)


def remove_tree(path: Path) -> None:
    """Delete a build directory without following any link inside it."""
    if _is_real_dir(path):
        # On platforms where rmtree cannot avoid symlink races it still never descends into links.
        shutil.rmtree(path, ignore_errors=True)
