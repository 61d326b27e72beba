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
(Naive)), as is a step with nothing to do. Without tools (forced synthesis, or a graph that just
asks for an answer) it answers *extractively*: the sentence of the gathered chunks that is most
similar to the question (embedding cosine plus word overlap, with a small bonus for second-hop
chunks), followed by the chunk ID it came from.

Structured outputs (CoRAG's sufficiency check, SRAG's decomposition and triplets) are produced by
documented rules in :mod:`arag_graph.structured`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field

from arag_graph.prompts import SYNTHESIS_INSTRUCTION

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
READS_PER_CALL = 2
HOP2_BONUS = 0.1


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


def _step_of(call_id: str | None) -> str:
    parts = (call_id or "").split("-")
    return parts[1] if len(parts) >= 3 and parts[0] == "offline" else "other"


class _Turn:
    """What the policy has done since the current question was asked.

    The policy tags its tool-call IDs with the plan step (``offline-read1-7``), so it knows which
    steps ran and which results belong to which hop without guessing.
    """

    def __init__(self, messages: Sequence[BaseMessage]) -> None:
        self.question = ""
        start = 0
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if isinstance(m, HumanMessage) and m.text.strip() != SYNTHESIS_INSTRUCTION.strip():
                self.question = _question_from_prompt(m.text)
                start = i
                break
        self.size = len(messages)
        self.prompt = messages[start].text if messages else ""
        self.done: set[str] = set()
        self.results: list[tuple[str, str, dict[str, Any]]] = []  # (step, tool, artifact)
        for m in messages[start + 1 :]:
            if isinstance(m, AIMessage):
                self.done.update(_step_of(c.get("id")) for c in m.tool_calls)
            elif isinstance(m, ToolMessage):
                artifact = m.artifact if isinstance(m.artifact, dict) else {}
                if not artifact:
                    artifact = {"chunk_ids": _CHUNK_BLOCK.findall(m.text), "read": []}
                self.results.append((_step_of(m.tool_call_id), m.name or "", artifact))

    def read(self, steps: Sequence[str] | None = None) -> list[str]:
        """Chunks whose full text came back (from ``steps`` only, when given)."""
        out: list[str] = []
        for step, _, artifact in self.results:
            if steps is None or step in steps:
                out.extend(i for i in artifact.get("read", []) if i not in out)
        return out

    def ranked(self, steps: Sequence[str] | None = None) -> list[str]:
        """Chunk IDs shown by the searches (of ``steps``), fused by reciprocal rank."""
        scores: dict[str, float] = {}
        for step, tool, artifact in self.results:
            if tool == "chunk_read" or (steps is not None and step not in steps):
                continue
            for rank, cid in enumerate(artifact.get("chunk_ids", [])):
                scores[cid] = scores.get(cid, 0.0) + 1.0 / (60 + rank)
        return sorted(scores, key=lambda c: -scores[c])


def _question_from_prompt(text: str) -> str:
    """Our answer prompts end with ``Question: ...``; a bare question is used as it is."""
    match = list(re.finditer(r"^Question:\s*(.+)$", text, re.MULTILINE))
    return match[-1].group(1).strip() if match else text.strip()


class OfflinePolicy(BaseChatModel):
    """Deterministic no-LLM policy with real tool calls and extractive answers (see module doc)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any = Field(default=None, exclude=True)
    """The index whose chunks the policy quotes; without one it quotes the text of tool messages."""
    model_name: str = "offline"

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
        from arag_graph.structured import offline_structured

        return offline_structured(self, schema, include_raw=bool(kwargs.get("include_raw")))

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
            message = self._answer(turn, messages)
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
        """Names in the first-hop chunks that the question does not mention.

        Candidates come from the sentences sharing most words with the question: in a bridge
        question, the sentence that matches the question is the one that names the next entity.
        """
        if self.index is None:
            return []
        q_lower, q_words = turn.question.lower(), content_words(turn.question)
        scored: list[tuple[float, str]] = []
        for cid in turn.read(("read1", "kw1", "sem1")):
            chunk = self.index.get_chunk(cid)
            if chunk is None:
                continue
            title = (chunk.title or "").lower()
            for sentence in chunk.sentence_texts() or [chunk.text]:
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
        return list(dict.fromkeys(span for _, span in scored))[:2]

    def _bridge_keywords(self, turn: _Turn) -> dict[str, Any] | None:
        bridges = self._bridges(turn)
        return {"keywords": bridges} if bridges else None

    def _bridge_query(self, turn: _Turn) -> dict[str, Any] | None:
        bridges = self._bridges(turn)
        return {"query": f"{bridges[0]}: {turn.question}"} if bridges else None

    # -- answering ---------------------------------------------------------------------------
    def _evidence(self, turn: _Turn, messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
        """(chunk id, text) of the chunks gathered for this question, in the order they came."""
        ids = turn.read()
        ids.extend(i for i in _CHUNK_BLOCK.findall(turn.prompt) if i not in ids)
        if not ids:  # nothing read: fall back to the best search hits
            ids = turn.ranked()[:3]
        out: list[tuple[str, str]] = []
        for cid in ids:
            chunk = self.index.get_chunk(cid) if self.index is not None else None
            if chunk is not None:
                out.append((cid, chunk.text))
        if not out:  # no index: quote the chunk blocks of the conversation itself
            for m in messages:
                for block in re.split(r"\n(?=\[chunk )", m.text):
                    found = _CHUNK_BLOCK.match(block)
                    if found:
                        out.append((found.group(1), block.split("\n", 1)[-1]))
        return out

    def _answer(self, turn: _Turn, messages: Sequence[BaseMessage]) -> AIMessage:
        question = turn.question
        sentences: list[tuple[str, str]] = []
        for cid, text in self._evidence(turn, messages):
            chunk = self.index.get_chunk(cid) if self.index is not None else None
            parts = chunk.sentence_texts() if chunk is not None and chunk.sentences else _rough_sentences(text)
            sentences.extend((cid, s.strip()) for s in parts if s.strip())
        if not question or not sentences:
            return AIMessage(content="Answer: I could not find information about this in the collection.")
        scores = self._sentence_scores(question, [s for _, s in sentences])
        # The end of a multi-hop chain is where answers tend to be: a small bonus for sentences
        # of second-hop chunks (it raised Contain-Acc on HotpotQA-100 from 20 to 23 points).
        second_hop = set(turn.read(("read2", "kw2", "sem2")))
        scores = scores + np.array([HOP2_BONUS if cid in second_hop else 0.0 for cid, _ in sentences])
        cid, sentence = sentences[int(np.argmax(scores))]
        return AIMessage(content=f"Answer: {sentence} [{cid}]")

    def _sentence_scores(self, question: str, sentences: Sequence[str]) -> np.ndarray:
        q_words = content_words(question)
        overlap = np.array([len(q_words & content_words(s)) / (1 + len(q_words)) for s in sentences])
        embeddings = getattr(self.index, "embeddings", None)
        if embeddings is None:
            return overlap
        from arag_graph.embeddings import embed_texts

        q = np.asarray(embeddings.embed_query(question), dtype=np.float32)
        vectors = embed_texts(embeddings, list(sentences))
        norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(q) or 1.0)
        cosine = vectors @ q / np.where(norms == 0, 1.0, norms)
        return cosine + 0.5 * overlap


def _rough_sentences(text: str) -> list[str]:
    from arag_graph.sentences import split_sentences

    return split_sentences(text)
