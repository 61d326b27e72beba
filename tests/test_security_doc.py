"""docs/security.md names, for every input, the test that shows what arag does with it: each named
test must exist, so the threat model cannot drift from the suite (a renamed or deleted test fails here).

The names are checked against pytest's own collection of the files the page names (node ids,
parameters dropped), not against the source text, so a test that pytest would not run counts as
missing too.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "security.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")

pytestmark = pytest.mark.timeout(600)


def named_tests() -> set[tuple[str, str]]:
    return set(NAMED.findall(PAGE.read_text(encoding="utf-8")))


def collected(files: list[str]) -> set[tuple[str, str]]:
    """(file, test name) of every test pytest collects in ``files``."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ids = set()
    for line in done.stdout.splitlines():
        path, sep, name = line.partition("::")
        if sep:
            ids.add((path, name.split("[")[0].split("::")[-1]))
    return ids


def test_every_test_the_threat_model_names_exists() -> None:
    named = named_tests()
    assert len(named) >= 40, "docs/security.md names fewer tests than it did: a table lost its rows?"
    missing = named - collected(sorted({path for path, _ in named}))
    assert not missing, f"docs/security.md names tests that do not exist: {sorted(missing)}"
