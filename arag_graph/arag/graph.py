"""The A-RAG agent: a ReAct loop over the three retrieval tools with a step cap.

    START -> start -> agent -> tools -> agent -> ... -> finish -> END
                        |                 |
                        +--> synthesize <-+   (step cap L or message-token budget reached)

``agent`` asks the model for its next turn with the run's tools bound (one tool call per turn where
the provider allows it). ``tools`` is LangGraph's ``ToolNode``; the custom part is its
``wrap_tool_call`` (:class:`ToolCallGuard`), which enforces the step cap call by call, refuses tools
outside the run's tool set, fills the configured ``top_k`` and the ablation settings, and swaps the
query for a HyDE passage when asked. When the cap or the message-token budget is reached,
``synthesize`` asks for an answer from what was gathered, without tools; ``finish`` reads the answer
and its citations out of the last message.

Human review of tool calls (``approve_tools``): the calls of those tools go through ``approve``
between ``agent`` and ``tools``, which pauses the run with a LangGraph ``interrupt()`` carrying each
call's name and arguments, in the shape of LangChain's ``HumanInTheLoopMiddleware``
(``action_requests``, ``review_configs``). ``Command(resume={"decisions": [...]})`` answers it, one
decision per call: ``{"type": "approve"}``, ``{"type": "edit", "edited_action": {"name": ...,
"args": {...}}}`` (the call runs with those arguments, and the conversation shows them), or
``{"type": "reject", "message": "..."}`` (the call does not run; the model reads the message as
the call's result). See :func:`approve`.

The read-chunk set, the steps, the retrieved tokens and the trajectory are all read off the turn's
tool messages (:func:`arag_graph.run.pipeline.turn_progress`): each tool result records in its artifact
what it returned, so these figures hold across checkpoints and threads without a second copy.

The same builder makes ``arag_naive`` (a single embedding search that returns whole chunks) and
the paper's tool ablations, so the loop exists once.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Checkpointer, Command, interrupt
from typing_extensions import TypedDict

from arag_graph.arag.context import AgentContext, AragContext, AragContextDict, AragNaiveContext, AragNaiveContextDict
from arag_graph.arag.model import arag_model
from arag_graph.arag.prompts import (
    PAPER_SYNTHESIS_INSTRUCTION,
    SYNTHESIS_INSTRUCTION,
    agent_system_prompt,
    paper_system_prompt,
)
from arag_graph.arag.review import (
    applied,
    names_problem,
    read_decisions,
    required_reviews,
    review_request,
    reviewed_calls,
    unreviewed_refusal,
)
from arag_graph.core.deadlines import one_operation
from arag_graph.core.errors import AragError
from arag_graph.core.safety import describe_model_error
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.run.events import emit
from arag_graph.run.nodes import Call, model_node
from arag_graph.run.pipeline import (
    finish_update,
    not_run_message,
    not_run_messages,
    over_token_budget,
    pending_tool_calls,
    start_update,
    turn_progress,
    turn_steps,
)
from arag_graph.run.policy import ServingPolicy
from arag_graph.run.runtime import Bound, IndexLike, RagGraph, Run, run_index, run_of, traced_graph
from arag_graph.run.spec import GraphSpec
from arag_graph.run.state import InputState, OutputState, RunState
from arag_graph.tools.toolkit import (
    ALL_TOOLS,
    ToolSettings,
    create_retrieval_tools,
    retrieval_tool,
    state_messages,
    string_list,
)

log = logging.getLogger(__name__)

# Nodes still to run after the one deciding: synthesize and finish. With fewer supersteps left
# under the caller's recursion limit the run goes straight to synthesis instead of failing.
_SUPERSTEPS_TO_FINISH = 3

TOOL_SETS: dict[str, tuple[str, ...]] = {
    "full": ALL_TOOLS,
    "no_keyword_search": ("semantic_search", "chunk_read"),
    "no_semantic_search": ("keyword_search", "chunk_read"),
    "no_chunk_read": ("keyword_search", "semantic_search"),
    "naive": ("semantic_search",),
    "none": (),
}
_NO_LIMIT = 10**9
_CAP_REACHED = "the step cap is reached; no more tool calls are allowed for this question."
SEARCH_TOOLS = frozenset({"keyword_search", "semantic_search"})
"""The tools that take ``top_k``: the configuration's ``top_k`` fills it when a call leaves it out."""


@dataclass(frozen=True)
class AgentBound(Bound[AgentContext]):
    """The builder's choices for an agent graph: besides index and model, the tools."""

    tool_set: str | None = None
    """Fixed tool set (``naive`` for A-RAG (Naive)); None: the run's ``tools`` setting."""
    extra_tools: tuple[BaseTool, ...] = field(default=())
    approve_tools: tuple[str, ...] = ()
    """The operator's reviews (the builder's ``approve_tools``): a run's context adds to them."""

    def reviews(self, ctx: AgentContext) -> list[str]:
        """The tools whose calls a person reviews in a run with ``ctx`` (see :mod:`arag_graph.arag.review`)."""
        return required_reviews(ctx.approve_tools, self.approve_tools, ctx.is_trusted)

    def possible_tools(self) -> tuple[str, ...]:
        """Every tool a run of this graph can have, whatever its ``tools`` setting."""
        fixed = TOOL_SETS[self.tool_set] if self.tool_set else ALL_TOOLS
        return (*fixed, *(t.name for t in self.extra_tools))

    def tools(self, run: Run[AgentContext]) -> tuple[str, ...]:
        return self.tools_of(run.ctx)

    def tools_of(self, ctx: AgentContext) -> tuple[str, ...]:
        return TOOL_SETS[self.tool_set or ctx.tools]

    def available(self, run: Run[AgentContext], all_tools: dict[str, BaseTool]) -> dict[str, BaseTool]:
        own = {t.name: t for t in self.extra_tools}
        return {**{name: all_tools[name] for name in self.tools(run)}, **own}

    def tool_settings(self, run: Run[AgentContext]) -> ToolSettings:
        """How the run's retrieval tools behave, and so how they are described to the model."""
        return ToolSettings.for_tools(
            self.tools(run),
            dedupe=run.ctx.dedupe_search_chunks,
            snippet_window=run.ctx.snippet_window,
            style=run.ctx.prompt_style,
            **ToolSettings.index_facts(run.index),  # the descriptions say how this index matches
        )

    def bound_tools(self, run: Run[AgentContext], all_tools: dict[str, BaseTool], source: Any) -> list[BaseTool]:
        """The tools the model is given: the run's variants, so each description matches what the tool returns."""
        settings = self.tool_settings(run)
        return [
            _variant(source, name, settings) if name in all_tools else tool
            for name, tool in self.available(run, all_tools).items()
        ]

    def system_prompt(self, run: Run[AgentContext], names: Sequence[str]) -> str:
        if run.ctx.system_prompt:
            return run.ctx.system_prompt
        written = paper_system_prompt if run.ctx.prompt_style == "paper" else agent_system_prompt
        return written(list(names))

    @staticmethod
    def synthesis_instruction(run: Run[AgentContext]) -> str:
        return PAPER_SYNTHESIS_INSTRUCTION if run.ctx.prompt_style == "paper" else SYNTHESIS_INSTRUCTION


class AragOutputState(OutputState, total=False):
    """The common output fields, and the run's warnings."""

    warnings: list[str]
    """Tool calls that went on without a part that failed (a HyDE passage the model did not give)."""


class StepLimits(TypedDict):
    """The run's step cap and message-token budget, as the agent's edges read them."""

    max_steps: int
    message_token_budget: int


class AragState(RunState, AragOutputState, total=False):
    limits: StepLimits
    """Written by ``start`` and ``agent`` from the run's context; the edges read it here, because an
    edge run by ``update_state`` (Studio's edit and fork) gets no runtime and so no context."""
    supersteps_left: int
    """``remaining_steps`` as the ``agent`` node saw it: under ``update_state`` the managed value
    counts against no run's recursion limit, so the edges read the run's own figure."""
    approve: list[str]
    """The tools whose calls are reviewed in this run (the operator's and the context's
    ``approve_tools``), for the edge that sends calls to ``approve`` (read here, as ``limits``)."""
    reviewed: list[str]
    """Ids of the calls ``approve`` let through (approved or edited): the tool node runs a call that
    needs a review only if it is here."""
    rejected: dict[str, str]
    """Tool call id -> the reviewer's message, for the calls ``approve`` rejected: the tool node answers
    them with it instead of running them."""


_DEFAULT_LIMITS = StepLimits(
    max_steps=AragContext.model_fields["max_steps"].default,
    message_token_budget=AragContext.model_fields["message_token_budget"].default,
)


def step_limits(ctx: AgentContext) -> StepLimits:
    return StepLimits(max_steps=ctx.max_steps, message_token_budget=ctx.message_token_budget)


def start(state: RunState, runtime: Runtime[AragContext], *, bound: AgentBound) -> dict[str, Any]:
    """A new question: the per-question fields reset, and the run's limits recorded for the edges.

    A review of tool calls (``approve_tools``) needs a thread to pause on and tools it can name: a run
    without either ends here, in one line, before any model call.
    """
    ctx = bound.context_schema.of_run(runtime.context)
    reviews = bound.reviews(ctx)
    update = {**start_update(state), "limits": step_limits(ctx), "approve": reviews, "reviewed": [], "rejected": {}}
    if reviews and not update.get("error"):
        update["error"] = _approval_problem(ctx, bound, runtime)
    return update


def _approval_problem(ctx: AgentContext, bound: AgentBound, runtime: Runtime[Any]) -> str | None:
    served = () if ctx.is_trusted else ServingPolicy.from_env().approve_tools
    # One server serves several graphs: the operator's list may name a tool that only some of them have.
    every = (*ALL_TOOLS, *(t.name for t in bound.extra_tools))
    problem = names_problem(served, every, "ARAG_APPROVE_TOOLS (the server's environment)")
    own = (*bound.tools_of(ctx), *(t.name for t in bound.extra_tools))
    problem = problem or names_problem(ctx.approve_tools, own, "approve_tools")
    if problem or not reviewed_calls([{"name": name} for name in own], bound.reviews(ctx)):
        return problem  # the operator's reviews of tools this run does not have need no thread
    info = runtime.execution_info
    if info is None or info.thread_id is None:
        return (
            "approve_tools pauses the run for a review, which needs a thread to resume: compile the graph with a "
            "checkpointer (checkpointer=InMemorySaver()) and run it with config={'configurable': {'thread_id': ...}}"
        )
    return None


# ---------------------------------------------------------------------------------------------
# Nodes


def agent(
    state: RunState, runtime: Runtime[AragContext], *, bound: AgentBound, tools: dict[str, BaseTool], source: Any
) -> Call:
    """The model's next turn. Its tool calls with unreadable arguments are answered here (as steps)."""
    run = run_of(runtime, bound)
    available = bound.bound_tools(run, tools, source)
    messages = state["messages"]
    left = state.get("remaining_steps", _NO_LIMIT)

    def on_reply(reply: AIMessage) -> dict[str, Any]:
        refused = [_invalid_call_message(c) for c in pending_tool_calls(reply) if c.get("invalid")]
        progress = turn_progress([*messages, reply, *refused], run.index)
        # This run's limits (a resumed thread may run under another context than its start did).
        return {
            "messages": [reply, *refused],
            "limits": step_limits(run.ctx),
            "approve": bound.reviews(run.ctx),
            "supersteps_left": left,
            **progress,
        }

    step = arag_model(run.model).agent(messages, available, bound.system_prompt(run, [t.name for t in available]))
    return Call(
        step,
        on_reply,
        name="agent_model",
        on_error=lambda error: {"error": error, **turn_progress(messages, run.index)},  # the steps taken still count
    )


def synthesize(
    state: RunState, runtime: Runtime[AragContext], *, bound: AgentBound, tools: dict[str, BaseTool]
) -> Call:
    """Forced synthesis: answer from what was gathered, with no tools (pending calls are closed first)."""
    run = run_of(runtime, bound)
    closing = not_run_messages(state["messages"][-1], "the step budget is used up; answer now.")
    names = list(bound.available(run, tools))
    messages = [*state["messages"], *closing]
    step = arag_model(run.model).synthesis(messages, bound.system_prompt(run, names), bound.synthesis_instruction(run))
    return Call(
        step,
        lambda reply: {"messages": [*closing, reply]},
        name="synthesis_model",
        on_error=lambda error: {"messages": closing, "error": error},
    )


def finish(state: RunState, runtime: Runtime[AragContext], *, bound: AgentBound) -> dict[str, Any]:
    """The answer, its citations and the turn's figures."""
    index = run_of(runtime, bound).index
    update = finish_update(state, index)
    return {**update, **turn_progress([*state.get("messages", []), *update.get("messages", [])], index)}


def _invalid_call_message(call: dict[str, Any]) -> ToolMessage:
    name = call.get("name") or ""
    text = (
        f"Error: the arguments of {name or 'this tool call'} were not valid JSON "
        f"({str(call.get('raw'))[:200]!r}). Call the tool again with a JSON object of arguments."
    )
    artifact = {"error": True, "args": {}, "tokens": 0, "chunk_ids": [], "read": []}
    return ToolMessage(
        text, tool_call_id=call.get("id") or "", name=name or "unknown", status="error", artifact=artifact
    )


# ---------------------------------------------------------------------------------------------
# Human review of tool calls (arag_graph.arag.review)


def approve(state: AragState, *, tools: dict[str, BaseTool]) -> dict[str, Any]:
    """Pause for a person to review the turn's calls of the tools to review, then apply the decisions:
    an edited call is rewritten in the model's message (so the tool node runs it and the conversation
    shows it as run), a rejected one is recorded for the tool node to answer with the reviewer's
    message, and the ids of the others let through. A malformed answer pauses again, with a
    ``problem`` saying what was wrong. The state alone is read (as the edges do), so Studio's edits
    and forks reach this node too."""
    reply = next((m for m in reversed(state.get("messages") or []) if isinstance(m, AIMessage)), None)
    valid = [c for c in pending_tool_calls(reply) if not c.get("invalid")]
    calls = reviewed_calls(valid, state.get("approve") or [])
    if reply is None or not calls:
        return {}
    problem = ""
    while True:
        try:
            decisions = read_decisions(interrupt(review_request(calls, problem)), calls, tools)
            break
        except AragError as exc:
            problem = str(exc)
    edited, passed, rejected = applied(reply.tool_calls, calls, decisions)
    left = state.get("supersteps_left", _NO_LIMIT) - 1
    update: dict[str, Any] = {"reviewed": passed, "rejected": rejected, "supersteps_left": left}
    if edited is not None:
        update["messages"] = [reply.model_copy(update={"tool_calls": edited})]  # same id: replaced in place
    return update


# ---------------------------------------------------------------------------------------------
# Edges


def _out_of_budget(state: AragState, supersteps_since_agent: int = 0) -> bool:
    limits = state.get("limits") or _DEFAULT_LIMITS
    left = state.get("supersteps_left", _NO_LIMIT) - supersteps_since_agent
    return (
        state.get("steps", 0) >= limits["max_steps"]
        or left <= _SUPERSTEPS_TO_FINISH
        or over_token_budget(state.get("messages") or [], limits["message_token_budget"])
    )


# The edges read the state alone (no runtime): LangGraph's update_state runs them without one.


def after_start(state: AragState) -> str:
    return END if state.get("error") else "agent"


def after_agent(state: AragState) -> str:
    if state.get("error"):
        return END
    reply = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
    calls = pending_tool_calls(reply)
    if not calls:
        # A turn with neither a call nor text is no answer: ask for one, without tools, from what was
        # gathered. llama-cpp-python's chatml-function-calling sends exactly this when the model
        # chooses to answer (its grammar then allows only a function name or the end of the turn).
        return "synthesize" if reply is not None and not reply.text.strip() else "finish"
    if _out_of_budget(state):
        return "synthesize"
    # Calls with unreadable arguments were answered by the agent node: the model tries again.
    valid = [c for c in calls if not c.get("invalid")]
    if not valid:
        return "agent"
    return "approve" if reviewed_calls(valid, state.get("approve") or []) else "tools"


def after_tools(state: AragState) -> str:
    steps = turn_steps(state["messages"])  # the tool node writes messages only; the count is derived
    return "synthesize" if _out_of_budget({**state, "steps": steps}, supersteps_since_agent=1) else "agent"


# ---------------------------------------------------------------------------------------------
# The tool node's guard


class ToolCallGuard:
    """``ToolNode``'s ``wrap_tool_call``: what A-RAG adds around each tool call.

    - the step cap, call by call: the calls of one turn beyond the cap are answered "not run";
    - only the run's tool set (an ablation may leave a tool out; a model may name one anyway);
    - the configured ``top_k`` when a search leaves it out;
    - the run's variant of the tool (:class:`~arag_graph.tools.toolkit.ToolSettings`): whole chunks without
      chunk_read, deduplication if asked, a HyDE vector for ``semantic_search``, and the chunks that
      earlier calls of the same turn read (so two reads of one chunk in a turn cost it once);
    - every result carries an artifact saying what it returned, which ``turn_progress`` reads.
    """

    def __init__(self, bound: AgentBound, tools: dict[str, BaseTool], source: Any) -> None:
        self.bound = bound
        self.tools = tools
        self.source = source

    def _prepare(self, request: ToolCallRequest) -> tuple[ToolCallRequest | ToolMessage, Run[AgentContext]]:
        run = run_of(request.runtime, self.bound)
        call: dict[str, Any] = dict(request.tool_call)
        available = self.bound.available(run, self.tools)
        name = call.get("name") or ""
        if name not in available:
            text = f"Error: there is no tool named {name!r}. Available tools: {', '.join(available) or 'none'}."
            artifact: dict[str, Any] = {"error": True, "args": call.get("args") or {}, "tokens": 0}
            artifact.update(chunk_ids=[], read=[])
            refusal = ToolMessage(
                text, tool_call_id=call.get("id") or "", name=name or "unknown", status="error", artifact=artifact
            )
            return refusal, run
        if refusal_reason := unreviewed_refusal(call, self.bound.reviews(run.ctx), request.state):
            return not_run_message(call, refusal_reason), run
        earlier = self._earlier_calls(request)
        if turn_steps(state_messages(request.state)) + len(earlier) >= run.ctx.max_steps:
            return not_run_message(call, _CAP_REACHED), run
        if name not in self.tools:  # the caller's own tools run as they are
            return request, run
        args = dict(call.get("args") or {})
        if name in SEARCH_TOOLS and args.get("top_k") is None:
            # The configured top_k is the searches' default; a model may still ask for more or fewer.
            args["top_k"] = run.ctx.top_k
        also_read = frozenset(
            i
            for c in earlier
            if c.get("name") == "chunk_read"
            for i in string_list((c.get("args") or {}).get("chunk_ids"))
        )
        settings = dataclasses.replace(
            self.bound.tool_settings(run), also_read=also_read if name == "chunk_read" else frozenset()
        )
        edited = cast(ToolCall, {**call, "args": args})
        return request.override(tool_call=edited, tool=_variant(self.source, name, settings)), run

    @staticmethod
    def _earlier_calls(request: ToolCallRequest) -> list[dict[str, Any]]:
        """The valid calls of this turn listed before this one (they run before it, in order)."""
        last = next((m for m in reversed(state_messages(request.state)) if isinstance(m, AIMessage)), None)
        calls = [c for c in pending_tool_calls(last) if not c.get("invalid")]
        ids = [c.get("id") for c in calls]
        here = request.tool_call.get("id")
        return calls[: ids.index(here)] if here in ids else []

    def _hyde(self, request: ToolCallRequest, vector: Any) -> ToolCallRequest:
        tool = request.tool
        assert tool is not None
        settings = (tool.metadata or {}).get("arag_settings") or ToolSettings()
        variant = _variant(self.source, "semantic_search", dataclasses.replace(settings, query_vector=tuple(vector)))
        return request.override(tool=variant)

    @staticmethod
    def _wants_hyde(request: ToolCallRequest, run: Run[AgentContext]) -> bool:
        query = (request.tool_call.get("args") or {}).get("query")
        return run.ctx.hyde and request.tool_call["name"] == "semantic_search" and bool(query)

    def __call__(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], ToolMessage | Command]
    ) -> ToolMessage | Command:
        prepared, run = self._prepare(request)
        if isinstance(prepared, ToolMessage):
            return prepared
        warning = None
        # One operation: when HyDE's passage could not be embedded, the query's embedding that follows
        # gets what is left of the endpoint's bound, not a bound of its own (issue 38).
        with one_operation():
            if self._wants_hyde(prepared, run):
                try:
                    passage = (
                        arag_model(run.model)
                        .hyde(str(prepared.tool_call["args"]["query"]), run.ctx.hyde_style)
                        .invoke(_config(request))
                    )
                    prepared = self._hyde(prepared, run.index.embeddings.embed_query(passage))
                except Exception as exc:  # HyDE refines the search; the query itself still works
                    warning = _hyde_failed(exc)
            _tool_started(prepared)
            return _tool_finished(_recorded(prepared, execute(prepared), warning))

    async def acall(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]]
    ) -> ToolMessage | Command:
        prepared, run = self._prepare(request)
        if isinstance(prepared, ToolMessage):
            return prepared
        warning = None
        with one_operation():  # as in __call__ (the task's context: the awaited search sees it)
            if self._wants_hyde(prepared, run):
                try:
                    passage = (
                        await arag_model(run.model)
                        .hyde(str(prepared.tool_call["args"]["query"]), run.ctx.hyde_style)
                        .ainvoke(_config(request))
                    )
                    prepared = self._hyde(prepared, run.index.embeddings.embed_query(passage))
                except Exception as exc:
                    warning = _hyde_failed(exc)
            _tool_started(prepared)
            return _tool_finished(_recorded(prepared, await execute(prepared), warning))


def _call_line(name: str, args: dict[str, Any]) -> str:
    shown = ", ".join(f"{k}={v!r}" for k, v in args.items() if k not in _HIDDEN_ARGS)
    return f"{name}({shown})"


def _tool_started(request: ToolCallRequest) -> None:
    call = request.tool_call
    args = {k: v for k, v in (call.get("args") or {}).items() if k not in _HIDDEN_ARGS}
    emit("tool_started", _call_line(call["name"], args), tool=call["name"], args=args, id=call.get("id"))


def _tool_finished(result: ToolMessage | Command) -> ToolMessage | Command:
    """The ``tool_finished`` event: what the call returned, in one line (its first line, or the error)."""
    if isinstance(result, ToolMessage):
        artifact = result.artifact if isinstance(result.artifact, dict) else {}
        ids = list(artifact.get("chunk_ids") or [])
        if artifact.get("error"):
            summary = f"{result.name}: " + next((line for line in result.text.splitlines() if line.strip()), "error")
        else:
            summary = f"{result.name}: {len(ids)} chunk(s), {artifact.get('tokens', 0)} tokens"
        emit(
            "tool_finished",
            summary,
            tool=result.name,
            id=result.tool_call_id,
            args=artifact.get("args") or {},
            tokens=artifact.get("tokens", 0),
            chunk_ids=ids,
            error=bool(artifact.get("error")),
        )
    return result


def _hyde_failed(exc: Exception) -> str:
    """Logged, and kept in the tool result's artifact: the run's ``warnings`` count it, so a comparison
    can tell a HyDE run that searched with plain queries from one that did not."""
    warning = f"HyDE failed, searched with the query itself ({describe_model_error(exc)})"
    log.warning(warning)
    return warning


@functools.lru_cache(maxsize=256)
def _variant(source: Any, name: str, settings: ToolSettings) -> BaseTool:
    tool = retrieval_tool(source, name, settings)
    tool.metadata = {**(tool.metadata or {}), "arag_settings": settings}
    return tool


def _config(request: ToolCallRequest) -> Any:
    return {**(getattr(request.runtime, "config", None) or {}), "run_name": "hyde_model"}


_HIDDEN_ARGS = ("runtime",)


def _recorded(
    request: ToolCallRequest, result: ToolMessage | Command, warning: str | None = None
) -> ToolMessage | Command:
    """The result with the call's effective arguments in its artifact (the trajectory shows what ran).

    A result without an artifact (a failing tool answered by ``handle_tool_errors``, or the caller's
    own tool) gets one, so that every executed call counts as a step. ``warning`` (a part of the
    call that failed without failing it) goes into the artifact, where ``turn_progress`` finds it.
    """
    if not isinstance(result, ToolMessage):
        return result
    args = {k: v for k, v in (request.tool_call.get("args") or {}).items() if k not in _HIDDEN_ARGS}
    artifact = result.artifact if isinstance(result.artifact, dict) else {}
    error = bool(artifact.get("error")) or result.status == "error"
    result.artifact = {"tokens": 0, "chunk_ids": [], "read": [], **artifact, "args": args, "error": error}
    if warning:
        result.artifact["warning"] = warning
    return result


def tool_error_message(exc: Exception) -> str:
    """What the model reads when a tool raises: the error in one line and what to try instead."""
    detail = " ".join(str(exc).split())[:300]
    return f"Error: the tool failed ({type(exc).__name__}: {detail}). Try other arguments or another tool."


# ---------------------------------------------------------------------------------------------
# The graph


def build_arag_graph(
    index: IndexLike = None,
    model: BaseChatModel | str | None = None,
    *,
    tool_set: str | None = None,
    extra_tools: Sequence[BaseTool] = (),
    context_schema: type[AragContext] | type[AragNaiveContext] = AragContext,
    name: str = "arag",
    checkpointer: Checkpointer = None,
    approve_tools: Sequence[str] = (),
) -> RagGraph[AragContext | AragContextDict, AragOutputState]:
    """Compile the A-RAG agent.

    ``index`` and ``model`` fixed here win over the run's context (``index_path``, ``model``),
    which is what a server entry point leaves open. ``tool_set`` fixes the retrieval tools
    (``"naive"`` for A-RAG (Naive), ``"none"`` for none); left as None it comes from the context's
    ``tools`` field. ``extra_tools`` are bound next to them (your own tools; they count as steps like
    the others, and may return ``(content, artifact)`` with ``tokens`` and ``chunk_ids`` to take part
    in the accounting). ``approve_tools`` (tool names, or ``["all"]``) are the operator's reviews:
    those calls pause the run for a person in every run (it needs a ``checkpointer``), and a run's
    own ``approve_tools`` can add to them but not remove one (see :mod:`arag_graph.arag.review`).
    """
    if tool_set is not None and tool_set not in TOOL_SETS:
        raise AragError(f"unknown tool set {tool_set!r}; choose from {sorted(TOOL_SETS)}")
    approve_tools = [approve_tools] if isinstance(approve_tools, str) else list(approve_tools)
    bound = AgentBound(name, context_schema, index, model, tool_set, tuple(extra_tools), tuple(approve_tools))
    if problem := names_problem(approve_tools, bound.possible_tools(), "approve_tools"):
        raise AragError(problem)
    source = _index_source(bound)
    tools = {t.name: t for t in create_retrieval_tools(source)}
    guard = ToolCallGuard(bound, tools, source)
    tool_node = ToolNode(
        [*tools.values(), *extra_tools],
        wrap_tool_call=guard,
        awrap_tool_call=guard.acall,
        handle_tool_errors=tool_error_message,
    )

    builder = StateGraph(
        AragState, context_schema=context_schema, input_schema=InputState, output_schema=AragOutputState
    )
    builder.add_node("start", functools.partial(start, bound=bound))
    builder.add_node("agent", model_node("agent", functools.partial(agent, bound=bound, tools=tools, source=source)))
    builder.add_node("approve", functools.partial(approve, tools={**tools, **{t.name: t for t in extra_tools}}))
    builder.add_node("tools", tool_node)
    builder.add_node("synthesize", model_node("synthesize", functools.partial(synthesize, bound=bound, tools=tools)))
    builder.add_node("finish", functools.partial(finish, bound=bound))
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", after_start, ["agent", END])
    builder.add_conditional_edges("agent", after_agent, ["approve", "tools", "agent", "synthesize", "finish", END])
    builder.add_edge("approve", "tools")
    builder.add_conditional_edges("tools", after_tools, ["agent", "synthesize"])
    builder.add_edge("synthesize", "finish")
    builder.add_edge("finish", END)
    graph = traced_graph(builder.compile(checkpointer=checkpointer, name=name), bound)
    return cast("RagGraph[AragContext | AragContextDict, AragOutputState]", graph)


def _index_source(bound: Bound) -> HierarchicalIndex | Callable[[Any], HierarchicalIndex]:
    """The tools' index: the builder's, or the one each run's context names."""
    if isinstance(bound.index, HierarchicalIndex):
        return bound.index
    return functools.partial(run_index, bound=bound)


def build_arag_naive_graph(
    index: IndexLike = None,
    model: BaseChatModel | str | None = None,
    *,
    checkpointer: Checkpointer = None,
    approve_tools: Sequence[str] = (),
) -> RagGraph[AragNaiveContext | AragNaiveContextDict, AragOutputState]:
    """A-RAG (Naive): the agent loop with one embedding-search tool that returns whole chunks."""
    graph = build_arag_graph(
        index,
        model,
        tool_set="naive",
        context_schema=AragNaiveContext,
        name="arag_naive",
        checkpointer=checkpointer,
        approve_tools=approve_tools,
    )
    return cast("RagGraph[AragNaiveContext | AragNaiveContextDict, AragOutputState]", graph)


GRAPHS = (
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
)
"""The agent's graphs, as the registry lists them."""
