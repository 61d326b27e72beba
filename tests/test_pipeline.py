"""The shared graph steps of :mod:`arag_graph.run.pipeline` on hand-written conversations: what counts
toward an agent's ``message_token_budget``."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from arag_graph.core.tokens import count_tokens
from arag_graph.run.pipeline import _text, message_tokens, over_token_budget

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


def test_a_turns_calls_count_as_the_json_the_server_is_sent() -> None:
    """Exactly: the text, then one line per call (name and arguments as JSON, non-ASCII as written), and
    for a call whose arguments were not JSON its name and raw text."""
    valid = AIMessage(
        [{"type": "text", "text": "Searching"}],
        tool_calls=[{"name": "semantic_search", "args": {"query": "Café Nolan"}, "id": "c1"}],
    )
    written = 'Searching\n{"name": "semantic_search", "arguments": {"query": "Café Nolan"}}'
    assert _text(valid) == written and message_tokens([valid]) == count_tokens(written)
    broken = AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "keyword_search", "args": '{"keywords": [', "id": "c2", "error": "x"},
            {"name": None, "args": None, "id": "c3", "error": "x"},
        ],
    )
    assert _text(broken) == '\nkeyword_search {"keywords": [\n '
    assert message_tokens([broken]) == count_tokens(_text(broken))


def test_the_character_shortcut_never_hides_a_reached_budget() -> None:
    """A conversation shorter in characters than the budget is under it without tokenizing; at exactly the
    budget in characters it is tokenized (text of one token per character reaches it)."""
    assert not over_token_budget([HumanMessage("Where?")], 10_000)
    one_per_char = "\u0a85\u0b85\u0c85\u0d85" * 3
    assert count_tokens(one_per_char) >= len(one_per_char)
    assert over_token_budget([HumanMessage(one_per_char)], len(one_per_char))
