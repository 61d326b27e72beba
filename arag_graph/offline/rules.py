"""The offline policy's shared rules: salient spans, content words, bridge names and the extractive answer.

Every graph family's offline model (``arag/model.py``, ``corag/model.py``, ...) and the tool-calling
policy itself (:mod:`arag_graph.offline.policy`) answer by these rules; a family's own rules (CoRAG's
check, SRAG's decomposition) sit beside its chat prompts. They are rules, not a language model: no
metric that needs a real LLM may be reported for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from arag_graph.core.sentences import split_sentences
from arag_graph.index.encoders import embed_query, embed_texts
from arag_graph.offline.answer_span import Sentence, answer_span

_QUESTION_WORDS = {
    "who", "what", "which", "when", "where", "why", "how", "whose", "whom", "is", "are", "was", "were",
    "do", "does", "did", "in", "on", "at", "the", "a", "an", "of", "for", "from", "by", "this", "that",
    "these", "those", "both", "and", "or", "name", "has", "have", "had", "can", "could", "will", "would",
    "if", "as", "it", "its", "his", "her", "their", "he", "she", "they", "there", "notable",
}  # fmt: skip
_STOPWORDS = _QUESTION_WORDS | {
    "to", "with", "be", "been", "than", "then", "into", "about", "also", "not", "after", "before",
    "first", "one", "two",
}  # fmt: skip
_CALENDAR = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
}  # fmt: skip
_CONNECTORS = {"of", "the", "de", "da", "del", "von", "van", "der", "du", "la", "le", "&"}
_QUOTED = re.compile(r"[\"“”]([^\"“”\n]{2,80})[\"“”]")
_TOKEN = re.compile(r"[\w'’.-]+|[^\w\s]")
_NUMBER = re.compile(r"^\d{3,4}s?$")
_WORD = re.compile(r"\w+")
NOT_FOUND = "Answer: I could not find information about this in the collection."
HOP2_BONUS = 0.1
AnswerStyle = Literal["span", "sentence"]
"""``span``: the short answer the question asks for (:mod:`arag_graph.offline.answer_span`); ``sentence``:
the best-scoring sentence, the policy's answer before it read like a reader (kept to measure it)."""


def _is_capitalised(token: str) -> bool:
    return token[:1].isupper()


def salient_spans(text: str, limit: int = 4) -> list[str]:
    """Keyword candidates: quoted strings, runs of capitalised words, years; longest first.

    A run of capitalised words may contain connectors ("House of Cards" keeps "of") and stops at
    punctuation or a lower-case word, so names in a list stay apart ("Flute Sonata in C" gives
    "Flute Sonata"). A capitalised word ending a sentence ("States.") closes its run; an initial
    ("J.") does not. Question words and articles at the start of a run are dropped.
    """
    spans: list[str] = [m.group(1).strip() for m in _QUOTED.finditer(text)]
    run: list[str] = []

    def close() -> None:
        while run and run[-1].lower() in _CONNECTORS:
            run.pop()
        while run and run[0].lower() in _QUESTION_WORDS:
            run.pop(0)
        span = " ".join(run).strip(".'’-")
        if len(span) > 1 and span.lower() not in _QUESTION_WORDS:
            spans.append(span)
        run.clear()

    for token in _TOKEN.findall(text):
        if _NUMBER.match(token):
            close()
            spans.append(token)
        elif _is_capitalised(token):
            ends_sentence = token.endswith(".") and len(token) > 2
            run.append(token[:-1] if ends_sentence else token)
            if ends_sentence:
                close()
        elif run and token.lower() in _CONNECTORS:
            run.append(token)
        else:
            close()
    close()
    unique: list[str] = []
    for span in sorted(dict.fromkeys(spans), key=len, reverse=True):
        if not any(span.lower() in u.lower() for u in unique):
            unique.append(span)
    return unique[:limit]


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS and len(w) > 1}


def bridge_names(question: str, chunks: Iterable[tuple[str, Sequence[str]]], limit: int = 2) -> list[str]:
    """Names in ``chunks`` (each a title and its sentences) that the question does not mention, best first.

    Candidates come from the sentences sharing most words with the question: in a bridge
    question, the sentence that matches the question is the one that names the next entity.
    A chunk's own title, years and calendar words are not hops.
    """
    q_lower, q_words = question.lower(), content_words(question)
    scored: list[tuple[float, str]] = []
    for title, sentences in chunks:
        title = (title or "").lower()
        for sentence in sentences:
            overlap = len(q_words & content_words(sentence))
            for span in salient_spans(sentence, limit=6):
                if span.lower() in q_lower or span.lower() in title or _NUMBER.match(span):
                    continue
                if span.lower() in _CALENDAR:
                    continue
                # Quoted titles and multi-word names make better hops than single words.
                bonus = (0.5 if f'"{span}"' in sentence else 0.0) + (0.25 if " " in span else 0.0)
                scored.append((overlap + bonus, span))
    scored.sort(key=lambda x: -x[0])
    return list(dict.fromkeys(span for _, span in scored))[:limit]


def extractive_answer(
    index: Any,
    question: str,
    evidence: Sequence[tuple[str, str]],
    *,
    bonus: set[str] | frozenset[str] = frozenset(),
    style: AnswerStyle = "span",
    titles: Mapping[str, str | None] | None = None,
) -> str:
    """``Answer: <answer> [<chunk ID>]`` from the evidence sentences, scored by similarity to the question.

    Similarity is embedding cosine (the index's encoder) plus half the share of the question's
    content words it contains. The end of a multi-hop chain is where answers tend to be: chunks in
    ``bonus`` (the agent's second hop) get a small bonus (it raised Contain-Acc on HotpotQA-100 from
    20 to 23 points with sentence answers). With ``style="span"`` the answer is the span the
    question asks for (:func:`arag_graph.offline.answer_span.answer_span`, which weighs each candidate by
    its sentence's score); with ``"sentence"``, the best sentence itself. ``titles`` names the
    passages the index does not know (the span rules compare named passages).
    """
    sentences: list[tuple[str, str, str]] = []
    for cid, text in evidence:
        chunk = index.get_chunk(cid) if index is not None else None
        parts = chunk.sentence_texts() if chunk is not None and chunk.sentences else split_sentences(text)
        title = (chunk.title if chunk is not None else (titles or {}).get(cid)) or ""
        sentences.extend((cid, s.strip(), title) for s in parts if s.strip())
    if not question or not sentences:
        return NOT_FOUND
    scores = _sentence_scores(index, question, [s for _, s, _ in sentences])
    scores = scores + np.array([HOP2_BONUS if cid in bonus else 0.0 for cid, _, _ in sentences])
    if style == "sentence":
        cid, sentence, _ = sentences[int(np.argmax(scores))]
        return f"Answer: {sentence} [{cid}]"
    scored = [Sentence(cid, s, float(x), title) for (cid, s, title), x in zip(sentences, scores, strict=True)]
    found = answer_span(question, scored)
    assert found is not None  # sentences were read
    return f"Answer: {found.text} [{found.chunk_id}]"


def _sentence_scores(index: Any, question: str, sentences: Sequence[str]) -> np.ndarray:
    q_words = content_words(question)
    overlap = np.array([len(q_words & content_words(s)) / (1 + len(q_words)) for s in sentences])
    embeddings = getattr(index, "embeddings", None)
    if embeddings is None:
        return overlap
    q = embed_query(embeddings, question)
    vectors = embed_texts(embeddings, list(sentences))
    norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(q) or 1.0)
    cosine = vectors @ q / np.where(norms == 0, 1.0, norms)
    return cosine + 0.5 * overlap
