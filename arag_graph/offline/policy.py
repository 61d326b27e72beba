"""The ``offline`` policy: a deterministic, rule-based stand-in for a tool-calling model.

This is **not a language model**. It is a fixed retrieval strategy written as a LangChain
``BaseChatModel`` so that the demo, LangGraph Studio, the tests and the whole evaluation pipeline run
with no network, and so that there is a measurable no-LLM baseline. No metric that needs a real
LLM (such as LLM-Acc) may be reported for it.

With A-RAG's tools bound it plans one tool call per turn, through the same tool schemas a model
sees, in two hops:

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

The plan lives here, below the model layer, because ``--model offline`` is this class
(:func:`arag_graph.llm.models.resolve_chat_model`) and it is an ordinary tool-calling model: it plans
the same way in A-RAG's graph and in any agent given A-RAG's three tools.

The non-agentic graphs (Naive RAG, CoRAG, SRAG, Direct) do not converse with the policy: each
family's offline model (``OfflineCorag`` in ``corag/model.py``, ...) answers their typed requests (the
question, the passages, the chain so far) with documented rules, without ever seeing a prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field

from arag_graph.core.artifacts import artifact_of
from arag_graph.offline.rules import AnswerStyle, bridge_names, extractive_answer, salient_spans
from arag_graph.retrievers.passages import rrf_scores

__all__ = ["READS_PER_CALL", "AnswerStyle", "OfflinePolicy"]

_CHUNK_BLOCK = re.compile(r"^\[chunk ([^\]\n]+)\]", re.MULTILINE)
READS_PER_CALL = 2


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
            "through each family's offline model (OfflineCorag, OfflineSrag, ...); use a real model for other "
            "structured requests"
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
