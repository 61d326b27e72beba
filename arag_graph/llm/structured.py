"""Structured outputs: the base of every schema sent to a model, and a robust way to ask for one.

With a real model we use the provider's structured output (``with_structured_output``). Models
sometimes return invalid JSON or miss fields; :func:`structured_runnable` retries once and then
falls back to the schema's own documented safe value (:meth:`ModelFacing.fallback`: not
sufficient, no relevant information, a single sub-question, no triplets), so a bad reply never
crashes a run. The schemas live with the graph family that asks for them (``corag/schemas.py``,
``srag/schemas.py``; the retrieval techniques' in ``run/schemas.py``). The offline policy does not
go through here: each family's offline model answers the same requests with its own rules.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, ValidationError

from arag_graph.core.errors import BudgetExceeded
from arag_graph.core.limits import bounded_schema

T = TypeVar("T", bound=BaseModel)


def _model_facing_schema(schema: dict[str, Any], cls: type) -> None:
    """Make the JSON schema a model receives say only what the model needs.

    Pydantic would send the class docstring (written for developers) as the description, and each
    field's default. Defaults stay in the Python model, which validates lenient replies;
    they leave the JSON schema because OpenAI's strict structured outputs have refused the
    ``default`` keyword, and every field is required there anyway.
    """
    instructions = getattr(cls, "instructions", "")
    if instructions:
        schema["description"] = instructions
    else:
        schema.pop("description", None)
    for field_schema in schema.get("properties", {}).values():
        field_schema.pop("default", None)
    # Every list the model writes ends (core/limits.bounded_schema); strings stay unbounded here, because
    # this schema may go to OpenAI's strict structured outputs, which refuse ``maxLength``. The forced
    # tool call of :func:`_runnables` bounds them too.
    bounded_schema(schema, text=False)


class ModelFacing(BaseModel):
    """Base of every schema sent to a model for structured output (CoRAG, SRAG, the LLM judge)."""

    instructions: ClassVar[str] = ""
    """The schema's description as the model sees it (the docstring is for developers)."""

    model_config = ConfigDict(json_schema_extra=_model_facing_schema)

    @classmethod
    def fallback(cls, question: str) -> Any:
        """The safe value a run goes on with when the model gave no usable reply (``question``: what
        the request was about). Each schema asked for through :func:`structured_call` defines its own,
        beside its fields; this base has none, and :func:`structured_call` refuses a schema without one
        before it asks anything."""
        raise TypeError(f"{cls.__name__} defines no fallback(); give it one to ask for it with structured_call")


def has_fallback(schema: type[BaseModel]) -> bool:
    """Whether ``schema`` says what a run goes on with when a model's reply is unusable."""
    own = getattr(schema, "fallback", None)
    return own is not None and getattr(own, "__func__", None) is not ModelFacing.fallback.__func__


# ---------------------------------------------------------------------------------------------
# Calling a model for a structured answer


def _problem(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


class _RetryPolicy(Generic[T]):
    """The one retry policy of a structured call, sync and async alike: two attempts, then the
    schema's fallback (:meth:`ModelFacing.fallback`) with the last attempt's problem.

    An attempt fails on a reply that is no valid ``schema`` object and on any error of the call
    (invalid JSON, a refusal, a provider error), except :class:`BudgetExceeded`: no call was made
    and none will be, so there is nothing to retry or fall back from.

    The second attempt asks through a forced tool call instead of the provider's default (see
    :func:`_runnables`).
    """

    attempts_per_call = 2

    def __init__(self, schema: type[T], question: str) -> None:
        if not has_fallback(schema):
            raise TypeError(f"{schema.__name__} defines no fallback(); a structured call needs one to fall back to")
        self.schema, self.question = schema, question
        self.value: T | None = None
        self.problem: str | None = None

    def attempts(self) -> Iterator[None]:
        for _attempt in range(self.attempts_per_call):
            yield
            if self.value is not None:
                return

    @contextlib.contextmanager
    def attempt(self) -> Iterator[None]:
        try:
            yield
        except BudgetExceeded:
            raise
        except Exception as exc:
            self.value, self.problem = None, _problem(exc)

    def reply(self, result: Any) -> None:
        self.value, self.problem = _parsed(result, self.schema)

    def result(self) -> tuple[T, str | None]:
        if self.value is not None:
            return self.value, None
        return self.schema.fallback(self.question), self.problem  # type: ignore[attr-defined]


def structured_call(
    model: BaseChatModel,
    schema: type[T],
    messages: Sequence[BaseMessage],
    *,
    question: str,
    config: RunnableConfig | None = None,
) -> tuple[T, str | None]:
    """Ask ``model`` for a ``schema`` object under :class:`_RetryPolicy`. Returns (value, problem)."""
    runnables = _runnables(model, schema)
    policy = _RetryPolicy(schema, question)
    for attempt, _ in enumerate(policy.attempts()):
        with policy.attempt():
            policy.reply(runnables[attempt].invoke(list(messages), config))
    return policy.result()


async def astructured_call(
    model: BaseChatModel,
    schema: type[T],
    messages: Sequence[BaseMessage],
    *,
    question: str,
    config: RunnableConfig | None = None,
) -> tuple[T, str | None]:
    """Async twin of :func:`structured_call`, under the same :class:`_RetryPolicy`."""
    runnables = _runnables(model, schema)
    policy = _RetryPolicy(schema, question)
    for attempt, _ in enumerate(policy.attempts()):
        with policy.attempt():
            policy.reply(await runnables[attempt].ainvoke(list(messages), config))
    return policy.result()


def _runnables(model: BaseChatModel, schema: type[T]) -> list[Runnable[Any, Any]]:
    """The structured request of each attempt: the provider's default, then a forced tool call.

    ``ChatOpenAI`` asks for a JSON schema in ``response_format`` by default, which OpenAI and vLLM
    honour but llama-cpp-python's server refuses (HTTP 500: only ``text`` and ``json_object``), and
    other servers may ignore. A forced call of a tool whose parameters are the schema is the one
    form every OpenAI-compatible server with tool calling takes (llama-cpp-python then constrains
    the reply to the schema by grammar), so the retry asks that way. Models whose
    ``with_structured_output`` has no ``method`` (scripted test models, other providers' defaults)
    are asked the same way twice.
    """
    first = model.with_structured_output(schema, include_raw=True)
    try:
        accepts_method = "method" in inspect.signature(model.with_structured_output).parameters
    except (TypeError, ValueError):
        accepts_method = False
    if not accepts_method:
        return [first] * _RetryPolicy.attempts_per_call
    # The forced call's schema bounds strings too: llama-cpp-python writes a tool call's arguments with no
    # token limit, so an unbounded string could run until its context is full. Its reply is a dict,
    # validated against ``schema`` as any other (:func:`_parsed`).
    forced = model.with_structured_output(_forced_tool(schema), include_raw=True, method="function_calling")
    return [first, forced]


def _forced_tool(schema: type[BaseModel]) -> dict[str, Any]:
    """The forced call's tool for ``schema``, every string and list bounded; each caller gets its own copy."""
    return copy.deepcopy(_converted_tool(schema))


@functools.lru_cache(maxsize=64)
def _converted_tool(schema: type[BaseModel]) -> dict[str, Any]:
    # Converted once per schema (a JSON schema written and dereferenced), not at every structured call.
    tool = convert_to_openai_tool(schema)
    bounded_schema(tool["function"]["parameters"])
    return tool


def structured_runnable(model: BaseChatModel, schema: type[T], question: str) -> Runnable[Any, tuple[T, str | None]]:
    """:func:`structured_call` as a runnable over messages, returning ``(value, problem)``.

    Its retries then sit under one named run in a trace, and a graph step runs it sync or async.
    """

    def call(messages: list[BaseMessage], config: RunnableConfig) -> tuple[T, str | None]:
        return structured_call(model, schema, messages, question=question, config=config)

    async def acall(messages: list[BaseMessage], config: RunnableConfig) -> tuple[T, str | None]:
        return await astructured_call(model, schema, messages, question=question, config=config)

    return RunnableLambda(call, afunc=acall, name=schema.__name__)


def _parsed(result: Any, schema: type[T]) -> tuple[T | None, str | None]:
    if isinstance(result, dict) and "parsed" in result:
        if result.get("parsing_error") is not None:
            return None, f"unparseable structured output: {result['parsing_error']}"[:300]
        result = result["parsed"]
    if isinstance(result, schema):
        return result, None
    try:
        return schema.model_validate(result), None
    except ValidationError as exc:
        return None, f"structured output missing fields: {exc.errors()[0].get('msg', '')}"
