"""Every graph of the package by name, with its builder and its configuration class.

The CLI (``arag ask --graph``), the evaluation runner and ``arag_graph/served/`` look graphs up here, so a
variant is registered once. Each graph family's ``graph.py`` lists its graphs (``GRAPHS``, of
:class:`~arag_graph.run.spec.GraphSpec`) beside their builders; :data:`FAMILIES` is the one list of
families, so adding a graph is its folder and one line here. The families are imported as modules,
not named by strings, so the layer test sees every one; this module sits above them all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from arag_graph.arag import graph as arag
from arag_graph.baselines import graph as baselines
from arag_graph.corag import graph as corag
from arag_graph.core.errors import AragError
from arag_graph.core.profiles import DEVIATIONS, Deviation, deviation_table
from arag_graph.run.configuration import GraphContext
from arag_graph.run.spec import GraphSpec
from arag_graph.srag import graph as srag

if TYPE_CHECKING:
    from langgraph_sdk.runtime import ServerRuntime

__all__ = [
    "FAMILIES",
    "GRAPHS",
    "GraphSpec",
    "build_graph",
    "check_setting_names",
    "config_for",
    "deviations",
    "get_graph_spec",
    "graph_names",
    "profile_table",
    "registered",
    "served_graph",
]

FAMILIES: tuple[ModuleType, ...] = (
    baselines,
    arag,
    corag,
    srag,
)
"""Every graph family, by its graph module (each lists its graphs in ``GRAPHS``), in the order the
CLI, the evaluation and the docs list them. A new family is a folder and a line here."""


def _graphs(families: Iterable[ModuleType]) -> dict[str, GraphSpec]:
    graphs: dict[str, GraphSpec] = {}
    for family in families:
        for spec in family.GRAPHS:
            if spec.name in graphs:
                raise AragError(f"two graphs are named {spec.name!r} ({family.__name__} and another family)")
            graphs[spec.name] = spec
    return graphs


GRAPHS: dict[str, GraphSpec] = _graphs(FAMILIES)


@contextlib.contextmanager
def registered(*families: ModuleType) -> Iterator[None]:
    """Graph families from outside the package (a plugin's, a test's toy), registered while the block runs.

    Each is a module with ``GRAPHS``, as a family's ``graph.py`` is; the CLI run in the same process
    (``arag ask``, ``arag eval``), :func:`served_graph` and :func:`config_for` find its graphs.
    """
    added = _graphs([*FAMILIES, *families])
    new = {name: spec for name, spec in added.items() if name not in GRAPHS}
    GRAPHS.update(new)
    try:
        yield
    finally:
        for name in new:
            GRAPHS.pop(name, None)


def deviations() -> tuple[Deviation, ...]:
    """Every row of the paper profile: the shared ones, then each graph family's own, in registry order."""
    rows = list(DEVIATIONS)
    for spec in GRAPHS.values():
        rows.extend(d for d in spec.config.paper_profile() if d not in rows)
    return tuple(rows)


def profile_table() -> str:
    """The docs' table of the paper profile (``docs/guide/reproducing.md``), from :func:`deviations`."""
    return deviation_table(deviations())


def graph_names() -> list[str]:
    return list(GRAPHS)


def get_graph_spec(name: str) -> GraphSpec:
    spec = GRAPHS.get(name)
    if spec is None:
        raise AragError(f"unknown graph {name!r}; choose from {', '.join(GRAPHS)}")
    return spec


def build_graph(name: str, **kwargs: Any) -> Any:
    """Compile the graph called ``name`` (keyword arguments go to its builder: index, model, ...)."""
    return get_graph_spec(name).build(**kwargs)


def served_graph(name: str) -> Callable[[ServerRuntime], Any]:
    """The graph ``name`` as ``langgraph.json`` serves it: a LangGraph graph factory.

    LangGraph's server keeps only the context keys the context schema lists and drops the rest
    without a word, so a caller's typo (``max_stpes``) or stray key would run with the defaults.
    The server calls a factory for every use of the graph; for a run it passes the run's context
    as the caller (and the assistant) gave it, before that filter. The factory refuses a key the
    graph does not have with the one line the library warns with, which the caller receives as the
    run's error; for every other use (schemas, state reads, Studio's edits) it only hands over the
    graph. The graph is compiled once: settings come from each run's context, not from the factory.
    """
    spec = get_graph_spec(name)
    compiled = spec.build()

    def graph(runtime: ServerRuntime) -> Any:
        run = runtime.execution_runtime
        if run is not None and isinstance(run.context, dict):
            spec.config.refuse_unknown_keys(run.context)
        return compiled

    graph.__name__ = graph.__qualname__ = f"served_{name}"
    return graph


def config_for(name: str, **values: Any) -> GraphContext:
    """The graph's context as the operator sets it (CLI, evaluation runner), with ``values`` set.

    Fields the graph does not have are dropped; None leaves a field at its default. A bad value
    raises the one-line :class:`~arag_graph.run.configuration.ContextError`.
    """
    cls = get_graph_spec(name).config
    return cls.trusted(**{k: v for k, v in values.items() if k in cls.model_fields})


# Settings the command line sets through flags of its own, never through ``--set``.
RESERVED_SETTINGS = {"model": "--model", "base_url": "--base-url", "top_k": "--top-k", "max_steps": "--max-steps"}
RESERVED_SETTINGS |= {"index_path": "--index", "timeout": "--model-timeout", "max_retries": "--model-retries"}
RESERVED_SETTINGS |= {"profile": "--profile"}


def check_setting_names(names: Iterable[str], graphs: Sequence[str]) -> None:
    """``--set KEY=...`` keys: each a field of one of ``graphs`` and not one a flag of its own sets.

    One rule for ``arag ask`` and ``arag eval``; the values are checked by the graphs' configuration
    classes (:func:`config_for`).
    """
    names = list(names)
    for key in names:
        if key in RESERVED_SETTINGS:
            raise AragError(f"--set {key}=...: use {RESERVED_SETTINGS[key]} for that")
    known: set[str] = set()
    for name in graphs:
        known |= set(get_graph_spec(name).config.model_fields)
    unknown = sorted(set(names) - known)
    if unknown:
        which = f"the graph {graphs[0]}" if len(graphs) == 1 else f"none of the graphs {', '.join(graphs)}"
        has = "has no such setting" if len(graphs) == 1 else "has that setting"
        raise AragError(
            f"--set {unknown[0]}: {which} {has}; choose from {', '.join(sorted(known - set(RESERVED_SETTINGS)))}"
        )
