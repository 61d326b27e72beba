"""The ``offline`` policy: a deterministic, rule-based stand-in for a tool-calling model.

This is **not a language model**. It is a fixed retrieval strategy written as a LangChain
``BaseChatModel`` so that the demo, LangGraph Studio, the tests and the whole evaluation pipeline run
with no network, and so that there is a measurable no-LLM baseline. No metric that needs a real
LLM (such as LLM-Acc) may be reported for it.

With tools bound it plans one tool call per turn, through the same tool schemas a model sees, in
two hops:

1. ``keyword_search`` on the salient spans of the question (quoted strings, capitalised names,
   years), then ``semantic_search`` on the whole question;
2. ``chunk_read`` of the two best unread chunks (reciprocal-rank fusion of both searches);
3. second hop: the *bridge* entities, names in the chunks read that the question does not mention,
   taken from the sentences closest to the question: ``keyword_search`` on them, then
   ``semantic_search`` on "bridge: question";
4. ``chunk_read`` of the two best unread chunks of the second hop;

and then answers. A step whose tool is not bound is skipped (the paper's ablations, A-RAG
(Naive)), as is a step with nothing to do. Without tools (forced synthesis) it answers
*extractively*: its sentences of the gathered chunks are scored by similarity to the question
(embedding cosine plus word overlap, with a small bonus for second-hop chunks), and a reader's rules
(:mod:`arag_graph.offline.answer_span`) take from them the short span the question asks for (a name, place,
date, number, yes/no), followed by the chunk ID it came from. ``answer_style="sentence"`` keeps the
earlier answer, the best sentence itself, for comparison (``bench/bench_offline_answers.py``).

The non-agentic graphs (Naive RAG, CoRAG, SRAG, Direct) do not converse with the policy: they ask
:class:`OfflineBackbone` typed questions (the question, the passages, the chain so far) and it
answers each with a documented rule below, without ever seeing a prompt. The policy has no
temperature, so CoRAG's sampled chains (best-of-N, tree search) get fixed variants of its
reformulation rule instead (:func:`offline_reformulation`): every decoding strategy runs
deterministically offline.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import ConfigDict, Field

from arag_graph.core.sentences import split_sentences
from arag_graph.index.encoders import embed_query, embed_texts
from arag_graph.llm.backbone import Backbone, Step, Structured
from arag_graph.llm.prompts import passages_text
from arag_graph.llm.structured import (
    NO_RELEVANT_INFORMATION,
    Decomposition,
    PassageRating,
    PassageRatings,
    QueryRewrites,
    Reformulation,
    Route,
    SubAnswer,
    SubQuestion,
    Sufficiency,
    Triplet,
    Triplets,
)
from arag_graph.llm.tool_artifacts import artifact_of
from arag_graph.offline.answer_span import Sentence, answer_span
from arag_graph.retrievers.passages import Passage, rrf_scores

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
_CHUNK_BLOCK = re.compile(r"^\[chunk ([^\]\n]+)\]", re.MULTILINE)
NOT_FOUND = "Answer: I could not find information about this in the collection."
READS_PER_CALL = 2
HOP2_BONUS = 0.1
SAMPLED_HOPS = 8
"""Names a sampled CoRAG chain may hop through (see :func:`offline_reformulation`)."""
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


def _step_of(call_id: str | None) -> str:
    parts = (call_id or "").split("-")
    return parts[1] if len(parts) >= 3 and parts[0] == "offline" else "other"


class _Turn:
    """What the policy has done since the current question was asked.

    The question is the last human message: what the user asked, never an instruction of ours (the
    graphs send their instructions to real models only). The policy tags its tool-call IDs with the
    plan step (``offline-read1-7``), so it knows which steps ran and which results belong to which
    hop without guessing.
    """

    def __init__(self, messages: Sequence[BaseMessage]) -> None:
        self.question = ""
        start = len(messages)
        for i in range(len(messages) - 1, -1, -1):
            if isinstance(messages[i], HumanMessage):
                self.question = messages[i].text.strip()
                start = i
                break
        self.size = len(messages)
        self.done: set[str] = set()
        self.results: list[tuple[str, str, dict[str, Any]]] = []  # (step, tool, artifact)
        self.texts: list[str] = []  # tool results, for quoting when the policy has no index
        for m in messages[start + 1 :]:
            if isinstance(m, AIMessage):
                self.done.update(_step_of(c.get("id")) for c in m.tool_calls)
            elif isinstance(m, ToolMessage):
                artifact = artifact_of(m) if isinstance(m.artifact, dict) and m.artifact else {}
                if not artifact:
                    artifact = {"chunk_ids": _CHUNK_BLOCK.findall(m.text), "read": []}
                self.results.append((_step_of(m.tool_call_id), m.name or "", artifact))
                self.texts.append(m.text)

    def read(self, steps: Sequence[str] | None = None) -> list[str]:
        """Chunks whose full text came back (from ``steps`` only, when given)."""
        out: list[str] = []
        for step, _, artifact in self.results:
            if steps is None or step in steps:
                out.extend(i for i in artifact.get("read", []) if i not in out)
        return out

    def ranked(self, steps: Sequence[str] | None = None) -> list[str]:
        """Chunk IDs shown by the searches (of ``steps``), fused by reciprocal rank."""
        rankings = [
            artifact.get("chunk_ids", [])
            for step, tool, artifact in self.results
            if tool != "chunk_read" and (steps is None or step in steps)
        ]
        scores = rrf_scores(rankings)
        return sorted(scores, key=lambda c: -scores[c])


class OfflinePolicy(BaseChatModel):
    """Deterministic no-LLM policy with real tool calls and extractive answers (see module doc)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any = Field(default=None, exclude=True)
    """The index whose chunks the policy quotes; without one it quotes the text of tool messages."""
    model_name: str = "offline"
    answer_style: AnswerStyle = "span"
    """How the final answers are extracted (see :data:`AnswerStyle`); every graph's answer uses it."""

    @property
    def _llm_type(self) -> str:
        return "arag-offline-policy"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"policy": "offline", "kind": "no-LLM rule-based policy"}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, BaseMessage]:
        names = [getattr(t, "name", None) or (t.get("name") if isinstance(t, dict) else None) for t in tools]
        return self.bind(tool_names=[n for n in names if n])

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
        raise NotImplementedError(
            "the offline policy has no free-form structured output: arag's graphs ask it typed questions "
            "through OfflineBackbone; use a real model for other structured requests"
        )

    # -- generation --------------------------------------------------------------------------
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        tool_names: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = _Turn(messages)
        message = self._next_call(turn, set(tool_names)) if tool_names else None
        if message is None:
            message = self._answer(turn)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _next_call(self, turn: _Turn, tools: set[str]) -> AIMessage | None:
        planned = self.plan(turn, tools)
        if planned is None:
            return None
        step, name, args = planned
        call = {"name": name, "args": args, "id": f"offline-{step}-{turn.size}", "type": "tool_call"}
        return AIMessage(content="", tool_calls=[call])

    def plan(self, turn: _Turn, tools: set[str]) -> tuple[str, str, dict[str, Any]] | None:
        """The next step of the two-hop strategy as ``(step, tool, args)``, or None to answer."""
        q = turn.question
        if not q:
            return None
        steps: list[tuple[str, str, Callable[[], dict[str, Any] | None]]] = [
            ("kw1", "keyword_search", lambda: {"keywords": salient_spans(q)} if salient_spans(q) else None),
            ("sem1", "semantic_search", lambda: {"query": q}),
            ("read1", "chunk_read", lambda: self._unread(turn, ("kw1", "sem1"))),
            ("kw2", "keyword_search", lambda: self._bridge_keywords(turn)),
            ("sem2", "semantic_search", lambda: self._bridge_query(turn)),
            ("read2", "chunk_read", lambda: self._unread(turn, ("kw2", "sem2"))),
        ]
        for step, tool, make_args in steps:
            if step in turn.done or tool not in tools:
                continue
            args = make_args()
            if args:
                return step, tool, args  # no top_k: the graph's configured top_k applies
        return None

    @staticmethod
    def _unread(turn: _Turn, steps: Sequence[str]) -> dict[str, Any] | None:
        read = set(turn.read())
        unread = [c for c in turn.ranked(steps) if c not in read][:READS_PER_CALL]
        return {"chunk_ids": unread} if unread else None

    def _bridges(self, turn: _Turn) -> list[str]:
        """Names in the first-hop chunks that the question does not mention (see :func:`bridge_names`)."""
        if self.index is None:
            return []
        chunks = [
            (chunk.title or "", chunk.sentence_texts() or [chunk.text])
            for cid in turn.read(("read1", "kw1", "sem1"))
            if (chunk := self.index.get_chunk(cid)) is not None
        ]
        return bridge_names(turn.question, chunks)

    def _bridge_keywords(self, turn: _Turn) -> dict[str, Any] | None:
        bridges = self._bridges(turn)
        return {"keywords": bridges} if bridges else None

    def _bridge_query(self, turn: _Turn) -> dict[str, Any] | None:
        bridges = self._bridges(turn)
        return {"query": f"{bridges[0]}: {turn.question}"} if bridges else None

    # -- answering ---------------------------------------------------------------------------
    def _answer(self, turn: _Turn) -> AIMessage:
        """The extractive answer from the chunks gathered this turn (the best search hits if none was read)."""
        ids = turn.read() or turn.ranked()[:3]
        evidence = [(cid, chunk.text) for cid, chunk in _chunks(self.index, ids)]
        if not evidence:  # no index: quote the chunk blocks of the tool results themselves
            evidence = [(cid, text) for message in turn.texts for cid, text in _blocks(message)]
        second_hop = set(turn.read(("read2", "kw2", "sem2")))
        answer = extractive_answer(self.index, turn.question, evidence, bonus=second_hop, style=self.answer_style)
        return AIMessage(content=answer)


def _chunks(index: Any, ids: Sequence[str]) -> list[tuple[str, Any]]:
    if index is None:
        return []
    return [(cid, chunk) for cid in ids if (chunk := index.get_chunk(cid)) is not None]


def _blocks(text: str) -> list[tuple[str, str]]:
    """``(chunk id, text)`` of the ``[chunk ID] ...`` blocks in a tool result."""
    out = []
    for block in re.split(r"\n(?=\[chunk )", text):
        found = _CHUNK_BLOCK.match(block)
        if found:
            out.append((found.group(1), block.split("\n", 1)[-1]))
    return out


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


# ---------------------------------------------------------------------------------------------
# Rules for the typed requests of the other graphs


def offline_sufficiency(question: str, context: str) -> Sufficiency:
    """CoRAG's check: the question's salient spans (names, years) and content words are looked up in
    the retrieved text; sufficient when every salient span and at least 80% of the content words are
    found; ``missing_info`` lists what was not found; ``confidence`` is the fraction found (halved
    when a name is missing); ``reasoning`` says which of them were found."""
    text = context.lower()
    spans = salient_spans(question, limit=8)
    words = content_words(question)
    missing_spans = [s for s in spans if s.lower() not in text]
    found_words = {w for w in words if w in text}
    share = (len(found_words) / len(words)) if words else 1.0
    sufficient = not missing_spans and share >= 0.8
    missing = missing_spans or sorted(words - found_words)[:5]
    found = [s for s in spans if s not in missing_spans] or sorted(found_words)[:5]
    reasoning = f"The passages mention {', '.join(found)}." if found else "The passages mention no question term."
    return Sufficiency(
        reasoning=reasoning,
        is_sufficient=sufficient,
        missing_info="" if sufficient else ", ".join(missing),
        confidence=round(share if not missing_spans else share * 0.5, 3),
    )


def offline_reformulation(
    question: str, missing: str, passages: Sequence[Passage] = (), *, sample: int = 0
) -> Reformulation:
    """CoRAG's next query: the missing information followed by the question's other salient names,
    which anchor it; the question itself when nothing is said to be missing. Not the whole question
    again: its words would make every reformulation a near-repeat of the first query, which CoRAG's
    loop detection stops.

    The policy has no temperature, so the decoding strategies' *sampled* chains (``sample`` = k > 0:
    best-of-N's chains after the first, the tree's other candidates and its rollouts) get a fixed
    variant instead: a hop through the k-th name (cyclically) that the passages give and the question
    does not mention (:func:`bridge_names`, the agent's second-hop rule), followed by the missing
    information; without such a name, the k-th missing term (cyclically) with the anchors. The same
    chain therefore gets the same queries on every run."""
    missing = " ".join(missing.split())
    if not missing:
        return Reformulation(query=question)
    anchors = [s for s in salient_spans(question, limit=8) if s.lower() not in missing.lower()]
    if sample <= 0:
        return Reformulation(query=" ".join([missing, *anchors]))
    chunks = [(p.title or "", split_sentences(p.text)) for p in passages]
    names = bridge_names(question, chunks, limit=SAMPLED_HOPS)
    if names:
        return Reformulation(query=f"{names[(sample - 1) % len(names)]} {missing}")
    terms = [t.strip() for t in missing.split(",") if t.strip()] or [missing]
    return Reformulation(query=" ".join([terms[(sample - 1) % len(terms)], *anchors]))


def offline_sub_answer(query: str, passages: Sequence[Passage]) -> SubAnswer:
    """CoRAG's sub-answer of a step: the sentence of the step's passages sharing most content words
    with its query (the earlier passage and sentence on ties), followed by its chunk ID; its
    confidence is the share of the query's content words found in those passages. When no sentence
    shares a word with the query: "No relevant information found", confidence 0."""
    words = content_words(query)
    best: tuple[int, str, str] | None = None
    found: set[str] = set()
    for p in passages:
        for sentence in split_sentences(p.text):
            shared = words & content_words(sentence)
            found |= shared
            if shared and (best is None or len(shared) > best[0]):
                best = (len(shared), " ".join(sentence.split()), p.chunk_id)
    if best is None:
        return SubAnswer(answer=NO_RELEVANT_INFORMATION, confidence=0.0)
    _, sentence, chunk_id = best
    return SubAnswer(answer=f"{sentence} [{chunk_id}]", confidence=round(len(found) / len(words), 3))


def offline_rewrites(query: str, n: int) -> QueryRewrites:
    """ARAGOG's multi-query rewrites by rule, in this order: the query's salient spans (names, years)
    alone; its content words alone (question words and stop words dropped); then each salient span
    with the content words that are not part of it. Rewrites equal to the query or to an earlier
    rewrite are skipped; at most ``n``. The same query always gets the same rewrites."""
    spans = salient_spans(query, limit=8)
    words = [w for w in re.findall(r"\w+", query.lower()) if w in content_words(query)]
    candidates = [" ".join(spans), " ".join(dict.fromkeys(words))]
    for span in spans:
        inside = set(re.findall(r"\w+", span.lower()))
        candidates.append(" ".join([span, *(w for w in dict.fromkeys(words) if w not in inside)]))
    out: list[str] = []
    for c in candidates:
        c = " ".join(c.split())
        if c and c.casefold() != " ".join(query.split()).casefold() and c not in out:
            out.append(c)
    return QueryRewrites(queries=out[: max(0, n)])


def offline_ratings(query: str, passages: Sequence[Passage]) -> PassageRatings:
    """ARAGOG's LLM reranking by rule: a passage's relevance is the share of the query's content
    words found in its title and text (the overlap the other offline rules use); ties keep the
    retriever's order. A rule, not a model's judgement: it keeps rerank runnable offline (the grid's
    rerank row included) and is labelled as the offline policy's wherever runs are compared."""
    words = content_words(query)
    ratings = []
    for i, p in enumerate(passages, 1):
        found = words & content_words(f"{p.title or ''} {p.text}")
        ratings.append(PassageRating(passage=i, relevance=round(len(found) / len(words), 3) if words else 0.0))
    return PassageRatings(ratings=ratings)


def offline_decomposition(question: str) -> Decomposition:
    """SRAG's decomposition: a question in which "and"/"or" joins two named entities ("Were A and B
    born in the same year?", "Which came first, A or B?") is a comparison and becomes one independent
    sub-question per entity: the question with the pair replaced by that entity (and "both"/"either"
    dropped), so each keeps what is being compared. Any other question is a single sub-question."""
    pair = _compared_pair(question)
    if pair is None:
        return Decomposition(sub_questions=[SubQuestion(id=1, question=question)])
    joined, entities = pair
    sub_questions = []
    for i, entity in enumerate(entities, 1):
        text = question.replace(joined, entity, 1)
        text = re.sub(r"\s*\b(?:both|either)\b", "", text, flags=re.IGNORECASE)
        sub_questions.append(SubQuestion(id=i, question=" ".join(text.split())))
    return Decomposition(sub_questions=sub_questions)


def _compared_pair(question: str) -> tuple[str, tuple[str, str]] | None:
    """The text "A and B" (or "A or B") of a comparison and its two entities, if the question has one.

    Requiring the conjunction to sit between two names keeps out "in or around Leland, North
    Carolina", where "or" joins two prepositions and the two names are one place.
    """
    spans = [s for s in salient_spans(question, limit=6) if not s.isdigit()]
    for a in spans:
        for b in spans:
            if a == b:
                continue
            found = re.search(rf"{re.escape(a)},?\s+(?:and|or)\s+(?:the\s+)?{re.escape(b)}", question)
            if found:
                return found.group(0), (a, b)
    return None


def offline_route(question: str) -> Route:
    """SRAG's router: multi-hop when the decomposition rule gives more than one sub-question or the
    question names more than one entity."""
    several = len(offline_decomposition(question).sub_questions) > 1
    return Route(multi_hop=several or len(salient_spans(question)) > 1)


def offline_triplets(sub_question: str, title: str, sentences: Sequence[str]) -> Triplets:
    """SRAG's extraction: one triplet per sentence of the passage: subject = the passage title,
    predicate = "states", object = the sentence, relevance = the share of the sub-question's content
    words found in the triplet (its subject and its sentence: "He was born in 1950" of the passage
    "Ed Wood" is about Ed Wood)."""
    words = content_words(sub_question)
    triplets = []
    for sentence in sentences:
        overlap = len(words & content_words(f"{title} {sentence}")) / len(words) if words else 0.0
        triplets.append(Triplet(subject=title, predicate="states", object=sentence, relevance=round(overlap, 3)))
    return Triplets(triplets=triplets)


def _rule(name: str, compute: Callable[[], Any]) -> Step[Any]:
    """A step whose answer is computed by a rule when the graph runs it (never at request time)."""
    return Step(RunnableLambda(lambda _: compute(), name=f"offline_{name}"))


class OfflineBackbone(Backbone):
    """The offline policy's answers to the graphs' typed requests: no model, no prompt.

    Structured answers never fall back (the problem part is always None); HyDE searches with the
    question itself, since the policy cannot write a passage (HyDE off, in effect).
    """

    def __init__(self, policy: OfflinePolicy) -> None:
        super().__init__(policy)
        self.index = policy.index
        self.answer_style: AnswerStyle = policy.answer_style

    def synthesis(self, messages: Sequence[AnyMessage], system_prompt: str) -> Step[AIMessage]:
        return Step(self.model, list(messages))  # without tools bound the policy answers from what it read

    def _extractive(self, question: str, passages: Sequence[Passage]) -> Step[AIMessage]:
        evidence = [(p.chunk_id, p.text) for p in passages]
        titles = {p.chunk_id: p.title for p in passages}
        style = self.answer_style

        def answer() -> AIMessage:
            return AIMessage(content=extractive_answer(self.index, question, evidence, style=style, titles=titles))

        return _rule("answer", answer)

    def answer(
        self, question: str, passages: Sequence[Passage], chain: Sequence[Mapping[str, Any]] = ()
    ) -> Step[AIMessage]:
        return self._extractive(question, passages)  # the rule reads the passages; the chain adds no words

    def answer_from_facts(self, question: str, facts: str, sources: Sequence[Passage]) -> Step[AIMessage]:
        return self._extractive(question, sources)

    def direct(self, question: str) -> Step[AIMessage]:
        return _rule("direct", lambda: AIMessage(content=NOT_FOUND))

    def hyde(self, question: str) -> Step[str]:
        return _rule("hyde", lambda: question)

    def query_rewrites(self, query: str, n: int) -> Step[Structured[QueryRewrites]]:
        return _rule("query_rewrites", lambda: (offline_rewrites(query, n), None))

    def passage_ratings(self, query: str, passages: Sequence[Passage]) -> Step[Structured[PassageRatings]]:
        return _rule("passage_ratings", lambda: (offline_ratings(query, passages), None))

    def sufficiency(self, question: str, passages: Sequence[Passage]) -> Step[Structured[Sufficiency]]:
        return _rule("sufficiency", lambda: (offline_sufficiency(question, passages_text(passages)), None))

    def reformulation(
        self,
        question: str,
        passages: Sequence[Passage],
        chain: Sequence[Mapping[str, Any]],
        missing: str,
        *,
        sample: int = 0,
    ) -> Step[Structured[Reformulation]]:
        def reformulate() -> tuple[Reformulation, None]:
            # A fixed-length chain asks no check: what is missing is then what the check would have said.
            gap = missing if missing.strip() else offline_sufficiency(question, passages_text(passages)).missing_info
            return offline_reformulation(question, gap, passages, sample=sample), None

        return _rule("reformulation", reformulate)

    def sub_answer(self, query: str, passages: Sequence[Passage]) -> Step[Structured[SubAnswer]]:
        return _rule("sub_answer", lambda: (offline_sub_answer(query, passages), None))

    def decomposition(self, question: str, limit: int) -> Step[Structured[Decomposition]]:
        return _rule("decomposition", lambda: (offline_decomposition(question), None))

    def route(self, question: str) -> Step[Structured[Route]]:
        return _rule("route", lambda: (offline_route(question), None))

    def triplets(self, question: str, passage: Passage) -> Step[Structured[Triplets]]:
        title = " ".join((passage.title or "").split()) or "(untitled)"
        text = re.sub(r"\n\s*\n", "\n", passage.text.strip())
        return _rule("triplets", lambda: (offline_triplets(question, title, split_sentences(text)), None))
