"""Human review of the agent's tool calls: who asks for it, what the pause carries, how answers read.

The calls of the tools to review go through the graph's ``approve`` node, which pauses the run with
a LangGraph ``interrupt()``. The pause and its answer have the shapes of LangChain's
``HumanInTheLoopMiddleware`` (``HITLRequest``: ``action_requests`` and ``review_configs``;
``HITLResponse``: ``{"decisions": [...]}``), so Studio, the SDK and agent-inbox style UIs read them
as they read that middleware's. The older agent-inbox answers (``accept``, ``ignore``,
``response``, an ``edit`` with ``args: {"action", "args"}``) are read too.

Who asks for a review (:func:`required_reviews`): the operator, through the builder's
``approve_tools`` or, for a served run (a context the operator did not make), ``ARAG_APPROVE_TOOLS``
in the server's environment; and the run itself, through its context's ``approve_tools``. A run's
context adds to the operator's list and never removes from it, so a served caller cannot turn off
a review the operator asked for. The tool node checks again (:func:`unreviewed_refusal`): a call
that needed a review and passed none is not run, whatever routed it there.

Edits are checked as a model's call is (the tool's own argument schema, which accepts the same
variants, so ``"top_k": "3"`` passes) and keep the tool: a wrong answer pauses again with a
``problem`` saying what to fix, never a crash.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from arag_graph.core.errors import AragError
from arag_graph.run.policy import ServingPolicy

ALL = "all"
DECISIONS = ("approve", "edit", "reject")
HIDDEN_ARGS = ("runtime",)
"""Arguments LangGraph injects (``ToolRuntime``): never shown to a reviewer, never taken from one."""
REJECTED = "a person reviewing this call rejected it"
UNREVIEWED = (
    "this call needs a person's review before it runs and had none (the operator requires it); "
    "call the tool again to ask for one"
)
_ALIASES = {"accept": "approve", "ignore": "reject", "response": "reject"}
"""agent-inbox's older decision names, read as this module's."""
_EDIT_SHAPE = "{'type': 'edit', 'edited_action': {'name': ..., 'args': {...}}}"


def required_reviews(asked: Sequence[str], fixed: Sequence[str], trusted: bool) -> list[str]:
    """The tools whose calls a person reviews in this run: the operator's (the builder's ``fixed``,
    and ``ARAG_APPROVE_TOOLS`` for a context the operator did not make) and those the run asks for."""
    served = () if trusted else ServingPolicy.from_env().approve_tools
    return list(dict.fromkeys([*fixed, *served, *asked]))


def names_problem(names: Iterable[str], known: Iterable[str], source: str) -> str | None:
    """One line naming the first of ``names`` that is no tool in ``known`` (None if all are)."""
    choices = {*known, ALL}
    unknown = [n for n in names if n not in choices]
    if not unknown:
        return None
    return f"{source} names {unknown[0]!r}, which is no tool of this run; choose from {', '.join(sorted(choices))}"


def reviewed_calls(calls: Sequence[dict[str, Any]], approve: Sequence[str]) -> list[dict[str, Any]]:
    """The calls ``approve`` (tool names, or ``all``) asks a person to review."""
    return [c for c in calls if ALL in approve or c.get("name") in approve]


def shown_args(args: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (args or {}).items() if k not in HIDDEN_ARGS}


def review_request(calls: Sequence[dict[str, Any]], problem: str = "") -> dict[str, Any]:
    """What the interrupt carries: ``HITLRequest``'s ``action_requests`` (each call's name, arguments
    and id) and ``review_configs`` (the decisions allowed per tool), and the reason the previous
    answer was refused, if it was."""
    request: dict[str, Any] = {
        "action_requests": [
            {
                "name": c["name"],
                "args": shown_args(c.get("args")),
                "id": c.get("id"),
                "description": f"Tool call {_call_line(c)}: approve, edit or reject it",
            }
            for c in calls
        ],
        "review_configs": [
            {"action_name": name, "allowed_decisions": list(DECISIONS)}
            for name in dict.fromkeys(c["name"] for c in calls)
        ],
    }
    if problem:
        request["problem"] = problem
    return request


def _call_line(call: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{k}={v!r}" for k, v in shown_args(call.get("args")).items())
    return f"{call['name']}({shown})"


def read_decisions(
    answer: Any, calls: Sequence[dict[str, Any]], tools: Mapping[str, BaseTool] | None = None
) -> list[dict[str, Any]]:
    """The reviewer's answer as one decision per call (``type`` approve, edit with checked ``args``,
    or reject with its ``message``), or the one-line :class:`AragError` saying what is wrong with it.

    ``{"decisions": [...]}`` or the list itself; one decision alone for a single call; ``"approve"``
    or ``"reject"`` alone for every call of the pause.
    """
    if isinstance(answer, Mapping) and "decisions" in answer:
        answer = answer["decisions"]
    if isinstance(answer, str):
        answer = [answer] * len(calls)
    elif isinstance(answer, Mapping):
        answer = [answer]
    if not isinstance(answer, list) or len(answer) != len(calls):
        given = f"{len(answer)} decision(s)" if isinstance(answer, list) else f"a {type(answer).__name__}"
        raise AragError(
            f"the review answers {len(calls)} call(s) with {given}; resume with {{'decisions': [...]}}, one per call"
        )
    pairs = enumerate(zip(answer, calls, strict=True), start=1)
    return [_decision(n, item, call, tools or {}) for n, (item, call) in pairs]


def _decision(n: int, item: Any, call: dict[str, Any], tools: Mapping[str, BaseTool]) -> dict[str, Any]:
    decision = {"type": item} if isinstance(item, str) else item
    kind = decision.get("type") if isinstance(decision, Mapping) else None
    kind = _ALIASES.get(kind, kind) if isinstance(kind, str) else None
    if kind not in DECISIONS:
        raise AragError(f"decision {n} is {str(item)[:80]!r}; give {{'type': 'approve' | 'edit' | 'reject'}}")
    if kind == "approve":
        return {"type": "approve"}
    if kind == "reject":
        message = decision.get("message") if decision.get("type") != "response" else decision.get("args")
        return {"type": "reject", "message": str(message or "").strip()}
    action = decision.get("edited_action") or decision.get("args")
    if not isinstance(action, Mapping) or not isinstance(args := action.get("args"), Mapping):
        raise AragError(f"decision {n} edits without arguments; give {_EDIT_SHAPE}")
    name = action.get("name") or action.get("action") or call["name"]
    if name != call["name"]:
        raise AragError(
            f"decision {n} turns the {call['name']} call into {name!r}; an edit keeps the tool "
            "(reject the call, and say in the message what to call instead)"
        )
    return {"type": "edit", "args": _checked_args(n, call["name"], shown_args(args), tools.get(call["name"]))}


def _checked_args(n: int, name: str, args: dict[str, Any], tool: BaseTool | None) -> dict[str, Any]:
    """The edited arguments, checked against the schema the model's calls of the tool meet; passed
    on as given, so that the tool reads them once, as it reads a model's."""
    schema = tool.tool_call_schema if tool is not None else None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            schema.model_validate(args)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the arguments"
            raise AragError(f"decision {n} gives {name} arguments it does not take ({where}: {first['msg']})") from None
    return args


def applied(
    reply_calls: Sequence[Any], calls: Sequence[dict[str, Any]], decisions: Sequence[dict[str, Any]]
) -> tuple[list[Any] | None, list[str], dict[str, str]]:
    """The decisions as state: the model's calls with the edits in place (None when none was
    edited), the ids of the calls that may run, and the rejected ones' messages for the model."""
    edits: dict[str, dict[str, Any]] = {}
    passed: list[str] = []
    rejected: dict[str, str] = {}
    for call, decision in zip(calls, decisions, strict=True):
        if decision["type"] == "reject":
            message = decision["message"]
            rejected[call["id"]] = f"{REJECTED}: {message}" if message else f"{REJECTED}; do not call it again unasked"
            continue
        passed.append(call["id"])
        if decision["type"] == "edit":
            edits[call["id"]] = {**call, "args": decision["args"]}
    edited = [edits.get(c["id"] or "", c) for c in reply_calls] if edits else None
    return edited, passed, rejected


def unreviewed_refusal(call: Mapping[str, Any], required: Sequence[str], state: Any) -> str | None:
    """Why the tool node must not run ``call``: it needed a review (``required``) that it did not
    pass (its id is not among those the ``approve`` node let through), or the reviewer rejected it."""
    if not isinstance(state, Mapping):
        state = {}
    rejected = state.get("rejected") or {}
    if call.get("id") in rejected:
        return str(rejected[call["id"]])
    if reviewed_calls([dict(call)], required) and call.get("id") not in (state.get("reviewed") or ()):
        return UNREVIEWED
    return None
