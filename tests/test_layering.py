"""The package's layering, read from the source: each folder of ``arag_graph`` is a layer, and an
import points only to its own layer or below; there is no import circle at all (function-level and
``if TYPE_CHECKING:`` imports included, since a circle of annotations is still a circle a reader
has to hold in mind); no private LangGraph or LangSmith module is used.

What counts as an import here: every ``import`` statement, relative ones resolved to the module they
name (``from ..arag import graph`` in ``core/`` is ``arag_graph.arag.graph``; ruff's TID252 bans
relative imports as well, but the layer rule must not rest on a linter setting), and a reference by
string, which names or loads a module without an import statement: a dotted ``arag_graph.<module>``
name inside a string (its module part counts), and a string that is exactly the name of one of the
package's context schemas (a ``...Context`` class), which counts as the module defining it.
Docstrings are prose, not references.
"""

from __future__ import annotations

import ast
import functools
import re
import shutil
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "arag_graph"


# Lowest first. A module may import its own layer and the layers before it, never one after it.
# The graph families share a rank but are siblings: one family never imports another, except that
# SRAG's router runs the naive_rag graph as its subgraph, so the baselines rank below the others.
# The offline policy ranks below llm/ because `--model offline` resolves to it there. The tools rank
# above run/ for one reason: with no index given they use the index each run's context names, under
# the operator's serving policy (run/), imported inside that function only; at import time they
# load core and index alone (STANDALONE below, and the import count in tests/test_tools.py).
def registered_families() -> tuple[str, ...]:
    """The folders of the graph families the registry lists (``registry.FAMILIES``), baselines aside:
    a new family ranks with the others as soon as it has its registry line."""
    from arag_graph.registry import FAMILIES

    names = (m.__name__.split(".") for m in FAMILIES)
    return tuple(parts[1] for parts in names if parts[0] == "arag_graph" and parts[1] != "baselines")


LAYERS: list[tuple[str, ...]] = [
    ("core",),
    ("index",),
    ("qa",),
    ("retrievers",),
    ("offline",),
    ("llm",),
    ("run",),
    ("baselines",),
    ("tools",),
    tuple(dict.fromkeys(("arag", "corag", "srag", *registered_families()))),
    ("registry",),
    ("served",),
    ("evaluators",),
    ("cli",),
    ("agent", "retrieval"),  # deprecated aliases of moved modules (arag_graph.core.deprecation); go in 0.3.0
]
TOP = ("__init__",)  # the package's lazy public names: may name any layer
STANDALONE = {"tools": ("core", "index", "tools")}
"""Layers whose modules import, when they are imported, only these layers (function-level imports may
reach further within the layer order): an app that wants A-RAG's tools alone gets no graph layer."""

DOTTED = re.compile(r"\barag_graph(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
"""A dotted name in the package, as a string may hold it (``"arag_graph.arag.graph.build_arag_graph"``)."""

# References by string that are known and waived, (module, the module it names): each one says why
# and when it goes. test_every_waived_string_reference_is_still_there fails once it is gone, so
# that the waiver goes with it.
STRING_WAIVERS: dict[tuple[str, str], str] = {
    # Until 0.3.0 (CHANGELOG.md): the deprecated HierarchicalIndex.as_retriever alias reaches
    # make_retriever, two layers up, through the package's lazy name at call time; the alias and
    # this waiver go together in 0.3.0.
    ("arag_graph.index.hierarchical", "arag_graph"): "deprecated as_retriever alias until 0.3.0",
}


def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(p for p in parts if p != "__init__")


def sources(root: Path = REPO) -> dict[str, Path]:
    return {module_name(f, root): f for f in (root / "arag_graph").rglob("*.py")}


def layer_of(module: str) -> str:
    """The folder (or top-level module) of ``arag_graph`` that a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def rank(layer: str) -> int:
    for position, names in enumerate(LAYERS):
        if layer in names:
            return position
    raise AssertionError(f"arag_graph.{layer} belongs to no layer: add it to LAYERS in tests/test_layering.py")


def absolute(module: str, package: bool, level: int, target: str | None) -> str:
    """The module that ``from <level dots><target> import ...`` names when written in ``module``
    (``package``: the file is the package's ``__init__.py``), as Python resolves it."""
    parts = module.split(".") if package else module.split(".")[:-1]
    if level - 1 >= len(parts):
        raise AssertionError(f"{module}: a relative import with {level} dots climbs out of the package")
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, target] if target else base)


@dataclass(frozen=True)
class Facts:
    """What the layer rules read from one source: its import statements (dots, module, names), the
    strings it holds outside docstrings, and the classes it defines."""

    imports: tuple[tuple[int, str | None, tuple[str, ...]], ...]
    strings: tuple[str, ...]
    classes: tuple[str, ...]


@functools.cache
def facts(source: str) -> Facts:
    """The :class:`Facts` of a source, read once per text (the planted-module tests read copies of the
    package). A string that stands alone as a statement (a module, class, function or attribute
    docstring) is prose, not a reference, and is left out."""
    tree = ast.parse(source)
    prose = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    found: list[tuple[int, str | None, tuple[str, ...]]] = []
    strings: list[str] = []
    classes: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((0, alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            strings.append(node.value)
        elif isinstance(node, ast.ClassDef):
            classes.append(node.name)
    return Facts(tuple(found), tuple(strings), tuple(classes))


def imports_in(source: str, module: str, package: bool = False) -> set[str]:
    """Every module a source imports, at any depth (function-level and TYPE_CHECKING imports
    included), relative imports resolved against ``module``; ``from m import n`` names both ``m``
    and ``m.n``, since ``n`` may be a submodule."""
    found: set[str] = set()
    for level, target, names in facts(source).imports:
        base = target if level == 0 else absolute(module, package, level, target)
        if base:
            found.add(base)
            found.update(f"{base}.{name}" for name in names)
    return found


def imports(path: Path, root: Path = REPO) -> set[str]:
    """Every module a file of the package imports (see :func:`imports_in`)."""
    return imports_in(path.read_text(encoding="utf-8"), module_name(path, root), path.name == "__init__.py")


def context_classes(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """The package's context schemas (classes named ``...Context``) by name, with the modules defining them."""
    found: dict[str, set[str]] = {}
    for name, path in modules.items():
        for cls in facts(path.read_text(encoding="utf-8")).classes:
            if cls.endswith("Context"):
                found.setdefault(cls, set()).add(name)
    return found


def owner(dotted: str, modules: Collection[str]) -> str | None:
    """The module part of a dotted name: its longest prefix that is a module of the package."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if (candidate := ".".join(parts[:end])) in modules:
            return candidate
    return None


def string_references(source: str, modules: Collection[str], contexts: Mapping[str, set[str]]) -> set[str]:
    """The modules that a source's strings (docstrings aside) name: a dotted ``arag_graph.`` name
    resolved to its module part, or exactly a context schema's class name."""
    found: set[str] = set()
    for text in facts(source).strings:
        found.update(m for m in (owner(d, modules) for d in DOTTED.findall(text)) if m)
        found.update(contexts.get(text, ()))
    return found


def graph(root: Path = REPO, waivers: Mapping[tuple[str, str], str] = STRING_WAIVERS) -> dict[str, set[str]]:
    """Each module of the package with the package modules it imports or names by string (less the
    waived string references: a waiver never hides an import statement)."""
    modules = sources(root)
    contexts = context_classes(modules)
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        source = path.read_text(encoding="utf-8")
        found = {m for m in imports_in(source, name, path.name == "__init__.py") if m in modules}
        named = {m for m in string_references(source, modules, contexts) if (name, m) not in waivers}
        edges[name] = (found | named) - {name}
    return edges


def module_level_imports(path: Path) -> set[str]:
    """The modules a file imports when it is imported: every import outside a function body."""
    found: set[str] = set()

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.add(child.module)
            walk(child)

    walk(ast.parse(path.read_text(encoding="utf-8")))
    return found


def standalone_violations(modules: dict[str, Path]) -> list[str]:
    """Imports at import time from a layer that :data:`STANDALONE` does not allow its modules."""
    found = []
    for name, path in modules.items():
        allowed = STANDALONE.get(layer_of(name))
        if allowed is None:
            continue
        for target in sorted(module_level_imports(path)):
            if target.startswith("arag_graph.") and layer_of(target) not in allowed:
                found.append(f"{name} -> {target}")
    return found


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    """Every import that points to a higher layer or to a sibling graph family."""
    found = []
    for name, targets in edges.items():
        here = layer_of(name)
        if here in TOP:
            continue
        for target in sorted(targets):
            there = layer_of(target)
            if there == here or (there in TOP and target == "arag_graph"):
                continue
            if there in TOP or rank(there) >= rank(here):
                found.append(f"{name} -> {target}")
    return found


def circles(edges: dict[str, set[str]]) -> list[str]:
    found: list[str] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                found.append(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_every_folder_is_a_declared_layer() -> None:
    for name in sources():
        layer = layer_of(name)
        if layer not in TOP:
            rank(layer)


def test_imports_point_only_to_their_own_layer_or_below() -> None:
    assert upward_imports(graph()) == []


def test_the_tools_import_only_core_and_index_when_imported(tmp_path: Path) -> None:
    assert standalone_violations(sources()) == []
    planted = tmp_path / "toolkit.py"
    planted.write_text(
        "from arag_graph.core.limits import TOP_K_MAX\n"
        "from arag_graph.run.runtime import load_run_index\n"
        "def default():\n    from arag_graph.run.runtime import index_for_context\n",
        encoding="utf-8",
    )
    assert standalone_violations({"arag_graph.tools.toolkit": planted}) == [
        "arag_graph.tools.toolkit -> arag_graph.run.runtime"
    ]


def test_no_import_circles() -> None:
    assert circles(graph()) == []


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"arag_graph.index.build": {"arag_graph.arag.graph"}}, ["arag_graph.index.build -> arag_graph.arag.graph"]),
        ({"arag_graph.corag.graph": {"arag_graph.srag.graph"}}, ["arag_graph.corag.graph -> arag_graph.srag.graph"]),
        (
            {"arag_graph.core.errors": {"arag_graph.evaluators.runner"}},
            ["arag_graph.core.errors -> arag_graph.evaluators.runner"],
        ),
        ({"arag_graph.cli.main": {"arag_graph.evaluators.runner", "arag_graph.core.errors"}}, []),
        ({"arag_graph.srag.graph": {"arag_graph.baselines.graph"}}, []),
    ],
)
def test_the_layer_rule_catches_a_planted_violation(edges: dict[str, set[str]], expected: list[str]) -> None:
    """The rule itself, on planted graphs: an index module importing the agent is caught, and so is
    one family importing another; downward imports pass."""
    assert upward_imports(edges) == expected


def test_a_planted_circle_through_type_checking_is_caught() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from arag_graph.index.document_groups import X\n"
    assert "arag_graph.index.document_groups" in imports_in(source, "arag_graph.core.m")
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert circles(edges) == ["a -> b -> c -> a"]


@pytest.mark.parametrize(
    ("module", "package", "source", "expected"),
    [
        ("arag_graph.core.m", False, "from ..arag import graph", {"arag_graph.arag", "arag_graph.arag.graph"}),
        ("arag_graph.core.m", False, "from . import errors", {"arag_graph.core", "arag_graph.core.errors"}),
        (
            "arag_graph.core.m",
            False,
            "from .errors import AragError",
            {"arag_graph.core.errors", "arag_graph.core.errors.AragError"},
        ),
        ("arag_graph.core", True, "from . import errors", {"arag_graph.core", "arag_graph.core.errors"}),
        ("arag_graph.core", True, "from .. import registry", {"arag_graph", "arag_graph.registry"}),
        ("arag_graph.evaluators.runner", False, "from ..cli import main", {"arag_graph.cli", "arag_graph.cli.main"}),
        ("arag_graph.index.build", False, "def f():\n    from ...arag_graph import x", None),
    ],
)
def test_relative_imports_resolve_as_python_resolves_them(
    module: str, package: bool, source: str, expected: set[str] | None
) -> None:
    """``from ..arag import graph`` in ``core/`` names ``arag_graph.arag.graph``; in an ``__init__.py``
    one dot is the package itself; a relative import that climbs out of the package is an error of its own."""
    if expected is None:
        with pytest.raises(AssertionError, match="climbs out of the package"):
            imports_in(source, module, package)
    else:
        assert imports_in(source, module, package) == expected


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package's sources (``arag_graph/``) to plant modules in."""
    root = tmp_path_factory.mktemp("layers")
    shutil.copytree(REPO / "arag_graph", root / "arag_graph", ignore=shutil.ignore_patterns("data", "__pycache__"))
    return root


@pytest.mark.parametrize(
    ("planted", "source", "upward"),
    [
        ("core/planted.py", "from ..arag import graph\n", ["arag_graph.arag", "arag_graph.arag.graph"]),
        ("core/planted.py", "def f():\n    from ..arag.graph import build_arag_graph\n", ["arag_graph.arag.graph"]),
        ("index/planted.py", "from ..cli import main as cli\n", ["arag_graph.cli", "arag_graph.cli.main"]),
        ("core/planted.py", 'BUILDER = "arag_graph.arag.graph.build_arag_graph"\n', ["arag_graph.arag.graph"]),
        ("core/planted.py", 'NAMES = {"corag": f"arag_graph.corag.graph:{1}"}\n', ["arag_graph.corag.graph"]),
        ("core/planted.py", 'APPLIES_TO = ("AragContext",)\n', ["AragContext"]),
        ("core/planted.py", 'def f(ctx: "CoragContext") -> None: ...\n', ["CoragContext"]),
        ("core/planted.py", "from . import errors\nfrom .errors import AragError\n", []),
        ("core/planted.py", '"""Prose naming arag_graph.arag.graph and AragContext."""\n', []),
        ("arag/planted.py", "from ..core import errors\nfrom . import graph\n", []),
    ],
)
def test_a_planted_relative_or_string_reference_upward_is_caught(
    package_copy: Path, planted: str, source: str, upward: list[str]
) -> None:
    """The whole check, on a copy of the package with one module planted in it: a relative upward
    import (``from ..arag import graph`` in ``core/``) fails it, and so does naming a higher module
    by a dotted string or a context schema by its class name (``upward`` names a module, or a
    context class standing for the module that defines it, wherever the slices put it); downward
    relative imports and docstrings pass."""
    path = package_copy / "arag_graph" / planted
    path.write_text(source, encoding="utf-8")
    try:
        name = module_name(path, package_copy)
        contexts = context_classes(sources(package_copy))
        targets = sorted(m for target in upward for m in contexts.get(target, {target}))
        assert upward_imports({name: graph(package_copy)[name]}) == [f"{name} -> {m}" for m in targets]
        assert all(rank(layer_of(m)) > rank(layer_of(name)) for m in targets)
    finally:
        path.unlink()


def test_every_waived_string_reference_is_still_there() -> None:
    """A waiver that no longer waives anything goes (the slices stream removes profiles' one), and the
    waivers hide only string references: without them the check finds exactly the waived edges."""
    modules = sources()
    contexts = context_classes(modules)
    for (here, target), why in STRING_WAIVERS.items():
        named = string_references(modules[here].read_text(encoding="utf-8"), modules, contexts)
        assert target in named, f"{here} no longer names {target} by string: delete its waiver ({why})"
    bare, waived = graph(waivers={}), graph()
    hidden = {f"{h} -> {t}" for h in bare for t in bare[h] - waived[h]}
    assert hidden == {f"{h} -> {t}" for h, t in STRING_WAIVERS}


def test_no_private_langgraph_or_langsmith_modules() -> None:
    for name, path in sources().items():
        private = {m for m in imports(path) if m.startswith(("langgraph._internal", "langsmith.evaluation._"))}
        assert not private, f"{name} imports {sorted(private)}"


def test_the_traced_graph_keeps_every_attribute_of_the_compiled_one() -> None:
    """``runtime.traced_graph`` rebuilds a compiled graph from its attributes, as ``Pregel.copy`` does.

    The one place that relies on how LangGraph constructs a compiled graph: if a release adds a
    constructor argument that is not an attribute, or renames one, this fails before users do.
    """
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from arag_graph.baselines.context import DirectContext
    from arag_graph.run.runtime import Bound, TracedGraph, traced_graph

    class State(TypedDict, total=False):
        x: int

    builder = StateGraph(State, context_schema=DirectContext)
    builder.add_node("inc", lambda state: {"x": state.get("x", 0) + 1})
    builder.add_edge(START, "inc")
    builder.add_edge("inc", END)
    plain = builder.compile(name="pinned")
    traced = traced_graph(builder.compile(name="pinned"), Bound("pinned", DirectContext))
    assert isinstance(traced, TracedGraph)
    # The same attributes as LangGraph's own copy (with_config) keeps.
    assert set(vars(traced)) - {"run_metadata"} == set(vars(plain.copy())) - {"__orig_class__"}
    assert set(traced.nodes) == set(plain.nodes) and set(traced.channels) == set(plain.channels)
    assert traced.get_context_jsonschema() == plain.get_context_jsonschema()
    assert traced.invoke({"x": 1}) == plain.invoke({"x": 1}) == {"x": 2}


def test_the_run_layer_imports_the_sample_build_only_when_a_run_needs_it() -> None:
    """``run.runtime`` needs the sample only to find or build the default index; importing the
    sample module at import time pulled the whole build path (encoders, chunking, writers) into
    every graph's start-up."""
    import subprocess
    import sys

    probe = "import sys, arag_graph.run.runtime; print(sorted(m for m in sys.modules if 'arag_graph.qa.' in m))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "arag_graph.index.sample" not in done.stdout, done.stdout


FAMILY_BUILDERS = {
    "build_arag_graph": "arag_graph.arag.graph",
    "build_arag_naive_graph": "arag_graph.arag.graph",
    "build_naive_rag_graph": "arag_graph.baselines.graph",
    "build_direct_graph": "arag_graph.baselines.graph",
    "build_corag_graph": "arag_graph.corag.graph",
    "build_srag_graph": "arag_graph.srag.graph",
}


def test_the_graph_builders_import_from_the_package_root_lazily() -> None:
    """The package docstring offered ``build_arag_graph`` but ``from arag_graph import build_arag_graph``
    failed. Every builder is a lazy name of the package now: ``import arag_graph`` loads no graph (nor
    LangGraph), and the name is the family module's own function."""
    import json
    import subprocess
    import sys

    probe = (
        "import json, sys, importlib, arag_graph\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('langgraph', 'arag_graph.')))\n"
        f"names = {sorted(FAMILY_BUILDERS)!r}\n"
        f"homes = {FAMILY_BUILDERS!r}\n"
        "same = [getattr(arag_graph, n) is getattr(importlib.import_module(homes[n]), n) for n in names]\n"
        "print(json.dumps({'loaded': loaded, 'same': same, 'all': sorted(set(names) & set(arag_graph.__all__))}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["loaded"] == [], result["loaded"]
    assert result["same"] == [True] * len(FAMILY_BUILDERS)
    assert result["all"] == sorted(FAMILY_BUILDERS)
