"""The backbone: every request a graph makes of its model, as a typed call.

A graph never writes a prompt itself. It asks its backbone for a :class:`Step` ("answer this
question from these passages", "is this evidence sufficient?") and runs it, sync or async. Two
backbones implement the same calls:

- :class:`ChatBackbone` writes the prompts of :mod:`arag_graph.llm.prompts` for a real chat model and
  reads its replies (structured outputs through :mod:`arag_graph.llm.structured`);
- :class:`arag_graph.llm.offline.OfflineBackbone` answers with the offline policy's documented rules,
  straight from the typed arguments. It never sees, let alone parses, a prompt, so prompts stay free
  text written for real models.

The agent loop is the one place where a chat model sees the conversation itself (tool calls and
their results); there the offline policy is an ordinary tool-calling ``BaseChatModel``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool

from arag_graph.core.errors import BudgetExceeded
from arag_graph.llm import prompts
from arag_graph.llm.likelihood import content_logprobs, target_logprob
from arag_graph.llm.prompts import chain_text, numbered_passages, passages_text, sub_queries_text
from arag_graph.llm.structured import (
    NO_RELEVANT_INFORMATION,
    Decomposition,
    PassageRatings,
    QueryRewrites,
    Reformulation,
    Route,
    SubAnswer,
    Sufficiency,
    Triplets,
    structured_runnable,
)
from arag_graph.retrievers.passages import Passage

T = TypeVar("T")
_TOP_LOGPROBS = 20
"""Runners-up asked per token when scoring "No relevant information found" (OpenAI allows 20)."""
_SCORE_TOKENS = 16
"""Enough tokens to spell "No relevant information found" out in any tokenizer we know."""
Structured = tuple[T, str | None]
"""A structured answer and, when the model's reply could not be used, why (the value is then the
schema's safe fallback)."""


@dataclass(frozen=True)
class Step(Generic[T]):
    """One request to the model: a runnable and its input, run by the graph sync or async."""

    runnable: Runnable[Any, T]
    input: Any = None

    def invoke(self, config: RunnableConfig | None = None) -> T:
        return self.runnable.invoke(self.input, config)

    async def ainvoke(self, config: RunnableConfig | None = None) -> T:
        return await self.runnable.ainvoke(self.input, config)


def bind_one_tool_per_turn(model: BaseChatModel, tools: Sequence[BaseTool]) -> Runnable[Any, Any]:
    """Bind ``tools``, asking the provider for at most one tool call per turn where it can.

    A-RAG's loop is one action per iteration. Providers that do not know ``parallel_tool_calls``
    get the tools alone (the graph still runs extra calls in order and counts each); models that
    cannot bind tools at all (scripted test models) are used as they are.

    ``tool_choice="auto"`` is said explicitly although it is OpenAI's default once tools are given:
    llama-cpp-python's server (``--chat_format chatml-function-calling``) shows the model the tools
    only when a request names a tool choice, and without it the model never calls one
    (docs/guide/local-models.md).
    """
    if not tools:
        return model
    try:
        return model.bind_tools(tools, tool_choice="auto", parallel_tool_calls=False)
    except TypeError:
        pass
    except NotImplementedError:
        return model
    try:
        return model.bind_tools(tools)
    except NotImplementedError:
        return model


class Backbone(ABC):
    """What the graphs ask of a model (see the module docstring)."""

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model

    def agent(self, messages: Sequence[AnyMessage], tools: Sequence[BaseTool], system_prompt: str) -> Step[AIMessage]:
        """The agent's next turn: a tool call or an answer."""
        bound = bind_one_tool_per_turn(self.model, list(tools))
        return Step(bound, [SystemMessage(system_prompt), *messages])

    @abstractmethod
    def synthesis(self, messages: Sequence[AnyMessage], system_prompt: str) -> Step[AIMessage]:
        """The forced final answer once the step cap or token budget is reached (no tools)."""

    @abstractmethod
    def answer(
        self, question: str, passages: Sequence[Passage], chain: Sequence[Mapping[str, Any]] = ()
    ) -> Step[AIMessage]:
        """An answer from the given passages, citing chunk IDs (CoRAG: with its chain's sub-queries
        and sub-answers, ``chain``)."""

    @abstractmethod
    def answer_from_facts(self, question: str, facts: str, sources: Sequence[Passage]) -> Step[AIMessage]:
        """SRAG's answer from a fact table (``facts`` as rendered; ``sources`` the chunks it cites)."""

    @abstractmethod
    def direct(self, question: str) -> Step[AIMessage]:
        """An answer from the model's own knowledge."""

    @abstractmethod
    def hyde(self, question: str) -> Step[str]:
        """A hypothetical answer passage to embed instead of the question (ARAGOG's HyDE)."""

    @abstractmethod
    def query_rewrites(self, query: str, n: int) -> Step[Structured[QueryRewrites]]:
        """ARAGOG's multi-query retrieval: ``n`` other phrasings of ``query``."""

    @abstractmethod
    def passage_ratings(self, query: str, passages: Sequence[Passage]) -> Step[Structured[PassageRatings]]:
        """ARAGOG's LLM reranking: the relevance of each passage to ``query`` (by its number, from 1)."""

    @abstractmethod
    def sufficiency(self, question: str, passages: Sequence[Passage]) -> Step[Structured[Sufficiency]]:
        """CoRAG's check: do the passages so far suffice to answer?"""

    @abstractmethod
    def reformulation(
        self,
        question: str,
        passages: Sequence[Passage],
        chain: Sequence[Mapping[str, Any]],
        missing: str,
        *,
        sample: int = 0,
    ) -> Step[Structured[Reformulation]]:
        """CoRAG's next query, aimed at what is missing.

        ``sample`` numbers the sampled chain that asks (0: the greedy one). A chat model is sampled
        through its temperature and ignores it; the offline policy, which has no temperature,
        varies its rule by it so that the decoding strategies still see different chains.
        """

    @abstractmethod
    def sub_answer(self, query: str, passages: Sequence[Passage]) -> Step[Structured[SubAnswer]]:
        """CoRAG's sub-answer of one chain step: what the step's documents say about its query."""

    def no_information_logprob(self, query: str, passages: Sequence[Passage]) -> Step[float | None]:
        """CoRAG's penalty as the paper has it: log P("No relevant information found" | query, passages).

        None when the model gives no token log-probabilities (the default: the offline policy and
        providers without them); CoRAG then falls back to the sub-answer's confidence.
        """
        return Step(RunnableLambda(lambda _: None, name="no_information_logprob"))

    @abstractmethod
    def decomposition(self, question: str, limit: int) -> Step[Structured[Decomposition]]:
        """SRAG's sub-questions with their dependencies."""

    @abstractmethod
    def route(self, question: str) -> Step[Structured[Route]]:
        """SRAG's router: does the question need several hops?"""

    @abstractmethod
    def triplets(self, question: str, passage: Passage) -> Step[Structured[Triplets]]:
        """SRAG's (subject, predicate, object) facts of one passage that bear on ``question``."""


class ChatBackbone(Backbone):
    """A real chat model, asked with the prompts of :mod:`arag_graph.llm.prompts`."""

    def _ask(self, text: str) -> Step[AIMessage]:
        return Step(self.model, [HumanMessage(text)])

    def _structured(self, schema: type[Any], question: str, text: str) -> Step[Any]:
        return Step(structured_runnable(self.model, schema, question), [HumanMessage(text)])

    def synthesis(self, messages: Sequence[AnyMessage], system_prompt: str) -> Step[AIMessage]:
        # The instruction goes to the model only; the thread keeps the conversation as it was.
        request = [SystemMessage(system_prompt), *messages, HumanMessage(prompts.SYNTHESIS_INSTRUCTION)]
        return Step(self.model, request)

    def answer(
        self, question: str, passages: Sequence[Passage], chain: Sequence[Mapping[str, Any]] = ()
    ) -> Step[AIMessage]:
        if chain:
            text = prompts.CHAIN_ANSWER_PROMPT.format(
                context=passages_text(passages), chain=sub_queries_text(chain), question=question
            )
            return self._ask(text)
        return self._ask(prompts.CONTEXT_ANSWER_PROMPT.format(context=passages_text(passages), question=question))

    def answer_from_facts(self, question: str, facts: str, sources: Sequence[Passage]) -> Step[AIMessage]:
        return self._ask(prompts.FACTS_ANSWER_PROMPT.format(facts=facts, question=question))

    def direct(self, question: str) -> Step[AIMessage]:
        return self._ask(prompts.DIRECT_ANSWER_PROMPT.format(question=question))

    def hyde(self, question: str) -> Step[str]:
        reply_text = self.model.with_config(run_name="hyde_model") | (lambda reply: reply.text.strip() or question)
        return Step(reply_text, [HumanMessage(prompts.HYDE_PROMPT.format(question=question))])

    def query_rewrites(self, query: str, n: int) -> Step[Structured[QueryRewrites]]:
        return self._structured(QueryRewrites, query, prompts.MULTI_QUERY_PROMPT.format(n=n, query=query))

    def passage_ratings(self, query: str, passages: Sequence[Passage]) -> Step[Structured[PassageRatings]]:
        text = prompts.RERANK_PROMPT.format(query=" ".join(query.split()), passages=numbered_passages(passages))
        return self._structured(PassageRatings, query, text)

    def sufficiency(self, question: str, passages: Sequence[Passage]) -> Step[Structured[Sufficiency]]:
        text = prompts.SUFFICIENCY_PROMPT.format(question=question, passages=passages_text(passages))
        return self._structured(Sufficiency, question, text)

    def reformulation(
        self,
        question: str,
        passages: Sequence[Passage],
        chain: Sequence[Mapping[str, Any]],
        missing: str,
        *,
        sample: int = 0,
    ) -> Step[Structured[Reformulation]]:
        missing = " ".join(missing.split())
        text = prompts.REFORMULATE_PROMPT.format(
            question=question,
            chain=chain_text(chain),
            missing=f"Still missing: {missing}" if missing else "What is missing was not stated.",
            passages=passages_text(passages),
        )
        return self._structured(Reformulation, question, text)

    def sub_answer(self, query: str, passages: Sequence[Passage]) -> Step[Structured[SubAnswer]]:
        text = prompts.SUB_ANSWER_PROMPT.format(
            query=" ".join(query.split()), passages=passages_text(passages), no_information=NO_RELEVANT_INFORMATION
        )
        return self._structured(SubAnswer, query, text)

    def no_information_logprob(self, query: str, passages: Sequence[Passage]) -> Step[float | None]:
        """One plain-text sub-answer request with ``logprobs`` on (:mod:`arag_graph.llm.likelihood`).

        Asked only of models that take a ``logprobs`` setting (ChatOpenAI: OpenAI, vLLM and other
        compatible servers); a failed request or a reply without logprobs gives None, never an error
        (an operator's cap still stops the run).
        """
        if "logprobs" not in type(self.model).model_fields:
            return super().no_information_logprob(query, passages)
        target = NO_RELEVANT_INFORMATION
        text = prompts.SUB_ANSWER_TEXT_PROMPT.format(
            query=" ".join(query.split()), passages=passages_text(passages), no_information=target
        )
        scorer = self.model.bind(logprobs=True, top_logprobs=_TOP_LOGPROBS, max_tokens=_SCORE_TOKENS)

        def read(reply: AIMessage) -> float | None:
            tokens = content_logprobs(reply.response_metadata)
            return None if tokens is None else target_logprob(tokens, target)

        def call(messages: list[AnyMessage], config: RunnableConfig) -> float | None:
            try:
                return read(scorer.invoke(messages, config))
            except BudgetExceeded:
                raise
            except Exception:
                return None

        async def acall(messages: list[AnyMessage], config: RunnableConfig) -> float | None:
            try:
                return read(await scorer.ainvoke(messages, config))
            except BudgetExceeded:
                raise
            except Exception:
                return None

        return Step(RunnableLambda(call, afunc=acall, name="no_information_logprob"), [HumanMessage(text)])

    def decomposition(self, question: str, limit: int) -> Step[Structured[Decomposition]]:
        return self._structured(
            Decomposition, question, prompts.DECOMPOSE_PROMPT.format(question=question, limit=limit)
        )

    def route(self, question: str) -> Step[Structured[Route]]:
        return self._structured(Route, question, prompts.ROUTE_PROMPT.format(question=question))

    def triplets(self, question: str, passage: Passage) -> Step[Structured[Triplets]]:
        text = prompts.EXTRACT_PROMPT.format(
            question=question,
            title=" ".join((passage.title or "").split()) or "(untitled)",
            passage=passage.text.strip(),
        )
        return self._structured(Triplets, question, text)
