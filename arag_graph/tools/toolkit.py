"""A-RAG's three retrieval tools as LangChain tools: keyword_search, semantic_search, chunk_read.

The tools are thin: ranking lives in :class:`~arag_graph.index.hierarchical.HierarchicalIndex`; this module turns
hits into text a model can act on and counts the corpus tokens it hands over (o200k_base, the
paper's measure).

A-RAG's *context tracker* (C_read, the chunks already read in this run, so that reading one again
costs a one-line notice instead of its text) is run state, not tool state: the tools are stateless,
made once, and read the conversation they are called in through LangGraph's injection
(``ToolRuntime``). The chunks whose text the conversation already holds are those recorded in the
artifacts of its earlier tool messages. That is what makes one set of tools correct in our graphs,
in ``ToolNode``, ``create_agent`` and ``create_react_agent``, on any number of threads and across
checkpoints. Called outside a graph (``tool.invoke({...})``) a tool sees no conversation: nothing
has been read yet.

Arguments come from language models, so they are coerced rather than rejected, on every path into
a tool (a plain string where a list is expected, numbers as IDs, ``top_k`` outside 1..20, clamped).
What cannot be understood comes back as a tool message that says how to call the tool correctly.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from langchain_core.tools import BaseTool, BaseToolkit, InjectedToolArg, StructuredTool
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, GetJsonSchemaHandler, ValidationError, create_model
from pydantic.json_schema import JsonSchemaValue

from arag_graph.core.artifacts import read_in
from arag_graph.core.citations import chunk_block
from arag_graph.core.documents import SearchHit, window_text
from arag_graph.core.limits import MODEL_TEXT_MAX, TOP_K_MAX, TOP_K_MIN
from arag_graph.core.tokens import count_tokens
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.tools.descriptions import ToolStyle, keyword_argument, tool_description

ToolName = Literal["keyword_search", "semantic_search", "chunk_read"]
ALL_TOOLS: tuple[ToolName, ...] = ("keyword_search", "semantic_search", "chunk_read")


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


def as_string_list(value: Any) -> Any:
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


def string_list(value: Any) -> list[str]:
    """:func:`as_string_list` for the tools' own code paths: always a list of strings."""
    value = as_string_list(value)
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def as_bool(value: Any) -> bool:
    return value is True or str(value).strip().lower() in {"true", "1", "yes"}


def _id_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def clamp_top_k(value: Any) -> int:
    """A model's ``top_k`` into 1..20: a huge or infinite one gives 20, anything unreadable (NaN too) 5."""
    try:
        k = float(value)
    except (TypeError, ValueError):
        return 5
    if math.isnan(k):
        return 5
    return int(max(TOP_K_MIN, min(TOP_K_MAX, k)))


KeywordList = Annotated[list[str], BeforeValidator(as_string_list)]


def query_text(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, (int, float)):
        return str(value)
    return value


# What each argument's JSON schema tells the model about its size (read leniently all the same: the
# validators above accept more and clamp). Servers that hold tool calls to their schema by grammar end a
# list or a string only at these bounds or where the model does (core/limits.bounded_schema says why).
KEYWORDS_MAX, KEYWORD_CHARS_MAX, QUERY_CHARS_MAX, CHUNK_ID_CHARS_MAX = 16, 100, MODEL_TEXT_MAX, 200
KEYWORDS_SCHEMA = {"maxItems": KEYWORDS_MAX, "items": {"type": "string", "maxLength": KEYWORD_CHARS_MAX}}
CHUNK_IDS_SCHEMA = {"maxItems": TOP_K_MAX, "items": {"type": "string", "maxLength": CHUNK_ID_CHARS_MAX}}
TOP_K_SCHEMA = {"minimum": TOP_K_MIN, "maximum": TOP_K_MAX}


@dataclass(frozen=True)
class ShownBounds:
    """Bounds added to an argument's JSON schema only: pydantic calls this when it writes the schema, and
    validation never sees it. Kept in the type's metadata, which LangChain carries into the schema it
    sends (a field's own ``json_schema_extra`` it drops)."""

    bounds: tuple[tuple[str, Any], ...]

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema.update(copy.deepcopy(dict(self.bounds)))  # a copy: schemas are changed later
        return schema


def shown(bounds: dict[str, Any]) -> ShownBounds:
    return ShownBounds(tuple(bounds.items()))


def top_k_field() -> Any:
    return Field(default=5, description=f"How many chunks to return ({TOP_K_MIN}-{TOP_K_MAX}).")


Keywords = Annotated[KeywordList, shown(KEYWORDS_SCHEMA)]
ChunkIds = Annotated[KeywordList, shown(CHUNK_IDS_SCHEMA)]
QueryText = Annotated[str, BeforeValidator(query_text), shown({"maxLength": QUERY_CHARS_MAX})]
TopK = Annotated[int, BeforeValidator(clamp_top_k), shown(TOP_K_SCHEMA)]


class KeywordSearchArgs(BaseModel):
    keywords: Keywords = Field(
        description="Exact words or short phrases to find, e.g. names, titles, dates. "
        "Each is matched case-insensitively at the start of a word; longer keywords count more."
    )
    top_k: TopK = top_k_field()
    runtime: Annotated[Any, InjectedToolArg] = None
    """The run's ``ToolRuntime`` (its conversation and context), injected by LangGraph; models never see it."""


class SemanticSearchArgs(BaseModel):
    query: QueryText = Field(description="A natural-language description of the information you need.")
    top_k: TopK = top_k_field()
    runtime: Annotated[Any, InjectedToolArg] = None


class ChunkReadArgs(BaseModel):
    chunk_ids: ChunkIds = Field(description="IDs of the chunks to read, exactly as search results show them.")
    adjacent: bool = Field(
        default=False,
        description="Also read the chunk before and the chunk after each requested chunk.",
    )
    runtime: Annotated[Any, InjectedToolArg] = None


# ---------------------------------------------------------------------------------------------
# Tool semantics (one place for each; graphs and standalone tools both go through these)


def _hit_block(rank: int, hit: SearchHit, body: Sequence[str], note: str = "") -> str:
    title = f' title="{hit.title}"' if hit.title else ""
    lines = [f"[{rank}] chunk {hit.chunk_id}{title} score={hit.score:.3g}{note}"]
    lines.extend(f"    {text}" for text in body)
    return "\n".join(lines)


def format_search(
    index: HierarchicalIndex,
    hits: Sequence[SearchHit],
    read: set[str],
    *,
    full_text: bool,
    dedupe: bool,
    header: str,
    snippet_window: int = 1,
    can_read: bool = True,
) -> ToolOutput:
    """Render search hits: snippets by default, whole chunks in the "w/o chunk_read" setting.

    Whole chunks are returned every time and counted, as the paper's A-RAG (Naive) does, unless
    ``dedupe`` shows a chunk already in the conversation as a one-line notice. The pointer to
    chunk_read is shown only when the caller has that tool (``can_read``).
    """
    blocks: list[str] = []
    tokens = 0
    returned: list[str] = []
    for rank, hit in enumerate(hits, 1):
        if full_text:
            chunk = index.get_chunk(hit.chunk_id)
            if chunk is None:
                continue
            if dedupe and hit.chunk_id in read:
                blocks.append(_hit_block(rank, hit, [], " (already read; text earlier in the conversation)"))
                continue
            read.add(hit.chunk_id)
            returned.append(hit.chunk_id)
            tokens += count_tokens(chunk.text)
            blocks.append(_hit_block(rank, hit, [chunk.text]))
        else:
            snippets = _windowed(index, hit, snippet_window)
            tokens += sum(count_tokens(s) for s in snippets)
            blocks.append(_hit_block(rank, hit, [f"- {s}" for s in snippets]))
    footer = "\nRead a chunk in full with chunk_read(chunk_ids=[...])." if can_read and not full_text else ""
    content = f"{header} found {len(blocks)} chunk(s):\n" + "\n".join(blocks) + footer
    return ToolOutput(content, tokens, [h.chunk_id for h in hits], returned)


def _windowed(index: HierarchicalIndex, hit: SearchHit, window: int) -> list[str]:
    """A hit's snippets, each matched sentence widened to a window of ``window`` sentences."""
    chunk = index.get_chunk(hit.chunk_id) if window > 1 else None
    if chunk is None or not chunk.sentences:
        return list(hit.snippets)
    positions = hit.positions or tuple(
        i for i, (start, end) in enumerate(chunk.sentences) if chunk.text[start:end] in hit.snippets
    )
    return [window_text(chunk, [p], window) for p in positions] or list(hit.snippets)


def keyword_search(
    index: HierarchicalIndex,
    keywords: Any,
    top_k: Any = 5,
    read: set[str] | None = None,
    *,
    full_text: bool = False,
    dedupe: bool = False,
    snippet_window: int = 1,
    can_read: bool = True,
) -> ToolOutput:
    cleaned = [k.strip() for k in string_list(keywords) if k.strip()]
    usable = [k for k in cleaned if re.search(r"\w", k)]
    if not usable:
        return ToolOutput(
            "keyword_search needs at least one keyword containing letters or digits, e.g. "
            'keyword_search(keywords=["Marie Curie", "Nobel Prize"]).',
            error=True,
        )
    hits = index.keyword_search(usable, clamp_top_k(top_k))
    if not hits:
        return ToolOutput(
            f"keyword_search({usable}) found no chunk containing these keywords. Try fewer or shorter "
            "keywords, other spellings, or semantic_search with a descriptive query."
        )
    header = f"keyword_search({usable})"
    read = set() if read is None else read
    return format_search(
        index,
        hits,
        read,
        full_text=full_text,
        dedupe=dedupe,
        header=header,
        snippet_window=snippet_window,
        can_read=can_read,
    )


def semantic_search(
    index: HierarchicalIndex,
    query: Any,
    top_k: Any = 5,
    read: set[str] | None = None,
    *,
    full_text: bool = False,
    dedupe: bool = False,
    query_vector: Sequence[float] | None = None,
    snippet_window: int = 1,
    can_read: bool = True,
) -> ToolOutput:
    query = str(query_text(query) or "").strip()
    if not query:
        return ToolOutput(
            'semantic_search needs a non-empty query, e.g. semantic_search(query="who founded the company").',
            error=True,
        )
    hits = index.semantic_search(query, clamp_top_k(top_k), query_vector=query_vector)
    if not hits:
        return ToolOutput("semantic_search found nothing: the index is empty.")
    header = f"semantic_search({query!r})"
    read = set() if read is None else read
    return format_search(
        index,
        hits,
        read,
        full_text=full_text,
        dedupe=dedupe,
        header=header,
        snippet_window=snippet_window,
        can_read=can_read,
    )


def chunk_read(
    index: HierarchicalIndex, chunk_ids: Any, read: set[str] | None = None, *, adjacent: Any = False
) -> ToolOutput:
    read = set() if read is None else read
    requested = list(dict.fromkeys(i.strip() for i in string_list(chunk_ids) if i.strip()))
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
        around = [chunk.prev_id, cid, chunk.next_id] if as_bool(adjacent) else [cid]
        wanted.extend(i for i in around if i is not None and i not in wanted)
    blocks: list[str] = []
    returned: list[str] = []
    tokens = 0
    for cid in wanted:
        chunk = index.get_chunk(cid)
        assert chunk is not None
        if cid in read:
            blocks.append(f"[chunk {cid}] already read in this run; its text is earlier in the conversation.")
            continue
        read.add(cid)
        returned.append(cid)
        tokens += count_tokens(chunk.text)
        links = f"(previous: {chunk.prev_id or 'none'}, next: {chunk.next_id or 'none'})"
        blocks.append(chunk_block(cid, chunk.title, chunk.text, links))
    if unknown:
        hint = _suggest_ids(index, unknown)
        blocks.append(f"Unknown chunk ID(s): {', '.join(unknown)}. Use IDs exactly as search results show them.{hint}")
    return ToolOutput("\n\n".join(blocks), tokens, wanted, returned, error=bool(unknown) and not wanted)


def _suggest_ids(index: HierarchicalIndex, unknown: Sequence[str]) -> str:
    """Point at split chunks when a model drops the ``#n`` suffix of a chunk ID."""
    suggestions = [f"{u}#0" for u in unknown if index.get_chunk(f"{u}#0") is not None]
    return f" Did you mean {', '.join(suggestions)}?" if suggestions else ""


# ---------------------------------------------------------------------------------------------
# LangChain tools


def _validation_message(tool: str, usage: str) -> Any:
    def handle(error: ValidationError) -> str:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())) or 'arguments'}: {e.get('msg')}" for e in error.errors()[:3]
        )
        return f"Invalid arguments for {tool} ({problems}). Call it like {usage}."

    return handle


IndexSource = HierarchicalIndex | Callable[[Any], HierarchicalIndex] | None


def _index_of(source: IndexSource, runtime: Any) -> HierarchicalIndex:
    if isinstance(source, HierarchicalIndex):
        return source
    if source is not None:
        return source(runtime)
    # No index given: the one the run's context names, under the operator's serving policy. Only
    # this path needs the run layer, so an app that passes its index never loads it.
    from arag_graph.run.runtime import index_for_context

    return index_for_context(getattr(runtime, "context", None))


def state_messages(state: Any) -> list[Any]:
    """The ``messages`` of a graph state, whether a dict or an object (a parent app's own state class)."""
    if isinstance(state, dict):
        return list(state.get("messages") or [])
    return list(getattr(state, "messages", None) or [])


def _messages_of(runtime: Any) -> list[Any]:
    return state_messages(getattr(runtime, "state", None))


@dataclass(frozen=True)
class ToolSettings:
    """How a set of tools behaves; a graph swaps in the variant a run's settings ask for.

    (LangGraph's ``ToolNode`` strips hidden arguments from tool calls, so that a model cannot forge
    them; run settings therefore travel as a configured tool, not as arguments.)
    """

    full_text: bool = False
    """Searches return whole chunks instead of snippets (the paper's "w/o chunk_read")."""
    dedupe: bool = False
    """With ``full_text``: a chunk the conversation already holds is a notice, not its text again."""
    query_vector: tuple[float, ...] | None = None
    """semantic_search embeds this instead of the query (HyDE's hypothetical passage)."""
    also_read: frozenset[str] = frozenset()
    """Chunks read by earlier calls of the same turn, which the conversation does not show yet."""
    snippet_window: int = 1
    """Sentences per snippet, centred on a matched sentence (ARAGOG's sentence window; 1: the sentence)."""
    can_read: bool = True
    """chunk_read is bound beside the searches, so their snippets may point to it."""
    style: ToolStyle = "package"
    """The descriptions' wording (:mod:`arag_graph.tools.descriptions`): ours, or the paper's instructions."""
    keyword_rule: str = "word"
    """How the index matches a keyword (its manifest's ``keyword_match``), as keyword_search's description says."""
    title_matches: bool = True
    """The index matches chunk titles too (contextual headers), as keyword_search's description says."""

    @classmethod
    def for_tools(cls, tools: Sequence[str], *, full_text: bool | None = None, **settings: Any) -> ToolSettings:
        """The settings of a tool set: one rule for what its searches return and how they are described.

        ``full_text`` defaults to on exactly when ``chunk_read`` is left out (the paper's "w/o
        chunk_read" and A-RAG (Naive)): a search whose snippets cannot be followed by a read would
        show the model less than the chunk it found.
        """
        can_read = "chunk_read" in tools
        return cls(full_text=not can_read if full_text is None else full_text, can_read=can_read, **settings)

    def search_flags(self) -> dict[str, Any]:
        """How a search renders its hits under these settings (:func:`format_search`'s options)."""
        return {
            "full_text": self.full_text,
            "dedupe": self.dedupe,
            "snippet_window": self.snippet_window,
            "can_read": self.can_read,
        }

    @staticmethod
    def index_facts(index: Any) -> dict[str, Any]:
        """What a description must say of ``index`` (a loaded index; otherwise nothing is known yet)."""
        if not isinstance(index, HierarchicalIndex):
            return {}
        manifest = index.manifest
        return {
            "keyword_rule": manifest.keyword_match,
            "title_matches": bool(manifest.contextual_headers and manifest.header_max_chars > 0),
        }

    def describe(self, name: str) -> str:
        """A tool's description as this variant behaves: whole chunks, or snippets (and chunk_read)."""
        return tool_description(
            name, self.style, full_text=self.full_text, can_read=self.can_read, title_matches=self.title_matches
        )

    def args_schema(self, name: str) -> type[BaseModel]:
        """A tool's arguments; keyword_search's ``keywords`` described in this variant's wording and rule."""
        if name == "keyword_search":
            return _keyword_args(self.style, self.keyword_rule)
        return _TOOL_FORMS[name][0]


@functools.cache
def _keyword_args(style: ToolStyle, rule: str) -> type[BaseModel]:
    if (style, rule) == ("package", "word"):
        return KeywordSearchArgs
    described = Field(description=keyword_argument(style, rule))
    return create_model("KeywordSearchArgs", __base__=KeywordSearchArgs, keywords=(Keywords, described))


def create_retrieval_tools(
    index: IndexSource = None,
    *,
    tools: Sequence[ToolName] = ALL_TOOLS,
    full_text: bool | None = None,
    dedupe: bool = False,
) -> list[BaseTool]:
    """The A-RAG tools over ``index``, ready for any tool-calling agent; make them once and share them.

    ``index`` is a loaded index, or a function of the tool's ``ToolRuntime`` returning one, or None
    for the index the run's context names (``index_path``, else ``$ARAG_INDEX``, else the bundled
    sample), as our served graphs do. ``tools`` picks a subset (the paper's ablations).
    ``full_text`` makes the searches return whole chunks instead of snippets; it defaults to on
    exactly when ``chunk_read`` is left out, the paper's "w/o chunk_read" setting; ``dedupe`` then
    replaces chunks the conversation already holds with a notice (off: the paper returns them again).
    Each tool returns ``(content, artifact)``: the artifact holds the corpus tokens returned and the
    chunk IDs shown and read, which is also how later calls know what was read.
    """
    unknown = [t for t in tools if t not in ALL_TOOLS]
    if unknown:
        raise ValueError(f"unknown tool(s) {unknown}; choose from {list(ALL_TOOLS)}")
    settings = ToolSettings.for_tools(tools, full_text=full_text, dedupe=dedupe, **ToolSettings.index_facts(index))
    return [retrieval_tool(index, name, settings) for name in tools]


def retrieval_tool(index: IndexSource, name: str, settings: ToolSettings) -> BaseTool:
    """One tool over ``index`` behaving as ``settings`` say."""

    def read_set(runtime: Any) -> set[str]:
        return set(read_in(_messages_of(runtime), _index_of(index, runtime))) | set(settings.also_read)

    def _keyword(keywords: Any, top_k: Any = 5, runtime: Any = None) -> tuple[str, dict[str, Any]]:
        flags = settings.search_flags()
        out = keyword_search(_index_of(index, runtime), keywords, top_k, read_set(runtime), **flags)
        return out.content, out.artifact()

    def _semantic(query: Any, top_k: Any = 5, runtime: Any = None) -> tuple[str, dict[str, Any]]:
        flags = {**settings.search_flags(), "query_vector": settings.query_vector}
        out = semantic_search(_index_of(index, runtime), query, top_k, read_set(runtime), **flags)
        return out.content, out.artifact()

    def _read(chunk_ids: Any, adjacent: Any = False, runtime: Any = None) -> tuple[str, dict[str, Any]]:
        out = chunk_read(_index_of(index, runtime), chunk_ids, read_set(runtime), adjacent=adjacent)
        return out.content, out.artifact()

    calls: dict[str, Callable[..., tuple[str, dict[str, Any]]]] = {
        "keyword_search": _keyword,
        "semantic_search": _semantic,
        "chunk_read": _read,
    }
    if name not in calls:
        raise ValueError(f"unknown tool {name!r}; choose from {list(ALL_TOOLS)}")
    return _langchain_tool(name, calls[name], settings)


_TOOL_FORMS: dict[str, tuple[type[BaseModel], str]] = {
    "keyword_search": (KeywordSearchArgs, 'keyword_search(keywords=["Marie Curie", "Nobel Prize"], top_k=5)'),
    "semantic_search": (SemanticSearchArgs, 'semantic_search(query="where was the author born", top_k=5)'),
    "chunk_read": (ChunkReadArgs, 'chunk_read(chunk_ids=["12", "40"])'),
}
"""Each tool's argument schema and how to call it (descriptions: :mod:`arag_graph.tools.descriptions`)."""


def _langchain_tool(name: str, call: Callable[..., Any], settings: ToolSettings) -> BaseTool:
    """``call`` as the LangChain tool ``name``: content and artifact out, bad arguments answered in words."""
    _, usage = _TOOL_FORMS[name]
    return StructuredTool.from_function(
        call,
        name=name,
        description=settings.describe(name),
        args_schema=settings.args_schema(name),
        response_format="content_and_artifact",
        handle_validation_error=_validation_message(name, usage),
    )


class AragToolkit(BaseToolkit):
    """The retrieval tools of one index as a LangChain toolkit: ``AragToolkit(index=...).get_tools()``.

    For code that collects tools from toolkits (``[*toolkit.get_tools(), ...]``), as LangChain's
    own integrations ship theirs. The tools are :func:`create_retrieval_tools`'s, with the same
    options; ``index`` is a loaded index, an index directory (the caller's own, loaded once per
    process) or None for the bundled sample.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: HierarchicalIndex | str | os.PathLike[str] | None = None
    tools: tuple[ToolName, ...] = ALL_TOOLS
    """Which tools, in this order (the paper's ablations leave one out)."""
    full_text: bool | None = None
    """Searches return whole chunks; default: exactly when ``chunk_read`` is left out."""
    dedupe: bool = False
    """With ``full_text``: a chunk already in the conversation is a notice, not its text again."""

    def get_tools(self) -> list[BaseTool]:
        if isinstance(self.index, HierarchicalIndex):
            index = self.index
        else:  # a directory or the bundled sample, loaded the way a run loads it (once per process)
            from arag_graph.run.runtime import load_run_index

            index = load_run_index(self.index)
        return create_retrieval_tools(index, tools=self.tools, full_text=self.full_text, dedupe=self.dedupe)
