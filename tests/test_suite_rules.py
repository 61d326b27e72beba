"""The test suite's own rules (issue 38): no fixture swallows a skip, shared builds run outside the
per-test timeout under a bound of their own, and hypothesis draws the same examples under ``CI=true``."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arag_graph.index import build, sample
from tests import conftest
from tests.conftest import HYPOTHESIS_CI_PROFILE, SHARED_BUILD_TIMEOUT, SharedBuildTimeout, outside_the_test_timeout

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


# ---------------------------------------------------------------------------------------------
# No fixture swallows a skip


def _catches_a_skip(handler: ast.ExceptHandler) -> bool:
    """``except pytest.skip.Exception`` / ``except Skipped`` (alone or in a tuple)."""
    if handler.type is None:
        return False
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(ast.unparse(name).endswith(("skip.Exception", "Skipped")) for name in names)


def skip_swallowers(root: Path) -> list[str]:
    """``file:line`` of every handler under ``root`` that catches pytest's skip."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += [
            f"{path.relative_to(root)}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ExceptHandler) and _catches_a_skip(node)
        ]
    return found


def test_no_test_or_fixture_catches_a_skip(tmp_path: Path) -> None:
    """A skip caught and replaced by something else passes silently, even under ``CI=true`` (where
    a skip fails): a fixture that needs something must ask for it, and skip or fail with it."""
    assert skip_swallowers(TESTS) == []
    planted = tmp_path / "test_planted.py"
    planted.write_text(
        "import pytest\n\ndef index(request):\n    try:\n        return request.getfixturevalue('a')\n"
        "    except (KeyError, pytest.skip.Exception):\n        return None\n",
        encoding="utf-8",
    )
    assert skip_swallowers(tmp_path) == ["test_planted.py:6"]


# ---------------------------------------------------------------------------------------------
# Shared builds: outside the test's timer, under a bound of their own


@pytest.fixture
def test_timer() -> Iterator[list[int]]:
    """A stand-in for pytest-timeout's timer: our own SIGALRM handler and 100 s on the interval timer
    (pytest-timeout's are put back afterwards). Yields the list the handler appends to when it fires."""
    assert threading.current_thread() is threading.main_thread(), "pytest-timeout's signal method needs it"
    fired: list[int] = []
    saved_handler = signal.getsignal(signal.SIGALRM)
    saved_left, _ = signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    signal.setitimer(signal.ITIMER_REAL, 100)
    try:
        yield fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, saved_handler)
        if saved_left > 0:
            signal.setitimer(signal.ITIMER_REAL, saved_left)


def _timer() -> tuple[float, Any]:
    return signal.getitimer(signal.ITIMER_REAL)[0], signal.getsignal(signal.SIGALRM)


@pytest.mark.parametrize("fixture", ["sample_index", "hotpot_index"])
def test_shared_index_builds_run_outside_the_tests_timer(
    test_timer: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fixture: str
) -> None:
    """While a session index builds, the test's timer is paused and the build's own bound runs; after
    it, the test has the time it had before (the build is not charged to it)."""
    outer = signal.getsignal(signal.SIGALRM)
    seen: list[tuple[float, Any]] = []

    def fake_build(*args: Any, **kwargs: Any) -> str:
        seen.append(_timer())
        time.sleep(1.0)
        return "built"

    monkeypatch.setattr(sample, "ensure_sample_index", fake_build)
    monkeypatch.setattr(build, "build_index", fake_build)
    before, _ = _timer()
    if fixture == "sample_index":
        assert conftest.build_sample_index() == "built"
    else:
        assert conftest.build_hotpot_index(tmp_path / "corpus.json", tmp_path / "index") == "built"
    [(during, handler)] = seen
    assert SHARED_BUILD_TIMEOUT - 5 < during <= SHARED_BUILD_TIMEOUT and handler is not outer
    left, handler = _timer()
    assert before - left < 0.5 and handler is outer  # the second of building was not counted
    assert test_timer == []


def test_a_shared_build_over_its_own_bound_fails_named_and_gives_the_test_its_timer_back(
    test_timer: list[int],
) -> None:
    outer = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    with (
        pytest.raises(SharedBuildTimeout, match=r"the planted index took more than 0\.2 s"),
        outside_the_test_timeout("the planted index", bound=0.2),
    ):
        time.sleep(5)
    assert time.monotonic() - started < 4
    left, handler = _timer()
    assert 95 < left <= 100 and handler is outer and test_timer == []


# ---------------------------------------------------------------------------------------------
# Hypothesis under CI

_PROBE = """
import json, sys
import tests.conftest
from hypothesis import settings
import tests.test_chunking, tests.test_keywords
out = {"default": settings.default.derandomize, "database": settings.default.database is None}
out["profile"] = settings.get_current_profile_name()
for module in (tests.test_chunking, tests.test_keywords):
    for name, test in vars(module).items():
        given = getattr(test, "_hypothesis_internal_use_settings", None)
        if name.startswith("test_") and given is not None:
            out[name] = given.derandomize
print(json.dumps(out))
"""


@pytest.mark.parametrize("ci", ["true", ""], ids=["ci", "not-ci"])
def test_hypothesis_tests_are_derandomized_under_ci(ci: str) -> None:
    """Under ``CI=true`` every property test draws the same examples (the ``ci`` profile tests/conftest.py
    loads before the test modules are imported); elsewhere they search afresh."""
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PYTHONPATH": str(REPO)}
    if ci:
        env["CI"] = ci
    argv = [sys.executable, "-c", _PROBE]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    tests = {k: v for k, v in out.items() if k.startswith("test_")}
    assert len(tests) >= 3, out  # test_chunking's and test_keywords' two
    assert set(tests.values()) == {bool(ci)} and out["default"] is bool(ci), out
    if ci:
        assert out["database"] and out["profile"] == HYPOTHESIS_CI_PROFILE, out
