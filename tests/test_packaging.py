"""The wheel: only ``arag_graph`` at the top level, typed, described, one version, no unused dependency."""

from __future__ import annotations

import ast
import email.parser
import importlib.metadata
import re
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from tests.cli_run import run_cli

REPO = Path(__file__).resolve().parents[1]
# Not part of a build: local state, caches, and what only the repository needs.
_NOT_SOURCE = (".git", ".venv", "indexes", "runs", "build", "dist", "*.egg-info", "__pycache__", "tests", "bench")


def source_copy(dest: Path) -> Path:
    """A copy of the repository's sources to build from.

    Building in place with ``--no-build-isolation`` reuses setuptools' ``build/lib``, where files
    deleted from the sources linger and end up in the wheel; a fresh copy has no such leftovers.
    """
    shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    return dest


def build_wheel(src: Path, out: Path) -> Path:
    # No build isolation: the build backend (setuptools) is already installed, and nothing is downloaded.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (found,) = out.glob("arag_graph-*.whl")
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(source_copy(tmp_path_factory.mktemp("src") / "src"), tmp_path_factory.mktemp("wheel"))


def test_wheel_installs_only_arag_graph(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith((".dist-info", ".data"))}
    assert top_level == {"arag_graph"}, f"unexpected top-level names in the wheel: {sorted(top_level)}"
    assert "arag_graph/evaluators/runner.py" in names  # the evaluators ship, under the package
    assert "arag_graph/data/sample/corpus.json" in names  # the bundled sample for the demo
    assert "arag_graph/evaluators/report_template.html" in names  # the page of report.html
    # The default encoder, so that the default install needs no torch (tests/test_small_install.py).
    for name in ("model-int8.onnx.xz", "tokenizer.json", "sentence_bert_config.json", "LICENSE", "NOTICE.md"):
        assert f"arag_graph/index/minilm/{name}" in names


def test_wheel_holds_every_package_of_the_sources(wheel: Path) -> None:
    """pyproject.toml lists the packages by hand, so a new folder had to be added there too:
    ``arag_graph.offline`` and ``arag_graph.tools`` were not, and the installed package failed to
    import (``langgraph dev`` on an installed package, issue 37)."""
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = [p.relative_to(REPO).as_posix() for p in (REPO / "arag_graph").rglob("__init__.py")]
    missing = sorted(s.removesuffix("/__init__.py").replace("/", ".") for s in sources if s not in names)
    assert not missing, f"packages missing from the wheel (add them to pyproject.toml's packages): {missing}"


def _metadata(wheel: Path) -> Message:
    """The wheel's core metadata (METADATA of its .dist-info), parsed as the e-mail headers it is."""
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(zf.read(name).decode("utf-8"))


def test_every_package_folder_is_declared_for_the_wheel() -> None:
    """A folder of ``arag_graph`` missing from ``packages`` in pyproject.toml would be left out of the
    wheel (tools/ and offline/ were, after the moves of issue 33): every folder with an ``__init__.py``
    must be listed."""
    import tomllib

    declared = set(
        tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    )
    folders = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "arag_graph").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert folders - declared == set(), f"add {sorted(folders - declared)} to packages in pyproject.toml"


def test_wheel_is_typed_and_described(wheel: Path) -> None:
    """PEP 561 marker, classifiers and project URLs: what type checkers and PyPI read."""
    import arag_graph

    assert "arag_graph/py.typed" in zipfile.ZipFile(wheel).namelist()
    meta = _metadata(wheel)
    assert meta["Version"] == arag_graph.__version__
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert any(c.startswith("Programming Language :: Python :: 3.") for c in classifiers)
    assert meta.get_all("Project-URL"), "no project URLs in the wheel's metadata"
    assert meta["License-Expression"] == "MIT"


def test_the_version_is_written_once(tmp_path: Path) -> None:
    """Bumping ``arag_graph.__version__`` alone changes the built wheel's version: no second copy
    in pyproject.toml can drift from it."""
    src = source_copy(tmp_path / "src")
    init = src / "arag_graph" / "__init__.py"
    text, n = re.subn(r'^__version__ = "[^"]+"$', '__version__ = "9.8.7"', init.read_text(encoding="utf-8"), flags=re.M)
    assert n == 1, "arag_graph/__init__.py has no __version__ line"
    init.write_text(text, encoding="utf-8")
    built = build_wheel(src, tmp_path / "wheel")
    assert _metadata(built)["Version"] == "9.8.7"


def test_arag_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    import arag_graph

    code, out, err = run_cli(["--version"], capsys)
    assert (code, out, err) == (0, f"arag {arag_graph.__version__}\n", "")


def _imported_top_level(root: Path) -> set[str]:
    names: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_declared_dependency_is_imported(wheel: Path) -> None:
    """A runtime dependency nothing imports only costs users an install (and its own dependencies)."""
    from packaging.requirements import Requirement

    required = [Requirement(r) for r in _metadata(wheel).get_all("Requires-Dist") or []]
    runtime = {canonicalize_name(r.name) for r in required if r.marker is None}
    imported = _imported_top_level(REPO / "arag_graph")
    provided_by: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            provided_by.setdefault(canonicalize_name(dist), set()).add(module)
    unused = sorted(name for name in runtime if not provided_by.get(name, set()) & imported)
    assert not unused, f"declared but never imported by arag_graph: {unused}"
