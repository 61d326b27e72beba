"""What the A-RAG agent's model is told: its system prompt (naming only the tools it has) and the
forced-synthesis instruction. Written for real models; the offline policy never reads them."""

from __future__ import annotations

from collections.abc import Sequence

_TOOL_GUIDANCE = {
    "keyword_search": "- keyword_search finds exact names, titles, dates and rare terms.",
    "semantic_search": "- semantic_search finds passages by meaning, when you know what you need but not its wording.",
}
_READ_GUIDANCE = (
    "- Search results show chunk IDs with short snippets, which are only a preview. Use chunk_read on "
    "the chunks that look relevant before relying on them. A chunk you have already read is not shown again."
)
_FULL_TEXT_GUIDANCE = "- Search results show whole chunks."
ANSWER_FORMAT = """\
When you answer, rely only on what the chunks say. End with a final line of the form
Answer: <the shortest complete answer, such as a name, a date, a number, yes or no> [<chunk IDs>]
listing the IDs of the chunks the answer rests on, for example: Answer: Marie Curie [12, 40]
If the chunks do not contain the answer, give your best supported answer and say what is missing."""


def agent_system_prompt(tools: Sequence[str]) -> str:
    """The agent's instructions, mentioning only the tools it has (the ablations differ)."""
    lines = ["You answer questions using a document collection that you can only see through tools.", ""]
    lines.append("How to work:")
    lines.extend(_TOOL_GUIDANCE[t] for t in ("keyword_search", "semantic_search") if t in tools)
    lines.append(_READ_GUIDANCE if "chunk_read" in tools else _FULL_TEXT_GUIDANCE)
    lines.append(
        "- Questions may need several hops: when a chunk names the entity that the next step depends on, "
        "search again for that entity."
    )
    lines.append(
        "- Make one tool call at a time, and stop searching as soon as what you have read answers the question."
    )
    lines.extend(["", ANSWER_FORMAT])
    return "\n".join(lines)


SYNTHESIS_INSTRUCTION = """\
You have used all the retrieval steps allowed for this question. Do not call any more tools. \
Answer the question now from the chunks you have read so far, and end with a final line of the form
Answer: <the shortest complete answer> [<chunk IDs the answer rests on>]\
"""
