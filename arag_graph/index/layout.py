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

Reading follows one rule, :func:`open_inside`, which every open of an index's files goes through
(CLI, library and served runs alike): arag opens only regular files (and the directories above
them) reached from the index directory without a symbolic link anywhere on the way. A build's
files are its own; an index whose ``chunks.jsonl`` or ``keywords.*`` link elsewhere would answer
from files arag never wrote and never checksummed (a planted index serving a private one).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from arag_graph.core.errors import AragError, IndexDamagedError

CURRENT = "CURRENT"
BUILDS = "builds"
RECORD = "arag-index.json"
LOCK = ".lock"
READERS = ".readers"  # readers hold it shared while they open a build; deleting old builds needs it alone
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


# ---------------------------------------------------------------------------------------------
# The file rule: what arag opens inside an index


class LinkedPathError(AragError):
    """A path inside a boundary (an index directory, the operator's index root) that arag will not open.

    ``path`` is the path as given, ``problem`` what is wrong with it ("is a symbolic link, ..."):
    callers word the one-line error for their audience (an index's damage, a served run's refusal).
    """

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path} {problem}")
        self.path = path
        self.problem = problem


_LINK = "is a symbolic link, which arag does not follow inside an index"
# openat() with O_NOFOLLOW per component: no window between a check and the open (POSIX).
_AT = os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY")


def open_inside(base: Path, path: Path, *, directory: bool = False) -> int:
    """Open ``path``, which lies inside ``base``, for reading; return the file descriptor.

    The one place the file rule lives. ``base`` itself is the caller's boundary (an index
    directory the user named, the operator's index root) and may be reached through links; below
    it, every component must be a real directory and the last one a regular file (a directory with
    ``directory``), none of them a symbolic link. The file is opened non-blocking, checked, then set
    blocking, so that a FIFO planted in its place cannot hang the process. Raises
    :class:`LinkedPathError`.
    """
    try:
        parts = path.relative_to(base).parts
    except ValueError:
        raise LinkedPathError(path, f"is outside {base}") from None
    if ".." in parts:
        raise LinkedPathError(path, f"is outside {base}")
    last = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        if _AT:
            fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
            for i, part in enumerate(parts):
                final = i == len(parts) - 1
                flags = (last if final else os.O_RDONLY) | os.O_NOFOLLOW
                if not final or directory:
                    flags |= os.O_DIRECTORY
                try:
                    nxt = os.open(part, flags, dir_fd=fd)
                finally:
                    os.close(fd)
                fd = nxt
        else:  # no openat (Windows): the same checks by lstat, then an open by name
            for i in range(1, len(parts) + 1):
                if stat.S_ISLNK(os.lstat(base.joinpath(*parts[:i])).st_mode):
                    raise OSError(errno.ELOOP, "symbolic link")
            fd = os.open(path, last)
    except OSError as exc:
        raise _refusal(base, path, exc) from None
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)):
        os.close(fd)
        raise LinkedPathError(path, "is not a directory" if directory else "is not a regular file")
    if not directory and hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return fd


def _refusal(base: Path, path: Path, exc: OSError) -> LinkedPathError:
    """Say which component broke the rule: a link on the way, a missing file, or the OS's reason."""
    parts = path.relative_to(base).parts
    for i in range(1, len(parts) + 1):
        at = base.joinpath(*parts[:i])
        st = _lstat_quiet(at)
        if st is None:
            return LinkedPathError(at, "cannot be read (it is missing)")
        if stat.S_ISLNK(st.st_mode):
            return LinkedPathError(at, _LINK)
        if i < len(parts) and not stat.S_ISDIR(st.st_mode):
            return LinkedPathError(at, "is not a directory")
    return LinkedPathError(path, f"cannot be read ({exc.strerror or exc})")


def _lstat_quiet(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except OSError:
        return None


def _damage(root: Path, exc: LinkedPathError) -> IndexDamagedError:
    return IndexDamagedError(root, str(exc))


def open_index_file(root: Path, path: Path) -> IO[bytes]:
    """A file of the index at ``root``, opened under :func:`open_inside`'s rule (binary, for reading).

    Anything the rule refuses is that index's one-line damage error.
    """
    try:
        return os.fdopen(open_inside(root, path), "rb")
    except LinkedPathError as exc:
        raise _damage(root, exc) from None


def read_index_bytes(root: Path, path: Path) -> bytes:
    with open_index_file(root, path) as fh:
        return fh.read()


def load_index_array(root: Path, path: Path, *, mmap: bool = True) -> Any:
    """A ``.npy`` array of the index at ``root``, read (or memory-mapped) from the file the rule opened.

    ``np.load`` maps only files it opens by name; the header is read here instead, so that the
    mapping is of the very file that was checked. Raises ``ValueError``/``OSError`` for a file that
    is not a plain ``.npy`` (the caller words the damage), :class:`IndexDamagedError` for the rule.
    """
    import numpy as np
    from numpy.lib import format as npy

    with open_index_file(root, path) as fh:
        if not mmap:
            return np.load(fh, allow_pickle=False)
        version = npy.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = npy.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = npy.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unsupported .npy version {version}")
        if dtype.hasobject:
            raise ValueError("an array of Python objects")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        offset = fh.tell()
        if os.fstat(fh.fileno()).st_size < offset + count * dtype.itemsize:
            raise ValueError("the file is shorter than its header says")
        if count == 0:
            return np.empty(shape, dtype=dtype)
        return np.memmap(fh, dtype=dtype, mode="r", shape=shape, order="F" if fortran else "C", offset=offset)


def check_index_tree(root: Path, path: Path) -> None:
    """A directory of the index (a Chroma store) and everything below it: real directories and
    regular files only, so that a third-party library opening files in it by name follows no link."""
    try:
        fd = open_inside(root, path, directory=True)
    except LinkedPathError as exc:
        raise _damage(root, exc) from None
    if not _AT:  # no openat (Windows): lstat every entry by name
        os.close(fd)
        for folder, dirs, files in os.walk(path):
            for name in (*dirs, *files):
                st = os.lstat(os.path.join(folder, name))
                if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                    raise IndexDamagedError(root, f"{Path(folder) / name} {_LINK}")
        return
    try:
        pending = [(fd, path)]
        while pending:
            dir_fd, where = pending.pop()
            try:
                with os.scandir(dir_fd) as entries:
                    for entry in entries:
                        st = entry.stat(follow_symlinks=False)
                        if stat.S_ISDIR(st.st_mode):
                            child = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                            pending.append((child, where / entry.name))
                        elif not stat.S_ISREG(st.st_mode):
                            what = _LINK if stat.S_ISLNK(st.st_mode) else "is not a regular file"
                            raise IndexDamagedError(root, f"{where / entry.name} {what}")
            finally:
                os.close(dir_fd)
    except OSError as exc:
        raise IndexDamagedError(root, f"{path} cannot be read ({exc.strerror or exc})") from None
    finally:
        for dir_fd, _ in pending:
            with contextlib.suppress(OSError):
                os.close(dir_fd)


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
        with open_index_file(root, path) as fh:
            data = fh.read(_CURRENT_MAX_BYTES + 1)
        if len(data) > _CURRENT_MAX_BYTES:  # not judged by its first bytes alone
            raise IndexDamagedError(root, f"{path} is longer than a build name")
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
    path = root / BUILDS / build
    try:
        os.close(open_inside(root, path, directory=True))
    except LinkedPathError as exc:
        raise _damage(root, exc) from None
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


def _file_above(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is not a directory (``/etc/passwd/x``)."""
    for parent in path.absolute().parents:
        try:
            parent.lstat()
        except OSError:  # missing, or below a file (NotADirectoryError): the loop goes on up
            continue
        return None if parent.is_dir() else parent
    return None


def check_out(root: Path, corpus_dir: Path | None = None, *, flag: str = "--out") -> None:
    """Refuse, before anything is written, an ``--out`` that arag has no business writing into.

    ``flag`` is how the caller's user gave ``root`` (``--out``, eval's ``--index``, the cache
    directory), so that the one-line refusal names what to change.
    """
    above = _file_above(root)
    if above is not None:
        raise AragError(
            f"{root}: {above} is not a directory, so nothing can be written below it; choose another {flag}"
        )
    if _is_link(root) and not root.exists():
        raise AragError(f"{root}: is a broken symbolic link; choose another {flag}")
    if not root.exists():
        return
    if not root.is_dir():
        raise AragError(f"{root}: exists and is not a directory; choose another {flag}")
    for name in (BUILDS, CURRENT, RECORD):
        if _is_link(root / name):
            raise AragError(
                f"{root / name}: is a symbolic link, and arag never follows links out of an index directory; "
                f"remove the link or choose another {flag}"
            )
    if is_arag_index(root):
        return
    try:
        empty = next(root.iterdir(), None) is None
    except OSError as exc:
        raise AragError(f"{root}: cannot be read ({exc.strerror or exc}); choose another {flag}") from None
    if empty:
        return
    if corpus_dir is not None and _same_dir(root, corpus_dir):
        taken = [name for name in (BUILDS, CURRENT, RECORD) if _lstat(root / name) is not None]
        if not taken:
            return  # a directory corpus indexed into itself: arag adds only its own names
        raise AragError(
            f"{root}: already holds {', '.join(taken)} that arag did not write; index the corpus into another {flag}"
        )
    raise AragError(
        f"{root}: exists, is not empty and is not an arag index; give a new or empty directory as {flag} "
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
    with no_readers(root) as alone:
        for name in list(record.builds):
            if name == keep or not alone:  # a reader may be opening it: a later build or update deletes it
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


# ---------------------------------------------------------------------------------------------
# Readers and deletion: an old build goes only when no reader can still be opening it
#
# A reader reads CURRENT and then opens that build's files; an update that switched CURRENT and
# deleted the old build in between would leave it reading a build that is gone. Readers therefore
# hold ``.readers`` shared (an advisory ``flock``) from before they read CURRENT until they have
# opened the build (after that it needs no file of it by name: arrays are mapped, an embedded Chroma
# store is a private copy); deleting builds needs it exclusively, and is left to a later build or
# update when a reader holds it. Where there is no ``flock`` (Windows, which cannot delete an open
# file anyway) or the file cannot be opened (a read-only index nobody updates), readers go without
# it and rely on loading's retry, which follows CURRENT to the new build.


def _flock() -> Any:
    """The ``fcntl`` module where the platform has one (imported here, not at the top: the package
    must import on Windows, tests/test_index_ownership.py)."""
    try:
        import fcntl
    except ImportError:
        return None
    return fcntl


def _open_readers_file(root: Path, *, create: bool) -> int | None:
    """A descriptor of ``root/.readers`` (with ``create``: made when missing and the directory is
    writable), never through a symbolic link; None when it cannot be opened."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for extra in (os.O_CREAT, 0) if create else (0,):
        try:
            return os.open(root / READERS, flags | extra, 0o644)
        except OSError:
            continue
    return None


@contextlib.contextmanager
def reading(root: Path) -> Iterator[bool]:
    """Hold ``root/.readers`` shared while a build is opened; yields whether the lock is held."""
    fcntl = _flock()
    fd = _open_readers_file(root, create=True) if fcntl is not None and root.is_dir() else None
    if fd is None:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a deletion holds it (never a whole build)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def no_readers(root: Path) -> Iterator[bool]:
    """Hold ``root/.readers`` exclusively if no reader holds it now (never waits); yields whether it
    is held. Without ``flock`` there is nothing to ask, and deletion goes ahead (loading retries)."""
    fcntl = _flock()
    if fcntl is None:
        yield True
        return
    fd = _open_readers_file(root, create=False)
    if fd is None:
        # No file: no reader holds it, and one that makes it now reads CURRENT after this, which
        # already names the new build (deletion follows the switch).
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
