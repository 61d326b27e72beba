"""The image `langgraph build` / `langgraph up` make: the Dockerfile `langgraph dockerfile` writes
from langgraph.json, and the build context `.dockerignore` leaves.

Docker itself cannot run here, so these tests check what can be checked without an engine: the real
generated Dockerfile (CPU torch before anything installs the package or its dependencies; an index
baked at build time and named by ``ARAG_INDEX``), the files its ``COPY`` lines take (they build the
package), the build-time ``arag index`` command (run here as written), and the ignore file.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pathspec
import pytest
from langgraph_sdk.runtime import _ExecutionRuntime

from tests.cli_run import run_cli
from tests.test_packaging import REPO, build_wheel

TORCH_CPU = re.compile(r"pip install .*\btorch==[\w.+]+ .*--index-url https://download\.pytorch\.org/whl/cpu\b")


@pytest.fixture(scope="module")
def dockerfile(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The Dockerfile lines the real ``langgraph dockerfile`` command writes for langgraph.json."""
    out = tmp_path_factory.mktemp("docker") / "Dockerfile"
    langgraph = Path(sys.executable).with_name("langgraph")
    subprocess.run(
        [str(langgraph), "dockerfile", "-c", str(REPO / "langgraph.json"), str(out)],
        check=True,
        capture_output=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1"},  # no usage report to a server
    )
    return [line.strip() for line in out.read_text(encoding="utf-8").splitlines()]


def _env(lines: list[str]) -> dict[str, str]:
    """``ENV`` settings of the Dockerfile (``ENV A=1 B=2`` form)."""
    env: dict[str, str] = {}
    for line in lines:
        if line.startswith("ENV "):
            for item in shlex.split(line[4:]):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def _bake_command(lines: list[str]) -> list[str]:
    """The ``arag index ...`` command a ``RUN`` line runs at build time."""
    for line in lines:
        if line.startswith("RUN "):
            for part in line[4:].split("&&"):
                words = shlex.split(part)
                if words[:2] == ["arag", "index"]:
                    return words
    raise AssertionError("no RUN line builds an index with `arag index`")


def test_cpu_torch_is_installed_before_the_package_and_its_dependencies(dockerfile: list[str]) -> None:
    torch = [i for i, line in enumerate(dockerfile) if TORCH_CPU.search(line)]
    assert torch, "no line installs a pinned torch from the CPU index"
    installs = [
        i
        for i, line in enumerate(dockerfile)
        if line.startswith("RUN") and "pip install" in line and i not in torch and "--no-deps -e /api" not in line
    ]
    assert installs, "the Dockerfile installs nothing"
    assert torch[0] < min(installs), "something installs packages (and so a CUDA torch) before CPU torch"


def test_the_image_pins_the_torch_the_set_up_script_installs(dockerfile: list[str]) -> None:
    """The image and ``scripts/setup`` install the same torch, so the image runs what the tests ran."""
    pin = re.compile(r"torch==([\w.+]+)")
    (image,) = {m.group(1) for line in dockerfile if TORCH_CPU.search(line) for m in [pin.search(line)] if m}
    setup = set(pin.findall((REPO / "scripts" / "setup").read_text(encoding="utf-8")))
    assert setup == {image}, f"scripts/setup installs torch {sorted(setup)}, the image {image}"


def test_the_image_names_an_index_baked_at_build_time(dockerfile: list[str]) -> None:
    env = _env(dockerfile)
    baked = env.get("ARAG_INDEX", "")
    assert baked.startswith("/"), "ARAG_INDEX is not set to an absolute path in the image"
    command = _bake_command(dockerfile)
    out = command[command.index("--out") + 1]
    assert out in (baked, "$ARAG_INDEX", "${ARAG_INDEX}")
    env_line = next(i for i, line in enumerate(dockerfile) if line.startswith("ENV ") and "ARAG_INDEX=" in line)
    bake_line = next(i for i, line in enumerate(dockerfile) if "arag index" in line)
    assert env_line < bake_line  # the RUN line sees $ARAG_INDEX
    assert env.get("HF_HUB_OFFLINE") == "1"  # nothing downloads at run time in the container either


def _copies(lines: list[str]) -> list[tuple[list[str], str]]:
    """``COPY src... dest`` lines (sources relative to the build context)."""
    found = []
    for line in lines:
        if line.startswith("COPY ") and "--from" not in line:
            *sources, dest = shlex.split(line[5:])
            found.append((sources, dest))
    return found


def _apply_copy(sources: list[str], dest: str, root: Path) -> None:
    """What ``COPY sources dest`` does, into ``root``: a directory's contents go to ``dest``; a file
    goes into ``dest`` when it ends with ``/``, else becomes ``dest``."""
    target = root / dest.lstrip("/")
    for source in sources:
        path = REPO / source
        if path.is_dir():
            shutil.copytree(path, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        elif dest.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target / path.name)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)


def test_the_files_copied_for_the_bake_build_the_package(dockerfile: list[str], tmp_path: Path) -> None:
    """The ``COPY`` lines take enough of the context to install the package (readme, both package
    directories, the version's source): copied as written, the sources build a wheel."""
    copies = _copies(dockerfile)
    assert copies, "no COPY lines: the bake step has no sources"
    root = tmp_path / "image"
    for sources, dest in copies:
        _apply_copy(sources, dest, root)
    (project,) = [p.parent for p in root.rglob("pyproject.toml")]
    assert str(project.relative_to(root)) in " ".join(dockerfile), "the copied project is not what the RUN installs"
    build_wheel(project, tmp_path / "wheel")


@pytest.mark.integration
def test_the_baked_index_serves_the_graphs_and_no_request_builds_one(
    dockerfile: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The build-time ``arag index`` command, run as written (paths mapped to this checkout), makes
    an index that the served graph uses through ``ARAG_INDEX``; the sample cache stays empty."""
    command = _bake_command(dockerfile)
    corpus = command[2]
    assert corpus.endswith("arag_graph/data/sample/corpus.json")
    baked = tmp_path / "indexes" / "sample"
    argv = [REPO / "arag_graph/data/sample/corpus.json" if w == corpus else w for w in command[2:]]
    argv = [str(baked) if w in ("$ARAG_INDEX", "${ARAG_INDEX}") else str(w) for w in argv]
    code, _, err = run_cli(["index", *argv], capsys)
    assert code == 0, err

    cache = tmp_path / "cache"
    monkeypatch.setenv("ARAG_CACHE_DIR", str(cache))
    monkeypatch.setenv("ARAG_INDEX", str(baked))
    spec = importlib.util.spec_from_file_location("served_arag", REPO / "arag_graph" / "served" / "arag.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # as LangGraph Server loads the entry named in langgraph.json
    run = _ExecutionRuntime(access_context="threads.create_run", user=None, store=None, context={})
    out = module.graph(run).invoke({"question": "Who directed the film shot in Leland, North Carolina in 1986?"})
    assert out["answer"] and out["read_chunks"]
    assert not cache.exists() or not any(cache.iterdir()), "a request built an index into the cache"


DOCKERIGNORE_KEEPS = [
    "pyproject.toml",
    "README.md",
    "langgraph.json",
    "arag_graph/__init__.py",
    "arag_graph/data/sample/corpus.json",
    "arag_graph/evaluators/runner.py",
    "arag_graph/served/arag.py",
]
DOCKERIGNORE_DROPS = [
    ".venv/bin/python",
    ".venv/lib/python3.11/site-packages/torch/__init__.py",
    "indexes/hotpotqa/CURRENT",
    "runs/hotpotqa-offline/summary.json",
    ".git/HEAD",
    ".env",
    ".langgraph_api/store.pckl",
    "build/lib/arag_graph/index/hierarchical.py",
    "arag_graph.egg-info/PKG-INFO",
    "arag_graph/__pycache__/index.cpython-311.pyc",
    "tests/test_index.py",
    "bench/results/build.md",
]


def test_dockerignore_keeps_local_state_out_of_the_build_context(dockerfile: list[str]) -> None:
    """Docker reads only ``.dockerignore`` (not ``.gitignore``). Its patterns are written in the part
    of the syntax where Docker's and git's matching agree (names from the context root, ``**/``
    for any depth), so pathspec's gitignore matcher answers for Docker here."""
    ignore = REPO / ".dockerignore"
    assert ignore.is_file(), "no .dockerignore: `langgraph build` sends .venv, indexes/ and runs/ to Docker"
    spec = pathspec.GitIgnoreSpec.from_lines(ignore.read_text(encoding="utf-8").splitlines())
    assert not [p for p in DOCKERIGNORE_DROPS if not spec.match_file(p)], "local state left in the build context"
    copied = [source for sources, _ in _copies(dockerfile) for source in sources]
    kept = DOCKERIGNORE_KEEPS + copied
    assert not [p for p in kept if spec.match_file(p)], "the image needs these files, and they are ignored"
