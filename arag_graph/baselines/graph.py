"""The paper's non-agentic baselines: Direct answer and Naive RAG.

    direct:     START -> start -> answer -> finish -> END
    naive_rag:  START -> start -> retrieve -> answer -> finish -> END

Naive RAG retrieves once (dense, BM25, hybrid, or ARAGOG's AMR and DSI; optionally HyDE and sentence windows)
and answers from the passages. Both return the same fields as the A-RAG agent, so the evaluators
compare them directly: a retrieval counts as one step and its passages as retrieved tokens.
"""

from __future__ import annotations

import functools
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Checkpointer

from arag_graph.baselines.context import DirectContext, DirectContextDict, NaiveRagContext, NaiveRagContextDict
from arag_graph.baselines.model import baseline_model
from arag_graph.retrievers.passages import Passage, retrieval_args, retrieve_passages
from arag_graph.run.nodes import Call, model_node
from arag_graph.run.pipeline import finish, retrieval_update, start_update
from arag_graph.run.retrieval import as_dict, hyde_vector, selection_functions
from arag_graph.run.runtime import Bound, IndexLike, RagGraph, run_of, traced_graph
from arag_graph.run.spec import GraphSpec
from arag_graph.run.state import InputState, OutputState, RunState, question_of


class NaiveRagState(RunState, total=False):
    passages: list[dict[str, Any]]
    """What was retrieved for the question (chunk id, title, text, score), shown in Studio."""
    warnings: list[str]
    """A HyDE call that failed (the question itself was searched), and the like."""


# ---------------------------------------------------------------------------------------------
# Nodes


def after_start(state: RunState) -> str:
    return "error" if state.get("error") else "go"


def retrieve_once(
    state: NaiveRagState, runtime: Runtime[NaiveRagContext], config: RunnableConfig, *, bound: Bound
) -> dict[str, Any]:
    """Naive RAG's one retrieval with the run's retriever and ARAGOG techniques (``retrieve_passages``)."""
    run = run_of(runtime, bound)
    ctx: NaiveRagContext = run.ctx
    question = question_of(state)
    vector, warning = hyde_vector(run, question, config)
    warnings = [warning] if warning else []
    found = retrieve_passages(
        run.index, question, ctx, query_vector=vector, **selection_functions(run, config, warnings)
    )
    args = {"query": question, **retrieval_args(run.index, ctx)}
    update = retrieval_update(state, "retrieve", args, found)
    update["passages"] = [as_dict(p) for p in found]
    update["warnings"] = warnings
    return update


def answer_from_passages(state: NaiveRagState, runtime: Runtime[NaiveRagContext], *, bound: Bound) -> Call:
    run = run_of(runtime, bound)
    found = [Passage(**p) for p in state.get("passages") or []]
    return Call(
        baseline_model(run.model).answer(question_of(state), found), lambda r: {"messages": [r]}, name="answer_model"
    )


def answer_directly(state: RunState, runtime: Runtime[DirectContext], *, bound: Bound) -> Call:
    run = run_of(runtime, bound)
    return Call(baseline_model(run.model).direct(question_of(state)), lambda r: {"messages": [r]}, name="answer_model")


# ---------------------------------------------------------------------------------------------
# The graphs


def build_direct_graph(
    index: IndexLike = None, model: BaseChatModel | str | None = None, *, checkpointer: Checkpointer = None
) -> RagGraph[DirectContext | DirectContextDict, OutputState]:
    """Direct answer: no retrieval. The index is only used to validate citations (there are none)."""
    bound = Bound("direct", DirectContext, index, model)
    builder = StateGraph(RunState, context_schema=DirectContext, input_schema=InputState, output_schema=OutputState)
    builder.add_node("start", start_update)
    builder.add_node("answer", model_node("answer", functools.partial(answer_directly, bound=bound)))
    builder.add_node("finish", functools.partial(finish, bound=bound))
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", after_start, {"go": "answer", "error": END})
    builder.add_edge("answer", "finish")
    builder.add_edge("finish", END)
    graph = traced_graph(builder.compile(checkpointer=checkpointer, name="direct"), bound)
    return cast("RagGraph[DirectContext | DirectContextDict, OutputState]", graph)


class NaiveRagOutputState(OutputState, total=False):
    warnings: list[str]


def build_naive_rag_graph(
    index: IndexLike = None, model: BaseChatModel | str | None = None, *, checkpointer: Checkpointer = None
) -> RagGraph[NaiveRagContext | NaiveRagContextDict, NaiveRagOutputState]:
    """Naive RAG: retrieve ``top_k`` chunks once, answer from them."""
    bound = Bound("naive_rag", NaiveRagContext, index, model)
    builder = StateGraph(
        NaiveRagState, context_schema=NaiveRagContext, input_schema=InputState, output_schema=NaiveRagOutputState
    )
    builder.add_node("start", start_update)
    builder.add_node("retrieve", functools.partial(retrieve_once, bound=bound))
    builder.add_node("answer", model_node("answer", functools.partial(answer_from_passages, bound=bound)))
    builder.add_node("finish", functools.partial(finish, bound=bound))
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", after_start, {"go": "retrieve", "error": END})
    builder.add_edge("retrieve", "answer")
    builder.add_edge("answer", "finish")
    builder.add_edge("finish", END)
    graph = traced_graph(builder.compile(checkpointer=checkpointer, name="naive_rag"), bound)
    return cast("RagGraph[NaiveRagContext | NaiveRagContextDict, NaiveRagOutputState]", graph)


GRAPHS = (
    GraphSpec("direct", build_direct_graph, DirectContext, "Direct answer: no retrieval"),
    GraphSpec(
        "naive_rag",
        build_naive_rag_graph,
        NaiveRagContext,
        "Naive RAG: one retrieval of top-k chunks (dense, BM25 or hybrid), then one answer",
    ),
)
"""The baselines' graphs, as the registry lists them."""
