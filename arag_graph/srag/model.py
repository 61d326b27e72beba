"""What SRAG asks of its model: the decomposition, the router's verdict, a passage's triplets and the
answer from the fact table; for a chat model and by the offline policy's rules, side by side.

With a real model a bad structured reply is retried once and then replaced by the schema's fallback
(:mod:`arag_graph.srag.schemas`), noted in ``warnings``; the offline rules below never fall back.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage

from arag_graph.core.sentences import split_sentences
from arag_graph.llm.steps import Step, Structured, rule_step
from arag_graph.offline.policy import OfflinePolicy
from arag_graph.offline.rules import content_words, salient_spans
from arag_graph.retrievers.passages import Passage
from arag_graph.run.model import ChatRetrievalModel, OfflineRetrievalModel, RetrievalModel
from arag_graph.srag import prompts
from arag_graph.srag.schemas import Decomposition, Route, SubQuestion, Triplet, Triplets

__all__ = [
    "ChatSrag",
    "OfflineSrag",
    "SragModel",
    "offline_decomposition",
    "offline_route",
    "offline_triplets",
    "srag_model",
]


class SragModel(RetrievalModel, Protocol):
    """SRAG's requests, besides the shared ones (an answer from passages, the retrieval techniques)."""

    def decomposition(self, question: str, limit: int) -> Step[Structured[Decomposition]]:
        """The sub-questions with their dependencies."""
        ...

    def route(self, question: str) -> Step[Structured[Route]]:
        """The router: does the question need several hops?"""
        ...

    def triplets(self, question: str, passage: Passage) -> Step[Structured[Triplets]]:
        """The (subject, predicate, object) facts of one passage that bear on ``question``."""
        ...

    def answer_from_facts(self, question: str, facts: str, sources: Sequence[Passage]) -> Step[AIMessage]:
        """The answer from a fact table (``facts`` as rendered; ``sources`` the chunks it cites)."""
        ...


def _title(passage: Passage) -> str:
    return " ".join((passage.title or "").split()) or "(untitled)"


class ChatSrag(ChatRetrievalModel):
    """A real chat model, asked with the prompts of :mod:`arag_graph.srag.prompts`."""

    def decomposition(self, question: str, limit: int) -> Step[Structured[Decomposition]]:
        return self.structured(Decomposition, question, prompts.DECOMPOSE_PROMPT.format(question=question, limit=limit))

    def route(self, question: str) -> Step[Structured[Route]]:
        return self.structured(Route, question, prompts.ROUTE_PROMPT.format(question=question))

    def triplets(self, question: str, passage: Passage) -> Step[Structured[Triplets]]:
        text = prompts.EXTRACT_PROMPT.format(question=question, title=_title(passage), passage=passage.text.strip())
        return self.structured(Triplets, question, text)

    def answer_from_facts(self, question: str, facts: str, sources: Sequence[Passage]) -> Step[AIMessage]:
        return self.ask(prompts.FACTS_ANSWER_PROMPT.format(facts=facts, question=question))


class OfflineSrag(OfflineRetrievalModel):
    """The offline policy's rules for SRAG's requests (below): no model, no prompt, never a fallback."""

    def decomposition(self, question: str, limit: int) -> Step[Structured[Decomposition]]:
        return rule_step("decomposition", lambda: (offline_decomposition(question), None))

    def route(self, question: str) -> Step[Structured[Route]]:
        return rule_step("route", lambda: (offline_route(question), None))

    def triplets(self, question: str, passage: Passage) -> Step[Structured[Triplets]]:
        title = _title(passage)
        text = re.sub(r"\n\s*\n", "\n", passage.text.strip())
        return rule_step("triplets", lambda: (offline_triplets(question, title, split_sentences(text)), None))

    def answer_from_facts(self, question: str, facts: str, sources: Sequence[Passage]) -> Step[AIMessage]:
        return self.extractive(question, sources)


def srag_model(model: BaseChatModel) -> SragModel:
    """The offline policy answers by rule; every other model through prompts."""
    return OfflineSrag(model) if isinstance(model, OfflinePolicy) else ChatSrag(model)


# ---------------------------------------------------------------------------------------------
# The offline rules of SRAG's requests


def offline_decomposition(question: str) -> Decomposition:
    """SRAG's decomposition: a question in which "and"/"or" joins two named entities ("Were A and B
    born in the same year?", "Which came first, A or B?") is a comparison and becomes one independent
    sub-question per entity: the question with the pair replaced by that entity (and "both"/"either"
    dropped), so each keeps what is being compared. Any other question is a single sub-question."""
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


def offline_route(question: str) -> Route:
    """SRAG's router: multi-hop when the decomposition rule gives more than one sub-question or the
    question names more than one entity."""
    several = len(offline_decomposition(question).sub_questions) > 1
    return Route(multi_hop=several or len(salient_spans(question)) > 1)


def offline_triplets(sub_question: str, title: str, sentences: Sequence[str]) -> Triplets:
    """SRAG's extraction: one triplet per sentence of the passage: subject = the passage title,
    predicate = "states", object = the sentence, relevance = the share of the sub-question's content
    words found in the triplet (its subject and its sentence: "He was born in 1950" of the passage
    "Ed Wood" is about Ed Wood)."""
    words = content_words(sub_question)
    triplets = []
    for sentence in sentences:
        overlap = len(words & content_words(f"{title} {sentence}")) / len(words) if words else 0.0
        triplets.append(Triplet(subject=title, predicate="states", object=sentence, relevance=round(overlap, 3)))
    return Triplets(triplets=triplets)
