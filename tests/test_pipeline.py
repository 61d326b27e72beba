"""The shared graph steps of :mod:`arag_graph.run.pipeline` on hand-written conversations: what counts
toward an agent's ``message_token_budget``."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from arag_graph.core.tokens import count_tokens
from arag_graph.run.pipeline import message_tokens, over_token_budget

QUERY = " ".join(f"Krilanovich novel publisher founded place {i}" for i in range(20))


def a_search(query: str, *, valid: bool = True) -> AIMessage:
    if valid:
        return AIMessage("", tool_calls=[{"name": "semantic_search", "args": {"query": query}, "id": "c1"}])
    return AIMessage(
        "", invalid_tool_calls=[{"name": "semantic_search", "args": f'{{"query": "{query}"', "id": "c1", "error": "x"}]
    )


def test_the_tool_calls_a_model_wrote_count_toward_the_budget() -> None:
    """A turn that only called a tool has no text, but the server renders its arguments into every later
    prompt: a budget that missed them let a conversation of long searches outgrow the model's context."""
    for valid in (True, False):
        tokens = message_tokens([HumanMessage("Where?"), a_search(QUERY, valid=valid)])
        assert tokens >= count_tokens(QUERY) + count_tokens("Where?"), (valid, tokens)
        assert over_token_budget([HumanMessage("Where?"), a_search(QUERY, valid=valid)], count_tokens(QUERY))


def test_text_and_results_count_as_they_did() -> None:
    messages = [HumanMessage("Where?"), AIMessage("Answer: Portland"), ToolMessage("found it", tool_call_id="c1")]
    assert message_tokens(messages) == sum(count_tokens(t) for t in ("Where?", "Answer: Portland", "found it"))
    assert not over_token_budget(messages, message_tokens(messages) + 1)
    assert over_token_budget(messages, message_tokens(messages))
