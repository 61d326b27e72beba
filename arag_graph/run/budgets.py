"""Operator budgets: caps on what one run may spend, read from the server's environment.

A served graph runs with the operator's key, and its context schema lets a caller choose settings
(CoRAG's tree search: depth, beam, expansions, rollouts) whose product is thousands of model calls.
Bounds per field cannot bound that product, so the run itself carries a budget:

``ARAG_MAX_MODEL_CALLS``
    model calls per run (default 1000; 0: no cap). Every call counts: structured retries, HyDE,
    every chain of best-of-N and tree search.
``ARAG_MAX_TOKENS``
    input plus output tokens per run, as the provider reports them (else counted in o200k tokens);
    0 or unset: no cap.
``ARAG_MAX_COST_USD``
    US dollars per run, priced at ``ARAG_PRICE_INPUT_PER_MTOK`` and ``ARAG_PRICE_OUTPUT_PER_MTOK``
    (USD per million tokens, both required with it); unset: no cap.
``ARAG_MAX_QUESTION_CHARS``
    characters of a run's input (default 20,000): the ``question`` and every message the caller
    sends, of every role, together.
``ARAG_MAX_REPLY_CHARS``
    characters of one model reply, streamed or not (default 200,000).

One rule for every cap: it holds for the whole input a caller sends (:func:`input_problem`, checked
where the run enters, :class:`~arag_graph.run.runtime.TracedGraph`), and for every model request
before it is sent (:meth:`RunBudget._start`): the calls cap counts it, and the token and cost caps
take its input tokens, estimated with the o200k tokenizer (:mod:`arag_graph.core.tokens`), into
account, so a request that would take the run past a cap is refused instead of sent; the
provider's reported usage then replaces the estimate. A request is never trimmed: what the model
would not see could change its answer without anyone knowing.

The one place every model call of a graph passes through is LangChain's callback system: a
:class:`RunBudget` handler is attached to each top-level run (:func:`with_budget`, called by
:class:`~arag_graph.run.runtime.TracedGraph`) and inherited by every node, subgraph and ``Send`` below
it, so CoRAG's parallel chains share one budget. The handler refuses a call *before* it is sent
(``on_chat_model_start``) once a cap is reached, raising :class:`BudgetExceeded`; the model nodes
turn that into the run's one-line ``error`` and stop, keeping what the run found so far
(:mod:`arag_graph.run.nodes`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from arag_graph.core.errors import BudgetExceeded, ContextError, ReplyTooLarge
from arag_graph.core.limits import DEFAULT_MAX_QUESTION_CHARS, cap_from_env
from arag_graph.core.limits import max_question_chars as question_cap_from_env

DEFAULT_MAX_MODEL_CALLS = 1000
DEFAULT_MAX_REPLY_CHARS = 200_000


@dataclass(frozen=True)
class Budget:
    """The operator's caps for one run; None: no cap."""

    max_model_calls: int | None = DEFAULT_MAX_MODEL_CALLS
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0
    max_question_chars: int | None = DEFAULT_MAX_QUESTION_CHARS
    max_reply_chars: int | None = DEFAULT_MAX_REPLY_CHARS

    @classmethod
    def from_env(cls) -> Budget:
        """The caps as the environment sets them now; a bad value is refused in one line."""

        def whole(name: str, default: int | None) -> int | None:
            value = cap_from_env(name, default, integer=True)
            return None if value is None else int(value)

        cost = cap_from_env("ARAG_MAX_COST_USD", None, integer=False)
        price_in = cap_from_env("ARAG_PRICE_INPUT_PER_MTOK", None, integer=False)
        price_out = cap_from_env("ARAG_PRICE_OUTPUT_PER_MTOK", None, integer=False)
        if cost is not None and price_in is None and price_out is None:
            raise ContextError(
                "$ARAG_MAX_COST_USD needs the model's prices: the operator sets ARAG_PRICE_INPUT_PER_MTOK and "
                "ARAG_PRICE_OUTPUT_PER_MTOK (USD per million tokens)"
            )
        return cls(
            max_model_calls=whole("ARAG_MAX_MODEL_CALLS", DEFAULT_MAX_MODEL_CALLS),
            max_tokens=whole("ARAG_MAX_TOKENS", None),
            max_cost_usd=cost,
            price_input_per_mtok=price_in or 0.0,
            price_output_per_mtok=price_out or 0.0,
            max_question_chars=question_cap_from_env(),
            max_reply_chars=whole("ARAG_MAX_REPLY_CHARS", DEFAULT_MAX_REPLY_CHARS),
        )


def question_problem(question: str, budget: Budget | None = None) -> str | None:
    """Why a question is refused (too long), or None. One rule for every graph's start."""
    budget = budget or Budget.from_env()
    limit = budget.max_question_chars
    if limit is not None and len(question) > limit:
        return (
            f"the question is {len(question):,} characters, over this server's limit of {limit:,} "
            "(ARAG_MAX_QUESTION_CHARS); send a shorter question"
        )
    return None


def _caller_messages(value: Any) -> list[BaseMessage] | None:
    """The messages of a run's input as LangGraph will read them (dicts, tuples, text or messages);
    None when they cannot be read, which LangGraph then refuses itself."""
    from langchain_core.messages import convert_to_messages

    if value is None:
        return []
    try:
        return convert_to_messages(value if isinstance(value, (list, tuple)) else [value])
    except (ValueError, TypeError, NotImplementedError):
        return None


def input_problem(run_input: Any, budget: Budget, *, system_allowed: bool) -> tuple[str | None, int]:
    """Why the input a caller sends is refused (None: it is not), and how many messages it holds.

    The whole input counts, whatever its shape: the ``question`` and every message of every role
    (100 messages under the cap each are one input over it). A caller's ``system`` message is
    refused unless ``system_allowed`` (the operator's ``ARAG_ALLOW_SYSTEM_MESSAGES``; whoever runs the
    graph in-process is the operator): it would stand above the graph's own instructions.
    """
    if not isinstance(run_input, Mapping):
        return None, 0  # a resume or a continuation sends no new text
    messages = _caller_messages(run_input.get("messages"))
    if messages is None:
        return None, 0
    if not system_allowed and any(m.type == "system" for m in messages):
        return (
            "this server does not accept system messages from callers (the operator allows them with "
            "ARAG_ALLOW_SYSTEM_MESSAGES=1); send the instruction as a human message",
            len(messages),
        )
    question = run_input.get("question")
    texts = [question if isinstance(question, str) else "", *(_text_of(m) for m in messages)]
    if not messages:
        return question_problem(texts[0].strip(), budget), 0
    chars = sum(len(t) for t in texts)
    limit = budget.max_question_chars
    if limit is not None and chars > limit:
        return (
            f"the input is {chars:,} characters ({len(messages)} message(s) and the question together), over this "
            f"server's limit of {limit:,} (ARAG_MAX_QUESTION_CHARS); send less",
            len(messages),
        )
    return None, len(messages)


def _text_of(message: Any) -> str:
    content = getattr(message, "content", "")
    text = content if isinstance(content, str) else str(content)
    calls = getattr(message, "tool_calls", None) or []
    return text + "".join(str(c.get("args", "")) for c in calls)


class RunBudget(BaseCallbackHandler):
    """Counts one run's model calls, tokens and cost, and refuses calls once a cap is reached.

    ``raise_error``: an exception raised here reaches the model call (LangChain otherwise logs and
    drops it); ``run_inline``: counted in order, on the calling thread or task. Several chains call
    the model at once (threads under ``invoke``), hence the lock.
    """

    raise_error = True
    run_inline = True

    def __init__(self, budget: Budget, input_problem: str | None = None, input_messages: int = 0) -> None:
        self.budget = budget
        self.input_problem = input_problem
        """Why the caller's input is refused (:func:`input_problem`); the run's first step ends the run with it."""
        self.input_messages = input_messages
        """How many messages the caller sent (those a refused input leaves out of the thread)."""
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.stopped: str | None = None
        self._streamed: dict[UUID, int] = {}
        self._prompts: dict[UUID, Any] = {}
        """Each open call's prompt, tokenized only when the provider reports no usage."""
        self._lock = threading.Lock()

    @property
    def cost_usd(self) -> float:
        b = self.budget
        return (self.input_tokens * b.price_input_per_mtok + self.output_tokens * b.price_output_per_mtok) / 1e6

    def _reached(self) -> str | None:
        b = self.budget
        if b.max_model_calls is not None and self.calls >= b.max_model_calls:
            return f"{b.max_model_calls} model calls (ARAG_MAX_MODEL_CALLS)"
        if b.max_tokens is not None and self.input_tokens + self.output_tokens >= b.max_tokens:
            return f"{b.max_tokens:,} tokens (ARAG_MAX_TOKENS; {self.input_tokens + self.output_tokens:,} used)"
        if b.max_cost_usd is not None and self.cost_usd >= b.max_cost_usd:
            return f"${b.max_cost_usd:g} (ARAG_MAX_COST_USD; ${self.cost_usd:.4f} spent)"
        return None

    def _request_tokens(self, prompt: Any, params: Mapping[str, Any] | None) -> int | None:
        """The o200k tokens of a request about to be sent (its messages and tool schemas), counted only
        when a token or cost cap could be passed by it: a token is at least one character, so a
        request shorter than what is left under the caps cannot pass them (the common case, no count)."""
        b = self.budget
        if b.max_tokens is None and b.max_cost_usd is None:
            return None
        tools = (params or {}).get("tools")
        text = _prompt_text(prompt) + (json.dumps(tools, default=str) if tools else "")
        chars = len(text)
        with self._lock:
            used, spent = self.input_tokens + self.output_tokens, self.cost_usd
        over_tokens = b.max_tokens is not None and used + chars > b.max_tokens
        over_cost = b.max_cost_usd is not None and spent + chars * b.price_input_per_mtok / 1e6 > b.max_cost_usd
        return _counted(text) if over_tokens or over_cost else None

    def _passes(self, tokens: int | None) -> str | None:
        """The cap a request of ``tokens`` input tokens would take the run past (None: none)."""
        if tokens is None:
            return None
        b = self.budget
        used = self.input_tokens + self.output_tokens
        if b.max_tokens is not None and used + tokens > b.max_tokens:
            return f"{b.max_tokens:,} tokens (ARAG_MAX_TOKENS; {used:,} used, the request ~{tokens:,} more)"
        cost = tokens * b.price_input_per_mtok / 1e6
        if b.max_cost_usd is not None and self.cost_usd + cost > b.max_cost_usd:
            return (
                f"${b.max_cost_usd:g} (ARAG_MAX_COST_USD; ${self.cost_usd:.4f} spent, the request's input "
                f"~${cost:.4f} more)"
            )
        return None

    def _start(self, run_id: UUID, prompt: Any, params: Mapping[str, Any] | None = None) -> None:
        tokens = self._request_tokens(prompt, params)  # outside the lock: chains counting at once
        with self._lock:
            reached = self._reached()
            passes = None if reached is not None else self._passes(tokens)
            if reached is not None:
                self.stopped = (
                    f"run stopped: it reached the operator's cap of {reached} after {self.calls} model call(s); "
                    "the result holds what it found so far"
                )
            elif passes is not None:
                self.stopped = (
                    f"run stopped: its next model request would pass the operator's cap of {passes} after "
                    f"{self.calls} model call(s), and was not sent; the result holds what it found so far"
                )
            if self.stopped is not None and (reached is not None or passes is not None):
                raise BudgetExceeded(self.stopped)
            self.calls += 1
            self._streamed[run_id] = 0
            self._prompts[run_id] = prompt

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._start(run_id, messages, kwargs.get("invocation_params"))

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any) -> None:
        self._start(run_id, prompts, kwargs.get("invocation_params"))

    def _check_reply(self, chars: int) -> None:
        limit = self.budget.max_reply_chars
        if limit is not None and chars > limit:
            raise ReplyTooLarge(
                f"model call failed: the reply exceeded {limit:,} characters (ARAG_MAX_REPLY_CHARS) and was discarded; "
                "lower max_tokens, or the operator raises the limit"
            )

    def on_llm_new_token(self, token: str, *, run_id: UUID, **kwargs: Any) -> None:
        # Streamed: stop reading a reply as soon as it is too long, not after it has all arrived.
        with self._lock:
            self._streamed[run_id] = self._streamed.get(run_id, 0) + len(token or "")
            chars = self._streamed[run_id]
        self._check_reply(chars)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        generations = [g for batch in response.generations for g in batch]
        replies = [getattr(g, "message", None) for g in generations]
        reply_text = "".join(g.text if m is None else _text_of(m) for g, m in zip(generations, replies, strict=True))
        used_in, used_out = _reported_usage(replies, response.llm_output)
        with self._lock:
            prompt = self._prompts.pop(run_id, None)
            self._streamed.pop(run_id, None)
        if used_in is None:
            used_in, used_out = _counted(_prompt_text(prompt)), _counted(reply_text)
        with self._lock:
            self.input_tokens += used_in
            self.output_tokens += used_out or 0
        self._check_reply(len(reply_text))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._prompts.pop(run_id, None)
            self._streamed.pop(run_id, None)


def _reported_usage(replies: Sequence[Any], llm_output: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    """Input and output tokens as the provider reported them, or (None, None)."""
    total_in = total_out = 0
    found = False
    for reply in replies:
        usage = getattr(reply, "usage_metadata", None)
        if usage:
            found = True
            total_in += int(usage.get("input_tokens") or 0)
            total_out += int(usage.get("output_tokens") or 0)
    if found:
        return total_in, total_out
    usage = (llm_output or {}).get("token_usage") if isinstance(llm_output, Mapping) else None
    if isinstance(usage, Mapping) and usage:
        return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return None, None


def _prompt_text(prompt: Any) -> str:
    if not prompt:
        return ""
    return "".join(m if isinstance(m, str) else "".join(_text_of(x) for x in m) for m in prompt)


def _counted(text: str) -> int:
    from arag_graph.core.tokens import count_tokens

    return count_tokens(text) if text else 0


def _handlers(callbacks: Any) -> list[Any]:
    if isinstance(callbacks, BaseCallbackManager):
        return [*callbacks.handlers, *callbacks.inheritable_handlers]
    if isinstance(callbacks, (list, tuple)):
        return list(callbacks)
    return []


def run_budget(config: Mapping[str, Any] | None) -> RunBudget | None:
    """The budget a run's config carries (its top-level run's), if any."""
    return next((h for h in _handlers((config or {}).get("callbacks")) if isinstance(h, RunBudget)), None)


def with_budget(
    config: Mapping[str, Any] | None, run_input: Any = None, *, system_allowed: bool = True
) -> dict[str, Any]:
    """``config`` with a fresh :class:`RunBudget` from the environment, unless it has one already.

    A graph embedded in another (a subgraph, ``subgraph.as_node``) runs under its parent's budget:
    one run, one budget. ``run_input`` is what the caller sent, checked whole (:func:`input_problem`).
    """
    config = dict(config or {})
    if run_budget(config) is not None:
        return config
    budget = Budget.from_env()
    handler = RunBudget(budget, *input_problem(run_input, budget, system_allowed=system_allowed))
    callbacks = config.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        manager.add_handler(handler, inherit=True)
        config["callbacks"] = manager
    else:
        config["callbacks"] = [*(callbacks or []), handler]
    return config
