"""Every code block in README.md, CONTRIBUTING.md and docs/ runs, and those that search or answer
produce a result; a block that cannot run here says why, in terms a reviewer accepts.

Blocks run in order, one working directory per page, offline (the no-LLM policy), with the bundled
sample's index at ``indexes/sample`` (``arag index arag_graph/data/sample/corpus.json``) and, for pages
that ask for it with ``<!-- docs-test: fixture hotpotqa -->``, HotpotQA-100's at ``indexes/hotpotqa``.
Every fence names its language: ``bash`` and ``python`` blocks run, ``json`` blocks must parse, and
``text`` is for output and file layouts, which are not code.

A comment right above a block changes how it runs:

* ``<!-- docs-test: openai-stub -->``: an OpenAI-compatible stand-in on localhost answers, with a
  sentinel key, for an example written for a hosted model.
* ``<!-- docs-test: limit N -->``: each ``arag eval`` / ``arag reproduce`` command runs as written
  with ``--limit N`` appended (its first N questions), for a run over a whole question set.
* ``<!-- docs-test: files NAME=PATH ... -->``: the placeholder file NAME that the block names is the
  repository's PATH (``corpus.json=arag_graph/data/sample/corpus.json``).
* ``<!-- docs-test: not-run REASON -->``: the block does not run, and REASON names what it needs that
  a test here cannot have (:data:`NEEDS`: a hosted model or its key, a download, Docker, a GPU, a
  long-running server, installing packages, or writing the checkout's own files). Such a block is
  still checked: each ``arag`` command's subcommand and flags exist (``arag SUB --help``), each
  ``tests/`` or ``scripts/`` path it names exists, and Python compiles.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import outside_the_test_timeout

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(?P<body>.*?)\s*-->")
FENCE = re.compile(r"^```(?P<lang>\S*)\s*$")
RUN = ("bash", "python")
PARSED = {"json": json.loads}
PLAIN = ("text",)
"""Languages whose blocks are program output or a file layout: shown, not run."""
ANSWERS = ("search", "read", "ask", "eval")
LIMITED = (("arag", "eval"), ("arag", "reproduce"))
NEEDS: dict[str, re.Pattern[str]] = {
    "a hosted model or its API key": re.compile(r"\bkey\b|real model|model folder|hugging face|endpoint", re.I),
    "a download": re.compile(r"download", re.I),
    "Docker": re.compile(r"\bdocker\b", re.I),
    "a GPU": re.compile(r"\bgpu\b", re.I),
    "a long-running server": re.compile(r"\bservers?\b", re.I),
    "installing packages (the set-up scripts)": re.compile(r"\binstalls?\b|set-up", re.I),
    "writing the checkout's own files": re.compile(r"\brewrites? the (repository|checkout)", re.I),
}
"""What a block may need that excuses it from running here, each as the words its reason must use."""


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

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page.name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page, whatever its language, with the directive right above it."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").split("\n")
    directive, i = "", 0
    while i < len(lines):
        match = DIRECTIVE.search(lines[i])
        if match:
            directive = match.group("body")
        fence = FENCE.match(lines[i])
        if fence:
            start, lang, body = i + 1, fence.group("lang"), []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
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


def limited(command: str, directive: str) -> str:
    """The command as the test runs it: under ``limit N``, an ``arag eval``/``reproduce`` gets ``--limit N``."""
    if not directive.startswith("limit "):
        return command
    words = shlex.split(command, comments=True)
    if tuple(words[:2]) not in LIMITED:
        return command
    return shlex.join([*words, "--limit", directive.split()[1]])


def unaccepted_reason(reason: str) -> str | None:
    """Why a not-run reason is not enough, or None when it names a need of :data:`NEEDS`."""
    if any(pattern.search(reason) for pattern in NEEDS.values()):
        return None
    return f"the reason names none of the needs that excuse a block from running ({', '.join(NEEDS)}): run it"


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


def _placeholders(block: Block, work: Path) -> None:
    """``files NAME=PATH``: the placeholder files a block names, linked to the repository's files."""
    if not block.directive.startswith("files "):
        return
    for pair in block.directive.split()[1:]:
        name, _, source = pair.partition("=")
        target = work / name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(REPO / source)


def run_page(page: Path, tmp_path: Path, indexes: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> int:
    work = _workdir(page, tmp_path, indexes)
    ran = 0
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in blocks(page):
        if block.not_run is not None or block.lang not in RUN:
            continue
        _placeholders(block, work)
        with _stand_in(block, monkeypatch) as extra:
            ran += _run_block(block, block.where, work, namespace, extra)
    return ran


def _run_block(block: Block, where: str, work: Path, namespace: dict[str, object], extra: dict[str, str]) -> int:
    ran = 0
    if block.lang == "bash":
        for command in (limited(c, block.directive) for c in commands(block.code)):
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


@cache
def _help(subcommand: str) -> str | None:
    """``arag SUBCOMMAND --help``, or None when there is no such subcommand."""
    arag = Path(sys.executable).with_name("arag")
    done = subprocess.run([str(arag), subcommand, "--help"], capture_output=True, text=True, timeout=300)
    return done.stdout if done.returncode == 0 else None


def stale(block: Block) -> list[str]:
    """What a block that does not run names that no longer exists: an ``arag`` subcommand or flag,
    a ``tests/`` or ``scripts/`` path of the repository; or Python that does not compile."""
    if block.lang == "python":
        try:
            compile(block.code, block.where, "exec")
        except SyntaxError as exc:
            return [f"{block.where}: does not compile: {exc}"]
        return []
    found: list[str] = []
    for command in commands(block.code):
        words = shlex.split(command.replace("$", ""), comments=True)
        for word in words:
            path = word.removeprefix("./")
            if path.startswith(("tests/", "scripts/")) and not (REPO / path).exists():
                found.append(f"{block.where}: {word} does not exist")
        if words[:1] != ["arag"] or len(words) < 2:
            continue
        text = _help(words[1])
        if text is None:
            found.append(f"{block.where}: `arag {words[1]}` is no command")
            continue
        for flag in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text):
                found.append(f"{block.where}: `arag {words[1]}` has no {flag}")
    return found


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_of_the_page_runs(
    page: Path, tmp_path: Path, built_indexes: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    runnable = [b for b in blocks(page) if b.not_run is None and b.lang in RUN]
    assert run_page(page, tmp_path, built_indexes, monkeypatch) >= len(runnable)
    for block in blocks(page):
        if block.lang in PARSED and block.not_run is None:
            PARSED[block.lang](block.code)


def unread(page: Path) -> list[str]:
    """Blocks of a page that the test would not read: a fence without a language, or with one it
    neither runs nor parses; a directive on a block that never runs; a fence indented (into a list),
    which the block reader does not see."""
    known = (*RUN, *PARSED, *PLAIN)
    found = [
        f"{block.where}: name the block's language, one of {known}" for block in blocks(page) if block.lang not in known
    ]
    found += [f"{b.where}: a {b.lang} block never runs" for b in blocks(page) if b.lang in PLAIN and b.directive]
    for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
        if re.match(r"\s+```", line):
            found.append(f"{page.name}:{number}: a fence must start its line")
    return found


def test_every_block_names_its_language_and_is_read() -> None:
    assert [problem for page in PAGES for problem in unread(page)] == []


def test_a_block_the_reader_would_miss_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "```\nls\n```\n\n```console\n$ ls\n```\n\n- item\n\n  ```bash\n  ls\n  ```\n\n"
        "<!-- docs-test: limit 1 -->\n```text\nout\n```\n\n```text\nout\n```\n\n```json\n{}\n```\n",
        encoding="utf-8",
    )
    assert [problem.split(":", 2)[1] for problem in unread(page)] == ["1", "5", "16", "11", "13"]


def test_examples_that_do_not_run_say_what_they_need() -> None:
    """No cap to stay under: each block that does not run names a need no test here can meet."""
    every = [b for p in PAGES for b in blocks(p)]
    assert len(every) >= 15
    for block in every:
        if block.not_run is not None:
            assert (problem := unaccepted_reason(block.not_run)) is None, f"{block.where}: {problem}"


def test_examples_that_do_not_run_still_name_what_exists() -> None:
    problems = [problem for p in PAGES for b in blocks(p) if b.not_run is not None for problem in stale(b)]
    assert problems == []


def test_the_block_reader_sees_directives_and_placeholders(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "text\n\n<!-- docs-test: not-run needs Docker -->\n```bash\ndocker build .\n```\n\n```python\nx = 1\n```\n"
        "\n```\ntree\n```\n\n<!-- docs-test: limit 2 -->\n```bash\narag eval --dataset d  # all\n```\n",
        encoding="utf-8",
    )
    found = blocks(page)
    assert [(b.lang, b.not_run) for b in found] == [
        ("bash", "needs Docker"),
        ("python", None),
        ("", None),
        ("bash", None),
    ]
    assert commands("arag eval --dataset d \\\n  --graphs arag  # x\n# comment\n. .venv/bin/activate") == [
        "arag eval --dataset d --graphs arag  # x"
    ]
    assert [limited(c, found[3].directive) for c in commands(found[3].code)] == ["arag eval --dataset d --limit 2"]
    assert limited("arag search --index i --keywords x", "limit 2") == "arag search --index i --keywords x"
    assert limited("arag eval --dataset d", "") == "arag eval --dataset d"


@pytest.mark.parametrize(
    ("reason", "accepted"),
    [
        ("needs a Docker engine", True),
        ("samples with a real model (gpt-4o-mini) and its key", True),
        ("downloads the data sets from the Hugging Face hub", True),
        ("long-running servers", True),
        ("rewrites the repository's golden files", True),
        ("600 questions offline, about 10 minutes", False),
        ("slow", False),
        ("", False),
    ],
)
def test_a_reason_that_names_no_need_is_refused(reason: str, accepted: bool) -> None:
    """Taking too long is no reason (``limit N`` runs a question set's first questions), nor is none."""
    assert (unaccepted_reason(reason) is None) is accepted


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        ("arag index corpus.json --out x --encoder torch", None),
        ("arag eval --dataset d \\\n  --no-such-flag 3", "`arag eval` has no --no-such-flag"),
        ("arag evaluate --dataset d", "`arag evaluate` is no command"),
        ("./scripts/test -x tests/test_layering.py", None),
        ("./scripts/no-such-script", "./scripts/no-such-script does not exist"),
        ("python -m pytest tests/test_gone.py -q", "tests/test_gone.py does not exist"),
        ("for s in a b; do\n  arag eval --dataset data/$s.json --max-steps 3\ndone", None),
    ],
)
def test_a_block_that_does_not_run_is_still_checked(code: str, problem: str | None) -> None:
    """A renamed flag or a moved test in a block that does not run is caught all the same."""
    found = stale(Block(REPO / "p.md", 1, "bash", code, "not-run needs Docker"))
    assert found == ([f"p.md:1: {problem}"] if problem else [])
    assert stale(Block(REPO / "p.md", 1, "python", "def f(:\n", "not-run needs Docker"))
