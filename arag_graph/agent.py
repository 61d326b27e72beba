"""The A-RAG agent: a ReAct loop over the three retrieval tools with a step cap.

    START -> start -> agent -> tools -> agent -> ... -> finish -> END
                        |                 |
                        +--> synthesize <-+   (step cap L or message-token budget reached)

``agent`` calls the chat model with the tools bound (one tool call per turn where the provider
allows it). ``tools`` runs the calls in order, counting each as one step and never more than the
cap allows; the chunks it reads join the read-chunk set in graph state, so "already read" holds
across turns, checkpoints and threads. When the cap or the token budget is reached, ``synthesize``
asks the model, with no tools, to answer from what it has gathered; ``finish`` reads the answer
and its citations out of the last message.

The same builder makes ``arag_naive`` (a single embedding search that returns whole chunks) and
the paper's tool ablations, so the loop exists once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from langgraph.types import Checkpointer

from arag_graph.configuration import AragConfig
from arag_graph.errors import AragError
from arag_graph.hyde import hyde_vector
from arag_graph.index import HierarchicalIndex
from arag_graph.models import bind_one_tool_per_turn
from arag_graph.nodes import ModelCall, model_node
from arag_graph.pipeline import (
    finish_update,
    not_run_messages,
    over_token_budget,
    pending_tool_calls,
    start_update,
)
from arag_graph.prompts import SYNTHESIS_INSTRUCTION, agent_system_prompt
from arag_graph.runtime import IndexLike, RunResources, make_resolver, traced_graph
from arag_graph.state import InputState, OutputState, RunState, TrajectoryStep
from arag_graph.tools import ALL_TOOLS, ContextTracker, create_retrieval_tools

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


SEARCH_TOOLS = frozenset({"keyword_search", "semantic_search"})
"""The tools that take ``top_k``: the configuration's ``top_k`` fills it when a call leaves it out."""


@functools.lru_cache(maxsize=64)
def _tools_for(index: HierarchicalIndex, names: tuple[str, ...]) -> dict[str, BaseTool]:
    """One set of tools per index and tool set: tools are stateless (the read set is injected)."""
    return {t.name: t for t in create_retrieval_tools(index, tools=names)}


# ---------------------------------------------------------------------------------------------
# The graph


def build_arag_graph(
    index: IndexLike = None,
    model: BaseChatModel | str | None = None,
    *,
    tool_set: str | None = None,
    extra_tools: Sequence[BaseTool] = (),
    config_schema: type[AragConfig] = AragConfig,
    name: str = "arag",
    checkpointer: Checkpointer = None,
) -> CompiledStateGraph:
    """Compile the A-RAG agent.

    ``index`` and ``model`` fixed here win over the configuration (``index_path``, ``model``),
    which is what a server entry point leaves open. ``tool_set`` fixes the retrieval tools
    (``"naive"`` for A-RAG (Naive), ``"none"`` for none); left as None it comes from the
    configuration's ``tools`` field. ``extra_tools`` are bound next to them (your own tools; they
    count as steps like the others, and may return ``(content, artifact)`` with ``tokens`` and
    ``chunk_ids`` to take part in the accounting).
    """
    if tool_set is not None and tool_set not in TOOL_SETS:
        raise AragError(f"unknown tool set {tool_set!r}; choose from {sorted(TOOL_SETS)}")
    resolve = make_resolver(name, index, model, config_schema)
    own_tools = {t.name: t for t in extra_tools}

    def tools_of(res: RunResources) -> dict[str, BaseTool]:
        names = TOOL_SETS[tool_set or getattr(res.cfg, "tools", "full")]
        return {**_tools_for(res.index, names), **own_tools}

    def system_message(res: RunResources) -> SystemMessage:
        return SystemMessage(res.cfg.system_prompt or agent_system_prompt(list(tools_of(res))))

    # -- start ------------------------------------------------------------------------------
    def start(state: RunState) -> dict[str, Any]:
        return start_update(state)

    # -- agent ------------------------------------------------------------------------------
    def agent_request(state: RunState, res: RunResources) -> tuple[Any, list[AnyMessage]]:
        available = tools_of(res)
        bound = bind_one_tool_per_turn(res.model, list(available.values()))
        return bound, [system_message(res), *state["messages"]]

    def agent(state: RunState, config: RunnableConfig) -> ModelCall:
        res = resolve()
        bound, messages = agent_request(state, res)
        return ModelCall(bound, messages, lambda reply: {"messages": [reply]}, res.trace(config, "agent_model"))

    # -- tools ------------------------------------------------------------------------------
    def tool_plan(state: RunState, res: RunResources) -> tuple[list[dict[str, Any]], int, ContextTracker]:
        calls = pending_tool_calls(state["messages"][-1])
        budget = max(0, res.cfg.max_steps - state.get("steps", 0))
        return calls, budget, ContextTracker(state.get("read_chunks") or [])

    def tool_result(
        call: dict[str, Any], available: dict[str, BaseTool], tracker: ContextTracker, top_k: int
    ) -> tuple[dict[str, Any] | ToolMessage, TrajectoryStep]:
        """Either a tool-call dict ready to run, or the error message answering a bad call."""
        name_, call_id = call.get("name") or "", call.get("id") or ""
        step: TrajectoryStep = {
            "tool": name_,
            "args": call.get("args") or {},
            "tokens": 0,
            "chunk_ids": [],
            "error": True,
        }
        if call.get("invalid"):
            text = (
                f"Error: the arguments of {name_ or 'this tool call'} were not valid JSON "
                f"({str(call.get('raw'))[:200]!r}). Call the tool again with a JSON object of arguments."
            )
            return ToolMessage(text, tool_call_id=call_id, name=name_ or "unknown", status="error"), step
        if name_ not in available:
            text = f"Error: there is no tool named {name_!r}. Available tools: {', '.join(available)}."
            return ToolMessage(text, tool_call_id=call_id, name=name_ or "unknown", status="error"), step
        args = call.get("args") if isinstance(call.get("args"), dict) else {}
        if name_ in own_tools:  # the caller's tools take their arguments as the model gave them
            return {"type": "tool_call", "name": name_, "id": call_id, "args": args}, step
        if name_ in SEARCH_TOOLS and args.get("top_k") is None:
            # The configured top_k is the searches' default; a model may still ask for more or fewer.
            args = {**args, "top_k": top_k}
            step["args"] = args  # the trajectory shows the search that ran
        return {"type": "tool_call", "name": name_, "id": call_id, "args": {**args, "tracker": tracker}}, step

    def run_tool(tool: BaseTool, call: dict[str, Any], res: RunResources, config: RunnableConfig) -> ToolMessage:
        """Run one tool call; a tool that raises answers with an error message instead of ending the run."""
        try:
            return tool.invoke(call, res.trace(config, call["name"]))
        except Exception as exc:
            detail = " ".join(str(exc).split())[:300]
            text = (
                f"Error: {call['name']} failed ({type(exc).__name__}: {detail}). Try other arguments or another tool."
            )
            return ToolMessage(text, tool_call_id=call["id"], name=call["name"], status="error")

    def with_hyde(prepared: dict[str, Any], res: RunResources, config: RunnableConfig) -> dict[str, Any]:
        """With ``hyde`` on, semantic_search embeds a hypothetical answer passage (ARAGOG's HyDE)."""
        query = prepared["args"].get("query")
        if not getattr(res.cfg, "hyde", False) or prepared["name"] != "semantic_search" or not isinstance(query, str):
            return prepared
        try:
            vector = hyde_vector(res.index, res.model, query, res.trace(config, "hyde_model"))
        except Exception:  # HyDE is an optimisation: on a model failure search with the query itself
            return prepared
        return {**prepared, "args": {**prepared["args"], "query_vector": list(vector)}}

    def tool_update(
        state: RunState, messages: list[ToolMessage], steps: list[TrajectoryStep], tracker: ContextTracker
    ) -> dict[str, Any]:
        shown: list[str] = []
        for message, step in zip(messages, steps, strict=False):
            artifact = getattr(message, "artifact", None) or {}
            if isinstance(artifact, dict):
                step["tokens"] = int(artifact.get("tokens", 0))
                step["chunk_ids"] = list(artifact.get("chunk_ids", []))
                step["error"] = bool(artifact.get("error")) or message.status == "error"
                shown.extend(step["chunk_ids"])
        return {
            "messages": messages,
            "steps": state.get("steps", 0) + len(steps),
            "retrieved_tokens": state.get("retrieved_tokens", 0) + sum(s["tokens"] for s in steps),
            "trajectory": [*(state.get("trajectory") or []), *steps],
            "read_chunks": tracker.newly_read,
            "retrieved_chunks": shown,
        }

    def tools_node(state: RunState, config: RunnableConfig) -> dict[str, Any]:
        res = resolve()
        available = tools_of(res)
        calls, budget, tracker = tool_plan(state, res)
        messages: list[ToolMessage] = []
        steps: list[TrajectoryStep] = []
        for i, call in enumerate(calls):
            if i >= budget:
                messages.append(_cap_message(call))
                continue
            prepared, step = tool_result(call, available, tracker, res.cfg.top_k)
            if isinstance(prepared, dict):
                prepared = run_tool(available[prepared["name"]], with_hyde(prepared, res, config), res, config)
            messages.append(prepared)
            steps.append(step)
        return tool_update(state, messages, steps, tracker)

    # -- synthesize / finish ----------------------------------------------------------------
    def synthesis_request(state: RunState) -> tuple[list[AnyMessage], list[AnyMessage]]:
        closing = not_run_messages(state["messages"][-1], "the step budget is used up; answer now.")
        instruction = HumanMessage(SYNTHESIS_INSTRUCTION)
        return [*closing, instruction], [*state["messages"], *closing, instruction]

    def synthesize(state: RunState, config: RunnableConfig) -> ModelCall:
        res = resolve()
        added, messages = synthesis_request(state)
        return ModelCall(
            res.model,
            [system_message(res), *messages],
            lambda reply: {"messages": [*added, reply]},
            res.trace(config, "synthesis_model"),
            on_error=lambda error: {"messages": added, "error": error},
        )

    def finish(state: RunState) -> dict[str, Any]:
        return finish_update(state, resolve().index)

    # -- edges ------------------------------------------------------------------------------
    def after_start(state: RunState) -> str:
        return END if state.get("error") else "agent"

    def out_of_budget(state: RunState, cfg: AragConfig) -> bool:
        return (
            state.get("steps", 0) >= cfg.max_steps
            or state.get("remaining_steps", 10**9) <= _SUPERSTEPS_TO_FINISH
            or over_token_budget(state.get("messages") or [], cfg.message_token_budget)
        )

    def after_agent(state: RunState) -> str:
        if state.get("error"):
            return END
        if not pending_tool_calls(state["messages"][-1]):
            return "finish"
        cfg = config_schema.from_context(get_runtime().context)
        return "synthesize" if out_of_budget(state, cfg) else "tools"

    def after_tools(state: RunState) -> str:
        cfg = config_schema.from_context(get_runtime().context)
        return "synthesize" if out_of_budget(state, cfg) else "agent"

    builder = StateGraph(RunState, context_schema=config_schema, input_schema=InputState, output_schema=OutputState)
    builder.add_node("start", start)
    builder.add_node("agent", model_node("agent", agent))
    # Tool calls are CPU-bound index lookups; under ainvoke LangGraph runs this sync body in an
    # executor, so one body serves both.
    builder.add_node("tools", tools_node)
    builder.add_node("synthesize", model_node("synthesize", synthesize))
    builder.add_node("finish", finish)
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", after_start, ["agent", END])
    builder.add_conditional_edges("agent", after_agent, ["tools", "synthesize", "finish", END])
    builder.add_conditional_edges("tools", after_tools, ["agent", "synthesize"])
    builder.add_edge("synthesize", "finish")
    builder.add_edge("finish", END)
    return traced_graph(builder.compile(checkpointer=checkpointer, name=name), name, index, config_schema)


def _cap_message(call: dict[str, Any]) -> ToolMessage:
    return ToolMessage(
        "Not run: the step cap is reached; no more tool calls are allowed for this question.",
        tool_call_id=call.get("id") or "",
        name=call.get("name") or "unknown",
        status="error",
    )


def build_arag_naive_graph(
    index: IndexLike = None,
    model: BaseChatModel | str | None = None,
    *,
    checkpointer: Checkpointer = None,
) -> CompiledStateGraph:
    """A-RAG (Naive): the agent loop with one embedding-search tool that returns whole chunks."""
    from arag_graph.configuration import AragNaiveConfig

    return build_arag_graph(
        index,
        model,
        tool_set="naive",
        config_schema=AragNaiveConfig,  # type: ignore[arg-type]
        name="arag_naive",
        checkpointer=checkpointer,
    )
