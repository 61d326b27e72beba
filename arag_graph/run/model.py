"""What every retrieving graph asks of its model: an answer from passages, HyDE's passage, and the
model's parts of ARAGOG's multi-query and rerank techniques.

Each graph family's model extends :class:`RetrievalModel` with its own requests (``corag/model.py``:
the check, the reformulation, ...). Two implementations of each, side by side:

- the chat implementation writes the prompts (:mod:`arag_graph.run.prompts`) for a real chat model
  and reads its replies (structured outputs through :func:`arag_graph.llm.structured.structured_runnable`);
- the offline implementation answers with the offline policy's documented rules, straight from the
  typed arguments. It never sees, let alone parses, a prompt, so prompts stay free text written for
  real models.

:func:`retrieval_model` picks one for a run's chat model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage

from arag_graph.llm.steps import Step, Structured, rule_step
from arag_graph.llm.structured import structured_runnable
from arag_graph.offline.policy import AnswerStyle, OfflinePolicy
from arag_graph.offline.rules import content_words, extractive_answer, salient_spans
from arag_graph.retrievers.passages import Passage
from arag_graph.run import prompts
from arag_graph.run.prompts import numbered_passages, passages_text
from arag_graph.run.schemas import PassageRating, PassageRatings, QueryRewrites

__all__ = [
    "ChatRetrievalModel",
    "OfflineRetrievalModel",
    "RetrievalModel",
    "offline_ratings",
    "offline_rewrites",
    "retrieval_model",
]


class RetrievalModel(Protocol):
    """The requests every retrieving graph makes of its model."""

    def answer(self, question: str, passages: Sequence[Passage]) -> Step[AIMessage]:
        """An answer from the given passages, citing chunk IDs."""
        ...

    def hyde(self, question: str) -> Step[str]:
        """A hypothetical answer passage to embed instead of the question (ARAGOG's HyDE)."""
        ...

    def query_rewrites(self, query: str, n: int) -> Step[Structured[QueryRewrites]]:
        """ARAGOG's multi-query retrieval: ``n`` other phrasings of ``query``."""
        ...

    def passage_ratings(self, query: str, passages: Sequence[Passage]) -> Step[Structured[PassageRatings]]:
        """ARAGOG's LLM reranking: the relevance of each passage to ``query`` (by its number, from 1)."""
        ...


class ChatRetrievalModel:
    """A real chat model, asked with the prompts of :mod:`arag_graph.run.prompts`."""

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model

    def ask(self, text: str) -> Step[AIMessage]:
        """A plain request: ``text`` as the one human message."""
        return Step(self.model, [HumanMessage(text)])

    def structured(self, schema: type[Any], question: str, text: str) -> Step[Any]:
        """A structured request for ``schema`` (retried, then its fallback); ``question`` names what it is about."""
        return Step(structured_runnable(self.model, schema, question), [HumanMessage(text)])

    def answer(self, question: str, passages: Sequence[Passage]) -> Step[AIMessage]:
        return self.ask(prompts.CONTEXT_ANSWER_PROMPT.format(context=passages_text(passages), question=question))

    def hyde(self, question: str) -> Step[str]:
        reply_text = self.model.with_config(run_name="hyde_model") | (lambda reply: reply.text.strip() or question)
        return Step(reply_text, [HumanMessage(prompts.HYDE_PROMPT.format(question=question))])

    def query_rewrites(self, query: str, n: int) -> Step[Structured[QueryRewrites]]:
        return self.structured(QueryRewrites, query, prompts.MULTI_QUERY_PROMPT.format(n=n, query=query))

    def passage_ratings(self, query: str, passages: Sequence[Passage]) -> Step[Structured[PassageRatings]]:
        text = prompts.RERANK_PROMPT.format(query=" ".join(query.split()), passages=numbered_passages(passages))
        return self.structured(PassageRatings, query, text)


class OfflineRetrievalModel:
    """The offline policy's answers to the shared requests: no model, no prompt.

    Structured answers never fall back (the problem part is always None); HyDE searches with the
    question itself, since the policy cannot write a passage (HyDE off, in effect).
    """

    def __init__(self, policy: OfflinePolicy) -> None:
        self.model = policy
        self.index = policy.index
        self.answer_style: AnswerStyle = policy.answer_style

    def extractive(self, question: str, passages: Sequence[Passage]) -> Step[AIMessage]:
        """The policy's extractive answer from ``passages`` (the span the question asks for, and its chunk)."""
        evidence = [(p.chunk_id, p.text) for p in passages]
        titles = {p.chunk_id: p.title for p in passages}
        style = self.answer_style

        def answer() -> AIMessage:
            return AIMessage(content=extractive_answer(self.index, question, evidence, style=style, titles=titles))

        return rule_step("answer", answer)

    def answer(self, question: str, passages: Sequence[Passage]) -> Step[AIMessage]:
        return self.extractive(question, passages)

    def hyde(self, question: str) -> Step[str]:
        return rule_step("hyde", lambda: question)

    def query_rewrites(self, query: str, n: int) -> Step[Structured[QueryRewrites]]:
        return rule_step("query_rewrites", lambda: (offline_rewrites(query, n), None))

    def passage_ratings(self, query: str, passages: Sequence[Passage]) -> Step[Structured[PassageRatings]]:
        return rule_step("passage_ratings", lambda: (offline_ratings(query, passages), None))


def retrieval_model(model: BaseChatModel) -> RetrievalModel:
    """The offline policy answers by rule; every other model through prompts."""
    return OfflineRetrievalModel(model) if isinstance(model, OfflinePolicy) else ChatRetrievalModel(model)


# ---------------------------------------------------------------------------------------------
# The offline rules of the shared requests


def offline_rewrites(query: str, n: int) -> QueryRewrites:
    """ARAGOG's multi-query rewrites by rule, in this order: the query's salient spans (names, years)
    alone; its content words alone (question words and stop words dropped); then each salient span
    with the content words that are not part of it. Rewrites equal to the query or to an earlier
    rewrite are skipped; at most ``n``. The same query always gets the same rewrites."""
    spans = salient_spans(query, limit=8)
    words = [w for w in re.findall(r"\w+", query.lower()) if w in content_words(query)]
    candidates = [" ".join(spans), " ".join(dict.fromkeys(words))]
    for span in spans:
        inside = set(re.findall(r"\w+", span.lower()))
        candidates.append(" ".join([span, *(w for w in dict.fromkeys(words) if w not in inside)]))
    out: list[str] = []
    for c in candidates:
        c = " ".join(c.split())
        if c and c.casefold() != " ".join(query.split()).casefold() and c not in out:
            out.append(c)
    return QueryRewrites(queries=out[: max(0, n)])


def offline_ratings(query: str, passages: Sequence[Passage]) -> PassageRatings:
    """ARAGOG's LLM reranking by rule: a passage's relevance is the share of the query's content
    words found in its title and text (the overlap the other offline rules use); ties keep the
    retriever's order. A rule, not a model's judgement: it keeps rerank runnable offline (the grid's
    rerank row included) and is labelled as the offline policy's wherever runs are compared."""
    words = content_words(query)
    ratings = []
    for i, p in enumerate(passages, 1):
        found = words & content_words(f"{p.title or ''} {p.text}")
        ratings.append(PassageRating(passage=i, relevance=round(len(found) / len(words), 3) if words else 0.0))
    return PassageRatings(ratings=ratings)
