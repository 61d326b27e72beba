"""Structured outputs for CoRAG and SRAG: schemas, robust calls, and the offline policy's rules.

With a real model we use the provider's structured output (``with_structured_output``). Models
sometimes return invalid JSON or miss fields; :func:`structured_call` retries once and then falls
back to a documented safe value (not sufficient, a single sub-question, no triplets), so a bad reply
never crashes a run.

The offline policy has no model to ask, so each schema gets a deterministic rule, documented on
the schema (``Offline rule:``) and implemented in :func:`offline_structured`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arag_graph.offline import content_words, salient_spans

T = TypeVar("T", bound=BaseModel)


# ---------------------------------------------------------------------------------------------
# Schemas


def _model_facing_schema(schema: dict[str, Any], cls: type) -> None:
    """Make the JSON schema a model receives say only what the model needs.

    Pydantic would send the class docstring (written for developers, with the offline policy's
    rules: a real model told to emit "one triplet per sentence" would do so) as the description,
    and each field's default. Defaults stay in the Python model, which validates lenient replies;
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

    Offline rule: the question's salient spans (names, years) and content words are looked up in
    the retrieved text; sufficient when every salient span and at least 80% of the content words are
    found; ``missing_info`` lists what was not found; ``confidence`` is the fraction found;
    ``reasoning`` says which of them were found.

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
    """CoRAG's next query, aimed at the missing information.

    Offline rule: the missing information (the question's names and words the passages lack),
    followed by the question's other salient names, which anchor it; the question itself when
    nothing is said to be missing. Not the whole question again: its words would make every
    reformulation a near-repeat of the first query, which CoRAG's loop detection stops.
    """

    instructions: ClassVar[str] = "The next search query, aimed at the information that is still missing."

    query: str = Field(description="A search query for the missing information.")


class SubQuestion(ModelFacing):
    instructions: ClassVar[str] = "One step of the decomposition."

    id: int = Field(description="1-based number of the sub-question.")
    question: str = Field(description="The sub-question. Refer to the answer of an earlier sub-question as [answer N].")
    depends_on: list[int] = Field(default_factory=list, description="Numbers of earlier sub-questions it needs.")


class Decomposition(ModelFacing):
    """SRAG's decomposition of a multi-hop question into sub-questions with dependencies.

    Offline rule: a question in which "and"/"or" joins two named entities ("Were A and B born in the
    same year?", "Which came first, A or B?") is a comparison and becomes one independent
    sub-question per entity: the question with the pair replaced by that entity (and "both"/"either"
    dropped), so each keeps what is being compared ("Were A born in the same year?"). Any other
    question is a single sub-question.
    """

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
    """SRAG's (subject, predicate, object) facts extracted from one passage.

    Offline rule: one triplet per sentence of the passage: subject = the passage title, predicate =
    "states", object = the sentence, relevance = the share of the sub-question's content words found
    in the triplet (its subject and its sentence: "He was born in 1950" of the passage "Ed Wood" is
    about Ed Wood).
    """

    instructions: ClassVar[str] = (
        "The facts stated by the passage that bear on the sub-question, as (subject, predicate, object) "
        "triplets; none if the passage says nothing relevant."
    )

    triplets: list[Triplet] = Field(default_factory=list)


class Route(ModelFacing):
    """SRAG's optional router: does the question need several hops?

    Offline rule: multi-hop when the decomposition rule gives more than one sub-question or the
    question names more than one entity.
    """

    instructions: ClassVar[str] = "Whether answering the question needs facts from more than one passage."

    multi_hop: bool = Field(description="True if answering needs facts from more than one passage.")


FALLBACKS: dict[type[BaseModel], Callable[[str], BaseModel]] = {
    Sufficiency: lambda q: Sufficiency(is_sufficient=False, missing_info="", confidence=0.0),
    Reformulation: lambda q: Reformulation(query=q),
    Decomposition: lambda q: Decomposition(sub_questions=[SubQuestion(id=1, question=q)]),
    Triplets: lambda q: Triplets(triplets=[]),
    Route: lambda q: Route(multi_hop=True),
}


# ---------------------------------------------------------------------------------------------
# Calling a model for a structured answer


def structured_call(
    model: BaseChatModel,
    schema: type[T],
    messages: Sequence[BaseMessage],
    *,
    question: str,
    config: RunnableConfig | None = None,
) -> tuple[T, str | None]:
    """Ask ``model`` for a ``schema`` object; retry once, then fall back. Returns (value, problem)."""
    runnable = model.with_structured_output(schema, include_raw=True)
    problem: str | None = None
    for _attempt in range(2):
        try:
            result = runnable.invoke(list(messages), config)
        except Exception as exc:  # invalid JSON, refusals, provider errors
            problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            continue
        value, problem = _parsed(result, schema)
        if value is not None:
            return value, None
    return FALLBACKS[schema](question), problem  # type: ignore[return-value]


async def astructured_call(
    model: BaseChatModel,
    schema: type[T],
    messages: Sequence[BaseMessage],
    *,
    question: str,
    config: RunnableConfig | None = None,
) -> tuple[T, str | None]:
    """Async twin of :func:`structured_call`."""
    runnable = model.with_structured_output(schema, include_raw=True)
    problem: str | None = None
    for _attempt in range(2):
        try:
            result = await runnable.ainvoke(list(messages), config)
        except Exception as exc:
            problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            continue
        value, problem = _parsed(result, schema)
        if value is not None:
            return value, None
    return FALLBACKS[schema](question), problem  # type: ignore[return-value]


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


# ---------------------------------------------------------------------------------------------
# The offline policy's rules


def _prompt_field(messages: Sequence[BaseMessage], label: str) -> str:
    """Read ``Label: value`` (last occurrence, up to a blank line) from our prompts."""
    text = "\n".join(m.text for m in messages if isinstance(m, HumanMessage))
    found = re.findall(rf"^{label}:\s*(.*?)(?:\n\s*\n|\Z)", text, re.MULTILINE | re.DOTALL)
    return found[-1].strip() if found else ""


def _found(needle: str, haystack: str) -> bool:
    return needle.lower() in haystack


def offline_sufficiency(question: str, context: str) -> Sufficiency:
    text = context.lower()
    spans = salient_spans(question, limit=8)
    words = content_words(question)
    missing_spans = [s for s in spans if not _found(s, text)]
    found_words = {w for w in words if w in text}
    share = (len(found_words) / len(words)) if words else 1.0
    sufficient = not missing_spans and share >= 0.8
    missing = missing_spans or sorted(words - found_words)[:5]
    found = [s for s in spans if s not in missing_spans] or sorted(found_words)[:5]
    reasoning = f"The passages mention {', '.join(found)}." if found else "The passages mention no question term."
    return Sufficiency(
        reasoning=reasoning,
        is_sufficient=sufficient,
        missing_info="" if sufficient else ", ".join(missing),
        confidence=round(share if not missing_spans else share * 0.5, 3),
    )


def offline_reformulation(question: str, missing: str) -> Reformulation:
    missing = " ".join(missing.split())
    if not missing:
        return Reformulation(query=question)
    anchors = [s for s in salient_spans(question, limit=8) if s.lower() not in missing.lower()]
    return Reformulation(query=" ".join([missing, *anchors]))


def offline_decomposition(question: str) -> Decomposition:
    pair = _compared_pair(question)
    if pair is None:
        return Decomposition(sub_questions=[SubQuestion(id=1, question=question)])
    joined, entities = pair
    sub_questions = []
    for i, entity in enumerate(entities, 1):
        text = question.replace(joined, entity, 1)
        text = re.sub(r"\s*\b(?:both|either)\b", "", text, flags=re.IGNORECASE)
        sub_questions.append(SubQuestion(id=i, question=" ".join(text.split())))
    return Decomposition(sub_questions=sub_questions)


def _compared_pair(question: str) -> tuple[str, tuple[str, str]] | None:
    """The text "A and B" (or "A or B") of a comparison and its two entities, if the question has one.

    Requiring the conjunction to sit between two names keeps out "in or around Leland, North
    Carolina", where "or" joins two prepositions and the two names are one place.
    """
    spans = [s for s in salient_spans(question, limit=6) if not s.isdigit()]
    for a in spans:
        for b in spans:
            if a == b:
                continue
            found = re.search(rf"{re.escape(a)},?\s+(?:and|or)\s+(?:the\s+)?{re.escape(b)}", question)
            if found:
                return found.group(0), (a, b)
    return None


def offline_triplets(sub_question: str, title: str, sentences: Sequence[str]) -> Triplets:
    words = content_words(sub_question)
    triplets = []
    for sentence in sentences:
        overlap = len(words & content_words(f"{title} {sentence}")) / len(words) if words else 0.0
        triplets.append(Triplet(subject=title, predicate="states", object=sentence, relevance=round(overlap, 3)))
    return Triplets(triplets=triplets)


def offline_structured(policy: Any, schema: Any, include_raw: bool = False) -> Runnable[Any, Any]:
    """The offline policy's ``with_structured_output``: a rule per schema (see each schema's doc)."""

    def run(messages: Any) -> Any:
        msgs = _as_messages(messages)
        question = _prompt_field(msgs, "Question")
        if schema is Sufficiency:
            value: BaseModel = offline_sufficiency(question, _prompt_field(msgs, "Passages"))
        elif schema is Reformulation:
            missing = _prompt_field(msgs, "Missing")
            value = offline_reformulation(question, missing)
        elif schema is Decomposition:
            value = offline_decomposition(question)
        elif schema is Route:
            value = Route(multi_hop=len(offline_decomposition(question).sub_questions) > 1
                          or len(salient_spans(question)) > 1)  # fmt: skip
        elif schema is Triplets:
            title = _prompt_field(msgs, "Title")
            passage = _prompt_field(msgs, "Passage")
            from arag_graph.sentences import split_sentences

            value = offline_triplets(question, title, split_sentences(passage))
        else:
            raise NotImplementedError(
                f"the offline policy has no rule for {getattr(schema, '__name__', schema)!r}; use a real model"
            )
        return {"raw": None, "parsed": value, "parsing_error": None} if include_raw else value

    return RunnableLambda(run, name=f"offline_{getattr(schema, '__name__', 'structured')}")


def _as_messages(value: Any) -> list[BaseMessage]:
    if isinstance(value, str):
        return [HumanMessage(value)]
    if hasattr(value, "to_messages"):
        return list(value.to_messages())
    return list(value)
