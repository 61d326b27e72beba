"""CoRAG (chain-of-retrieval augmented generation; Wang et al., 2025, arXiv 2502.09601) as a graph.

    START -> start -> retrieve -> check -> reformulate -> retrieve -> ... -> answer -> finish -> END
                         |           |            |
                         +-----------+------------+--> answer   (when the chain stops)

Step ``s`` retrieves ``top_k`` chunks for the query ``q_s`` (``q_1`` is the question); only chunks
not seen at an earlier step join the context, and only their tokens are counted. A structured
sufficiency check then reads the question and the union of passages so far (``reasoning``,
``is_sufficient``, ``missing_info``, ``confidence``); when they are not enough, a reformulation
writes ``q_{s+1}`` aimed at the missing information, from the question, the passages, the chain so
far and what is missing. The answer is generated from the union of retrieved passages.

Why a chain stops is kept in ``stop_reason`` (and said in words in ``stop_detail``):

``sufficient``
    the check judged the passages enough to answer.
``step_cap``
    ``S = max_steps`` retrievals were made. The last retrieval is not checked: no verdict could
    change what happens next, so S=1 is exactly one-shot RAG (one model call) and a chain of S
    steps costs S retrievals and 2(S-1) + 1 model calls, the latency budget the paper names.
``no_new_passages``
    a retrieval brought no chunk that was not already in context: the check would see the same
    passages again and give the same verdict.
``loop``
    the reformulated query equals, or nearly equals, an earlier query (token Jaccard of the
    lower-cased words at least ``loop_similarity``); searching it again would return the same chunks.
``recursion_limit``
    the caller's LangGraph recursion limit leaves no room for another round (raise it for long chains).

The check, the reformulation and the answer all see the union of the chain's passages *best
first* (reciprocal-rank fusion of every step's ranking, so a chunk found by several queries rises).
By default the whole union, as CoRAG answers from it; ``max_context_tokens`` cuts it at that many
o200k tokens for corpora of long chunks or models with small contexts.

The check and the reformulation are the backbone's typed requests
(:class:`~arag_graph.backbone.Backbone`). With a real model, a bad structured reply is retried once
and then read as "not sufficient" (check) or as the question itself (reformulation, which then
stops the chain as a loop); such fallbacks are listed in ``warnings``, never raised. The offline
policy answers them with its documented rules (:mod:`arag_graph.offline`: the question's salient
names and words looked up in the passages; the missing ones, anchored by the question's other
names, become the next query), so the whole graph runs without a network.

The chain (one :class:`ChainStep` per retrieval: query, chunk IDs, new chunk IDs, the check's
verdict and reasoning) is part of the output, so Studio shows it and
:mod:`arag_graph.rejection_sampling` turns sampled chains into training data.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Checkpointer
from typing_extensions import TypedDict

from arag_graph.baselines import hyde_vector
from arag_graph.configuration import CoragContext
from arag_graph.nodes import Call, model_node
from arag_graph.pipeline import finish_update, retrieval_update, start_update
from arag_graph.prompts import verdict
from arag_graph.retrievers import Passage, passages, retrieve, rrf_scores
from arag_graph.runtime import Bound, IndexLike, run_index, run_of, traced_graph
from arag_graph.state import InputState, OutputState, RunState, question_of
from arag_graph.structured import FALLBACKS, Reformulation, Sufficiency
from arag_graph.tokens import count_tokens, decode, encode

__all__ = [
    "ChainStep",
    "CoragOutputState",
    "CoragState",
    "StopReason",
    "build_corag_graph",
    "context_passages",
    "query_similarity",
    "rank_passages",
    "repeated_query",
]

StopReason = Literal["sufficient", "step_cap", "no_new_passages", "loop", "recursion_limit"]

# Supersteps a round needs after a retrieval that continues the chain: check, reformulate, the next
# retrieval, then (if that one stops) answer and finish. With fewer left under the caller's
# recursion limit the chain stops and answers instead of failing with GraphRecursionError.
_SUPERSTEPS_PER_ROUND = 5
_WORDS = re.compile(r"\w+")

# ---------------------------------------------------------------------------------------------
# State


class ChainStep(TypedDict, total=False):
    """One link of the chain: a retrieval and the sufficiency check that followed it."""

    step: int
    query: str
    chunk_ids: list[str]
    """Everything the query retrieved, best first, including chunks already in context."""
    new_chunk_ids: list[str]
    """Chunks that joined the context at this step (the only ones whose tokens are counted)."""
    tokens: int
    is_sufficient: bool | None
    """None when the step was not checked (the chain stopped right after it)."""
    missing_info: str
    confidence: float | None
    reasoning: str
    """The check's intermediate reasoning: what the passages establish so far."""


class CoragOutputState(OutputState, total=False):
    """The common output fields plus the chain and why it stopped (shown in Studio)."""

    chain: list[ChainStep]
    stop_reason: StopReason | Literal[""]
    stop_detail: str
    context_chunks: list[str]
    """Chunks given to the final answer, best first (after the ``max_context_tokens`` cut, if one is set)."""
    warnings: list[str]
    """Structured outputs that fell back to their safe value, a failed HyDE call, and the like."""


class CoragState(RunState, CoragOutputState, total=False):
    query: str
    """The query the next retrieval searches for."""
    passages: list[dict[str, Any]]
    """The union of retrieved passages in first-seen order: chunk_id, title, text, score, tokens, step."""


# ---------------------------------------------------------------------------------------------
# Loop detection and the context


def _words(text: str) -> set[str]:
    return set(_WORDS.findall(text.lower()))


def query_similarity(a: str, b: str) -> float:
    """Token Jaccard of two queries, lower-cased, punctuation ignored (1.0 for two empty queries).

    Word sets rather than strings: a reformulation that only reorders or re-punctuates the same
    words searches for the same thing.
    """
    left, right = _words(a), _words(b)
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def repeated_query(query: str, earlier: Sequence[str], threshold: float) -> tuple[int, float] | None:
    """The 1-based step of the most similar earlier query when ``query`` repeats it, else None.

    A query with the same words as an earlier one always repeats it, whatever the threshold.
    """
    best: tuple[int, float] | None = None
    for step, previous in enumerate(earlier, 1):
        similarity = query_similarity(query, previous)
        if (similarity >= threshold or _words(query) == _words(previous)) and (best is None or similarity > best[1]):
            best = (step, similarity)
    return best


def rank_passages(chain: Sequence[ChainStep], found: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The union of passages best first: reciprocal-rank fusion of the rankings of every step.

    Scores of different queries (and of BM25 versus cosine) are not comparable, ranks are; a chunk
    found again by a later query keeps its place in the context and gains rank. Ties keep the
    order in which chunks were first retrieved.
    """
    scores = rrf_scores(link.get("chunk_ids") or [] for link in chain)
    order = {p["chunk_id"]: i for i, p in enumerate(found)}
    return sorted(found, key=lambda p: (-scores.get(p["chunk_id"], 0.0), order[p["chunk_id"]]))


def context_passages(chain: Sequence[ChainStep], found: Sequence[dict[str, Any]], max_tokens: int) -> list[Passage]:
    """Passages for a prompt: best first, as many as fit in ``max_tokens`` (0 or less: no cap).

    A passage too long for the room left is skipped and a shorter, lower-ranked one may still
    fit. Should even the best passage exceed the cap on its own, it is cut to the cap rather than
    leaving the model with nothing.
    """
    ranked = rank_passages(chain, found)
    kept: list[Passage] = []
    used = 0
    for p in ranked:
        tokens = p.get("tokens") if p.get("tokens") is not None else count_tokens(p["text"])
        if max_tokens <= 0 or used + tokens <= max_tokens:
            kept.append(_passage(p))
            used += tokens
    if not kept and ranked:
        best = ranked[0]
        kept.append(Passage(best["chunk_id"], best.get("title"), decode(encode(best["text"])[:max_tokens]), 0.0))
    return kept


def _passage(p: dict[str, Any]) -> Passage:
    return Passage(p["chunk_id"], p.get("title"), p["text"], float(p.get("score") or 0.0))


def _one_line(text: str) -> str:
    return " ".join((text or "").split())


def _stop(reason: StopReason, detail: str) -> dict[str, Any]:
    return {"stop_reason": reason, "stop_detail": detail}


def _context(state: CoragState, ctx: CoragContext) -> list[Passage]:
    return context_passages(state.get("chain") or [], state.get("passages") or [], ctx.max_context_tokens)


# ---------------------------------------------------------------------------------------------
# Nodes


def start(state: CoragState) -> dict[str, Any]:
    update = start_update(state)
    update.update(
        query=question_of(state), chain=[], passages=[], stop_reason="", stop_detail="", context_chunks=[], warnings=[]
    )
    return update


def retrieve_step(
    state: CoragState, runtime: Runtime[CoragContext], config: RunnableConfig, *, bound: Bound
) -> dict[str, Any]:
    """Step s: retrieve ``top_k`` chunks for ``q_s``; only chunks new to the chain join the context."""
    run = run_of(runtime, bound)
    ctx: CoragContext = run.ctx
    chain = list(state.get("chain") or [])
    known = list(state.get("passages") or [])
    warnings = list(state.get("warnings") or [])
    step = len(chain) + 1
    query = state.get("query") or question_of(state)

    vector, warning = hyde_vector(run, query, config)
    if warning:
        warnings.append(f"step {step}: {warning}")
    found = passages(run.index, retrieve(run.index, query, ctx.top_k, ctx.retriever, query_vector=vector))
    seen = {p["chunk_id"] for p in known}
    new = [p for p in found if p.chunk_id not in seen]

    args = {"query": query, "retriever": ctx.retriever, "top_k": ctx.top_k, "hyde": ctx.hyde, "step": step}
    repeated = len(found) - len(new)
    note = f"{repeated} of {len(found)} chunks were already in context" if repeated else ""
    update = retrieval_update(state, "retrieve", args, new, note=note)
    token_counts = [count_tokens(p.text) for p in new]
    link = ChainStep(
        step=step,
        query=query,
        chunk_ids=[p.chunk_id for p in found],
        new_chunk_ids=[p.chunk_id for p in new],
        tokens=sum(token_counts),
        is_sufficient=None,
        missing_info="",
        confidence=None,
        reasoning="",
    )
    added = [
        {"chunk_id": p.chunk_id, "title": p.title, "text": p.text, "score": p.score, "tokens": n, "step": step}
        for p, n in zip(new, token_counts, strict=True)
    ]
    update.update(chain=[*chain, link], passages=[*known, *added], warnings=warnings)

    cap = ctx.max_steps
    if step >= cap:
        update.update(_stop("step_cap", f"reached the step cap: {cap} retrieval(s)"))
    elif not new:
        update.update(_stop("no_new_passages", f"step {step} retrieved no chunk that was not already in context"))
    elif state.get("remaining_steps", 10**9) <= _SUPERSTEPS_PER_ROUND:
        update.update(_stop("recursion_limit", f"stopped after step {step}: recursion_limit leaves no room for more"))
    return update


def check(state: CoragState, runtime: Runtime[CoragContext], *, bound: Bound) -> Call:
    """The intermediate check after a retrieval: is the evidence so far sufficient?"""
    run = run_of(runtime, bound)
    question = question_of(state)

    def on_result(result: tuple[Sufficiency, str | None]) -> dict[str, Any]:
        value, problem = result
        chain = list(state.get("chain") or [])
        link: ChainStep = {
            **chain[-1],
            "is_sufficient": value.is_sufficient,
            "missing_info": _one_line(value.missing_info),
            "confidence": value.confidence,
            "reasoning": _one_line(value.reasoning),
        }
        chain[-1] = link
        trajectory = list(state.get("trajectory") or [])
        if trajectory:
            trajectory[-1] = {**trajectory[-1], "reasoning": verdict(link)}  # type: ignore[typeddict-unknown-key]
        update: dict[str, Any] = {"chain": chain, "trajectory": trajectory}
        if problem:
            note = f"step {link['step']}: the sufficiency check fell back to 'not sufficient' ({problem})"
            update["warnings"] = [*(state.get("warnings") or []), note]
        if value.is_sufficient:
            update.update(
                _stop("sufficient", f"the check after step {link['step']} judged the passages {verdict(link)}")
            )
        return update

    return Call(
        run.backbone.sufficiency(question, _context(state, run.ctx)),
        on_result,
        name="sufficiency_check",
        on_error=lambda message: on_result((FALLBACKS[Sufficiency](question), message)),  # type: ignore[arg-type]
    )


def reformulate(state: CoragState, runtime: Runtime[CoragContext], *, bound: Bound) -> Call:
    """q_{s+1}: a query for what is missing; a query that repeats an earlier one stops the chain."""
    run = run_of(runtime, bound)
    ctx: CoragContext = run.ctx
    question = question_of(state)
    chain = state.get("chain") or []
    missing = chain[-1].get("missing_info", "") if chain else ""

    def on_result(result: tuple[Reformulation, str | None]) -> dict[str, Any]:
        value, problem = result
        # An empty query is no query: searching the question again is what it amounts to.
        query = _one_line(value.query) or _one_line(question)
        update: dict[str, Any] = {"query": query}
        if problem:
            note = f"step {len(chain) + 1}: the reformulation fell back to the question ({problem})"
            update["warnings"] = [*(state.get("warnings") or []), note]
        repeat = repeated_query(query, [link["query"] for link in chain], ctx.loop_similarity)
        if repeat is not None:
            earlier, similarity = repeat
            detail = (
                f"the reformulated query {query!r} repeats the query of step {earlier} "
                f"(similarity {similarity:.2f}, loop_similarity {ctx.loop_similarity})"
            )
            update.update(_stop("loop", detail))
        return update

    return Call(
        run.backbone.reformulation(question, _context(state, ctx), chain, missing),
        on_result,
        name="reformulation",
        on_error=lambda message: on_result((FALLBACKS[Reformulation](question), message)),  # type: ignore[arg-type]
    )


def answer(state: CoragState, runtime: Runtime[CoragContext], *, bound: Bound) -> Call:
    """The answer from the union of the chain's passages, best first."""
    run = run_of(runtime, bound)
    found = _context(state, run.ctx)
    ids = [p.chunk_id for p in found]
    return Call(
        run.backbone.answer(question_of(state), found),
        lambda reply: {"messages": [reply], "context_chunks": ids},
        name="answer_model",
        on_error=lambda message: {"error": message, "context_chunks": ids},
    )


def finish(state: CoragState, runtime: Runtime[CoragContext], *, bound: Bound) -> dict[str, Any]:
    return finish_update(state, run_index(runtime, bound))


# ---------------------------------------------------------------------------------------------
# Edges


def after_start(state: CoragState) -> str:
    return "end" if state.get("error") else "retrieve"


def unless_stopped(then: str) -> Callable[[CoragState], str]:
    """An edge: on to ``then``, or to the answer once the chain has a stop reason."""

    def route(state: CoragState) -> str:
        return "answer" if state.get("stop_reason") else then

    route.__name__ = f"to_{then}_unless_stopped"
    return route


# ---------------------------------------------------------------------------------------------
# The graph


def build_corag_graph(
    index: IndexLike = None, model: BaseChatModel | str | None = None, *, checkpointer: Checkpointer = None
) -> CompiledStateGraph:
    """CoRAG: retrieve, check sufficiency, reformulate, ... (at most ``max_steps`` retrievals), answer.

    ``index`` and ``model`` left out come from the run's :class:`CoragContext` (``index_path``,
    ``model``), so one compiled graph serves every configuration Studio can choose.
    """
    bound = Bound("corag", CoragContext, index, model)
    builder = StateGraph(
        CoragState, context_schema=CoragContext, input_schema=InputState, output_schema=CoragOutputState
    )
    builder.add_node("start", start)
    builder.add_node("retrieve", functools.partial(retrieve_step, bound=bound))
    builder.add_node("check", model_node("check", functools.partial(check, bound=bound)))
    builder.add_node("reformulate", model_node("reformulate", functools.partial(reformulate, bound=bound)))
    builder.add_node("answer", model_node("answer", functools.partial(answer, bound=bound)))
    builder.add_node("finish", functools.partial(finish, bound=bound))
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", after_start, {"retrieve": "retrieve", "end": END})
    builder.add_conditional_edges("retrieve", unless_stopped("check"), ["check", "answer"])
    builder.add_conditional_edges("check", unless_stopped("reformulate"), ["reformulate", "answer"])
    builder.add_conditional_edges("reformulate", unless_stopped("retrieve"), ["retrieve", "answer"])
    builder.add_edge("answer", "finish")
    builder.add_edge("finish", END)
    return traced_graph(builder.compile(checkpointer=checkpointer, name="corag"), bound)
