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
from langgraph.types import Checkpointer, Command
from typing_extensions import TypedDict

from arag_graph.arag.context import AgentContext, AragContext, AragContextDict, AragNaiveContext, AragNaiveContextDict
from arag_graph.arag.model import arag_model
from arag_graph.arag.prompts import agent_system_prompt
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

    def tools(self, run: Run[AgentContext]) -> tuple[str, ...]:
        return TOOL_SETS[self.tool_set or run.ctx.tools]

    def available(self, run: Run[AgentContext], all_tools: dict[str, BaseTool]) -> dict[str, BaseTool]:
        own = {t.name: t for t in self.extra_tools}
        return {**{name: all_tools[name] for name in self.tools(run)}, **own}

    def tool_settings(self, run: Run[AgentContext]) -> ToolSettings:
        """How the run's retrieval tools behave, and so how they are described to the model."""
        return ToolSettings.for_tools(
            self.tools(run), dedupe=run.ctx.dedupe_search_chunks, snippet_window=run.ctx.snippet_window
        )

    def bound_tools(self, run: Run[AgentContext], all_tools: dict[str, BaseTool], source: Any) -> list[BaseTool]:
        """The tools the model is given: the run's variants, so each description matches what the tool returns."""
        settings = self.tool_settings(run)
        return [
            _variant(source, name, settings) if name in all_tools else tool
            for name, tool in self.available(run, all_tools).items()
        ]

    def system_prompt(self, run: Run[AgentContext], names: Sequence[str]) -> str:
        return run.ctx.system_prompt or agent_system_prompt(list(names))


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


_DEFAULT_LIMITS = StepLimits(
    max_steps=AragContext.model_fields["max_steps"].default,
    message_token_budget=AragContext.model_fields["message_token_budget"].default,
)


def step_limits(ctx: AgentContext) -> StepLimits:
    return StepLimits(max_steps=ctx.max_steps, message_token_budget=ctx.message_token_budget)


def start(state: RunState, runtime: Runtime[AragContext], *, bound: AgentBound) -> dict[str, Any]:
    """A new question: the per-question fields reset, and the run's limits recorded for the edges."""
    return {**start_update(state), "limits": step_limits(bound.context_schema.of_run(runtime.context))}


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
    step = arag_model(run.model).synthesis([*state["messages"], *closing], bound.system_prompt(run, names))
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
    return "tools" if any(not c.get("invalid") for c in calls) else "agent"


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
        if self._wants_hyde(prepared, run):
            try:
                passage = arag_model(run.model).hyde(str(prepared.tool_call["args"]["query"])).invoke(_config(request))
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
        if self._wants_hyde(prepared, run):
            try:
                passage = (
                    await arag_model(run.model).hyde(str(prepared.tool_call["args"]["query"])).ainvoke(_config(request))
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
) -> RagGraph[AragContext | AragContextDict, AragOutputState]:
    """Compile the A-RAG agent.

    ``index`` and ``model`` fixed here win over the run's context (``index_path``, ``model``),
    which is what a server entry point leaves open. ``tool_set`` fixes the retrieval tools
    (``"naive"`` for A-RAG (Naive), ``"none"`` for none); left as None it comes from the context's
    ``tools`` field. ``extra_tools`` are bound next to them (your own tools; they count as steps like
    the others, and may return ``(content, artifact)`` with ``tokens`` and ``chunk_ids`` to take part
    in the accounting).
    """
    if tool_set is not None and tool_set not in TOOL_SETS:
        raise AragError(f"unknown tool set {tool_set!r}; choose from {sorted(TOOL_SETS)}")
    bound = AgentBound(name, context_schema, index, model, tool_set, tuple(extra_tools))
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
    builder.add_node("tools", tool_node)
    builder.add_node("synthesize", model_node("synthesize", functools.partial(synthesize, bound=bound, tools=tools)))
    builder.add_node("finish", functools.partial(finish, bound=bound))
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", after_start, ["agent", END])
    builder.add_conditional_edges("agent", after_agent, ["tools", "agent", "synthesize", "finish", END])
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
) -> RagGraph[AragNaiveContext | AragNaiveContextDict, AragOutputState]:
    """A-RAG (Naive): the agent loop with one embedding-search tool that returns whole chunks."""
    graph = build_arag_graph(
        index, model, tool_set="naive", context_schema=AragNaiveContext, name="arag_naive", checkpointer=checkpointer
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
