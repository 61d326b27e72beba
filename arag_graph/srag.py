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
3. A ``solve`` branch retrieves ``top_k`` chunks for its sub-question, extracts (subject, predicate,
   object) triplets from each chunk (concurrently), drops triplets less relevant than the threshold,
   and, only when a later sub-question needs it, writes a short sub-answer from its triplets (from
   its passages when no triplet survived).
4. ``collect`` runs once per wave, folds the branches' retrievals into the common output fields and
   dispatches the next wave; ``aggregate`` builds the deduplicated Subject | Predicate | Object |
   Source table; ``answer`` answers the *original* question from the table and the question only
   (not the passages, not the sub-answers), citing Source chunk IDs.

Parallel branches never write the same plain field: each updates its own sub-question record (a
merge-by-id reducer) and the chunk sets (union reducers); counters (steps, retrieved tokens,
trajectory) are recomputed from the records by ``collect``, which runs alone. One retrieval is one
step, in wave then sub-question order.

Ablations (:class:`arag_graph.configuration.SragConfig`): ``decompose=False`` makes the question its
only sub-question (no model call); ``structured_extraction=False`` skips extraction and answers from
the retrieved passages (no table); ``table_aggregation=False`` gives the answer each passage's own
facts under its chunk header, neither merged nor deduplicated (no table). ``route=True`` asks a
structured router first and hands single-hop questions to ``naive_rag`` as it is.

Structured outputs go through :func:`arag_graph.structured.structured_call` (one retry, then a safe
fallback, noted in ``warnings``). The offline policy answers them with the documented rules of
:mod:`arag_graph.structured` and answers extractively: the sentence of the cited source chunks most
similar to the question.
"""

from __future__ import annotations

import asyncio
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Annotated, Any, Literal, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import get_executor_for_config, run_in_executor
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from langgraph.types import Checkpointer, Overwrite, Send
from pydantic import BaseModel
from typing_extensions import TypedDict

from arag_graph.baselines import build_naive_rag_graph
from arag_graph.citations import parse_final_answer
from arag_graph.configuration import GraphConfig, NaiveRagConfig, SragConfig
from arag_graph.nodes import ModelCall, model_node
from arag_graph.pipeline import finish_update, passages_block, retrieval_update, start_update
from arag_graph.prompts import CONTEXT_ANSWER_PROMPT
from arag_graph.retrievers import Passage, passages, retrieve
from arag_graph.runtime import IndexLike, RunResources, make_resolver, traced_graph
from arag_graph.safety import describe_model_error
from arag_graph.state import InputState, OutputState, RunState, TrajectoryStep, question_of
from arag_graph.structured import (
    Decomposition,
    Route,
    SubQuestion,
    Triplets,
    astructured_call,
    structured_call,
)
from arag_graph.tools import chunk_block

# ---------------------------------------------------------------------------------------------
# Prompts (zero-shot, as the paper allows in place of its fine-tuned decomposer and extractor).
# Every prompt ends with ``Question: ...`` and keeps its labelled fields apart by blank lines: the
# offline policy reads them back (see ``structured._prompt_field`` and ``offline._Turn``).

DECOMPOSE_PROMPT = """\
Break the question below into the sub-questions needed to answer it, listed in the order they can be \
answered. Each sub-question should need a single fact. When a sub-question needs the answer of an \
earlier one, write that answer as [answer N], where N is the id of the earlier sub-question, and list N \
in its depends_on. Sub-questions that do not need each other's answers must not depend on each other: \
they are looked up in parallel. A question that needs only one fact stays a single sub-question. Use at \
most {limit} sub-questions.

For example, "What is the capital of the country where the creator of Python was born?" becomes
1. Who created Python? (depends_on: [])
2. In which country was [answer 1] born? (depends_on: [1])
3. What is the capital of [answer 2]? (depends_on: [2])

Question: {question}\
"""

ROUTE_PROMPT = """\
Decide whether answering the question needs facts from more than one document (multi-hop: for example \
a comparison of two entities, or an entity described only through another one) or a single lookup \
(single-hop). Set multi_hop accordingly.

Question: {question}\
"""

EXTRACT_PROMPT = """\
Extract the facts of the passage that help answer the question, as (subject, predicate, object) \
triplets. Use the passage's own names for subjects and objects (no pronouns), short predicates, and only \
facts the passage states. Rate each triplet's relevance to the question from 0 (unrelated) to 1 (answers \
it). Return no triplets when the passage says nothing relevant.

Title: {title}

Passage: {passage}

Question: {question}\
"""

FACTS_ANSWER_PROMPT = """\
Answer the question using only the facts below and do not guess beyond them. Each fact names the \
source passage it comes from by its chunk ID. End with a final line of the form
Answer: <the shortest complete answer, such as a name, a date, a number, yes or no> [<chunk IDs>]
listing the Source chunk IDs of the facts the answer rests on, for example: Answer: Marie Curie [12, 40]
If the facts do not contain the answer, say so on the Answer line instead of guessing.

{facts}

Question: {question}\
"""

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
    """The facts (or passages) given to the final answer, exactly as the model saw them."""


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

    ids: list[int] = []
    taken = {sq.id for sq in items}
    for sq in items:
        if sq.id >= 1 and sq.id not in ids:
            ids.append(sq.id)
        else:
            fresh = max(taken | set(ids)) + 1
            taken.add(fresh)
            ids.append(fresh)

    known = set(ids)
    deps: dict[int, list[int]] = {}
    for sid, sq in zip(ids, items, strict=True):
        wanted = list(dict.fromkeys([*sq.depends_on, *(int(n) for n in _PLACEHOLDER.findall(sq.question))]))
        deps[sid] = [d for d in wanted if d in known and d != sid]
        dropped = [d for d in wanted if d not in deps[sid]]
        if dropped:
            notes.append(f"sub-question {sid}: dropped dependencies on unknown ids or itself {dropped}")
    notes.extend(_break_cycles(ids, deps))

    waves: dict[int, int] = {}
    while len(waves) < len(ids):  # acyclic now, so every pass places at least one sub-question
        for sid in ids:
            if sid not in waves and all(d in waves for d in deps[sid]):
                waves[sid] = 1 + max((waves[d] for d in deps[sid]), default=0)
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


def facts_block(cfg: SragConfig, triplets: Sequence[TripletRecord]) -> str:
    """How facts are shown to a model under the current configuration (table or per-passage lists)."""
    if cfg.table_aggregation:
        return render_table(table_rows(triplets), _titles(triplets))
    return render_fact_lists(triplets)


# ---------------------------------------------------------------------------------------------
# Messages


def _decompose_messages(question: str, limit: int) -> list[BaseMessage]:
    return [HumanMessage(DECOMPOSE_PROMPT.format(question=_one_line(question), limit=limit))]


def _route_messages(question: str) -> list[BaseMessage]:
    return [HumanMessage(ROUTE_PROMPT.format(question=_one_line(question)))]


def _extract_messages(sub_question: str, passage: Passage) -> list[BaseMessage]:
    # Blank lines inside the passage would end its field for the offline policy's reader.
    text = re.sub(r"\n\s*\n", "\n", passage.text.strip())
    title = _one_line(passage.title or "") or "(untitled)"
    return [HumanMessage(EXTRACT_PROMPT.format(title=title, passage=text, question=sub_question))]


def answer_prompt(cfg: SragConfig, question: str, evidence: str) -> str:
    """The answer request: facts (the paper's setting) or, without extraction, the passages."""
    template = FACTS_ANSWER_PROMPT if cfg.structured_extraction else CONTEXT_ANSWER_PROMPT
    key = "facts" if cfg.structured_extraction else "context"
    return template.format(**{key: evidence, "question": _one_line(question)})


# ---------------------------------------------------------------------------------------------
# One sub-question's branch, written once for the sync and the async runner


@dataclass
class _Branch:
    """The ``solve`` work for one sub-question, split at its model calls.

    The sync and async node bodies only differ in how they wait for the model, so they share
    everything else through this object.
    """

    res: RunResources
    record: SubQuestionRecord
    needs_answer: bool
    config: RunnableConfig
    found: list[Passage]
    step: TrajectoryStep

    @classmethod
    def start(cls, res: RunResources, task: SolveTask, config: RunnableConfig) -> _Branch:
        record = task["sub_question"]
        query = record.get("resolved") or record["question"]
        found = passages(res.index, retrieve(res.index, query, res.cfg.top_k))
        args = {"query": query, "sub_question": record["id"], "top_k": res.cfg.top_k}
        step = retrieval_update(cast(RunState, {}), "retrieve", args, found)["trajectory"][0]
        return cls(res, {**record, "resolved": query}, task["needs_answer"], config, found, step)

    @property
    def query(self) -> str:
        return self.record["resolved"]

    @property
    def extracts(self) -> bool:
        return bool(self.res.cfg.structured_extraction and self.found)

    def extraction_call(self, passage: Passage) -> tuple[list[BaseMessage], RunnableConfig]:
        return _extract_messages(self.query, passage), self.res.trace(self.config, "extract_triplets")

    def filtered(self, results: Sequence[tuple[Triplets, str | None]]) -> tuple[list[TripletRecord], int, list[str]]:
        kept: list[TripletRecord] = []
        dropped = 0
        notes: list[str] = []
        for passage, (extracted, problem) in zip(self.found, results, strict=True):
            if problem:
                notes.append(
                    f"sub-question {self.record['id']}, chunk {passage.chunk_id}: "
                    f"triplet extraction fell back to no triplets ({problem})"
                )
            ok, n = keep_triplets(extracted, passage, self.record["id"], self.res.cfg.relevance_threshold)
            kept.extend(ok)
            dropped += n
        return kept, dropped, notes

    def answer_messages(self, kept: Sequence[TripletRecord]) -> list[BaseMessage]:
        """The sub-answer request: from the branch's facts, or its passages when it has none."""
        if kept:
            prompt = FACTS_ANSWER_PROMPT.format(facts=facts_block(self.res.cfg, kept), question=self.query)
        else:
            prompt = CONTEXT_ANSWER_PROMPT.format(context=passages_block(self.found), question=self.query)
        return [HumanMessage(prompt)]

    def update(
        self, kept: list[TripletRecord], dropped: int, notes: list[str], reply: Any, error: str | None
    ) -> dict[str, Any]:
        answer, cited = "", []
        if reply is not None:
            text = reply.text if isinstance(reply, BaseMessage) else str(reply)
            answer, cited = parse_final_answer(text, lambda cid: self.res.index.get_chunk(cid) is not None)
        ids = self.step["chunk_ids"]
        record: SubQuestionRecord = {
            **self.record,
            "status": "failed" if error else "done",
            "answer": _short(answer),
            "answer_chunks": cited,
            "chunk_ids": ids,
            "retrieval": self.step,
            "triplets": kept,
            "dropped": dropped,
            "error": error,
        }
        return {"sub_questions": [record], "read_chunks": ids, "retrieved_chunks": ids, "warnings": notes}


def _solve_node(resolve: Callable[[], RunResources]) -> RunnableLambda:
    def extract(branch: _Branch, passage: Passage) -> tuple[Triplets, str | None]:
        messages, trace = branch.extraction_call(passage)
        return structured_call(branch.res.model, Triplets, messages, question=branch.query, config=trace)

    async def aextract(branch: _Branch, passage: Passage) -> tuple[Triplets, str | None]:
        messages, trace = branch.extraction_call(passage)
        return await astructured_call(branch.res.model, Triplets, messages, question=branch.query, config=trace)

    def solve(task: SolveTask, config: RunnableConfig) -> dict[str, Any]:
        branch = _Branch.start(resolve(), task, config)
        results: list[tuple[Triplets, str | None]] = []
        if branch.extracts:
            # One extraction per chunk, concurrently (bounded by the run's max_concurrency).
            with get_executor_for_config(config) as executor:
                results = list(executor.map(lambda p: extract(branch, p), branch.found))
        kept, dropped, notes = branch.filtered(results) if results else ([], 0, [])
        reply, error = None, None
        if branch.needs_answer:
            try:
                reply = branch.res.model.invoke(
                    branch.answer_messages(kept), branch.res.trace(config, "sub_answer_model")
                )
            except Exception as exc:
                error = describe_model_error(exc)
        return branch.update(kept, dropped, notes, reply, error)

    async def asolve(task: SolveTask, config: RunnableConfig) -> dict[str, Any]:
        # Resolving may load the index and retrieval embeds and queries Chroma: off the event loop.
        branch = await run_in_executor(config, lambda: _Branch.start(resolve(), task, config))
        results: list[tuple[Triplets, str | None]] = []
        if branch.extracts:
            results = list(await asyncio.gather(*(aextract(branch, p) for p in branch.found)))
        kept, dropped, notes = branch.filtered(results) if results else ([], 0, [])
        reply, error = None, None
        if branch.needs_answer:
            try:
                reply = await branch.res.model.ainvoke(
                    branch.answer_messages(kept), branch.res.trace(config, "sub_answer_model")
                )
            except Exception as exc:
                error = describe_model_error(exc)
        return branch.update(kept, dropped, notes, reply, error)

    return RunnableLambda(solve, afunc=asolve, name="solve")


# ---------------------------------------------------------------------------------------------
# Structured steps (route, decompose) with sync and async bodies


@dataclass
class _StructuredCall:
    model: BaseChatModel
    schema: type[BaseModel]
    messages: list[BaseMessage]
    question: str
    config: RunnableConfig
    on_result: Callable[[Any, str | None], dict[str, Any]]


def _structured_node(
    name: str, prepare: Callable[[Any, RunnableConfig], _StructuredCall | dict[str, Any]]
) -> RunnableLambda:
    """Like :func:`arag_graph.nodes.model_node`, for a structured call (which never raises)."""

    def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
        call = prepare(state, config)
        if not isinstance(call, _StructuredCall):
            return call
        value, problem = structured_call(
            call.model, call.schema, call.messages, question=call.question, config=call.config
        )
        return call.on_result(value, problem)

    async def arun(state: Any, config: RunnableConfig) -> dict[str, Any]:
        call = await run_in_executor(config, prepare, state, config)
        if not isinstance(call, _StructuredCall):
            return call
        value, problem = await astructured_call(
            call.model, call.schema, call.messages, question=call.question, config=call.config
        )
        return call.on_result(value, problem)

    return RunnableLambda(run, afunc=arun, name=name)


def _offloaded(name: str, func: Callable[[Any, RunnableConfig], dict[str, Any]]) -> RunnableLambda:
    """A node whose work may block (index loading, retrieval): run in a thread under ``ainvoke``."""

    async def afunc(state: Any, config: RunnableConfig) -> dict[str, Any]:
        return await run_in_executor(config, func, state, config)

    return RunnableLambda(func, afunc=afunc, name=name)


# ---------------------------------------------------------------------------------------------
# The graph


def _config() -> SragConfig:
    return SragConfig.from_context(get_runtime().context)


def _naive_context(cfg: SragConfig) -> NaiveRagConfig:
    """naive_rag's configuration carrying this run's shared settings (model, index, top_k, ...)."""
    return NaiveRagConfig(**{f.name: getattr(cfg, f.name) for f in fields(GraphConfig)})


_NAIVE_OUTPUT = (
    "messages",
    "answer",
    "citations",
    "read_chunks",
    "retrieved_chunks",
    "retrieved_tokens",
    "steps",
    "trajectory",
    "error",
)


def _dispatch(state: SragState) -> list[Send] | str:
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


def build_srag_graph(
    index: IndexLike = None, model: BaseChatModel | str | None = None, *, checkpointer: Checkpointer = None
) -> CompiledStateGraph:
    """SRAG: decompose, solve sub-questions in dependency waves (parallel within a wave), tabulate, answer."""
    resolve = make_resolver("srag", index, model, SragConfig)
    naive_rag = build_naive_rag_graph(index, model)

    def start(state: SragState) -> dict[str, Any]:
        update = start_update(state)
        update.update(sub_questions=Overwrite([]), table=[], evidence="", route="", warnings=Overwrite([]))
        return update

    def after_start(state: SragState) -> str:
        if state.get("error"):
            return "end"
        return "route" if _config().route else "decompose"

    def route(state: SragState, config: RunnableConfig) -> _StructuredCall:
        res = resolve()
        question = question_of(state)

        def on_result(value: Route, problem: str | None) -> dict[str, Any]:
            notes = [f"the router fell back to multi-hop ({problem})"] if problem else []
            return {"route": "srag" if value.multi_hop else "naive_rag", "warnings": notes}

        return _StructuredCall(
            res.model, Route, _route_messages(question), question, res.trace(config, "route_model"), on_result
        )

    def after_route(state: SragState) -> str:
        return "naive_rag" if state.get("route") == "naive_rag" else "decompose"

    def run_naive(state: SragState, config: RunnableConfig) -> dict[str, Any]:
        out = naive_rag.invoke({"messages": state.get("messages") or []}, config, context=_naive_context(_config()))
        return {k: out[k] for k in _NAIVE_OUTPUT if k in out}

    async def arun_naive(state: SragState, config: RunnableConfig) -> dict[str, Any]:
        cfg = await run_in_executor(config, _config)
        out = await naive_rag.ainvoke({"messages": state.get("messages") or []}, config, context=_naive_context(cfg))
        return {k: out[k] for k in _NAIVE_OUTPUT if k in out}

    def decompose(state: SragState, config: RunnableConfig) -> _StructuredCall | dict[str, Any]:
        res = resolve()
        cfg: SragConfig = res.cfg
        question = question_of(state)

        def on_result(value: Decomposition, problem: str | None) -> dict[str, Any]:
            records, notes = plan_sub_questions(value, question, cfg.max_sub_questions)
            if problem:
                notes.insert(0, f"the decomposition fell back to the question itself ({problem})")
            return {"sub_questions": Overwrite(records), "route": "srag", "warnings": notes}

        if not cfg.decompose:  # ablation: the question is its only sub-question, no model call
            return on_result(Decomposition(sub_questions=[SubQuestion(id=1, question=question)]), None)
        messages = _decompose_messages(question, max(1, cfg.max_sub_questions))
        return _StructuredCall(
            res.model, Decomposition, messages, question, res.trace(config, "decompose_model"), on_result
        )

    def collect(state: SragState) -> dict[str, Any]:
        """Fold the finished branches into the common output fields, in wave then id order."""
        records = state.get("sub_questions") or []
        ran = sorted((r for r in records if r.get("retrieval")), key=lambda r: (r.get("wave", 1), r["id"]))
        trajectory = [r["retrieval"] for r in ran]
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

    def aggregate(state: SragState, config: RunnableConfig) -> dict[str, Any]:
        res = resolve()
        cfg: SragConfig = res.cfg
        records = [r for r in state.get("sub_questions") or [] if r.get("status") == "done"]
        if not cfg.structured_extraction:  # ablation: answer from the retrieved passages themselves
            ids = list(dict.fromkeys(cid for r in records for cid in r.get("chunk_ids", [])))
            chunks = [c for c in res.index.get_chunks(ids) if c is not None]
            found = [Passage(c.id, c.title, c.text, 0.0) for c in chunks]
            return {"table": [], "evidence": passages_block(found)}
        triplets = [t for r in records for t in r.get("triplets", [])]
        if cfg.table_aggregation:
            rows = table_rows(triplets)
            return {"table": rows, "evidence": render_table(rows, _titles(triplets))}
        return {"table": [], "evidence": render_fact_lists(triplets)}

    def answer(state: SragState, config: RunnableConfig) -> ModelCall:
        res = resolve()
        prompt = answer_prompt(res.cfg, question_of(state), state.get("evidence") or _NO_FACTS)
        return ModelCall(
            res.model, [HumanMessage(prompt)], lambda r: {"messages": [r]}, res.trace(config, "answer_model")
        )

    def finish(state: SragState, config: RunnableConfig) -> dict[str, Any]:
        return finish_update(state, resolve().index)

    builder = StateGraph(SragState, context_schema=SragConfig, input_schema=InputState, output_schema=SragOutputState)
    builder.add_node("start", start)
    builder.add_node("route", _structured_node("route", route))
    builder.add_node("naive_rag", RunnableLambda(run_naive, afunc=arun_naive, name="naive_rag"))
    builder.add_node("decompose", _structured_node("decompose", decompose))
    builder.add_node("solve", _solve_node(resolve))
    builder.add_node("collect", collect)
    builder.add_node("aggregate", _offloaded("aggregate", aggregate))
    builder.add_node("answer", model_node("answer", answer))
    builder.add_node("finish", _offloaded("finish", finish))
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", after_start, {"end": END, "route": "route", "decompose": "decompose"})
    builder.add_conditional_edges("route", after_route, ["naive_rag", "decompose"])
    builder.add_edge("naive_rag", END)
    builder.add_conditional_edges("decompose", _dispatch, ["solve", "aggregate", "finish"])
    builder.add_edge("solve", "collect")
    builder.add_conditional_edges("collect", _dispatch, ["solve", "aggregate", "finish"])
    builder.add_edge("aggregate", "answer")
    builder.add_edge("answer", "finish")
    builder.add_edge("finish", END)
    return traced_graph(builder.compile(checkpointer=checkpointer, name="srag"), "srag", index, SragConfig)
