"""The system's headless Chromium, driven by Playwright: one way to find and launch it.

The report tests (tests/test_html_report.py) and the report benchmark (bench/bench_report.py) open
``report.html`` in the same browser with the same flags. Playwright launches Debian's Chromium
(``executable_path``), so ``playwright install`` (a download) is never needed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MISSING = "no Chromium found: apt-get install chromium (scripts/setup does, as root) or set ARAG_CHROMIUM"


def find_chromium() -> str | None:
    """The system Chromium: ``$ARAG_CHROMIUM``, else the first of the usual names on PATH."""
    given = os.environ.get("ARAG_CHROMIUM")
    if given:
        return given if Path(given).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


@contextlib.contextmanager
def launched_chromium(executable: str) -> Iterator[Any]:
    """A Playwright ``Browser`` on ``executable`` (see :func:`find_chromium`), closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
