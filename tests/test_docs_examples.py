"""Every shell command and Python snippet in README.md and docs/ runs, and those that search or
answer produce a result.

Blocks run in order, one working directory per page, offline (the no-LLM policy), with the bundled
sample's index at ``indexes/sample`` (``arag index arag_graph/data/sample/corpus.json``) and, for pages
that ask for it with ``<!-- docs-test: fixture hotpotqa -->``, HotpotQA-100's at ``indexes/hotpotqa``.
A block that cannot run here (it downloads, needs a real model or Docker) is marked
``<!-- docs-test: not-run REASON -->``; how many there are, and that each says why, is tested too.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import outside_the_test_timeout

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted(p for p in (REPO / "docs").rglob("*.md") if "reference" not in p.parts)]
DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(?P<body>.*?)\s*-->")
FENCE = re.compile(r"^```(?P<lang>[a-z]*)\s*$")
MAX_NOT_RUN = 16
ANSWERS = ("search", "read", "ask", "eval")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str
    directive: str

    @property
    def not_run(self) -> str | None:
        return self.directive[len("not-run") :].strip() if self.directive.startswith("not-run") else None


def blocks(page: Path) -> list[Block]:
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").split("\n")
    directive, i = "", 0
    while i < len(lines):
        match = DIRECTIVE.search(lines[i])
        if match:
            directive = match.group("body")
        fence = FENCE.match(lines[i])
        if fence and fence.group("lang"):
            start, lang, body = i + 1, fence.group("lang"), []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            if lang in ("bash", "python"):
                found.append(Block(page, start, lang, "\n".join(body), directive))
            directive = ""
        elif lines[i].strip() and not match:
            directive = directive if lines[i].lstrip().startswith("<!--") else ""
        i += 1
    return found


def page_directives(page: Path) -> list[str]:
    return [m.group("body") for m in DIRECTIVE.finditer(page.read_text(encoding="utf-8"))]


def commands(code: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comments and venv activation dropped."""
    joined = re.sub(r"[ \t]*\\\n\s*", " ", code)
    out = []
    for line in joined.split("\n"):
        line = line.strip()
        if not line or line.startswith("#") or line.startswith(". .venv/bin/activate"):
            continue
        out.append(line)
    return out


@pytest.fixture(scope="session")
def built_indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The indexes the pages use, built once with the CLI they document (outside the test's timeout:
    each build has its own)."""
    root = tmp_path_factory.mktemp("doc-indexes")
    arag = Path(sys.executable).with_name("arag")
    made = {"sample": root / "sample"}
    with outside_the_test_timeout("the documentation's indexes", bound=3600):
        subprocess.run(
            [str(arag), "index", str(REPO / "arag_graph/data/sample/corpus.json"), "--out", str(made["sample"]), "-q"],
            check=True,
            timeout=1200,
        )
        if any("fixture hotpotqa" in d for p in PAGES for d in page_directives(p)):
            made["hotpotqa"] = root / "hotpotqa"
            hotpot = str(REPO / "data/hotpotqa-100/corpus.json")
            subprocess.run([str(arag), "index", hotpot, "--out", str(made["hotpotqa"]), "-q"], check=True, timeout=1800)
    return made


def _workdir(page: Path, tmp_path: Path, indexes: dict[str, Path]) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for name in ("arag_graph", "data"):
        (work / name).symlink_to(REPO / name)  # the paths the pages name, relative to the repository
    (work / "indexes").mkdir()
    fixtures = {"sample", *(d.split()[-1] for d in page_directives(page) if d.startswith("fixture "))}
    for name in fixtures:
        shutil.copytree(indexes[name], work / "indexes" / name, symlinks=True)
    return work


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ARAG_API_KEY", "ARAG_INDEX")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = env.get("HOME", str(work))
    return env


@contextlib.contextmanager
def _stand_in(block: Block, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """``openai-stub``: an OpenAI-compatible stand-in on localhost answers, with a sentinel key."""
    if block.directive != "openai-stub":
        yield {}
        return
    from tests.fakes import sentinel_key
    from tests.stubs.openai_server import OpenAIStubServer, text

    with OpenAIStubServer() as server:
        server.script([], then=text("Answer: Stephen King [1]"))
        extra = {"OPENAI_API_KEY": sentinel_key("docs"), "OPENAI_BASE_URL": server.url}
        for name, value in extra.items():
            monkeypatch.setenv(name, value)
        yield extra


def run_page(page: Path, tmp_path: Path, indexes: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> int:
    work = _workdir(page, tmp_path, indexes)
    ran = 0
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in blocks(page):
        if block.not_run is not None:
            continue
        where = f"{page.relative_to(REPO)}:{block.line}"
        with _stand_in(block, monkeypatch) as extra:
            ran += _run_block(block, where, work, namespace, extra)
    return ran


def _run_block(block: Block, where: str, work: Path, namespace: dict[str, object], extra: dict[str, str]) -> int:
    ran = 0
    if block.lang == "bash":
        for command in commands(block.code):
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=work,
                env={**_env(work), **extra},
                capture_output=True,
                text=True,
                timeout=1200,
            )
            assert done.returncode == 0, f"{where}: `{command}` exited {done.returncode}: {done.stderr[-1500:]}"
            words = command.split()
            if words[:1] == ["arag"] and len(words) > 1 and words[1] in ANSWERS:
                assert done.stdout.strip(), f"{where}: `{command}` printed nothing"
                assert "no matches" not in done.stdout.lower(), f"{where}: `{command}` found nothing"
            ran += 1
        return ran
    here = Path.cwd()
    os.chdir(work)
    try:
        exec(compile(block.code, where, "exec"), namespace)  # the docs' own snippet
    finally:
        os.chdir(here)
    return 1


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_of_the_page_runs(
    page: Path, tmp_path: Path, built_indexes: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    runnable = [b for b in blocks(page) if b.not_run is None]
    assert run_page(page, tmp_path, built_indexes, monkeypatch) >= len(runnable)


def test_examples_that_do_not_run_are_few_and_say_why() -> None:
    every = [b for p in PAGES for b in blocks(p)]
    not_run = [b for b in every if b.not_run is not None]
    assert len(every) >= 15
    assert len(not_run) <= MAX_NOT_RUN, [f"{b.page.name}:{b.line}" for b in not_run]
    for block in not_run:
        assert len(block.not_run or "") >= 10, f"{block.page.name}:{block.line} says not why it does not run"


def test_the_block_reader_sees_directives_and_placeholders(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "text\n\n<!-- docs-test: not-run needs Docker -->\n```bash\ndocker build .\n```\n\n```python\nx = 1\n```\n",
        encoding="utf-8",
    )
    found = blocks(page)
    assert [(b.lang, b.not_run) for b in found] == [("bash", "needs Docker"), ("python", None)]
    assert commands("arag eval --dataset d \\\n  --graphs arag  # x\n# comment\n. .venv/bin/activate") == [
        "arag eval --dataset d --graphs arag  # x"
    ]
