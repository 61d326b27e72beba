"""One CoRAG chain: retrieve, sub-answer, check, reformulate, until the chain stops.

Greedy decoding runs this loop in the ``corag`` graph itself; best-of-N and tree search run it in
the ``chain`` subgraph built here, several at once (:mod:`arag_graph.corag.graph`). The nodes are the
same.

Step ``s`` retrieves ``top_k`` chunks for the query ``q_s`` (``q_1`` is the question); only chunks
not seen at an earlier step join the context, and only their tokens are counted. The model then
writes the step's *sub-answer* from the step's documents (what they say about ``q_s``, or "No
relevant information found"), as the paper's chains have one per step; it is recorded in the chain
and the trajectory, and its penalty scores chains for best-of-N and the tree. A structured
sufficiency check then reads the question and the union of passages so far (``reasoning``,
``is_sufficient``, ``missing_info``, ``confidence``); when they are not enough, a reformulation
writes ``q_{s+1}`` aimed at the missing information, from the question, the passages, the chain so
far (each step's query *and sub-answer*: the paper's chain is a sequence of such pairs, and a
sub-answer names the entity the next hop is about) and what is missing. The final answer sees the
pairs too (:mod:`arag_graph.corag.graph`).

Fixed-length chains (``fixed_length``): the paper's chain-length scaling generates exactly L steps.
With the setting on, no sufficiency check is asked and neither a check, a retrieval without new
chunks nor a repeated query ends the chain, so ``max_steps`` is the chain's length (a repeat is
searched again, and costs what it costs in the paper's fixed-length chains).

Why a chain stops is kept in ``stop_reason`` (and said in words in ``stop_detail``):

``sufficient``
    the check judged the passages enough to answer.
``step_cap``
    ``S = max_steps`` retrievals were made (a chain run of the tree: its own cap). The last
    retrieval is not checked: no verdict could change what happens next, so a chain of S steps
    costs S retrievals, S sub-answers and 2(S-1) further model calls, then the answer (S=1: one-shot
    RAG plus its sub-answer), the latency budget the paper names.
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

The penalty. The paper prefers the chain under which the model finds the sub-answer "No relevant
information found" least likely given each step's documents. Where the endpoint returns token
log-probabilities (OpenAI, vLLM and other OpenAI-compatible servers), best-of-N and the tree ask for
them (:meth:`~arag_graph.corag.model.CoragModel.no_information_logprob`) and a step's penalty is
that probability, ``exp(logprob)`` (its log is kept as ``no_info_logprob``; scorer ``logprob``).
Elsewhere (the offline policy, providers without logprobs, a failed scoring request, greedy
decoding, or ``penalty="confidence"``) each sub-answer's structured confidence stands in
(:class:`~arag_graph.corag.schemas.SubAnswer`): the penalty is ``1 - confidence`` (1 for "No
relevant information found"; scorer ``confidence``). A chain's penalty is the mean over its steps
(:func:`chain_penalty`), and the run says which scorer it used (``penalty_scorer``).

The sub-answer, the check and the reformulation are CoRAG's typed requests
(:class:`~arag_graph.corag.model.CoragModel`). With a real model, a bad structured reply is retried once
and then read as "No relevant information found" (sub-answer), "not sufficient" (check) or the
question itself (reformulation, which then stops the chain as a loop); such fallbacks are listed in
``warnings``, never raised. The offline policy answers them with its documented rules
(:mod:`arag_graph.corag.model`), so the whole graph runs without a network. A sampled chain (``sample``
k > 0) asks its reformulations at its own temperature; the offline policy, which has none, varies
its rule by k instead.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Sequence
from statistics import fmean
from typing import Annotated, Any, Literal

from langchain_core.runnables import RunnableLambda, RunnableParallel
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.managed import RemainingSteps
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from arag_graph.corag.context import CoragContext
from arag_graph.corag.model import corag_model
from arag_graph.corag.prompts import verdict
from arag_graph.corag.schemas import NO_RELEVANT_INFORMATION, Reformulation, SubAnswer, Sufficiency
from arag_graph.core.tokens import count_tokens, decode, encode
from arag_graph.llm.models import with_settings
from arag_graph.llm.steps import Step
from arag_graph.retrievers.passages import Passage, retrieval_args, retrieve_passages, rrf_scores
from arag_graph.run.events import emit
from arag_graph.run.nodes import Call, model_node
from arag_graph.run.pipeline import retrieval_update
from arag_graph.run.retrieval import hyde_vector, selection_functions
from arag_graph.run.runtime import Bound, Run, run_of
from arag_graph.run.state import RunState, TrajectoryStep, question_of, union

__all__ = [
    "ChainRun",
    "ChainState",
    "ChainStep",
    "ChainTask",
    "PenaltyScorer",
    "Role",
    "StopReason",
    "add_chain_loop",
    "build_chain_graph",
    "chain_context",
    "chain_penalty",
    "context_passages",
    "logprob_penalty",
    "merge_runs",
    "penalty_scorer",
    "query_similarity",
    "query_words",
    "rank_passages",
    "repeated_query",
    "step_penalty",
    "stop",
]

StopReason = Literal["sufficient", "step_cap", "no_new_passages", "loop", "recursion_limit", "budget"]
"""``budget``: the run reached an operator cap (:mod:`arag_graph.run.budgets`); the run's ``error`` says which."""
Role = Literal["chain", "candidate", "rollout"]
PenaltyScorer = Literal["logprob", "confidence", "mixed", ""]
"""How a chain's penalties were computed: all from logprobs, all from the confidence stand-in,
some of each (an endpoint that sent logprobs for some requests only), or "" (no step scored)."""

# Supersteps a round needs after a retrieval that continues the chain: check, reformulate, the next
# retrieval, then (if that one stops) answer and finish. With fewer left under the caller's
# recursion limit the chain stops and answers instead of failing with GraphRecursionError.
_SUPERSTEPS_PER_ROUND = 5
_WORDS = re.compile(r"\w+")

# ---------------------------------------------------------------------------------------------
# State


class ChainStep(TypedDict, total=False):
    """One link of the chain: a retrieval, its sub-answer and the sufficiency check that followed it."""

    step: int
    query: str
    chunk_ids: list[str]
    """Everything the query retrieved, best first, including chunks already in context."""
    new_chunk_ids: list[str]
    """Chunks that joined the context at this step (the only ones whose tokens are counted)."""
    tokens: int
    sub_answer: str
    """What the step's documents say about its query ("No relevant information found" when nothing)."""
    penalty: float | None
    """The step's penalty: P("No relevant information found") (scorer ``logprob``), else 1 - the
    sub-answer's confidence that the documents answer the query (scorer ``confidence``)."""
    scorer: Literal["logprob", "confidence"]
    no_info_logprob: float | None
    """log P("No relevant information found" | query, documents) when the endpoint gave logprobs."""
    is_sufficient: bool | None
    """None when the step was not checked (the chain stopped right after it)."""
    missing_info: str
    confidence: float | None
    reasoning: str
    """The check's intermediate reasoning: what the passages establish so far."""


class ChainIdentity(TypedDict, total=False):
    """Who a chain run is: what ``Send`` tells it (:class:`ChainTask`) and what it reports (:class:`ChainRun`)."""

    id: str
    """``"3"``: best-of-N's third chain; ``"1.2"``: the second candidate extending path ``"1"``;
    ``"1.2.r1"``: a rollout scoring candidate ``"1.2"``."""
    role: Role
    parent: str
    """The path a candidate extends, or the candidate a rollout scores ("" for the first)."""
    wave: int
    seq: int
    """Position in its wave (waves run in order; within one, chains run concurrently)."""
    sample: int
    """0: reformulated as greedy would (at the run's temperature); k > 0: sampled."""
    temperature: float | None
    """The reformulations' temperature; None: the run's own."""


class ChainRun(ChainIdentity, total=False):
    """One chain run by best-of-N or the tree: a sampled chain, a tree candidate or a rollout."""

    chain: list[ChainStep]
    """The whole chain, the path it extends included."""
    passages: list[dict[str, Any]]
    trajectory: list[TrajectoryStep]
    """The retrievals this run made itself (not those of the path it extends)."""
    steps: int
    retrieved_tokens: int
    stop_reason: StopReason | Literal[""]
    stop_detail: str
    penalty: float
    """Mean step penalty of ``chain`` (see :func:`chain_penalty`)."""
    penalty_scorer: PenaltyScorer
    score: float | None
    """A tree candidate's score: its rollouts' mean penalty, else its own (lower is better)."""
    warnings: list[str]


def merge_runs(left: Sequence[ChainRun] | None, right: Sequence[ChainRun] | None) -> list[ChainRun]:
    """Merge chain runs by ID, keeping first-seen order (parallel chains each return only their own)."""
    merged: dict[str, ChainRun] = {}
    for run in [*(left or []), *(right or [])]:
        merged[run["id"]] = {**merged.get(run["id"], {}), **run}  # type: ignore[typeddict-item]
    return list(merged.values())


class ChainTask(ChainIdentity, total=False):
    """What ``Send`` gives one ``chain`` run: who it is, and the path it extends (``chain``, ``passages``)."""

    question: str
    cap: int
    """Stop at this many retrievals (the path's included)."""
    check_last: bool
    """Check the step at the cap too (a tree candidate, whose verdict the next step needs)."""
    chain: list[ChainStep]
    passages: list[dict[str, Any]]


class ChainOutput(TypedDict, total=False):
    """What a chain run hands back to the parent graph: itself, and the chunks it saw."""

    runs: list[ChainRun]
    read_chunks: Annotated[list[str], union]
    retrieved_chunks: Annotated[list[str], union]


class ChainState(RunState, ChainTask, ChainOutput, total=False):
    """The state the chain's nodes read and write. Greedy's top-level state has the same keys
    (without the chain run's own: ``id``, ``sample``, ``cap``, ...)."""

    query: str
    """The query the next retrieval searches for."""
    passages: list[dict[str, Any]]
    """The union of retrieved passages in first-seen order: chunk_id, title, text, score, tokens, step."""
    stop_reason: StopReason | Literal[""]
    stop_detail: str
    warnings: list[str]
    remaining_steps: RemainingSteps


# ---------------------------------------------------------------------------------------------
# Loop detection, penalties and the context


def query_words(text: str) -> set[str]:
    return set(_WORDS.findall(text.lower()))


def query_similarity(a: str, b: str) -> float:
    """Token Jaccard of two queries, lower-cased, punctuation ignored (1.0 for two empty queries).

    Word sets rather than strings: a reformulation that only reorders or re-punctuates the same
    words searches for the same thing.
    """
    left, right = query_words(a), query_words(b)
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
        repeats = similarity >= threshold or query_words(query) == query_words(previous)
        if repeats and (best is None or similarity > best[1]):
            best = (step, similarity)
    return best


def step_penalty(sub_answer: SubAnswer) -> float:
    """The stand-in for the paper's penalty of one step: 1 - the confidence that the documents answer
    the query, and 1 when the sub-answer is "No relevant information found" (or empty)."""
    text = " ".join(sub_answer.answer.split()).casefold()
    if not text or text.startswith(NO_RELEVANT_INFORMATION.casefold()):
        return 1.0
    return round(1.0 - sub_answer.confidence, 4)


def logprob_penalty(logprob: float) -> float:
    """The paper's penalty of one step: the probability of "No relevant information found"
    (``exp`` of its log-likelihood), on the same 0-1 scale as the confidence stand-in."""
    return round(min(1.0, math.exp(logprob)), 4)


def penalty_scorer(chain: Sequence[ChainStep]) -> PenaltyScorer:
    """Which scorer gave a chain's penalties (see :data:`PenaltyScorer`)."""
    scorers = {link.get("scorer") for link in chain if link.get("penalty") is not None}
    if not scorers:
        return ""
    return "mixed" if len(scorers) > 1 else scorers.pop()  # type: ignore[return-value]


def chain_penalty(chain: Sequence[ChainStep]) -> float:
    """A chain's penalty: the mean of its steps' (a step without one counts as 1); lower is better."""
    values = [link.get("penalty") for link in chain]
    return round(fmean(1.0 if v is None else v for v in values), 4) if values else 1.0


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


def stop(reason: StopReason, detail: str) -> dict[str, Any]:
    return {"stop_reason": reason, "stop_detail": detail}


def chain_context(state: ChainState, ctx: CoragContext) -> list[Passage]:
    return context_passages(state.get("chain") or [], state.get("passages") or [], ctx.max_context_tokens)


def _cap(state: ChainState, ctx: CoragContext) -> int:
    """Retrievals after which this chain stops: the run's ``max_steps``, or a chain run's own cap."""
    return int(state.get("cap") or ctx.max_steps)


def _sampling(run: Run, temperature: float | None) -> Run:
    """The run with its model at ``temperature`` (None: as it is), for a sampled chain's reformulations."""
    if temperature is None:
        return run
    model = with_settings(run.model, temperature=temperature)
    return run if model is run.model else dataclasses.replace(run, model=model)


# ---------------------------------------------------------------------------------------------
# The chain's nodes (greedy's top-level loop and the ``chain`` subgraph run the same ones)


def retrieve_step(state: ChainState, runtime: Runtime[CoragContext], *, bound: Bound) -> Call | dict:
    """Step s: retrieve ``top_k`` chunks for ``q_s`` (only chunks new to the chain join the context),
    then the model's sub-answer from the step's documents."""
    run = run_of(runtime, bound)
    step = len(state.get("chain") or []) + 1
    query = state.get("query") or question_of(state)
    warnings = list(state.get("warnings") or [])
    found, new, update = _retrieve(state, run, step, query, warnings)
    update.update(_stop_after_retrieval(state, run.ctx, step, new))

    def on_result(result: tuple[SubAnswer, str | None], logprob: float | None = None) -> dict[str, Any]:
        value, problem = result
        sub_answer = _one_line(value.answer) or NO_RELEVANT_INFORMATION
        scored: dict[str, Any] = {"penalty": step_penalty(value), "scorer": "confidence"}
        if logprob is not None:
            scored = {"penalty": logprob_penalty(logprob), "scorer": "logprob", "no_info_logprob": round(logprob, 4)}
        update["chain"][-1] = {**update["chain"][-1], "sub_answer": sub_answer, **scored}
        update["trajectory"][-1] = {**update["trajectory"][-1], "sub_answer": sub_answer}
        if problem:
            note = f"step {step}: the sub-answer fell back to 'no relevant information' ({problem})"
            update["warnings"] = [*warnings, note]
        _announce_step(state, update["chain"][-1], len(new))
        return update

    return _sub_answer_call(run, query, found, on_result)


def _retrieve(
    state: ChainState, run: Run[CoragContext], step: int, query: str, warnings: list[str]
) -> tuple[list[Passage], list[Passage], dict[str, Any]]:
    """Step ``step``'s retrieval for ``query``: what it found, what is new to the chain, and the state
    update (the step's trajectory entry and accounting, its unchecked link, the new passages)."""
    ctx = run.ctx
    known = list(state.get("passages") or [])
    vector, warning = hyde_vector(run, query, get_config())
    if warning:
        warnings.append(f"step {step}: {warning}")
    found = retrieve_passages(
        run.index, query, ctx, query_vector=vector, **selection_functions(run, get_config(), warnings)
    )
    seen = {p["chunk_id"] for p in known}
    new = [p for p in found if p.chunk_id not in seen]
    args: dict[str, Any] = {"query": query, **retrieval_args(run.index, ctx), "hyde": ctx.hyde, "step": step}
    if state.get("id"):
        args["chain"] = state["id"]
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
        sub_answer="",
        penalty=None,
        scorer="confidence",
        no_info_logprob=None,
        is_sufficient=None,
        missing_info="",
        confidence=None,
        reasoning="",
    )
    added = [
        {"chunk_id": p.chunk_id, "title": p.title, "text": p.text, "score": p.score, "tokens": n, "step": step}
        for p, n in zip(new, token_counts, strict=True)
    ]
    update.update(chain=[*(state.get("chain") or []), link], passages=[*known, *added], warnings=warnings)
    return found, new, update


def _stop_after_retrieval(state: ChainState, ctx: CoragContext, step: int, new: Sequence[Passage]) -> dict[str, Any]:
    """Why the chain stops right after step ``step``'s retrieval, if it does (before any check)."""
    cap = _cap(state, ctx)
    if step >= cap and not state.get("check_last"):
        return stop("step_cap", f"reached the step cap: {cap} retrieval(s)")
    if not new and not ctx.fixed_length:
        return stop("no_new_passages", f"step {step} retrieved no chunk that was not already in context")
    if state.get("remaining_steps", 10**9) <= _SUPERSTEPS_PER_ROUND:
        return stop("recursion_limit", f"stopped after step {step}: recursion_limit leaves no room for more")
    return {}


def _announce_step(state: ChainState, link: ChainStep, new: int) -> None:
    """The ``chain_step`` event of a step whose sub-answer is in."""
    chain_id = state.get("id") or ""
    step, query, sub_answer = link["step"], link["query"], link["sub_answer"]
    emit(
        "chain_step",
        f"{f'chain {chain_id} ' if chain_id else ''}step {step}: {query} -> {sub_answer} ({new} new chunk(s))",
        chain=chain_id,
        step=step,
        query=query,
        chunk_ids=link["chunk_ids"],
        sub_answer=sub_answer,
    )


def _sub_answer_call(
    run: Run[CoragContext], query: str, found: Sequence[Passage], on_result: Callable[..., dict[str, Any]]
) -> Call | dict[str, Any]:
    """The step's sub-answer (and, when chains are compared by the paper's penalty, its log-probability
    request beside it); no model call when the retrieval found nothing."""
    if not found:  # nothing to read: no model call
        return on_result((SubAnswer.fallback(query), None))
    model = corag_model(run.model)
    sub = model.sub_answer(query, found)
    on_error = lambda message: on_result((SubAnswer.fallback(query), message))  # noqa: E731
    if run.ctx.decoding == "greedy" or run.ctx.penalty == "confidence":  # greedy compares no chains
        return Call(sub, on_result, name="sub_answer", on_error=on_error)
    score = model.no_information_logprob(query, found)
    both = RunnableParallel(
        sub_answer=RunnableLambda(lambda _: sub.input, name="sub_answer_input") | sub.runnable,
        logprob=RunnableLambda(lambda _: score.input, name="score_input") | score.runnable,
    )
    return Call(Step(both), lambda r: on_result(r["sub_answer"], r["logprob"]), name="sub_answer", on_error=on_error)


def check(state: ChainState, runtime: Runtime[CoragContext], *, bound: Bound) -> Call:
    """The intermediate check after a retrieval: is the evidence so far sufficient?

    Not asked in a fixed-length chain (``fixed_length``): the step stays "not checked" and only the
    step cap ends the chain.
    """
    run = run_of(runtime, bound)
    question = question_of(state)
    if run.ctx.fixed_length:
        chain = state.get("chain") or []
        if len(chain) >= _cap(state, run.ctx):  # a tree candidate at its cap
            return stop("step_cap", f"reached the step cap: {_cap(state, run.ctx)} retrieval(s)")
        return {}

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
        cap = _cap(state, run.ctx)
        if value.is_sufficient:
            update.update(
                stop("sufficient", f"the check after step {link['step']} judged the passages {verdict(link)}")
            )
        elif len(chain) >= cap:  # a chain run that checks its last step (a tree candidate)
            update.update(stop("step_cap", f"reached the step cap: {cap} retrieval(s)"))
        return update

    return Call(
        corag_model(run.model).sufficiency(question, chain_context(state, run.ctx)),
        on_result,
        name="sufficiency_check",
        on_error=lambda message: on_result((Sufficiency.fallback(question), message)),
    )


def reformulate(state: ChainState, runtime: Runtime[CoragContext], *, bound: Bound) -> Call:
    """q_{s+1}: a query for what is missing (sampled in a sampled chain); a repeat stops the chain."""
    run = _sampling(run_of(runtime, bound), state.get("temperature"))
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
        if repeat is not None and not ctx.fixed_length:  # a fixed-length chain searches it again
            earlier, similarity = repeat
            detail = (
                f"the reformulated query {query!r} repeats the query of step {earlier} "
                f"(similarity {similarity:.2f}, loop_similarity {ctx.loop_similarity})"
            )
            update.update(stop("loop", detail))
        return update

    return Call(
        corag_model(run.model).reformulation(
            question, chain_context(state, ctx), chain, missing, sample=state.get("sample", 0)
        ),
        on_result,
        name="reformulation",
        on_error=lambda message: on_result((Reformulation.fallback(question), message)),
    )


def unless_stopped(then: str, done: str = "answer") -> Callable[[ChainState], str]:
    """An edge: on to ``then``, or to ``done`` once the chain has a stop reason."""

    def route(state: ChainState) -> str:
        return done if state.get("stop_reason") else then

    route.__name__ = f"to_{then}_unless_stopped"
    return route


def add_chain_loop(builder: StateGraph, bound: Bound, done: str) -> None:
    """The chain's loop (retrieve -> check -> reformulate -> retrieve ...) in ``builder``, ending at ``done``."""
    builder.add_node("retrieve", model_node("retrieve", functools.partial(retrieve_step, bound=bound)))
    builder.add_node("check", model_node("check", functools.partial(check, bound=bound)))
    builder.add_node("reformulate", model_node("reformulate", functools.partial(reformulate, bound=bound)))
    builder.add_conditional_edges("retrieve", unless_stopped("check", done), ["check", done])
    builder.add_conditional_edges("check", unless_stopped("reformulate", done), ["reformulate", done])
    builder.add_conditional_edges("reformulate", unless_stopped("retrieve", done), ["retrieve", done])


# ---------------------------------------------------------------------------------------------
# The ``chain`` subgraph: one chain run of best-of-N or the tree


def enter_chain(state: ChainState) -> dict[str, Any]:
    """A chain run starts from the path it extends (empty: from the question), with its own counters."""
    update: dict[str, Any] = {
        "trajectory": [],
        "steps": 0,
        "retrieved_tokens": 0,
        "warnings": [],
        "stop_reason": "",
        "stop_detail": "",
    }
    if not state.get("chain"):
        update.update(chain=[], passages=[], query=question_of(state))
    return update


def chain_entry(state: ChainState) -> str:
    """Where a chain run starts: a retrieval of the question, the path's unchecked last step, or the next query."""
    chain = state.get("chain") or []
    if not chain:
        return "retrieve"
    return "check" if chain[-1].get("is_sufficient") is None else "reformulate"


def close_chain(state: ChainState) -> dict[str, Any]:
    """Hand the run back to the parent graph, whole (the parent keeps every run it sent)."""
    chain = state.get("chain") or []
    run = ChainRun(
        id=state.get("id", ""),
        role=state.get("role", "chain"),
        parent=state.get("parent", ""),
        wave=state.get("wave", 0),
        seq=state.get("seq", 0),
        sample=state.get("sample", 0),
        temperature=state.get("temperature"),
        chain=chain,
        passages=state.get("passages") or [],
        trajectory=state.get("trajectory") or [],
        steps=state.get("steps", 0),
        retrieved_tokens=state.get("retrieved_tokens", 0),
        stop_reason=state.get("stop_reason") or "",
        stop_detail=state.get("stop_detail") or "",
        penalty=chain_penalty(chain),
        penalty_scorer=penalty_scorer(chain),
        score=None,
        warnings=state.get("warnings") or [],
    )
    return {"runs": [run]}


def build_chain_graph(bound: Bound) -> CompiledStateGraph:
    """One chain run: from a path (or the question) through the chain's loop to its cap or a stop."""
    builder = StateGraph(ChainState, context_schema=CoragContext, input_schema=ChainTask, output_schema=ChainOutput)
    builder.add_node("enter", enter_chain)
    add_chain_loop(builder, bound, done="close")
    builder.add_node("close", close_chain)
    builder.add_edge(START, "enter")
    builder.add_conditional_edges("enter", chain_entry, ["retrieve", "check", "reformulate"])
    builder.add_edge("close", END)
    return builder.compile(name="chain")
