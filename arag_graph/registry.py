"""Every graph of the package by name, with its builder and its configuration class.

The CLI (``arag ask --graph``), the evaluation runner and ``arag_graph/served/`` look graphs up here, so a
variant is registered once. Builders are held by reference (jump-to-definition works from here and
from ``arag_graph/served/``); this module sits above every graph family in the layer order for that reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arag_graph.arag.context import AragContext, AragNaiveContext
from arag_graph.arag.graph import build_arag_graph, build_arag_naive_graph
from arag_graph.baselines.context import DirectContext, NaiveRagContext
from arag_graph.baselines.graph import build_direct_graph, build_naive_rag_graph
from arag_graph.corag.context import CoragContext
from arag_graph.corag.graph import build_corag_graph
from arag_graph.core.errors import AragError
from arag_graph.core.profiles import DEVIATIONS, Deviation, deviation_table
from arag_graph.run.configuration import GraphContext
from arag_graph.srag.context import SragContext
from arag_graph.srag.graph import build_srag_graph

if TYPE_CHECKING:
    from langgraph_sdk.runtime import ServerRuntime


@dataclass(frozen=True)
class GraphSpec:
    name: str
    builder: Callable[..., Any]
    """The graph's builder; it takes ``index``, ``model`` and ``checkpointer``."""
    config: type[GraphContext]
    """The graph's context schema (its Studio form)."""
    description: str

    def build(self, **kwargs: Any) -> Any:
        return self.builder(**kwargs)


GRAPHS: dict[str, GraphSpec] = {
    spec.name: spec
    for spec in (
        GraphSpec("direct", build_direct_graph, DirectContext, "Direct answer: no retrieval"),
        GraphSpec(
            "naive_rag",
            build_naive_rag_graph,
            NaiveRagContext,
            "Naive RAG: one retrieval of top-k chunks (dense, BM25 or hybrid), then one answer",
        ),
        GraphSpec(
            "arag_naive",
            build_arag_naive_graph,
            AragNaiveContext,
            "A-RAG (Naive): the agent with one embedding search that returns whole chunks",
        ),
        GraphSpec(
            "arag",
            build_arag_graph,
            AragContext,
            "A-RAG: the agent with keyword_search, semantic_search and chunk_read (ablations in its config)",
        ),
        GraphSpec(
            "corag",
            build_corag_graph,
            CoragContext,
            "CoRAG: chain of retrieval with sufficiency checks and query reformulation",
        ),
        GraphSpec(
            "srag",
            build_srag_graph,
            SragContext,
            "SRAG: dependent sub-questions, triplet extraction, a fact table, then the answer",
        ),
    )
}


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
RESERVED_SETTINGS |= {"approve_tools": "--approve (arag ask, at a terminal; an evaluation runs unattended)"}


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
