"""The paper's non-agentic baselines: Direct answer and Naive RAG.

    direct:     START -> start -> answer -> finish -> END
    naive_rag:  START -> start -> retrieve -> answer -> finish -> END

Naive RAG retrieves once (dense, BM25 or hybrid; optionally HyDE and ARAGOG's sentence windows)
and answers from the passages. Both return the same fields as the A-RAG agent, so the evaluators
compare them directly: a retrieval counts as one step and its passages as retrieved tokens.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from arag_graph.configuration import DirectConfig, NaiveRagConfig
from arag_graph.hyde import hyde_vector
from arag_graph.nodes import ModelCall, model_node
from arag_graph.pipeline import finish_update, passages_block, retrieval_update, start_update
from arag_graph.prompts import CONTEXT_ANSWER_PROMPT, DIRECT_ANSWER_PROMPT
from arag_graph.retrievers import Passage, passages, retrieve, sentence_windows
from arag_graph.runtime import IndexLike, make_resolver, traced_graph
from arag_graph.state import InputState, OutputState, RunState, question_of


class NaiveRagState(RunState, total=False):
    passages: list[dict[str, Any]]
    """What was retrieved for the question (chunk id, title, text, score), shown in Studio."""


def _after_start(state: RunState) -> str:
    return "error" if state.get("error") else "go"


def build_direct_graph(
    index: IndexLike = None, model: BaseChatModel | str | None = None, *, checkpointer: Checkpointer = None
) -> CompiledStateGraph:
    """Direct answer: no retrieval. The index is only used to validate citations (there are none)."""
    resolve = make_resolver("direct", index, model, DirectConfig)

    def answer(state: RunState, config: RunnableConfig) -> ModelCall:
        res = resolve()
        prompt = DIRECT_ANSWER_PROMPT.format(question=question_of(state))
        return ModelCall(
            res.model, [HumanMessage(prompt)], lambda r: {"messages": [r]}, res.trace(config, "answer_model")
        )

    def finish(state: RunState) -> dict[str, Any]:
        return finish_update(state, resolve().index)

    builder = StateGraph(RunState, context_schema=DirectConfig, input_schema=InputState, output_schema=OutputState)
    builder.add_node("start", start_update)
    builder.add_node("answer", model_node("answer", answer))
    builder.add_node("finish", finish)
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", _after_start, {"go": "answer", "error": END})
    builder.add_edge("answer", "finish")
    builder.add_edge("finish", END)
    return traced_graph(builder.compile(checkpointer=checkpointer, name="direct"), "direct", index, DirectConfig)


def build_naive_rag_graph(
    index: IndexLike = None, model: BaseChatModel | str | None = None, *, checkpointer: Checkpointer = None
) -> CompiledStateGraph:
    """Naive RAG: retrieve ``top_k`` chunks once, answer from them."""
    resolve = make_resolver("naive_rag", index, model, NaiveRagConfig)

    def retrieve_node(state: NaiveRagState, config: RunnableConfig) -> dict[str, Any]:
        res = resolve()
        cfg: NaiveRagConfig = res.cfg
        question = question_of(state)
        vector = hyde_vector(res.index, res.model, question, res.trace(config, "hyde_model")) if cfg.hyde else None
        if cfg.sentence_window and cfg.retriever == "dense":  # ARAGOG: the top-k sentences, each in its window
            found = sentence_windows(res.index, question, cfg.top_k, cfg.window, query_vector=vector)
        else:  # chunks; with hybrid and sentence windows, each chunk cut to windows around its dense matches
            hits = retrieve(res.index, question, cfg.top_k, cfg.retriever, query_vector=vector)
            found = passages(res.index, hits, cfg.window if cfg.sentence_window else None)
        args = {"query": question, "retriever": cfg.retriever, "top_k": cfg.top_k}
        update = retrieval_update(state, "retrieve", args, found)
        update["passages"] = [_as_dict(p) for p in found]
        return update

    def answer(state: NaiveRagState, config: RunnableConfig) -> ModelCall:
        res = resolve()
        found = [Passage(**p) for p in state.get("passages") or []]
        prompt = CONTEXT_ANSWER_PROMPT.format(context=passages_block(found), question=question_of(state))
        return ModelCall(
            res.model, [HumanMessage(prompt)], lambda r: {"messages": [r]}, res.trace(config, "answer_model")
        )

    def finish(state: NaiveRagState) -> dict[str, Any]:
        return finish_update(state, resolve().index)

    builder = StateGraph(
        NaiveRagState, context_schema=NaiveRagConfig, input_schema=InputState, output_schema=OutputState
    )
    builder.add_node("start", start_update)
    builder.add_node("retrieve", retrieve_node)
    builder.add_node("answer", model_node("answer", answer))
    builder.add_node("finish", finish)
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", _after_start, {"go": "retrieve", "error": END})
    builder.add_edge("retrieve", "answer")
    builder.add_edge("answer", "finish")
    builder.add_edge("finish", END)
    graph = builder.compile(checkpointer=checkpointer, name="naive_rag")
    return traced_graph(graph, "naive_rag", index, NaiveRagConfig)


def _as_dict(p: Passage) -> dict[str, Any]:
    return {"chunk_id": p.chunk_id, "title": p.title, "text": p.text, "score": p.score}
