"""CoRAG (chain-of-retrieval augmented generation; Wang et al., 2025, arXiv 2501.14342) as a graph.

Greedy decoding (``decoding="greedy"``, the default) builds one chain::

    START -> start -> retrieve -> check -> reformulate -> retrieve -> ... -> answer -> finish -> END
                         |           |            |
                         +-----------+------------+--> answer   (when the chain stops)

Each ``retrieve`` retrieves for the step's query and writes the step's sub-answer; ``check`` asks
whether the passages so far suffice; ``reformulate`` writes the next query for what is missing;
the answer comes from the union of the chain's passages (:mod:`arag_graph.corag.chain` has the
chain, its stop reasons and its penalty).

Best-of-N and tree search, the paper's test-time scaling, run chains in the ``chain`` subgraph
(the same nodes), several at once through ``Send``, in waves::

    START -> start -> [chain x k -> collect]+ -> answer -> finish -> END

``best_of_n``
    ``n`` chains in one wave: the first at the run's temperature (so best-of-1 is greedy), the
    others with their reformulations sampled at ``sample_temperature`` (0.7 in the paper). The
    chain with the lowest penalty answers (the earlier chain on a tie).
``tree``
    a beam search over sampled reformulations. The first step searches the question. Then, for
    each of the ``beam`` kept paths not yet finished, ``expand`` candidate next steps (the first
    reformulated as greedy would, the others sampled), each retrieved, sub-answered and checked.
    With ``rollouts`` > 0 and more candidates than the beam holds, each unfinished candidate is
    scored by that many chains rolled out from it (at most 2 more steps, sampled) and their mean
    penalty, else by its own penalty. The ``beam`` best are kept (paths already finished compete
    too; candidates that searched the same queries count once), until ``max_steps`` retrievals or
    every kept path has stopped. The best kept path answers.

The penalty is the paper's where the endpoint returns token log-probabilities: the probability
of the sub-answer "No relevant information found" given a step's documents
(:mod:`arag_graph.corag.likelihood`). Elsewhere each step's sub-answer carries the model's structured
confidence that the step's documents answer its query and a step's penalty is 1 minus it. A
chain's penalty is the mean over its steps (:func:`~arag_graph.corag.chain.chain_penalty`), and
``penalty_scorer`` says which scorer the answering chain used (``logprob``, ``confidence`` or
``mixed``).

The final answer reads the chain's (sub-query, sub-answer) pairs beside the passages, as the
paper's answer is conditioned on the chain.

Counting. Every chain a strategy runs counts: its retrievals are steps (with several chains,
``steps`` is the number of retrievals of all of them, rollouts included) and their new chunks'
tokens are retrieved tokens (a chunk two chains retrieve was handed to the model twice and counts
twice); every model call runs under the run's config, so the evaluation's usage callbacks see them
all. ``trajectory`` lists every retrieval with its chain's ID (``args["chain"]``);
``sampled_chains`` summarises each chain run and marks the one that answered (``selected_chain``),
whose steps become ``chain``.

Offline, the policy has no temperature: sampled chain k reformulates by a fixed variant k of its
rule (:func:`arag_graph.corag.model.offline_reformulation`), so every strategy runs deterministically,
and the run's ``notes`` say so. A model instance without a ``temperature`` field is used as it is
(its chains may repeat), and a reasoning model takes no temperature; the run's ``warnings`` say so.

The chain (one :class:`~arag_graph.corag.chain.ChainStep` per retrieval: query, chunk IDs, new
chunk IDs, the sub-answer and its penalty, the check's verdict and reasoning) is part of the
output, so Studio shows it and :mod:`arag_graph.corag.rejection_sampling` turns sampled chains into
training data.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from statistics import fmean
from typing import Annotated, Any, Literal, cast

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Checkpointer, Overwrite, Send

from arag_graph.corag.chain import (
    ChainRun,
    ChainState,
    ChainStep,
    Role,
    StopReason,
    add_chain_loop,
    build_chain_graph,
    chain_context,
    chain_penalty,
    context_passages,
    merge_runs,
    penalty_scorer,
    query_similarity,
    query_words,
    rank_passages,
    repeated_query,
    step_penalty,
    stop,
)
from arag_graph.corag.context import CoragContext, CoragContextDict
from arag_graph.corag.model import corag_model
from arag_graph.llm.models import supports_setting
from arag_graph.offline.policy import OfflinePolicy
from arag_graph.run.nodes import Call, model_node
from arag_graph.run.pipeline import finish, start_update
from arag_graph.run.runtime import Bound, IndexLike, RagGraph, Run, model_label, run_of, traced_graph
from arag_graph.run.spec import GraphSpec
from arag_graph.run.state import InputState, OutputState, question_of

__all__ = [
    "ChainRun",
    "ChainStep",
    "CoragOutputState",
    "CoragState",
    "StopReason",
    "build_corag_graph",
    "chain_penalty",
    "context_passages",
    "query_similarity",
    "rank_passages",
    "repeated_query",
    "step_penalty",
]

# Supersteps the tree needs after its ``collect`` to run one more wave and still answer: chain,
# collect, answer, finish.
_SUPERSTEPS_PER_WAVE = 4
_ROLLOUT_STEPS = 2
"""A tree rollout continues a candidate by at most this many steps (as the paper's code does)."""
_FINISHED: frozenset[str] = frozenset({"sufficient", "no_new_passages", "loop", "recursion_limit"})

# ---------------------------------------------------------------------------------------------
# State


class CoragOutputState(OutputState, total=False):
    """The common output fields plus the chain and why it stopped (shown in Studio)."""

    chain: list[ChainStep]
    stop_reason: StopReason | Literal[""]
    stop_detail: str
    context_chunks: list[str]
    """Chunks given to the final answer, best first (after the ``max_context_tokens`` cut, if one is set)."""
    warnings: list[str]
    """Structured outputs that fell back to their safe value, a failed HyDE call, and the like."""
    sampled_chains: list[dict[str, Any]]
    """best_of_n and tree: every chain run (without passage text), ``selected`` on the one that answered."""
    selected_chain: str
    """best_of_n and tree: the ID of the chain that answered ("" for greedy)."""
    notes: list[str]
    """What is worth knowing and is no problem, such as how the offline policy varied its chains."""
    penalty_scorer: str
    """How the answering chain's step penalties were scored: ``logprob`` (the paper's, from the
    endpoint's token log-probabilities), ``confidence`` (the stand-in), ``mixed``, or "" (none)."""


class CoragState(ChainState, CoragOutputState, total=False):
    runs: Annotated[list[ChainRun], merge_runs]
    """best_of_n and tree: every chain run so far, with its passages."""
    tasks: list[dict[str, Any]]
    """The chains the next wave sends to the ``chain`` subgraph."""
    wave: int
    beam: list[str]
    """tree: the IDs of the kept paths."""
    depth: int
    """tree: the length of the kept paths."""


# ---------------------------------------------------------------------------------------------
# Decoding strategies: the waves of chain runs and the choice among them


def _task(
    state: CoragState, ctx: CoragContext, *, id: str, role: Role, wave: int, seq: int, sample: int, **rest: Any
) -> dict[str, Any]:
    return {
        "question": question_of(state),
        "id": id,
        "role": role,
        "wave": wave,
        "seq": seq,
        "sample": sample,
        "temperature": None if sample == 0 else ctx.sample_temperature,
        "parent": "",
        "cap": ctx.max_steps,
        "check_last": False,
        "chain": [],
        "passages": [],
        **rest,
    }


def first_wave(state: CoragState, ctx: CoragContext) -> list[dict[str, Any]]:
    """best_of_n: all ``n`` chains; tree: the first step, a search for the question."""
    if ctx.decoding == "best_of_n":
        return [_task(state, ctx, id=str(i + 1), role="chain", wave=1, seq=i, sample=i) for i in range(ctx.n)]
    return [_task(state, ctx, id="1", role="candidate", wave=1, seq=0, sample=0, cap=1, check_last=ctx.max_steps > 1)]


def start(state: CoragState, runtime: Runtime[CoragContext]) -> dict[str, Any]:
    update = start_update(state)
    update.update(
        query=question_of(state),
        chain=[],
        passages=[],
        stop_reason="",
        stop_detail="",
        context_chunks=[],
        warnings=[],
        runs=Overwrite([]),
        tasks=[],
        wave=0,
        beam=[],
        depth=0,
        sampled_chains=[],
        selected_chain="",
        penalty_scorer="",
        notes=[],
    )
    ctx = CoragContext.of_run(runtime.context)
    if ctx.decoding != "greedy" and not update.get("error"):
        update.update(tasks=first_wave(state, ctx), wave=1)
    return update


def send_tasks(state: CoragState) -> list[Send] | str:
    """The edge into a wave: one ``chain`` run per task, all in the same superstep."""
    if state.get("error"):
        return "end"
    tasks = state.get("tasks") or []
    if tasks:
        return [Send("chain", task) for task in tasks]
    return "answer" if state.get("wave") else "retrieve"


def _queries(run: ChainRun) -> tuple[str, ...]:
    """A path's queries as word sets: two candidates that searched the same words are one path."""
    return tuple(" ".join(sorted(query_words(link.get("query", "")))) for link in run.get("chain") or [])


def _order(run: ChainRun) -> tuple[int, int]:
    return run.get("wave", 0), run.get("seq", 0)


def _finished(run: ChainRun, ctx: CoragContext) -> bool:
    return run.get("stop_reason") in _FINISHED or len(run.get("chain") or []) >= ctx.max_steps


def _candidate_tasks(state: CoragState, ctx: CoragContext, paths: Sequence[ChainRun], wave: int) -> list[dict]:
    """tree: ``expand`` candidate next steps of every kept path that is not finished."""
    tasks = []
    for path in paths:
        if _finished(path, ctx):
            continue
        depth = len(path.get("chain") or [])
        for j in range(ctx.expand):
            tasks.append(
                _task(
                    state, ctx, id=f"{path['id']}.{j + 1}", role="candidate", wave=wave, seq=len(tasks), sample=j,
                    parent=path["id"], cap=depth + 1, check_last=depth + 1 < ctx.max_steps,
                    chain=path.get("chain") or [], passages=path.get("passages") or [],
                )
            )  # fmt: skip
    return tasks


def _rollout_tasks(state: CoragState, ctx: CoragContext, candidates: Sequence[ChainRun], wave: int) -> list[dict]:
    """tree: ``rollouts`` sampled chains continuing each unfinished candidate by at most 2 steps."""
    tasks = []
    for candidate in candidates:
        if _finished(candidate, ctx):
            continue
        depth = len(candidate.get("chain") or [])
        for k in range(ctx.rollouts):
            tasks.append(
                _task(
                    state, ctx, id=f"{candidate['id']}.r{k + 1}", role="rollout", wave=wave, seq=len(tasks),
                    sample=k + 1, parent=candidate["id"], cap=min(ctx.max_steps, depth + _ROLLOUT_STEPS),
                    chain=candidate.get("chain") or [], passages=candidate.get("passages") or [],
                )
            )  # fmt: skip
    return tasks


def _accounting(runs: Sequence[ChainRun]) -> dict[str, Any]:
    """Steps, trajectory and retrieved tokens of every chain run, in the order the runs were sent."""
    trajectory = [step for run in sorted(runs, key=_order) for step in run.get("trajectory") or []]
    return {
        "trajectory": trajectory,
        "steps": len(trajectory),
        "retrieved_tokens": sum(step.get("tokens", 0) for step in trajectory),
    }


def _sampling_notes(run: Run, ctx: CoragContext) -> tuple[list[str], list[str]]:
    """How the chains were sampled, as notes (nothing wrong) and warnings (not sampled as meant)."""
    if isinstance(run.model, OfflinePolicy):
        note = (
            f"offline policy: {ctx.decoding}'s chains are not sampled (the policy has no temperature); sampled chain "
            "k reformulates by the policy's fixed variant k (arag_graph.corag.model.offline_reformulation), so the "
            "strategy runs deterministically"
        )
        return [note], []
    if ctx.reasoning_effort or getattr(run.model, "reasoning_effort", None):
        return [], ["a reasoning model takes no temperature: the chains were sampled at the provider's own setting"]
    if not supports_setting(run.model, "temperature"):
        label = model_label(run.model, ctx)
        return [], [f"model {label} has no temperature setting: its chains were sampled as it was built (may repeat)"]
    return [], []


def _final(state: CoragState, run: Run, runs: list[ChainRun], chosen: ChainRun, extra: Sequence[str]) -> dict:
    """The chosen chain becomes the run's chain; every run stays in ``sampled_chains``."""
    notes, warnings = _sampling_notes(run, run.ctx)
    warnings += [*extra, *(f"chain {r['id']}: {w}" for r in sorted(runs, key=_order) for w in r.get("warnings") or [])]
    summaries = [
        {**{k: v for k, v in r.items() if k != "passages"}, "selected": r["id"] == chosen["id"]}
        for r in sorted(runs, key=_order)
    ]
    return {
        "chain": chosen.get("chain") or [],
        "passages": chosen.get("passages") or [],
        "stop_reason": chosen.get("stop_reason") or "step_cap",
        "stop_detail": chosen.get("stop_detail") or "",
        "selected_chain": chosen["id"],
        "penalty_scorer": penalty_scorer(chosen.get("chain") or []),
        "sampled_chains": summaries,
        "warnings": [*(state.get("warnings") or []), *warnings],
        "notes": notes,
        "tasks": [],
    }


def _best(runs: Sequence[ChainRun], key: str = "penalty") -> ChainRun:
    """The run with the lowest ``key`` (penalty or score); the earlier one on a tie."""
    return min(sorted(runs, key=_order), key=lambda r: r.get(key) if r.get(key) is not None else 1.0)


def collect(state: CoragState, runtime: Runtime[CoragContext], *, bound: Bound) -> dict[str, Any]:
    """After a wave: count every run, then pick the best chain (best-of-N) or prune the beam (tree)."""
    run = run_of(runtime, bound)
    ctx: CoragContext = run.ctx
    runs = list(state.get("runs") or [])
    wave = state.get("wave", 1)
    this_wave = [r for r in runs if r.get("wave") == wave]
    if not this_wave:  # no wave ran (a Studio edit as ``chain`` on a greedy thread): nothing to count
        return {}
    update = _accounting(runs)
    out_of_budget = next((r for r in this_wave if r.get("stop_reason") == "budget"), None)
    if out_of_budget is not None:
        # No further wave: the best chain so far is the partial result, the cap the run's error.
        detail = out_of_budget.get("stop_detail") or "run stopped: an operator cap was reached"
        update.update(_final(state, run, runs, _best(runs), []))
        update.update(error=detail, **stop("budget", detail))
        return update
    if ctx.decoding == "best_of_n":
        update.update(_final(state, run, runs, _best(this_wave), []))
        return update
    return {**update, **_tree_step(state, run, runs, this_wave)}


def _tree_step(state: CoragState, run: Run, runs: list[ChainRun], this_wave: list[ChainRun]) -> dict[str, Any]:
    """One wave of the tree: score the candidates (after their rollouts, if any), keep a beam, go on."""
    ctx: CoragContext = run.ctx
    by_id = {r["id"]: r for r in runs}
    wave = state.get("wave", 1)
    rollouts = [r for r in this_wave if r.get("role") == "rollout"]
    if rollouts:
        candidates = [by_id[i] for i in dict.fromkeys(r["parent"] for r in rollouts)]
        candidates += [r for r in runs if r.get("wave") == wave - 1 and r["id"] not in {c["id"] for c in candidates}]
    else:
        candidates = this_wave
        # Rollouts are worth their cost only when there is a choice to make.
        tasks = _rollout_tasks(state, ctx, candidates, wave + 1) if len(candidates) > ctx.beam else []
        if tasks and state.get("remaining_steps", 10**9) > _SUPERSTEPS_PER_WAVE + 1:
            return {"tasks": tasks, "wave": wave + 1}

    scores: list[ChainRun] = []
    for c in candidates:
        mine = [r["penalty"] for r in rollouts if r.get("parent") == c["id"]]
        scores.append({"id": c["id"], "score": round(fmean(mine), 4) if mine else c.get("penalty", 1.0)})
    scored = {s["id"]: {**by_id[s["id"]], **s} for s in scores}

    # The pool: this step's candidates and the kept paths that were finished (not expanded).
    carried = [by_id[i] for i in state.get("beam") or [] if _finished(by_id[i], ctx) and i not in scored]
    pool: list[ChainRun] = []
    seen: set[tuple[str, ...]] = set()
    for c in sorted([*scored.values(), *carried], key=lambda r: (r.get("score", 1.0), _order(r))):
        if _queries(c) not in seen:  # two candidates that searched the same queries are one path
            seen.add(_queries(c))
            pool.append(c)
    kept = pool[: ctx.beam]
    depth = max(len(c.get("chain") or []) for c in kept)
    update: dict[str, Any] = {"runs": scores, "beam": [c["id"] for c in kept], "depth": depth}

    extra: list[str] = []
    if depth < ctx.max_steps and not all(_finished(c, ctx) for c in kept):
        if state.get("remaining_steps", 10**9) > _SUPERSTEPS_PER_WAVE + 1:
            return {**update, "tasks": _candidate_tasks(state, ctx, kept, wave + 1), "wave": wave + 1}
        extra.append(f"the tree stopped at depth {depth}: recursion_limit leaves no room for another step")
    best = _best(kept, key="score")
    final = _final(state, run, merge_runs(runs, scores), best, extra)
    if extra:
        final.update(stop("recursion_limit", extra[0]))
    return {**update, **final}


def answer(state: CoragState, runtime: Runtime[CoragContext], *, bound: Bound) -> Call:
    """The answer from the union of the (chosen) chain's passages, best first."""
    run = run_of(runtime, bound)
    found = chain_context(state, run.ctx)
    ids = [p.chunk_id for p in found]
    chain = state.get("chain") or []
    done: dict[str, Any] = {"context_chunks": ids}
    if not state.get("selected_chain"):  # greedy: the top-level chain is the answering one
        done["penalty_scorer"] = penalty_scorer(chain)
    return Call(
        corag_model(run.model).answer(question_of(state), found, chain),
        lambda reply: {"messages": [reply], **done},
        name="answer_model",
        on_error=lambda message: {"error": message, **done},
    )


# ---------------------------------------------------------------------------------------------
# The graph


def build_corag_graph(
    index: IndexLike = None, model: BaseChatModel | str | None = None, *, checkpointer: Checkpointer = None
) -> RagGraph[CoragContext | CoragContextDict, CoragOutputState]:
    """CoRAG: retrieve, check sufficiency, reformulate, ... (at most ``max_steps`` retrievals), answer.

    ``decoding`` chooses greedy (one chain), best-of-N or tree search (see the module docstring).
    ``index`` and ``model`` left out come from the run's :class:`CoragContext` (``index_path``,
    ``model``), so one compiled graph serves every configuration Studio can choose.
    """
    bound = Bound("corag", CoragContext, index, model)
    builder = StateGraph(
        CoragState, context_schema=CoragContext, input_schema=InputState, output_schema=CoragOutputState
    )
    builder.add_node("start", start)
    add_chain_loop(builder, bound, done="answer")
    builder.add_node("chain", build_chain_graph(bound))
    builder.add_node("collect", functools.partial(collect, bound=bound))
    builder.add_node("answer", model_node("answer", functools.partial(answer, bound=bound)))
    builder.add_node("finish", functools.partial(finish, bound=bound))
    builder.add_edge(START, "start")
    # One map for both edges: a Studio edit may take either from any state (a greedy thread edited as
    # ``collect`` goes on to ``retrieve``), and a value missing from the map is a KeyError in LangGraph.
    waves = {"retrieve": "retrieve", "chain": "chain", "answer": "answer", "end": END}
    builder.add_conditional_edges("start", send_tasks, waves)
    builder.add_edge("chain", "collect")
    builder.add_conditional_edges("collect", send_tasks, waves)
    builder.add_edge("answer", "finish")
    builder.add_edge("finish", END)
    graph = traced_graph(builder.compile(checkpointer=checkpointer, name="corag"), bound)
    return cast("RagGraph[CoragContext | CoragContextDict, CoragOutputState]", graph)


GRAPHS = (
    GraphSpec(
        "corag",
        build_corag_graph,
        CoragContext,
        "CoRAG: chain of retrieval with sufficiency checks and query reformulation",
    ),
)
"""CoRAG's graph, as the registry lists it."""
