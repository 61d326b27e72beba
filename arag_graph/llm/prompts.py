"""Every prompt the graphs send to a chat model, in one place.

They are written for real models and nothing parses them back: the offline policy receives the
same requests as typed values through :mod:`arag_graph.llm.backbone`, never these texts. Answers end
with ``Answer: <short answer> [<chunk IDs>]``, which :func:`arag_graph.core.citations.parse_final_answer`
reads leniently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from arag_graph.retrievers.passages import Passage


def chunk_block(chunk_id: str, title: str | None, text: str, note: str = "") -> str:
    """How chunk text is shown to a model, everywhere: ``[chunk ID] title="..." note`` then the text.

    One format for tool results and answer prompts, so citations look the same whatever the graph.
    """
    head = f"[chunk {chunk_id}]" + (f' title="{title}"' if title else "") + (f" {note}" if note else "")
    return f"{head}\n{text}"


def passages_text(passages: Sequence[Passage]) -> str:
    """Passages for a prompt, best first, each under its chunk header."""
    return "\n\n".join(chunk_block(p.chunk_id, p.title, p.text.strip()) for p in passages) or "(no passages found)"


def _one_line(text: str) -> str:
    return " ".join((text or "").split())


def verdict(link: Mapping[str, Any]) -> str:
    """A CoRAG check's verdict in words: "sufficient (confidence 0.80)", "not checked", ..."""
    if link.get("is_sufficient") is None:
        return "not checked"
    judged = "sufficient" if link.get("is_sufficient") else "not sufficient"
    confidence = link.get("confidence")
    return f"{judged} (confidence {confidence:.2f})" if confidence is not None else judged


def chain_text(chain: Sequence[Mapping[str, Any]]) -> str:
    """CoRAG's chain so far, one line per step: the query, what it found, its sub-answer, the check's verdict.

    The chain is the paper's sequence of (sub-query, sub-answer) pairs: the sub-answer is what the
    next query builds on (the entity a hop found), so it is shown before the check's judgement.
    """
    lines = []
    for link in chain:
        found = len(link.get("chunk_ids") or [])
        new = len(link.get("new_chunk_ids") or [])
        line = f"{link.get('step')}. {link.get('query')} -> {found} chunks, {new} new"
        if link.get("sub_answer"):
            line += f"; sub-answer: {_one_line(link['sub_answer'])}"
        line += f"; {verdict(link)}"
        if link.get("reasoning"):
            line += f"; reasoning: {_one_line(link['reasoning'])}"
        if link.get("missing_info"):
            line += f"; missing: {_one_line(link['missing_info'])}"
        lines.append(line)
    return "\n".join(lines) or "(none)"


# ---------------------------------------------------------------------------------------------
# A-RAG agent

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

# ---------------------------------------------------------------------------------------------
# Answers from given text (Naive RAG, CoRAG, SRAG) and without any (Direct)

CONTEXT_ANSWER_PROMPT = """\
Answer the question using only the chunks below. Each chunk starts with its ID in brackets.

{context}

Question: {question}

End with a final line of the form
Answer: <the shortest complete answer, such as a name, a date, a number, yes or no> [<chunk IDs>]
listing the IDs of the chunks the answer rests on. If the chunks do not contain the answer, give \
your best guess and say what is missing.\
"""

CHAIN_ANSWER_PROMPT = """\
Answer the question using only the chunks below. Each chunk starts with its ID in brackets.

{context}

The question was researched one search at a time; each search and the answer its documents gave:
{chain}

Question: {question}

End with a final line of the form
Answer: <the shortest complete answer, such as a name, a date, a number, yes or no> [<chunk IDs>]
listing the IDs of the chunks the answer rests on. If the chunks do not contain the answer, give \
your best guess and say what is missing.\
"""
"""CoRAG's final answer: the passages and the chain's (sub-query, sub-answer) pairs, as the paper
conditions its answer on the chain."""

DIRECT_ANSWER_PROMPT = """\
Answer the question from your own knowledge: {question}

End with a final line of the form
Answer: <the shortest complete answer, such as a name, a date, a number, yes or no>\
"""

FACTS_ANSWER_PROMPT = """\
Answer the question using only the facts below, and do not guess beyond them. Each fact names the \
chunk it comes from.

{facts}

Question: {question}

End with a final line of the form
Answer: <the shortest complete answer, such as a name, a date, a number, yes or no> [<chunk IDs>]
listing the source chunk IDs of the facts the answer rests on, for example: Answer: Marie Curie [12, 40]
If the facts do not contain the answer, say so on the Answer line instead of guessing.\
"""

# ---------------------------------------------------------------------------------------------
# HyDE (ARAGOG)

HYDE_PROMPT = """\
Write one short encyclopedia-style paragraph (three or four sentences) that would answer this \
question: {question}

If you are unsure of the facts, write what such a paragraph would plausibly say; it is only used \
to search for real documents, never shown as an answer.\
"""

# ---------------------------------------------------------------------------------------------
# Multi-query retrieval and LLM reranking (ARAGOG)

MULTI_QUERY_PROMPT = """\
Write {n} different search queries that look for the same information as this one: {query}

Vary the wording: use synonyms, name the entities differently, or ask from another angle. Each \
query should be short and able to stand alone.\
"""

RERANK_PROMPT = """\
A search for "{query}" returned the numbered passages below.

{passages}

Rate how relevant each passage is to the search, from 0 (unrelated) to 1 (answers it directly), \
giving one rating for every passage by its number.\
"""


def numbered_passages(passages: Sequence[Passage]) -> str:
    """Passages numbered from 1 for a rating request (numbers are shorter to echo than chunk IDs)."""
    return "\n\n".join(
        f"Passage {i}:\n{chunk_block(p.chunk_id, p.title, p.text.strip())}" for i, p in enumerate(passages, 1)
    )


# ---------------------------------------------------------------------------------------------
# Document summary index (ARAGOG), written at index time

SUMMARY_PROMPT = """\
Summarise this document in two to four sentences for a search index: name its subject and the \
main facts it states (people, places, dates, numbers), so that a question about any of them can \
find it. Write only the summary.

Document "{title}":
{text}\
"""

# ---------------------------------------------------------------------------------------------
# CoRAG

SUFFICIENCY_PROMPT = """\
You are collecting evidence for a question, one search at a time. The question is: {question}

These are the passages found so far, best first:

{passages}

Decide whether they contain everything needed to answer the question. Start with your reasoning: \
what the passages establish towards the answer, naming the entities you found (such as the person, \
place or work that the question describes only indirectly). Then say whether the evidence is \
sufficient, describe the specific fact that is still missing (nothing when sufficient), and give \
your confidence between 0 and 1.\
"""

REFORMULATE_PROMPT = """\
You are collecting evidence for a question, one search at a time, and what has been found is not \
yet enough. The question is: {question}

Searches made so far:
{chain}

{missing}

Passages found so far, best first:

{passages}

Write the next search query: a short query for the missing information, different from the \
searches above. When the passages name the entity the missing fact is about (the film, person or \
place that the question describes only indirectly), put that name in the query.\
"""

SUB_ANSWER_PROMPT = """\
A search for "{query}" returned the documents below, best first.

{passages}

Answer the search query itself (not any larger question) in a few words, using only these \
documents. If they do not answer it, the answer is exactly: {no_information}
Then say how sure you are, between 0 and 1, that the documents answer the query.\
"""

SUB_ANSWER_TEXT_PROMPT = """\
A search for "{query}" returned the documents below, best first.

{passages}

Answer the search query itself (not any larger question) in a few words, using only these \
documents. If they do not answer it, reply exactly: {no_information}\
"""
"""The sub-answer asked as plain text, to read the log-likelihood of "No relevant information
found" from the reply's token logprobs (CoRAG's penalty, :mod:`arag_graph.llm.likelihood`)."""


def sub_queries_text(chain: Sequence[Mapping[str, Any]]) -> str:
    """CoRAG's (sub-query, sub-answer) pairs for the final answer, one line per step."""
    lines = [
        f"{link.get('step')}. {_one_line(str(link['query']))} -> {_one_line(str(link.get('sub_answer') or ''))}"
        for link in chain
        if link.get("query")
    ]
    return "\n".join(lines) or "(none)"


# ---------------------------------------------------------------------------------------------
# SRAG

DECOMPOSE_PROMPT = """\
Break this question into the sub-questions needed to answer it, in an order in which they can be \
answered: {question}

Each sub-question should need a single fact. When a sub-question needs the answer of an earlier \
one, write that answer as [answer N], where N is the id of the earlier sub-question, and list N in \
its depends_on. Sub-questions that do not need each other's answers must not depend on each other: \
they are looked up in parallel. A question that needs only one fact stays a single sub-question. \
Use at most {limit} sub-questions.

For example, "What is the capital of the country where the creator of Python was born?" becomes
1. Who created Python? (depends_on: [])
2. In which country was [answer 1] born? (depends_on: [1])
3. What is the capital of [answer 2]? (depends_on: [2])\
"""

ROUTE_PROMPT = """\
Does answering this question need facts from more than one document (multi-hop: for example a \
comparison of two entities, or an entity described only through another one), or a single lookup? \
Question: {question}\
"""

EXTRACT_PROMPT = """\
Extract the facts of the passage below that help answer the question "{question}", as (subject, \
predicate, object) triplets. Use the passage's own names for subjects and objects (no pronouns), \
short predicates, and only facts the passage states. Rate each triplet's relevance to the question \
from 0 (unrelated) to 1 (answers it). Return no triplets when the passage says nothing relevant.

Passage "{title}":
{passage}\
"""
