"""CoRAG's prompts: the final answer from the chain, the sufficiency check, the reformulation and a
step's sub-answer, and how the chain is shown in them. Written for real models; the offline rules
(:mod:`arag_graph.corag.model`) receive the same requests as typed values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


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
found" from the reply's token logprobs (CoRAG's penalty, :mod:`arag_graph.corag.likelihood`)."""


def sub_queries_text(chain: Sequence[Mapping[str, Any]]) -> str:
    """CoRAG's (sub-query, sub-answer) pairs for the final answer, one line per step."""
    lines = [
        f"{link.get('step')}. {_one_line(str(link['query']))} -> {_one_line(str(link.get('sub_answer') or ''))}"
        for link in chain
        if link.get("query")
    ]
    return "\n".join(lines) or "(none)"
