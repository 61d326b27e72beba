"""The Direct answer's prompt (Naive RAG answers with the shared prompt of :mod:`arag_graph.run.prompts`)."""

from __future__ import annotations

DIRECT_ANSWER_PROMPT = """\
Answer the question from your own knowledge: {question}

End with a final line of the form
Answer: <the shortest complete answer, such as a name, a date, a number, yes or no>\
"""
