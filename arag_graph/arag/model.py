"""What the A-RAG agent asks of its model: its next turn with the tools bound, the forced synthesis,
and HyDE's passage, for a chat model and for the offline policy side by side.

The agent loop is the one place where a model sees the conversation itself (tool calls and their
results); there the offline policy is an ordinary tool-calling ``BaseChatModel``
(:class:`~arag_graph.offline.policy.OfflinePolicy`), so its turns go through the same binding as a
chat model's and only the synthesis differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from arag_graph.arag.prompts import SYNTHESIS_INSTRUCTION
from arag_graph.llm.steps import Step
from arag_graph.offline.policy import OfflinePolicy
from arag_graph.run.model import ChatRetrievalModel, OfflineRetrievalModel

__all__ = ["AragModel", "ChatArag", "OfflineArag", "arag_model", "bind_one_tool_per_turn"]


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


class AragModel(Protocol):
    """The requests of the agent graphs (``arag``, ``arag_naive``)."""

    def agent(self, messages: Sequence[AnyMessage], tools: Sequence[BaseTool], system_prompt: str) -> Step[AIMessage]:
        """The agent's next turn: a tool call or an answer."""
        ...

    def synthesis(self, messages: Sequence[AnyMessage], system_prompt: str) -> Step[AIMessage]:
        """The forced final answer once the step cap or token budget is reached (no tools)."""
        ...

    def hyde(self, question: str) -> Step[str]:
        """A hypothetical answer passage that semantic_search embeds instead of the query."""
        ...


def _agent_turn(model: BaseChatModel, messages: Sequence[AnyMessage], tools: Sequence[BaseTool], system: str) -> Step:
    bound = bind_one_tool_per_turn(model, list(tools))
    return Step(bound, [SystemMessage(system), *messages])


class ChatArag(ChatRetrievalModel):
    """A chat model: the system prompt, the conversation, and the tools bound."""

    def agent(self, messages: Sequence[AnyMessage], tools: Sequence[BaseTool], system_prompt: str) -> Step[AIMessage]:
        return _agent_turn(self.model, messages, tools, system_prompt)

    def synthesis(self, messages: Sequence[AnyMessage], system_prompt: str) -> Step[AIMessage]:
        # The instruction goes to the model only; the thread keeps the conversation as it was.
        request = [SystemMessage(system_prompt), *messages, HumanMessage(SYNTHESIS_INSTRUCTION)]
        return Step(self.model, request)


class OfflineArag(OfflineRetrievalModel):
    """The offline policy: it plans its tool calls itself, and without tools answers from what it read."""

    def agent(self, messages: Sequence[AnyMessage], tools: Sequence[BaseTool], system_prompt: str) -> Step[AIMessage]:
        return _agent_turn(self.model, messages, tools, system_prompt)

    def synthesis(self, messages: Sequence[AnyMessage], system_prompt: str) -> Step[AIMessage]:
        return Step(self.model, list(messages))  # without tools bound the policy answers from what it read


def arag_model(model: BaseChatModel) -> AragModel:
    """The offline policy plans and answers by rule; every other model through prompts."""
    return OfflineArag(model) if isinstance(model, OfflinePolicy) else ChatArag(model)
