"""The documentation site builds with ``mkdocs build --strict``: a broken link or a reference to a
module that does not exist fails the suite, not a reader."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MKDOCS = [sys.executable, "-m", "mkdocs"]


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MKDOCS, "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.mark.timeout(1200)
def test_the_documentation_site_builds_strictly(tmp_path: Path) -> None:
    done = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    built = tmp_path / "site"
    for page in ("index.html", "guide/library/index.html", "reference/index_layer/index.html"):
        assert (built / page).is_file(), page
    # The API reference is generated from the docstrings, not written by hand.
    reference = (built / "reference/index_layer/index.html").read_text(encoding="utf-8")
    assert "build_index" in reference and "BuildOptions" in reference


def _guide_only_copy(tmp_path: Path) -> Path:
    """The guide pages with the site's own link validation, without the API reference (fast)."""
    shutil.copytree(REPO / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("reference"))
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    config = config[: config.index("  - API reference:")] + config[config.index("markdown_extensions:") :]
    config = config[: config.index("  - mkdocstrings:")]
    (tmp_path / "mkdocs.yml").write_text(config, encoding="utf-8")
    index = tmp_path / "docs" / "index.md"
    index.write_text(
        index.read_text(encoding="utf-8").replace("[API reference](reference/index.md)", "API reference"),
        encoding="utf-8",
    )
    return tmp_path / "mkdocs.yml"


@pytest.mark.timeout(600)
def test_a_planted_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    config = _guide_only_copy(tmp_path)
    assert build(config, tmp_path / "ok").returncode == 0  # the copy itself is sound
    page = tmp_path / "docs" / "guide" / "library.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [the missing page](no-such-page.md).\n", encoding="utf-8")
    done = build(config, tmp_path / "broken")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr
