"""What CoRAG asks of its model: the check, the next query, a step's sub-answer and its penalty, and the
final answer from the chain; for a chat model and by the offline policy's rules, side by side.

With a real model a bad structured reply is retried once and then replaced by the schema's fallback
(:mod:`arag_graph.corag.schemas`). The offline policy has no temperature, so CoRAG's sampled chains
(best-of-N, tree search) get fixed variants of its reformulation rule instead
(:func:`offline_reformulation`): every decoding strategy runs deterministically offline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda

from arag_graph.corag import prompts
from arag_graph.corag.likelihood import content_logprobs, target_logprob
from arag_graph.corag.prompts import chain_text, sub_queries_text
from arag_graph.corag.schemas import NO_RELEVANT_INFORMATION, Reformulation, SubAnswer, Sufficiency
from arag_graph.core.errors import BudgetExceeded
from arag_graph.core.sentences import split_sentences
from arag_graph.llm.steps import Step, Structured, rule_step
from arag_graph.offline.policy import OfflinePolicy
from arag_graph.offline.rules import bridge_names, content_words, salient_spans
from arag_graph.retrievers.passages import Passage
from arag_graph.run.model import ChatRetrievalModel, OfflineRetrievalModel, RetrievalModel
from arag_graph.run.prompts import passages_text

__all__ = [
    "SAMPLED_HOPS",
    "ChatCorag",
    "CoragModel",
    "OfflineCorag",
    "corag_model",
    "offline_reformulation",
    "offline_sub_answer",
    "offline_sufficiency",
]

_TOP_LOGPROBS = 20
"""Runners-up asked per token when scoring "No relevant information found" (OpenAI allows 20)."""
_SCORE_TOKENS = 16
"""Enough tokens to spell "No relevant information found" out in any tokenizer we know."""
SAMPLED_HOPS = 8
"""Names a sampled CoRAG chain may hop through (see :func:`offline_reformulation`)."""


class CoragModel(RetrievalModel, Protocol):
    """CoRAG's requests, besides the shared ones (HyDE, the retrieval techniques)."""

    def answer(
        self, question: str, passages: Sequence[Passage], chain: Sequence[Mapping[str, Any]] = ()
    ) -> Step[AIMessage]:
        """An answer from the passages, with the chain's sub-queries and sub-answers (``chain``)."""
        ...

    def sufficiency(self, question: str, passages: Sequence[Passage]) -> Step[Structured[Sufficiency]]:
        """The check: do the passages so far suffice to answer?"""
        ...

    def reformulation(
        self,
        question: str,
        passages: Sequence[Passage],
        chain: Sequence[Mapping[str, Any]],
        missing: str,
        *,
        sample: int = 0,
    ) -> Step[Structured[Reformulation]]:
        """The next query, aimed at what is missing.

        ``sample`` numbers the sampled chain that asks (0: the greedy one). A chat model is sampled
        through its temperature and ignores it; the offline policy, which has no temperature,
        varies its rule by it so that the decoding strategies still see different chains.
        """
        ...

    def sub_answer(self, query: str, passages: Sequence[Passage]) -> Step[Structured[SubAnswer]]:
        """The sub-answer of one chain step: what the step's documents say about its query."""
        ...

    def no_information_logprob(self, query: str, passages: Sequence[Passage]) -> Step[float | None]:
        """The paper's penalty: log P("No relevant information found" | query, passages).

        None when the model gives no token log-probabilities (the offline policy and providers
        without them); CoRAG then falls back to the sub-answer's confidence.
        """
        ...


def _no_logprob() -> Step[float | None]:
    return Step(RunnableLambda(lambda _: None, name="no_information_logprob"))


class ChatCorag(ChatRetrievalModel):
    """A real chat model, asked with the prompts of :mod:`arag_graph.corag.prompts`."""

    def answer(
        self, question: str, passages: Sequence[Passage], chain: Sequence[Mapping[str, Any]] = ()
    ) -> Step[AIMessage]:
        if chain:
            text = prompts.CHAIN_ANSWER_PROMPT.format(
                context=passages_text(passages), chain=sub_queries_text(chain), question=question
            )
            return self.ask(text)
        return super().answer(question, passages)

    def sufficiency(self, question: str, passages: Sequence[Passage]) -> Step[Structured[Sufficiency]]:
        text = prompts.SUFFICIENCY_PROMPT.format(question=question, passages=passages_text(passages))
        return self.structured(Sufficiency, question, text)

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
        return self.structured(Reformulation, question, text)

    def sub_answer(self, query: str, passages: Sequence[Passage]) -> Step[Structured[SubAnswer]]:
        text = prompts.SUB_ANSWER_PROMPT.format(
            query=" ".join(query.split()), passages=passages_text(passages), no_information=NO_RELEVANT_INFORMATION
        )
        return self.structured(SubAnswer, query, text)

    def no_information_logprob(self, query: str, passages: Sequence[Passage]) -> Step[float | None]:
        """One plain-text sub-answer request with ``logprobs`` on (:mod:`arag_graph.corag.likelihood`).

        Asked only of models that take a ``logprobs`` setting (ChatOpenAI: OpenAI, vLLM and other
        compatible servers); a failed request or a reply without logprobs gives None, never an error
        (an operator's cap still stops the run).
        """
        if "logprobs" not in type(self.model).model_fields:
            return _no_logprob()
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


class OfflineCorag(OfflineRetrievalModel):
    """The offline policy's rules for CoRAG's requests (below): no model, no prompt, never a fallback."""

    def answer(
        self, question: str, passages: Sequence[Passage], chain: Sequence[Mapping[str, Any]] = ()
    ) -> Step[AIMessage]:
        return self.extractive(question, passages)  # the rule reads the passages; the chain adds no words

    def sufficiency(self, question: str, passages: Sequence[Passage]) -> Step[Structured[Sufficiency]]:
        return rule_step("sufficiency", lambda: (offline_sufficiency(question, passages_text(passages)), None))

    def reformulation(
        self,
        question: str,
        passages: Sequence[Passage],
        chain: Sequence[Mapping[str, Any]],
        missing: str,
        *,
        sample: int = 0,
    ) -> Step[Structured[Reformulation]]:
        def reformulate() -> tuple[Reformulation, None]:
            # A fixed-length chain asks no check: what is missing is then what the check would have said.
            gap = missing if missing.strip() else offline_sufficiency(question, passages_text(passages)).missing_info
            return offline_reformulation(question, gap, passages, sample=sample), None

        return rule_step("reformulation", reformulate)

    def sub_answer(self, query: str, passages: Sequence[Passage]) -> Step[Structured[SubAnswer]]:
        return rule_step("sub_answer", lambda: (offline_sub_answer(query, passages), None))

    def no_information_logprob(self, query: str, passages: Sequence[Passage]) -> Step[float | None]:
        return _no_logprob()


def corag_model(model: BaseChatModel) -> CoragModel:
    """The offline policy answers by rule; every other model through prompts."""
    return OfflineCorag(model) if isinstance(model, OfflinePolicy) else ChatCorag(model)


# ---------------------------------------------------------------------------------------------
# The offline rules of CoRAG's requests


def offline_sufficiency(question: str, context: str) -> Sufficiency:
    """CoRAG's check: the question's salient spans (names, years) and content words are looked up in
    the retrieved text; sufficient when every salient span and at least 80% of the content words are
    found; ``missing_info`` lists what was not found; ``confidence`` is the fraction found (halved
    when a name is missing); ``reasoning`` says which of them were found."""
    text = context.lower()
    spans = salient_spans(question, limit=8)
    words = content_words(question)
    missing_spans = [s for s in spans if s.lower() not in text]
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


def offline_reformulation(
    question: str, missing: str, passages: Sequence[Passage] = (), *, sample: int = 0
) -> Reformulation:
    """CoRAG's next query: the missing information followed by the question's other salient names,
    which anchor it; the question itself when nothing is said to be missing. Not the whole question
    again: its words would make every reformulation a near-repeat of the first query, which CoRAG's
    loop detection stops.

    The policy has no temperature, so the decoding strategies' *sampled* chains (``sample`` = k > 0:
    best-of-N's chains after the first, the tree's other candidates and its rollouts) get a fixed
    variant instead: a hop through the k-th name (cyclically) that the passages give and the question
    does not mention (:func:`bridge_names`, the agent's second-hop rule), followed by the missing
    information; without such a name, the k-th missing term (cyclically) with the anchors. The same
    chain therefore gets the same queries on every run."""
    missing = " ".join(missing.split())
    if not missing:
        return Reformulation(query=question)
    anchors = [s for s in salient_spans(question, limit=8) if s.lower() not in missing.lower()]
    if sample <= 0:
        return Reformulation(query=" ".join([missing, *anchors]))
    chunks = [(p.title or "", split_sentences(p.text)) for p in passages]
    names = bridge_names(question, chunks, limit=SAMPLED_HOPS)
    if names:
        return Reformulation(query=f"{names[(sample - 1) % len(names)]} {missing}")
    terms = [t.strip() for t in missing.split(",") if t.strip()] or [missing]
    return Reformulation(query=" ".join([terms[(sample - 1) % len(terms)], *anchors]))


def offline_sub_answer(query: str, passages: Sequence[Passage]) -> SubAnswer:
    """CoRAG's sub-answer of a step: the sentence of the step's passages sharing most content words
    with its query (the earlier passage and sentence on ties), followed by its chunk ID; its
    confidence is the share of the query's content words found in those passages. When no sentence
    shares a word with the query: "No relevant information found", confidence 0."""
    words = content_words(query)
    best: tuple[int, str, str] | None = None
    found: set[str] = set()
    for p in passages:
        for sentence in split_sentences(p.text):
            shared = words & content_words(sentence)
            found |= shared
            if shared and (best is None or len(shared) > best[0]):
                best = (len(shared), " ".join(sentence.split()), p.chunk_id)
    if best is None:
        return SubAnswer(answer=NO_RELEVANT_INFORMATION, confidence=0.0)
    _, sentence, chunk_id = best
    return SubAnswer(answer=f"{sentence} [{chunk_id}]", confidence=round(len(found) / len(words), 3))
