"""The public API as mypy sees it: ``mypy`` (configured in pyproject.toml's ``[tool.mypy]``) on the
public modules and on ``tests/typed/`` (the README's and the library guide's calls, written as a
user would, with ``assert_type`` on what they return).

Before, ``arag_graph``'s lazy exports were ``Any`` to mypy and ``build_arag_graph(...).invoke(...,
context={"max_steps": 10})`` was an error (the builders returned a graph whose context type was None).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--show-error-codes", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )


def test_the_public_modules_and_the_readme_calls_type_check() -> None:
    result = _mypy()
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_a_wrong_call_is_caught(tmp_path: Path) -> None:
    """The check can fail: a misuse of the typed API is an error, not ``Any``."""
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from arag_graph import load_index\n"
        "from arag_graph.arag.graph import build_arag_graph\n"
        "index = load_index(42)\n"
        "build_arag_graph(index, 'offline').invoke({'questions': 'q'})\n",
        encoding="utf-8",
    )
    result = _mypy("--follow-imports=silent", str(wrong))
    assert result.returncode == 1
    assert 'wrong.py:3: error: Argument 1 to "load_index"' in result.stdout
    assert "wrong.py:4: error" in result.stdout


REJECTED = sorted((REPO / "tests" / "typed_rejected").glob("*.py"))


@pytest.mark.parametrize("source", REJECTED, ids=[p.name for p in REJECTED])
def test_mistakes_are_type_errors(source: Path) -> None:
    """Each file of tests/typed_rejected/ marks the lines mypy must reject: ``context=`` typed per graph
    (its schema or the schema's TypedDict: a misspelt setting or a value of the wrong type), the output
    of ``invoke()``/``ainvoke()`` typed by default (a misspelt key, a wrong type), and the tool names of
    ``create_retrieval_tools``. Errors on exactly the marked lines, no other."""
    marked = {
        number: line.split("# rejected: ", 1)[1].strip()
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1)
        if "# rejected: " in line
    }
    result = _mypy("--follow-imports=silent", str(source.relative_to(REPO)))
    errors = {
        int(line.split(":", 2)[1]): line
        for line in result.stdout.splitlines()
        if line.startswith(f"{source.relative_to(REPO)}:") and ": error: " in line
    }
    assert set(errors) == set(marked), result.stdout[-5000:] + result.stderr[-2000:]
    for number, expected in marked.items():
        assert expected in errors[number], errors[number]


def _setup_install_options() -> list[str]:
    """The options scripts/setup gives ``pip install -e``, as it gives them (``--quiet`` aside)."""
    import shlex

    for line in (REPO / "scripts" / "setup").read_text(encoding="utf-8").splitlines():
        if "pip install" not in line or line.lstrip().startswith("#"):
            continue
        words = shlex.split(line.strip())
        if "-e" in words:
            rest = words[words.index("install") + 1 :]
            editable = rest.index("-e")
            return [w for n, w in enumerate(rest) if w != "--quiet" and n not in (editable, editable + 1)]
    raise AssertionError("scripts/setup has no `pip install -e` line")


@pytest.fixture(scope="module")
def dev_install(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of the sources installed the way scripts/setup installs them: (the copy, its python).
    The dependencies come from the running interpreter's site-packages, added as plain path lines, so
    the only arag_graph there is the one installed here."""
    from tests.test_packaging import source_copy

    tmp_path = tmp_path_factory.mktemp("dev_install")
    src = source_copy(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    dependencies = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (Path(purelib) / "zz_dependencies.pth").write_text("\n".join(dependencies) + "\n", encoding="utf-8")
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    install += ["--no-build-isolation", *_setup_install_options(), "-e", str(src)]
    done = subprocess.run(install, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return src, python


def test_mypy_finds_the_dev_install_from_any_directory(dev_install: tuple[Path, Path], tmp_path: Path) -> None:
    """scripts/setup's editable install is found by mypy run outside the repository. setuptools'
    default editable install is an import hook, which mypy cannot follow ("Cannot find implementation
    or library stub for module named 'arag_graph'"); a strict install (a tree of links) is a folder on
    the path."""
    _, python = dev_install
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "user.py").write_text(
        "import arag_graph.core.documents\nimport arag_graph.evaluators.runner\n", encoding="utf-8"
    )
    # --follow-imports=skip: finding the modules is what is checked, not analysing the whole package.
    result = subprocess.run(
        [str(python), "-m", "mypy", "--no-error-summary", "--follow-imports=skip", "user.py"],
        cwd=elsewhere, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_every_module_imports_from_the_repository_root(dev_install: tuple[Path, Path]) -> None:
    """From the repository root (where ``python -m pytest``, ``langgraph dev`` and the test
    subprocesses run) Python finds the working tree's ``arag_graph/`` before the install's link tree,
    so a package the install maps in from another folder is missing there: with ``evaluators/`` at the
    root and mapped to ``arag_graph.evaluators``, the whole CI run failed on ``No module named
    'arag_graph.evaluators'``. Every package of the wheel must import from the working tree itself."""
    src, python = dev_install
    packages = sorted(".".join(p.parent.relative_to(src).parts) for p in (src / "arag_graph").rglob("__init__.py"))
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    result = subprocess.run(
        [str(python), "-c", code, *packages], cwd=src, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
