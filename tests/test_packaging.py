"""The wheel installs only ``arag_graph``: no generic top-level package that other distributions own."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # No build isolation: the build backend (setuptools) is already installed, and nothing is downloaded.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (found,) = out.glob("arag_graph-*.whl")
    return found


def test_wheel_installs_only_arag_graph(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith((".dist-info", ".data"))}
    assert top_level == {"arag_graph"}, f"unexpected top-level names in the wheel: {sorted(top_level)}"
    assert "arag_graph/evaluators/runner.py" in names  # the evaluators ship, under the package
    assert "arag_graph/data/sample/corpus.json" in names  # the bundled sample for the demo
