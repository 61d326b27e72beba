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


@pytest.mark.parametrize("source", sorted((REPO / "tests" / "typed_rejected").glob("*.py")), ids=lambda path: path.name)
def test_a_wrong_context_is_a_type_error(source: Path) -> None:
    """``context=`` is typed per graph (its schema or the schema's TypedDict), and ``build_index``'s
    settings are keyword parameters: a misspelt setting or a value of the wrong type is an error on
    exactly the lines each file of tests/typed_rejected/ marks, no other."""
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
