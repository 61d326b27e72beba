"""What a node works with in one run: the run's context, its index and its model.

A graph builder may fix the index and the model (:class:`Bound`, the operator's choice); what it
leaves open comes from each run's context, so one compiled graph serves Studio users who pick
another index or model in the form, within what the operator allows (:mod:`arag_graph.run.policy`).
Indexes are loaded once per process and shared by concurrent runs.

Tracing: every run of a graph, the top-level one included, carries the graph's name as a tag and
its model and settings as metadata; see :class:`TracedGraph` for how the top-level run gets them.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, cast, overload

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, GraphOutput, StreamMode, StreamPart
from langgraph.typing import StateLike

from arag_graph.core.endpoints import check_endpoint, client_endpoint, serving
from arag_graph.core.errors import AragError
from arag_graph.core.tracing import local_tracing_guard
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.load import load_index
from arag_graph.llm.models import resolve_chat_model, with_settings
from arag_graph.run.budgets import with_budget
from arag_graph.run.configuration import GraphContext
from arag_graph.run.policy import RunRefused, ServingPolicy, served_error
from arag_graph.run.state import InputState

IndexLike = HierarchicalIndex | str | os.PathLike[str] | None
_Context = TypeVar("_Context", bound=StateLike | None)
_Output = TypeVar("_Output", bound=StateLike)
C = TypeVar("C", bound=GraphContext)
"""A graph's context schema: nodes read its typed fields, never ``getattr(ctx, name, default)``."""


def load_run_index(path: str | os.PathLike[str] | None, *, served: bool = False) -> HierarchicalIndex:
    """The index at ``path`` (loaded once per process), or the bundled sample when there is none.

    ``served``: a caller's run, so the index must be reached from the operator's root without a
    symbolic link (:meth:`ServingPolicy.open_index_dir`), the embedding model its manifest names (an
    endpoint, a model folder) must be one the operator allows
    (:meth:`ServingPolicy.check_index_models`), every client the index builds (embeddings endpoint,
    Chroma server) is built under the serving policy (:func:`arag_graph.core.endpoints.serving`), and
    any failure is the caller's one-line :class:`RunRefused`. An index already loaded in this process
    has its clients' endpoints checked again, as if they were built now. Runs in a worker thread
    (graph nodes), never on a server's event loop.
    """
    if not path:
        from arag_graph.index.sample import ensure_sample_index  # the build path, only when it is needed

        return ensure_sample_index(progress=False)
    if not served:
        with serving(None):
            index = load_index(path, cache=True)
            check_index_clients(index)
        return index
    policy = ServingPolicy.from_env()
    try:
        policy.open_index_dir(str(path))  # before the cache: a link must not reach a loaded index
        with serving(policy):
            index = load_index(
                path, cache=True, check_endpoint=lambda manifest: policy.check_index_models(manifest, path)
            )
            check_index_clients(index)
    except RunRefused:
        raise
    except AragError as exc:
        # A ValueError, so that the server sends the caller this line rather than "An internal
        # error occurred"; in the operator's words but without the operator's directories.
        raise RunRefused(f"index_path {policy.shown(path)!r} cannot be used: {policy.private(str(exc))}") from None
    return index


def check_index_clients(index: HierarchicalIndex) -> None:
    """The endpoint rule on the clients a loaded index holds (a no-op outside a served run)."""
    from arag_graph.index.chroma import SentenceStore
    from arag_graph.index.embedding_loader import EndpointEmbeddings

    if isinstance(index.embeddings, EndpointEmbeddings):
        check_endpoint("embeddings", client_endpoint(index.embeddings._client), "this index's embedding model")
    if isinstance(index.sentences, SentenceStore) and index.sentences.config.get("mode") == "http":
        check_endpoint("chroma", index.sentences.endpoint, "the sentence store's Chroma server")


def index_for_context(context: Any) -> HierarchicalIndex:
    """The index a run's context names, as a graph without a fixed index would pick it."""
    ctx = GraphContext.of_run(context)
    return load_run_index(ctx.choice().index_path, served=not ctx.is_trusted)


def model_label(model: BaseChatModel | str | None, ctx: GraphContext) -> str:
    """The model's name as traces and records show it."""
    if isinstance(model, BaseChatModel):
        return str(getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__)
    return str(model or ctx.choice().model)


@dataclass(frozen=True)
class Bound(Generic[C]):
    """What a graph's builder fixed; left as None, each run's context decides."""

    graph: str
    context_schema: type[C]
    index: IndexLike = None
    model: BaseChatModel | str | None = None


@dataclass(frozen=True)
class Run(Generic[C]):
    """One run's resources, resolved from the builder's choices and the run's context.

    ``model`` is the chat model (or the offline policy); each graph family asks it through its own
    small protocol (``corag_model(run.model)``, ...), which writes the prompts or applies the rules.
    """

    graph: str
    ctx: C
    index: HierarchicalIndex
    model: BaseChatModel


def run_index(runtime: Any, bound: Bound[Any]) -> HierarchicalIndex:
    """The run's index: the builder's, else the one the run's context names."""
    if isinstance(bound.index, HierarchicalIndex):
        return bound.index
    if bound.index:
        return load_run_index(bound.index)
    ctx = bound.context_schema.of_run(getattr(runtime, "context", None))
    return load_run_index(ctx.choice().index_path, served=not ctx.is_trusted)


def run_of(runtime: Any, bound: Bound[C]) -> Run[C]:
    """Resolve a run: its context (ours, or the defaults when it carries another graph's), index, model.

    A model instance fixed by the builder gets the model settings the run's context sets
    (:func:`explicit_model_settings`: ``reasoning_effort``, ``temperature``, ``max_tokens``) where
    it has those fields (:func:`~arag_graph.llm.models.with_settings`); a model named by a string is
    created with them.
    """
    ctx = bound.context_schema.of_run(getattr(runtime, "context", None))
    choice = ctx.choice()
    index = run_index(runtime, bound)
    caller_chose = bound.model is None and not ctx.is_trusted  # a builder's model is the operator's
    with serving(ServingPolicy.from_env() if caller_chose else None):  # the endpoint rule on the model
        model = resolve_chat_model(
            bound.model if bound.model is not None else choice.model,
            base_url=choice.base_url,
            **model_settings(ctx),
            timeout=ctx.timeout or None,
            max_retries=ctx.max_retries if ctx.max_retries >= 0 else None,
            index=index,
        )
    if isinstance(bound.model, BaseChatModel):
        model = with_settings(model, **explicit_model_settings(ctx))
    return Run(bound.graph, ctx, index, model)


_MODEL_SETTINGS = ("temperature", "reasoning_effort", "max_tokens")


def model_settings(ctx: GraphContext) -> dict[str, Any]:
    """The sampling settings a model is created with for a run of ``ctx`` (its defaults included).

    One rule for every place that makes a model from a spec (a graph resolving its own model,
    ``arag ask``, ``arag eval``), so that one question asked on the command line is sent with the same
    output-token limit (16,384 by default, the A-RAG paper's ">= 16384") as the same question in an
    evaluation.
    """
    return {
        "temperature": ctx.temperature,
        "max_tokens": ctx.max_tokens,
        "reasoning_effort": ctx.reasoning_effort or None,
    }


def explicit_model_settings(ctx: GraphContext) -> dict[str, Any]:
    """The model settings a run's context sets itself, for a model instance the builder was given.

    Only those the context names: a model built with its own temperature keeps it unless the run
    asks for another, rather than being reset to the context's default of 0.
    """
    return {name: getattr(ctx, name) for name in _MODEL_SETTINGS if name in ctx.model_fields_set}


def index_label(bound: Bound, ctx: GraphContext) -> str:
    """The index a run will use, as trace metadata names it, without loading it.

    The top-level run is created before any node runs, and loading an index there would be
    blocking I/O on the caller's event loop.
    """
    if isinstance(bound.index, HierarchicalIndex):
        path: Any = bound.index.path
    else:
        path = bound.index or ctx.choice().index_path
    if not ctx.is_trusted:  # a caller reads its run's metadata (thread state, checkpoints): no operator paths
        return ServingPolicy.from_env().shown(path)
    if path:
        return str(Path(path))
    from arag_graph.index.sample import default_sample_index_path  # imports the build path: only here

    return str(default_sample_index_path())


def run_metadata(bound: Bound, context: Any) -> dict[str, Any]:
    """Trace metadata of a run: the graph, its model and index, and every setting of its context."""
    ctx = bound.context_schema.of_run(context)
    return {
        "graph": bound.graph,
        **ctx.settings(),
        "model": model_label(bound.model, ctx),
        "index": index_label(bound, ctx),
    }


# ---------------------------------------------------------------------------------------------
# The top-level run


class TracedGraph(CompiledStateGraph[Any, _Context, InputState, _Output]):
    """A compiled graph whose top-level run carries the run's trace metadata (model, settings, index).

    LangGraph creates the top-level run from the ``config`` of ``stream``/``astream`` before any
    node runs, and a node cannot change its parent run's metadata. The model, settings and (for a
    graph built without an index) the index come from the run's context, which LangGraph does not
    trace, so they are unknown when the graph is compiled and ``with_config`` cannot carry them.
    This class therefore adds them to the config at the call: ``invoke``, ``ainvoke``,
    ``stream_events``/``astream_events`` and the LangGraph server all go through ``stream`` or
    ``astream``. Every run below (nodes, models, tools) inherits the same metadata.

    The values are this graph's own and win over metadata of the same keys from the caller. A
    context the graph would refuse adds nothing here: the run then fails as it would untraced.
    The same door attaches the run's operator budget (:func:`arag_graph.run.budgets.with_budget`).
    """

    def __init__(self, *, run_metadata: Callable[[Any], dict[str, Any]] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_metadata = run_metadata  # an attribute, so copy() and with_config() keep it

    def _traced(self, config: RunnableConfig | None, context: Any, run_input: Any = None) -> RunnableConfig | None:
        # Every run gets the operator's budget here, the one door of every top-level run
        # (arag_graph.run.budgets); a graph embedded in another shares its parent's. The caller's
        # input is checked whole here too; a served caller sends system messages only if the operator allows.
        system_allowed = not _served(context) or ServingPolicy.from_env().allow_system_messages
        config = cast(RunnableConfig, with_budget(config, run_input, system_allowed=system_allowed))
        if self.run_metadata is None:
            return config
        try:
            metadata = self.run_metadata(context)
        except (AragError, TypeError, ValueError):
            return config
        return {**(config or {}), "metadata": {**((config or {}).get("metadata") or {}), **metadata}}

    # LangGraph's own iterators; a served run's are wrapped (its errors as the caller sees them),
    # and the wrappers close LangGraph's iterator whenever they are closed or cancelled.
    def stream(  # type: ignore[override]
        self,
        input: InputState | Command | None,
        config: RunnableConfig | None = None,
        *,
        context: _Context | None = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        stream = super().stream(input, self._traced(config, context, input), context=context, **kwargs)
        return _served_errors(stream) if _served(context) else stream

    def astream(  # type: ignore[override]
        self,
        input: InputState | Command | None,
        config: RunnableConfig | None = None,
        *,
        context: _Context | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        stream = super().astream(input, self._traced(config, context, input), context=context, **kwargs)
        return _served_errors_async(stream) if _served(context) else stream

    # langsmith.evaluate(graph, ..., upload_results=False) calls invoke under LangSmith's local
    # tracing mode, in which langchain-core would still post every node's run to the client's URL
    # (arag_graph.core.tracing): the guard keeps the plain call offline. stream() cannot take it (its
    # callbacks are set up when iteration starts, outside this call).
    #
    # Typed: the plain call (``stream_mode="values"``, no ``output_keys``, ``version="v1"``) returns the
    # graph's output fields, so ``out["answr"]`` or ``x: int = out["answer"]`` is a type error (LangGraph
    # types it ``dict[str, Any] | Any``). A run stopped at an interrupt also holds ``__interrupt__``,
    # which the output type leaves out: ``version="v2"`` gives the interrupts their own field.
    @overload  # type: ignore[override]
    def invoke(
        self,
        input: InputState | Command | None,
        config: RunnableConfig | None = None,
        *,
        context: _Context | None = None,
        stream_mode: Literal["values"] = "values",
        output_keys: None = None,
        version: Literal["v1"] = "v1",
        **kwargs: Any,
    ) -> _Output: ...
    @overload
    def invoke(
        self,
        input: InputState | Command | None,
        config: RunnableConfig | None = None,
        *,
        context: _Context | None = None,
        stream_mode: Literal["values"] = "values",
        output_keys: None = None,
        version: Literal["v2"],
        **kwargs: Any,
    ) -> GraphOutput[_Output]: ...
    @overload
    def invoke(
        self,
        input: InputState | Command | None,
        config: RunnableConfig | None = None,
        *,
        context: _Context | None = None,
        stream_mode: StreamMode = "values",
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> dict[str, Any] | list[StreamPart[Any, _Output]] | Any: ...
    def invoke(self, input: Any, config: RunnableConfig | None = None, *, context: Any = None, **kwargs: Any) -> Any:
        with local_tracing_guard():
            return super().invoke(input, config, context=context, **kwargs)

    @overload  # type: ignore[override]
    async def ainvoke(
        self,
        input: InputState | Command | None,
        config: RunnableConfig | None = None,
        *,
        context: _Context | None = None,
        stream_mode: Literal["values"] = "values",
        output_keys: None = None,
        version: Literal["v1"] = "v1",
        **kwargs: Any,
    ) -> _Output: ...
    @overload
    async def ainvoke(
        self,
        input: InputState | Command | None,
        config: RunnableConfig | None = None,
        *,
        context: _Context | None = None,
        stream_mode: Literal["values"] = "values",
        output_keys: None = None,
        version: Literal["v2"],
        **kwargs: Any,
    ) -> GraphOutput[_Output]: ...
    @overload
    async def ainvoke(
        self,
        input: InputState | Command | None,
        config: RunnableConfig | None = None,
        *,
        context: _Context | None = None,
        stream_mode: StreamMode = "values",
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> dict[str, Any] | list[StreamPart[Any, _Output]] | Any: ...
    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, *, context: Any = None, **kwargs: Any
    ) -> Any:
        with local_tracing_guard():
            return await super().ainvoke(input, config, context=context, **kwargs)


RagGraph = TracedGraph
"""What the builders return, typed for mypy and pyright, for example
``RagGraph[AragContext | AragContextDict, AragOutputState]``: ``invoke`` takes ``messages`` or
``question`` and returns the graph's output fields (typed: a misspelt key is a type error), and its
``context=`` is the graph's context schema or a mapping of its fields (which LangGraph turns into the
schema), typed by the schema's ``TypedDict`` (:class:`~arag_graph.arag.context.AragContextDict`,
...), so a misspelt setting or a value of the wrong type is a type error. It is a LangGraph
``CompiledStateGraph`` (:class:`TracedGraph`) and works wherever one does."""


def _served(context: Any) -> bool:
    """Whether a run's context is a caller's (a served run), not one the operator made."""
    return not (isinstance(context, GraphContext) and context.is_trusted)


def _served_errors(stream: Iterator[Any]) -> Iterator[Any]:
    """``stream``, an :class:`AragError` raised in any node reaching the caller as its one line
    (:func:`arag_graph.run.policy.served_error`) rather than LangGraph's "An internal error occurred"."""
    try:
        yield from stream
    except AragError as exc:
        raise served_error(exc) from None
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


async def _served_errors_async(stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """:func:`_served_errors` for ``astream`` (what the LangGraph server calls)."""
    try:
        async for item in stream:
            yield item
    except AragError as exc:
        raise served_error(exc) from None
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


def traced_graph(graph: CompiledStateGraph[Any, Any, Any, Any], bound: Bound) -> TracedGraph[Any, Any]:
    """``graph`` (just compiled) named and tagged after its graph, every run carrying its metadata.

    Rebuilt the way ``Pregel.copy`` rebuilds a graph (from its attributes); a test pins that this
    keeps every attribute, should LangGraph change its constructor.
    """
    attrs = {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}
    traced: TracedGraph[Any, Any] = TracedGraph(**attrs, run_metadata=lambda context: run_metadata(bound, context))
    return traced.with_config(run_name=bound.graph, tags=[bound.graph], metadata={"graph": bound.graph})
