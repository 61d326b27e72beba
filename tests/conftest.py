"""Shared fixtures: real indexes (real encoder, real persistent Chroma) built once per session.

Tests never reach the network: LangSmith tracing is off unless a test points it at a local
recording server, the embedding model loads from site-packages, and Chroma telemetry is off.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings as hypothesis_settings

if TYPE_CHECKING:
    from tests.stubs.langsmith_recorder import LangSmithRecorder
    from tests.stubs.openai_server import OpenAIStubServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"
for _secret in ("OPENAI_API_KEY", "ARAG_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "ARAG_MODEL", "ARAG_INDEX"):
    os.environ.pop(_secret, None)

# Hypothesis: under CI every run tries the same examples (derandomized, no example database), so a
# red CI run is the code's doing, not the draw's, and reruns the same; locally it searches afresh.
# The project's own profile, loaded for the CI values running_under_ci() reads, whatever hypothesis
# version is installed (recent ones load a "ci" profile of their own when a CI variable is set).
# Loaded here, before any test module is imported, because each ``@settings(...)`` copies the
# profile in force when its module is imported.
HYPOTHESIS_CI_PROFILE = "arag-ci"
hypothesis_settings.register_profile(HYPOTHESIS_CI_PROFILE, derandomize=True, database=None, print_blob=True)
if os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}:
    hypothesis_settings.load_profile(HYPOTHESIS_CI_PROFILE)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"  # the public QA data the tests use, committed with its source and licence


def data_file(relative: str) -> Path:
    """A file of the repository's ``data/`` folder (it is committed, so it is always there)."""
    path = DATA / relative
    assert path.is_file(), f"{path} is missing from the repository's data/ folder"
    return path


@pytest.fixture(scope="session", autouse=True)
def _runs_may_choose_test_indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The test session is the operator: runs may name any index it built (all under its temp dir)."""
    old = os.environ.get("ARAG_INDEX_ROOT")
    os.environ["ARAG_INDEX_ROOT"] = str(tmp_path_factory.getbasetemp().resolve())
    yield
    if old is None:
        os.environ.pop("ARAG_INDEX_ROOT", None)
    else:
        os.environ["ARAG_INDEX_ROOT"] = old


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Keep the sample index and other derived files out of the user's cache."""
    cache = tmp_path_factory.mktemp("arag-cache")
    old = os.environ.get("ARAG_CACHE_DIR")
    os.environ["ARAG_CACHE_DIR"] = str(cache)
    yield cache
    if old is None:
        os.environ.pop("ARAG_CACHE_DIR", None)
    else:
        os.environ["ARAG_CACHE_DIR"] = old


# Session fixtures that build an index with the real encoder: minutes of CPU on a loaded machine, paid
# by whichever test first asks for them. pytest-timeout times a test's fixture set-up with the test,
# so that test would fail for a build it did not cause; the build runs under a bound of its own instead.
SHARED_BUILD_TIMEOUT = 1800.0  # seconds: a shared index build, whatever test pays for it


class SharedBuildTimeout(Exception):
    """A shared session fixture took longer than its own bound (:data:`SHARED_BUILD_TIMEOUT`)."""


@contextlib.contextmanager
def outside_the_test_timeout(what: str, bound: float = SHARED_BUILD_TIMEOUT) -> Iterator[None]:
    """Run a shared build with the test's own timer paused, under ``bound`` seconds of its own.

    pytest-timeout's default method is ``SIGALRM`` (an interval timer, the one process-wide alarm):
    what is left of the test's time is taken off the timer here and given back afterwards, and the
    build gets an alarm of its own that fails it, named, after ``bound`` seconds. Off the main thread
    (pytest-timeout's ``thread`` method) there is no alarm to pause, and the build runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGALRM)
    left, _ = signal.setitimer(signal.ITIMER_REAL, 0)  # the test's timer, paused

    def expired(signum: int, frame: Any) -> None:
        raise SharedBuildTimeout(f"{what} took more than {bound:g} s to build (its own bound, not the test's)")

    signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, bound)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if left > 0:
            signal.setitimer(signal.ITIMER_REAL, left)


@pytest.fixture(scope="session")
def sample_index(_isolated_cache: Path):
    """The bundled sample (100 HotpotQA passages), built with the real encoder into the test cache.

    ``$ARAG_TEST_SAMPLE_INDEX`` names one built before the session instead: bench/mutation.py builds it
    once, so that each mutant's test run does not encode the corpus again (mutants of the tools cannot
    change how it was built). Built outside the test's timeout (:func:`outside_the_test_timeout`).
    """
    return build_sample_index()


def build_sample_index() -> Any:
    """:func:`sample_index`'s build, outside the test's timeout."""
    from arag_graph.index.sample import ensure_sample_index

    with outside_the_test_timeout("the sample index"):
        return ensure_sample_index(os.environ.get("ARAG_TEST_SAMPLE_INDEX") or None, progress=False)


HOTPOT_SLICE_QUESTIONS = 12


@pytest.fixture(scope="session")
def hotpot_slice(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Corpus and questions files for the first questions of HotpotQA-100 and their passages."""
    return write_hotpot_slice(tmp_path_factory.mktemp("hotpot-slice"))


def write_hotpot_slice(out: Path) -> tuple[Path, Path]:
    """:func:`hotpot_slice`'s files, written into ``out`` (bench/mutation.py builds its index from them)."""
    questions = json.loads(data_file("hotpotqa-100/questions.json").read_text(encoding="utf-8"))
    corpus = json.loads(data_file("hotpotqa-100/corpus.json").read_text(encoding="utf-8"))
    picked = questions[:HOTPOT_SLICE_QUESTIONS]
    titles = {title for q in picked for title, _ in q["context"]}
    (out / "corpus.json").write_text(
        json.dumps({t: s for t, s in corpus.items() if t in titles}, ensure_ascii=False), encoding="utf-8"
    )
    (out / "questions.json").write_text(json.dumps(picked, ensure_ascii=False), encoding="utf-8")
    return out / "corpus.json", out / "questions.json"


@pytest.fixture(scope="session")
def hotpot_index(hotpot_slice: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory):
    """A real index of the HotpotQA slice (about 120 passages), built outside the test's timeout.

    ``$ARAG_TEST_HOTPOT_INDEX`` names one built before the session instead (bench/mutation.py builds
    it once for the CoRAG modules' mutants, as it does the sample index).
    """
    prebuilt = os.environ.get("ARAG_TEST_HOTPOT_INDEX")
    if prebuilt:
        from arag_graph.index.load import load_index

        return load_index(prebuilt)
    return build_hotpot_index(hotpot_slice[0], tmp_path_factory.mktemp("hotpot-index") / "index")


def build_hotpot_index(corpus: Path, out: Path) -> Any:
    """:func:`hotpot_index`'s build, outside the test's timeout."""
    from arag_graph.index.build import build_index

    with outside_the_test_timeout("the HotpotQA slice's index"):
        return build_index(corpus, out, progress=False)


# ---------------------------------------------------------------------------------------------
# Local stand-ins for network services (tests/stubs): started per test on 127.0.0.1, free port.


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStubServer]:
    """An OpenAI-compatible chat-completions server replying from a script (``server.script``).

    The operator allows runs to choose it (``ARAG_ALLOWED_BASE_URLS``), as a deployment that serves
    a local model would.
    """
    from tests.stubs.openai_server import OpenAIStubServer, forget_pooled_openai_clients

    forget_pooled_openai_clients()  # the port may be an earlier test's: no client of a closed event loop
    with OpenAIStubServer() as server:
        monkeypatch.setenv("ARAG_ALLOWED_BASE_URLS", server.url)
        yield server
    assert not server.errors, f"the OpenAI stand-in itself failed: {server.errors[0]}"


@pytest.fixture
def langsmith_recorder() -> Iterator[LangSmithRecorder]:
    """A LangSmith API stand-in that records the runs the client posts (``recorder.runs``)."""
    from tests.stubs.langsmith_recorder import LangSmithRecorder

    with LangSmithRecorder() as recorder:
        yield recorder
    assert not recorder.errors, f"the LangSmith stand-in itself failed: {recorder.errors[0]}"


# ---------------------------------------------------------------------------------------------
# Two worker processes (pytest-xdist, addopts in pyproject.toml): a module runs whole in one worker, so
# its module fixtures (a served index, a `langgraph dev` per operator policy) start once; modules that
# share a session fixture worth sharing (the session's `langgraph dev`) name one `xdist_group`.


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` by module: a test's unit of work is its ``xdist_group`` when it has one,
    else its file (xdist's own loadgroup sends every other test on its own, module fixtures and all)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleOrGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return nodeid.split("::", 1)[0] if scope == nodeid else f"group {scope}"

    return ModuleOrGroupScheduling(config, log)


# ---------------------------------------------------------------------------------------------
# Skips are visible and rare: under CI every skip fails (the data sets are in data/, so a skip can only
# be a missing tool or privilege, which scripts/setup or the CI image must provide).


def running_under_ci() -> bool:
    """CI services set ``CI=true`` (GitHub Actions, GitLab, most others)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under ``CI=true`` a skip (a missing ``chroma`` or ``langgraph`` command, no mount namespaces,
    no /proc) fails the test, named, so a CI machine cannot pass with the server tests unrun."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if not report.skipped or hasattr(report, "wasxfail") or not running_under_ci():
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI=true, where every test must run: {skip_reason(report)} (install it: scripts/setup)"
    )
