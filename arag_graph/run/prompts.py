"""The prompts every retrieving graph shares: an answer from passages, HyDE's passage, and ARAGOG's
multi-query rewrites and LLM reranking (a family's own prompts are in its folder, ``corag/prompts.py``, ...).

They are written for real models and nothing parses them back: the offline policy receives the
same requests as typed values (:mod:`arag_graph.run.model`), never these texts. Answers end with
``Answer: <short answer> [<chunk IDs>]``, which :func:`arag_graph.core.citations.parse_final_answer`
reads leniently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from arag_graph.core.citations import chunk_block

if TYPE_CHECKING:
    from arag_graph.retrievers.passages import Passage


def passages_text(passages: Sequence[Passage]) -> str:
    """Passages for a prompt, best first, each under its chunk header."""
    return "\n\n".join(chunk_block(p.chunk_id, p.title, p.text.strip()) for p in passages) or "(no passages found)"


def numbered_passages(passages: Sequence[Passage]) -> str:
    """Passages numbered from 1 for a rating request (numbers are shorter to echo than chunk IDs)."""
    return "\n\n".join(
        f"Passage {i}:\n{chunk_block(p.chunk_id, p.title, p.text.strip())}" for i, p in enumerate(passages, 1)
    )


CONTEXT_ANSWER_PROMPT = """\
Answer the question using only the chunks below. Each chunk starts with its ID in brackets.

{context}

Question: {question}

End with a final line of the form
Answer: <the shortest complete answer, such as a name, a date, a number, yes or no> [<chunk IDs>]
listing the IDs of the chunks the answer rests on. If the chunks do not contain the answer, give \
your best guess and say what is missing.\
"""

HYDE_PROMPT = """\
Write one short encyclopedia-style paragraph (three or four sentences) that would answer this \
question: {question}

If you are unsure of the facts, write what such a paragraph would plausibly say; it is only used \
to search for real documents, never shown as an answer.\
"""

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
