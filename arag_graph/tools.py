"""A-RAG's three retrieval tools as LangChain tools: keyword_search, semantic_search, chunk_read.

The tools are thin: ranking lives in :class:`~arag_graph.index.HierarchicalIndex`; this module turns
hits into text a model can act on, counts the corpus tokens it hands over (o200k_base, the paper's
measure), and keeps the *context tracker*: the set of chunks already read in this run, so that a
second read of a chunk costs a one-line notice instead of its text again.

The read-chunk set belongs to one run. Inside our graphs it lives in graph state and is passed to
each call as the injected ``tracker`` argument (models never see it); used on their own, the tools
fall back to the tracker given to :func:`create_retrieval_tools`, so create one set of tools per run.

Arguments come from language models, so they are coerced rather than rejected: a string where a
list is expected, numbers as IDs, ``top_k`` outside 1..20 (clamped). What cannot be understood comes
back as a tool message that says how to call the tool correctly.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from langchain_core.tools import BaseTool, InjectedToolArg, StructuredTool
from pydantic import BaseModel, BeforeValidator, Field, ValidationError

from arag_graph.index import HierarchicalIndex, SearchHit
from arag_graph.tokens import count_tokens

TOP_K_MIN, TOP_K_MAX = 1, 20
ToolName = Literal["keyword_search", "semantic_search", "chunk_read"]
ALL_TOOLS: tuple[ToolName, ...] = ("keyword_search", "semantic_search", "chunk_read")


class ContextTracker:
    """C_read (chunks already read in this run) and the corpus tokens handed out so far.

    Thread-safe, because a standalone agent may run tool calls in parallel threads.
    """

    def __init__(self, read: Iterable[str] = ()) -> None:
        self.read: set[str] = set(read)
        self.newly_read: list[str] = []  # claimed through this tracker, in order
        self.retrieved_tokens = 0
        self._lock = threading.Lock()

    def claim(self, chunk_id: str) -> bool:
        """Mark ``chunk_id`` read; False when it already was."""
        with self._lock:
            if chunk_id in self.read:
                return False
            self.read.add(chunk_id)
            self.newly_read.append(chunk_id)
            return True

    def add_tokens(self, n: int) -> None:
        with self._lock:
            self.retrieved_tokens += n

    def __repr__(self) -> str:  # traces show this; keep it short
        return f"ContextTracker(read={len(self.read)}, tokens={self.retrieved_tokens})"


@dataclass
class ToolOutput:
    """What one tool call returned: text for the model plus facts for the graph's state."""

    content: str
    tokens: int = 0
    chunk_ids: list[str] = field(default_factory=list)  # chunks shown, in rank order
    read: list[str] = field(default_factory=list)  # chunks whose full text was returned
    error: bool = False

    def artifact(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "chunk_ids": self.chunk_ids, "read": self.read, "error": self.error}


# ---------------------------------------------------------------------------------------------
# Coercion of model-written arguments


def _maybe_json_list(text: str) -> list[Any] | None:
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            value = json.loads(stripped)
        except ValueError:
            return None
        return value if isinstance(value, list) else None
    return None


def _as_string_list(value: Any) -> Any:
    """Accept a list, a JSON-encoded list, a comma/semicolon/newline separated string, or a scalar."""
    if value is None:
        return []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [_id_text(value)]
    if isinstance(value, str):
        parsed = _maybe_json_list(value)
        if parsed is not None:
            value = parsed
        else:
            return [part.strip() for part in re.split(r"[,;\n]", value) if part.strip()]
    if isinstance(value, (list, tuple, set)):
        return [_id_text(v) if isinstance(v, (int, float)) else v for v in value]
    return value


def _id_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _clamp_top_k(value: Any) -> int:
    try:
        k = int(float(value))
    except (TypeError, ValueError):
        return 5
    return max(TOP_K_MIN, min(TOP_K_MAX, k))


KeywordList = Annotated[list[str], BeforeValidator(_as_string_list)]
TopK = Annotated[int, BeforeValidator(_clamp_top_k)]


def _query_text(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, (int, float)):
        return str(value)
    return value


class KeywordSearchArgs(BaseModel):
    keywords: KeywordList = Field(
        description="Exact words or short phrases to find, e.g. names, titles, dates. "
        "Each is matched case-insensitively at the start of a word; longer keywords count more."
    )
    top_k: TopK = Field(default=5, description=f"How many chunks to return ({TOP_K_MIN}-{TOP_K_MAX}).")
    tracker: Annotated[Any, InjectedToolArg] = None


class SemanticSearchArgs(BaseModel):
    query: Annotated[str, BeforeValidator(_query_text)] = Field(
        description="A natural-language description of the information you need."
    )
    top_k: TopK = Field(default=5, description=f"How many chunks to return ({TOP_K_MIN}-{TOP_K_MAX}).")
    tracker: Annotated[Any, InjectedToolArg] = None
    query_vector: Annotated[Any, InjectedToolArg] = None
    """Set by a graph to search with another vector than the query's (HyDE); models never see it."""


class ChunkReadArgs(BaseModel):
    chunk_ids: KeywordList = Field(description="IDs of the chunks to read, exactly as search results show them.")
    adjacent: bool = Field(
        default=False,
        description="Also read the chunk before and the chunk after each requested chunk.",
    )
    tracker: Annotated[Any, InjectedToolArg] = None


# ---------------------------------------------------------------------------------------------
# Tool semantics (one place for each; graphs and standalone tools both go through these)


def chunk_block(chunk_id: str, title: str | None, text: str, note: str = "") -> str:
    """How chunk text is shown to a model, everywhere: ``[chunk ID] title="..." note`` then the text.

    One format for tool results and answer prompts, so citations look the same whatever the graph.
    """
    head = f"[chunk {chunk_id}]" + (f' title="{title}"' if title else "") + (f" {note}" if note else "")
    return f"{head}\n{text}"


def _hit_block(rank: int, hit: SearchHit, body: Sequence[str], note: str = "") -> str:
    title = f' title="{hit.title}"' if hit.title else ""
    lines = [f"[{rank}] chunk {hit.chunk_id}{title} score={hit.score:.3g}{note}"]
    lines.extend(f"    {text}" for text in body)
    return "\n".join(lines)


def format_search(
    tool: str,
    index: HierarchicalIndex,
    hits: Sequence[SearchHit],
    tracker: ContextTracker,
    *,
    full_text: bool,
    header: str,
) -> ToolOutput:
    """Render search hits: snippets by default, whole chunks in the "w/o chunk_read" setting."""
    blocks: list[str] = []
    tokens = 0
    read: list[str] = []
    for rank, hit in enumerate(hits, 1):
        if full_text:
            chunk = index.get_chunk(hit.chunk_id)
            if chunk is None:
                continue
            if tracker.claim(hit.chunk_id):
                read.append(hit.chunk_id)
                tokens += count_tokens(chunk.text)
                blocks.append(_hit_block(rank, hit, [chunk.text]))
            else:
                blocks.append(_hit_block(rank, hit, [], " (already read; text earlier in the conversation)"))
        else:
            tokens += sum(count_tokens(s) for s in hit.snippets)
            blocks.append(_hit_block(rank, hit, [f"- {s}" for s in hit.snippets]))
    tracker.add_tokens(tokens)
    footer = "" if full_text else "\nRead a chunk in full with chunk_read(chunk_ids=[...])."
    content = f"{header} found {len(blocks)} chunk(s):\n" + "\n".join(blocks) + footer
    return ToolOutput(content, tokens, [h.chunk_id for h in hits], read)


def keyword_search(
    index: HierarchicalIndex,
    keywords: Sequence[str],
    top_k: int,
    tracker: ContextTracker,
    *,
    full_text: bool = False,
) -> ToolOutput:
    cleaned = [k.strip() for k in keywords if isinstance(k, str) and k.strip()]
    usable = [k for k in cleaned if re.search(r"\w", k)]
    if not usable:
        return ToolOutput(
            "keyword_search needs at least one keyword containing letters or digits, e.g. "
            'keyword_search(keywords=["Marie Curie", "Nobel Prize"]).',
            error=True,
        )
    hits = index.keyword_search(usable, _clamp_top_k(top_k))
    if not hits:
        return ToolOutput(
            f"keyword_search({usable}) found no chunk containing these keywords. Try fewer or shorter "
            "keywords, other spellings, or semantic_search with a descriptive query."
        )
    return format_search(
        "keyword_search", index, hits, tracker, full_text=full_text, header=f"keyword_search({usable})"
    )


def semantic_search(
    index: HierarchicalIndex,
    query: str,
    top_k: int,
    tracker: ContextTracker,
    *,
    full_text: bool = False,
    query_vector: Sequence[float] | None = None,
) -> ToolOutput:
    query = (query or "").strip()
    if not query:
        return ToolOutput(
            'semantic_search needs a non-empty query, e.g. semantic_search(query="who founded the company").',
            error=True,
        )
    hits = index.semantic_search(query, _clamp_top_k(top_k), query_vector=query_vector)
    if not hits:
        return ToolOutput("semantic_search found nothing: the index is empty.")
    return format_search(
        "semantic_search", index, hits, tracker, full_text=full_text, header=f"semantic_search({query!r})"
    )


def chunk_read(
    index: HierarchicalIndex, chunk_ids: Sequence[str], tracker: ContextTracker, *, adjacent: bool = False
) -> ToolOutput:
    requested = list(dict.fromkeys(str(i).strip() for i in chunk_ids if str(i).strip()))
    if not requested:
        return ToolOutput(
            'chunk_read needs chunk IDs from search results, e.g. chunk_read(chunk_ids=["12", "40"]).',
            error=True,
        )
    wanted: list[str] = []
    unknown: list[str] = []
    for cid in requested:
        chunk = index.get_chunk(cid)
        if chunk is None:
            unknown.append(cid)
            continue
        around = [chunk.prev_id, cid, chunk.next_id] if adjacent else [cid]
        wanted.extend(i for i in around if i is not None and i not in wanted)
    blocks: list[str] = []
    read: list[str] = []
    tokens = 0
    for cid in wanted:
        chunk = index.get_chunk(cid)
        assert chunk is not None
        if not tracker.claim(cid):
            blocks.append(f"[chunk {cid}] already read in this run; its text is earlier in the conversation.")
            continue
        read.append(cid)
        tokens += count_tokens(chunk.text)
        links = f"(previous: {chunk.prev_id or 'none'}, next: {chunk.next_id or 'none'})"
        blocks.append(chunk_block(cid, chunk.title, chunk.text, links))
    if unknown:
        hint = _suggest_ids(index, unknown)
        blocks.append(f"Unknown chunk ID(s): {', '.join(unknown)}. Use IDs exactly as search results show them.{hint}")
    tracker.add_tokens(tokens)
    return ToolOutput("\n\n".join(blocks), tokens, wanted, read, error=bool(unknown) and not wanted)


def _suggest_ids(index: HierarchicalIndex, unknown: Sequence[str]) -> str:
    """Point at split chunks when a model drops the ``#n`` suffix of a chunk ID."""
    suggestions = [f"{u}#0" for u in unknown if index.get_chunk(f"{u}#0") is not None]
    return f" Did you mean {', '.join(suggestions)}?" if suggestions else ""


# ---------------------------------------------------------------------------------------------
# LangChain tools


_KEYWORD_DESCRIPTION = (
    "Find chunks that contain exact words or phrases (names, titles, numbers, rare terms). "
    "Best when you know a precise string that must appear in the evidence."
)
_SEMANTIC_DESCRIPTION = (
    "Find chunks whose sentences are closest in meaning to a natural-language query. Best when you "
    "know what you are looking for but not its exact wording."
)
_SNIPPET_NOTE = {
    "keyword_search": " Returns chunk IDs with the sentences that contain a keyword;"
    " use chunk_read to see a whole chunk.",
    "semantic_search": " Returns chunk IDs with the most similar sentences; use chunk_read to see a whole chunk.",
}
_FULL_TEXT_NOTE = " Returns the full text of each chunk found (chunks already returned are not repeated)."
_READ_DESCRIPTION = (
    "Read the full text of chunks by ID, after a search showed they look relevant. A chunk already "
    "read in this run is not repeated. Each chunk shows its previous and next chunk IDs; set "
    "adjacent=true to read those too when a passage continues across chunks."
)


def _validation_message(tool: str, usage: str) -> Any:
    def handle(error: ValidationError) -> str:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())) or 'arguments'}: {e.get('msg')}" for e in error.errors()[:3]
        )
        return f"Invalid arguments for {tool} ({problems}). Call it like {usage}."

    return handle


def create_retrieval_tools(
    index: HierarchicalIndex,
    *,
    tools: Sequence[str] = ALL_TOOLS,
    tracker: ContextTracker | None = None,
    full_text: bool | None = None,
) -> list[BaseTool]:
    """The A-RAG tools over ``index``.

    ``tools`` picks a subset (the paper's ablations). ``full_text`` makes the searches return whole
    chunks instead of snippets; it defaults to on exactly when ``chunk_read`` is left out, which is
    the paper's "w/o chunk_read" setting. Each tool returns ``(content, artifact)``: the artifact
    holds the corpus tokens returned and the chunk IDs shown and read.
    """
    unknown = [t for t in tools if t not in ALL_TOOLS]
    if unknown:
        raise ValueError(f"unknown tool(s) {unknown}; choose from {list(ALL_TOOLS)}")
    if full_text is None:
        full_text = "chunk_read" not in tools
    default_tracker = tracker if tracker is not None else ContextTracker()

    def pick(given: Any) -> ContextTracker:
        return given if isinstance(given, ContextTracker) else default_tracker

    def _keyword(keywords: list[str], top_k: int = 5, tracker: Any = None) -> tuple[str, dict[str, Any]]:
        out = keyword_search(index, keywords, top_k, pick(tracker), full_text=full_text)
        return out.content, out.artifact()

    def _semantic(
        query: str, top_k: int = 5, tracker: Any = None, query_vector: Any = None
    ) -> tuple[str, dict[str, Any]]:
        out = semantic_search(index, query, top_k, pick(tracker), full_text=full_text, query_vector=query_vector)
        return out.content, out.artifact()

    def _read(chunk_ids: list[str], adjacent: bool = False, tracker: Any = None) -> tuple[str, dict[str, Any]]:
        out = chunk_read(index, chunk_ids, pick(tracker), adjacent=adjacent)
        return out.content, out.artifact()

    def describe(name: str, base: str) -> str:
        return base + (_FULL_TEXT_NOTE if full_text else _SNIPPET_NOTE[name])

    made: dict[str, BaseTool] = {
        "keyword_search": StructuredTool.from_function(
            _keyword,
            name="keyword_search",
            description=describe("keyword_search", _KEYWORD_DESCRIPTION),
            args_schema=KeywordSearchArgs,
            response_format="content_and_artifact",
            handle_validation_error=_validation_message(
                "keyword_search", 'keyword_search(keywords=["Marie Curie", "Nobel Prize"], top_k=5)'
            ),
        ),
        "semantic_search": StructuredTool.from_function(
            _semantic,
            name="semantic_search",
            description=describe("semantic_search", _SEMANTIC_DESCRIPTION),
            args_schema=SemanticSearchArgs,
            response_format="content_and_artifact",
            handle_validation_error=_validation_message(
                "semantic_search", 'semantic_search(query="where was the author born", top_k=5)'
            ),
        ),
        "chunk_read": StructuredTool.from_function(
            _read,
            name="chunk_read",
            description=_READ_DESCRIPTION,
            args_schema=ChunkReadArgs,
            response_format="content_and_artifact",
            handle_validation_error=_validation_message("chunk_read", 'chunk_read(chunk_ids=["12", "40"])'),
        ),
    }
    return [made[name] for name in tools]
