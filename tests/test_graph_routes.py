"""Every conditional edge's path map lists every value its router can return.

LangGraph looks a router's return value up in the edge's path map (``_branch._finish``); a value
the map lacks is a ``KeyError`` at run time, and only on the path that returns it. CoRAG's
``send_tasks`` edge out of ``collect`` returned ``"retrieve"`` (a greedy thread edited as
``collect`` in Studio), which its map ``{"chain", "answer", "end"}`` lacked: HTTP 500 from
``langgraph dev``. A run rarely takes such a path, so the values are read from each router's
source: every string it can return (constants, module names such as ``END``, closure variables),
and the node each ``Send`` it returns goes to. A router this reader cannot follow fails the test by
name, so a new router is either readable or rewritten to be.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import pytest
from langgraph.types import Send

from arag_graph.registry import GRAPHS, build_graph


class Unreadable(Exception):
    """A return expression this reader cannot turn into values."""


def _function(path: Any) -> Callable[..., Any]:
    func = getattr(path, "func", None) or getattr(path, "afunc", None) or path
    while isinstance(func, functools.partial):
        func = func.func
    return func


def _name_value(func: Callable[..., Any], name: str) -> Any:
    # A comprehension's names are its own code object's, which getclosurevars does not read.
    closure = inspect.getclosurevars(func)
    for scope in (closure.nonlocals, func.__globals__, closure.builtins):
        if name in scope:
            return scope[name]
    raise Unreadable(f"name {name!r}")


def _returned(expr: ast.expr | None, func: Callable[..., Any]) -> set[Hashable]:
    """The values ``expr`` can evaluate to: strings, and ``Send`` targets as ``("Send", node)``."""
    match expr:
        case ast.Constant(value=str() as value):
            return {value}
        case ast.Name(id=name):
            value = _name_value(func, name)
            if isinstance(value, str):
                return {value}
            raise Unreadable(f"name {name!r} is {value!r}")
        case ast.IfExp(body=body, orelse=orelse):
            return _returned(body, func) | _returned(orelse, func)
        case ast.List(elts=elts) | ast.Tuple(elts=elts):
            return set().union(*(_returned(e, func) for e in elts))
        case ast.ListComp(elt=elt) | ast.GeneratorExp(elt=elt):
            return _returned(elt, func)
        case ast.Call(func=ast.Name(id=callee), args=[target, *_]) if _name_value(func, callee) is Send:
            return {("Send", value) for value in _returned(target, func)}
    raise Unreadable(ast.unparse(expr) if expr is not None else "a bare return")


def router_values(func: Callable[..., Any]) -> set[Hashable]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    definition = tree.body[0]
    assert isinstance(definition, ast.FunctionDef), func
    values: set[Hashable] = set()
    for node in ast.walk(definition):
        if isinstance(node, ast.Return):
            values |= _returned(node.value, func)
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)) and node is not definition:
            raise Unreadable("a nested function")
    return values


def _branches(name: str) -> Iterator[tuple[str, Any, str, Any]]:
    """(graph, compiled graph, source node, branch) for the graph and every subgraph it holds."""
    graph = build_graph(name)
    for label, compiled in [(name, graph), *((f"{name}/{s}", g) for s, g in graph.get_subgraphs(recurse=True))]:
        for node, branches in compiled.builder.branches.items():
            for branch in branches.values():
                yield label, compiled, node, branch


EDGES = [(label, node, compiled, branch) for name in GRAPHS for label, compiled, node, branch in _branches(name)]


@pytest.mark.parametrize(("label", "node", "compiled", "branch"), EDGES, ids=[f"{e[0]}:{e[1]}" for e in EDGES])
def test_every_value_a_router_returns_is_in_its_path_map(label: str, node: str, compiled: Any, branch: Any) -> None:
    func = _function(branch.path)
    try:
        values = router_values(func)
    except Unreadable as e:
        pytest.fail(f"{label}: the router {func.__qualname__} out of {node!r} returns {e}, which this test cannot read")
    nodes = set(compiled.builder.nodes)
    sends = {v[1] for v in values if isinstance(v, tuple)}
    plain = {v for v in values if not isinstance(v, tuple)}
    assert plain, f"{label}: the router out of {node!r} returns no plain value this test could find"
    ends = branch.ends if branch.ends is not None else {n: n for n in nodes | {"__end__"}}
    missing = sorted(plain - set(ends))
    assert not missing, f"{label}: {func.__qualname__} out of {node!r} can return {missing}, not in {sorted(ends)}"
    assert sends <= nodes, f"{label}: {func.__qualname__} sends to {sorted(sends - nodes)}, not nodes of the graph"


def test_the_reader_sees_a_value_missing_from_a_path_map() -> None:
    """The check can fail: a router that can return a value its map lacks is reported."""

    def router(state: dict[str, Any]) -> str:
        return "left" if state.get("x") else "right"

    assert router_values(router) == {"left", "right"}

    def sender(state: dict[str, Any]) -> list[Send] | str:
        if state.get("x"):
            return [Send("worker", t) for t in state["x"]]
        return "__end__"

    assert router_values(sender) == {("Send", "worker"), "__end__"}

    def opaque(state: dict[str, Any]) -> str:
        return state["next"]

    with pytest.raises(Unreadable):
        router_values(opaque)
