"""SRAG's prompts: the decomposition, the router, triplet extraction and the answer from the fact table.
Zero-shot prompts stand in for the paper's fine-tuned models (see the paper profile's table)."""

from __future__ import annotations

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
