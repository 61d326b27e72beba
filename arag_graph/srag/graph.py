"""SRAG (structured RAG for multi-hop QA, arXiv 2412.04235) as a LangGraph graph.

    START -> start -> decompose -> [solve x N -> collect]* -> aggregate -> answer -> finish -> END
                   +-> route -> naive_rag -> END    (route=True, and the router judged it single-hop)
                            +-> decompose ...       (judged multi-hop)

    [solve x N -> collect]*: one wave per dependency level; a wave sends one ``solve`` branch per
    sub-question whose dependencies are answered, all in the same superstep.

1. ``decompose`` splits the question into sub-questions with explicit dependencies; a dependent
   sub-question refers to an earlier answer as ``[answer N]``.
2. Sub-questions run in *waves*: every sub-question whose dependencies are answered is sent to its
   own ``solve`` branch (LangGraph ``Send``), so independent ones retrieve in parallel, in the same
   superstep, and a dependent one waits for the wave that answers it, then has the answers
   substituted into its text before it retrieves.
3. A ``solve`` branch (a small subgraph: retrieve -> extract -> sub_answer) retrieves ``top_k``
   chunks for its sub-question, extracts (subject, predicate, object) triplets from each chunk
   (concurrently), drops triplets less relevant than the threshold, and, only when a later
   sub-question needs it, writes a short sub-answer from its triplets (from its passages when no
   triplet survived).
4. ``collect`` runs once per wave, folds the branches' retrievals into the common output fields and
   dispatches the next wave; ``aggregate`` builds the deduplicated Subject | Predicate | Object |
   Source table; ``answer`` answers the *original* question from the table and the question only
   (not the passages, not the sub-answers), citing Source chunk IDs.

Parallel branches never write the same plain field: each updates its own sub-question record (a
merge-by-id reducer) and the chunk sets (union reducers); counters (steps, retrieved tokens,
trajectory) are recomputed from the records by ``collect``, which runs alone. One retrieval is one
step, in wave then sub-question order.

The decomposer and the triplet extractor are zero-shot prompts to the run's chat model
(:mod:`arag_graph.srag.prompts`), where the paper fine-tunes models for both; the paper notes that
zero-shot prompting can stand in for them, and that is what is measured here.

Ablations (:class:`arag_graph.srag.context.SragContext`): ``decompose=False`` makes the question its
only sub-question (no model call); ``structured_extraction=False`` skips extraction and answers from
the retrieved passages (no table); ``table_aggregation=False`` gives the answer each passage's own
facts under its chunk header, neither merged nor deduplicated (no table). ``route=True`` asks a
structured router first and hands single-hop questions to the ``naive_rag`` graph, a subgraph here.

Each model request is one of SRAG's typed calls (:class:`~arag_graph.srag.model.SragModel`):
with a real model, a bad structured reply is retried once and then replaced by a safe fallback,
noted in ``warnings``; the offline policy answers with its documented rules (:mod:`arag_graph.srag.model`)
and answers extractively: the sentence of the cited source chunks most similar to the question.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal, cast

from langchain_core.language_models import BaseChatModel
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Checkpointer, Overwrite, Send
from typing_extensions import TypedDict

from arag_graph.baselines.graph import build_naive_rag_graph
from arag_graph.core.citations import chunk_block, parse_final_answer
from arag_graph.retrievers.passages import Passage, retrieval_args, retrieve_passages
from arag_graph.run.events import emit
from arag_graph.run.nodes import Call, gather, model_node
from arag_graph.run.pipeline import finish, retrieval_update, start_update
from arag_graph.run.retrieval import as_dict, selection_functions
from arag_graph.run.runtime import Bound, IndexLike, RagGraph, run_of, traced_graph
from arag_graph.run.spec import GraphSpec
from arag_graph.run.state import InputState, OutputState, RunState, TrajectoryStep, question_of
from arag_graph.srag.context import SragContext, SragContextDict
from arag_graph.srag.model import srag_model
from arag_graph.srag.schemas import Decomposition, Route, SubQuestion, Triplets

_PLACEHOLDER = re.compile(r"[\[{<]\s*answer[\s_#:-]*(\d+)\s*[\]}>]", re.IGNORECASE)
_NO_FACTS = "(no facts found)"
_STEPS_TO_FINISH = 6
"""Remaining supersteps (``remaining_steps`` counts the current one) that one more wave needs to still end
normally: solve, collect, aggregate, answer, finish."""

# ---------------------------------------------------------------------------------------------
# State


class TripletRecord(TypedDict):
    """A kept triplet with the chunk it was extracted from (``source``) and its sub-question."""

    subject: str
    predicate: str
    object: str
    relevance: float
    source: str
    title: str
    sub_question: int


class TableRow(TypedDict):
    """One row of the fact table: a deduplicated triplet and every chunk that states it."""

    subject: str
    predicate: str
    object: str
    sources: list[str]
    sub_questions: list[int]


class SubQuestionRecord(TypedDict, total=False):
    """A sub-question and, once its branch ran, what it found (shown in Studio)."""

    id: int
    question: str
    """As decomposed; may refer to earlier answers as ``[answer N]``."""
    depends_on: list[int]
    wave: int
    """1 for sub-questions without dependencies, else one more than the deepest dependency."""
    status: Literal["pending", "done", "failed", "skipped"]
    """``skipped`` when the run's recursion limit left no room for its wave."""
    resolved: str
    """The sub-question with earlier answers substituted: what was retrieved for."""
    answer: str
    """Short answer, written only when a later sub-question depends on it."""
    answer_chunks: list[str]
    chunk_ids: list[str]
    retrieval: TrajectoryStep
    triplets: list[TripletRecord]
    dropped: int
    """Triplets extracted but dropped as less relevant than the threshold."""
    error: str | None


def merge_sub_questions(
    left: Sequence[SubQuestionRecord] | None, right: Sequence[SubQuestionRecord] | None
) -> list[SubQuestionRecord]:
    """Merge records by id, keeping first-seen order.

    Branches of one wave each return only their own record, so parallel writes never collide; a
    new question replaces the whole list with ``Overwrite``.
    """
    merged: dict[int, SubQuestionRecord] = {}
    for record in [*(left or []), *(right or [])]:
        merged[record["id"]] = cast(SubQuestionRecord, {**merged.get(record["id"], {}), **record})
    return list(merged.values())


class SragOutputState(OutputState, total=False):
    """The common output fields plus SRAG's own: the sub-questions and the fact table."""

    sub_questions: Annotated[list[SubQuestionRecord], merge_sub_questions]
    table: list[TableRow]
    route: str
    """``srag`` or, when the router judged the question single-hop, ``naive_rag``."""
    warnings: Annotated[list[str], operator.add]
    """Structured outputs that fell back to their safe value, dependencies dropped, and the like."""


class SragState(RunState, SragOutputState, total=False):
    evidence: str
    """The facts given to the final answer, as a model sees them (empty without structured extraction)."""
    sources: list[str]
    """The chunks the evidence cites (without structured extraction: the passages answered from)."""
    ask_router: bool
    """Whether the run's context asked for the router (``start`` reads the context, the edge this)."""


class SolveTask(TypedDict):
    """What ``Send`` gives one ``solve`` branch."""

    sub_question: SubQuestionRecord
    needs_answer: bool


# ---------------------------------------------------------------------------------------------
# Sub-questions: validation, waves, substitution


def plan_sub_questions(
    decomposition: Decomposition, question: str, limit: int
) -> tuple[list[SubQuestionRecord], list[str]]:
    """Turn a model's decomposition into runnable records, plus notes on what had to be fixed.

    Keeps the first ``limit`` non-empty sub-questions (the question itself when none is left),
    gives duplicate or non-positive ids fresh ones, treats ``[answer N]`` in a text as a
    dependency on N, drops dependencies on unknown ids and on itself, and breaks cycles. A
    dependency on a sub-question listed later is kept when it forms no cycle (the order is then
    taken from the dependencies); in a cycle, the dependency on the later-listed sub-question is
    the one dropped, since the schema asks for sub-questions in answerable order.
    """
    limit = max(1, limit)
    notes: list[str] = []
    items = [sq for sq in decomposition.sub_questions if _one_line(sq.question)]
    if len(items) > limit:
        notes.append(f"the decomposition gave {len(items)} sub-questions; kept the first {limit}")
        items = items[:limit]
    if not items:
        items = [SubQuestion(id=1, question=question)]

    ids = _fresh_ids(items)
    known = set(ids)
    deps: dict[int, list[int]] = {}
    for sid, sq in zip(ids, items, strict=True):
        wanted = list(dict.fromkeys([*sq.depends_on, *(int(n) for n in _PLACEHOLDER.findall(sq.question))]))
        deps[sid] = [d for d in wanted if d in known and d != sid]
        dropped = [d for d in wanted if d not in deps[sid]]
        if dropped:
            notes.append(f"sub-question {sid}: dropped dependencies on unknown ids or itself {dropped}")
    notes.extend(_break_cycles(ids, deps))

    waves = _waves(ids, deps)
    records = [
        SubQuestionRecord(
            id=sid,
            question=_one_line(sq.question),
            depends_on=deps[sid],
            wave=waves[sid],
            status="pending",
            resolved="",
            answer="",
            answer_chunks=[],
            chunk_ids=[],
            triplets=[],
            dropped=0,
            error=None,
        )
        for sid, sq in zip(ids, items, strict=True)
    ]
    return records, notes


def _fresh_ids(items: Sequence[SubQuestion]) -> list[int]:
    """The sub-questions' ids, a duplicate or non-positive one replaced by a fresh one."""
    ids: list[int] = []
    taken = {sq.id for sq in items}
    for sq in items:
        if sq.id >= 1 and sq.id not in ids:
            ids.append(sq.id)
        else:
            fresh = max(taken | set(ids)) + 1
            taken.add(fresh)
            ids.append(fresh)
    return ids


def _waves(ids: Sequence[int], deps: dict[int, list[int]]) -> dict[int, int]:
    """Each sub-question's wave: 1 without dependencies, else one more than its deepest dependency."""
    waves: dict[int, int] = {}
    while len(waves) < len(ids):  # acyclic by now, so every pass places at least one sub-question
        for sid in ids:
            if sid not in waves and all(d in waves for d in deps[sid]):
                waves[sid] = 1 + max((waves[d] for d in deps[sid]), default=0)
    return waves


def _break_cycles(ids: list[int], deps: dict[int, list[int]]) -> list[str]:
    """Remove, in place, one dependency per cycle: the one pointing to the later-listed sub-question."""
    position = {sid: i for i, sid in enumerate(ids)}
    notes: list[str] = []
    while True:
        placed: set[int] = set()
        progress = True
        while progress:
            progress = False
            for sid in ids:
                if sid not in placed and all(d in placed for d in deps[sid]):
                    placed.add(sid)
                    progress = True
        if len(placed) == len(ids):
            return notes
        # Walk unplaced dependencies from the first stuck sub-question until one repeats: a cycle.
        path: list[int] = []
        node = next(sid for sid in ids if sid not in placed)
        while node not in path:
            path.append(node)
            node = next(d for d in deps[node] if d not in placed)
        cycle = path[path.index(node) :]
        edges = [(a, cycle[(i + 1) % len(cycle)]) for i, a in enumerate(cycle)]
        source, target = max(edges, key=lambda e: position[e[1]] - position[e[0]])
        deps[source].remove(target)
        notes.append(f"sub-question {source}: dropped its dependency on {target}, which formed a cycle")


def resolve_question(record: SubQuestionRecord, answers: dict[int, str]) -> str:
    """The sub-question with earlier answers put in for ``[answer N]``.

    An answered dependency the text does not mention is appended in parentheses, so the retrieval
    query still carries it.
    """
    used: set[int] = set()

    def put(match: re.Match[str]) -> str:
        n = int(match.group(1))
        if n not in answers:
            return match.group(0)
        used.add(n)
        return answers[n] or "unknown"

    text = _PLACEHOLDER.sub(put, record["question"])
    deps = record.get("depends_on", [])
    extra = [f"answer {d}: {answers[d] or 'unknown'}" for d in deps if d in answers and d not in used]
    return f"{text} ({'; '.join(extra)})" if extra else text


def _one_line(text: str) -> str:
    return " ".join((text or "").split())


def _short(answer: str) -> str:
    """An answer as it reads inside another sentence: no trailing full stop."""
    return answer.strip().rstrip(".").strip()


# ---------------------------------------------------------------------------------------------
# Facts: filtering, the table and its rendering


def keep_triplets(
    extracted: Triplets, passage: Passage, sub_question: int, threshold: float
) -> tuple[list[TripletRecord], int]:
    """Triplets of one passage at or above ``threshold``, cleaned, with their source; and how many were dropped."""
    kept: list[TripletRecord] = []
    dropped = 0
    for t in extracted.triplets:
        subject, predicate, obj = _one_line(t.subject), _one_line(t.predicate), _one_line(t.object)
        if t.relevance < threshold or not (subject and predicate and obj):
            dropped += 1
            continue
        kept.append(
            TripletRecord(
                subject=subject,
                predicate=predicate,
                object=obj,
                relevance=t.relevance,
                source=passage.chunk_id,
                title=passage.title or "",
                sub_question=sub_question,
            )
        )
    return kept, dropped


def table_rows(triplets: Iterable[TripletRecord]) -> list[TableRow]:
    """The Subject | Predicate | Object | Source table: one row per distinct fact, in first-seen order.

    Facts are compared case- and space-insensitively; a fact stated by several chunks (or found for
    several sub-questions) keeps one row listing them all.
    """
    rows: dict[tuple[str, str, str], TableRow] = {}
    for t in triplets:
        key = (_key(t["subject"]), _key(t["predicate"]), _key(t["object"]))
        row = rows.setdefault(
            key,
            TableRow(subject=t["subject"], predicate=t["predicate"], object=t["object"], sources=[], sub_questions=[]),
        )
        if t["source"] not in row["sources"]:
            row["sources"].append(t["source"])
        if t["sub_question"] not in row["sub_questions"]:
            row["sub_questions"].append(t["sub_question"])
    return list(rows.values())


def _key(text: str) -> str:
    return _one_line(text).casefold()


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table(rows: Sequence[TableRow], titles: dict[str, str]) -> str:
    """The table in Markdown, then one ``[chunk ID] title=...`` line per source.

    The source lines give a model the titles behind the IDs, and they are how the offline policy
    and the citation parser find the chunks (both look for ``[chunk ID]``).
    """
    if not rows:
        return _NO_FACTS
    lines = ["Facts table:", "| Subject | Predicate | Object | Source |", "| --- | --- | --- | --- |"]
    lines.extend(
        f"| {_cell(r['subject'])} | {_cell(r['predicate'])} | {_cell(r['object'])} | {', '.join(r['sources'])} |"
        for r in rows
    )
    sources = list(dict.fromkeys(s for r in rows for s in r["sources"]))
    lines.extend(["", "Sources:"])
    lines.extend(chunk_block(s, titles.get(s) or None, "").rstrip("\n") for s in sources)
    return "\n".join(lines)


def render_fact_lists(triplets: Sequence[TripletRecord]) -> str:
    """The table-aggregation ablation: each passage's own facts under its chunk header, not merged."""
    if not triplets:
        return _NO_FACTS
    by_source: dict[str, list[TripletRecord]] = {}
    for t in triplets:
        by_source.setdefault(t["source"], []).append(t)
    blocks = [
        chunk_block(source, facts[0]["title"] or None, "\n".join(_fact_line(t) for t in facts))
        for source, facts in by_source.items()
    ]
    return "Facts, listed per source passage:\n\n" + "\n\n".join(blocks)


def _fact_line(t: TripletRecord) -> str:
    return f"- {t['subject']} | {t['predicate']} | {t['object']}"


def _titles(triplets: Iterable[TripletRecord]) -> dict[str, str]:
    return {t["source"]: t["title"] for t in triplets}


def facts_block(cfg: SragContext, triplets: Sequence[TripletRecord]) -> str:
    """How facts are shown to a model under the current configuration (table or per-passage lists)."""
    if cfg.table_aggregation:
        return render_table(table_rows(triplets), _titles(triplets))
    return render_fact_lists(triplets)


def fact_sources(triplets: Sequence[TripletRecord], cfg: SragContext) -> list[str]:
    """The chunks the facts cite, in the order the answer's evidence shows them."""
    if cfg.table_aggregation:
        return list(dict.fromkeys(s for row in table_rows(triplets) for s in row["sources"]))
    return list(dict.fromkeys(t["source"] for t in triplets))


def _chunk_passages(index: Any, ids: Sequence[str]) -> list[Passage]:
    return [Passage(c.id, c.title, c.text, 0.0) for c in index.get_chunks(ids) if c is not None]


# ---------------------------------------------------------------------------------------------
# One sub-question: the ``solve`` subgraph, run once per sub-question of a wave (``Send``)


class SolveState(SolveTask, total=False):
    found: list[dict[str, Any]]
    """The passages retrieved for the sub-question."""
    retrieval: TrajectoryStep
    kept: list[TripletRecord]
    dropped: int
    notes: list[str]


class SolveOutput(TypedDict, total=False):
    """What a branch hands back to the parent graph: its record and the chunks it saw."""

    sub_questions: list[SubQuestionRecord]
    read_chunks: list[str]
    retrieved_chunks: list[str]
    warnings: list[str]


def retrieve_for_sub_question(state: SolveState, runtime: Runtime[SragContext], *, bound: Bound) -> dict[str, Any]:
    run = run_of(runtime, bound)
    record = state["sub_question"]
    query = record.get("resolved") or record["question"]
    warnings: list[str] = []
    found = retrieve_passages(run.index, query, run.ctx, **selection_functions(run, get_config(), warnings))
    args = {"query": query, "sub_question": record["id"], **retrieval_args(run.index, run.ctx)}
    step = retrieval_update(cast(RunState, {}), "retrieve", args, found)["trajectory"][0]
    return {
        "sub_question": {**record, "resolved": query},
        "found": [as_dict(p) for p in found],
        "retrieval": step,
        "kept": [],
        "dropped": 0,
        "notes": [f"sub-question {record['id']}: {w}" for w in warnings],
    }


def extract_triplets(state: SolveState, runtime: Runtime[SragContext], *, bound: Bound) -> Call | dict[str, Any]:
    """Triplets from each retrieved chunk (concurrently), filtered by relevance to the sub-question."""
    run = run_of(runtime, bound)
    ctx: SragContext = run.ctx
    found = [Passage(**p) for p in state.get("found") or []]
    if not ctx.structured_extraction or not found:
        return {}
    record = state["sub_question"]
    query = record["resolved"]

    def on_result(results: list[tuple[Triplets, str | None]]) -> dict[str, Any]:
        kept: list[TripletRecord] = []
        dropped = 0
        notes: list[str] = list(state.get("notes") or [])  # the retrieval's, kept
        for passage, (extracted, problem) in zip(found, results, strict=True):
            if problem:
                notes.append(
                    f"sub-question {record['id']}, chunk {passage.chunk_id}: "
                    f"triplet extraction fell back to no triplets ({problem})"
                )
            ok, n = keep_triplets(extracted, passage, record["id"], ctx.relevance_threshold)
            kept.extend(ok)
            dropped += n
        return {"kept": kept, "dropped": dropped, "notes": notes}

    def on_error(message: str) -> dict[str, Any]:  # a model that cannot give structured output at all
        failed = f"sub-question {record['id']}: triplet extraction failed ({message})"
        return {"notes": [*(state.get("notes") or []), failed]}

    model = srag_model(run.model)
    steps = [model.triplets(query, p) for p in found]
    return Call(gather(steps, "extract_triplets"), on_result, name="extract_triplets", on_error=on_error)


def answer_sub_question(state: SolveState, runtime: Runtime[SragContext], *, bound: Bound) -> Call | dict[str, Any]:
    """The branch's record; with a short sub-answer when a later sub-question needs it."""
    record = state["sub_question"]
    if not state.get("needs_answer"):
        return _branch_output(state, answer=None, error=None, index=None)
    run = run_of(runtime, bound)
    kept = state.get("kept") or []
    query = record["resolved"]
    if kept:
        sources = _chunk_passages(run.index, fact_sources(kept, run.ctx))
        step = srag_model(run.model).answer_from_facts(query, facts_block(run.ctx, kept), sources)
    else:
        step = srag_model(run.model).answer(query, [Passage(**p) for p in state.get("found") or []])
    return Call(
        step,
        lambda reply: _branch_output(state, answer=reply, error=None, index=run.index),
        name="sub_answer_model",
        on_error=lambda message: _branch_output(state, answer=None, error=message, index=run.index),
    )


def _branch_output(state: SolveState, *, answer: Any, error: str | None, index: Any) -> dict[str, Any]:
    text, cited = "", []
    if answer is not None:
        text, cited = parse_final_answer(answer.text, lambda cid: index.get_chunk(cid) is not None)
    step = state.get("retrieval") or {}
    ids = list(step.get("chunk_ids") or [])
    record: SubQuestionRecord = {
        **state["sub_question"],
        "status": "failed" if error else "done",
        "answer": _short(text),
        "answer_chunks": cited,
        "chunk_ids": ids,
        "retrieval": step,  # type: ignore[typeddict-item]
        "triplets": state.get("kept") or [],
        "dropped": state.get("dropped", 0),
        "error": error,
    }
    return {
        "sub_questions": [record],
        "read_chunks": ids,
        "retrieved_chunks": ids,
        "warnings": state.get("notes") or [],
    }


def build_solve_graph(bound: Bound) -> CompiledStateGraph:
    """One sub-question: retrieve, extract triplets, and answer it if a later sub-question needs that."""
    builder = StateGraph(SolveState, context_schema=SragContext, input_schema=SolveTask, output_schema=SolveOutput)
    builder.add_node("retrieve", functools.partial(retrieve_for_sub_question, bound=bound))
    builder.add_node("extract", model_node("extract", functools.partial(extract_triplets, bound=bound)))
    builder.add_node("sub_answer", model_node("sub_answer", functools.partial(answer_sub_question, bound=bound)))
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "extract")
    builder.add_edge("extract", "sub_answer")
    builder.add_edge("sub_answer", END)
    return builder.compile(name="solve")


# ---------------------------------------------------------------------------------------------
# The question: route, decompose, waves of sub-questions, the table, the answer


def start(state: SragState, runtime: Runtime[SragContext]) -> dict[str, Any]:
    """A new question: fields reset, and whether the router runs decided here, from the run's context.

    The decision goes to ``ask_router`` for :func:`after_start` to read: an edge run by
    ``update_state`` (Studio's edit and fork) gets no runtime, so no edge may read the context.
    """
    update = start_update(state)
    update.update(sub_questions=Overwrite([]), table=[], evidence="", sources=[], route="", warnings=Overwrite([]))
    update["ask_router"] = SragContext.of_run(runtime.context).route
    return update


def after_start(state: SragState) -> str:
    if state.get("error"):
        return "end"
    return "route" if state.get("ask_router") else "decompose"


def route(state: SragState, runtime: Runtime[SragContext], *, bound: Bound) -> Call:
    """The optional router: single-hop questions go to naive RAG."""
    run = run_of(runtime, bound)

    def on_result(result: tuple[Route, str | None]) -> dict[str, Any]:
        value, problem = result
        notes = [f"the router fell back to multi-hop ({problem})"] if problem else []
        return {"route": "srag" if value.multi_hop else "naive_rag", "warnings": notes}

    return Call(
        srag_model(run.model).route(question_of(state)),
        on_result,
        name="route_model",
        on_error=lambda message: on_result((Route(multi_hop=True), message)),
    )


def after_route(state: SragState) -> str:
    return "naive_rag" if state.get("route") == "naive_rag" else "decompose"


def decompose(state: SragState, runtime: Runtime[SragContext], *, bound: Bound) -> Call | dict[str, Any]:
    """The sub-questions and their dependencies (the ``decompose=False`` ablation: the question alone)."""
    run = run_of(runtime, bound)
    ctx: SragContext = run.ctx
    question = question_of(state)

    def on_result(result: tuple[Decomposition, str | None]) -> dict[str, Any]:
        value, problem = result
        records, notes = plan_sub_questions(value, question, ctx.max_sub_questions)
        if problem:
            notes.insert(0, f"the decomposition fell back to the question itself ({problem})")
        listed = [{"id": r["id"], "question": r["question"], "depends_on": r.get("depends_on", [])} for r in records]
        shown = "; ".join(f"{r['id']}. {r['question']}" for r in listed)
        emit("sub_questions", f"{len(listed)} sub-question(s): {shown}", sub_questions=listed)
        return {"sub_questions": Overwrite(records), "route": "srag", "warnings": notes}

    alone = Decomposition(sub_questions=[SubQuestion(id=1, question=question)])
    if not ctx.decompose:  # ablation: the question is its only sub-question, no model call
        return on_result((alone, None))
    return Call(
        srag_model(run.model).decomposition(question, ctx.max_sub_questions),
        on_result,
        name="decompose_model",
        on_error=lambda message: on_result((alone, message)),
    )


def dispatch(state: SragState) -> list[Send] | str:
    """The next wave: one ``solve`` branch per sub-question whose dependencies are answered."""
    if state.get("error"):
        return "finish"
    records = state.get("sub_questions") or []
    done = {r["id"]: r for r in records if r.get("status") == "done"}
    ready = [r for r in records if r.get("status") == "pending" and all(d in done for d in r.get("depends_on", []))]
    if not ready:
        return "aggregate"
    answers = {sid: r.get("answer", "") for sid, r in done.items()}
    needed = {d for r in records for d in r.get("depends_on", [])}
    return [
        Send(
            "solve",
            SolveTask(sub_question={**r, "resolved": resolve_question(r, answers)}, needs_answer=r["id"] in needed),
        )
        for r in ready
    ]


def _announce_wave(ran: Sequence[SubQuestionRecord]) -> None:
    """``sub_question_done`` events for the wave just solved, from this node of the parent graph, so
    that a caller streaming ``custom`` without ``subgraphs=True`` sees them too."""
    wave = max((r.get("wave", 1) for r in ran), default=0)
    for record in (r for r in ran if r.get("wave", 1) == wave):
        question = record.get("resolved") or record.get("question", "")
        found = f"{len(record.get('chunk_ids') or [])} chunk(s), {len(record.get('triplets') or [])} fact(s)"
        error = record.get("error")
        answer = record.get("answer") or ""
        outcome = f"failed: {error}" if error else (f"{answer} ({found})" if answer else found)
        emit(
            "sub_question_done",
            f"sub-question {record['id']}: {question} -> {outcome}",
            id=record["id"],
            question=question,
            answer=answer,
            chunk_ids=list(record.get("chunk_ids") or []),
            error=error,
        )


def collect(state: SragState) -> dict[str, Any]:
    """Fold the finished branches into the common output fields, in wave then id order."""
    records = state.get("sub_questions") or []
    ran = sorted((r for r in records if r.get("retrieval")), key=lambda r: (r.get("wave", 1), r["id"]))
    trajectory = [r["retrieval"] for r in ran]
    _announce_wave(ran)
    update: dict[str, Any] = {
        "steps": len(trajectory),
        "retrieved_tokens": sum(step.get("tokens", 0) for step in trajectory),
        "trajectory": trajectory,
    }
    failed = next((r for r in ran if r.get("status") == "failed"), None)
    if failed is not None:
        update["error"] = f"sub-question {failed['id']}: {failed.get('error')}"
        return update
    pending = [r["id"] for r in records if r.get("status") == "pending"]
    if pending and state.get("remaining_steps", _STEPS_TO_FINISH) < _STEPS_TO_FINISH:
        # Another wave would run into the caller's recursion limit: answer from what was found.
        update["sub_questions"] = [{"id": sid, "status": "skipped"} for sid in pending]
        update["warnings"] = [
            f"sub-questions {pending} skipped: another wave would exceed the recursion limit "
            "(raise it in the run config); answering from the facts found so far"
        ]
    return update


def aggregate(state: SragState, runtime: Runtime[SragContext], *, bound: Bound) -> dict[str, Any]:
    """The evidence for the answer: the fact table (or, in the ablations, fact lists or passages)."""
    ctx = SragContext.of_run(runtime.context)
    records = [r for r in state.get("sub_questions") or [] if r.get("status") == "done"]
    if not ctx.structured_extraction:  # ablation: answer from the retrieved passages themselves
        ids = list(dict.fromkeys(cid for r in records for cid in r.get("chunk_ids", [])))
        return {"table": [], "evidence": "", "sources": ids}
    triplets = [t for r in records for t in r.get("triplets", [])]
    rows = table_rows(triplets) if ctx.table_aggregation else []
    return {"table": rows, "evidence": facts_block(ctx, triplets), "sources": fact_sources(triplets, ctx)}


def answer(state: SragState, runtime: Runtime[SragContext], *, bound: Bound) -> Call:
    """The answer to the original question from the table (and the question) only."""
    run = run_of(runtime, bound)
    sources = _chunk_passages(run.index, state.get("sources") or [])
    question = question_of(state)
    if run.ctx.structured_extraction:
        step = srag_model(run.model).answer_from_facts(question, state.get("evidence") or _NO_FACTS, sources)
    else:
        step = srag_model(run.model).answer(question, sources)
    return Call(step, lambda reply: {"messages": [reply]}, name="answer_model")


def build_srag_graph(
    index: IndexLike = None, model: BaseChatModel | str | None = None, *, checkpointer: Checkpointer = None
) -> RagGraph[SragContext | SragContextDict, SragOutputState]:
    """SRAG: decompose, solve sub-questions in dependency waves (parallel within a wave), tabulate, answer."""
    bound = Bound("srag", SragContext, index, model)
    builder = StateGraph(SragState, context_schema=SragContext, input_schema=InputState, output_schema=SragOutputState)
    builder.add_node("start", start)
    builder.add_node("route", model_node("route", functools.partial(route, bound=bound)))
    builder.add_node("naive_rag", build_naive_rag_graph(index, model))
    builder.add_node("decompose", model_node("decompose", functools.partial(decompose, bound=bound)))
    builder.add_node("solve", build_solve_graph(bound))
    builder.add_node("collect", collect)
    builder.add_node("aggregate", functools.partial(aggregate, bound=bound))
    builder.add_node("answer", model_node("answer", functools.partial(answer, bound=bound)))
    builder.add_node("finish", functools.partial(finish, bound=bound))
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", after_start, {"end": END, "route": "route", "decompose": "decompose"})
    builder.add_conditional_edges("route", after_route, ["naive_rag", "decompose"])
    builder.add_edge("naive_rag", END)
    builder.add_conditional_edges("decompose", dispatch, ["solve", "aggregate", "finish"])
    builder.add_edge("solve", "collect")
    builder.add_conditional_edges("collect", dispatch, ["solve", "aggregate", "finish"])
    builder.add_edge("aggregate", "answer")
    builder.add_edge("answer", "finish")
    builder.add_edge("finish", END)
    graph = traced_graph(builder.compile(checkpointer=checkpointer, name="srag"), bound)
    return cast("RagGraph[SragContext | SragContextDict, SragOutputState]", graph)


GRAPHS = (
    GraphSpec(
        "srag",
        build_srag_graph,
        SragContext,
        "SRAG: dependent sub-questions, triplet extraction, a fact table, then the answer",
    ),
)
"""SRAG's graph, as the registry lists it."""
