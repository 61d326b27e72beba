"""Structured outputs for CoRAG and SRAG: the schemas and a robust way to ask a model for them.

With a real model we use the provider's structured output (``with_structured_output``). Models
sometimes return invalid JSON or miss fields; :func:`structured_runnable` retries once and then
falls back to a documented safe value (not sufficient, no relevant information, a single
sub-question, no triplets), so a bad reply never crashes a run. The offline policy does not go
through here: it answers the same requests with its own rules (:mod:`arag_graph.llm.offline`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arag_graph.core.errors import BudgetExceeded

T = TypeVar("T", bound=BaseModel)

NO_RELEVANT_INFORMATION = "No relevant information found"
"""The sub-answer of a CoRAG step whose documents do not answer its query (the paper's wording)."""


# ---------------------------------------------------------------------------------------------
# Schemas


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


class ModelFacing(BaseModel):
    """Base of every schema sent to a model for structured output (CoRAG, SRAG, the LLM judge)."""

    instructions: ClassVar[str] = ""
    """The schema's description as the model sees it (the docstring is for developers)."""

    model_config = ConfigDict(json_schema_extra=_model_facing_schema)


class Sufficiency(ModelFacing):
    """CoRAG's intermediate check: is what was retrieved enough to answer?


    ``reasoning`` comes first so that a model writes what the passages establish before it judges
    (fields are generated in schema order); it is CoRAG's intermediate reasoning, which the next
    reformulation reads and rejection-sampled training chains keep as the step's sub-answer.
    """

    instructions: ClassVar[str] = "Whether the passages retrieved so far are enough to answer the question."

    reasoning: str = Field(
        default="",
        description="What the passages establish so far towards the answer, in one or two sentences "
        "(name the entities found, such as the person or work the question describes indirectly).",
    )
    is_sufficient: bool = Field(description="True if the retrieved passages contain enough to answer the question.")
    missing_info: str = Field(default="", description="What is still missing, if anything; empty when sufficient.")
    confidence: float = Field(default=0.0, ge=0.0, le=1.0, description="Confidence in the judgement, 0 to 1.")


class Reformulation(ModelFacing):
    """CoRAG's next query, aimed at the missing information."""

    instructions: ClassVar[str] = "The next search query, aimed at the information that is still missing."

    query: str = Field(description="A search query for the missing information.")


class SubAnswer(ModelFacing):
    """CoRAG's sub-answer: what one step's documents say about that step's query.

    ``confidence`` is this package's stand-in for the CoRAG paper's penalty. The paper scores how
    likely the model would write "No relevant information found"; chat APIs cannot score a
    given string, so the model states instead how sure it is that the documents answer the query,
    and a step's penalty is ``1 - confidence`` (see :func:`arag_graph.corag.graph.step_penalty`).
    """

    instructions: ClassVar[str] = "The answer to a search query from the documents it retrieved."

    answer: str = Field(
        description=f"A short answer to the query taken from the documents; exactly '{NO_RELEVANT_INFORMATION}' "
        "when they do not answer it."
    )
    confidence: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="How sure you are that the documents answer the query: 0 when they hold nothing relevant, "
        "1 when they state the answer plainly.",
    )


class SubQuestion(ModelFacing):
    instructions: ClassVar[str] = "One step of the decomposition."

    id: int = Field(description="1-based number of the sub-question.")
    question: str = Field(description="The sub-question. Refer to the answer of an earlier sub-question as [answer N].")
    depends_on: list[int] = Field(default_factory=list, description="Numbers of earlier sub-questions it needs.")


class Decomposition(ModelFacing):
    """SRAG's decomposition of a multi-hop question into sub-questions with dependencies."""

    instructions: ClassVar[str] = (
        "The question broken into the sub-questions needed to answer it, each answerable from one "
        "passage, in an order in which each can be answered."
    )

    sub_questions: list[SubQuestion] = Field(description="Sub-questions in the order they can be answered.")


class Triplet(ModelFacing):
    instructions: ClassVar[str] = "One fact stated by the passage."

    subject: str
    predicate: str
    object: str
    relevance: float = Field(default=1.0, ge=0.0, le=1.0, description="Relevance to the sub-question, 0 to 1.")


class Triplets(ModelFacing):
    """SRAG's (subject, predicate, object) facts extracted from one passage."""

    instructions: ClassVar[str] = (
        "The facts stated by the passage that bear on the sub-question, as (subject, predicate, object) "
        "triplets; none if the passage says nothing relevant."
    )

    triplets: list[Triplet] = Field(default_factory=list)


class Route(ModelFacing):
    """SRAG's optional router: does the question need several hops?"""

    instructions: ClassVar[str] = "Whether answering the question needs facts from more than one passage."

    multi_hop: bool = Field(description="True if answering needs facts from more than one passage.")


class QueryRewrites(ModelFacing):
    """ARAGOG's multi-query retrieval: other phrasings of a search query."""

    instructions: ClassVar[str] = "Other ways to phrase a search query, to retrieve with each of them."

    queries: list[str] = Field(description="Rewrites of the query: each a short search query for the same need.")


class PassageRating(ModelFacing):
    """One passage's relevance, by its position in the list the model was shown."""

    passage: int = Field(description="The passage's number in the list, from 1.")
    relevance: float = Field(ge=0.0, le=1.0, description="How relevant the passage is to the query, 0 to 1.")


class PassageRatings(ModelFacing):
    """ARAGOG's LLM reranking: the model's relevance rating of each retrieved passage."""

    instructions: ClassVar[str] = "The relevance of each numbered passage to the query."

    ratings: list[PassageRating] = Field(description="One rating per passage.")


FALLBACKS: dict[type[BaseModel], Callable[[str], BaseModel]] = {
    Sufficiency: lambda q: Sufficiency(is_sufficient=False, missing_info="", confidence=0.0),
    Reformulation: lambda q: Reformulation(query=q),
    SubAnswer: lambda q: SubAnswer(answer=NO_RELEVANT_INFORMATION, confidence=0.0),
    Decomposition: lambda q: Decomposition(sub_questions=[SubQuestion(id=1, question=q)]),
    Triplets: lambda q: Triplets(triplets=[]),
    Route: lambda q: Route(multi_hop=True),
    QueryRewrites: lambda q: QueryRewrites(queries=[]),
    PassageRatings: lambda q: PassageRatings(ratings=[]),
}


# ---------------------------------------------------------------------------------------------
# Calling a model for a structured answer


def _problem(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


class _RetryPolicy(Generic[T]):
    """The one retry policy of a structured call, sync and async alike: two attempts, then the
    schema's fallback (:data:`FALLBACKS`) with the last attempt's problem.

    An attempt fails on a reply that is no valid ``schema`` object and on any error of the call
    (invalid JSON, a refusal, a provider error), except :class:`BudgetExceeded`: no call was made
    and none will be, so there is nothing to retry or fall back from.

    The second attempt asks through a forced tool call instead of the provider's default (see
    :func:`_runnables`).
    """

    attempts_per_call = 2

    def __init__(self, schema: type[T], question: str) -> None:
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
        return FALLBACKS[self.schema](self.question), self.problem  # type: ignore[return-value]


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
    forced = model.with_structured_output(schema, include_raw=True, method="function_calling")
    return [first, forced]


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
