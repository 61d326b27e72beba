"""The package's layering, read from the source: no import cycles (function-level imports included),
the library does not import the evaluation layer, and no private LangGraph or LangSmith module is used.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "arag_graph"
APPLICATION = {"arag_graph.cli.main"}  # the command line sits on top of everything, evaluation included


def module_name(path: Path) -> str:
    if path.is_relative_to(REPO / "evaluators"):
        parts = ["arag_graph", "evaluators", *path.relative_to(REPO / "evaluators").with_suffix("").parts]
    else:
        parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(p for p in parts if p != "__init__")


def sources() -> dict[str, Path]:
    files = [*LIBRARY.rglob("*.py"), *(REPO / "evaluators").rglob("*.py")]
    return {module_name(f): f for f in files}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:`` (imports for annotations only, never run)."""
    nodes: list[ast.AST] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            pending.extend(node.orelse)
            continue
        nodes.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return nodes


def imports(path: Path) -> set[str]:
    """Every module this file imports when it runs, at any depth (function-level imports included)."""
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    modules = sources()
    return {name: {m for m in imports(path) if m in modules and m != name} for name, path in modules.items()}


def test_no_import_cycles() -> None:
    edges = graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_the_library_does_not_import_the_evaluation_layer() -> None:
    for name, targets in graph().items():
        if name.startswith("arag_graph.evaluators") or name in APPLICATION:
            continue
        assert not {t for t in targets if t.startswith("arag_graph.evaluators")}, name


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
