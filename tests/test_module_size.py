"""No module of the package over 800 lines, no function over 60 (issue 33).

A reader should be able to hold a module, and a function whole, in mind; past these sizes the
package's modules had become several concerns in one file (the CLI's eleven commands, the full
build and the incremental update together). A function counts from its ``def`` line to its last
line (``end_lineno - lineno + 1``): docstring, comments and nested functions included, decorators
not. Methods and nested functions count on their own too.

Exceptions are listed by path (``arag_graph/x.py``) or function (``arag_graph/x.py::Class.method``)
with the reason a reviewer accepted; there may be at most three. ``TEMPORARY`` holds the offenders
of the day the guard was written, which other streams of issue 33 are splitting: the lead empties
it when their branches merge, and nothing is added to it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("arag_graph",)
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 60
MAX_EXCEPTIONS = 3

EXCEPTIONS: dict[str, str] = {}
"""Permanent exceptions, each with the reason it stays long (at most ``MAX_EXCEPTIONS``)."""

# TEMPORARY (issue 33): the offenders left when the guard was written, being split by the streams
# working on issue 33 (main.py, build.py and 14 other long functions are split already). The lead
# empties this at merge time; an entry that no longer exceeds its limit already fails
# test_every_allowance_is_still_needed, so it goes as soon as its split lands.
TEMPORARY: dict[str, str] = {}


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function of a module with its qualified name (``Class.method``, ``outer.inner``)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + child.name, child
            yield from functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from functions(child, f"{prefix}{child.name}.")
        else:
            yield from functions(child, prefix)


def sizes(root: Path = REPO) -> dict[str, tuple[int, int]]:
    """Every module and function under ``root``'s package folders: its name, its length and its limit."""
    found: dict[str, tuple[int, int]] = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            name = path.relative_to(root).as_posix()
            found[name] = (len(source.splitlines()), MAX_MODULE_LINES)
            for qualname, node in functions(ast.parse(source)):
                assert node.end_lineno is not None
                found[f"{name}::{qualname}"] = (node.end_lineno - node.lineno + 1, MAX_FUNCTION_LINES)
    return found


def oversized(root: Path = REPO, allowed: frozenset[str] = frozenset({*EXCEPTIONS, *TEMPORARY})) -> list[str]:
    """Each module or function over its limit that no exception allows, with its length."""
    return [
        f"{name}: {length} lines (limit {limit})"
        for name, (length, limit) in sizes(root).items()
        if length > limit and name not in allowed
    ]


def test_no_module_over_800_lines_and_no_function_over_60() -> None:
    assert oversized() == []


def test_permanent_exceptions_are_at_most_three_and_say_why() -> None:
    assert len(EXCEPTIONS) <= MAX_EXCEPTIONS, f"at most {MAX_EXCEPTIONS} permanent exceptions: {sorted(EXCEPTIONS)}"
    for name, reason in EXCEPTIONS.items():
        assert len(reason.split()) >= 5, f"{name}: say why it stays long"
    assert not set(EXCEPTIONS) & set(TEMPORARY)


def test_every_allowance_is_still_needed() -> None:
    """An exception whose module or function is gone or back under its limit is deleted, so the lists
    only ever shrink to what is really long."""
    found = sizes()
    for name in [*EXCEPTIONS, *TEMPORARY]:
        assert name in found, f"{name} no longer exists: delete its allowance in tests/test_module_size.py"
        length, limit = found[name]
        assert length > limit, f"{name} is {length} lines now (limit {limit}): delete its allowance"


def _function(lines: int, indent: str = "") -> str:
    """A function of exactly ``lines`` lines, its docstring included."""
    body = ["def planted():", '    """Planted."""', *["    x = 1"] * (lines - 3), "    return x"]
    return "".join(f"{indent}{line}\n" for line in body)


@pytest.mark.parametrize(
    ("path", "source", "name"),
    [
        ("arag_graph/sub/planted.py", _function, "planted"),
        ("arag_graph/evaluators/planted.py", lambda n: "class Planted:\n" + _function(n, "    "), "Planted.planted"),
    ],
)
@pytest.mark.parametrize("lines", [60, 61])
def test_a_planted_61_line_function_is_caught(tmp_path: Path, path: str, source, name: str, lines: int) -> None:
    """A 61-line function (or method) under the package's folders fails the guard; 60 lines pass."""
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_text(source(lines), encoding="utf-8")
    assert sizes(tmp_path)[f"{path}::{name}"] == (lines, MAX_FUNCTION_LINES)
    expected = [f"{path}::{name}: 61 lines (limit 60)"] if lines == 61 else []
    assert oversized(tmp_path, frozenset()) == expected
    assert oversized(tmp_path, frozenset({f"{path}::{name}"})) == []


def test_nested_functions_and_methods_count_on_their_own() -> None:
    source = (
        "def outer():\n    def inner():\n        pass\n\n"
        "class C:\n    async def m(self):\n        class D:\n            def n(self): ...\n"
    )
    assert [(q, n.end_lineno - n.lineno + 1) for q, n in functions(ast.parse(source))] == [
        ("outer", 3),
        ("outer.inner", 2),
        ("C.m", 3),
        ("C.m.D.n", 1),
    ]


@pytest.mark.parametrize(("lines", "caught"), [(800, False), (801, True)])
def test_a_planted_long_module_is_caught(tmp_path: Path, lines: int, caught: bool) -> None:
    (tmp_path / "arag_graph").mkdir()
    (tmp_path / "arag_graph" / "big.py").write_text("x = 1\n" * lines, encoding="utf-8")
    assert oversized(tmp_path, frozenset()) == ([f"arag_graph/big.py: {lines} lines (limit 800)"] if caught else [])
