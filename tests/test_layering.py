"""The package's layering, read from the source: each folder of ``arag_graph`` is a layer, and an
import points only to its own layer or below; there is no import circle at all (function-level and
``if TYPE_CHECKING:`` imports included, since a circle of annotations is still a circle a reader
has to hold in mind); no private LangGraph or LangSmith module is used.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "arag_graph"

# Lowest first. A module may import its own layer and the layers before it, never one after it.
# The graph families share a rank but are siblings: one family never imports another, except that
# SRAG's router and CoRAG's HyDE step build on the baselines, which therefore rank below them.
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
    ("arag", "corag", "srag"),
    ("registry",),
    ("served",),
    ("evaluators",),
    ("cli",),
    ("agent", "retrieval"),  # deprecated aliases of moved modules (arag_graph.core.deprecation); go in 0.3.0
]
TOP = ("__init__",)  # the package's lazy public names: may name any layer


def module_name(path: Path) -> str:
    if path.is_relative_to(REPO / "evaluators"):
        parts = ["arag_graph", "evaluators", *path.relative_to(REPO / "evaluators").with_suffix("").parts]
    else:
        parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(p for p in parts if p != "__init__")


def sources() -> dict[str, Path]:
    files = [*LIBRARY.rglob("*.py"), *(REPO / "evaluators").rglob("*.py")]
    return {module_name(f): f for f in files}


def layer_of(module: str) -> str:
    """The folder (or top-level module) of ``arag_graph`` that a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def rank(layer: str) -> int:
    for position, names in enumerate(LAYERS):
        if layer in names:
            return position
    raise AssertionError(f"arag_graph.{layer} belongs to no layer: add it to LAYERS in tests/test_layering.py")


def imports(path: Path) -> set[str]:
    """Every module this file imports, at any depth: function-level and TYPE_CHECKING imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    modules = sources()
    return {name: {m for m in imports(path) if m in modules and m != name} for name, path in modules.items()}


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


def test_a_planted_circle_through_type_checking_is_caught(tmp_path: Path) -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from arag_graph.index.document_groups import X\n"
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    found = imports(tmp_path / "m.py")
    assert "arag_graph.index.document_groups" in found
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert circles(edges) == ["a -> b -> c -> a"]


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

    from arag_graph.run.configuration import DirectContext
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
