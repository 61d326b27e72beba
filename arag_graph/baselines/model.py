"""What the baselines ask of their model: Naive RAG the shared requests (:mod:`arag_graph.run.model`),
Direct an answer from the model's own knowledge, for a chat model and by the offline rule side by side."""

from __future__ import annotations

from typing import Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage

from arag_graph.baselines.prompts import DIRECT_ANSWER_PROMPT
from arag_graph.llm.steps import Step, rule_step
from arag_graph.offline.policy import OfflinePolicy
from arag_graph.offline.rules import NOT_FOUND
from arag_graph.run.model import ChatRetrievalModel, OfflineRetrievalModel, RetrievalModel

__all__ = ["BaselineModel", "ChatBaseline", "OfflineBaseline", "baseline_model"]


class BaselineModel(RetrievalModel, Protocol):
    """Naive RAG's requests (the shared ones) and Direct's."""

    def direct(self, question: str) -> Step[AIMessage]:
        """An answer from the model's own knowledge."""
        ...


class ChatBaseline(ChatRetrievalModel):
    """A chat model, asked Direct's question with :data:`~arag_graph.baselines.prompts.DIRECT_ANSWER_PROMPT`."""

    def direct(self, question: str) -> Step[AIMessage]:
        return self.ask(DIRECT_ANSWER_PROMPT.format(question=question))


class OfflineBaseline(OfflineRetrievalModel):
    """The offline policy knows nothing of its own: Direct's answer is always "not found"."""

    def direct(self, question: str) -> Step[AIMessage]:
        return rule_step("direct", lambda: AIMessage(content=NOT_FOUND))


def baseline_model(model: BaseChatModel) -> BaselineModel:
    """The offline policy answers by rule; every other model through prompts."""
    return OfflineBaseline(model) if isinstance(model, OfflinePolicy) else ChatBaseline(model)
